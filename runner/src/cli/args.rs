//! The command line's shape: clap types for every subcommand and option (their doc
//! comments are the `--help` text).

use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, Subcommand};

// The command line: global options and one subcommand (no doc comment: clap would
// make it the long `--help` text).
#[derive(Debug, Parser)]
#[command(name = "vmrepro", version, about = "Declarative reproducibility suites on QEMU virtual machines")]
pub(crate) struct Cli {
    /// The project's images folder (default: nearest `images/` above the suite, or
    /// $VMREPRO_IMAGES).
    #[arg(long, global = true, env = "VMREPRO_IMAGES")]
    pub(crate) images: Option<PathBuf>,
    /// Artefact cache folder (default: $VMREPRO_CACHE_DIR, $XDG_CACHE_HOME/vmrepro or
    /// ~/.cache/vmrepro).
    #[arg(long, global = true, env = "VMREPRO_CACHE_DIR")]
    pub(crate) cache: Option<PathBuf>,
    /// Map a tree name of `kernel: {tree: NAME, rev: …}` to a git checkout on this
    /// machine, NAME=PATH (repeatable; also $VMREPRO_TREES=NAME=PATH,…, which this
    /// overrides name by name). vmrepro reads the checkout's objects only: its working
    /// tree, index and refs are never touched.
    #[arg(long = "tree", global = true, value_name = "NAME=PATH", value_parser = crate::infra::images::tree::parse_mapping)]
    pub(crate) trees: Vec<(String, PathBuf)>,
    #[command(subcommand)]
    pub(crate) command: Command,
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
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
        /// How saved states hold the guest's RAM: `mapped` (a RAM file each restored
        /// VM maps copy-on-write; the default) or `copied` (in the migration stream,
        /// copied into each restored VM's own anonymous memory, which KVM can back
        /// with transparent huge pages: for memory-bound workloads under KVM). The two
        /// are different saved states.
        #[arg(long, value_enum, default_value = "mapped")]
        state_ram: StateRamArg,
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
        /// How much the bundle may unpack to.
        #[command(flatten)]
        budget: BudgetArgs,
    },
    /// Print two runs of a suite side by side (run folders or bundles), with each VM's
    /// own change from A to B as a verdict. Exit 0 when every verdict against the
    /// baseline agrees, 1 when one differs.
    Compare {
        /// The first run (folder or bundle): column A.
        run_a: PathBuf,
        /// The second run: column B.
        run_b: PathBuf,
        /// How much a bundle may unpack to.
        #[command(flatten)]
        budget: BudgetArgs,
    },
    /// Write a run folder as KCIDB JSON (schema v5.3, kernel CI's report database): a
    /// checkout per kernel source, a build per kernel, a test per measurement and VM
    /// with its status, verdict and numbers (no VM; nothing written into the folder).
    Export {
        /// The format: KCIDB (the only one so far).
        #[arg(long, required = true)]
        kcidb: bool,
        /// The run folder (`results/<suite>/<timestamp>`).
        run_dir: PathBuf,
        /// Write the JSON here (replaced atomically) instead of printing it.
        #[arg(short, long, value_name = "FILE")]
        output: Option<PathBuf>,
    },
    /// Find the commit of a git tree that made a VM's verdict change: build the VM's
    /// kernel (`kernel: {tree, rev}`) at the commits git's bisection picks, run the
    /// suite at each, mark each commit by the VM's verdict against its baseline (the
    /// direction --bad shows is bad, `same` is good; a build or boot failure is
    /// skipped), then run the culprit and its parent again to verify it. The state is
    /// kept in the bisect folder: the same command resumes an interrupted bisect.
    Bisect {
        /// The suite file.
        suite: PathBuf,
        /// The VM whose kernel is bisected.
        #[arg(long)]
        vm: String,
        /// A revision of the tree that does not show the change.
        #[arg(long)]
        good: String,
        /// A revision that shows it (default: the VM's `rev` in the suite).
        #[arg(long)]
        bad: Option<String>,
        /// The measurement whose verdict decides (needed when several measure the VM).
        #[arg(long)]
        measurement: Option<String>,
        /// Runs of the culprit and of its parent each, to verify the culprit.
        #[arg(long, default_value_t = 3)]
        verify: u32,
        /// Runs at most of one commit while its verdict is undecided (their values
        /// pooled, the test's α shared among them).
        #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=20))]
        max_runs: u32,
        /// The bisect folder (default: `bisect/<suite>-<vm>-<good>-<bad>`).
        #[arg(long)]
        dir: Option<PathBuf>,
        /// Boot every VM and save no VM state (see `run --fresh-boot`).
        #[arg(long)]
        fresh_boot: bool,
        /// Bind each QEMU process to one host CPU (see `run --pin`).
        #[arg(long, env = "VMREPRO_PIN", value_parser = clap::builder::FalseyValueParser::new())]
        pin: bool,
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
    /// Print the RPC table of a run's packet captures (`vms/VM/capture.pcap`, recorded
    /// with `capture:` on) and the ten longest waits before a retransmission, with
    /// their XIDs and times (no VM).
    Wire {
        /// The run folder (`results/<suite>/<timestamp>`).
        run_dir: PathBuf,
        /// Only this VM (default: every VM with a capture).
        vm: Option<String>,
    },
    /// Print a suite's compiled plan as JSON (what `run` would execute; the same as a
    /// run folder's `plan.json`).
    Plan {
        /// The suite file.
        suite: PathBuf,
        /// Instead of the plan, print what the suite will fetch, build or save (kernel
        /// packages, prepared and source-built kernels, root filesystems with their
        /// packages, saved VM states) and what the cache already has, with sizes and
        /// when each cached entry was built. Fetches and builds nothing.
        #[arg(long)]
        cost: bool,
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
    /// marker and powered off; vmrepro's boot of the same VM (a generated one-VM suite),
    /// its start from a saved state with the RAM mapped and with the RAM copied, each to
    /// "guest agent answered" and to "first command's output received"; a warm
    /// resolution of `--suite`'s images. Then `--suite-reps` runs of `--suite`, split into
    /// phases from run.json, and the scaling suite (an NFS server and N clients reading
    /// 20 MB each) for each `--scale` N, with mapped and then with copied saved states,
    /// with each QEMU's peak resident memory (/proc/PID/status VmRSS and VmHWM) and
    /// proportional set size (/proc/PID/smaps_rollup Pss). Prints Markdown tables
    /// (min / median / max; seconds, MiB), or JSON with --json.
    Bench(BenchArgs),
    /// Build, fetch or list images.
    Images {
        #[command(subcommand)]
        command: ImagesCommand,
    },
}

/// `vmrepro bench`'s options.
#[derive(Debug, clap::Args)]
pub(crate) struct BenchArgs {
    /// Repetitions of the interleaved boot and warm-image measurements.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u16).range(1..=100))]
    pub(crate) reps: u16,
    /// The suite whose images are resolved warm and whose runs are split into phases.
    #[arg(long, default_value = "suites/nfs-read-100mb.yaml")]
    pub(crate) suite: PathBuf,
    /// Runs of --suite (0: skip).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(0..=20))]
    pub(crate) suite_reps: u16,
    /// Client counts of the scaling measurement, comma-separated (`--scale ''`: skip).
    #[arg(long, default_value = "1,2,4,8", value_delimiter = ',')]
    pub(crate) scale: Vec<String>,
    /// Debian kernel series of the boot VM and of the scaling clients.
    #[arg(long, default_value = "6.1")]
    pub(crate) kernel: String,
    /// Guest RAM of the boot VM and of the scaling clients, MiB.
    #[arg(long, default_value_t = 384, value_parser = clap::value_parser!(u64).range(128..=16384))]
    pub(crate) memory: u64,
    /// Also build the boot VM's images (one Debian kernel and the rootfs) once into an
    /// empty temp cache, and time it (minutes: mmdebstrap).
    #[arg(long)]
    pub(crate) cold: bool,
    /// The suite's and the scaling suites' runs boot every VM instead of starting VMs
    /// from saved states (the boot measurements always do both).
    #[arg(long)]
    pub(crate) fresh_boot: bool,
    /// The suite's and the scaling suites' runs bind each QEMU to one host CPU (as
    /// `vmrepro run --pin`); the boot measurements don't, as the bare boot doesn't.
    #[arg(long, env = "VMREPRO_PIN", value_parser = clap::builder::FalseyValueParser::new())]
    pub(crate) pin: bool,
    /// Where the suite's and the scaling suites' run folders go.
    #[arg(long, default_value = "results")]
    pub(crate) results: PathBuf,
    /// Print the report as JSON instead of Markdown.
    #[arg(long)]
    pub(crate) json: bool,
}

/// `run --state-ram` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum StateRamArg {
    /// A RAM file mapped copy-on-write by each restored VM.
    Mapped,
    /// The RAM in the migration stream, copied into each restored VM.
    Copied,
}

