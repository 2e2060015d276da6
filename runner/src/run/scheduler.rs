//! The step scheduler: once a VM's guest agent answers, its steps run in plan order,
//! each after its `after` dependencies passed. Every step's outcome is published (a
//! [`Progress`] map keyed by the typed [`Dependency`]) for the steps of other VMs that
//! wait for it, and recorded ([`Recorder`]: `run.json`, the step's output files, events).
//!
//! No wait is unbounded: a step runs for at most its own `timeout`, and waits for its
//! dependencies at most until the latest they can end ([`WaitBounds`]), so a hang is
//! charged to the step that hung (status `timed_out`, its partial output and
//! diagnostics), never to a step waiting for it; the waiting steps go on, or are
//! skipped with a reason naming the VM and step that hung.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::watch;

use crate::events::{Event, EventSink};
use crate::infra::images::cache::{Cache, EntryHold};
use crate::infra::net::Namespace;
use crate::infra::qemu::args::command_line;
use crate::infra::qemu::error::AgentError;
use crate::infra::qemu::state::{self, StateMeta};
use crate::infra::qemu::vm::{Vm, VmError};
use crate::measure::script;
use crate::plan::{Dependency, StepKind, StepPlan, Until, VmPlan};

use super::record::{write_json, ClockCheck, RunRecord, StepRecord, StepStatus, VmRecord, VmStart};
use super::rounds::Rounds;
use super::waits::WaitBounds;
use super::{io_err, RunError};

/// Which VMs are up (`step: None`) and which steps ended, and how.
pub(super) type Progress = watch::Sender<BTreeMap<Dependency, Ended>>;

/// How a step (or a VM's start, `step: None`) ended, as the steps waiting for it see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Ended {
    /// Whether the steps that need it to pass go on: it passed, or was not needed.
    pub go_on: bool,
    /// Its status.
    pub status: StepStatus,
}

impl Ended {
    /// A step that ended with `status`; the steps after it go on when it passed.
    fn with(status: StepStatus) -> Ended {
        Ended { go_on: status == StepStatus::Passed, status }
    }
}

/// Why a step waiting for `d`, which ended as `e` without passing, does not run: the
/// VM and step that hung, failed or did not run.
fn not_passed(d: &Dependency, e: Ended) -> String {
    let Some(step) = &d.step else { return format!("VM {} did not come up", d.vm) };
    match e.status {
        StepStatus::TimedOut => format!("dependency {d} timed out: VM {} hung in step {step}", d.vm),
        StepStatus::Error => format!("dependency {d} ended with an error of VM {} (its guest or agent)", d.vm),
        StepStatus::Skipped => format!("dependency {d} was skipped"),
        StepStatus::Failed => format!("dependency {d} failed"),
        other => format!("dependency {d} did not pass ({other})"),
    }
}

/// Keeps the run's record: updates `run.json` (rewritten at every milestone, so a killed
/// runner leaves what it saw) and sends the matching progress events.
#[derive(Clone)]
pub(super) struct Recorder {
    pub record: Arc<Mutex<RunRecord>>,
    pub dir: PathBuf,
    pub events: EventSink,
    /// When the run started (step start times are recorded relative to it).
    pub t0: Instant,
}

impl Recorder {
    /// Applies `f` to VM `vm`'s record.
    pub fn set_vm(&self, vm: &str, f: impl FnOnce(&mut VmRecord)) {
        let mut r = self.record.lock().expect("not poisoned");
        if let Some(v) = r.vms.iter_mut().find(|v| v.name == vm) {
            f(v);
        }
    }

    /// Applies `f` to step number `idx` of VM `vm`.
    pub fn set_step(&self, vm: &str, idx: usize, f: impl FnOnce(&mut StepRecord)) {
        self.set_vm(vm, |v| {
            if let Some(s) = v.steps.get_mut(idx) {
                f(s);
            }
        });
    }

    /// Writes `run.json` as it is now.
    ///
    /// Errors: [`RunError::RunDir`] when it can't be written.
    pub fn save(&self) -> Result<(), RunError> {
        let r = self.record.lock().expect("not poisoned");
        Ok(write_json(&self.dir.join(super::RUN_FILE), &*r)?)
    }

    fn event(&self, e: Event) {
        (self.events)(e);
    }
}

/// How waiting for a step's dependencies ended.
enum Wait {
    /// All passed.
    Ready,
    /// One ended without passing: the step is skipped, and its VM's later steps.
    Failed(String),
    /// One of [`Until::PassedElseSkip`] ended without passing: only the step is skipped.
    Skip(String),
    /// One had not ended by the latest it could ([`WaitBounds::latest_end`], here after
    /// the wait began): its VM is stuck.
    TimedOut(Dependency, Duration),
}

/// Waits until every dependency of `st` has ended, and passed where it must
/// ([`Until`]); each at most until the latest it can end (`bounds`, counted from now:
/// the VMs started before).
async fn wait_deps(rx: &mut watch::Receiver<BTreeMap<Dependency, Ended>>, st: &StepPlan, bounds: &WaitBounds) -> Wait {
    let began = tokio::time::Instant::now();
    for d in &st.after {
        let key = d.key();
        let limit = bounds.latest_end(d);
        let ended = match tokio::time::timeout_at(began + limit, rx.wait_for(|m| m.contains_key(&key))).await {
            Err(_) => return Wait::TimedOut(d.clone(), limit),
            Ok(Ok(m)) => m[&key],
            Ok(Err(_)) => Ended { go_on: false, status: StepStatus::Cancelled },
        };
        if ended.go_on || d.until == Until::Ended {
            continue;
        }
        let why = not_passed(d, ended);
        return if d.until == Until::PassedElseSkip { Wait::Skip(why) } else { Wait::Failed(why) };
    }
    Wait::Ready
}

