//! `vmrepro bench`: how far the runner is from a bare QEMU boot, and where a suite's
//! wall time goes. Everything runs through the runner's own code (suite loading, image
//! resolution, `run::run` with its QEMU, QMP and guest-agent code); only the reference
//! boot is a bare `qemu-system-x86_64` ([`bare`]).
//!
//! One invocation measures, in this order:
//! 1. `reps` interleaved repetitions of: a bare boot, a vmrepro boot of a generated
//!    one-VM suite (QEMU spawn → agent answered → first command's output), a restore
//!    of it from a mapped saved state and one from a copied saved state
//!    ([`crate::infra::qemu::state::StateRam`]), and a warm resolution of the benched
//!    suite's images (the order of the first four rotates between reps, so none
//!    always runs on a machine another just warmed);
//! 2. with `cold`, one build of the boot VM's images into an empty temp cache;
//! 3. `suite_reps` runs of the benched suite, split into phases from `run.json`
//!    ([`report::phases`]);
//! 4. the scaling suite ([`suites::scaling_suite`]) with each client count, with the
//!    peak resident memory and proportional set size of every VM's QEMU ([`rss`]),
//!    once with mapped saved states and once with copied ones (unless
//!    `--fresh-boot`).
//!
//! A measurement that fails is recorded in [`BenchReport::errors`] and left out.

pub mod bare;
pub mod report;
pub mod rss;
pub mod suites;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub use report::BenchReport;
use report::{ScalePoint, SuiteRun, VmMemory};

use crate::events::{Event, EventSink};
use crate::infra::images::{resolve_all, Cache, Catalog};
use crate::infra::qemu::args::Accelerator;
use crate::infra::qemu::state::StateRam;
use crate::plan::Plan;
use crate::run::{RunOptions, RunRecord};
use crate::schema::Accel;

/// Longest bare boot before it counts as failed, seconds.
const BARE_LIMIT: Duration = Duration::from_secs(120);
/// How often [`rss::Sampler`] looks at the QEMUs.
const RSS_INTERVAL: Duration = Duration::from_millis(250);

/// What `vmrepro bench` measures and where.
#[derive(Debug, Clone)]
pub struct BenchOptions {
    /// Repetitions of the boot and warm-image measurements (≥ 1).
    pub reps: usize,
    /// The suite whose images are resolved warm and whose runs are split into phases.
    pub suite: PathBuf,
    /// Runs of `suite` (0: none).
    pub suite_reps: usize,
    /// Client counts of the scaling measurement (empty: none).
    pub scale: Vec<usize>,
    /// Debian kernel series of the boot VM and the scaling clients (`6.1`).
    pub kernel: String,
    /// Guest RAM of the boot VM and of the scaling clients, MiB.
    pub memory_mib: u64,
    /// Also build the boot VM's images once into an empty temp cache.
    pub cold: bool,
    /// Where the benched suite's and the scaling suites' run folders go.
    pub results_root: PathBuf,
    /// The project's images folder.
    pub images: PathBuf,
    /// The image cache (warm).
    pub cache: Cache,
    /// Runs of the suite and the scaling suites boot every VM (no saved state).
    pub fresh_boot: bool,
    /// Runs of the suite and the scaling suites bind each QEMU to one host CPU
    /// ([`RunOptions::pin`]); the boot measurements never do (the bare boot isn't).
    pub pin: bool,
}

/// Errors that stop the bench before it measures anything.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// A suite (given or generated) doesn't load.
    #[error("{0}")]
    Suite(String),
    /// The boot VM's images can't be resolved.
    #[error("preparing the boot VM's images: {0}")]
    Images(String),
    /// The bench's temp files can't be written.
    #[error("bench temp files: {0}")]
    Io(#[from] std::io::Error),
}

