//! Executing a [`Plan`]: images → network → VMs → steps → results.
//!
//! Everything the run sees is written under its results folder as soon as it is known
//! (step outputs when the step ends, console logs live there while QEMU writes them,
//! `run.json` with status `running` at every milestone), so a failure or an
//! interruption loses nothing. Temp files (sockets, overlays, initrds) live in a
//! private 0700 temp folder. Teardown runs on every path (success, error, Ctrl-C,
//! SIGTERM) in this order: every QEMU is stopped and reaped, then the network
//! namespace's holder ends, then the temp folder is removed, then the final `run.json`
//! is written.

pub mod attach;
pub mod environment;
pub mod images;
pub mod keep;
mod prepare;
pub mod record;
mod resources;
mod scheduler;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use crate::events::{Event, EventSink};
use crate::infra::images::{Cache, CancelFlag, Catalog, ImageError};
use crate::infra::net::{Namespace, NetError};
use crate::infra::qemu::accel::{probe_cached, AccelChoice};
use crate::infra::qemu::args::Accelerator;
use crate::infra::qemu::state::{StateMeta, StateSupport};
use crate::infra::qemu::vm::{Vm, VmError};
use crate::plan::{Plan, StepKind};
use crate::schema::Accel;

pub use keep::Keep;
use record::{write_json, NamespaceRecord, Timings, RUN_SCHEMA};
pub use record::{RunRecord, RunStatus, StepStatus, VmStart};
pub use resources::sweep_stale_temp_dirs;
use resources::{create_temp_dir, Resources};
use scheduler::Recorder;

/// Name of the compiled plan in a run folder.
pub const PLAN_FILE: &str = "plan.json";
/// Name of the run record in a run folder.
pub const RUN_FILE: &str = "run.json";
/// Name of a VM's serial shell socket in its folder of the run's temp folder
/// (`<temp_dir>/<vm>/shell.sock`, see `vmrepro shell`).
pub const SHELL_SOCKET: &str = "shell.sock";

