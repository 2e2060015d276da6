//! The `vmrepro` command line: argument parsing, progress rendering and exit codes.
//! `main.rs` only calls [`main`].

mod bench;
mod images;
mod interactive;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use clap::{Parser, Subcommand};

use crate::events::{Event, EventSink};
use crate::exit;
use crate::infra::images::kernel::KernelSource;
use crate::infra::images::{resolve_all, Cache, Catalog, DEFAULT_ROOTFS};
use crate::report::results::{analyse_dir, Analysis};
use crate::run::{RunOptions, RunStatus};

#[derive(Debug, Parser)]
#[command(name = "vmrepro", version, about = "Declarative reproducibility suites on QEMU virtual machines")]
struct Cli {
    /// The project's images folder (default: nearest `images/` above the suite, or
    /// $VMREPRO_IMAGES).
    #[arg(long, global = true, env = "VMREPRO_IMAGES")]
    images: Option<PathBuf>,
    /// Artefact cache folder (default: $VMREPRO_CACHE_DIR, $XDG_CACHE_HOME/vmrepro or
    /// ~/.cache/vmrepro).
    #[arg(long, global = true, env = "VMREPRO_CACHE_DIR")]
    cache: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Boot a suite's VMs, run its steps, and store and compare the results.
    Run {
        /// The suite file.
        suite: PathBuf,
        /// Where run folders go: `<DIR>/<suite>/<timestamp>/`.
        #[arg(long, default_value = "results")]
        results: PathBuf,
        /// Also write JUnit XML here (one test case per step and per verdict).
        #[arg(long, value_name = "FILE")]
        junit: Option<PathBuf>,
        /// Keep the VMs running after the steps (`--keep`, or `--keep=on-failure` only
        /// when a step failed), print how to reach them, and wait for `vmrepro stop`
        /// or Ctrl-C.
        #[arg(long, value_enum, num_args = 0..=1, require_equals = true, default_missing_value = "always")]
        keep: Option<KeepArg>,
        /// Boot every VM and save no VM state. By default a VM whose kind (kernel,
        /// rootfs, memory, vCPUs, cmdline, QEMU) has a state saved by an earlier run
        /// starts from it instead of booting, and the first VM of a kind saves it.
        #[arg(long)]
        fresh_boot: bool,
        /// Bind each QEMU process to one host CPU: the server's to the first CPU, the
        /// clients' in turn to the others. It steadied times under a build machine's
        /// load and changed nothing on a quiet host (BENCHMARKS.md, "Pinning").
        #[arg(long, env = "VMREPRO_PIN", value_parser = clap::builder::FalseyValueParser::new())]
        pin: bool,
    },
    /// Write a run folder's report.md and report.html again (no VM).
    Report {
        /// The run folder (`results/<suite>/<timestamp>`).
        run_dir: PathBuf,
    },
    /// Pack a run folder into one file to attach to a bug report: the suite and every
    /// file it uses, the pinned image entries, the results, raw outputs, consoles and
    /// reports, with a MANIFEST of SHA-256 sums; host paths and names redacted.
    Bundle {
        /// The run folder.
        run_dir: PathBuf,
        /// The bundle to write (`.tar.gz`, `.tgz` or `.tar.zst`; default
        /// `<suite>-<run folder name>.tar.gz` in the current folder).
        #[arg(short, long, value_name = "FILE")]
        output: Option<PathBuf>,
        /// Also carry the kernels used (the pinned .debs, or the built kernel of a
        /// source build), so a replay works after the archive dropped them.
        #[arg(long)]
        with_images: bool,
    },
    /// Re-run the suite of a bundle with the same pinned images and print then against
    /// now. Exit 0 when every verdict agrees, 1 when one differs.
    Replay {
        /// The bundle (`vmrepro bundle`).
        bundle: PathBuf,
        /// Where the new run folder goes: `<DIR>/<suite>/<timestamp>/`.
        #[arg(long, default_value = "results")]
        results: PathBuf,
        /// Also write JUnit XML of the new run here.
        #[arg(long, value_name = "FILE")]
        junit: Option<PathBuf>,
        /// Boot every VM and save no VM state (as `vmrepro run --fresh-boot`).
        #[arg(long)]
        fresh_boot: bool,
        /// Bind each QEMU process to one host CPU (as `vmrepro run --pin`).
        #[arg(long, env = "VMREPRO_PIN", value_parser = clap::builder::FalseyValueParser::new())]
        pin: bool,
    },
    /// Print two runs of a suite side by side (run folders or bundles). Exit 0 when
    /// every verdict agrees, 1 when one differs.
    Compare {
        /// The first run (folder or bundle): column A.
        run_a: PathBuf,
        /// The second run: column B.
        run_b: PathBuf,
    },
    /// Open an interactive root shell in a VM of a running run (one started with
    /// --keep, or one whose steps still run), over its second serial port.
    Shell {
        /// The run folder (`results/<suite>/<timestamp>`).
        run_dir: PathBuf,
        /// The VM.
        vm: String,
    },
    /// Stop a running run (e.g. one kept with --keep): its VMs are shut down and
    /// everything it held is removed, as at the end of any run.
    Stop {
        /// The run folder (`results/<suite>/<timestamp>`).
        run_dir: PathBuf,
    },
    /// Check what this host allows the current user (namespaces, /dev/net/tun,
    /// subordinate ids, /dev/kvm, tools) and say how to fix what is missing.
    Doctor,
    /// Analyse a finished run folder again (no VM): rewrite its results.json and print
    /// its tables.
    Analyse {
        /// The run folder (`results/<suite>/<timestamp>`).
        run_dir: PathBuf,
        /// Print the value the suite's snapshot test compares (YAML) instead of the tables.
        #[arg(long)]
        snapshot: bool,
    },
    /// Print a suite's compiled plan as JSON (what `run` would execute; the same as a
    /// run folder's `plan.json`).
    Plan {
        /// The suite file.
        suite: PathBuf,
    },
    /// Validate suite files without booting anything.
    Check {
        /// Suite files.
        #[arg(required = true)]
        suites: Vec<PathBuf>,
    },
    /// Measure the runner against a bare QEMU boot and split a suite's wall time into
    /// phases (boots VMs; one at a time with other VM work, on a quiet machine).
    ///
    /// In one invocation, interleaved, `--reps` times: a bare `qemu-system-x86_64` boot
    /// of the runner's kernel, initramfs and rootfs (same machine, accelerator, CPU,
    /// memory), timed from QEMU's spawn until QEMU exits after the rootfs printed a
    /// marker and powered off; vmrepro's boot of the same VM (a generated one-VM suite)
    /// to "guest agent answered" and to "first command's output received"; a warm
    /// resolution of `--suite`'s images. Then `--suite-reps` runs of `--suite`, split into
    /// phases from run.json, and the scaling suite (an NFS server and N clients reading
    /// 20 MB each) for each `--scale` N, with each QEMU's peak resident memory
    /// (/proc/PID/status VmRSS and VmHWM). Prints Markdown tables (min / median / max;
    /// seconds, MiB), or JSON with --json.
    Bench(BenchArgs),
    /// Build, fetch or list images.
    Images {
        #[command(subcommand)]
        command: ImagesCommand,
    },
}

