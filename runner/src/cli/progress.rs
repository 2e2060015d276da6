//! What the user sees while a command runs: progress events as indicatif spinners on a
//! terminal or plain lines otherwise, and the signals (SIGINT, SIGTERM, SIGHUP) that
//! interrupt a run.

use std::sync::Arc;
use std::time::Duration;

use crate::events::{Event, EventSink};

/// Resolves on SIGINT (Ctrl-C), SIGTERM or SIGHUP (terminal closed). The handlers are
/// installed when this is first polled, and stay installed: a second signal while the
/// run tears down (which is bounded, see `Vm::shutdown`) doesn't kill the runner
/// half-way through its cleanup.
///
/// The handlers are installed by the call itself, not by the first poll, so a signal
/// between the call and the first `await` is not lost to the default action (must be
/// called inside the tokio runtime).
pub fn interrupted() -> impl std::future::Future<Output = ()> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut int = signal(SignalKind::interrupt()).expect("SIGINT handler");
    let mut term = signal(SignalKind::terminate()).expect("SIGTERM handler");
    let mut hup = signal(SignalKind::hangup()).expect("SIGHUP handler");
    async move {
        tokio::select! {
            _ = int.recv() => {}
            _ = term.recv() => {}
            _ = hup.recv() => {}
        }
    }
}

/// Progress on a terminal (indicatif spinners), plain lines otherwise.
pub fn progress_sink() -> EventSink {
    use std::io::IsTerminal;
    if !std::io::stderr().is_terminal() {
        return Arc::new(|e| {
            if let Some(line) = plain_line(&e) {
                errln!("{line}");
            }
        });
    }
    let multi = indicatif::MultiProgress::new();
    let bars: Arc<std::sync::Mutex<std::collections::HashMap<String, indicatif::ProgressBar>>> = Arc::default();
    Arc::new(move |e| {
        let key = match &e {
            Event::ImageStarted { what } | Event::ImageReady { what, .. } => what.clone(),
            Event::VmStarted { vm, .. }
            | Event::VmReady { vm, .. }
            | Event::StepStarted { vm, .. }
            | Event::StepFinished { vm, .. } => format!("vm {vm}"),
            Event::Notice(n) => {
                let _ = multi.println(n);
                return;
            }
            Event::TearingDown => {
                for b in bars.lock().expect("not poisoned").values() {
                    b.finish();
                }
                return;
            }
        };
        let mut bars = bars.lock().expect("not poisoned");
        let bar = bars.entry(key.clone()).or_insert_with(|| {
            let b = multi.add(indicatif::ProgressBar::new_spinner());
            b.set_style(
                indicatif::ProgressStyle::with_template("{spinner} {prefix:<28} {msg} [{elapsed}]").expect("template"),
            );
            b.set_prefix(key.clone());
            b.enable_steady_tick(Duration::from_millis(120));
            b
        });
        if let Some(line) = plain_line(&e) {
            bar.set_message(line.split_once(": ").map_or(line.clone(), |(_, m)| m.to_string()));
        }
        if matches!(e, Event::ImageReady { .. }) {
            bar.finish();
        }
    })
}

/// One event as a line of plain text (no terminal), or `None`.
fn plain_line(e: &Event) -> Option<String> {
    Some(match e {
        Event::ImageStarted { what } => format!("{what}: resolving"),
        Event::ImageReady { what, cached: true, .. } => format!("{what}: cached, nothing to build"),
        Event::ImageReady { what, cached: false, took } => format!("{what}: built in {:.1}s", took.as_secs_f64()),
        Event::Notice(n) => n.clone(),
        Event::VmStarted { vm, restoring: false } => format!("vm {vm}: booting"),
        Event::VmStarted { vm, restoring: true } => format!("vm {vm}: starting from its kind's saved state"),
        Event::VmReady { vm, took } => format!("vm {vm}: ready after {:.1}s", took.as_secs_f64()),
        Event::StepStarted { vm, step } => format!("vm {vm}: step {step} running"),
        Event::StepFinished { vm, step, status, took } => {
            format!("vm {vm}: step {step} {status} ({:.1}s)", took.as_secs_f64())
        }
        Event::TearingDown => "shutting down VMs".to_string(),
    })
}
