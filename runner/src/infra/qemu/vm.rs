//! A running VM: owns its QEMU process (in its own process group, inside the suite's
//! network namespace), its QMP and guest-agent connections, and knows its console log.
//!
//! Every wait is bounded and races QEMU's exit, so a guest that panics, or a QEMU killed
//! from outside, fails the wait at once, not at its timeout. Shutdown escalates: QMP
//! `quit` → SIGTERM to the process group → SIGKILL, each with a bounded grace period
//! ([`QUIT_GRACE`], [`TERM_GRACE`]). Dropping a `Vm` kills the group.

pub use super::error::AgentError;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use super::args::{qemu_args, GuestRam, QemuConfig, RAM_FD};
use super::qga::{ExecResult, Qga};
use super::qmp::Qmp;
use crate::infra::net::Namespace;

/// How often waits poll the guest agent and QEMU's state, at most (see [`poll_delay`]).
const POLL: Duration = Duration::from_millis(100);
/// The first poll's delay; each later one doubles it, up to [`POLL`].
const FIRST_POLL: Duration = Duration::from_millis(10);

/// The delay before poll number `n` (0, 1, …) of one wait: 10, 20, 40, 80 ms, then
/// 100 ms. A short command (most steps) is seen done within ~10–40 ms of its end
/// instead of up to 100 ms, while a long one is still polled only ten times a second.
pub fn poll_delay(n: u32) -> Duration {
    FIRST_POLL.saturating_mul(1u32.checked_shl(n).unwrap_or(u32::MAX)).min(POLL)
}

/// How often a running step is polled once it has run for a while (see
/// [`step_poll_delay`]).
const SLOW_POLL: Duration = Duration::from_millis(500);
/// Polls of a step at the [`poll_delay`] pace before [`SLOW_POLL`] (about 4.7 s).
const FAST_POLLS: u32 = 50;

/// The delay before poll number `n` of a running step: [`poll_delay`] for the first
/// 50 polls (about 4.7 s), then 500 ms. Each poll wakes the guest agent inside
/// the guest; under TCG a guest polled ten times a second used 9.0 % of a host core
/// against 3.8–4.4 % for an idle one (`/proc/PID/stat`, 15 s, BENCHMARKS.md), CPU
/// taken from the measured guest itself during a long read. A long step is then seen
/// done up to 0.5 s late; what it measured (GNU time in the guest) is not affected.
pub fn step_poll_delay(n: u32) -> Duration {
    if n < FAST_POLLS {
        poll_delay(n)
    } else {
        SLOW_POLL
    }
}
/// Console lines shown with a failure.
pub const CONSOLE_TAIL_LINES: usize = 25;
/// Longest wait for QMP's greeting and capability negotiation once its socket exists.
const QMP_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Longest wait for one guest-agent `guest-sync-delimited` answer (then retried).
const QGA_SYNC_WAIT: Duration = Duration::from_secs(2);
/// Longest a VM state save may take (a few hundred MB written to the cache's disk).
pub const SAVE_TIMEOUT: Duration = Duration::from_secs(120);
/// Longest [`Vm::resume`] may take (cancelling a migration, `cont`).
pub const RESUME_TIMEOUT: Duration = Duration::from_secs(10);
/// How long QEMU gets to exit after QMP `quit` (the command itself included).
pub const QUIT_GRACE: Duration = Duration::from_secs(5);
/// How long QEMU gets to exit after SIGTERM before SIGKILL.
pub const TERM_GRACE: Duration = Duration::from_secs(3);
/// How long a broken agent connection waits for QEMU's exit to be seen (the socket
/// closes while QEMU dies, a moment before its exit status is available).
const AGENT_LOSS_GRACE: Duration = Duration::from_secs(1);

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
    #[error("{0}")]
    Exited(Box<QemuExit>),
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
        source: AgentError,
    },
}

/// How QEMU ended while we waited on it ([`VmError::Exited`]).
#[derive(Debug, thiserror::Error)]
#[error("VM {vm}: QEMU exited ({status}) {during}{}; QEMU said: {}\nlast console lines:\n{console}",
    panic.as_ref().map(|p| format!(" (the guest kernel panicked: {p})")).unwrap_or_default(),
    if qemu_stderr.trim().is_empty() { "nothing" } else { qemu_stderr.as_str() })]