/// The bytes a step reads on stdin: its text, or a host file (`files:`), which must
/// still be what the suite was compiled with.
///
/// Errors: [`RunError::Io`] when the file can't be read, [`RunError::FileChanged`]
/// when its SHA-256 is not the plan's.
fn stdin_of(st: &StepPlan) -> Result<Option<Vec<u8>>, RunError> {
    let Some(path) = &st.stdin_file else { return Ok(st.stdin.clone().map(String::into_bytes)) };
    let bytes = std::fs::read(path).map_err(io_err("reading the file to copy", path))?;
    if let StepKind::CopyFile { sha256, .. } = &st.kind {
        let now = crate::infra::hash::sha256_hex(&bytes);
        if &now != sha256 {
            return Err(RunError::FileChanged { path: path.clone(), planned: sha256.clone(), now });
        }
    }
    Ok(Some(bytes))
}

/// What a kernel developer asks for first when a command hangs: the kernel log, and
/// the stacks of the blocked (D-state) tasks (`sysrq-w`, which the kernel prints into
/// that log). Run through the guest agent, which answers as long as the guest is
/// scheduling at all.
///
/// `since`: the line an iteration wrote into the kernel log as it began
/// ([`crate::measure::script::iteration_mark`]); the log then starts at its last
/// occurrence (a VM restored from a saved state holds the saved boot's log before it).
/// Without it, or when the guest's log lacks it, the last 100 lines.
pub fn hang_diagnostics_script(since: Option<&str>) -> String {
    let dmesg = match since {
        Some(mark) => format!(
            "n=$(dmesg | grep -n -F -e {} | tail -n 1 | cut -d: -f1)
if [ -n \"$n\" ]; then echo '== dmesg since the step began (last 100 lines)'; dmesg | tail -n +\"$n\" | tail -n 100
else echo '== dmesg (last 100 lines; no line marks the step'\\''s start)'; dmesg | tail -n 100; fi
",
            crate::plan::shell_quote(mark)
        ),
        None => "echo '== dmesg (last 100 lines)'; dmesg | tail -n 100\n".into(),
    };
    format!(
        "{dmesg}echo w > /proc/sysrq-trigger; sleep 1
echo '== blocked tasks (echo w > /proc/sysrq-trigger)'; dmesg | sed -n '/sysrq: Show Blocked State/,$p' | tail -n 400
"
    )
}

/// How long [`hang_diagnostics_script`] may take.
const DIAGNOSTICS_TIMEOUT: Duration = Duration::from_secs(30);

/// Lines of the serial console kept when the guest died or its agent is gone.
const CONSOLE_TAIL_LINES: usize = 60;

/// Writes `vms/<vm>/NN-<step>.diagnostics` after step `idx` hung or its VM died: the
/// hang diagnostics through the agent, or the console's last lines when the agent
/// does not answer. The kernel log of a measured iteration starts where the iteration
/// began. Returns the file's path relative to the run folder.
async fn diagnose(vm: &mut Vm, vp: &VmPlan, idx: usize, rec: &Recorder) -> Result<String, RunError> {
    let st = &vp.steps[idx];
    let mark = matches!(st.kind, StepKind::Measure { .. }).then(|| script::iteration_mark(&st.name));
    let diagnostics = hang_diagnostics_script(mark.as_deref());
    let text = match vm.exec(&format!("{}-diagnostics", st.name), &diagnostics, None, DIAGNOSTICS_TIMEOUT).await {
        Ok(r) => String::from_utf8_lossy(&r.stdout).into_owned(),
        Err(e) => format!(
            "the guest agent gave no diagnostics ({e})\n== serial console (last {CONSOLE_TAIL_LINES} lines)\n{}\n",
            vm.console_tail(CONSOLE_TAIL_LINES)
        ),
    };
    let name = format!("{:02}-{}.diagnostics", idx + 1, st.name);
    let path = rec.dir.join("vms").join(&vp.name).join(&name);
    std::fs::write(&path, text).map_err(io_err("writing", &path))?;
    Ok(format!("vms/{}/{name}", vp.name))
}

/// How long reading a timed-out iteration's partial output may take.
const PARTIAL_OUTPUT_TIMEOUT: Duration = Duration::from_secs(30);

/// The output of measured iteration `st`, which timed out, as far as its guest kept it
/// ([`script::partial_output_script`]: `run`'s stdout and stderr so far, as sections),
/// written as the step's `.stdout` and `.stderr`; `None` when the agent could not give
/// it (the guest is wedged).
///
/// Errors: [`RunError::Io`] when the files can't be written.
async fn partial_output(
    vm: &mut Vm,
    vdir: &Path,
    vp: &VmPlan,
    idx: usize,
) -> Result<Option<(String, String)>, RunError> {
    let st = &vp.steps[idx];
    let script = script::partial_output_script(&st.name);
    match vm.exec(&format!("{}-partial-output", st.name), &script, None, PARTIAL_OUTPUT_TIMEOUT).await {
        Ok(r) => Ok(Some(write_outputs(vdir, &vp.name, idx, &st.name, &r.stdout, &r.stderr)?)),
        Err(_) => Ok(None),
    }
}

/// A run's shared lock on the saved VM state a VM started from (see
/// [`crate::infra::images::cache::Cache::hold_existing`]), given up early when QEMU
/// can't load that state, so that the state can be replaced.
pub(super) type StateHold = Arc<Mutex<Option<EntryHold>>>;

