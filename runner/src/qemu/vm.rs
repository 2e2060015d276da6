//! A running VM: owns its QEMU process (in its own process group, inside the suite's
//! network namespace), its QMP and guest-agent connections, and knows its console log.
//!
//! Every wait is bounded and checks whether QEMU has already exited, so a guest that
//! panics fails in about a second, not at the timeout. Shutdown escalates: QMP `quit`
//! → SIGTERM to the process group → SIGKILL. Dropping a `Vm` kills the group.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use super::args::{qemu_args, QemuConfig};
use super::qga::{ExecResult, Qga};
use super::qmp::Qmp;
use crate::net::Namespace;

/// How often waits poll the guest agent and QEMU's state.
const POLL: Duration = Duration::from_millis(100);
/// Console lines shown with a failure.
pub const CONSOLE_TAIL_LINES: usize = 25;

/// Failures of one VM.
#[derive(Debug, thiserror::Error)]
pub enum VmError {
    /// QEMU couldn't be started.
    #[error("VM {vm}: cannot start QEMU: {source}")]
    Spawn {
        /// VM name.
        vm: String,
        /// Cause.
        source: std::io::Error,
    },
    /// QEMU exited while we were waiting on it (guest panic, QEMU error, killed).
    #[error("VM {vm}: QEMU exited ({status}) {during}; QEMU said: {qemu_stderr}\nlast console lines:\n{console}")]
    Exited {
        /// VM name.
        vm: String,
        /// Exit status text.
        status: String,
        /// What we were waiting for.
        during: String,
        /// QEMU's own stderr (last lines).
        qemu_stderr: String,
        /// Console tail.
        console: String,
    },
    /// The guest agent didn't answer within `boot_timeout`.
    #[error("VM {vm}: guest agent did not answer within boot_timeout ({}s)\nlast console lines:\n{console}", timeout.as_secs())]
    BootTimeout {
        /// VM name.
        vm: String,
        /// The limit.
        timeout: Duration,
        /// Console tail.
        console: String,
    },
    /// A step exceeded its timeout.
    #[error("VM {vm}: step {step} did not finish within its timeout ({}s)", timeout.as_secs())]
    StepTimeout {
        /// VM name.
        vm: String,
        /// Step name.
        step: String,
        /// The limit.
        timeout: Duration,
    },
    /// The guest agent connection failed.
    #[error("VM {vm}: guest agent: {source}")]
    Agent {
        /// VM name.
        vm: String,
        /// Cause.
        source: std::io::Error,
    },
}

/// One QEMU guest.
#[derive(Debug)]
pub struct Vm {
    /// VM name.
    pub name: String,
    child: tokio::process::Child,
    pgid: i32,
    qmp: Option<Qmp>,
    qga: Option<Qga>,
    config: QemuConfig,
    stderr_log: PathBuf,
    exit: Option<std::process::ExitStatus>,
}

/// How a VM ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Ending {
    /// It had already exited (crash, panic, killed from outside).
    AlreadyExited,
    /// QMP `quit`.
    Quit,
    /// SIGTERM.
    Terminated,
    /// SIGKILL.
    Killed,
}

impl Vm {
    /// Starts QEMU for `config` inside `ns`; QEMU's stderr goes to `stderr_log`.
    pub fn spawn(config: &QemuConfig, ns: &Namespace, stderr_log: &Path) -> Result<Vm, VmError> {
        let err = |source| VmError::Spawn { vm: config.name.clone(), source };
        let stderr = std::fs::File::create(stderr_log).map_err(err)?;
        let mut cmd = std::process::Command::new(super::qemu_binary());
        cmd.args(qemu_args(config)).stdin(Stdio::null()).stdout(Stdio::null()).stderr(stderr);
        std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
        ns.enter(&mut cmd);
        let mut cmd = tokio::process::Command::from(cmd);
        cmd.kill_on_drop(true);
        let child = cmd.spawn().map_err(err)?;
        let pgid = child.id().map(|p| p as i32).unwrap_or(0);
        Ok(Vm {
            name: config.name.clone(),
            child,
            pgid,
            qmp: None,
            qga: None,
            config: config.clone(),
            stderr_log: stderr_log.to_path_buf(),
            exit: None,
        })
    }

    /// QEMU's PID.
    pub fn pid(&self) -> i32 {
        self.pgid
    }

    /// Errors with [`VmError::Exited`] if QEMU has exited.
    fn check_alive(&mut self, during: &str) -> Result<(), VmError> {
        if self.exit.is_none() {
            if let Ok(Some(st)) = self.child.try_wait() {
                self.exit = Some(st);
            }
        }
        match self.exit {
            None => Ok(()),
            Some(st) => Err(VmError::Exited {
                vm: self.name.clone(),
                status: st.to_string(),
                during: during.to_string(),
                qemu_stderr: tail(&std::fs::read_to_string(&self.stderr_log).unwrap_or_default(), 5),
                console: self.console_tail(CONSOLE_TAIL_LINES),
            }),
        }
    }