pub struct QemuExit {
    /// VM name.
    pub vm: String,
    /// Exit status text, e.g. `exit status: 0` or `signal: 9 (SIGKILL)`.
    pub status: String,
    /// What we were waiting for.
    pub during: String,
    /// QEMU's own stderr (last lines).
    pub qemu_stderr: String,
    /// Console tail.
    pub console: String,
    /// The console's `Kernel panic - …` line, wherever it is in the log (a panic's stack
    /// trace can push it out of the tail).
    pub panic: Option<String>,
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
    /// `NAME=value` added to the environment of every command run in the guest.
    env: Vec<String>,
    /// Whether a VM started from a saved state has been seen running (or resumed).
    resumed: bool,
    /// The memfd of a [`GuestRam::Shared`] guest's RAM (QEMU has it as
    /// [`super::args::RAM_FD`]), read by [`Vm::save_state`].
    ram: Option<std::os::fd::OwnedFd>,
    /// A `-incoming defer` VM whose saved state's load has not been started yet.
    load_pending: bool,
    /// `guest-sync-delimited` attempts so far (each sends a fresh id).
    agent_syncs: i32,
    /// When QEMU was spawned: [`StartPhases`] count from here.
    spawned: Instant,
    /// How far its start has come, and when.
    phases: StartPhases,
}

/// When a VM's start passed each point, in seconds since QEMU was spawned; `None` for
/// a point it did not pass (a booting VM loads no state; the point after a failure).
/// Recorded in `run.json` (`vms[].start_phases`) and summed up by `vmrepro bench`.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct StartPhases {
    /// QMP connected: QEMU's greeting read and capabilities negotiated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub qmp_s: Option<f64>,
    /// A mapped saved state's load started (`migrate-incoming` answered). A copied
    /// state loads from `-incoming` at QEMU's start and has no such point.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load_started_s: Option<f64>,
    /// The guest seen running (`query-status`), resumed with `cont` if it was paused.
    /// A booting VM runs from the start: `0`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub running_s: Option<f64>,
    /// The guest agent answered a `guest-sync-delimited`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_s: Option<f64>,
    /// Ready for the first step: the runner's work after the agent answered (a first
    /// save of the kind's state, the identity) done. Set by the runner.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready_s: Option<f64>,
}

/// The guest's and the host's wall clocks at one moment, nanoseconds since the epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClockSample {
    /// Host clock.
    pub host_ns: i64,
    /// Guest clock (`guest-get-time`).
    pub guest_ns: i64,
}