/// How a VM gets from QEMU's start to its first step.
pub(super) struct StartPlan<'a> {
    /// The cache its kind's saved state is written to.
    pub cache: &'a Cache,
    /// The run's network namespace (to boot the VM again if its saved state can't be
    /// loaded).
    pub ns: &'a Namespace,
    /// Its kind's saved-state key, when saved states are used.
    pub state_key: Option<String>,
    /// How to boot it instead, when it starts from a saved state.
    pub boot_config: Option<super::prepare::BootInstead>,
    /// The hold on the saved state it starts from.
    pub hold: StateHold,
    /// `vms/<vm>/qemu-cmdline.txt`.
    pub cmdline_file: PathBuf,
    /// What its saved state would record.
    pub meta: StateMeta,
    /// Its address, `ADDR/PREFIX`.
    pub cidr: String,
    /// The network's MTU.
    pub mtu: u32,
}

/// Longest a VM restored from its kind's saved state may take to answer through its
/// guest agent before it is given up and booted instead ([`restore_limit`]). A restore
/// is ready in 1-3 s (KVM, or TCG with four VMs restoring at once on 2 cores); a cold
/// TCG boot of the same kind takes 4-20 s.
const RESTORE_LIMIT: Duration = Duration::from_secs(30);

/// The wait for a restored VM's guest agent: [`RESTORE_LIMIT`], or the suite's
/// `boot_timeout` when that is shorter.
fn restore_limit(boot_timeout: Duration) -> Duration {
    RESTORE_LIMIT.min(boot_timeout)
}

/// Longest the identity (the helper's exchange or [`state::identity_script`]) and the
/// pre-save command before a save may take.
const IDENTITY_TIMEOUT: Duration = Duration::from_secs(60);

/// Waits for `vm`'s guest agent; saves its kind's state if it booted and none is saved
/// yet; gives the guest its identity, then the suite's `env:`. A VM whose saved state
/// QEMU can't load, or whose restored guest does not answer within [`restore_limit`],
/// is booted instead (with a notice), and the state is removed (when no other VM holds
/// it) and saved again. Returns the time from the call (just after QEMU
/// started) to ready.
///
/// Errors: [`RunError::Vm`] when it doesn't come up, can't run again after a save, or
/// can't be given its identity.
async fn start_vm(vm: &mut Vm, vp: &VmPlan, rec: &Recorder, start: &StartPlan<'_>) -> Result<Duration, RunError> {
    let t = Instant::now();
    let mut booted = vm.config().incoming.is_none();
    let can_boot_instead = !booted && start.boot_config.is_some();
    let limit = if can_boot_instead { restore_limit(vp.boot_timeout) } else { vp.boot_timeout };
    if let Err(e) = vm.wait_ready(limit).await {
        let why = match &e {
            VmError::Exited(x) if can_boot_instead => {
                format!("QEMU could not load it: {}", x.qemu_stderr.lines().last().unwrap_or("no reason given"))
            }
            // Seen in CI (a 6.12 guest under TCG, four VMs restoring on 2 cores): QEMU
            // loaded the state and said "running", and the guest agent never answered
            // within the whole boot_timeout. A restore is only a faster boot: one that
            // takes longer than [`RESTORE_LIMIT`] is given up, and the VM boots instead.
            VmError::BootTimeout { .. } if can_boot_instead => {
                format!("the restored guest's agent did not answer within {} s", limit.as_secs())
            }
            // QMP refused to start the load of a mapped state (`migrate-incoming`): the
            // restore can't begin.
            VmError::Agent { source: refused @ AgentError::LoadRefused(_), .. } if can_boot_instead => {
                refused.to_string()
            }
            _ => return Err(RunError::Vm(e)),
        };
        vm.shutdown().await;
        boot_instead(vm, vp, rec, start, &why).await?;
        booted = true;
    }
    loop {
        // A restored guest's identity helper was started before its state was saved
        // (the state key covers the helper); a booted one's only if it saved the state.
        let mut how = if booted { IdentityBy::Command } else { IdentityBy::Helper };
        if booted {
            if let Some(key) = &start.state_key {
                if save_state(vm, vp, rec, start, key).await? {
                    how = IdentityBy::HelperOrCommand;
                }
            }
        }
        let identity = set_identity(vm, vp, rec, start, how).await;
        // A state put in place of another kind's (copied by hand) would run another
        // kernel than the one the run records: check the one thing that must hold. A
        // restored guest that can't take its identity is booted instead too.
        let why = match &identity {
            _ if booted => None,
            Ok(release) if *release == start.meta.kernel_release => None,
            Ok(release) => Some(format!("the guest runs kernel {release}, not {}", start.meta.kernel_release)),
            Err(RunError::Vm(VmError::Agent { source: e @ AgentError::Identity { .. }, .. })) => Some(e.to_string()),
            Err(_) => None,
        };
        let Some(why) = why else {
            identity?;
            break;
        };
        vm.shutdown().await;
        boot_instead(vm, vp, rec, start, &why).await?;
        booted = true;
    }
    // No save reads the guest's RAM from here on.
    vm.release_ram();
    vm.mark_ready();
    vm.set_env(&vp.env);
    Ok(t.elapsed())
}

/// How a VM's identity is given ([`set_identity`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum IdentityBy {
    /// The identity command through `guest-exec` ([`state::identity_script`]): a
    /// booted guest that did not save its kind's state.
    Command,
    /// The identity helper ([`state::IdentityHelper`]), already running in a restored
    /// guest; a failure is the restore's (the VM boots instead).
    Helper,
    /// The helper the guest started before it saved its kind's state, or the command
    /// if the helper fails (a notice says why).
    HelperOrCommand,
}