/// Runs the bench (see the module docs). `progress` gets one line per measurement;
/// `stop` ends it early (as after Ctrl-C) with what was measured so far.
///
/// Errors: [`BenchError`] when nothing can be measured (a suite doesn't load, the boot
/// VM's images can't be resolved, the temp folder can't be written).
pub async fn bench(
    opts: &BenchOptions,
    progress: &(dyn Fn(String) + Sync),
    stop: tokio::sync::watch::Receiver<bool>,
) -> Result<BenchReport, BenchError> {
    if !suites::valid_series(&opts.kernel) {
        return Err(BenchError::Suite(format!("--kernel {:?}: not a Debian kernel series like 6.1", opts.kernel)));
    }
    let ctx = Ctx { opts, progress, stop };
    let work = tempfile::Builder::new().prefix("vmrepro-bench-").tempdir()?;
    let boot_path = work.path().join("bench-boot.yaml");
    std::fs::write(&boot_path, suites::boot_suite(&opts.kernel, opts.memory_mib))?;
    let boot = load(&boot_path, &opts.images)?;
    let suite = load(&opts.suite, &opts.images)?;
    let (bare_cfg, mut r) = bare_config(opts, &boot.0, &boot.1, work.path()).await?;
    interleaved_reps(&ctx, &boot, &suite, &bare_cfg, &work.path().join("results"), &mut r).await;
    if opts.cold && !ctx.stopped() {
        cold_build(&ctx, &boot.0.vms[0], &boot.1, &mut r).await?;
    }
    suite_runs(&ctx, &suite, &mut r).await;
    scaling(&ctx, work.path(), &mut r).await?;
    Ok(r)
}

/// What every phase of the bench needs: the options, where progress goes, and the
/// stop flag (set by Ctrl-C).
struct Ctx<'a> {
    opts: &'a BenchOptions,
    progress: &'a (dyn Fn(String) + Sync),
    stop: tokio::sync::watch::Receiver<bool>,
}

impl Ctx<'_> {
    /// Whether the bench was asked to stop.
    fn stopped(&self) -> bool {
        *self.stop.borrow()
    }

    /// A future that resolves when the bench is asked to stop (a run's interrupt).
    fn interrupt(&self) -> impl std::future::Future<Output = ()> + 'static {
        let mut rx = self.stop.clone();
        async move {
            let _ = rx.wait_for(|s| *s).await;
        }
    }
}

/// The bare QEMU boot of the boot VM (`boot`'s only VM): its images resolved (warm),
/// the accelerator, the initrd written into `work`; and the report started with them.
///
/// Errors: [`BenchError::Images`] when the images can't be resolved.
async fn bare_config(
    opts: &BenchOptions,
    boot: &Plan,
    catalog: &Catalog,
    work: &Path,
) -> Result<(bare::BareConfig, BenchReport), BenchError> {
    let vp = &boot.vms[0];
    let resolved = resolve_all(
        std::slice::from_ref(&vp.kernel),
        &[vp.rootfs_request()],
        &opts.cache,
        catalog,
        &crate::events::discard(),
    )
    .await;
    if let Some((what, e)) = resolved.failures.first() {
        return Err(BenchError::Images(format!("{what}: {e}")));
    }
    let kernel = &resolved.kernels[&vp.kernel.label()];
    let rootfs = &resolved.rootfs[&vp.rootfs_request().id()];
    let accel = match vp.accel {
        Accel::Tcg => Accelerator::Tcg,
        _ => {
            crate::infra::qemu::accel::probe_cached(&kernel.image, &opts.cache.root().join("accel-probe.json"))
                .await
                .accel
        }
    };
    let initrd = work.join("bare-initrd.cpio");
    bare::write_initrd(&rootfs.initramfs_base, &kernel.initramfs_modules, work, &initrd)?;
    let cfg = bare::BareConfig {
        memory_mib: vp.memory_mib,
        cpus: vp.cpus,
        accel,
        kernel: kernel.image.clone(),
        initrd,
        rootfs: rootfs.image.clone(),
        modules_disk: kernel.modules_disk.clone(),
        console_log: work.join("bare-console.log"),
    };
    let r = BenchReport {
        reps: opts.reps,
        host_cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
        accel: format!("{accel:?}").to_lowercase(),
        boot_kernel: format!("{} ({})", vp.kernel.label(), kernel.release),
        ..BenchReport::default()
    };
    Ok((cfg, r))
}