/// `vmrepro bench`'s options.
#[derive(Debug, clap::Args)]
struct BenchArgs {
    /// Repetitions of the interleaved boot and warm-image measurements.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u16).range(1..=100))]
    reps: u16,
    /// The suite whose images are resolved warm and whose runs are split into phases.
    #[arg(long, default_value = "suites/nfs-read-100mb.yaml")]
    suite: PathBuf,
    /// Runs of --suite (0: skip).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(0..=20))]
    suite_reps: u16,
    /// Client counts of the scaling measurement, comma-separated (`--scale ''`: skip).
    #[arg(long, default_value = "1,2,4,8", value_delimiter = ',')]
    scale: Vec<String>,
    /// Debian kernel series of the boot VM and of the scaling clients.
    #[arg(long, default_value = "6.1")]
    kernel: String,
    /// Guest RAM of the boot VM and of the scaling clients, MiB.
    #[arg(long, default_value_t = 384, value_parser = clap::value_parser!(u64).range(128..=16384))]
    memory: u64,
    /// Also build the boot VM's images (one Debian kernel and the rootfs) once into an
    /// empty temp cache, and time it (minutes: mmdebstrap).
    #[arg(long)]
    cold: bool,
    /// The suite's and the scaling suites' runs boot every VM instead of starting VMs
    /// from saved states (the boot measurements always do both).
    #[arg(long)]
    fresh_boot: bool,
    /// The suite's and the scaling suites' runs bind each QEMU to one host CPU (as
    /// `vmrepro run --pin`); the boot measurements don't, as the bare boot doesn't.
    #[arg(long, env = "VMREPRO_PIN", value_parser = clap::builder::FalseyValueParser::new())]
    pin: bool,
    /// Where the suite's and the scaling suites' run folders go.
    #[arg(long, default_value = "results")]
    results: PathBuf,
    /// Print the report as JSON instead of Markdown.
    #[arg(long)]
    json: bool,
}