/// Gives `vm` its identity (host name, MAC, MTU, address, clock, host randomness; see
/// [`state::identity_script`] and [`state::IdentityHelper`]), as `how` says, and
/// returns the kernel release the guest answered with.
///
/// Errors: [`RunError::Vm`] when it can't be given: [`AgentError::Identity`] when the
/// command exits non-zero or the helper fails or answers with an error.
async fn set_identity(
    vm: &mut Vm,
    vp: &VmPlan,
    rec: &Recorder,
    start: &StartPlan<'_>,
    how: IdentityBy,
) -> Result<String, RunError> {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_secs_f64();
    let mut random = vec![0u8; state::IDENTITY_RANDOM_BYTES];
    let _ = getrandom_into(&mut random);
    let identity_failed = |exit: Option<i64>, stderr: String| {
        RunError::Vm(VmError::Agent {
            vm: vp.name.clone(),
            source: crate::infra::qemu::error::AgentError::Identity { exit, stderr },
        })
    };
    if how != IdentityBy::Command {
        let helper = state::IdentityHelper::GUEST;
        let request = state::identity_request(&random, &vp.name, &vm.config().mac, start.mtu, &start.cidr, now);
        let exchanged = vm
            .exchange(
                "identity",
                &helper.ready_path(),
                &helper.request_path(),
                request.as_bytes(),
                &helper.answer_path(),
                // A helper answers within a second; one that does not by the restore's
                // own limit is given up as a failed restore is.
                restore_limit(vp.boot_timeout),
            )
            .await;
        let why = match exchanged {
            Ok(answer) => match state::parse_identity_answer(&answer) {
                Ok(release) => return Ok(release),
                Err(why) => format!("identity helper: {why}"),
            },
            Err(VmError::Agent { source: AgentError::ExchangeFailed { why, .. }, .. }) => {
                format!("identity helper: {why}")
            }
            // Alive but stuck (its `ip`, say), or the agent failed on the way: the
            // restore is given up like a failed one (QEMU's exit stays an error).
            Err(VmError::StepTimeout { timeout, .. }) => {
                format!("identity helper: no answer within {} s", timeout.as_secs())
            }
            Err(VmError::Agent { source, .. }) => format!("identity helper: the guest agent failed: {source}"),
            Err(e) => return Err(RunError::Vm(e)),
        };
        if how == IdentityBy::Helper {
            return Err(identity_failed(None, why));
        }
        rec.event(Event::Notice(format!("notice: VM {}: {why}; the identity command gives it instead", vp.name)));
    }
    let script = state::identity_script(&vp.name, &vm.config().mac, start.mtu, &start.cidr, now);
    // Before the suite's `env:` is set: nothing of the suite runs in it.
    let r = vm.exec("identity", &script, Some(random), IDENTITY_TIMEOUT).await?;
    if r.exit_code != Some(0) {
        return Err(identity_failed(r.exit_code, String::from_utf8_lossy(&r.stderr).trim().to_string()));
    }
    Ok(String::from_utf8_lossy(&r.stdout).lines().next().unwrap_or_default().trim().to_string())
}

/// Replaces `vm`, whose saved state can't be used (`why`: QEMU could not load it, the
/// restored guest did not answer, or it holds another kernel), with a booting one
/// (its root overlay over the rootfs image is created now): keeps the failed attempt's
/// stderr and console as `qemu.restore-stderr` and
/// `console.restore.log`, rewrites `qemu-cmdline.txt`, gives up the hold on the state
/// and removes it if no other VM holds it (a later boot of the kind saves it again).
///
/// Errors: [`RunError::Io`] when the overlay or `qemu-cmdline.txt` can't be written,
/// [`RunError::Vm`] when the new QEMU can't start or doesn't come up.
async fn boot_instead(
    vm: &mut Vm,
    vp: &VmPlan,
    rec: &Recorder,
    start: &StartPlan<'_>,
    why: &str,
) -> Result<(), RunError> {
    let instead = start.boot_config.as_ref().expect("checked by the caller");
    let boot = &instead.config;
    super::prepare::create_overlay(&instead.rootfs_image, "raw", &boot.root_overlay)?;
    let vdir = rec.dir.join("vms").join(&vp.name);
    let stderr = vdir.join("qemu.stderr");
    let _ = std::fs::rename(&stderr, vdir.join("qemu.restore-stderr"));
    let _ = std::fs::rename(&boot.console_log, vdir.join("console.restore.log"));
    let line = command_line(boot);
    std::fs::write(&start.cmdline_file, format!("{line}\n")).map_err(io_err("writing", &start.cmdline_file))?;
    drop(start.hold.lock().expect("not poisoned").take());
    let notice =
        super::prepare::discard_state(start.cache, start.state_key.as_deref(), &vp.name, "the saved state", why);
    rec.event(Event::Notice(notice));
    *vm = Vm::spawn(boot, start.ns, &stderr)?;
    rec.set_vm(&vp.name, |r| {
        r.pid = Some(vm.pid() as u32);
        r.start = Some(VmStart::Booted);
    });
    rec.event(Event::VmStarted { vm: vp.name.clone(), restoring: false });
    vm.wait_ready(vp.boot_timeout).await?;
    Ok(())
}

/// Fills `buf` from the host's `/dev/urandom`.
fn getrandom_into(buf: &mut [u8]) -> std::io::Result<()> {
    use std::io::Read;
    std::fs::File::open("/dev/urandom")?.read_exact(buf)
}