    /// The last `n` lines of the serial console.
    pub fn console_tail(&self, n: usize) -> String {
        let bytes = std::fs::read(&self.config.console_log).unwrap_or_default();
        tail(&String::from_utf8_lossy(&bytes), n)
    }

    /// Waits until the guest agent answers; returns how long it took from now.
    pub async fn wait_ready(&mut self, timeout: Duration) -> Result<Duration, VmError> {
        let start = Instant::now();
        let deadline = start + timeout;
        let mut attempt: i32 = 0;
        loop {
            self.check_alive("while booting")?;
            if self.qmp.is_none() && self.config.qmp_socket.exists() {
                self.qmp = Qmp::connect(&self.config.qmp_socket).await.ok();
            }
            if self.config.qga_socket.exists() {
                attempt += 1;
                let id = (std::process::id() as i32).wrapping_mul(1000).wrapping_add(attempt) & 0x7fff_ffff;
                let wait = Duration::from_secs(2).min(deadline.saturating_duration_since(Instant::now()));
                if let Ok(Some(qga)) = Qga::try_connect(&self.config.qga_socket, wait, id).await {
                    self.qga = Some(qga);
                    return Ok(start.elapsed());
                }
            }
            if Instant::now() >= deadline {
                self.check_alive("while booting")?;
                return Err(VmError::BootTimeout {
                    vm: self.name.clone(),
                    timeout,
                    console: self.console_tail(CONSOLE_TAIL_LINES),
                });
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// Runs `script` with `/bin/sh -c` in the guest (stdin from `stdin`), waiting up to
    /// `timeout`. `step` names it in errors.
    pub async fn exec(
        &mut self,
        step: &str,
        script: &str,
        stdin: Option<Vec<u8>>,
        timeout: Duration,
    ) -> Result<ExecResult, VmError> {
        let during = format!("during step {step}");
        self.check_alive(&during)?;
        let name = self.name.clone();
        let agent_err = |source| VmError::Agent { vm: name.clone(), source };
        let qga = self.qga.as_ref().ok_or_else(|| agent_err(std::io::Error::other("not connected")))?;
        let deadline = Instant::now() + timeout;
        let argv = ["-c".to_string(), script.to_string()];
        let spawn = tokio::time::timeout(timeout, qga.spawn("/bin/sh", &argv, stdin));
        let pid = match spawn.await {
            Ok(r) => r.map_err(agent_err)?,
            Err(_) => return Err(VmError::StepTimeout { vm: self.name.clone(), step: step.into(), timeout }),
        };
        loop {
            self.check_alive(&during)?;
            let qga = self.qga.as_ref().expect("connected above");
            let left = deadline.saturating_duration_since(Instant::now());
            match tokio::time::timeout(left.max(Duration::from_millis(1)), qga.status(pid)).await {
                Ok(Ok(Some(r))) => return Ok(r),
                Ok(Ok(None)) => {}
                Ok(Err(e)) => {
                    self.check_alive(&during)?;
                    return Err(VmError::Agent { vm: self.name.clone(), source: e });
                }
                Err(_) => {}
            }
            if Instant::now() >= deadline {
                return Err(VmError::StepTimeout { vm: self.name.clone(), step: step.into(), timeout });
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// Stops the VM: QMP `quit`, then SIGTERM, then SIGKILL to its process group, each
    /// with a short grace period. Always reaps QEMU.
    pub async fn shutdown(&mut self) -> Ending {
        self.qga = None;
        if self.exit.is_some() || matches!(self.child.try_wait(), Ok(Some(_))) {
            self.qmp = None;
            let _ = self.child.wait().await;
            return Ending::AlreadyExited;
        }
        if let Some(qmp) = self.qmp.take() {
            let _ = tokio::time::timeout(Duration::from_secs(3), qmp.quit()).await;
            if let Ok(Ok(st)) = tokio::time::timeout(Duration::from_secs(5), self.child.wait()).await {
                self.exit = Some(st);
                return Ending::Quit;
            }
        }
        self.signal(libc::SIGTERM);
        if let Ok(Ok(st)) = tokio::time::timeout(Duration::from_secs(3), self.child.wait()).await {
            self.exit = Some(st);
            return Ending::Terminated;
        }
        self.signal(libc::SIGKILL);
        if let Ok(st) = self.child.wait().await {
            self.exit = Some(st);
        }
        Ending::Killed
    }

    fn signal(&self, sig: i32) {
        if self.pgid > 0 {
            // SAFETY: sending a signal to our own child's process group.
            unsafe {
                libc::kill(-self.pgid, sig);
            }
        }
    }
}

impl Drop for Vm {
    fn drop(&mut self) {
        if self.exit.is_none() {
            self.signal(libc::SIGKILL);
            let _ = self.child.start_kill();
        }
    }
}

/// The last `n` lines of `text`.
pub fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}