/// `--reps` rounds, interleaved: a bare boot, vmrepro booting and vmrepro restoring
/// the boot VM (in turn order), then a warm resolution of the suite's images.
async fn interleaved_reps(
    ctx: &Ctx<'_>,
    (boot_plan, catalog): &(Plan, Catalog),
    (suite_plan, suite_catalog): &(Plan, Catalog),
    bare_cfg: &bare::BareConfig,
    boot_results: &Path,
    r: &mut BenchReport,
) {
    let qemu = crate::infra::qemu::qemu_binary();
    // The boot VM's kind gets its saved states, mapped and copied (if it has none yet),
    // before the reps, so that every "restoring" run restores.
    for ram in [StateRam::Mapped, StateRam::Copied] {
        let first = vmrepro_boot(boot_plan, catalog, &ctx.opts.cache, boot_results, Start::Saved(ram), ctx.interrupt());
        if let Err(e) = first.await {
            r.errors.push(format!("saving the boot VM's {ram:?} state: {e}"));
        }
    }
    for rep in 1..=ctx.opts.reps {
        if ctx.stopped() {
            break;
        }
        // Bare, booting, restoring mapped, restoring copied: each rep starts with the
        // next one, so each goes first, second, third and fourth equally often over
        // four reps.
        for turn in 0..4 {
            match (rep + turn) % 4 {
                0 => match bare::boot(&qemu, bare_cfg, BARE_LIMIT).await {
                    Ok(d) => {
                        r.bare_s.push(d.as_secs_f64());
                        (ctx.progress)(format!(
                            "bench: rep {rep}/{}: bare boot {:.2} s",
                            ctx.opts.reps,
                            d.as_secs_f64()
                        ));
                    }
                    Err(e) => r.errors.push(format!("rep {rep}: {e}")),
                },
                n => {
                    let start = match n {
                        1 => Start::Fresh,
                        2 => Start::Saved(StateRam::Mapped),
                        _ => Start::Saved(StateRam::Copied),
                    };
                    let how = match start {
                        Start::Fresh => "booting",
                        Start::Saved(StateRam::Mapped) => "restoring (mapped RAM)",
                        Start::Saved(StateRam::Copied) => "restoring (copied RAM)",
                    };
                    let boot = vmrepro_boot(boot_plan, catalog, &ctx.opts.cache, boot_results, start, ctx.interrupt());
                    match boot.await.and_then(|b| b.if_as_asked(start)) {
                        Ok(b) => {
                            (ctx.progress)(format!(
                                "bench: rep {rep}/{}: vmrepro {how}: ready {:.2} s, first output {:.2} s, run {:.2} s",
                                ctx.opts.reps, b.agent, b.first_output, b.run
                            ));
                            let (ready, output) = match start {
                                Start::Fresh => {
                                    r.run_s.push(b.run);
                                    (&mut r.agent_s, &mut r.first_output_s)
                                }
                                Start::Saved(StateRam::Mapped) => {
                                    (&mut r.restored_agent_s, &mut r.restored_first_output_s)
                                }
                                Start::Saved(StateRam::Copied) => (&mut r.copied_agent_s, &mut r.copied_first_output_s),
                            };
                            ready.push(b.agent);
                            output.push(b.first_output);
                            if let Some(phases) = b.phases {
                                r.start_phases.push((how.to_string(), phases));
                            }
                        }
                        Err(e) => r.errors.push(format!("rep {rep}: vmrepro {how}: {e}")),
                    }
                }
            }
        }
        let t = Instant::now();
        let warm =
            crate::run::images::resolve(suite_plan, &ctx.opts.cache, suite_catalog, &crate::events::discard()).await;
        match warm.failures.first() {
            None => r.images_warm_s.push(t.elapsed().as_secs_f64()),
            Some((what, e)) => r.errors.push(format!("rep {rep}: warm images: {what}: {e}")),
        }
    }
}

/// `--cold`: the boot VM's images (`vp`'s) built once into an empty temp cache, timed.
async fn cold_build(
    ctx: &Ctx<'_>,
    vp: &crate::plan::VmPlan,
    catalog: &Catalog,
    r: &mut BenchReport,
) -> Result<(), BenchError> {
    let cold = tempfile::Builder::new().prefix("vmrepro-bench-cache-").tempdir()?;
    let t = Instant::now();
    let got = resolve_all(
        std::slice::from_ref(&vp.kernel),
        &[vp.rootfs_request()],
        &Cache::new(cold.path().to_path_buf()),
        catalog,
        &crate::events::discard(),
    )
    .await;
    let what = format!("{} + rootfs {}", vp.kernel.label(), vp.rootfs_request().id());
    match got.failures.first() {
        None => r.images_cold = Some((what, t.elapsed().as_secs_f64())),
        Some((w, e)) => r.errors.push(format!("cold build: {w}: {e}")),
    }
    (ctx.progress)(format!("bench: cold build {:?}", r.images_cold));
    Ok(())
}

/// `--suite-reps` runs of the suite, each split into phases.
async fn suite_runs(ctx: &Ctx<'_>, (suite_plan, suite_catalog): &(Plan, Catalog), r: &mut BenchReport) {
    for i in 1..=ctx.opts.suite_reps {
        if ctx.stopped() {
            break;
        }
        match run_suite(suite_plan, suite_catalog, ctx.opts, StateRam::Mapped, ctx.interrupt()).await {
            Ok((dir, rec, _)) => {
                (ctx.progress)(format!("bench: suite {} run {i}: {:.1} s", rec.suite, rec.timings.total_s));
                r.suite_runs.push(SuiteRun {
                    suite: rec.suite.clone(),
                    run_dir: dir.display().to_string(),
                    status: status_text(&rec),
                    total_s: rec.timings.total_s,
                    phases: report::phases(&rec),
                });
            }
            Err(e) => r.errors.push(format!("suite run {i}: {e}")),
        }
    }
}