/// Saves `vm`'s state as its kind's (`key`) unless it exists or another VM is saving
/// it. [`state::pre_save_script`] runs first: it starts the identity helper (which
/// every guest restored from the state finds running) and takes eth0 down (the state
/// then holds no link, no IPv6 address and sends nothing from this VM's MAC; the
/// identity brings it up). A failed save is a notice, not an error: the VM goes on.
/// Returns whether the identity helper listens in `vm` (the pre-save command ran and
/// said so).
///
/// Errors: QEMU exited meanwhile, or the guest can't be made to run again
/// ([`RunError::Vm`]).
async fn save_state(
    vm: &mut Vm,
    vp: &VmPlan,
    rec: &Recorder,
    start: &StartPlan<'_>,
    key: &str,
) -> Result<bool, RunError> {
    let not_saved = |why: String| Event::Notice(format!("notice: VM {}: its state was not saved: {why}", vp.name));
    let writer = match start.cache.begin_entry(state::KIND, key) {
        Ok(Some(w)) if state::usable_path(w.path()) => w,
        Ok(_) => return Ok(false),
        Err(e) => {
            rec.event(not_saved(e.to_string()));
            return Ok(false);
        }
    };
    let down = vm.exec("pre-save", &state::pre_save_script(), None, IDENTITY_TIMEOUT).await?;
    let helper = String::from_utf8_lossy(&down.stdout).lines().any(|l| l == state::HELPER_READY);
    if !helper {
        // Every VM restored from the state would find no helper, and boot instead.
        rec.event(not_saved(format!(
            "the identity helper did not start: {}",
            String::from_utf8_lossy(&down.stderr).trim()
        )));
        return Ok(false);
    }
    if down.exit_code != Some(0) {
        rec.event(not_saved(format!(
            "the pre-save command (`ip link set eth0 down`) failed: {}",
            String::from_utf8_lossy(&down.stderr).trim()
        )));
        return Ok(helper);
    }
    let t = Instant::now();
    let ram = match vm.save_state(writer.path()).await? {
        Ok(ram) => ram,
        Err(e) => {
            rec.event(not_saved(e.to_string()));
            return Ok(helper);
        }
    };
    let meta = StateMeta { ram_bytes: ram, took_s: t.elapsed().as_secs_f64(), ..start.meta.clone() };
    let meta_path = writer.path().join(state::META_FILE);
    // fsync of ~100 MB: off the task that drives every VM's steps.
    let written = tokio::task::spawn_blocking(move || {
        let bytes = serde_json::to_vec_pretty(&meta).map_err(|e| e.to_string())?;
        std::fs::write(&meta_path, bytes).map_err(|e| e.to_string())?;
        writer.commit().map_err(|e| e.to_string())?;
        Ok::<StateMeta, String>(meta)
    })
    .await
    .unwrap_or_else(|e| Err(e.to_string()));
    match written {
        Ok(meta) => {
            rec.set_vm(&vp.name, |r| r.state_saved = true);
            rec.event(Event::Notice(format!(
                "vm {}: saved its state ({} MB of RAM, {:.1}s): later VMs of its kind start from it",
                vp.name,
                ram / 1_000_000,
                meta.took_s
            )));
        }
        Err(e) => rec.event(not_saved(e)),
    }
    Ok(helper)
}

/// What every VM's [`run_vm`] shares.
#[derive(Clone, Copy)]
pub(super) struct Shared<'a> {
    /// Every step's outcome, for the steps waiting for it.
    pub progress: &'a Progress,
    /// The run's record.
    pub rec: &'a Recorder,
    /// The adaptive measurements' rounds.
    pub rounds: &'a Rounds<'a>,
    /// How long a step may wait for another.
    pub bounds: &'a WaitBounds,
    /// When the last VM came up.
    pub booted_at: &'a Mutex<Option<Instant>>,
}