/// `--keep` values.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub(crate) enum KeepArg {
    /// Whatever the outcome.
    Always,
    /// Only when a step did not pass or the run failed.
    OnFailure,
}

#[derive(Debug, Subcommand)]
pub(crate) enum ImagesCommand {
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

/// The unpacking budget of an untrusted bundle (see SECURITY.md); raise it only for a
/// bundle you trust.
#[derive(Debug, Clone, Copy, clap::Args)]
pub(crate) struct BudgetArgs {
    /// The most all files of a bundle may unpack to, bytes (default 4 GiB).
    #[arg(long, value_name = "BYTES", default_value_t = crate::publish::bundle::Budget::DEFAULT_TOTAL_BYTES)]
    pub(crate) max_unpacked_bytes: u64,
    /// The most one file of a bundle may unpack to, bytes (default 1 GiB).
    #[arg(long, value_name = "BYTES", default_value_t = crate::publish::bundle::Budget::DEFAULT_FILE_BYTES)]
    pub(crate) max_file_bytes: u64,
    /// The most entries (files and folders) a bundle may have (default 20000).
    #[arg(long, value_name = "N", default_value_t = crate::publish::bundle::Budget::DEFAULT_ENTRIES)]
    pub(crate) max_entries: u64,
}

impl BudgetArgs {
    /// As the library's [`crate::publish::bundle::Budget`].
    pub(crate) fn budget(&self) -> crate::publish::bundle::Budget {
        crate::publish::bundle::Budget {
            total_bytes: self.max_unpacked_bytes,
            file_bytes: self.max_file_bytes,
            entries: self.max_entries,
            ..Default::default()
        }
    }
}