/// How a VM ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
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
    /// Starts QEMU for `config` inside `ns`; QEMU's stderr goes to `stderr_log`. A
    /// [`GuestRam::Shared`] guest gets a new memfd as file descriptor
    /// [`super::args::RAM_FD`].
    pub fn spawn(config: &QemuConfig, ns: &Namespace, stderr_log: &Path) -> Result<Vm, VmError> {
        let err = |source| VmError::Spawn { vm: config.name.clone(), source };
        let stderr = std::fs::File::create(stderr_log).map_err(err)?;
        let ram = match config.ram {
            GuestRam::Shared => Some(super::state::memfd().map_err(err)?),
            _ => None,
        };
        let mut cmd = std::process::Command::new(super::qemu_binary());
        cmd.args(qemu_args(config)).stdin(Stdio::null()).stdout(Stdio::null()).stderr(stderr);
        std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
        if let Some(cpu) = config.pinned_cpu {
            // SAFETY: bind_to is one system call (async-signal-safe).
            unsafe { std::os::unix::process::CommandExt::pre_exec(&mut cmd, move || super::pin::bind_to(cpu)) };
        }
        ns.enter(&mut cmd);
        if let Some(fd) = ram.as_ref().map(std::os::fd::AsRawFd::as_raw_fd) {
            // SAFETY: dup2 and fcntl only (async-signal-safe), on a descriptor this
            // process owns until QEMU has started.
            unsafe { std::os::unix::process::CommandExt::pre_exec(&mut cmd, move || inherit_as(fd, RAM_FD)) };
        }
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
            env: Vec::new(),
            resumed: config.incoming.is_none(),
            agent_syncs: 0,
            ram,
            load_pending: config.incoming.is_some() && matches!(config.ram, GuestRam::Mapped(_)),
            spawned: Instant::now(),
            phases: StartPhases { running_s: config.incoming.is_none().then_some(0.0), ..StartPhases::default() },
        })
    }

    /// How far its start has come ([`StartPhases`]).
    pub fn start_phases(&self) -> StartPhases {
        self.phases
    }

    /// Marks the VM ready for its first step now ([`StartPhases::ready_s`]).
    pub fn mark_ready(&mut self) {
        self.phases.ready_s = Some(self.since_spawn());
    }

    /// Seconds since QEMU was spawned.
    fn since_spawn(&self) -> f64 {
        self.spawned.elapsed().as_secs_f64()
    }

    /// QEMU's PID.
    pub fn pid(&self) -> i32 {
        self.pgid
    }

    /// Whether QEMU has exited (checked now, without waiting).
    pub fn has_exited(&mut self) -> bool {
        if self.exit.is_none() {
            if let Ok(Some(st)) = self.child.try_wait() {
                self.exit = Some(st);
            }
        }
        self.exit.is_some()
    }

    /// Waits until QEMU exits (for a kept VM: the guest powered off, or QEMU was
    /// killed). Unbounded on purpose: the caller races it against its own ends.
    pub async fn wait_exit(&mut self) {
        if self.exit.is_none() {
            if let Ok(st) = self.child.wait().await {
                self.exit = Some(st);
            }
        }
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
            Some(st) => Err(self.exited(st, during)),
        }
    }

    /// The [`VmError::Exited`] for exit status `st`.
    fn exited(&self, st: std::process::ExitStatus, during: &str) -> VmError {
        VmError::Exited(Box::new(QemuExit {
            vm: self.name.clone(),
            status: st.to_string(),
            during: during.to_string(),
            qemu_stderr: tail(&std::fs::read_to_string(&self.stderr_log).unwrap_or_default(), 5),
            console: self.console_tail(CONSOLE_TAIL_LINES),
            panic: self.console_panic(),
        }))
    }

    /// The last `Kernel panic - …` line of the serial console, trimmed of its timestamp.
    fn console_panic(&self) -> Option<String> {
        let text = String::from_utf8_lossy(&std::fs::read(&self.config.console_log).unwrap_or_default()).into_owned();
        text.lines().rev().find_map(|l| l.find("Kernel panic").map(|i| l[i..].trim().to_string()))
    }

    /// The error for a wait that [`or_exit`] cut short.
    fn exit_error(&mut self, st: std::io::Result<std::process::ExitStatus>, during: &str) -> VmError {
        match st {
            Ok(st) => {
                self.exit = Some(st);
                self.exited(st, during)
            }
            Err(e) => VmError::Agent { vm: self.name.clone(), source: e.into() },
        }
    }

    /// The error for a failed agent request: the agent's connection breaks a moment
    /// before QEMU's exit is seen, so wait up to [`AGENT_LOSS_GRACE`] for QEMU to exit
    /// and report that ([`VmError::Exited`]) rather than [`VmError::Agent`].
    async fn agent_error(&mut self, source: std::io::Error, during: &str) -> VmError {
        if self.exit.is_none() {
            if let Ok(Ok(st)) = tokio::time::timeout(AGENT_LOSS_GRACE, self.child.wait()).await {
                self.exit = Some(st);
            }
        }
        match self.exit {
            Some(st) => self.exited(st, during),
            None => VmError::Agent { vm: self.name.clone(), source: source.into() },
        }
    }

    /// The last `n` lines of the serial console.
    pub fn console_tail(&self, n: usize) -> String {
        let bytes = std::fs::read(&self.config.console_log).unwrap_or_default();
        tail(&String::from_utf8_lossy(&bytes), n)
    }

    /// Waits until the guest agent answers; returns how long it took from now.
    ///
    /// Errors: [`VmError::Exited`] as soon as QEMU exits (e.g. the guest kernel
    /// panicked), [`VmError::BootTimeout`] after `timeout`.
    pub async fn wait_ready(&mut self, timeout: Duration) -> Result<Duration, VmError> {
        const DURING: &str = "while booting";
        let start = Instant::now();
        let deadline = start + timeout;
        let mut polls = 0;
        loop {
            self.check_alive(DURING)?;
            let left = deadline.saturating_duration_since(Instant::now());
            if self.qmp.is_none() && self.config.qmp_socket.exists() {
                // Not connected yet: tried again on the next round.
                if let Err(st) = self.connect_qmp(QMP_CONNECT_TIMEOUT.min(left)).await {
                    return Err(self.exit_error(st, DURING));
                }
                if self.qmp.is_some() {
                    self.phases.qmp_s = Some(self.since_spawn());
                }
            }
            // A VM that loads a saved state answers once the state is loaded and its
            // CPUs run: QEMU resumes it by itself (the state was saved running), else
            // we do. QMP answers late while QEMU loads the state or the host is busy:
            // the query may take until the boot deadline.
            if !self.resumed {
                if let (true, Some(qmp), Some(state)) = (self.load_pending, &self.qmp, &self.config.incoming) {
                    let left = deadline.saturating_duration_since(Instant::now());
                    match or_exit(&mut self.child, tokio::time::timeout(left, qmp.load_state(state))).await {
                        Ok(Ok(Ok(()))) => {
                            self.load_pending = false;
                            self.phases.load_started_s = Some(self.since_spawn());
                        }
                        Ok(Ok(Err(e))) => {
                            // QEMU exiting breaks QMP first: report the exit if it comes.
                            return Err(match self.agent_error(e, DURING).await {
                                VmError::Agent { vm, source: AgentError::Io(e) } => {
                                    VmError::Agent { vm, source: AgentError::LoadRefused(e) }
                                }
                                other => other,
                            });
                        }
                        Ok(Err(_)) => {}
                        Err(st) => return Err(self.exit_error(st, DURING)),
                    }
                }
                if let (false, Some(qmp)) = (self.load_pending, &self.qmp) {
                    let query = async {
                        match qmp.run_state().await.as_deref() {
                            Ok("running") => true,
                            Ok("paused" | "postmigrate" | "prelaunch") => qmp.cont().await.is_ok(),
                            _ => false,
                        }
                    };
                    let left = deadline.saturating_duration_since(Instant::now());
                    match or_exit(&mut self.child, tokio::time::timeout(left, query)).await {
                        Ok(r) => {
                            self.resumed = r.unwrap_or(false);
                            if self.resumed {
                                self.phases.running_s = Some(self.since_spawn());
                            }
                        }
                        Err(st) => return Err(self.exit_error(st, DURING)),
                    }
                }
            }
            if self.resumed && self.config.qga_socket.exists() {
                let wait = QGA_SYNC_WAIT.min(deadline.saturating_duration_since(Instant::now()));
                if self.connect_agent(wait, DURING).await? {
                    self.phases.agent_s = Some(self.since_spawn());
                    return Ok(start.elapsed());
                }
            }
            if Instant::now() >= deadline {
                self.check_alive(DURING)?;
                return Err(VmError::BootTimeout {
                    vm: self.name.clone(),
                    timeout,
                    console: self.console_tail(CONSOLE_TAIL_LINES),
                });
            }
            if let Err(st) = or_exit(&mut self.child, tokio::time::sleep(poll_delay(polls))).await {
                return Err(self.exit_error(st, DURING));
            }
            polls += 1;
        }
    }

    /// One attempt to connect to the guest agent: a new connection and a `guest-sync-delimited`
    /// with a fresh id, answered within `wait` (the connection itself bounded by `wait`
    /// plus a second). `true` (and the agent connected) if it answered.
    ///
    /// Errors: [`VmError::Exited`] as soon as QEMU exits.
    async fn connect_agent(&mut self, wait: Duration, during: &str) -> Result<bool, VmError> {
        self.qga = None;
        self.agent_syncs += 1;
        let id = (std::process::id() as i32).wrapping_mul(1000).wrapping_add(self.agent_syncs) & 0x7fff_ffff;
        let connect = tokio::time::timeout(wait + POLL * 10, Qga::try_connect(&self.config.qga_socket, wait, id));
        match or_exit(&mut self.child, connect).await {
            Ok(Ok(Ok(Some(qga)))) => {
                self.qga = Some(qga);
                Ok(true)
            }
            Ok(_) => Ok(false),
            Err(st) => Err(self.exit_error(st, during)),
        }
    }

    /// Connects QMP anew, replacing any connection ([`Qmp::close`], up to `limit`, after
    /// which QEMU takes the next client), waiting up to `limit` for QEMU's greeting and
    /// the capability negotiation.
    ///
    /// Errors: outer, QEMU exited meanwhile (its status as [`or_exit`] gives it); inner,
    /// the connection failed or timed out (no QMP connection is left).
    async fn connect_qmp(
        &mut self,
        limit: Duration,
    ) -> Result<Result<(), AgentError>, std::io::Result<std::process::ExitStatus>> {
        if let Some(old) = self.qmp.take() {
            or_exit(&mut self.child, old.close(limit)).await?;
        }
        let connect = tokio::time::timeout(limit, Qmp::connect(&self.config.qmp_socket));
        Ok(match or_exit(&mut self.child, connect).await? {
            Ok(Ok(qmp)) => {
                self.qmp = Some(qmp);
                Ok(())
            }
            Ok(Err(e)) => Err(e.into()),
            Err(_) => Err(AgentError::QmpGreetingTimeout { limit }),
        })
    }

    /// The configuration QEMU was started with.
    pub fn config(&self) -> &QemuConfig {
        &self.config
    }

    /// Saves the running guest's state into folder `dir` (see [`super::state`]): QMP
    /// `migrate` to `dir/state` (live; the guest stops for the last pass), a copy of
    /// its root overlay and of its console log so far, then `cont`. Returns the RAM
    /// bytes written, or (inner error) why the save failed while the guest runs on.
    ///
    /// Errors (outer): [`VmError::Exited`] if QEMU exited meanwhile, [`VmError::Agent`]
    /// if the guest can't be made to run again ([`Vm::resume`]).
    pub async fn save_state(&mut self, dir: &Path) -> Result<Result<u64, AgentError>, VmError> {
        const DURING: &str = "while saving its state";
        let Some(qmp) = self.qmp.as_ref() else { return Ok(Err(AgentError::QmpNotConnected)) };
        let size = self.config.memory_mib << 20;
        // Set when the save is given up, so that a RAM copy still running stops.
        let given_up = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let stop = given_up.clone();
        let save = async {
            let memfd = self.ram.as_ref().map(|fd| fd.try_clone().map(std::fs::File::from)).transpose()?;
            if memfd.is_some() {
                qmp.ignore_shared_ram().await?;
            }
            let mut ram = qmp.migrate_to_file(&dir.join(super::state::STATE_FILE)).await?;
            if let Some(src) = memfd {
                // The guest is stopped (postmigrate): its RAM is what the state expects.
                let dst = dir.join(super::state::RAM_FILE);
                let copy = tokio::task::spawn_blocking(move || super::state::write_ram_file(&src, size, &dst, &stop));
                ram = copy.await.map_err(std::io::Error::other)??;
            }
            tokio::fs::copy(&self.config.root_overlay, dir.join(super::state::ROOT_FILE)).await?;
            tokio::fs::copy(&self.config.console_log, dir.join(super::state::CONSOLE_FILE)).await?;
            Ok::<u64, AgentError>(ram)
        };
        let outcome = or_exit(&mut self.child, tokio::time::timeout(SAVE_TIMEOUT, save)).await;
        given_up.store(true, std::sync::atomic::Ordering::Relaxed);
        let result = match outcome {
            Ok(Ok(r)) => r,
            Ok(Err(_)) => Err(AgentError::SaveTimeout { limit: SAVE_TIMEOUT }),
            Err(st) => return Err(self.exit_error(st, DURING)),
        };
        self.resume().await?;
        Ok(result)
    }

    /// Gives up the runner's handle on the guest's RAM memfd once no save will read it
    /// (QEMU keeps its own until it exits).
    pub fn release_ram(&mut self) {
        self.ram = None;
    }

    /// Makes sure the guest runs: cancels a migration still going (which would stop the
    /// guest when it completes), waits for it to end, and `cont`s a stopped guest. A
    /// no-op without QMP. Bounded: [`RESUME_TIMEOUT`].
    ///
    /// Errors: [`VmError::Exited`] if QEMU exited, [`VmError::Agent`] if the guest is
    /// still not running after [`RESUME_TIMEOUT`].
    pub async fn resume(&mut self) -> Result<(), VmError> {
        const DURING: &str = "while resuming the guest";
        // A connection out of step (a save that timed out mid-command) is replaced.
        if self.qmp.as_ref().is_some_and(Qmp::out_of_step) {
            match self.connect_qmp(QMP_CONNECT_TIMEOUT).await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => return Err(VmError::Agent { vm: self.name.clone(), source: e }),
                Err(st) => return Err(self.exit_error(st, DURING)),
            }
        }
        let Some(qmp) = self.qmp.as_ref() else { return Ok(()) };
        let resume = async {
            if qmp.migration_active().await? {
                qmp.cancel_migration().await?;
                while qmp.migration_active().await? {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            }
            if !qmp.running().await? {
                qmp.cont().await?;
            }
            Ok::<(), std::io::Error>(())
        };
        match or_exit(&mut self.child, tokio::time::timeout(RESUME_TIMEOUT, resume)).await {
            Ok(Ok(Ok(()))) => Ok(()),
            Ok(Ok(Err(e))) => Err(VmError::Agent { vm: self.name.clone(), source: e.into() }),
            Ok(Err(_)) => Err(VmError::Agent {
                vm: self.name.clone(),
                source: AgentError::ResumeTimeout { limit: RESUME_TIMEOUT },
            }),
            Err(st) => Err(self.exit_error(st, DURING)),
        }
    }

    /// Turns the VM's capture filter on or off (QMP `qom-set`, see
    /// [`Qmp::set_capture`]), bounded by 5 s.
    ///
    /// Errors: [`AgentError::QmpNotConnected`], QMP refused it, or no answer in 5 s
    /// (as [`AgentError::Io`], `TimedOut`).
    pub async fn set_capture(&self, on: bool) -> Result<(), AgentError> {
        let qmp = self.qmp.as_ref().ok_or(AgentError::QmpNotConnected)?;
        match tokio::time::timeout(Duration::from_secs(5), qmp.set_capture(on)).await {
            Ok(r) => Ok(r?),
            Err(_) => {
                Err(std::io::Error::new(std::io::ErrorKind::TimedOut, "QMP qom-set: no answer within 5 s").into())
            }
        }
    }

    /// Reads the guest's clock through the agent (bounded: 5 s), with the host's clock
    /// taken halfway through the request. `None` if the agent doesn't answer.
    pub async fn clock_sample(&self) -> Option<ClockSample> {
        let qga = self.qga.as_ref()?;
        let t0 = std::time::SystemTime::now();
        let guest = tokio::time::timeout(Duration::from_secs(5), qga.time_ns()).await.ok()?.ok()?;
        let t1 = std::time::SystemTime::now();
        let half = t1.duration_since(t0).unwrap_or_default() / 2;
        let host = (t0 + half).duration_since(std::time::UNIX_EPOCH).ok()?.as_nanos() as i64;
        Some(ClockSample { host_ns: host, guest_ns: guest })
    }

    /// Adds `NAME=value` pairs to the environment of every command run in the guest
    /// from now on (a VM's `env:`).
    pub fn set_env(&mut self, env: &std::collections::BTreeMap<String, String>) {
        self.env = env.iter().map(|(k, v)| format!("{k}={v}")).collect();
    }

    /// Runs `script` with `/bin/sh -c` in the guest (stdin from `stdin`), waiting up to
    /// `timeout`. `step` names it in errors.
    ///
    /// Errors: [`VmError::StepTimeout`] after `timeout` (the guest process is left
    /// running; the caller shuts the VM down), [`VmError::Exited`] as soon as QEMU
    /// exits, [`VmError::Agent`] if the agent connection fails.
    pub async fn exec(
        &mut self,
        step: &str,
        script: &str,
        stdin: Option<Vec<u8>>,
        timeout: Duration,
    ) -> Result<ExecResult, VmError> {
        let during = format!("during step {step}");
        self.check_alive(&during)?;
        let deadline = Instant::now() + timeout;
        let timed_out = |vm: &Vm| VmError::StepTimeout { vm: vm.name.clone(), step: step.into(), timeout };
        self.agent_in_step(deadline, timeout, &during).await?;
        let qga = self.qga.as_ref().expect("connected above");
        let argv = ["-c".to_string(), script.to_string()];
        let spawn = tokio::time::timeout(timeout, qga.spawn("/bin/sh", &argv, stdin, &self.env));
        let pid = match or_exit(&mut self.child, spawn).await {
            Ok(Ok(Ok(pid))) => pid,
            Ok(Ok(Err(e))) => return Err(self.agent_error(e, &during).await),
            Ok(Err(_)) => return Err(timed_out(self)),
            Err(st) => return Err(self.exit_error(st, &during)),
        };
        let mut polls = 0;
        loop {
            let qga = self.qga.as_ref().expect("connected above");
            let left = deadline.saturating_duration_since(Instant::now());
            let status = tokio::time::timeout(left.max(Duration::from_millis(1)), qga.status(pid));
            match or_exit(&mut self.child, status).await {
                Ok(Ok(Ok(Some(r)))) => return Ok(r),
                Ok(Ok(Ok(None))) | Ok(Err(_)) => {}
                Ok(Ok(Err(e))) => return Err(self.agent_error(e, &during).await),
                Err(st) => return Err(self.exit_error(st, &during)),
            }
            if Instant::now() >= deadline {
                return Err(timed_out(self));
            }
            if let Err(st) = or_exit(
                &mut self.child,
                tokio::time::sleep(step_poll_delay(polls).min(deadline.saturating_duration_since(Instant::now()))),
            )
            .await
            {
                return Err(self.exit_error(st, &during));
            }
            polls += 1;
        }
    }

    /// Makes sure the agent connection is in step before a request: one out of step (an
    /// earlier request, e.g. a clock sample, was given up before its answer), or lost
    /// to an earlier failed attempt, is replaced by a new connection whose
    /// `guest-sync-delimited` drops the late answers; tries until `deadline`.
    ///
    /// Errors: [`AgentError::SyncTimeout`] (naming `timeout`) when no new connection
    /// answered by `deadline`, [`VmError::Exited`] as soon as QEMU exits.
    async fn agent_in_step(&mut self, deadline: Instant, timeout: Duration, during: &str) -> Result<(), VmError> {
        if self.qga.as_ref().is_some_and(|q| !q.out_of_step()) {
            return Ok(());
        }
        while !self.connect_agent(QGA_SYNC_WAIT.min(deadline.saturating_duration_since(Instant::now())), during).await?
        {
            if Instant::now() >= deadline {
                return Err(VmError::Agent {
                    vm: self.name.clone(),
                    source: AgentError::SyncTimeout { during: during.to_string(), timeout },
                });
            }
            if let Err(st) = or_exit(&mut self.child, tokio::time::sleep(POLL)).await {
                return Err(self.exit_error(st, during));
            }
        }
        Ok(())
    }

    /// One guest agent request `call` on the connection (made in step first), bounded
    /// by `deadline`.
    ///
    /// Errors: [`VmError::StepTimeout`] (as `step`, naming `timeout`) past the
    /// deadline, [`VmError::Exited`] as soon as QEMU exits, [`VmError::Agent`] when the
    /// connection fails.
    async fn agent_call<T>(
        &mut self,
        step: &str,
        deadline: Instant,
        timeout: Duration,
        call: impl AsyncFnOnce(&Qga) -> std::io::Result<T>,
    ) -> Result<T, VmError> {
        let during = format!("during step {step}");
        self.agent_in_step(deadline, timeout, &during).await?;
        let qga = self.qga.as_ref().expect("connected above");
        let left = deadline.saturating_duration_since(Instant::now()).max(Duration::from_millis(1));
        match or_exit(&mut self.child, tokio::time::timeout(left, call(qga))).await {
            Ok(Ok(Ok(v))) => Ok(v),
            Ok(Ok(Err(e))) => Err(self.agent_error(e, &during).await),
            Ok(Err(_)) => Err(VmError::StepTimeout { vm: self.name.clone(), step: step.into(), timeout }),
            Err(st) => Err(self.exit_error(st, &during)),
        }
    }

    /// One request to a program in the guest that listens on a file: writes `request`
    /// into the file `request_path` (which must exist; opened read-write, see
    /// [`Qga::write_file_if_there`]), then polls `answer_path` every 10 ms through the
    /// agent and returns its first [`EXCHANGE_ANSWER_LIMIT`] bytes once it is there.
    /// The program must write its answer whole (e.g. renamed into place). After a
    /// second without an answer, and each second after, checks that the program runs:
    /// its PID is in the file `ready` (a decimal number) and `/proc/PID` is there.
    /// `step` names the exchange in errors. Used for the identity helper
    /// ([`super::state::IdentityHelper`]).
    ///
    /// Errors: [`AgentError::ExchangeFailed`] when `request_path` is not there, or
    /// the program is not running (no PID in `ready`, or no `/proc/PID`) and did not
    /// answer; [`VmError::StepTimeout`] after
    /// `timeout`; [`VmError::Exited`] and [`VmError::Agent`] as for [`Vm::exec`].
    pub async fn exchange(
        &mut self,
        step: &str,
        ready: &str,
        request_path: &str,
        request: &[u8],
        answer_path: &str,
        timeout: Duration,
    ) -> Result<Vec<u8>, VmError> {
        let deadline = Instant::now() + timeout;
        let failed = |vm: &Vm, why: String| VmError::Agent {
            vm: vm.name.clone(),
            source: AgentError::ExchangeFailed { step: step.to_string(), why },
        };
        self.check_alive(&format!("during step {step}"))?;
        let written = self
            .agent_call(step, deadline, timeout, async |q: &Qga| q.write_file_if_there(request_path, request).await)
            .await?;
        if !written {
            return Err(failed(self, format!("its program is not listening ({request_path} is not there)")));
        }
        let mut next_check = Instant::now() + Duration::from_secs(1);
        // Why the program is not running, once seen: the answer is looked for once more
        // (it may have answered just before it exited).
        let mut gone: Option<String> = None;
        loop {
            let answer = self
                .agent_call(step, deadline, timeout, async |q: &Qga| {
                    q.read_file_if_there(answer_path, EXCHANGE_ANSWER_LIMIT).await
                })
                .await?;
            if let Some(answer) = answer {
                return Ok(answer);
            }
            if let Some(why) = gone {
                return Err(failed(self, why));
            }
            if Instant::now() >= next_check {
                next_check = Instant::now() + Duration::from_secs(1);
                // Read only now: an answer in time costs no round trip for it.
                let pid = self
                    .agent_call(step, deadline, timeout, async |q: &Qga| q.read_file_if_there(ready, 64).await)
                    .await?;
                let pid = pid.and_then(|b| String::from_utf8_lossy(&b).trim().parse::<u32>().ok());
                gone = match pid {
                    // Opened and closed, not read: a process that ends between the two
                    // (it answered) makes the read, not the open, fail.
                    Some(pid) => {
                        let proc = format!("/proc/{pid}/stat");
                        let alive =
                            self.agent_call(step, deadline, timeout, async |q: &Qga| q.file_there(&proc).await).await?;
                        (!alive).then(|| format!("its program (PID {pid}) is not running and did not answer"))
                    }
                    None => Some(format!("its program is not listening ({ready} is not there or holds no PID)")),
                };
                if gone.is_some() {
                    continue;
                }
            }
            if Instant::now() >= deadline {
                return Err(VmError::StepTimeout { vm: self.name.clone(), step: step.into(), timeout });
            }
            if let Err(st) = or_exit(&mut self.child, tokio::time::sleep(EXCHANGE_POLL)).await {
                return Err(self.exit_error(st, &format!("during step {step}")));
            }
        }
    }

    /// Stops the VM: QMP `quit` (if QMP is connected and in step) with [`QUIT_GRACE`], then SIGTERM
    /// to its process group with [`TERM_GRACE`], then SIGKILL. Always reaps QEMU, so
    /// when this returns no process of this VM is left; takes at most about 8 s.
    pub async fn shutdown(&mut self) -> Ending {
        self.qga = None;
        if self.exit.is_some() || matches!(self.child.try_wait(), Ok(Some(_))) {
            self.qmp = None;
            if let Ok(st) = self.child.wait().await {
                self.exit = Some(st);
            }
            return Ending::AlreadyExited;
        }
        // A connection out of step can't send `quit`: SIGTERM at once.
        if let Some(qmp) = self.qmp.take().filter(|q| !q.out_of_step()) {
            let quit = async {
                let _ = qmp.quit().await;
                self.child.wait().await
            };
            if let Ok(Ok(st)) = tokio::time::timeout(QUIT_GRACE, quit).await {
                self.exit = Some(st);
                return Ending::Quit;
            }
        }
        self.signal(libc::SIGTERM);
        if let Ok(Ok(st)) = tokio::time::timeout(TERM_GRACE, self.child.wait()).await {
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

/// In a child before `exec`: makes descriptor `fd` (close-on-exec) the child's
/// descriptor `target`, inherited by the program.
pub(crate) fn inherit_as(fd: i32, target: i32) -> std::io::Result<()> {
    // SAFETY: plain system calls on descriptors of this (forked) process.
    let r = unsafe {
        if fd == target {
            libc::fcntl(fd, libc::F_SETFD, 0)
        } else {
            libc::dup2(fd, target)
        }
    };
    if r < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// How often [`Vm::exchange`] looks for the answer: each look is one guest agent
/// round trip (a `guest-file-open` the agent refuses while the file is not there).
const EXCHANGE_POLL: Duration = Duration::from_millis(10);

/// The most of an answer file [`Vm::exchange`] reads, bytes.
pub const EXCHANGE_ANSWER_LIMIT: u32 = 4096;

/// Awaits `fut` unless `child` exits first; then `Err` with its exit status. The exit is
/// noticed at once (tokio's SIGCHLD handling), so no wait on a guest outlives its QEMU.
async fn or_exit<T>(
    child: &mut tokio::process::Child,
    fut: impl std::future::Future<Output = T>,
) -> Result<T, std::io::Result<std::process::ExitStatus>> {
    tokio::select! {
        biased;
        st = child.wait() => Err(st),
        r = fut => Ok(r),
    }
}

/// The last `n` lines of `text`.
pub fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn polls_start_fast_and_settle_at_the_poll_interval() {
        let ms: Vec<u128> = (0..7).map(|n| poll_delay(n).as_millis()).collect();
        assert_eq!(ms, [10, 20, 40, 80, 100, 100, 100]);
        // No overflow however long a wait polls.
        assert_eq!(poll_delay(40), POLL);
        assert_eq!(poll_delay(u32::MAX), POLL);
        // A running step: the same pace for ~4.7 s, then twice a second.
        let fast: Duration = (0..FAST_POLLS).map(poll_delay).sum();
        assert!(fast > Duration::from_secs(4) && fast < Duration::from_secs(5), "{fast:?}");
        assert_eq!(step_poll_delay(0), poll_delay(0));
        assert_eq!(step_poll_delay(FAST_POLLS - 1), POLL);
        assert_eq!(step_poll_delay(FAST_POLLS), SLOW_POLL);
        assert_eq!(step_poll_delay(u32::MAX), SLOW_POLL);
    }
}