/// Boots nothing: waits for `vm`'s guest agent, then runs `vp`'s steps in order,
/// publishing each outcome to `progress` and recording it with `rec`.
///
/// Errors: the VM failed (didn't boot, QEMU exited, agent lost, a step timed out), a
/// dependency did not end by the latest it could (`bounds`), or the results couldn't
/// be written.
// Over 150 lines, kept whole for now: the one loop over a VM's steps, whose arms (wait
// for `after`, run, time out, record, publish) share its state (the VM, the record,
// the progress channel). It splits with the run record as an event consumer
// (DESIGN-REVIEW §6 change 10), which takes the recording out of the loop.
pub(super) async fn run_vm(
    vm: &mut Vm,
    vp: &VmPlan,
    shared: Shared<'_>,
    start: &StartPlan<'_>,
) -> Result<(), RunError> {
    let Shared { progress, rec, rounds, bounds, booted_at } = shared;
    let vdir = rec.dir.join("vms").join(&vp.name);
    let up = Dependency { vm: vp.name.clone(), step: None, until: Until::Passed };
    let took = match start_vm(vm, vp, rec, start).await {
        Ok(t) => t,
        Err(e) => {
            progress.send_modify(|m| {
                m.insert(up, Ended::with(StepStatus::Error));
            });
            return Err(e);
        }
    };
    *booted_at.lock().expect("not poisoned") = Some(Instant::now());
    rec.event(Event::VmReady { vm: vp.name.clone(), took });
    rec.set_vm(&vp.name, |v| {
        v.boot_s = Some(took.as_secs_f64());
        v.start_phases = Some(vm.start_phases());
    });
    let clock_start = vm.clock_sample().await;
    rec.save()?;
    progress.send_modify(|m| {
        m.insert(up, Ended::with(StepStatus::Passed));
    });
    let mut rx = progress.subscribe();
    let mut blocked: Option<String> = None;
    let mut capture = super::capture::CaptureControl::of(vp, &vdir);
    for (idx, st) in vp.steps.iter().enumerate() {
        let key = Dependency::step(&vp.name, &st.name);
        let mut skip: Option<String> = None;
        if blocked.is_none() {
            match wait_deps(&mut rx, st, bounds).await {
                Wait::Ready => {}
                Wait::Failed(why) => blocked = Some(why),
                Wait::Skip(why) => skip = Some(why),
                Wait::TimedOut(dep, waited) => {
                    // Not this step's timeout: it never ran. The error names the VM
                    // that is stuck.
                    let err = RunError::DependencyTimeout {
                        stuck: dep.vm.clone(),
                        dependency: dep.to_string(),
                        vm: vp.name.clone(),
                        step: st.name.clone(),
                        waited,
                    };
                    rec.set_step(&vp.name, idx, |s| {
                        s.status = StepStatus::Skipped;
                        s.error = Some(err.to_string());
                    });
                    progress.send_modify(|m| {
                        m.insert(key, Ended::with(StepStatus::Skipped));
                    });
                    return Err(err);
                }
            }
        }
        // A step that does not run: skipped with its reason; `go_on` tells the steps
        // waiting for it whether to run (a step not needed) or not (a step blocked).
        let skipped = |why: String, go_on: bool| {
            rec.set_step(&vp.name, idx, |s| s.error = Some(why));
            progress.send_modify(|m| {
                m.insert(key.clone(), Ended { go_on, status: StepStatus::Skipped });
            });
            rec.event(Event::StepFinished {
                vm: vp.name.clone(),
                step: st.name.clone(),
                status: StepStatus::Skipped,
                took: Duration::ZERO,
            });
        };
        if let Some(why) = blocked.as_ref().or(skip.as_ref()) {
            skipped(why.clone(), false);
            continue;
        }
        let round = match &st.kind {
            StepKind::Measure { measurement, iteration, warmup: false } => Some((measurement, *iteration)),
            StepKind::Action { measurement, round: Some(r), .. } => Some((measurement, *r)),
            _ => None,
        };
        if let Some((measurement, iteration)) = round {
            if !rounds.needed(measurement, iteration, rec) {
                // Not a failure: later steps waiting for it go on.
                skipped(format!("not needed: every comparison of {measurement} was decided before this round"), true);
                continue;
            }
        }
        rec.event(Event::StepStarted { vm: vp.name.clone(), step: st.name.clone() });
        let started = rec.t0.elapsed().as_secs_f64();
        rec.set_step(&vp.name, idx, |s| {
            s.status = StepStatus::Running;
            s.started_s = Some(started);
        });
        rec.save()?;
        // Its start again, after saving `run.json`: as near to the script's start as the
        // host sees it (a measurement's rounds are placed on the host's clock from it).
        let started = rec.t0.elapsed().as_secs_f64();
        rec.set_step(&vp.name, idx, |s| s.started_s = Some(started));
        let stdin = match stdin_of(st) {
            Ok(s) => s,
            Err(e) => {
                rec.set_step(&vp.name, idx, |s| {
                    s.status = StepStatus::Error;
                    s.error = Some(e.to_string());
                });
                return Err(e);
            }
        };
        let iteration = matches!(st.kind, StepKind::Measure { warmup: false, .. });
        let from = match capture.as_mut() {
            Some(c) => c.before(vm, iteration).await,
            None => None,
        };
        let t = Instant::now();
        let result = vm.exec(&st.name, &st.script, stdin, st.timeout).await;
        let took = t.elapsed();
        if let Some(c) = capture.as_mut() {
            let range = c.after(vm, from).await;
            rec.set_vm(&vp.name, |v| v.capture = Some(c.record.clone()));
            rec.set_step(&vp.name, idx, |s| s.capture_bytes = range);
        }
        let status = match &result {
            Ok(r) if r.exit_code == Some(i64::from(st.expect_exit)) => StepStatus::Passed,
            Ok(_) => StepStatus::Failed,
            Err(VmError::StepTimeout { .. }) => StepStatus::TimedOut,
            Err(_) => StepStatus::Error,
        };
        let files = match &result {
            Ok(r) => Some(write_outputs(&vdir, &vp.name, idx, &st.name, &r.stdout, &r.stderr)?),
            // A measured iteration that hung keeps what `run` printed so far.
            Err(VmError::StepTimeout { .. }) if matches!(st.kind, StepKind::Measure { .. }) => {
                partial_output(vm, &vdir, vp, idx).await?
            }
            Err(_) => None,
        };
        // A measured iteration (or an action around one) that hangs or kills its guest
        // is an outcome of that iteration, not the end of the run: it is recorded (with
        // what a kernel developer asks for first) and the other VMs go on; this VM's
        // later steps are skipped. A failed action fails its iteration, not its VM.
        let measured = matches!(st.kind, StepKind::Measure { .. } | StepKind::Action { .. });
        let diagnostics = match &result {
            Err(VmError::StepTimeout { .. }) | Err(VmError::Exited(_)) | Err(VmError::Agent { .. }) if measured => {
                Some(diagnose(vm, vp, idx, rec).await?)
            }
            _ => None,
        };
        let error = result.as_ref().err().map(ToString::to_string);
        rec.set_step(&vp.name, idx, |s| {
            s.status = status;
            s.duration_s = took.as_secs_f64();
            s.error = error;
            if let Ok(r) = &result {
                s.exit_code = r.exit_code;
                s.signal = r.signal;
            }
            if let Some((out, err)) = files {
                s.stdout = Some(out);
                s.stderr = Some(err);
            }
            s.diagnostics = diagnostics.clone();
        });
        rec.save()?;
        rec.event(Event::StepFinished { vm: vp.name.clone(), step: st.name.clone(), status, took });
        progress.send_modify(|m| {
            m.insert(key, Ended::with(status));
        });
        match result {
            Err(e) if measured => {
                blocked = Some(match e {
                    VmError::StepTimeout { .. } => format!(
                        "{} {} hung; the guest may be wedged",
                        if matches!(st.kind, StepKind::Action { .. }) { "action" } else { "iteration" },
                        st.name
                    ),
                    _ => format!("the guest died or lost its agent during {}", st.name),
                });
            }
            Err(e) => return Err(RunError::Vm(e)),
            // A measured iteration that failed is an outcome; the next ones still run.
            Ok(_) if status != StepStatus::Passed && !measured => {
                blocked = Some(format!("step {} did not pass", st.name))
            }
            Ok(_) => {}
        }
    }
    if let (Some(a), Some(b)) = (clock_start, vm.clock_sample().await) {
        let host = (b.host_ns - a.host_ns) as f64;
        if host > 0.0 {
            let check = ClockCheck {
                interval_s: host / 1e9,
                offset_s: (a.guest_ns - a.host_ns) as f64 / 1e9,
                drift_ppm: ((b.guest_ns - a.guest_ns) as f64 - host) / host * 1e6,
            };
            rec.set_vm(&vp.name, |v| v.clock = Some(check));
        }
    }
    Ok(())
}

