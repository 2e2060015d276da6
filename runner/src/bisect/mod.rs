//! `vmrepro bisect`: from "kernel B is slower than kernel A" to the commit that made
//! it so, over a git tree the user mapped (`kernel: {tree, rev}`,
//! [`crate::infra::images::tree`]).
//!
//! One VM of the suite is bisected: at each step its kernel is built from the commit
//! git's bisection picks and the whole suite runs; the VM's verdict against its
//! baseline marks the commit bad (the direction `--bad` showed) or good (`same`).
//! The search, the marks and the verification of the culprit are [`engine`]'s; a run
//! is [`judge`]'s; what is kept between runs, so an interrupted bisect resumes, is
//! [`state`]'s (`bisect.json`); [`report`] writes `bisect.log` (`git bisect log`
//! format: `git bisect replay` takes it), `bisect-report.md` (a 0-day bisect mail)
//! and `results.json`; [`git`] asks the user's checkout, read-only.
//!
//! The bisect folder (`--dir`, default `bisect/<suite>-<vm>-<good>-<bad>`):
//!
//! ```text
//! bisect.json         what was asked and every run so far (resume)
//! bisect.log          git bisect log format
//! bisect-report.md    the report
//! results.json        the steps, the culprit, the verification, the confidence
//! runs/NN-<role>-<commit>/   each run's folder, as `vmrepro run` leaves it
//! ```

pub mod engine;
pub mod git;
pub mod judge;
pub mod report;
pub mod state;

use std::path::{Path, PathBuf};

use crate::events::{Event, EventSink};
use crate::infra::images::kernel::KernelSource;
use crate::infra::images::tree::resolve_rev;
use crate::infra::images::Cache;
use crate::run::record::RunDirError;
use engine::{Engine, Outcome};
use state::{Question, State};

/// What stops a bisect.
#[derive(Debug, thiserror::Error)]
pub enum BisectError {
    /// The suite, the VM, the measurement or a revision does not fit a bisect.
    #[error("{0}")]
    Config(String),
    /// The suite does not load.
    #[error(transparent)]
    Load(#[from] crate::suite::LoadError),
    /// Git failed on the checkout.
    #[error("{0}")]
    Git(String),
    /// The endpoints do not differ as `--good` and `--bad` say.
    #[error("{0}")]
    Endpoints(String),
    /// The bisect folder holds another bisect, or runs this one no longer makes.
    #[error("{0}")]
    Resume(String),
    /// The bisect folder can't be read or written.
    #[error(transparent)]
    Folder(#[from] RunDirError),
    /// Another file operation failed.
    #[error("{0}")]
    Io(String),
    /// A run could not start (images, network, host).
    #[error(transparent)]
    Run(crate::run::RunError),
    /// A run failed otherwise than by the bisected VM (the baseline, the server, the
    /// host).
    #[error("{0}")]
    Infrastructure(String),
    /// SIGINT, SIGTERM or SIGHUP.
    #[error("interrupted")]
    Interrupted,
}

/// What `vmrepro bisect` was given.
pub struct BisectOptions {
    /// The suite file.
    pub suite: PathBuf,
    /// The images folder (`--images`), else found from the suite.
    pub images: Option<PathBuf>,
    /// The VM whose kernel is bisected (its kernel must be `{tree, rev}`).
    pub vm: String,
    /// A revision that does not show the change.
    pub good: String,
    /// A revision that shows it; `None`: the VM's `rev` in the suite.
    pub bad: Option<String>,
    /// The measurement whose verdict decides; `None`: the only one measuring the VM.
    pub measurement: Option<String>,
    /// Runs of the culprit and of its parent each, to verify it.
    pub verify: u32,
    /// Runs at most of a commit while its verdict is undecided.
    pub max_runs: u32,
    /// The bisect folder; `None`: `bisect/<suite>-<vm>-<good>-<bad>`.
    pub dir: Option<PathBuf>,
    /// The artefact cache.
    pub cache: Cache,
    /// Progress events (each bisect line is an [`Event::Notice`]).
    pub events: EventSink,
    /// `--fresh-boot`.
    pub fresh_boot: bool,
    /// `--pin`.
    pub pin: bool,
}

impl std::fmt::Debug for BisectOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BisectOptions")
            .field("suite", &self.suite)
            .field("vm", &self.vm)
            .field("good", &self.good)
            .field("bad", &self.bad)
            .field("dir", &self.dir)
            .finish()
    }
}