/// `--keep` values.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum KeepArg {
    /// Whatever the outcome.
    Always,
    /// Only when a step did not pass or the run failed.
    OnFailure,
}

#[derive(Debug, Subcommand)]
enum ImagesCommand {
    /// Build or fetch every image the given suites need (all pinned kernels and the
    /// default rootfs when no suite is given).
    Build {
        /// Suite files.
        suites: Vec<PathBuf>,
    },
    /// List the recipes, and the cache's entries with their size, age and the suites
    /// or pins that use them.
    List {
        /// Folders of suites whose use of the cache to show (default: `suites/`).
        folders: Vec<PathBuf>,
    },
    /// Remove cache entries no suite in the given folders uses (and, with
    /// --older-than, entries built longer ago than that). Never removes an entry a
    /// running suite holds.
    Gc {
        /// Folders of suites whose images to keep (default: `suites/`).
        folders: Vec<PathBuf>,
        /// Also remove entries built longer ago than this (e.g. `30d`), used or not;
        /// they are fetched or built again when next needed.
        #[arg(long, value_parser = humantime::parse_duration)]
        older_than: Option<Duration>,
        /// Only print what would be removed.
        #[arg(long)]
        dry_run: bool,
    },
    /// Re-pin images/kernels.yaml to the packages the Debian archive serves now (the
    /// newest of each pin's kind), printing old → new for each pin.
    Repin {
        /// Only print what would change.
        #[arg(long)]
        dry_run: bool,
        /// Only re-pin pins whose package is no longer in the archive.
        #[arg(long)]
        stale_only: bool,
    },
}

/// Runs the CLI; returns the process exit code.
pub fn main() -> i32 {
    let cli = Cli::parse();
    if matches!(cli.command, Command::Check { .. } | Command::Plan { .. }) {
        // These only print: a closed pipe (`vmrepro check … | head`) ends them at once,
        // as it does `cat` (the others go on and drop the output, see `out!`). Not for
        // the commands that talk to QEMU over sockets, where EPIPE must stay an error.
        let _ = unsafe {
            nix::sys::signal::signal(nix::sys::signal::Signal::SIGPIPE, nix::sys::signal::SigHandler::SigDfl)
        };
    }
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("tokio runtime");
    let code = rt.block_on(dispatch(cli));
    // Don't wait for blocking reads still parked on stdin (`vmrepro shell` after the
    // guest's shell ended): they can't finish until the next key press.
    rt.shutdown_background();
    code
}

/// Loads, validates and compiles the suite at `path`; prints the error and returns
/// [`exit::CONFIG_ERROR`] when it can't.
fn load_or_exit(path: &Path, images: Option<&Path>) -> Result<(crate::plan::Plan, Catalog), i32> {
    crate::suite::load(path, images).map_err(|e| {
        errln!("{e}");
        exit::CONFIG_ERROR
    })
}

/// The exit code of a finished, analysed run (see [`exit`]).
pub fn exit_code(status: RunStatus, problems: usize) -> i32 {
    match status {
        RunStatus::Passed if problems == 0 => exit::SUCCESS,
        RunStatus::Passed | RunStatus::Failed => exit::TEST_FAILURE,
        // `Running` never ends a run; treat it as the failure it would be.
        RunStatus::InfrastructureError | RunStatus::Running => exit::INFRASTRUCTURE,
        RunStatus::Interrupted => exit::INTERRUPTED,
    }
}

/// The summary, the tables and the problems of an analysed run, as printed.
fn render(a: &Analysis) -> String {
    let mut text = crate::report::summary(&a.record);
    text.push_str(&crate::report::tables(a));
    if let Some(e) = &a.record.error {
        text.push_str(&format!("error: {e}\n"));
    }
    text.push_str(&format!("results: {}\n", a.dir.display()));
    text
}