/// Errors that stop a run before or while VMs run (infrastructure failures).
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// Image build or fetch failed.
    #[error("preparing images: {0}")]
    Image(#[from] ImageError),
    /// Network namespace or device setup failed.
    #[error(transparent)]
    Net(#[from] NetError),
    /// A VM failed (didn't boot, QEMU exited, step timeout, agent lost).
    #[error(transparent)]
    Vm(#[from] VmError),
    /// KVM was required but doesn't work here.
    #[error("accel: kvm was requested but {0}")]
    Kvm(String),
    /// The VMs' memory together is more than the host's RAM: they could never all run.
    #[error("the suite's {vms} VMs have {needed_mib} MiB of memory together (vms[].memory), more than this host's {host_mib} MiB of RAM (MemTotal in /proc/meminfo); give the VMs less memory or run the suite on a larger host")]
    HostMemory {
        /// VMs in the suite.
        vms: usize,
        /// Sum of their `memory:`, MiB.
        needed_mib: u64,
        /// The host's RAM, MiB.
        host_mib: u64,
    },
    /// A step's dependency had not finished within the step's timeout.
    #[error("VM {vm}: step {step} waited {} for {dependency}, which had not finished (a step's timeout bounds its wait for `after` too)", humantime::format_duration(*timeout))]
    DependencyTimeout {
        /// VM of the waiting step.
        vm: String,
        /// The waiting step.
        step: String,
        /// What it waited for (`vm/step`).
        dependency: String,
        /// The step's timeout.
        timeout: Duration,
    },
    /// A file to copy into a guest changed after the suite was checked.
    #[error("{} changed since the suite was checked (SHA-256 {planned}, now {now}); run the suite again", path.display())]
    FileChanged {
        /// The file.
        path: PathBuf,
        /// Its hash when the suite was compiled.
        planned: String,
        /// Its hash now.
        now: String,
    },
    /// A JSON file of a run folder doesn't parse.
    #[error("{}: {message}", path.display())]
    Json {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// Writing results or temp files failed.
    #[error("{what} {}: {source}", path.display())]
    Io {
        /// What we were doing.
        what: &'static str,
        /// Path.
        path: PathBuf,
        /// Cause.
        source: std::io::Error,
    },
}

pub(crate) fn io_err<'a>(what: &'static str, path: &'a Path) -> impl FnOnce(std::io::Error) -> RunError + 'a {
    move |source| RunError::Io { what, path: path.to_path_buf(), source }
}

/// Options for [`run`].
#[derive(Clone)]
pub struct RunOptions {
    /// Where run folders go (`<root>/<suite>/<timestamp>/`).
    pub results_root: PathBuf,
    /// Artefact cache.
    pub cache: Cache,
    /// Recipes.
    pub catalog: Catalog,
    /// Progress events.
    pub events: EventSink,
    /// Run folder to use instead of a new timestamped one.
    pub run_dir: Option<PathBuf>,
    /// Boot every VM, and save no VM state (`--fresh-boot`); otherwise a VM whose kind
    /// has a saved state starts from it (see [`crate::infra::qemu::state`]).
    pub fresh_boot: bool,
    /// Bind each QEMU process to one host CPU (`--pin`): the serving VMs to the first,
    /// the others in turn to the rest (see [`crate::infra::qemu::pin`]). With fewer than
    /// two CPUs the run goes on unpinned, with a notice.
    pub pin: bool,
}

impl std::fmt::Debug for RunOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunOptions").field("results_root", &self.results_root).field("cache", &self.cache).finish()
    }
}

/// A finished run.
#[derive(Debug)]
pub struct RunOutcome {
    /// The run folder.
    pub dir: PathBuf,
    /// What `run.json` holds.
    pub record: RunRecord,
}

/// Runs `plan`. Never leaves a QEMU process, namespace or temp folder behind; writes
/// `run.json` whatever happens (except when the run folder itself can't be created).
/// `interrupt` resolves when the user asks to stop (Ctrl-C/SIGTERM): the run then stops
/// at once, shuts its VMs down and records status `interrupted`.
///
/// Errors only when the run folder or the final `run.json` can't be written; every
/// other failure is an outcome with status `infrastructure_error` and its text.
pub async fn run(
    plan: &Plan,
    opts: &RunOptions,
    interrupt: impl std::future::Future<Output = ()>,
) -> Result<RunOutcome, RunError> {
    run_with(plan, opts, interrupt, Keep::Never).await
}

/// How a run was cut short.
#[derive(Debug, Clone, Copy)]
enum Stopped {
    /// SIGINT, SIGTERM or SIGHUP (`interrupt` resolved).
    Signal,
    /// `vmrepro stop` (the control socket).
    Request,
}

/// [`run`], keeping the VMs running after the steps when `keep` says so (see
/// [`keep`]): it then prints how to reach them and returns only once they were
/// stopped (`vmrepro stop`, `interrupt`, or every kept VM exited), after the usual
/// teardown. The run's status is its steps' outcome. `vmrepro stop` also ends a run
/// whose steps still run, as `interrupt` does.
///
/// Errors: as [`run`].
pub async fn run_with(
    plan: &Plan,
    opts: &RunOptions,
    interrupt: impl std::future::Future<Output = ()>,
    keep: Keep,
) -> Result<RunOutcome, RunError> {
    let started = SystemTime::now();
    let t0 = Instant::now();
    let dir = match &opts.run_dir {
        Some(d) => {
            std::fs::create_dir_all(d).map_err(io_err("creating run folder", d))?;
            d.clone()
        }
        None => new_run_dir(&opts.results_root.join(&plan.suite), started)?,
    };
    crate::run::record::write_json(&dir.join(PLAN_FILE), plan)?;
    let record = Arc::new(Mutex::new(RunRecord {
        schema: RUN_SCHEMA,
        suite: plan.suite.clone(),
        suite_file: plan.suite_file.display().to_string(),
        started: humantime::format_rfc3339_seconds(started).to_string(),
        status: RunStatus::Running,
        error: None,
        accel: None,
        accel_notice: None,
        pin_notice: None,
        subnet: plan.subnet.to_string(),
        mtu: plan.mtu,
        temp_dir: None,
        network_namespace: None,
        teardown_problems: vec![],
        images: vec![],
        timings: Timings::default(),
        vms: vec![],
    }));
    let mut res = Resources::default();
    // This run's own flag: an interruption stops its image builds and no one else's.
    let cancel = CancelFlag::new();
    let rec = Recorder { record: record.clone(), dir: dir.clone(), events: opts.events.clone(), t0 };
    // Set by the run's control socket (`vmrepro stop`).
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    tokio::pin!(interrupt);
    let result = {
        let cache = opts.cache.with_cancel(cancel.clone());
        let body = execute(plan, opts, &cache, &rec, &mut res, stop_tx);
        tokio::pin!(body);
        tokio::select! {
            r = &mut body => r.map(|()| None),
            () = &mut interrupt => {
                cancel.cancel();
                Ok(Some(Stopped::Signal))
            }
            () = keep::stop_requested(stop_rx.clone()) => {
                cancel.cancel();
                Ok(Some(Stopped::Request))
            }
        }
    };
    if matches!(result, Ok(None) | Err(_)) {
        let failed = result.is_err() || {
            let r = record.lock().expect("not poisoned");
            r.vms.iter().flat_map(|v| &v.steps).any(|s| s.status != StepStatus::Passed)
        };
        if keep.applies(failed) {
            // A VM whose run was cut short while it saved its state may be stopped, or
            // its migration may still go on: a kept VM must run.
            for vm in res.vms.iter_mut() {
                if !vm.has_exited() {
                    let _ = vm.resume().await;
                }
            }
            let alive = keep::alive(&mut res.vms);
            if alive.is_empty() {
                (opts.events)(Event::Notice("--keep: nothing to keep, every VM has exited".into()));
            } else {
                let steps = keep::steps_summary(&record.lock().expect("not poisoned"));
                (opts.events)(Event::Notice(keep::kept_notice(&dir, &alive, &steps)));
                tokio::select! {
                    () = &mut interrupt => {}
                    () = keep::stop_requested(stop_rx.clone()) => {}
                    () = keep::all_exited(&mut res.vms) => {
                        (opts.events)(Event::Notice("every kept VM has exited".into()));
                    }
                }
            }
        }
    }
    // Answered once run.json is final.
    let control = res.control.take();
    // Teardown, whatever happened above: every VM, then the namespace, then temp files.
    if !res.vms.is_empty() {
        (opts.events)(Event::TearingDown);
    }
    let t_down = Instant::now();
    let endings =
        futures::future::join_all(res.vms.iter_mut().map(|vm| async { (vm.name.clone(), vm.shutdown().await) })).await;
    let problems = res.release();
    for p in &problems {
        (opts.events)(Event::Notice(format!("warning: {p}")));
    }
    let mut rec = record.lock().expect("not poisoned").clone();
    rec.teardown_problems = problems;
    for (name, ending) in endings {
        if let Some(v) = rec.vms.iter_mut().find(|v| v.name == name) {
            v.ending = Some(ending);
        }
    }
    rec.timings.teardown_s = t_down.elapsed().as_secs_f64();
    rec.timings.total_s = t0.elapsed().as_secs_f64();
    match &result {
        Ok(Some(how)) => {
            rec.status = RunStatus::Interrupted;
            rec.error = Some(
                match how {
                    Stopped::Signal => {
                        "the run was interrupted (SIGINT/SIGTERM/SIGHUP); results collected so far are kept"
                    }
                    Stopped::Request => "the run was stopped (`vmrepro stop`); results collected so far are kept",
                }
                .into(),
            );
            mark_unfinished(
                &mut rec,
                "the run was interrupted before this step",
                "the run was interrupted while this step ran",
            );
        }
        Ok(None) => {
            // Measured iterations are judged by the analysis (a failed, hung or crashed
            // iteration is an outcome of its VM, compared across VMs); every other step
            // must pass.
            let failed = rec
                .vms
                .iter()
                .flat_map(|v| &v.steps)
                .any(|s| s.status != StepStatus::Passed && !matches!(s.kind, StepKind::Measure { .. }));
            rec.status = if failed { RunStatus::Failed } else { RunStatus::Passed };
        }
        Err(e) => {
            rec.status = RunStatus::InfrastructureError;
            rec.error = Some(e.to_string());
            let first = e.to_string().lines().next().unwrap_or_default().to_string();
            mark_unfinished(
                &mut rec,
                "the run stopped before this step",
                &format!("the run stopped while this step ran ({first})"),
            );
        }
    }
    write_json(&dir.join(RUN_FILE), &rec)?;
    if let Some(c) = control {
        let status = serde_json::to_value(rec.status).ok().and_then(|v| v.as_str().map(str::to_string));
        c.finish(status.as_deref().unwrap_or("?")).await;
    }
    Ok(RunOutcome { dir, record: rec })
}

/// Explains steps that did not run (`skipped`: `before`) or were cut short (`running`
/// → `cancelled`: `during`).
fn mark_unfinished(rec: &mut RunRecord, before: &str, during: &str) {
    for v in &mut rec.vms {
        for s in &mut v.steps {
            if s.status == StepStatus::Skipped && s.error.is_none() {
                s.error = Some(before.to_string());
            }
            if s.status == StepStatus::Running {
                s.status = StepStatus::Cancelled;
                s.error = Some(during.to_string());
            }
        }
    }
}

fn new_run_dir(base: &Path, started: SystemTime) -> Result<PathBuf, RunError> {
    std::fs::create_dir_all(base).map_err(io_err("creating results folder", base))?;
    let stamp: String =
        humantime::format_rfc3339_seconds(started).to_string().chars().filter(|c| *c != ':' && *c != '-').collect();
    for n in 0..1000 {
        let name = if n == 0 { stamp.clone() } else { format!("{stamp}-{n}") };
        let d = base.join(name);
        match std::fs::create_dir(&d) {
            Ok(()) => return Ok(d),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(RunError::Io { what: "creating run folder", path: d, source: e }),
        }
    }
    Err(RunError::Io {
        what: "creating run folder",
        path: base.to_path_buf(),
        source: std::io::Error::other("too many runs in the same second"),
    })
}

async fn execute(
    plan: &Plan,
    opts: &RunOptions,
    cache: &Cache,
    rec: &Recorder,
    res: &mut Resources,
    stop: tokio::sync::watch::Sender<bool>,
) -> Result<(), RunError> {
    let events = &opts.events;
    check_host_memory(plan, host_memory_mib())?;
    let t_img = Instant::now();
    let mut images = images::resolve(plan, cache, &opts.catalog, events).await;
    {
        let mut r = rec.record.lock().expect("not poisoned");
        r.timings.images_s = t_img.elapsed().as_secs_f64();
        r.images = std::mem::take(&mut images.records);
    }
    if !images.failures.is_empty() {
        return Err(RunError::Image(images.failures.remove(0).1));
    }
    // What a published report says about the host, the tools and the inputs.
    let env = environment::collect(plan, &opts.catalog, cache, &images.kernels, &images.rootfs);
    write_json(&rec.dir.join(environment::ENVIRONMENT_FILE), &env)?;
    res.holds.extend(images.kernels.values().map(|k| k.hold.clone()));
    res.holds.extend(images.rootfs.values().map(|r| r.hold.clone()));
    rec.save()?;

    let t_boot = Instant::now();
    let accel_for = choose_accel(plan, &images.kernels[&plan.vms[0].kernel.label()].image, cache, rec).await?;
    rec.record.lock().expect("not poisoned").accel = Some(accel_for(plan.vms[0].accel));

    // Private temp folder and namespace, kept in `res` so that they outlive every QEMU
    // (see `run`).
    let tmp_root = std::env::temp_dir();
    for stale in sweep_stale_temp_dirs(&tmp_root) {
        events(Event::Notice(format!(
            "notice: removed {}, the temp folder of an earlier run whose runner was killed",
            stale.display()
        )));
    }
    let (tmp, tmp_lock) = create_temp_dir(&tmp_root)?;
    let tmp_path = tmp.path().to_path_buf();
    res.tmp = Some(tmp);
    res.tmp_lock = Some(tmp_lock);
    res.control = Some(keep::Control::bind(&tmp_path, stop).map_err(io_err("listening on", &tmp_path))?);
    rec.record.lock().expect("not poisoned").temp_dir = Some(tmp_path.display().to_string());
    let t_net = Instant::now();
    let ns = res.ns.insert(Namespace::create()?);
    rec.record.lock().expect("not poisoned").network_namespace =
        Some(NamespaceRecord { holder_pid: ns.holder_pid(), inode: ns.inode() });
    let taps: Vec<String> = (0..plan.vms.len()).map(|i| format!("tap{i}")).collect();
    ns.create_bridge("br0", plan.mtu, &taps)?;
    rec.record.lock().expect("not poisoned").timings.network_s = t_net.elapsed().as_secs_f64();
    let (ns, vms) = (&*ns, &mut res.vms);

    let states = if opts.fresh_boot {
        None
    } else {
        match StateSupport::probe(&env.host.qemu_version, &env.host.kernel) {
            Ok(s) => Some(s),
            Err(why) => {
                events(Event::Notice(format!("notice: {why}")));
                None
            }
        }
    };
    let pinned = if opts.pin { pin_vms(plan, rec) } else { vec![None; plan.vms.len()] };
    let mut starts = Vec::new();
    for (i, v) in plan.vms.iter().enumerate() {
        let kernel = &images.kernels[&v.kernel.label()];
        let rootfs = &images.rootfs[&v.rootfs_request().id()];
        let inputs = prepare::Inputs {
            plan,
            run_dir: &rec.dir,
            tmp_dir: &tmp_path,
            kernel,
            rootfs,
            tap: &taps[i],
            accel: accel_for(v.accel),
            cache,
            states: states.as_ref(),
            pinned_cpu: pinned[i],
        };
        let p = prepare::prepare_vm(v, &inputs)?;
        if let Some(n) = &p.notice {
            events(Event::Notice(n.clone()));
        }
        let hold: scheduler::StateHold = Arc::new(Mutex::new(p.restore_hold));
        res.state_holds.push(hold.clone());
        starts.push(scheduler::StartPlan {
            cache,
            ns,
            state_key: p.state_key.clone(),
            boot_config: p.boot_config.clone(),
            hold,
            cmdline_file: p.cmdline_file.clone(),
            meta: StateMeta {
                kernel_release: kernel.release.clone(),
                rootfs: rootfs.name.clone(),
                memory_mib: v.memory_mib,
                saved_from: format!("{}/{}", plan.suite, v.name),
                ram_bytes: 0,
                took_s: 0.0,
            },
            cidr: p.record.address.clone(),
            mtu: plan.mtu,
        });
        rec.record.lock().expect("not poisoned").vms.push(p.record);
        let vdir = rec.dir.join("vms").join(&v.name);
        let vm = Vm::spawn(&p.config, ns, &vdir.join("qemu.stderr"))?;
        rec.set_vm(&v.name, |r| r.pid = Some(vm.pid() as u32));
        vms.push(vm);
        events(Event::VmStarted { vm: v.name.clone(), restoring: p.config.incoming.is_some() });
    }
    rec.save()?;

    let (progress, _) = tokio::sync::watch::channel(BTreeMap::new());
    let booted_at: Mutex<Option<Instant>> = Mutex::new(None);
    let result = futures::future::try_join_all(
        vms.iter_mut()
            .zip(&plan.vms)
            .zip(&starts)
            .map(|((vm, vp), start)| scheduler::run_vm(vm, vp, &progress, rec, &booted_at, start)),
    )
    .await
    .map(|_| ());
    {
        let mut r = rec.record.lock().expect("not poisoned");
        let booted = booted_at.lock().expect("not poisoned").unwrap_or_else(Instant::now);
        r.timings.boot_s = booted.duration_since(t_boot).as_secs_f64();
        r.timings.steps_s = booted.elapsed().as_secs_f64();
    }
    result
}

/// The host's RAM in MiB (`MemTotal` of `/proc/meminfo`), or `None` if unreadable.
fn host_memory_mib() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let kib = text.lines().find_map(|l| l.strip_prefix("MemTotal:"))?.trim().strip_suffix("kB")?.trim();
    Some(kib.parse::<u64>().ok()? / 1024)
}