/// A bisect that ran to its end.
#[derive(Debug)]
pub struct Finished {
    /// The bisect folder.
    pub dir: PathBuf,
    /// What was asked.
    pub question: Question,
    /// How it ended.
    pub outcome: Outcome,
    /// How many recorded runs were taken from `bisect.json` rather than run.
    pub resumed_runs: usize,
}

/// Bisects (or resumes the bisect in the folder), then writes `bisect.log`,
/// `bisect-report.md` and `results.json`.
///
/// Errors: see [`BisectError`]; nothing is written outside the bisect folder (and the
/// cache), and the user's checkout is only read.
pub async fn bisect(opts: BisectOptions, stop: tokio::sync::watch::Receiver<bool>) -> Result<Finished, BisectError> {
    let trees = crate::infra::images::tree::Trees::current().map_err(BisectError::Config)?;
    let (plan, catalog) = crate::suite::load_with(
        &opts.suite,
        opts.images.as_deref(),
        &crate::suite::LoadOptions { trees, ..crate::suite::LoadOptions::default() },
    )?;
    let vm_index = plan.vms.iter().position(|v| v.name == opts.vm).ok_or_else(|| {
        let names: Vec<&str> = plan.vms.iter().map(|v| v.name.as_str()).collect();
        BisectError::Config(format!("suite {} has no VM {} (its VMs: {})", plan.suite, opts.vm, names.join(", ")))
    })?;
    let KernelSource::Tree(tk) = &plan.vms[vm_index].kernel else {
        return Err(BisectError::Config(format!(
            "VM {}'s kernel is {}; bisect needs a kernel from a git tree (`kernel: {{tree: NAME, rev: REV}}`)",
            opts.vm,
            plan.vms[vm_index].kernel.label()
        )));
    };
    let checkout = tk.checkout.clone().ok_or_else(|| {
        BisectError::Config(format!(
            "tree `{}` is not mapped to a checkout on this machine: give `--tree {}=PATH`",
            tk.tree, tk.tree
        ))
    })?;
    if let Some(other) = plan.vms.iter().find(|v| {
        v.name != opts.vm && matches!(&v.kernel, KernelSource::Tree(o) if o.tree == tk.tree && o.rev == tk.rev)
    }) {
        return Err(BisectError::Config(format!(
            "VMs {} and {} both boot {}@{}: bisect changes the kernel of one VM; give {} its own `rev`",
            opts.vm, other.name, tk.tree, tk.rev, other.name
        )));
    }
    let m = pick_measurement(&plan, &opts.vm, opts.measurement.as_deref())?;
    let baseline = m.baseline_of(&opts.vm).to_string();
    if baseline == opts.vm {
        return Err(BisectError::Config(format!(
            "VM {} is the baseline of measurement {}: bisect a VM that is compared with it",
            opts.vm, m.name
        )));
    }
    let good = resolve_rev(&checkout, &opts.good).map_err(BisectError::Git)?;
    let bad = resolve_rev(&checkout, opts.bad.as_deref().unwrap_or(&tk.rev)).map_err(BisectError::Git)?;
    if good.commit == bad.commit {
        return Err(BisectError::Config(format!("--good and --bad are the same commit {}", good.commit)));
    }
    if !git::is_ancestor(&checkout, &good.commit, &bad.commit).map_err(BisectError::Git)? {
        return Err(BisectError::Config(format!(
            "the good commit {} ({}) is not an ancestor of the bad one {} ({}): bisect looks for the change between them",
            engine::short(&good.commit),
            good.describe,
            engine::short(&bad.commit),
            bad.describe
        )));
    }
    let suite_bytes = crate::path_io::read_named(&opts.suite, crate::schema::load::MAX_SUITE_BYTES)
        .map_err(|e| BisectError::Io(e.to_string()))?;
    let question = Question {
        suite: plan.suite.clone(),
        suite_sha256: crate::infra::hash::sha256_hex(&suite_bytes),
        vm: opts.vm.clone(),
        measurement: m.name.clone(),
        metric: m.metric.name.clone(),
        baseline,
        tree: tk.tree.clone(),
        good,
        bad,
        verify: opts.verify,
        max_runs: opts.max_runs.max(1),
    };
    let dir = opts.dir.clone().unwrap_or_else(|| {
        PathBuf::from("bisect").join(format!(
            "{}-{}-{}-{}",
            question.suite,
            question.vm,
            engine::short(&question.good.commit),
            engine::short(&question.bad.commit)
        ))
    });
    std::fs::create_dir_all(dir.join("runs"))
        .map_err(|e| BisectError::Io(format!("creating {}: {e}", dir.display())))?;
    let state = match State::read(&dir)? {
        Some(s) if s.question == question => s,
        Some(s) => {
            return Err(BisectError::Resume(format!(
                "{} holds another bisect (of VM {} in suite {}, good {} bad {}, or another suite file or settings): give another --dir, or remove it",
                dir.display(),
                s.question.vm,
                s.question.suite,
                engine::short(&s.question.good.commit),
                engine::short(&s.question.bad.commit)
            )))
        }
        None => {
            let s = State::new(question.clone());
            s.write(&dir)?;
            s
        }
    };
    let resumed_runs = state.runs.len();
    let events = opts.events.clone();
    let say = move |line: &str| events(Event::Notice(line.to_string()));
    if resumed_runs > 0 {
        say(&format!("bisect: resuming {}: {resumed_runs} run(s) recorded", dir.display()));
    }
    let judge = judge::SuiteJudge {
        plan: plan.clone(),
        vm: vm_index,
        measurement: m.name.clone(),
        cache: opts.cache.clone(),
        catalog,
        events: opts.events.clone(),
        fresh_boot: opts.fresh_boot,
        pin: opts.pin,
        stop,
    };
    let engine =
        Engine { checkout: &checkout, dir: &dir, policy: m.verdict, better: m.metric.better, judge, state, say: &say };
    let outcome = engine.bisect().await?;
    let finished = Finished { dir, question, outcome, resumed_runs };
    report::write(&finished, &reproduce_command(&opts, &finished.question))?;
    Ok(finished)
}

