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

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use serde::Serialize;
use tokio::sync::watch;

use crate::events::{Event, EventSink};
use crate::images::kernel::{resolve_kernel, KernelArtifact, KernelSource};
use crate::images::rootfs::{resolve_rootfs, RootfsArtifact};
use crate::images::{Cache, CacheOutcome, Catalog, ImageError};
use crate::net::{mac_for, Namespace, NetError};
use crate::plan::{Plan, StepKind, StepPlan};
use crate::qemu::accel::{probe_cached, AccelChoice};
use crate::qemu::args::{kernel_cmdline, qemu_args, shell_line, Accelerator, QemuConfig};
use crate::qemu::vm::{Ending, Vm, VmError};
use crate::spec::Accel;

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

fn io_err<'a>(what: &'static str, path: &'a Path) -> impl FnOnce(std::io::Error) -> RunError + 'a {
    move |source| RunError::Io { what, path: path.to_path_buf(), source }
}

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    /// Every step exited as expected.
    Passed,
    /// A step exited with an unexpected status (a test failure).
    Failed,
    /// The run couldn't complete (image, network, VM or agent failure).
    InfrastructureError,
    /// Ctrl-C or SIGTERM.
    Interrupted,
    /// The run is still going: only in a `run.json` written while it runs (or left by a
    /// runner that was killed with SIGKILL).
    Running,
}

/// Outcome of one step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StepStatus {
    /// Exited with the expected status.
    Passed,
    /// Exited with another status, or was killed by a signal.
    Failed,
    /// Not run: an earlier step of its VM or a dependency did not pass.
    Skipped,
    /// Hit its timeout.
    TimedOut,
    /// The VM or its agent failed during the step.
    Error,
    /// The step is running: only in a `run.json` written while the run is going.
    Running,
    /// The step was running when the run stopped (another VM failed, or an
    /// interruption); its output is lost with the guest.
    Cancelled,
}

/// One step as recorded in `run.json`.
#[derive(Debug, Clone, Serialize)]
pub struct StepRecord {
    /// Step name.
    pub name: String,
    /// Purpose.
    #[serde(flatten)]
    pub kind: StepKind,
    /// Outcome.
    pub status: StepStatus,
    /// Exit status, when it exited.
    pub exit_code: Option<i64>,
    /// Signal, when killed.
    pub signal: Option<i64>,
    /// Expected exit status.
    pub expect_exit: i32,
    /// Wall time in seconds (host clock, includes agent round trips).
    pub duration_s: f64,
    /// stdout file, relative to the run folder.
    pub stdout: Option<String>,
    /// stderr file, relative to the run folder.
    pub stderr: Option<String>,
    /// Error text for `error`/`timed_out`/`skipped`.
    pub error: Option<String>,
    /// Captured stdout (not serialized; for in-process analysis).
    #[serde(skip)]
    pub stdout_text: String,
    /// Whether the suite asked for this step's stdout in its snapshot.
    #[serde(skip)]
    pub snapshot: bool,
}

/// One VM as recorded in `run.json`.
#[derive(Debug, Clone, Serialize)]
pub struct VmRecord {
    /// Name.
    pub name: String,
    /// Kernel source.
    pub kernel: String,
    /// `uname -r` of the booted kernel (from the kernel image).
    pub kernel_release: String,
    /// Address/prefix.
    pub address: String,
    /// MAC.
    pub mac: String,
    /// Tap device in the namespace.
    pub tap: String,
    /// Acceleration used.
    pub accel: Accelerator,
    /// QEMU's PID (also its process group) while it ran.
    pub pid: Option<u32>,
    /// QEMU start → guest agent answered, seconds.
    pub boot_s: Option<f64>,
    /// How QEMU ended.
    pub ending: Option<Ending>,
    /// Files, relative to the run folder.
    pub console_log: String,
    /// The exact QEMU command line.
    pub qemu_cmdline: String,
    /// Steps in plan order.
    pub steps: Vec<StepRecord>,
    /// Guest clock against the host's over the run (from `guest-get-time`).
    pub clock: Option<ClockCheck>,
}