async fn dispatch(cli: Cli) -> i32 {
    let cache = cli.cache.clone().map(Cache::new).unwrap_or_else(Cache::from_env);
    match cli.command {
        Command::Check { suites } => {
            let mut code = exit::SUCCESS;
            for s in suites {
                match load_or_exit(&s, cli.images.as_deref()) {
                    Ok((p, _)) => {
                        let steps: usize = p.vms.iter().map(|v| v.steps.len()).sum();
                        outln!("ok: {} (suite {}, {} VMs, {steps} steps)", s.display(), p.suite, p.vms.len());
                    }
                    Err(c) => code = c,
                }
            }
            code
        }
        Command::Run { suite, results, junit, keep, fresh_boot, pin } => {
            let (plan, catalog) = match load_or_exit(&suite, cli.images.as_deref()) {
                Ok(p) => p,
                Err(c) => return c,
            };
            let opts = RunOptions {
                results_root: results,
                cache,
                catalog,
                events: progress_sink(),
                run_dir: None,
                fresh_boot,
                pin,
            };
            let keep = match keep {
                None => crate::run::Keep::Never,
                Some(KeepArg::Always) => crate::run::Keep::Always,
                Some(KeepArg::OnFailure) => crate::run::Keep::OnFailure,
            };
            let outcome = match crate::run::run_with(&plan, &opts, interrupted(), keep).await {
                Ok(o) => o,
                Err(e) => {
                    errln!("error: {e}");
                    return exit::INFRASTRUCTURE;
                }
            };
            match analyse_dir(&outcome.dir) {
                Ok(a) => {
                    out!("{}", render(&a));
                    publish_reports(&a, junit.as_deref());
                    exit_code(a.record.status, a.results.problems().len())
                }
                Err(e) => {
                    out!("{}", crate::report::summary(&outcome.record));
                    errln!("error: analysing {}: {e}", outcome.dir.display());
                    write_junit(junit.as_deref(), &crate::report::junit::junit(&outcome.record, None));
                    exit_code(outcome.record.status, 1)
                }
            }
        }
        Command::Shell { run_dir, vm } => interactive::shell(&run_dir, &vm).await,
        Command::Stop { run_dir } => interactive::stop(&run_dir).await,
        Command::Doctor => interactive::doctor(),
        Command::Report { run_dir } => match crate::report::published::write(&run_dir) {
            Ok(w) => {
                outln!("{}\n{}", w.markdown.display(), w.html.display());
                exit::SUCCESS
            }
            Err(e) => {
                errln!("error: {e}");
                exit::CONFIG_ERROR
            }
        },
        Command::Bundle { run_dir, output, with_images } => {
            bundle(&run_dir, output, with_images, cli.images.clone(), cache)
        }
        Command::Replay { bundle, results, junit, fresh_boot, pin } => {
            replay(&bundle, results, junit.as_deref(), cache, fresh_boot, pin).await
        }
        Command::Compare { run_a, run_b } => compare(&run_a, &run_b),
        Command::Plan { suite } => match load_or_exit(&suite, cli.images.as_deref()) {
            Ok((plan, _)) => {
                outln!("{}", serde_json::to_string_pretty(&plan).expect("a plan serializes"));
                exit::SUCCESS
            }
            Err(c) => c,
        },
        Command::Analyse { run_dir, snapshot } => match analyse_dir(&run_dir) {
            Ok(a) if snapshot => match crate::report::snapshot::normalise(&a) {
                Ok(n) => {
                    out!("{}", serde_yaml::to_string(&n).expect("a snapshot serializes"));
                    exit::SUCCESS
                }
                Err(e) => {
                    errln!("error: {e}");
                    exit::CONFIG_ERROR
                }
            },
            Ok(a) => {
                out!("{}", render(&a));
                exit_code(a.record.status, a.results.problems().len())
            }
            Err(e) => {
                errln!("error: {e}");
                exit::CONFIG_ERROR
            }
        },
        Command::Bench(args) => bench::bench(args, cli.images.as_deref(), cache).await,
        Command::Images { command: ImagesCommand::List { folders } } => {
            images::list(cli.images.as_deref(), &cache, &folders)
        }
        Command::Images { command: ImagesCommand::Gc { folders, older_than, dry_run } } => images::gc(
            cli.images.as_deref(),
            &cache,
            &folders,
            &crate::infra::images::gc::GcPolicy { older_than, dry_run },
        ),
        Command::Images { command: ImagesCommand::Repin { dry_run, stale_only } } => {
            images::repin(cli.images.as_deref(), dry_run, stale_only)
        }
        Command::Images { command: ImagesCommand::Build { suites } } => {
            build_images(&suites, cli.images.as_deref(), &cache, progress_sink()).await
        }
    }
}

