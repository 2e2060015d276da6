//! Keeping a run's VMs after its steps (`vmrepro run --keep`), and the run's control
//! socket that `vmrepro stop` talks to.
//!
//! A kept run is the same `vmrepro run` process, still holding everything it held (the
//! VMs, the network namespace, the temp folder, its cache entries): nothing is handed
//! to another process, so the guarantees of a run hold unchanged. Killing it kills its
//! QEMUs (`PR_SET_PDEATHSIG`), and ending it tears down in the usual order. The keep
//! phase ends on `vmrepro stop RUN`, Ctrl-C/SIGTERM/SIGHUP, or when every kept VM has
//! exited (e.g. `poweroff` in a guest shell). The run's status is its steps' outcome.
//!
//! The control socket is `<temp_dir>/control.sock` (the temp folder is 0700: only the
//! user who started the run, or root, can reach it). A client writes `stop\n`; the run
//! then stops (its steps are interrupted if they still run), tears down, writes
//! `run.json`, and answers `stopped <status>\n` before closing the connection.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::watch;

use crate::infra::qemu::vm::Vm;

/// Name of the control socket in the run's temp folder.
pub const CONTROL_SOCKET: &str = "control.sock";

/// Whether a run keeps its VMs once its steps are done.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Keep {
    /// Tear down at once (the default).
    #[default]
    Never,
    /// Keep them, whatever the outcome.
    Always,
    /// Keep them only when a step did not pass or the run failed.
    OnFailure,
}

impl Keep {
    /// Whether to keep VMs after a run that `failed` (a step didn't pass, or an
    /// infrastructure error).
    pub fn applies(self, failed: bool) -> bool {
        match self {
            Keep::Never => false,
            Keep::Always => true,
            Keep::OnFailure => failed,
        }
    }
}

/// The run's control socket: a listener task that turns a client's `stop` into a stop
/// request, and keeps the client's connection to answer it after the teardown.
#[derive(Debug)]
pub(super) struct Control {
    task: tokio::task::JoinHandle<()>,
    waiting: Arc<Mutex<Vec<UnixStream>>>,
    path: PathBuf,
}

impl Control {
    /// Listens on `<tmp_dir>/control.sock`; a `stop` request sets `stop` to `true`.
    ///
    /// Errors: the socket can't be bound.
    pub(super) fn bind(tmp_dir: &Path, stop: watch::Sender<bool>) -> std::io::Result<Control> {
        let path = tmp_dir.join(CONTROL_SOCKET);
        let listener = UnixListener::bind(&path)?;
        let waiting: Arc<Mutex<Vec<UnixStream>>> = Arc::default();
        let w = waiting.clone();
        let task = tokio::spawn(async move {
            loop {
                let Ok((conn, _)) = listener.accept().await else { continue };
                let (stop, w) = (stop.clone(), w.clone());
                tokio::spawn(async move {
                    let mut conn = tokio::io::BufReader::new(conn);
                    let mut line = String::new();
                    let read = tokio::time::timeout(std::time::Duration::from_secs(5), conn.read_line(&mut line));
                    if !matches!(read.await, Ok(Ok(_))) {
                        return;
                    }
                    let mut conn = conn.into_inner();
                    if line.trim() == "stop" {
                        w.lock().expect("not poisoned").push(conn);
                        stop.send_replace(true);
                    } else {
                        let _ = conn.write_all(b"error: unknown request (this run understands `stop`)\n").await;
                    }
                });
            }
        });
        Ok(Control { task, waiting, path })
    }