/// Refuses a plan whose VMs' `memory:` adds up to more than `host_mib` (checked before
/// any image is built: such a run could only end in the host's OOM killer). Guests
/// touch only what they use, so a plan below the host's RAM may still run short of it.
/// Nothing is checked when the host's RAM is unknown.
///
/// Errors: [`RunError::HostMemory`].
fn check_host_memory(plan: &Plan, host_mib: Option<u64>) -> Result<(), RunError> {
    let needed_mib = plan.vms.iter().map(|v| v.memory_mib).fold(0u64, u64::saturating_add);
    match host_mib {
        Some(host_mib) if needed_mib > host_mib => {
            Err(RunError::HostMemory { vms: plan.vms.len(), needed_mib, host_mib })
        }
        _ => Ok(()),
    }
}

/// Each VM's host CPU for `--pin` (see [`crate::infra::qemu::pin`]): a VM with a server
/// profile serves. Says where each VM runs in a notice, or why none is pinned.
fn pin_vms(plan: &Plan, rec: &Recorder) -> Vec<Option<usize>> {
    use crate::infra::qemu::pin;
    let events = &rec.events;
    let serves: Vec<bool> = plan.vms.iter().map(|v| v.profile.is_some()).collect();
    match pin::allowed_cpus().and_then(|cpus| pin::assign(&serves, &cpus)) {
        Ok(cpus) => {
            let each: Vec<String> = plan.vms.iter().zip(&cpus).map(|(v, c)| format!("{} on CPU {c}", v.name)).collect();
            events(Event::Notice(format!("notice: --pin: {}", each.join(", "))));
            cpus.into_iter().map(Some).collect()
        }
        Err(e) => {
            events(Event::Notice(format!("notice: {e}")));
            rec.record.lock().expect("not poisoned").pin_notice = Some(e.to_string());
            vec![None; plan.vms.len()]
        }
    }
}