/// Writes the reports of an analysed run (and its JUnit XML when asked); a failure to
/// write them is printed, not fatal.
fn publish_reports(a: &Analysis, junit: Option<&Path>) {
    match crate::report::published::write_analysed(a) {
        Ok(w) => outln!("report: {}", w.markdown.display()),
        Err(e) => errln!("warning: writing the reports: {e}"),
    }
    write_junit(junit, &crate::report::junit::junit(&a.record, Some(&a.results)));
}

fn write_junit(path: Option<&Path>, xml: &str) {
    if let Some(p) = path {
        match std::fs::write(p, xml) {
            Ok(()) => outln!("junit: {}", p.display()),
            Err(e) => errln!("warning: writing {}: {e}", p.display()),
        }
    }
}

/// `vmrepro bundle`.
fn bundle(run_dir: &Path, output: Option<PathBuf>, with_images: bool, images: Option<PathBuf>, cache: Cache) -> i32 {
    use crate::publish::bundle::{bundle, BundleError, BundleOptions};
    let out = output.unwrap_or_else(|| {
        let suite = crate::run::record::read_json::<crate::run::RunRecord>(&run_dir.join(crate::run::RUN_FILE))
            .map(|r| r.suite)
            .unwrap_or_else(|_| "run".into());
        PathBuf::from(crate::report::published::default_bundle_name(&suite, run_dir))
    });
    let opts = BundleOptions { with_images, cache, identity: crate::publish::redact::Identity::current(), images };
    match bundle(run_dir, &out, &opts) {
        Ok(s) => {
            outln!(
                "bundle: {} ({}, {} files, {} unpacked{})",
                s.path.display(),
                human_bytes(s.bytes),
                s.files,
                human_bytes(s.unpacked_bytes),
                if s.info.with_images { ", with the kernels" } else { "" }
            );
            for l in &s.info.cut_logs {
                outln!("  cut: {l} (over {} KiB)", crate::publish::bundle::MAX_LOG_BYTES / 1024);
            }
            for n in &s.info.notes {
                outln!("  note: {n}");
            }
            exit::SUCCESS
        }
        Err(e @ (BundleError::Image(_) | BundleError::Io { .. })) => {
            errln!("error: {e}");
            exit::INFRASTRUCTURE
        }
        Err(e) => {
            errln!("error: {e}");
            exit::CONFIG_ERROR
        }
    }
}

/// `75.5 kB`, `81.5 MB` (10^3 and 10^6 bytes).
fn human_bytes(n: u64) -> String {
    if n >= 1_000_000 {
        format!("{:.1} MB", n as f64 / 1e6)
    } else {
        format!("{:.1} kB", n as f64 / 1e3)
    }
}