/// The measurement of `plan` that decides: `name`, else the only one that measures
/// `vm`.
fn pick_measurement<'a>(
    plan: &'a crate::plan::Plan,
    vm: &str,
    name: Option<&str>,
) -> Result<&'a crate::plan::measurement::MeasurementPlan, BisectError> {
    let measuring: Vec<&crate::plan::measurement::MeasurementPlan> =
        plan.measurements.iter().filter(|m| m.vms.iter().any(|v| v.vm == vm)).collect();
    let names = || measuring.iter().map(|m| m.name.as_str()).collect::<Vec<_>>().join(", ");
    match name {
        Some(n) => measuring.iter().find(|m| m.name == n).copied().ok_or_else(|| {
            BisectError::Config(format!("no measurement {n} measures VM {vm} (those that do: {})", names()))
        }),
        None => match measuring.as_slice() {
            [one] => Ok(one),
            [] => Err(BisectError::Config(format!("no measurement of suite {} measures VM {vm}", plan.suite))),
            _ => Err(BisectError::Config(format!(
                "several measurements measure VM {vm} ({}): give --measurement NAME",
                names()
            ))),
        },
    }
}

/// The command that makes this bisect again (the tree's path left for the reader).
fn reproduce_command(opts: &BisectOptions, q: &Question) -> String {
    let mut c = format!(
        "vmrepro bisect {} --tree {}=PATH --vm {} --good {} --bad {} --measurement {}",
        display_path(&opts.suite),
        q.tree,
        q.vm,
        q.good.commit,
        q.bad.commit,
        q.measurement
    );
    if q.verify != 3 {
        c.push_str(&format!(" --verify {}", q.verify));
    }
    if q.max_runs != 3 {
        c.push_str(&format!(" --max-runs {}", q.max_runs));
    }
    c
}

/// `path` as given when relative, else its last two components (a host path says
/// nothing to a reader).
fn display_path(path: &Path) -> String {
    if path.is_relative() {
        return path.display().to_string();
    }
    let parts: Vec<String> = path.iter().rev().take(2).map(|c| c.to_string_lossy().into_owned()).collect();
    parts.into_iter().rev().collect::<Vec<_>>().join("/")
}