/// Writes a step's stdout and stderr as `vms/<vm>/NN-<step>.stdout|.stderr`; returns
/// their paths relative to the run folder.
fn write_outputs(
    vdir: &Path,
    vm: &str,
    idx: usize,
    step: &str,
    stdout: &[u8],
    stderr: &[u8],
) -> Result<(String, String), RunError> {
    let base = format!("{:02}-{step}", idx + 1);
    let o = vdir.join(format!("{base}.stdout"));
    let e = vdir.join(format!("{base}.stderr"));
    std::fs::write(&o, stdout).map_err(io_err("writing", &o))?;
    std::fs::write(&e, stderr).map_err(io_err("writing", &e))?;
    Ok((format!("vms/{vm}/{base}.stdout"), format!("vms/{vm}/{base}.stderr")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::waits::{START_ALLOWANCE, STEP_ALLOWANCE};

    fn step(after: Vec<Dependency>) -> StepPlan {
        StepPlan::new("s", "true".into(), StepKind::User, Duration::from_secs(1)).after(after)
    }

    fn ended(status: StepStatus) -> Ended {
        Ended::with(status)
    }

    /// Bounds that order nothing: each dependency at most a plan's total, 10 minutes.
    fn unplanned() -> WaitBounds {
        WaitBounds::of(&[crate::run::waits::VmSteps {
            name: "x",
            boot_timeout: Duration::from_secs(600) - START_ALLOWANCE,
            steps: &[],
        }])
    }

    #[tokio::test(start_paused = true)]
    async fn an_ended_dependency_needs_no_pass() {
        let (tx, mut rx) = watch::channel(BTreeMap::new());
        tx.send_modify(|m| {
            m.insert(Dependency::step("a", "m-1"), ended(StepStatus::Failed));
        });
        let waited = wait_deps(&mut rx, &step(vec![Dependency::ended("a", "m-1")]), &unplanned()).await;
        assert!(matches!(waited, Wait::Ready));
        let waited = wait_deps(&mut rx, &step(vec![Dependency::step("a", "m-1")]), &unplanned()).await;
        assert!(matches!(waited, Wait::Failed(why) if why == "dependency a/m-1 failed"));
    }

    #[tokio::test(start_paused = true)]
    async fn a_failed_passed_else_skip_dependency_skips_only_the_step() {
        let (tx, mut rx) = watch::channel(BTreeMap::new());
        tx.send_modify(|m| {
            m.insert(Dependency::step("server", "action-before-1-a-m-1"), ended(StepStatus::Failed));
        });
        let dep = Dependency::passed_else_skip("server", "action-before-1-a-m-1");
        let waited = wait_deps(&mut rx, &step(vec![dep]), &unplanned()).await;
        assert!(matches!(waited, Wait::Skip(why) if why.contains("server/action-before-1-a-m-1")));
    }

    #[tokio::test(start_paused = true)]
    async fn a_step_waiting_for_a_hung_one_is_skipped_naming_the_vm_and_step_that_hung() {
        let (tx, mut rx) = watch::channel(BTreeMap::new());
        tx.send_modify(|m| {
            m.insert(Dependency::step("client-a", "m-1"), ended(StepStatus::TimedOut));
        });
        let waited = wait_deps(&mut rx, &step(vec![Dependency::step("client-a", "m-1")]), &unplanned()).await;
        let Wait::Failed(why) = waited else { panic!("not failed") };
        assert_eq!(why, "dependency client-a/m-1 timed out: VM client-a hung in step m-1");
        // A step not needed (skipped, but going on) lets the steps after it run.
        tx.send_modify(|m| {
            m.insert(Dependency::step("client-a", "m-2"), Ended { go_on: true, status: StepStatus::Skipped });
        });
        let waited = wait_deps(&mut rx, &step(vec![Dependency::step("client-a", "m-2")]), &unplanned()).await;
        assert!(matches!(waited, Wait::Ready));
    }

    /// A sequential measurement: b's iteration waits for a's to end. a's hangs for its
    /// whole timeout (90 s) and more (diagnostics); b's wait, bounded by the latest a's
    /// can end, outlasts it, so the hang is a's and b goes on.
    #[tokio::test(start_paused = true)]
    async fn waiting_for_a_hung_iteration_outlasts_the_iterations_own_timeout() {
        use crate::run::waits::VmSteps;
        let timeout = Duration::from_secs(90);
        let it = |after: Vec<Dependency>| StepPlan::new("m-1", "true".into(), StepKind::User, timeout).after(after);
        let (a, b) = ([it(vec![])], [it(vec![Dependency::ended("a", "m-1")])]);
        let boot_timeout = Duration::from_secs(30);
        let bounds = WaitBounds::of(&[
            VmSteps { name: "a", boot_timeout, steps: &a },
            VmSteps { name: "b", boot_timeout, steps: &b },
        ]);
        let (tx, mut rx) = watch::channel(BTreeMap::new());
        let st = b[0].clone();
        let waiting = tokio::spawn(async move { wait_deps(&mut rx, &st, &bounds).await });
        // a's iteration times out, its diagnostics and partial output take their 60 s,
        // then it ends.
        tokio::time::sleep(timeout + Duration::from_secs(60)).await;
        assert!(!waiting.is_finished(), "b gave up waiting before a's hang ended");
        tx.send_modify(|m| {
            m.insert(Dependency::step("a", "m-1"), ended(StepStatus::TimedOut));
        });
        assert!(matches!(waiting.await.expect("joins"), Wait::Ready));
        // Had a's VM been stuck instead, b would have waited until a/m-1's latest end.
        let latest = boot_timeout + START_ALLOWANCE + timeout + STEP_ALLOWANCE;
        let (_tx, mut rx) = watch::channel(BTreeMap::new());
        let bounds = WaitBounds::of(&[VmSteps { name: "a", boot_timeout, steps: &a }]);
        let before = tokio::time::Instant::now();
        assert!(matches!(wait_deps(&mut rx, &b[0], &bounds).await, Wait::TimedOut(_, l) if l == latest));
        assert_eq!(before.elapsed(), latest);
    }

    #[tokio::test(start_paused = true)]
    async fn a_dependency_that_never_ends_ends_the_wait_at_the_latest_it_could_end() {
        let (tx, mut rx) = watch::channel(BTreeMap::new());
        let dep = Dependency::step("bravo", "t1");
        let before = tokio::time::Instant::now();
        let waited = wait_deps(&mut rx, &step(vec![dep.clone()]), &unplanned()).await;
        assert!(matches!(waited, Wait::TimedOut(ref d, limit) if *d == dep && limit == unplanned().latest_end(&dep)));
        assert_eq!(before.elapsed(), unplanned().latest_end(&dep));
        // One that passes, and one that failed.
        tx.send_modify(|m| {
            m.insert(dep.clone(), ended(StepStatus::Passed));
            m.insert(Dependency::step("bravo", "t2"), ended(StepStatus::Failed));
        });
        assert!(matches!(wait_deps(&mut rx, &step(vec![dep.clone()]), &unplanned()).await, Wait::Ready));
        let failed = wait_deps(&mut rx, &step(vec![dep, Dependency::step("bravo", "t2")]), &unplanned()).await;
        assert!(matches!(failed, Wait::Failed(why) if why.contains("bravo/t2")));
    }

    /// The diagnostics script on the host, with a `dmesg` that prints `log`.
    fn diagnostics_of(since: Option<&str>, log: &str) -> String {
        let script = hang_diagnostics_script(since).replace("/proc/sysrq-trigger", "/dev/null").replace("sleep 1", ":");
        let fake = format!("dmesg() {{ printf '%s' {}; }}\n{script}", crate::plan::shell_quote(log));
        let out = std::process::Command::new("sh").arg("-c").arg(fake).output().expect("sh runs");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    #[test]
    fn a_hangs_kernel_log_starts_where_its_iteration_began() {
        let mark = crate::measure::script::iteration_mark("m-2");
        let log = format!(
            "[0.1] saved boot\n[9.0] {}\n[9.1] first run\n[20.0] {mark}\n[20.5] nfs: server not responding\n",
            crate::measure::script::iteration_mark("m-1")
        );
        let out = diagnostics_of(Some(&mark), &log);
        let dmesg = out.split("== blocked tasks").next().unwrap_or_default();
        assert_eq!(
            dmesg,
            format!(
                "== dmesg since the step began (last 100 lines)\n[20.0] {mark}\n[20.5] nfs: server not responding\n"
            )
        );
        let unmarked = diagnostics_of(Some(&mark), "[0.1] saved boot\n");
        assert!(
            unmarked.starts_with("== dmesg (last 100 lines; no line marks the step's start)\n[0.1] saved boot\n"),
            "{unmarked}"
        );
        assert!(diagnostics_of(None, "x\n").starts_with("== dmesg (last 100 lines)\nx\n"));
    }

    #[test]
    fn the_error_of_a_stuck_dependency_names_the_stuck_vm_first() {
        let e = RunError::DependencyTimeout {
            stuck: "client-a".into(),
            dependency: "client-a/m-1".into(),
            vm: "client-b".into(),
            step: "m-1".into(),
            waited: Duration::from_secs(600),
        };
        assert!(e.to_string().starts_with("VM client-a is stuck: its step client-a/m-1 had not ended 10m"), "{e}");
    }
}