/// `vmrepro replay`.
async fn replay(
    bundle: &Path,
    results: PathBuf,
    junit: Option<&Path>,
    cache: Cache,
    fresh_boot: bool,
    pin: bool,
) -> i32 {
    use crate::publish::replay::{prepare, ReplayError, ReplayOptions};
    let prepared = {
        let (b, c) = (bundle.to_path_buf(), cache.clone());
        match tokio::task::spawn_blocking(move || prepare(&b, &c)).await.expect("prepare task") {
            Ok(p) => p,
            Err(e) => {
                errln!("error: {e}");
                return match e {
                    ReplayError::Bundle(_) | ReplayError::Suite(_) => exit::CONFIG_ERROR,
                    _ => exit::INFRASTRUCTURE,
                };
            }
        }
    };
    outln!(
        "bundle: {} (suite {}, made by vmrepro {} {})",
        bundle.display(),
        prepared.bundle.info.suite,
        prepared.bundle.info.created_by.version,
        prepared.bundle.info.created_by.git_commit
    );
    for c in &prepared.checks {
        outln!("verified: {c}");
    }
    let opts = ReplayOptions { results_root: results, cache, events: progress_sink(), fresh_boot, pin };
    let r = match prepared.run(&opts, interrupted()).await {
        Ok(r) => r,
        Err(e) => {
            errln!("error: {e}");
            return exit::INFRASTRUCTURE;
        }
    };
    match &r.now {
        Some(a) => {
            out!("{}", render(a));
            outln!("report: {}", a.dir.join(crate::report::published::REPORT_MD).display());
            write_junit(junit, &crate::report::junit::junit(&a.record, Some(&a.results)));
        }
        None => {
            out!("{}", crate::report::summary(&r.outcome.record));
            write_junit(junit, &crate::report::junit::junit(&r.outcome.record, None));
        }
    }
    for n in &r.notes {
        outln!("note: {n}");
    }
    match r.outcome.record.status {
        RunStatus::InfrastructureError | RunStatus::Running => return exit::INFRASTRUCTURE,
        RunStatus::Interrupted => return exit::INTERRUPTED,
        _ => {}
    }
    match &r.diff {
        Some(d) => {
            outln!("\nthen (the bundle) against now ({}):", r.outcome.dir.display());
            out!("{}", d.text);
            if d.agrees() && r.outcome.record.status == RunStatus::Passed {
                exit::SUCCESS
            } else {
                exit::TEST_FAILURE
            }
        }
        None => exit::TEST_FAILURE,
    }
}

/// `vmrepro compare`.
fn compare(a: &Path, b: &Path) -> i32 {
    use crate::publish::replay::{compare, open};
    let (ra, rb) = match (open(a), open(b)) {
        (Ok(x), Ok(y)) => (x, y),
        (Err(e), _) | (_, Err(e)) => {
            errln!("error: {e}");
            return exit::CONFIG_ERROR;
        }
    };
    outln!("A: {}\nB: {}", a.display(), b.display());
    let (d, notes) = compare(&ra, &rb);
    for n in &notes {
        outln!("note: {n}");
    }
    out!("{}", d.text);
    if d.agrees() {
        exit::SUCCESS
    } else {
        exit::TEST_FAILURE
    }
}

/// `vmrepro images build`: resolves every image the suites need (or every pinned
/// kernel and the default rootfs); returns the exit code.
async fn build_images(suites: &[PathBuf], images: Option<&Path>, cache: &Cache, events: EventSink) -> i32 {
    let mut kernels: Vec<KernelSource> = Vec::new();
    let mut rootfs = Vec::new();
    let mut catalog = None;
    for s in suites {
        let (p, c) = match load_or_exit(s, images) {
            Ok(pc) => pc,
            Err(code) => return code,
        };
        for v in p.vms {
            rootfs.push(v.rootfs_request());
            kernels.push(v.kernel);
        }
        catalog = Some(c);
    }
    let catalog = match catalog {
        Some(c) => c,
        None => match Catalog::locate(images, Path::new(".")).and_then(|d| Catalog::load(&d)) {
            Ok(c) => {
                kernels = c.kernels.iter().cloned().map(KernelSource::Debian).collect();
                rootfs.push(crate::infra::images::rootfs::RootfsRequest::new(DEFAULT_ROOTFS, &[]));
                c
            }
            Err(e) => {
                errln!("error: {e}");
                return exit::CONFIG_ERROR;
            }
        },
    };
    let resolved = resolve_all(&kernels, &rootfs, cache, &catalog, &events).await;
    for (what, e) in &resolved.failures {
        errln!("error: {what}: {e}");
    }
    if resolved.failures.is_empty() {
        exit::SUCCESS
    } else {
        exit::INFRASTRUCTURE
    }
}

/// Resolves on SIGINT (Ctrl-C), SIGTERM or SIGHUP (terminal closed). The handlers are
/// installed when this is first polled, and stay installed: a second signal while the
/// run tears down (which is bounded, see `Vm::shutdown`) doesn't kill the runner
/// half-way through its cleanup.
pub async fn interrupted() {
    use tokio::signal::unix::{signal, SignalKind};
    let mut int = signal(SignalKind::interrupt()).expect("SIGINT handler");
    let mut term = signal(SignalKind::terminate()).expect("SIGTERM handler");
    let mut hup = signal(SignalKind::hangup()).expect("SIGHUP handler");
    tokio::select! {
        _ = int.recv() => {}
        _ = term.recv() => {}
        _ = hup.recv() => {}
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