/// How the guest's clock kept time against the host's between the guest agent's first
/// answer and the VM's last step. A too-lean kernel config (no stable clocksource)
/// shows here as a drift of thousands of ppm.
#[derive(Debug, Clone, Serialize)]
pub struct ClockCheck {
    /// Host seconds between the two samples.
    pub interval_s: f64,
    /// Guest clock minus host clock at the first sample, seconds.
    pub offset_s: f64,
    /// (guest interval − host interval) / host interval, in parts per million.
    pub drift_ppm: f64,
}

/// One image as recorded in `run.json`.
#[derive(Debug, Clone, Serialize)]
pub struct ImageRecord {
    /// Description.
    pub what: String,
    /// Cache key.
    pub key: String,
    /// Cached or built.
    pub outcome: CacheOutcome,
    /// Seconds.
    pub seconds: f64,
}

/// Wall time of the run's phases, seconds.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Timings {
    /// Image resolution (fetch/build or cache hits).
    pub images_s: f64,
    /// Accel probe, network, QEMU start → every agent answered.
    pub boot_s: f64,
    /// Steps.
    pub steps_s: f64,
    /// Shutdown.
    pub teardown_s: f64,
    /// Whole run.
    pub total_s: f64,
}

/// `run.json`: the machine-readable summary of a run.
#[derive(Debug, Clone, Serialize)]
pub struct RunRecord {
    /// Schema version of this file.
    pub schema: u32,
    /// Suite name.
    pub suite: String,
    /// Suite file.
    pub suite_file: String,
    /// Start time (RFC 3339, UTC).
    pub started: String,
    /// Outcome.
    pub status: RunStatus,
    /// Error text for infrastructure errors and interruptions.
    pub error: Option<String>,
    /// Accelerator used and why (for fallbacks).
    pub accel: Option<Accelerator>,
    /// The fallback notice, if any.
    pub accel_notice: Option<String>,
    /// Bridge subnet.
    pub subnet: String,
    /// MTU.
    pub mtu: u32,
    /// The run's private 0700 temp folder (QMP/QGA sockets, overlays, initrds); removed
    /// at the end of the run.
    pub temp_dir: Option<String>,
    /// The run's private network namespace (gone at the end of the run).
    pub network_namespace: Option<NamespaceRecord>,
    /// Things teardown could not clean up (empty when everything was removed).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub teardown_problems: Vec<String>,
    /// Images used.
    pub images: Vec<ImageRecord>,
    /// Phase timings.
    pub timings: Timings,
    /// VMs.
    pub vms: Vec<VmRecord>,
}

