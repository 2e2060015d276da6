//! `vmrepro shell`, `vmrepro stop` and `vmrepro doctor`: the terminal side (raw mode,
//! window size) and the messages, over [`crate::run::attach`] and
//! [`crate::infra::host`].

use std::io::IsTerminal;
use std::os::fd::AsFd;
use std::path::Path;
use std::time::Duration;

use nix::sys::termios::{cfmakeraw, tcgetattr, tcsetattr, SetArg, Termios};

use crate::exit;
use crate::run::attach::{self, AttachError, SessionEnd, StopOutcome};

/// Longest `vmrepro stop` waits for the run's teardown (QMP quit, SIGTERM and SIGKILL
/// graces of every VM in parallel, then the namespace and temp folder: ~10 s at most).
const STOP_LIMIT: Duration = Duration::from_secs(60);

/// Puts the terminal on stdin in raw mode until dropped (then restores it).
struct RawMode(Termios);

impl RawMode {
    fn enter() -> Option<RawMode> {
        let stdin = std::io::stdin();
        let saved = tcgetattr(stdin.as_fd()).ok()?;
        let mut raw = saved.clone();
        cfmakeraw(&mut raw);
        tcsetattr(stdin.as_fd(), SetArg::TCSANOW, &raw).ok()?;
        Some(RawMode(saved))
    }
}

impl Drop for RawMode {
    fn drop(&mut self) {
        let _ = tcsetattr(std::io::stdin().as_fd(), SetArg::TCSANOW, &self.0);
    }
}

/// The terminal's size (rows, columns), 24×80 when unknown.
fn window_size() -> (u16, u16) {
    let mut ws = libc::winsize { ws_row: 0, ws_col: 0, ws_xpixel: 0, ws_ypixel: 0 };
    // SAFETY: TIOCGWINSZ writes one `winsize` into the struct we pass.
    let ok = unsafe { libc::ioctl(libc::STDOUT_FILENO, libc::TIOCGWINSZ, &mut ws) } == 0;
    if ok && ws.ws_row > 0 && ws.ws_col > 0 {
        (ws.ws_row, ws.ws_col)
    } else {
        (24, 80)
    }
}

fn attach_error(e: &AttachError) -> i32 {
    errln!("error: {e}");
    match e {
        AttachError::Io(_) | AttachError::UnexpectedAnswer { .. } => exit::INFRASTRUCTURE,
        _ => exit::CONFIG_ERROR,
    }
}

/// `vmrepro shell RUN VM`.
pub(super) async fn shell(run_dir: &Path, vm: &str) -> i32 {
    let (sock, lock_path) = match attach::shell_socket(run_dir, vm) {
        Ok(p) => p,
        Err(e) => return attach_error(&e),
    };
    let lock = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&lock_path)
        .map_err(|e| (e.kind(), e.to_string()))
        .and_then(|f| {
            nix::fcntl::Flock::lock(f, nix::fcntl::FlockArg::LockExclusiveNonblock)
                .map_err(|(_, e)| (std::io::ErrorKind::WouldBlock, e.to_string()))
        });
    let _lock = match lock {
        Ok(l) => l,
        Err((std::io::ErrorKind::WouldBlock, _)) => {
            return attach_error(&AttachError::Busy { dir: run_dir.to_path_buf(), vm: vm.to_string() })
        }
        Err((_, e)) => {
            errln!("error: locking {}: {e}", lock_path.display());
            return exit::INFRASTRUCTURE;
        }
    };
    let mut conn = match tokio::net::UnixStream::connect(&sock).await {
        Ok(c) => c,
        Err(e) => {
            return attach_error(&AttachError::Io(crate::path_io::PathIo {
                what: "connecting to the VM's shell at",
                path: sock,
                source: e,
            }))
        }
    };
    let interactive = std::io::stdin().is_terminal();
    errln!(
        "vmrepro: connected to VM {vm} of run {}{}",
        run_dir.display(),
        if interactive { " — Ctrl-] detaches, `exit` ends the shell" } else { "" }
    );
    let (rows, cols) = window_size();
    let term = std::env::var("TERM").unwrap_or_default();
    if let Err(e) = tokio::io::AsyncWriteExt::write_all(&mut conn, &attach::hello_line(rows, cols, &term)).await {
        return attach_error(&AttachError::Io(crate::path_io::PathIo {
            what: "writing to the VM's shell at",
            path: sock,
            source: e,
        }));
    }
    let raw = if interactive { RawMode::enter() } else { None };
    let end = attach::relay(tokio::io::stdin(), tokio::io::stdout(), conn, interactive).await;
    drop(raw);
    match end {
        Ok(SessionEnd::Detached) => {
            errln!("\r\nvmrepro: detached from {vm} (its shell keeps running; `vmrepro shell` attaches again)");
            exit::SUCCESS
        }
        Ok(SessionEnd::ShellEnded) => {
            errln!("\r\nvmrepro: the shell on {vm} ended");
            exit::SUCCESS
        }
        Ok(SessionEnd::InputEnded) => exit::SUCCESS,
        Ok(SessionEnd::Closed) => {
            errln!("\r\nvmrepro: VM {vm} closed its console (the run was stopped, or the guest powered off)");
            exit::SUCCESS
        }
        Err(e) => attach_error(&AttachError::Io(crate::path_io::PathIo {
            what: "relaying to the VM's shell at",
            path: sock,
            source: e,
        })),
    }
}

/// `vmrepro stop RUN`.
pub(super) async fn stop(run_dir: &Path) -> i32 {
    match attach::stop(run_dir, STOP_LIMIT).await {
        Ok(StopOutcome::Stopped(status)) => {
            outln!("stopped run {}: {status} (VMs shut down, nothing left running)", run_dir.display());
            exit::SUCCESS
        }
        Ok(StopOutcome::NotRunning(why)) => {
            outln!("nothing to stop: {why}");
            exit::SUCCESS
        }
        Err(e) => attach_error(&e),
    }
}

/// `vmrepro doctor`.
pub(super) fn doctor() -> i32 {
    let who = if crate::infra::host::is_root() { "root".to_string() } else { crate::infra::host::user_name() };
    outln!("vmrepro doctor: what this host allows {who}");
    let mut missing = 0;
    for c in crate::infra::host::doctor() {
        match &c.result {
            Ok(detail) => outln!("  ok       {:<20} {detail}", c.what),
            Err(m) => {
                if !c.optional {
                    missing += 1;
                }
                outln!("  {:<8} {:<20} {}", if c.optional { "optional" } else { "MISSING" }, c.what, m.problem);
                outln!("  {:<8} {:<20} fix: {}", "", "", m.fix);
            }
        }
    }
    if missing == 0 {
        outln!("everything a run needs is there");
        exit::SUCCESS
    } else {
        outln!("{missing} prerequisite(s) missing: runs will fail until they are fixed (docs/src/operations/rootless.md: \"Running as an ordinary user\")");
        exit::INFRASTRUCTURE
    }
}