/// The scaling suite for each `--scale` N (written into `work`), with each QEMU's peak
/// memory.
///
/// Errors: a scaling suite can't be written or doesn't load.
async fn scaling(ctx: &Ctx<'_>, work: &Path, r: &mut BenchReport) -> Result<(), BenchError> {
    for &n in &ctx.opts.scale {
        if ctx.stopped() {
            break;
        }
        let path = work.join(format!("bench-scale-{n}.yaml"));
        std::fs::write(&path, suites::scaling_suite(n, &ctx.opts.kernel, ctx.opts.memory_mib))?;
        let (plan, cat) = load(&path, &ctx.opts.images)?;
        let modes: &[Option<StateRam>] =
            if ctx.opts.fresh_boot { &[None] } else { &[Some(StateRam::Mapped), Some(StateRam::Copied)] };
        for &state_ram in modes {
            if ctx.stopped() {
                break;
            }
            scale_point(ctx, n, &plan, &cat, state_ram, r).await;
        }
    }
    Ok(())
}

/// One run of the scaling suite `plan` (`n` clients), its saved states holding the RAM
/// as `state_ram` says (`None`: `--fresh-boot`), into `r.scaling`.
async fn scale_point(
    ctx: &Ctx<'_>,
    n: usize,
    plan: &Plan,
    cat: &Catalog,
    state_ram: Option<StateRam>,
    r: &mut BenchReport,
) {
    match run_suite(plan, cat, ctx.opts, state_ram.unwrap_or_default(), ctx.interrupt()).await {
        Ok((_, rec, peaks)) => {
            let vms: Vec<VmMemory> = plan
                .vms
                .iter()
                .map(|v| VmMemory {
                    vm: v.name.clone(),
                    guest_mib: v.memory_mib,
                    peak_rss_mib: peaks.get(&v.name).map_or(0.0, |m| m.rss_kib.max(m.hwm_kib) as f64 / 1024.0),
                    peak_pss_mib: peaks.get(&v.name).map_or(0.0, |m| m.pss_kib as f64 / 1024.0),
                    start: rec.vms.iter().find(|x| x.name == v.name).and_then(|x| x.start),
                })
                .collect();
            let boot_max_s = rec.vms.iter().filter_map(|v| v.boot_s).fold(0.0, f64::max);
            (ctx.progress)(format!("bench: scaling {n} client(s), {state_ram:?} RAM: {:.1} s", rec.timings.total_s));
            r.scaling.push(ScalePoint {
                clients: n,
                state_ram,
                status: status_text(&rec),
                total_s: rec.timings.total_s,
                boot_max_s,
                vms,
            });
        }
        Err(e) => r.errors.push(format!("scaling {n} ({state_ram:?}): {e}")),
    }
}

/// `run.json`'s spelling of the run's status (`passed`, …).
fn status_text(rec: &RunRecord) -> String {
    serde_json::to_value(rec.status).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default()
}

fn load(path: &Path, images: &Path) -> Result<(Plan, Catalog), BenchError> {
    crate::suite::load(path, Some(images)).map_err(|e| BenchError::Suite(e.to_string()))
}

/// One vmrepro boot, seconds.
struct Boot {
    /// QEMU spawn → agent answered.
    agent: f64,
    /// QEMU spawn → first step's output received.
    first_output: f64,
    /// The whole `run::run`.
    run: f64,
    /// How its VM started, as `run.json` says.
    started: Option<crate::run::VmStart>,
    /// How its kind's saved state held the RAM (`None` with `--fresh-boot`).
    state_ram: Option<StateRam>,
    /// Where its start's time went, as `run.json` says.
    phases: Option<crate::infra::qemu::vm::StartPhases>,
}

impl Boot {
    /// This boot, if its VM started as `start` asked: a "restoring" run that booted (no
    /// saved state yet, or one QEMU couldn't load), or restored another kind of state,
    /// is not counted as a restore.
    ///
    /// Errors: how it started instead.
    fn if_as_asked(self, start: Start) -> Result<Boot, String> {
        let wanted =
            if matches!(start, Start::Fresh) { crate::run::VmStart::Booted } else { crate::run::VmStart::Restored };
        if self.started != Some(wanted) {
            return Err(format!("the VM started as {:?}, not {wanted:?}", self.started));
        }
        match (start, self.state_ram) {
            (Start::Saved(ram), Some(got)) if got != ram => {
                Err(format!("its saved state held the RAM {got:?}, not {ram:?}"))
            }
            _ => Ok(self),
        }
    }
}