    /// Answers every client that asked to stop with `stopped <status>` and closes the
    /// socket.
    pub(super) async fn finish(self, status: &str) {
        self.task.abort();
        let conns = std::mem::take(&mut *self.waiting.lock().expect("not poisoned"));
        for mut c in conns {
            let _ = c.write_all(format!("stopped {status}\n").as_bytes()).await;
            let _ = c.shutdown().await;
        }
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Resolves once `stop` has been set.
pub(super) async fn stop_requested(mut stop: watch::Receiver<bool>) {
    if stop.wait_for(|s| *s).await.is_err() {
        std::future::pending::<()>().await;
    }
}

/// Resolves once every VM in `vms` has exited (at once if there are none).
pub(super) async fn all_exited(vms: &mut [Vm]) {
    futures::future::join_all(vms.iter_mut().map(|v| v.wait_exit())).await;
}

/// Names of the VMs whose QEMU still runs.
pub(super) fn alive(vms: &mut [Vm]) -> Vec<String> {
    vms.iter_mut().filter_map(|v| (!v.has_exited()).then(|| v.name.clone())).collect()
}

/// `4 passed` / `3 passed, 1 failed (bravo/ping-alpha)`: the steps' outcomes so far.
pub fn steps_summary(rec: &super::RunRecord) -> String {
    let mut counts: std::collections::BTreeMap<String, usize> = std::collections::BTreeMap::new();
    let mut not_passed = Vec::new();
    for v in &rec.vms {
        for s in &v.steps {
            *counts.entry(s.status.to_string()).or_default() += 1;
            if !matches!(s.status, super::StepStatus::Passed | super::StepStatus::Skipped) {
                not_passed.push(format!("{}/{}", v.name, s.name));
            }
        }
    }
    let mut text = counts.iter().map(|(k, n)| format!("{n} {k}")).collect::<Vec<_>>().join(", ");
    if !not_passed.is_empty() {
        text.push_str(&format!(" ({})", not_passed.join(", ")));
    }
    text
}

/// The notice printed when VMs are kept: how to reach them and how to end the run.
pub fn kept_notice(run_dir: &Path, vms: &[String], steps: &str) -> String {
    let dir = shell_word(&run_dir.display().to_string());
    let mut s = format!("kept running (--keep): {}; steps: {steps}\n", vms.join(", "));
    for v in vms {
        s.push_str(&format!("  shell in {v}:  vmrepro shell {dir} {v}\n"));
    }
    s.push_str(&format!("  stop them:  vmrepro stop {dir}   (or Ctrl-C here)"));
    s
}

/// `w` quoted for a POSIX shell when it needs it.
fn shell_word(w: &str) -> String {
    if !w.is_empty() && w.chars().all(|c| c.is_ascii_alphanumeric() || "-_=,./:+@".contains(c)) {
        w.to_string()
    } else {
        format!("'{}'", w.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keep_on_failure_keeps_only_failed_runs() {
        assert!(!Keep::Never.applies(true));
        assert!(Keep::Always.applies(false) && Keep::Always.applies(true));
        assert!(Keep::OnFailure.applies(true) && !Keep::OnFailure.applies(false));
    }

    #[test]
    fn the_notice_says_how_to_reach_and_stop_the_vms() {
        let n = kept_notice(Path::new("results/smoke/20261130T170000Z"), &["alpha".into(), "bravo".into()], "4 passed");
        assert_eq!(
            n,
            "kept running (--keep): alpha, bravo; steps: 4 passed\n  shell in alpha:  vmrepro shell results/smoke/20261130T170000Z alpha\n  shell in bravo:  vmrepro shell results/smoke/20261130T170000Z bravo\n  stop them:  vmrepro stop results/smoke/20261130T170000Z   (or Ctrl-C here)"
        );
        assert!(kept_notice(Path::new("my results/x"), &["a".into()], "").contains("'my results/x'"));
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_stop_request_is_answered_after_the_teardown() {
        let dir = tempfile::tempdir().unwrap();
        let (tx, rx) = watch::channel(false);
        let control = Control::bind(dir.path(), tx).unwrap();
        let sock = dir.path().join(CONTROL_SOCKET);
        let client = tokio::spawn(async move {
            let mut c = UnixStream::connect(&sock).await.unwrap();
            c.write_all(b"stop\n").await.unwrap();
            let mut answer = String::new();
            tokio::io::BufReader::new(c).read_line(&mut answer).await.unwrap();
            answer
        });
        tokio::time::timeout(std::time::Duration::from_secs(5), stop_requested(rx)).await.expect("stop requested");
        control.finish("passed").await;
        assert_eq!(client.await.unwrap(), "stopped passed\n");
        assert!(!dir.path().join(CONTROL_SOCKET).exists());
    }
}