/// The run's network namespace as recorded in `run.json`, to check that it is gone.
#[derive(Debug, Clone, Serialize)]
pub struct NamespaceRecord {
    /// PID of the process that held it.
    pub holder_pid: u32,
    /// Inode of the namespace (as in `/proc/<pid>/ns/net` → `net:[<inode>]`).
    pub inode: u64,
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
    let started = SystemTime::now();
    let t0 = Instant::now();
    let dir = match &opts.run_dir {
        Some(d) => {
            std::fs::create_dir_all(d).map_err(io_err("creating run folder", d))?;
            d.clone()
        }
        None => new_run_dir(&opts.results_root.join(&plan.suite), started)?,
    };
    let record = Arc::new(Mutex::new(RunRecord {
        schema: 1,
        suite: plan.suite.clone(),
        suite_file: plan.suite_file.display().to_string(),
        started: humantime::format_rfc3339_seconds(started).to_string(),
        status: RunStatus::Running,
        error: None,
        accel: None,
        accel_notice: None,
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
    let result = {
        let body = execute(plan, opts, &dir, &record, &mut res);
        tokio::pin!(body);
        tokio::select! {
            r = &mut body => r.map(|()| false),
            () = interrupt => {
                crate::images::cancel_builds();
                Ok(true)
            }
        }
    };
    // Teardown, whatever happened above: every VM, then the namespace, then temp files.
    (opts.events)(Event::TearingDown);
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
        Ok(true) => {
            rec.status = RunStatus::Interrupted;
            rec.error =
                Some("the run was interrupted (SIGINT/SIGTERM/SIGHUP); results collected so far are kept".into());
            mark_unfinished(
                &mut rec,
                "the run was interrupted before this step",
                "the run was interrupted while this step ran",
            );
        }
        Ok(false) => {
            let failed = rec.vms.iter().flat_map(|v| &v.steps).any(|s| s.status != StepStatus::Passed);
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
    write_json(&dir.join("run.json"), &rec)?;
    Ok(RunOutcome { dir, record: rec })
}

/// What a run holds outside its results folder. [`Resources::release`] (after every VM
/// was shut down) ends the namespace, then removes the temp folder: QEMU never runs
/// without its sockets, overlay or network.
#[derive(Debug, Default)]
struct Resources {
    vms: Vec<Vm>,
    ns: Option<Namespace>,
    tmp: Option<tempfile::TempDir>,
    /// The lock on the temp folder (see [`create_temp_dir`]), held until it is removed.
    tmp_lock: Option<nix::fcntl::Flock<std::fs::File>>,
}

impl Resources {
    /// Drops the (already shut down) VMs, the namespace and the temp folder; returns what
    /// could not be cleaned up.
    fn release(&mut self) -> Vec<String> {
        let mut problems = Vec::new();
        self.vms.clear();
        // Ends (and reaps) the holder; the namespace goes with the last QEMU in it.
        drop(self.ns.take());
        if let Some(tmp) = self.tmp.take() {
            let path = tmp.path().to_path_buf();
            if let Err(e) = tmp.close() {
                problems.push(format!("cannot remove the temp folder {}: {e}", path.display()));
            }
        }
        self.tmp_lock = None;
        problems
    }
}

/// Name of the lock file in a run's temp folder.
const TEMP_LOCK: &str = "run.lock";
/// Prefix of a run's temp folder name.
const TEMP_PREFIX: &str = "vmrepro-run-";

/// Creates the run's private temp folder in `root` (mode 0700 from the start:
/// tempfile's default would be 0777 & ~umask) holding `run.lock`, locked (`flock`) for
/// as long as the run lives. A folder whose lock nobody holds belongs to a runner that
/// died without cleaning up (SIGKILL, power loss): [`sweep_stale_temp_dirs`] removes it.
///
/// Errors: [`RunError::Io`] naming the folder or lock file.
fn create_temp_dir(root: &Path) -> Result<(tempfile::TempDir, nix::fcntl::Flock<std::fs::File>), RunError> {
    let tmp = tempfile::Builder::new()
        .prefix(TEMP_PREFIX)
        .permissions(std::os::unix::fs::PermissionsExt::from_mode(0o700))
        .tempdir_in(root)
        .map_err(io_err("creating temp folder in", root))?;
    // Locked under another name, then renamed: a sweeper never sees an unlocked lock.
    let staging = tmp.path().join(".run.lock.new");
    let file = std::fs::File::create(&staging).map_err(io_err("creating", &staging))?;
    let lock = nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusiveNonblock)
        .map_err(|(_, e)| RunError::Io { what: "locking", path: staging.clone(), source: e.into() })?;
    let path = tmp.path().join(TEMP_LOCK);
    std::fs::rename(&staging, &path).map_err(io_err("creating", &path))?;
    Ok((tmp, lock))
}

/// Removes the temp folders (`vmrepro-run-*` in `root`, ours) of runs whose runner died
/// without cleaning up: their `run.lock` is held by no one. Folders without a lock file
/// (being created, or made by an older version) are left alone. Returns the folders
/// removed; errors are ignored (the next run tries again).
pub fn sweep_stale_temp_dirs(root: &Path) -> Vec<PathBuf> {
    use std::os::unix::fs::MetadataExt;
    let uid = nix::unistd::geteuid().as_raw();
    let mut removed = Vec::new();
    let Ok(rd) = std::fs::read_dir(root) else { return removed };
    for e in rd.flatten() {
        let path = e.path();
        let ours = e.file_name().to_string_lossy().starts_with(TEMP_PREFIX)
            && std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_dir() && m.uid() == uid);
        if !ours {
            continue;
        }
        let Ok(file) = std::fs::File::open(path.join(TEMP_LOCK)) else { continue };
        if let Ok(_lock) = nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusiveNonblock) {
            if std::fs::remove_dir_all(&path).is_ok() {
                removed.push(path);
            }
        }
    }
    removed
}

/// Writes `run.json` as it is now (status `running`).
fn save_progress(dir: &Path, record: &Mutex<RunRecord>) -> Result<(), RunError> {
    let r = record.lock().expect("not poisoned");
    write_json(&dir.join("run.json"), &*r)
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

/// Writes `value` as pretty JSON to `path` atomically (temp name, then rename).
pub fn write_json<T: Serialize>(path: &Path, value: &T) -> Result<(), RunError> {
    let tmp = path.with_extension("json.tmp");
    let text = serde_json::to_string_pretty(value).expect("serializable") + "\n";
    std::fs::write(&tmp, text).map_err(io_err("writing", &tmp))?;
    std::fs::rename(&tmp, path).map_err(io_err("writing", path))
}

async fn resolve_images(
    plan: &Plan,
    opts: &RunOptions,
) -> Result<(HashMap<String, KernelArtifact>, HashMap<String, RootfsArtifact>, Vec<ImageRecord>), RunError> {
    let mut kernels: Vec<KernelSource> = Vec::new();
    for v in &plan.vms {
        if !kernels.contains(&v.kernel) {
            kernels.push(v.kernel.clone());
        }
    }
    let mut rootfses: Vec<String> = plan.vms.iter().map(|v| v.rootfs.clone()).collect();
    rootfses.sort();
    rootfses.dedup();

    let events = opts.events.clone();
    let timed = move |what: String, f: Box<dyn FnOnce() -> Result<(String, CacheOutcome), ImageError> + Send>| {
        let events = events.clone();
        tokio::task::spawn_blocking(move || {
            events(Event::ImageStarted { what: what.clone() });
            let t = Instant::now();
            let r = f();
            if let Ok((_, outcome)) = &r {
                events(Event::ImageReady {
                    what: what.clone(),
                    cached: *outcome == CacheOutcome::Cached,
                    took: t.elapsed(),
                });
            }
            r.map(|(key, outcome)| ImageRecord { what, key, outcome, seconds: t.elapsed().as_secs_f64() })
        })
    };
    let kernel_arts: Arc<Mutex<HashMap<String, KernelArtifact>>> = Arc::default();
    let rootfs_arts: Arc<Mutex<HashMap<String, RootfsArtifact>>> = Arc::default();
    let mut tasks = Vec::new();
    for k in kernels {
        let (cache, arts, label) = (opts.cache.clone(), kernel_arts.clone(), k.label());
        tasks.push(timed(
            label.clone(),
            Box::new(move || {
                let (a, o) = resolve_kernel(&cache, &k)?;
                let key = a.key.clone();
                arts.lock().expect("not poisoned").insert(label, a);
                Ok((key, o))
            }),
        ));
    }
    for r in rootfses {
        let (cache, catalog, arts) = (opts.cache.clone(), opts.catalog.clone(), rootfs_arts.clone());
        tasks.push(timed(
            format!("rootfs {r}"),
            Box::new(move || {
                let (a, o) = resolve_rootfs(&cache, &catalog, &r)?;
                let key = a.key.clone();
                arts.lock().expect("not poisoned").insert(r, a);
                Ok((key, o))
            }),
        ));
    }
    let mut records = Vec::new();
    for t in futures::future::join_all(tasks).await {
        records.push(t.expect("image task panicked")?);
    }
    let k = std::mem::take(&mut *kernel_arts.lock().expect("not poisoned"));
    let r = std::mem::take(&mut *rootfs_arts.lock().expect("not poisoned"));
    Ok((k, r, records))
}

async fn execute(
    plan: &Plan,
    opts: &RunOptions,
    dir: &Path,
    record: &Arc<Mutex<RunRecord>>,
    res: &mut Resources,
) -> Result<(), RunError> {
    let events = &opts.events;
    let t_img = Instant::now();
    let resolved = resolve_images(plan, opts).await;
    record.lock().expect("not poisoned").timings.images_s = t_img.elapsed().as_secs_f64();
    let (kernels, rootfses, images) = resolved?;
    record.lock().expect("not poisoned").images = images;
    save_progress(dir, record)?;

    let t_boot = Instant::now();
    // Acceleration: probe once, with the first VM's kernel, if any VM may use KVM.
    let mut choice: Option<AccelChoice> = None;
    if plan.vms.iter().any(|v| v.accel != Accel::Tcg) {
        let k = &kernels[&plan.vms[0].kernel.label()];
        let c = probe_cached(&k.image, &opts.cache.root().join("accel-probe.json")).await;
        if let Some(why) = &c.fallback_reason {
            if plan.vms.iter().any(|v| v.accel == Accel::Kvm) {
                return Err(RunError::Kvm(why.clone()));
            }
            let notice = format!("notice: KVM not usable here ({why}); using TCG (software emulation)");
            events(Event::Notice(notice.clone()));
            record.lock().expect("not poisoned").accel_notice = Some(notice);
        }
        choice = Some(c);
    }
    let accel_for = |a: Accel| match a {
        Accel::Tcg => Accelerator::Tcg,
        _ => choice.as_ref().map_or(Accelerator::Tcg, |c| c.accel),
    };
    record.lock().expect("not poisoned").accel = Some(accel_for(plan.vms[0].accel));

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
    record.lock().expect("not poisoned").temp_dir = Some(tmp_path.display().to_string());
    let ns = res.ns.insert(Namespace::create()?);
    record.lock().expect("not poisoned").network_namespace =
        Some(NamespaceRecord { holder_pid: ns.holder_pid(), inode: ns.inode() });
    let taps: Vec<String> = (0..plan.vms.len()).map(|i| format!("tap{i}")).collect();
    ns.create_bridge("br0", plan.mtu, &taps)?;
    let (ns, vms) = (&*ns, &mut res.vms);

    for (i, v) in plan.vms.iter().enumerate() {
        let vdir = dir.join("vms").join(&v.name);
        std::fs::create_dir_all(&vdir).map_err(io_err("creating VM results folder", &vdir))?;
        let tdir = tmp_path.join(&v.name);
        std::os::unix::fs::DirBuilderExt::mode(&mut std::fs::DirBuilder::new(), 0o700)
            .create(&tdir)
            .map_err(io_err("creating VM temp folder", &tdir))?;
        let kernel = &kernels[&v.kernel.label()];
        let rootfs = &rootfses[&v.rootfs];
        let overlay = tdir.join("root.qcow2");
        let out = std::process::Command::new("qemu-img")
            .args(["create", "-q", "-f", "qcow2", "-F", "raw", "-b"])
            .arg(&rootfs.image)
            .arg(&overlay)
            .output()
            .map_err(io_err("running qemu-img for", &overlay))?;
        if !out.status.success() {
            return Err(RunError::Io {
                what: "creating overlay",
                path: overlay,
                source: std::io::Error::other(String::from_utf8_lossy(&out.stderr).trim().to_string()),
            });
        }
        let initrd = tdir.join("initrd.cpio");
        crate::images::initramfs::concat(&[&rootfs.initramfs_base, &kernel.initramfs_modules], &initrd)
            .map_err(io_err("writing initrd", &initrd))?;
        let cidr = format!("{}/{}", v.address, plan.subnet.prefix_len());
        let config = QemuConfig {
            name: v.name.clone(),
            memory_mib: v.memory_mib,
            cpus: v.cpus,
            accel: accel_for(v.accel),
            kernel: kernel.image.clone(),
            initrd,
            append: kernel_cmdline(&v.name, &cidr, plan.mtu, v.cmdline.as_deref()),
            root_overlay: overlay,
            modules_disk: kernel.modules_disk.clone(),
            tap: taps[i].clone(),
            mac: mac_for(&plan.suite, &v.name),
            qmp_socket: tdir.join("qmp.sock"),
            qga_socket: tdir.join("qga.sock"),
            console_log: vdir.join("console.log"),
        };
        let cmdline = shell_line(&crate::qemu::qemu_binary(), &qemu_args(&config));
        std::fs::write(vdir.join("qemu-cmdline.txt"), format!("{cmdline}\n")).map_err(io_err("writing", &vdir))?;
        record.lock().expect("not poisoned").vms.push(VmRecord {
            name: v.name.clone(),
            kernel: v.kernel.label(),
            kernel_release: kernel.release.clone(),
            address: cidr,
            mac: config.mac.clone(),
            tap: config.tap.clone(),
            accel: config.accel,
            pid: None,
            boot_s: None,
            ending: None,
            console_log: format!("vms/{}/console.log", v.name),
            qemu_cmdline: format!("vms/{}/qemu-cmdline.txt", v.name),
            clock: None,
            steps: v
                .steps
                .iter()
                .map(|s| StepRecord {
                    name: s.name.clone(),
                    kind: s.kind.clone(),
                    status: StepStatus::Skipped,
                    exit_code: None,
                    signal: None,
                    expect_exit: s.expect_exit,
                    duration_s: 0.0,
                    stdout: None,
                    stderr: None,
                    error: None,
                    stdout_text: String::new(),
                    snapshot: s.snapshot,
                })
                .collect(),
        });
        let vm = Vm::spawn(&config, ns, &vdir.join("qemu.stderr"))?;
        set_vm(record, &v.name, |r| r.pid = Some(vm.pid() as u32));
        vms.push(vm);
        events(Event::VmStarted { vm: v.name.clone() });
    }
    save_progress(dir, record)?;

    // Shared progress: which VMs are up and which steps passed, for `after`.
    let (tx, rx) = watch::channel(BTreeMap::<String, bool>::new());
    let tx = Arc::new(tx);
    let t_boot_done: Arc<Mutex<Option<Instant>>> = Arc::default();
    let futs = vms.iter_mut().zip(&plan.vms).map(|(vm, vp)| {
        let (tx, mut rx, record, events, t_boot_done) =
            (tx.clone(), rx.clone(), record.clone(), events.clone(), t_boot_done.clone());
        let vdir = dir.join("vms").join(&vp.name);
        async move {
            let took = match vm.wait_ready(vp.boot_timeout).await {
                Ok(t) => t,
                Err(e) => {
                    tx.send_modify(|m| {
                        m.insert(vp.name.clone(), false);
                    });
                    return Err(RunError::Vm(e));
                }
            };
            *t_boot_done.lock().expect("not poisoned") = Some(Instant::now());
            events(Event::VmReady { vm: vp.name.clone(), took });
            set_vm(&record, &vp.name, |v| v.boot_s = Some(took.as_secs_f64()));
            let clock_start = vm.clock_sample().await;
            save_progress(dir, &record)?;
            tx.send_modify(|m| {
                m.insert(vp.name.clone(), true);
            });
            let mut blocked: Option<String> = None;
            for (idx, st) in vp.steps.iter().enumerate() {
                let key = format!("{}/{}", vp.name, st.name);
                if blocked.is_none() {
                    blocked = wait_deps(&mut rx, st).await;
                }
                if let Some(why) = &blocked {
                    set_step(&record, &vp.name, idx, |s| s.error = Some(why.clone()));
                    tx.send_modify(|m| {
                        m.insert(key, false);
                    });
                    events(Event::StepFinished {
                        vm: vp.name.clone(),
                        step: st.name.clone(),
                        status: "skipped".into(),
                        took: Duration::ZERO,
                    });
                    continue;
                }
                events(Event::StepStarted { vm: vp.name.clone(), step: st.name.clone() });
                set_step(&record, &vp.name, idx, |s| s.status = StepStatus::Running);
                save_progress(dir, &record)?;
                let t = Instant::now();
                let res = vm.exec(&st.name, &st.script, st.stdin.clone().map(String::into_bytes), st.timeout).await;
                let took = t.elapsed();
                let status = match &res {
                    Ok(r) if r.exit_code == Some(st.expect_exit as i64) => StepStatus::Passed,
                    Ok(_) => StepStatus::Failed,
                    Err(VmError::StepTimeout { .. }) => StepStatus::TimedOut,
                    Err(_) => StepStatus::Error,
                };
                let base = format!("{:02}-{}", idx + 1, st.name);
                let (mut out_rel, mut err_rel, mut exit, mut signal, mut text) =
                    (None, None, None, None, String::new());
                if let Ok(r) = &res {
                    let o = vdir.join(format!("{base}.stdout"));
                    let e = vdir.join(format!("{base}.stderr"));
                    std::fs::write(&o, &r.stdout).map_err(io_err("writing", &o))?;
                    std::fs::write(&e, &r.stderr).map_err(io_err("writing", &e))?;
                    out_rel = Some(format!("vms/{}/{base}.stdout", vp.name));
                    err_rel = Some(format!("vms/{}/{base}.stderr", vp.name));
                    exit = r.exit_code;
                    signal = r.signal;
                    text = String::from_utf8_lossy(&r.stdout).into_owned();
                }
                let error = res.as_ref().err().map(|e| e.to_string());
                set_step(&record, &vp.name, idx, |s| {
                    s.status = status;
                    s.exit_code = exit;
                    s.signal = signal;
                    s.duration_s = took.as_secs_f64();
                    s.stdout = out_rel.clone();
                    s.stderr = err_rel.clone();
                    s.error = error.clone();
                    s.stdout_text = text.clone();
                });
                save_progress(dir, &record)?;
                events(Event::StepFinished {
                    vm: vp.name.clone(),
                    step: st.name.clone(),
                    status: format!("{status:?}").to_lowercase(),
                    took,
                });
                tx.send_modify(|m| {
                    m.insert(key, status == StepStatus::Passed);
                });
                match res {
                    Err(e) => return Err(RunError::Vm(e)),
                    Ok(_) if status != StepStatus::Passed => {
                        blocked = Some(format!("step {} did not pass", st.name));
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
                    set_vm(&record, &vp.name, |v| v.clock = Some(check));
                }
            }
            Ok(())
        }
    });
    let result = futures::future::try_join_all(futs).await.map(|_| ());
    {
        let mut r = record.lock().expect("not poisoned");
        let booted = t_boot_done.lock().expect("not poisoned").unwrap_or_else(Instant::now);
        r.timings.boot_s = booted.duration_since(t_boot).as_secs_f64();
        r.timings.steps_s = booted.elapsed().as_secs_f64();
    }
    result
}

/// Waits until every dependency of `st` has passed; returns why not if one failed.
async fn wait_deps(rx: &mut watch::Receiver<BTreeMap<String, bool>>, st: &StepPlan) -> Option<String> {
    for d in &st.after {
        let key = d.to_string();
        let ok = match rx.wait_for(|m| m.contains_key(&key)).await {
            Ok(m) => m[&key],
            Err(_) => false,
        };
        if !ok {
            return Some(format!("dependency {key} did not pass"));
        }
    }
    None
}

fn set_vm(record: &Mutex<RunRecord>, vm: &str, f: impl FnOnce(&mut VmRecord)) {
    let mut r = record.lock().expect("not poisoned");
    if let Some(v) = r.vms.iter_mut().find(|v| v.name == vm) {
        f(v);
    }
}

fn set_step(record: &Mutex<RunRecord>, vm: &str, idx: usize, f: impl FnOnce(&mut StepRecord)) {
    set_vm(record, vm, |v| {
        if let Some(s) = v.steps.get_mut(idx) {
            f(s);
        }
    });
}