/// How a vmrepro boot in the bench starts its VM.
#[derive(Debug, Clone, Copy)]
enum Start {
    /// `--fresh-boot`: it boots.
    Fresh,
    /// From its kind's saved state holding the RAM so (it boots and saves it if there
    /// is none yet).
    Saved(StateRam),
}

/// Runs the one-VM boot suite with `run::run`, timing its events: `VmStarted` (QEMU
/// spawned) → `VmReady` → the first step's `StepFinished` (its output is in by then).
/// The run folder goes under `results` (the bench's temp folder). Whether the VM
/// started as `start` asked is [`Boot::if_as_asked`]'s to say.
async fn vmrepro_boot(
    plan: &Plan,
    catalog: &Catalog,
    cache: &Cache,
    results: &Path,
    start: Start,
    interrupt: impl std::future::Future<Output = ()>,
) -> Result<Boot, String> {
    #[derive(Default)]
    struct Seen {
        started: Option<Instant>,
        ready: Option<Instant>,
        output: Option<Instant>,
    }
    let seen: Arc<Mutex<Seen>> = Arc::default();
    let s = seen.clone();
    let events: EventSink = Arc::new(move |e| {
        let now = Instant::now();
        let mut s = s.lock().expect("not poisoned");
        match e {
            Event::VmStarted { .. } => s.started = Some(now),
            Event::VmReady { .. } => s.ready = Some(now),
            Event::StepFinished { step, .. } if step == suites::BOOT_STEP && s.output.is_none() => s.output = Some(now),
            _ => {}
        }
    });
    let opts = RunOptions {
        results_root: results.to_path_buf(),
        cache: cache.clone(),
        catalog: catalog.clone(),
        events,
        run_dir: None,
        fresh_boot: matches!(start, Start::Fresh),
        pin: false,
        state_ram: match start {
            Start::Saved(ram) => ram,
            Start::Fresh => StateRam::Mapped,
        },
    };
    let t = Instant::now();
    let out = crate::run::run(plan, &opts, interrupt).await.map_err(|e| e.to_string())?;
    let run = t.elapsed().as_secs_f64();
    let _ = std::fs::remove_dir_all(&out.dir);
    if out.record.status != crate::run::RunStatus::Passed {
        return Err(format!("{}: {}", status_text(&out.record), out.record.error.unwrap_or_default()));
    }
    let vm = out.record.vms.first();
    let s = seen.lock().expect("not poisoned");
    match (s.started, s.ready, s.output) {
        (Some(a), Some(b), Some(c)) => Ok(Boot {
            agent: (b - a).as_secs_f64(),
            first_output: (c - a).as_secs_f64(),
            run,
            started: vm.and_then(|v| v.start),
            state_ram: vm.and_then(|v| v.state_ram),
            phases: vm.and_then(|v| v.start_phases),
        }),
        _ => Err("the run passed but sent no VmStarted/VmReady/StepFinished event".into()),
    }
}

/// Runs `plan` into `opts.results_root` with plain progress off, sampling the QEMUs'
/// memory meanwhile.
async fn run_suite(
    plan: &Plan,
    catalog: &Catalog,
    opts: &BenchOptions,
    state_ram: StateRam,
    interrupt: impl std::future::Future<Output = ()>,
) -> Result<(PathBuf, RunRecord, rss::Peaks), String> {
    let run_opts = RunOptions {
        results_root: opts.results_root.clone(),
        cache: opts.cache.clone(),
        catalog: catalog.clone(),
        events: crate::events::discard(),
        run_dir: None,
        fresh_boot: opts.fresh_boot,
        pin: opts.pin,
        state_ram,
    };
    let sampler = rss::Sampler::start(RSS_INTERVAL);
    let out = crate::run::run(plan, &run_opts, interrupt).await;
    let peaks = sampler.finish();
    let out = out.map_err(|e| e.to_string())?;
    // The run's results.json and reports, as `vmrepro run` leaves them.
    if let Err(e) = crate::analyse::analyse_dir(&out.dir) {
        return Err(format!("analysing {}: {e}", out.dir.display()));
    }
    Ok((out.dir, out.record, peaks))
}