/// Probes KVM once (with `kernel`, the first VM's) if any VM may use it, and returns how
/// a VM's requested [`Accel`] maps to the accelerator used. A fallback to TCG is noticed
/// once and recorded.
///
/// Errors: [`RunError::Kvm`] when a VM requires KVM and it doesn't work here.
async fn choose_accel(
    plan: &Plan,
    kernel: &Path,
    cache: &Cache,
    rec: &Recorder,
) -> Result<impl Fn(Accel) -> Accelerator, RunError> {
    let mut choice: Option<AccelChoice> = None;
    if plan.vms.iter().any(|v| v.accel != Accel::Tcg) {
        let c = probe_cached(kernel, &cache.root().join("accel-probe.json")).await;
        if let Some(why) = &c.fallback_reason {
            if plan.vms.iter().any(|v| v.accel == Accel::Kvm) {
                return Err(RunError::Kvm(why.clone()));
            }
            let notice = format!("notice: KVM not usable here ({why}); using TCG (software emulation)");
            (rec.events)(Event::Notice(notice.clone()));
            rec.record.lock().expect("not poisoned").accel_notice = Some(notice);
        }
        choice = Some(c);
    }
    Ok(move |a: Accel| match a {
        Accel::Tcg => Accelerator::Tcg,
        _ => choice.as_ref().map_or(Accelerator::Tcg, |c| c.accel),
    })
}
