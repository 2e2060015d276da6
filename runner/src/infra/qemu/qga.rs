//! Guest agent (QGA) client over the VM's virtio-serial unix socket, via the `qapi`
//! crate: `guest-sync` to find a live agent, `guest-exec` + `guest-exec-status` to run
//! commands with captured stdout, stderr and exit status.

use std::path::Path;
use std::time::Duration;

use qapi::futures::{QapiService, QgaStreamTokio};

use super::inflight::InFlight;
use qapi::qga;
use tokio::io::WriteHalf;
use tokio::net::UnixStream;

type Service = QapiService<QgaStreamTokio<WriteHalf<UnixStream>>>;

/// `PATH` of every command run through the guest agent: Debian's default for root
/// (`/etc/profile`), so programs a suite copies to `/usr/local/bin` with `files:` are found.
pub const GUEST_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// A guest agent connection that has answered `guest-sync`.
///
/// Every command goes through [`InFlight`]: once one was given up before its answer
/// (a timeout around it), the others fail with `BrokenPipe` and [`Qga::out_of_step`]
/// is true; connect (and `guest-sync`) again.
pub struct Qga {
    service: Service,
    events: tokio::task::JoinHandle<()>,
    inflight: InFlight,
}

impl std::fmt::Debug for Qga {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Qga")
    }
}

/// What a command printed and how it ended.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct ExecResult {
    /// Exit status, if it exited normally.
    pub exit_code: Option<i64>,
    /// Terminating signal, if killed.
    pub signal: Option<i64>,
    /// Standard output bytes.
    #[serde(skip)]
    pub stdout: Vec<u8>,
    /// Standard error bytes.
    #[serde(skip)]
    pub stderr: Vec<u8>,
    /// The agent truncated the output (it keeps at most 16 MiB per stream).
    pub truncated: bool,
}

impl Qga {
    /// Connects to `socket` and waits up to `wait` for the agent to answer a
    /// `guest-sync` with a fresh id. `Ok(None)` means no answer yet (try again).
    pub async fn try_connect(socket: &Path, wait: Duration, sync_id: i32) -> std::io::Result<Option<Qga>> {
        let stream = QgaStreamTokio::open_uds(socket).await?;
        let (service, events) = stream.spawn_tokio();
        match tokio::time::timeout(wait, service.guest_sync(sync_id)).await {
            Ok(Ok(())) => Ok(Some(Qga { service, events, inflight: InFlight::default() })),
            Ok(Err(_)) | Err(_) => {
                events.abort();
                Ok(None)
            }
        }
    }

    /// `command`, through [`InFlight`].
    async fn execute<C: qga::QgaCommand>(&self, command: C) -> std::io::Result<C::Ok> {
        self.inflight.run("guest agent", self.service.execute(command)).await
    }

    /// Whether a command was given up before its answer: this connection must be
    /// replaced (see [`InFlight`]).
    pub fn out_of_step(&self) -> bool {
        self.inflight.abandoned()
    }

    /// Starts `path args…` with `stdin` and captured output, in an environment of
    /// `PATH`, `LC_ALL=C` and `env` (`NAME=value` each); returns the guest PID.
    pub async fn spawn(
        &self,
        path: &str,
        args: &[String],
        stdin: Option<Vec<u8>>,
        env: &[String],
    ) -> std::io::Result<i64> {
        let mut environment = vec![format!("PATH={GUEST_PATH}"), "LC_ALL=C".to_string()];
        environment.extend(env.iter().cloned());
        let r = self
            .execute(qga::guest_exec {
                path: path.to_string(),
                arg: Some(args.to_vec()),
                env: Some(environment),
                input_data: stdin,
                capture_output: Some(qga::GuestExecCaptureOutput::flag(true)),
            })
            .await?;
        Ok(r.pid)
    }

    /// `guest-get-time`: the guest's wall clock, nanoseconds since the Unix epoch.
    pub async fn time_ns(&self) -> std::io::Result<i64> {
        self.execute(qga::guest_get_time {}).await
    }

    /// Polls `guest-exec-status` once; `None` while the process runs.
    pub async fn status(&self, pid: i64) -> std::io::Result<Option<ExecResult>> {
        let s = self.execute(qga::guest_exec_status { pid }).await?;
        if !s.exited {
            return Ok(None);
        }
        Ok(Some(ExecResult {
            exit_code: s.exitcode,
            signal: s.signal,
            stdout: s.out_data.unwrap_or_default(),
            stderr: s.err_data.unwrap_or_default(),
            truncated: s.out_truncated.unwrap_or(false) || s.err_truncated.unwrap_or(false),
        }))
    }
}

impl Drop for Qga {
    fn drop(&mut self) {
        self.events.abort();
    }
}
