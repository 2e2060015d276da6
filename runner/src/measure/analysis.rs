//! Analysis of a measurement from a saved run folder: no VM, only files.
//!
//! For every measured iteration ([`crate::plan::measurement::Iteration`], listed in the run's
//! `plan.json`) the step's stdout (`vms/<vm>/NN-<step>.stdout`, named in `run.json`) is
//! split into its sections ([`Sections`]); the guest clock around `run` (section
//! `clock`, [`Clock`]) gives the elapsed seconds (1 ns resolution; run folders without
//! it: GNU time's, 10 ms) and where `run` was on the host's clock ([`RunClock`]); GNU
//! time's report gives the user and system seconds and `run`'s exit status; each observer's two outputs give counter
//! deltas ([`super::stats::delta`]) and the derived metrics of its kind; each remote observer's
//! two steps give the packets its netem sent and dropped during the iteration; the
//! checks are applied. Over a VM's iterations the metric is summarised and compared with
//! the baseline VM's ([`super::stats::compare`]: median change over 10 % **and** separated
//! ranges). A baseline whose values are 0 gives no ratio: its VMs' verdict says so
//! ([`zero_baseline_words`]). For a concurrent measurement, each measured round's
//! overlap ([`RoundOverlap`]) says how much of it its iterations ran together.
//!
//! Every iteration has an [`Outcome`]: `run`'s exit status or signal, a failed
//! `setup`, a timeout, a crashed guest, or not run. An iteration whose `run` did not
//! exit as expected is left out of the statistics and is a problem, except in a
//! measurement that compares outcomes (`compare: outcome`), where the outcomes *are*
//! the result: each VM's are compared with the baseline's.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::observer::{derived_metrics, Observation};
use super::script::{
    Clock, Section, Sections, EXIT_SETUP_FAILED, EXIT_TEARDOWN_FAILED, METRIC_FILE_KEPT_BYTES, OUTPUT_KEPT_BYTES,
};
use super::stats::{compare, delta, summarize, Comparison, Summary};
use super::verdict::min_detectable;
use crate::parse::gnutime;
use crate::plan::measurement::{
    Better, Bytes, Expect, Iteration, MeasurementPlan, MetricFrom, OutputMetric, RemoteObserver,
};
use crate::run::record::RunDirError;
use crate::run::record::{RunRecord, StepStatus};

/// How an iteration ended, whatever its numbers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Outcome {
    /// `run` ran and exited with `status` (GNU time's report).
    Exited {
        /// Exit status.
        status: i32,
    },
    /// `run` was killed by `signal` (GNU time's report).
    Signalled {
        /// Signal number.
        signal: i32,
    },
    /// `setup` failed with `status`; `run` did not run.
    SetupFailed {
        /// `setup`'s exit status (`None` when it was not printed).
        status: Option<i32>,
    },
    /// The iteration did not end within its timeout (the guest's kernel log and blocked
    /// tasks are in the step's diagnostics file).
    TimedOut,
    /// The guest died (e.g. a kernel panic) or its agent was lost during the iteration.
    Crashed,
    /// The iteration did not run (an earlier one of the VM hung or crashed, or a
    /// dependency did not pass), or its output could not be read.
    NotRun,
    /// An action around it (`each:`) did not pass: a failed `before` action kept `run`
    /// from running, a failed `after` one leaves the iteration's numbers out.
    ActionFailed,
}

impl std::fmt::Display for Outcome {
    /// `exit 0`, `signal 9`, `setup failed (exit 32)`, `timed out`, `crashed`, `not run`,
    /// `action failed`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Outcome::Exited { status } => write!(f, "exit {status}"),
            Outcome::Signalled { signal } => write!(f, "signal {signal}"),
            Outcome::SetupFailed { status: Some(s) } => write!(f, "setup failed (exit {s})"),
            Outcome::SetupFailed { status: None } => f.write_str("setup failed"),
            Outcome::TimedOut => f.write_str("timed out"),
            Outcome::Crashed => f.write_str("crashed"),
            Outcome::NotRun => f.write_str("not run"),
            Outcome::ActionFailed => f.write_str("action failed"),
        }
    }
}

/// The metric of measurements that compare outcomes rather than numbers
/// (`compare: outcome`): the verdict says whether each VM's outcomes are the baseline's.
pub const OUTCOME_METRIC: &str = "outcome";

/// One measured iteration, analysed.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct IterationResult {
    /// 1-based number among the VM's measured iterations.
    pub iteration: u32,
    /// Its step.
    pub step: String,
    /// How the step ended.
    pub status: StepStatus,
    /// How the iteration ended.
    pub outcome: Outcome,
    /// `run`'s exit status (from GNU time: 0 unless it reported another).
    pub exit_status: Option<i32>,
    /// Seconds of `run`: the guest clock's (section `clock`, 1 ns resolution), else
    /// (run folders before it, or a clock that could not be read) GNU time's.
    pub elapsed_s: Option<f64>,
    /// Seconds of `run` as GNU time reported them (10 ms resolution).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gnu_time_elapsed_s: Option<f64>,
    /// When `run` started and ended, on the guest's clock and the host's (absent in run
    /// folders before the clock section).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock: Option<RunClock>,
    /// User CPU seconds of `run`.
    pub user_s: Option<f64>,
    /// System CPU seconds of `run`.
    pub system_s: Option<f64>,
    /// Bytes `run` moved (the measurement's `bytes`, or the number its record printed).
    pub bytes: Option<u64>,
    /// `bytes / 10^6 / elapsed_s` (MB = 10^6 bytes); `None` when either is unknown or
    /// the elapsed time is zero.
    pub throughput_mb_s: Option<f64>,
    /// The derived metrics of the observers (deltas over `run`; `None`: not knowable).
    pub metrics: BTreeMap<String, Option<i64>>,
    /// The number `run` printed (the measurement's `metric:`), by the metric's name;
    /// absent when it has none, or when the output gave none (then a problem says why).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub output_metrics: BTreeMap<String, f64>,
    /// Every counter that changed over `run`, `name → delta`.
    pub changed_counters: BTreeMap<String, i64>,
    /// What the VM's packet capture shows of the iteration (the `wire.*` counters of
    /// [`crate::wire::summary::COUNTERS`]: counts, and durations in ms), from the
    /// frames QEMU wrote while its step ran (`capture_bytes` in `run.json`); absent
    /// when the VM had no capture or it had stopped.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub wire: BTreeMap<String, f64>,
    /// Counters absent before `run` and present after it, `name → value after`
    /// (`netstat -s` leaves out counters while they are zero).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub appeared_counters: BTreeMap<String, u64>,
    /// What the remote observers saw during the iteration.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub remote: Vec<RemoteResult>,
    /// The records' outputs, trimmed.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub records: BTreeMap<String, String>,
    /// The actions around it (`each:`), in the order they ran, with their outputs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub actions: Vec<ActionResult>,
    /// Whether it counts in the statistics.
    pub counted: bool,
    /// The parsed output, for presets (not serialized).
    #[serde(skip)]
    pub raw: Raw,
}

/// An iteration's output as the analysis read it.
#[derive(Debug, Clone, Default)]
pub struct Raw {
    /// The sections.
    pub sections: Sections,
    /// Every observer's reading before `run`, merged.
    pub before: Observation,
    /// Every observer's reading after `run`, merged.
    pub after: Observation,
}

/// What a remote observer saw during one iteration.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RemoteResult {
    /// The VM read.
    pub vm: String,
    /// The observer (`netem`).
    pub observer: String,
    /// Packets its netem sent on during the iteration (IP fragments count one each;
    /// tc's "Sent" leaves dropped packets out).
    pub sent_packets: u64,
    /// Packets its netem dropped.
    pub dropped_packets: u64,
}

/// How one action around an iteration ended (`each:`), and what it printed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ActionResult {
    /// Its key in the measurement: `each.before[0]`.
    pub key: String,
    /// The VM it ran on.
    pub vm: String,
    /// Its command.
    pub command: String,
    /// Its step on that VM.
    pub step: String,
    /// How the step ended.
    pub status: StepStatus,
    /// Its exit status, when it exited.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i64>,
    /// Its output (stdout and stderr, interleaved), lossy UTF-8, trimmed; the whole
    /// output is in the step's stdout file, `stdout`.
    pub output: String,
    /// The step's stdout file, relative to the run folder (absent when it did not run).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stdout: Option<String>,
    /// Why it did not run or did not end (the step's error).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl ActionResult {
    /// How it went wrong, in words (`None`: it passed): `exited 1: "…"`, `timed out`,
    /// `did not run (…)`.
    pub fn failure(&self) -> Option<String> {
        let quoted = || super::output_metric::quote(&self.output);
        let err = || self.error.as_ref().map(|e| format!(": {e}")).unwrap_or_default();
        match self.status {
            StepStatus::Passed => None,
            StepStatus::Failed => Some(match self.exit_code {
                Some(c) => format!("exited {c}: {}", quoted()),
                None => format!("failed: {}", quoted()),
            }),
            StepStatus::TimedOut => Some(format!("timed out{}", err())),
            StepStatus::Skipped => Some(format!("did not run{}", err())),
            other => Some(format!("{other}{}", err())),
        }
    }
}

/// The actions around iteration `it` of `m`, as `rec` recorded them.
///
/// Errors: an action's stdout named in `run.json` can't be read.
fn action_results(
    m: &MeasurementPlan,
    it: &Iteration,
    rec: &RunRecord,
    dir: &Path,
) -> Result<Vec<ActionResult>, RunDirError> {
    let mut out = Vec::new();
    for a in &it.actions {
        let Some(action) = m.actions.get(a.action) else { continue };
        let step = rec.vm(&a.vm).and_then(|v| v.step(&a.step));
        out.push(ActionResult {
            key: action.key(),
            vm: a.vm.clone(),
            command: action.command.clone(),
            step: a.step.clone(),
            status: step.map_or(StepStatus::Skipped, |s| s.status),
            exit_code: step.and_then(|s| s.exit_code),
            output: match step {
                Some(s) => s.stdout_text(dir)?.trim().to_string(),
                None => String::new(),
            },
            stdout: step.and_then(|s| s.stdout.clone()),
            error: match step {
                Some(s) => s.error.clone(),
                None => Some("not in run.json".into()),
            },
        });
    }
    Ok(out)
}

/// When one iteration's `run` started and ended.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct RunClock {
    /// The guest's clock right before `run` (nanoseconds since the epoch, `date +%s%N`).
    pub guest_start_ns: u64,
    /// The guest's clock right after `run`.
    pub guest_end_ns: u64,
    /// Seconds after the run started (host monotonic clock) when `run` started: the
    /// step's start plus the guest clock's time from the script's start to `run`'s (so
    /// it is late by the guest agent's latency in starting the script, the same for
    /// every VM of a run); absent when the step's start was not recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_start_s: Option<f64>,
    /// Likewise when `run` ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_end_s: Option<f64>,
}

impl RunClock {
    /// `c`'s readings, placed on the host's clock by the step's start `step_started_s`
    /// (seconds after the run started).
    pub fn new(c: &Clock, step_started_s: Option<f64>) -> RunClock {
        let (from, to) = c.offsets_s();
        RunClock {
            guest_start_ns: c.start_ns,
            guest_end_ns: c.end_ns,
            host_start_s: step_started_s.map(|s| s + from),
            host_end_s: step_started_s.map(|s| s + to),
        }
    }
}

/// How much of one round of a concurrent measurement its iterations ran together,
/// from their `run`s' times on the host's clock ([`RunClock`]).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct RoundOverlap {
    /// The measured round (1-based; warm-up rounds are not analysed).
    pub round: u32,
    /// The iterations of the round whose times are known (at least 2).
    pub iterations: usize,
    /// Seconds from the first `run`'s start to the last one's.
    pub start_spread_s: f64,
    /// Seconds during which every `run` of the round ran (0 when they did not all
    /// meet).
    pub overlap_s: f64,
    /// Seconds of the round's longest `run`.
    pub longest_s: f64,
    /// `overlap_s / longest_s` (a fraction; 1 when the longest is 0).
    pub overlap: f64,
}

impl std::fmt::Display for RoundOverlap {
    /// `round 2: overlap 97 % of the longest iteration (3 VMs, starts within 4.1 ms)`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "round {}: overlap {:.0} % of the longest iteration ({} VMs, starts within {})",
            self.round,
            self.overlap * 100.0,
            self.iterations,
            super::format::seconds_precise(self.start_spread_s)
        )
    }
}

/// The overlap of every measured round of `vms` (iterations with the same number) in
/// which at least two iterations have host times.
pub fn round_overlaps(vms: &[VmResult]) -> Vec<RoundOverlap> {
    let mut rounds: BTreeMap<u32, Vec<(f64, f64)>> = BTreeMap::new();
    for i in vms.iter().flat_map(|v| &v.iterations) {
        if let Some(RunClock { host_start_s: Some(a), host_end_s: Some(b), .. }) = i.clock {
            rounds.entry(i.iteration).or_default().push((a, b));
        }
    }
    rounds
        .into_iter()
        .filter(|(_, spans)| spans.len() >= 2)
        .map(|(round, spans)| {
            let first = spans.iter().map(|s| s.0).fold(f64::INFINITY, f64::min);
            let last = spans.iter().map(|s| s.0).fold(f64::NEG_INFINITY, f64::max);
            let end = spans.iter().map(|s| s.1).fold(f64::INFINITY, f64::min);
            let longest = spans.iter().map(|s| s.1 - s.0).fold(0.0, f64::max);
            let overlap_s = (end - last).max(0.0);
            RoundOverlap {
                round,
                iterations: spans.len(),
                start_spread_s: last - first,
                overlap_s,
                longest_s: longest,
                overlap: if longest > 0.0 { overlap_s / longest } else { 1.0 },
            }
        })
        .collect()
}

/// One measured VM over its iterations.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct VmResult {
    /// VM name.
    pub vm: String,
    /// `uname -r` printed in the guest (first measured iteration that printed it).
    pub kernel_release: String,
    /// Its measured iterations.
    pub iterations: Vec<IterationResult>,
    /// The metric over the counted iterations.
    pub metric: Option<Summary>,
    /// Elapsed seconds over the counted iterations.
    pub elapsed_s: Option<Summary>,
    /// Median throughput, MB/s (10^6 bytes/s).
    pub median_mb_s: Option<f64>,
    /// Median of the metric ÷ the baseline's (for "higher is better" metrics, the
    /// baseline's ÷ this VM's, so > 1 is always worse).
    pub ratio_to_baseline: Option<f64>,
    /// Comparison with the baseline (absent for the baseline itself).
    pub comparison: Option<Comparison>,
    /// The verdict in words (`slower (2.5x–3.5x)`; `worse`/`better` for metrics other
    /// than times and rates; `same outcome`/`different outcome` for `compare: outcome`).
    pub verdict: Option<String>,
    /// Each derived metric summed over the counted iterations (`None` if unknown in one).
    pub totals: BTreeMap<String, Option<i64>>,
    /// `run`'s exit status in each measured iteration, in order.
    pub exit_statuses: Vec<Option<i32>>,
    /// How each measured iteration ended, in order.
    pub outcomes: Vec<Outcome>,
}

impl VmResult {
    /// The outcomes in words, each with its count: `exit 0 ×3`, `exit 32 ×2, timed out ×1`.
    pub fn outcome_words(&self) -> String {
        let mut counts: BTreeMap<Outcome, usize> = BTreeMap::new();
        for o in &self.outcomes {
            *counts.entry(*o).or_default() += 1;
        }
        counts.iter().map(|(o, n)| format!("{o} ×{n}")).collect::<Vec<_>>().join(", ")
    }
}

/// One measurement, analysed.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MeasurementResult {
    /// Its name.
    pub name: String,
    /// The built-in scenario that made it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub preset: Option<String>,
    /// The verdict's metric.
    pub metric: String,
    /// Which direction of it is better.
    pub better: Better,
    /// Its unit, when it is a number `run` printed (`metric:`) and the suite gave one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unit: Option<String>,
    /// The baseline VM (with `groups`: the first group's).
    pub baseline: String,
    /// Groups of VMs each compared with its own baseline (`baseline: {axis, value}`);
    /// empty: every VM is compared with `baseline`. Absent from results of runs before
    /// groups existed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<crate::schema::measure::BaselineGroup>,
    /// Measured VMs in order.
    pub vms: Vec<VmResult>,
    /// With `concurrent: true`: how much of each measured round its iterations ran
    /// together (absent otherwise, and in results before the guest clock).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rounds: Vec<RoundOverlap>,
    /// `calibrate: true`: the baseline's A/A copy (its `vm` is the baseline's name)
    /// compared with the baseline like a candidate; its verdict should be `same`, and
    /// its spread is the noise every comparison's [`Comparison::calibrated`] comes from.
    /// Absent without `calibrate` and from results of runs before it existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub calibration: Option<VmResult>,
    /// Checks that failed and outputs that could not be read.
    pub problems: Vec<String>,
}

impl MeasurementResult {
    /// The VM named `vm`.
    pub fn vm(&self, vm: &str) -> Option<&VmResult> {
        self.vms.iter().find(|v| v.vm == vm)
    }

    /// The baseline VM `vm` is compared with: its group's, else `baseline`.
    pub fn baseline_of(&self, vm: &str) -> &str {
        self.groups.iter().find(|g| g.vms.iter().any(|v| v == vm)).map_or(self.baseline.as_str(), |g| &g.baseline)
    }

    /// Who is compared with whom, in words: `baseline client-a`, or `a baseline per
    /// group: client-v6-1-idle (group client-v6-1), client-v6-12-idle (group client-v6-12)`.
    pub fn baseline_words(&self) -> String {
        if self.groups.is_empty() {
            return format!("baseline {}", self.baseline);
        }
        let each: Vec<String> = self.groups.iter().map(|g| format!("{} (group {})", g.baseline, g.name)).collect();
        format!("a baseline per group: {}", each.join(", "))
    }

    /// Whether `vm` is a baseline (its group's, or the measurement's).
    pub fn is_baseline(&self, vm: &str) -> bool {
        self.baseline_of(vm) == vm
    }
}

/// Analyses measurement `m` of the run recorded in `rec`, whose files are under `dir`.
///
/// Errors: a step output named in `run.json` can't be read.
pub fn analyse(m: &MeasurementPlan, rec: &RunRecord, dir: &Path) -> Result<MeasurementResult, RunDirError> {
    let mut problems = Vec::new();
    let derived = derived_metrics(m.observers.iter().map(|o| o.kind()));
    let mut vms = Vec::new();
    for mv in &m.vms {
        vms.push(analyse_vm(m, (&mv.vm, false), rec, dir, &derived, &mut problems)?);
    }
    let mut calibration =
        if m.calibrate { Some(analyse_vm(m, (&m.baseline, true), rec, dir, &derived, &mut problems)?) } else { None };
    if m.metric.name == OUTCOME_METRIC {
        compare_outcomes(m, &mut vms);
    } else {
        compare_metric(m, &mut vms, calibration.as_mut());
    }
    Ok(MeasurementResult {
        name: m.name.clone(),
        preset: m.preset.clone(),
        metric: m.metric.name.clone(),
        better: m.metric.better,
        unit: metric_unit(m),
        baseline: m.baseline.clone(),
        groups: m.groups.clone(),
        rounds: if m.concurrent { round_overlaps(&vms) } else { vec![] },
        vms,
        calibration,
        problems,
    })
}

/// The measured iterations of `m` on VM `vm` and their summaries (the verdict metric,
/// elapsed seconds, median MB/s, the derived metrics' totals), not yet compared with
/// the baseline. Warm-up rounds and the rounds an adaptive repeat did not need are left
/// out. Its kernel release is what the first iteration's `uname -r` printed, else the
/// kernel image's. `(vm, copy)`: the VM, and whether its A/A copy's iterations
/// (`calibrate: true`) are meant rather than its own.
///
/// Errors: a step output named in `run.json` can't be read.
fn analyse_vm(
    m: &MeasurementPlan,
    (vm, copy): (&str, bool),
    rec: &RunRecord,
    dir: &Path,
    derived: &Derived,
    problems: &mut Vec<String>,
) -> Result<VmResult, RunDirError> {
    let mut iterations = Vec::new();
    let mut release = String::new();
    // Adaptive repeats that stopped early: the rounds not run were not needed.
    let needed = |i: &&Iteration| rec.decided_after.get(&m.name).is_none_or(|&r| i.number <= r);
    let capture = vm_capture(m, vm, rec, dir, problems);
    for it in m.iterations.iter().filter(|i| i.vm == vm && !i.warmup && i.copy == copy).filter(needed) {
        let mut r = analyse_iteration(m, it, rec, dir, derived, problems)?;
        if let Some(c) = &capture {
            let range = rec.vm(vm).and_then(|v| v.step(&it.step)).and_then(|s| s.capture_bytes);
            match range {
                Some(range) => {
                    r.wire = c.window(range).counters().into_iter().map(|(k, v)| (k.to_string(), v)).collect();
                }
                None if r.counted && names_wire(m) => {
                    problems.push(format!("{vm}: {}: no capture of this iteration", it.step));
                }
                None => {}
            }
        }
        if release.is_empty() {
            release = r.raw.sections.text(Section::Uname).trim().to_string();
        }
        iterations.push(r);
    }
    if release.is_empty() {
        // No iteration printed `uname -r` (none ran): the release of the kernel image.
        release = rec.vm(vm).map(|v| v.kernel_release.clone()).unwrap_or_default();
    }
    let counted: Vec<&IterationResult> = iterations.iter().filter(|i| i.counted).collect();
    let elapsed: Vec<f64> = counted.iter().filter_map(|i| i.elapsed_s).collect();
    let values: Vec<f64> = counted.iter().filter_map(|i| metric_value(&m.metric.name, i)).collect();
    let mut mbs: Vec<f64> = counted.iter().filter_map(|i| i.throughput_mb_s).collect();
    mbs.sort_by(f64::total_cmp);
    let totals = derived
        .keys()
        .map(|k| (k.to_string(), counted.iter().try_fold(0, |acc, i| Some(acc + i.metrics.get(*k).copied()??))))
        .collect();
    Ok(VmResult {
        vm: vm.to_string(),
        kernel_release: release,
        metric: summarize(&values),
        elapsed_s: summarize(&elapsed),
        median_mb_s: summarize(&mbs).map(|s| s.median),
        ratio_to_baseline: None,
        comparison: None,
        verdict: None,
        totals,
        exit_statuses: iterations.iter().map(|i| i.exit_status).collect(),
        outcomes: iterations.iter().map(|i| i.outcome).collect(),
        iterations,
    })
}

/// Whether `m` compares or shows a wire counter.
fn names_wire(m: &MeasurementPlan) -> bool {
    let wire = |n: &str| n.starts_with(crate::wire::summary::PREFIX);
    wire(&m.metric.name) || m.table.iter().any(|t| wire(t))
}

/// VM `vm`'s packet capture, read once for all its iterations, when `run.json` says it
/// had one. A capture that can't be read is a problem of a measurement that compares or
/// shows a wire counter; without one, its iterations have no wire counters. (A capture
/// stopped at its size cap is a note of the run, not a problem: the iterations after it
/// have no `capture_bytes`.)
fn vm_capture(
    m: &MeasurementPlan,
    vm: &str,
    rec: &RunRecord,
    dir: &Path,
    problems: &mut Vec<String>,
) -> Option<crate::wire::run_dir::Capture> {
    rec.vm(vm)?.capture.as_ref()?;
    match crate::wire::run_dir::Capture::read(dir, vm) {
        Ok(c) => c,
        Err(e) => {
            if names_wire(m) {
                problems.push(format!("{vm}: {e}"));
            }
            None
        }
    }
}

/// `compare: outcome`: each VM that is not a baseline gets the verdict `same outcome`
/// when its outcomes, sorted, are its baseline's, else `different outcome`.
fn compare_outcomes(m: &MeasurementPlan, vms: &mut [VmResult]) {
    let sorted = |v: &VmResult| {
        let mut o = v.outcomes.clone();
        o.sort();
        o
    };
    let bases: BTreeMap<&str, Vec<Outcome>> =
        vms.iter().filter(|v| m.baseline_of(&v.vm) == v.vm).map(|v| (v.vm.as_str(), sorted(v))).collect();
    let verdicts: Vec<Option<String>> = vms
        .iter()
        .map(|v| {
            let base = m.baseline_of(&v.vm);
            (base != v.vm).then(|| {
                let same = bases.get(base).is_some_and(|b| *b == sorted(v));
                if same { "same outcome" } else { "different outcome" }.to_string()
            })
        })
        .collect();
    for (v, verdict) in vms.iter_mut().zip(verdicts) {
        v.verdict = verdict;
    }
}

/// A number as the verdict metric: each VM's counted values are compared with its
/// baseline's ([`compare`], with `m`'s verdict settings), giving every VM its median
/// ratio and each one that is not a baseline its comparison and verdict. With the
/// baseline's A/A copy (`calibration`), the copy is compared with the baseline the same
/// way, and each comparison with that baseline gets the smallest change the A/A pair's
/// noise lets it flag ([`Comparison::calibrated`], [`min_detectable`] of the copy's
/// values against the baseline's).
/// `v`'s values of metric `name` over its counted iterations, in order ([`metric_value`]).
pub fn counted_values(name: &str, v: &VmResult) -> Vec<f64> {
    v.iterations.iter().filter(|i| i.counted).filter_map(|i| metric_value(name, i)).collect()
}

fn compare_metric(m: &MeasurementPlan, vms: &mut [VmResult], calibration: Option<&mut VmResult>) {
    let values = |v: &VmResult| counted_values(&m.metric.name, v);
    let oriented = |xs: Vec<f64>| oriented(m.metric.better, xs);
    let bases: BTreeMap<String, Vec<f64>> =
        vms.iter().filter(|v| m.baseline_of(&v.vm) == v.vm).map(|v| (v.vm.clone(), oriented(values(v)))).collect();
    let raw: BTreeMap<String, Vec<f64>> =
        vms.iter().filter(|v| m.baseline_of(&v.vm) == v.vm).map(|v| (v.vm.clone(), values(v))).collect();
    // Why a baseline gives no comparison, said on every VM compared with it.
    let unusable_bases: BTreeMap<String, String> = vms
        .iter()
        .filter(|v| m.baseline_of(&v.vm) == v.vm)
        .filter_map(|v| unusable("baseline", v, &values(v)).map(|why| (v.vm.clone(), why)))
        .collect();
    for v in vms.iter_mut() {
        let base = bases.get(m.baseline_of(&v.vm)).cloned().unwrap_or_default();
        let own = values(v);
        if let Some(cmp) = compare(&oriented(own.clone()), &base, &m.verdict) {
            v.ratio_to_baseline = Some(cmp.median_ratio);
            if v.vm != m.baseline_of(&v.vm) {
                v.verdict = Some(verdict_text(&cmp, m.metric.is_speed()));
                v.comparison = Some(cmp);
            }
        } else if v.vm != m.baseline_of(&v.vm) {
            // A zero is said plainly (`baseline median is 0 ms: no ratio`); else why.
            let base_raw = raw.get(m.baseline_of(&v.vm)).map_or(&[][..], Vec::as_slice);
            let why = zero_baseline_words(&m.metric.name, metric_unit(m).as_deref(), &own, base_raw)
                .or_else(|| unusable_bases.get(m.baseline_of(&v.vm)).cloned())
                .or_else(|| unusable("this VM", v, &own))
                .unwrap_or_else(|| format!("baseline {} has no values", m.baseline_of(&v.vm)));
            v.verdict = Some(format!("{NO_COMPARISON}: {why}"));
        }
    }
    let Some(copy) = calibration else { return };
    let base = bases.get(&m.baseline).cloned().unwrap_or_default();
    let copy_values = oriented(values(copy));
    let Some(cmp) = compare(&copy_values, &base, &m.verdict) else { return };
    let aa = min_detectable(&copy_values, &base, &m.verdict);
    copy.ratio_to_baseline = Some(cmp.median_ratio);
    copy.verdict = Some(verdict_text(&cmp, m.metric.is_speed()));
    copy.comparison = Some(cmp);
    for v in vms.iter_mut().filter(|v| m.baseline_of(&v.vm) == m.baseline) {
        if let Some(c) = &mut v.comparison {
            c.calibrated = Some(aa);
        }
    }
}

/// `xs` as [`compare`] takes them: as they are when lower is better, else their
/// reciprocals (0 becomes infinity), so that `Slower` always means worse.
pub fn oriented(better: Better, xs: Vec<f64>) -> Vec<f64> {
    match better {
        Better::Lower => xs,
        Better::Higher => xs.into_iter().map(|x| if x == 0.0 { f64::INFINITY } else { 1.0 / x }).collect(),
    }
}

/// Why values `candidate` and `baseline` of metric `metric` (in `unit`) have no ratio,
/// when a zero is why: `baseline median is 0 ms: no ratio`, `a baseline value is 0 ms:
/// no ratio`, `median is 0 ms: no ratio`; `None` when neither holds a 0 (no values at
/// all, or not finite: the comparison is left out as before).
pub fn zero_baseline_words(metric: &str, unit: Option<&str>, candidate: &[f64], baseline: &[f64]) -> Option<String> {
    if candidate.is_empty() || baseline.is_empty() {
        return None;
    }
    let zero = match metric {
        "elapsed_s" | "user_s" | "system_s" => "0 ms".to_string(),
        _ => unit.map_or("0".to_string(), |u| format!("0 {u}")),
    };
    let median = |xs: &[f64]| summarize(xs).map(|s| s.median);
    let has_zero = |xs: &[f64]| xs.contains(&0.0);
    let words = if median(baseline) == Some(0.0) {
        format!("baseline median is {zero}: no ratio")
    } else if has_zero(baseline) {
        format!("a baseline value is {zero}: no ratio")
    } else if median(candidate) == Some(0.0) {
        format!("median is {zero}: no ratio")
    } else if has_zero(candidate) {
        format!("a value is {zero}: no ratio")
    } else {
        return None;
    };
    Some(words)
}

/// The verdict of a VM that could not be compared, before the reason
/// (`no comparison: baseline client-a: 3 of 3 iterations failed (timed out ×3)`).
pub const NO_COMPARISON: &str = "no comparison";

/// Why `v`'s counted `values` of the verdict metric can't be compared (`role`: how the
/// reason names it): there are none (its iterations failed, or gave no value, with
/// their outcomes), or one that is 0 or not finite (a ratio to it is undefined). `None` when
/// they can be.
fn unusable(role: &str, v: &VmResult, values: &[f64]) -> Option<String> {
    if values.is_empty() {
        let n = v.iterations.len();
        let ran = v.outcomes.iter().any(|o| matches!(o, Outcome::Exited { .. }));
        let what = if ran { "gave no value" } else { "failed" };
        return Some(format!("{role} {}: {n} of {n} iterations {what} ({})", v.vm, v.outcome_words()));
    }
    values
        .iter()
        .find(|x| !x.is_finite() || **x <= 0.0)
        .map(|x| format!("{role} {}: a value is {x}, and a ratio to it is undefined", v.vm))
}

/// The unit of `m`'s verdict metric when it is the number `run` prints.
fn metric_unit(m: &MeasurementPlan) -> Option<String> {
    m.output_metric.as_ref().filter(|o| o.name == m.metric.name).and_then(|o| o.unit.clone())
}

/// The verdict in words: `same`, `slower (2.5x–3.5x)`, or with `worse`/`better` for
/// metrics that are not times or rates.
pub fn verdict_text(cmp: &Comparison, speed: bool) -> String {
    let text = cmp.verdict.to_string();
    if speed {
        text
    } else {
        text.replacen("slower", "worse", 1).replacen("faster", "better", 1)
    }
}

/// The value of metric `name` in iteration `i`: the number `run` printed, GNU time's
/// figures, a derived metric, or a counter's change over `run` (a counter first seen
/// after `run` counts from 0).
pub fn metric_value(name: &str, i: &IterationResult) -> Option<f64> {
    if let Some(v) = i.output_metrics.get(name) {
        return Some(*v);
    }
    if name.starts_with(crate::wire::summary::PREFIX) {
        return i.wire.get(name).copied();
    }
    match name {
        "elapsed_s" => i.elapsed_s,
        "user_s" => i.user_s,
        "system_s" => i.system_s,
        "throughput_mb_s" => i.throughput_mb_s,
        other => match i.metrics.get(other) {
            Some(v) => v.map(|v| v as f64),
            None => {
                let b = i.raw.before.counters.get(other);
                let a = i.raw.after.counters.get(other);
                match (b, a) {
                    (Some(b), Some(a)) => Some(*a as f64 - *b as f64),
                    // Not in both readings: its delta, else (it appeared during `run`:
                    // `netstat -s` leaves zero counters out) its value.
                    _ => i
                        .changed_counters
                        .get(other)
                        .map(|d| *d as f64)
                        .or_else(|| i.appeared_counters.get(other).map(|v| *v as f64)),
                }
            }
        },
    }
}

/// One iteration of `m`: its script ([`analyse_script`]) and the actions around it. A
/// failed action fails the iteration (outcome [`Outcome::ActionFailed`], not counted):
/// its problem names the action, its VM and command, and quotes its output; the
/// actions that were skipped only because an earlier one failed are not repeated.
fn analyse_iteration(
    m: &MeasurementPlan,
    it: &Iteration,
    rec: &RunRecord,
    dir: &Path,
    derived: &Derived,
    problems: &mut Vec<String>,
) -> Result<IterationResult, RunDirError> {
    let mut own = Vec::new();
    let mut r = analyse_script(m, it, rec, dir, derived, &mut own)?;
    r.actions = action_results(m, it, rec, dir)?;
    let failed: Vec<&ActionResult> = r.actions.iter().filter(|a| a.status != StepStatus::Passed).collect();
    if failed.is_empty() {
        problems.extend(own);
        return Ok(r);
    }
    // An action skipped because the one before it failed says nothing new.
    let shown: Vec<&&ActionResult> = match failed.iter().filter(|a| a.status != StepStatus::Skipped).count() {
        0 => failed.iter().take(1).collect(),
        _ => failed.iter().filter(|a| a.status != StepStatus::Skipped).collect(),
    };
    for a in shown {
        problems.push(format!(
            "{}: {}: action {} on {} ({}) {}",
            it.vm,
            it.step,
            a.key,
            a.vm,
            super::output_metric::quote(&a.command),
            a.failure().unwrap_or_default()
        ));
    }
    // When a `before` action failed the script did not run; that it did not is no news.
    if r.status != StepStatus::Skipped {
        problems.extend(own);
    }
    r.outcome = Outcome::ActionFailed;
    r.counted = false;
    Ok(r)
}

/// The derived metrics of a measurement's observers, by name ([`derived_metrics`]).
type Derived = BTreeMap<&'static str, super::observer::DerivedMetric>;

/// The script of one iteration of `m`: its step's record and output, section by section
/// (how it ended, GNU time, the output metric, observers, records, checks, remote
/// observers), each part filling the same [`IterationResult`]. Problems are pushed to
/// `problems`, prefixed with the VM and step.
///
/// Errors: the step's output named in `run.json` can't be read.
fn analyse_script(
    m: &MeasurementPlan,
    it: &Iteration,
    rec: &RunRecord,
    dir: &Path,
    derived: &Derived,
    problems: &mut Vec<String>,
) -> Result<IterationResult, RunDirError> {
    let who = format!("{}: {}", it.vm, it.step);
    let step = rec.vm(&it.vm).and_then(|v| v.step(&it.step));
    let mut r = IterationResult::unread(it, step.map_or(StepStatus::Skipped, |s| s.status));
    let Some(step) = step else {
        problems.push(format!("{who}: not in run.json"));
        return Ok(r);
    };
    if !script_ran(m, step, dir, &who, &mut r, problems)? {
        return Ok(r);
    }
    let sections = Sections::split_bytes(&step.stdout_bytes(dir)?);
    for rc in &m.records {
        if let Some(t) = sections.get(Section::Record(&rc.name)) {
            r.records.insert(rc.name.clone(), t.trim().to_string());
        }
    }
    let time = match gnutime::parse(sections.text(Section::Time)) {
        Ok(t) => t,
        Err(e) => {
            problems.push(format!("{who}: {e}"));
            r.raw.sections = sections;
            return Ok(r);
        }
    };
    r.timed(m, &time, &who, problems);
    match sections.get(Section::Clock).map(Clock::parse) {
        // A run folder from before the clock section: GNU time's elapsed stays.
        None => {}
        Some(Ok(c)) => {
            r.elapsed_s = Some(c.elapsed_s());
            r.clock = Some(RunClock::new(&c, step.started_s));
        }
        Some(Err(e)) => problems.push(format!("{who}: section clock: {e}; the elapsed time is GNU time's (10 ms)")),
    }
    if let (Some(om), true) = (&m.output_metric, r.counted) {
        match output_metric(om, &sections) {
            Ok(v) => {
                r.output_metrics.insert(om.name.clone(), v);
            }
            Err(e) => {
                problems.push(format!("{who}: metric {}: {e}", om.name));
                r.counted = false;
            }
        }
    }
    r.observed(m, &sections, derived, &who, problems);
    r.bytes = match &m.bytes {
        Some(Bytes::Fixed(n)) => Some(*n),
        Some(Bytes::Record(name)) => Some(r.records.get(name).and_then(|t| t.parse().ok()).unwrap_or(0)),
        None => None,
    };
    r.throughput_mb_s = r.bytes.zip(r.elapsed_s).filter(|(_, e)| *e > 0.0).map(|(b, e)| b as f64 / 1e6 / e);
    problems.extend(failed_checks(m, &it.vm, &sections).into_iter().map(|f| format!("{who}: {f}")));
    r.remote = remote_results(m, it, rec, dir)?;
    r.raw.sections = sections;
    Ok(r)
}

/// Whether the script of `step` got as far as timing `run`, from its status and its own
/// exit statuses (see `script`). When it did not, `r.outcome` says how it ended and,
/// unless outcomes are what `m` compares (or it simply did not run), a problem says so;
/// a failed teardown is a problem but the script ran.
///
/// Errors: the output of a step whose setup failed can't be read.
fn script_ran(
    m: &MeasurementPlan,
    step: &crate::run::record::StepRecord,
    dir: &Path,
    who: &str,
    r: &mut IterationResult,
    problems: &mut Vec<String>,
) -> Result<bool, RunDirError> {
    let ran = match step.status {
        StepStatus::Passed => true,
        StepStatus::Failed if step.exit_code == Some(i64::from(EXIT_TEARDOWN_FAILED)) => {
            problems.push(format!("{who}: teardown failed"));
            true
        }
        StepStatus::Failed if step.exit_code == Some(i64::from(EXIT_SETUP_FAILED)) => {
            let sections = Sections::split_bytes(&step.stdout_bytes(dir)?);
            let status = sections.get(Section::SetupExit).and_then(|t| t.trim().parse().ok());
            r.outcome = Outcome::SetupFailed { status };
            r.raw.sections = sections;
            false
        }
        StepStatus::TimedOut => {
            r.outcome = Outcome::TimedOut;
            // What `run` printed before the hang, as far as the guest kept it.
            if step.stdout.is_some() {
                r.raw.sections = Sections::split_bytes(&step.stdout_bytes(dir)?);
            }
            false
        }
        StepStatus::Error => {
            r.outcome = Outcome::Crashed;
            false
        }
        _ => false,
    };
    if !ran {
        let why = match r.outcome {
            Outcome::NotRun => format!(
                "did not run ({}{})",
                r.status,
                step.error.as_ref().map(|e| format!(": {e}")).unwrap_or_default()
            ),
            o => o.to_string(),
        };
        if m.metric.name != OUTCOME_METRIC || r.outcome == Outcome::NotRun {
            problems.push(format!("{who}: {why}"));
        }
    }
    Ok(ran)
}

impl IterationResult {
    /// Iteration `it` before its output is read: ended with `status`, outcome
    /// [`Outcome::NotRun`], nothing measured, not counted.
    fn unread(it: &Iteration, status: StepStatus) -> Self {
        IterationResult {
            iteration: it.number,
            step: it.step.clone(),
            status,
            outcome: Outcome::NotRun,
            exit_status: None,
            elapsed_s: None,
            gnu_time_elapsed_s: None,
            clock: None,
            user_s: None,
            system_s: None,
            bytes: None,
            throughput_mb_s: None,
            metrics: BTreeMap::new(),
            output_metrics: BTreeMap::new(),
            changed_counters: BTreeMap::new(),
            wire: BTreeMap::new(),
            appeared_counters: BTreeMap::new(),
            remote: vec![],
            records: BTreeMap::new(),
            actions: vec![],
            counted: false,
            raw: Raw::default(),
        }
    }

    /// Fills in GNU time's report on `run`: exit status, outcome and times. The
    /// iteration counts unless `run` exited other than `m` expects (a problem then,
    /// except when outcomes are what `m` compares).
    fn timed(&mut self, m: &MeasurementPlan, time: &gnutime::GnuTime, who: &str, problems: &mut Vec<String>) {
        self.exit_status = time.exit_status;
        self.outcome = match (time.exit_status, time.signal) {
            (Some(status), _) => Outcome::Exited { status },
            (None, Some(signal)) => Outcome::Signalled { signal },
            (None, None) => Outcome::NotRun,
        };
        self.elapsed_s = Some(time.elapsed_s);
        self.gnu_time_elapsed_s = Some(time.elapsed_s);
        self.user_s = Some(time.user_s);
        self.system_s = Some(time.system_s);
        self.counted = true;
        if time.exit_status != Some(m.expect_exit) && m.metric.name != OUTCOME_METRIC {
            problems.push(format!("{who}: the command {}, expected exit {}", self.outcome, m.expect_exit));
            self.counted = false;
        }
    }

    /// Fills in what `m`'s observers saw before and after `run` in `sections`, the
    /// counters' changes over `run`, and the `derived` metrics; a section that does not
    /// parse is a problem.
    fn observed(
        &mut self,
        m: &MeasurementPlan,
        sections: &Sections,
        derived: &Derived,
        who: &str,
        problems: &mut Vec<String>,
    ) {
        for o in &m.observers {
            let kind = o.kind();
            for (section, side) in
                [(Section::Before(kind), &mut self.raw.before), (Section::After(kind), &mut self.raw.after)]
            {
                match o.observe(sections.text(section)) {
                    Ok(obs) => side.extend(obs),
                    Err(e) => problems.push(format!("{who}: section {}: {e}", section.name())),
                }
            }
        }
        let d = delta(&self.raw.before.counters, &self.raw.after.counters);
        self.changed_counters = d.changed();
        self.appeared_counters = d.only_after;
        for (name, metric) in derived {
            self.metrics.insert(name.to_string(), metric.compute(&self.raw.before, &self.raw.after));
        }
    }
}

/// The checks of `m` that apply to VM `vm` and failed on its `sections`, in words
/// (`section X was not printed`, `… is "a", expected "b"`, `… does not contain "b"`).
fn failed_checks(m: &MeasurementPlan, vm: &str, sections: &Sections) -> Vec<String> {
    let mut failed = Vec::new();
    for c in m.checks.iter().filter(|c| c.only.as_ref().is_none_or(|only| only == vm)) {
        let text = sections.get(Section::Record(&c.section)).map(str::trim);
        let f = match (&c.expect, text) {
            (_, None) => Some(format!("section {} was not printed", c.section)),
            (Expect::Equals(want), Some(got)) if got != want => {
                Some(format!("section {} is {got:?}, expected {want:?}", c.section))
            }
            (Expect::Contains(want), Some(got)) if !got.contains(want.as_str()) => {
                Some(format!("section {} does not contain {want:?}", c.section))
            }
            _ => None,
        };
        failed.extend(f);
    }
    failed
}

/// What the remote observers (netem on a router) saw during iteration `it`: the change
/// of `tc -s qdisc`'s sent and dropped packets between the readings the run took before
/// and after it. A reading that is missing or does not parse leaves its observer out.
///
/// Errors: a reading's output named in `run.json` can't be read.
fn remote_results(
    m: &MeasurementPlan,
    it: &Iteration,
    rec: &RunRecord,
    dir: &Path,
) -> Result<Vec<RemoteResult>, RunDirError> {
    let mut remote = Vec::new();
    for reading in &it.remote {
        let Some(RemoteObserver::Netem { .. }) = m.remote.get(reading.observer) else { continue };
        let counters = |step: &str| -> Result<Option<(u64, u64)>, RunDirError> {
            match rec.vm(&reading.vm).and_then(|v| v.step(step)) {
                Some(s) => Ok(crate::parse::tc::netem_counters(&s.stdout_text(dir)?)),
                None => Ok(None),
            }
        };
        if let (Some(a), Some(b)) = (counters(&reading.before)?, counters(&reading.after)?) {
            remote.push(RemoteResult {
                vm: reading.vm.clone(),
                observer: "netem".into(),
                sent_packets: b.0.saturating_sub(a.0),
                dropped_packets: b.1.saturating_sub(a.1),
            });
        }
    }
    Ok(remote)
}

/// The value of output metric `om` in an iteration's `sections`; the error says where
/// it was looked for and quotes what was there.
fn output_metric(om: &OutputMetric, sections: &Sections) -> Result<f64, String> {
    let (text, whence) = match &om.from {
        MetricFrom::Stdout => (sections.text(Section::Stdout), "stdout".to_string()),
        MetricFrom::File(path) => (sections.text(Section::MetricFile), format!("file {path}")),
    };
    let cut = match &om.from {
        MetricFrom::Stdout if text.len() >= OUTPUT_KEPT_BYTES => {
            " (stdout is kept up to 64 KiB: have `run` write a file and use `from: {file: PATH}`)"
        }
        MetricFrom::File(_) if text.len() >= METRIC_FILE_KEPT_BYTES => " (the file is read up to 1 MiB)",
        _ => "",
    };
    super::output_metric::extract(om, text).map_err(|e| format!("in {whence}: {e}{cut}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn iteration() -> IterationResult {
        IterationResult {
            iteration: 1,
            step: "m-1".into(),
            status: StepStatus::Passed,
            outcome: Outcome::Exited { status: 0 },
            exit_status: Some(0),
            elapsed_s: Some(2.5),
            gnu_time_elapsed_s: Some(2.5),
            clock: None,
            user_s: Some(0.1),
            system_s: Some(0.4),
            bytes: None,
            throughput_mb_s: None,
            metrics: BTreeMap::from([
                ("rpc_retransmissions".to_string(), Some(7)),
                ("udp_receive_errors".to_string(), None),
            ]),
            output_metrics: BTreeMap::from([("iops".to_string(), 812.5)]),
            changed_counters: BTreeMap::from([("netstat.Tcp.InSegs".to_string(), 16569)]),
            wire: BTreeMap::from([("wire.rpc.retransmissions".to_string(), 4.0)]),
            appeared_counters: BTreeMap::from([("netstat.TcpExt.TCPOFOQueue".to_string(), 1412)]),
            remote: Vec::new(),
            records: BTreeMap::new(),
            actions: Vec::new(),
            counted: true,
            raw: Raw::default(),
        }
    }

    #[test]
    fn a_failed_action_says_how_and_quotes_its_output() {
        let a = ActionResult {
            key: "each.before[0]".into(),
            vm: "server".into(),
            command: "rpc.nfsd 0".into(),
            step: "action-before-1-client-m-1".into(),
            status: StepStatus::Failed,
            exit_code: Some(1),
            output: "rpc.nfsd: unable to \"stop\"\nline 2".into(),
            stdout: Some("vms/server/02-action-before-1-client-m-1.stdout".into()),
            error: None,
        };
        assert_eq!(a.failure().as_deref(), Some(r#"exited 1: "rpc.nfsd: unable to \"stop\"\nline 2""#));
        let skipped = ActionResult {
            status: StepStatus::Skipped,
            exit_code: None,
            error: Some("dependency server/x did not pass".into()),
            ..a.clone()
        };
        assert_eq!(skipped.failure().as_deref(), Some("did not run: dependency server/x did not pass"));
        assert_eq!(ActionResult { status: StepStatus::Passed, ..a }.failure(), None);
        assert_eq!(Outcome::ActionFailed.to_string(), "action failed");
    }

    /// A VM whose iterations' `run`s ran at `spans` (host seconds).
    fn vm_with(name: &str, spans: &[(f64, f64)]) -> VmResult {
        let iterations = spans
            .iter()
            .enumerate()
            .map(|(n, (a, b))| IterationResult {
                iteration: n as u32 + 1,
                clock: Some(RunClock {
                    guest_start_ns: 0,
                    guest_end_ns: 0,
                    host_start_s: Some(*a),
                    host_end_s: Some(*b),
                }),
                ..iteration()
            })
            .collect();
        VmResult {
            vm: name.into(),
            kernel_release: String::new(),
            iterations,
            metric: None,
            elapsed_s: None,
            median_mb_s: None,
            ratio_to_baseline: None,
            comparison: None,
            verdict: None,
            totals: BTreeMap::new(),
            exit_statuses: vec![],
            outcomes: vec![],
        }
    }

    fn vm_result(vm: &str, iterations: Vec<IterationResult>) -> VmResult {
        VmResult {
            vm: vm.into(),
            kernel_release: "6.1.0-31-amd64".into(),
            metric: None,
            elapsed_s: None,
            median_mb_s: None,
            ratio_to_baseline: None,
            comparison: None,
            verdict: None,
            totals: BTreeMap::new(),
            exit_statuses: iterations.iter().map(|i| i.exit_status).collect(),
            outcomes: iterations.iter().map(|i| i.outcome).collect(),
            iterations,
        }
    }

    #[test]
    fn a_comparison_without_a_usable_baseline_says_why() {
        let hung = IterationResult {
            status: StepStatus::TimedOut,
            outcome: Outcome::TimedOut,
            counted: false,
            elapsed_s: None,
            ..iteration()
        };
        let not_run = IterationResult { status: StepStatus::Skipped, outcome: Outcome::NotRun, ..hung.clone() };
        let base = vm_result("client-a", vec![hung.clone(), not_run.clone(), not_run]);
        assert_eq!(
            unusable("baseline", &base, &[]).as_deref(),
            Some("baseline client-a: 3 of 3 iterations failed (timed out ×1, not run ×2)")
        );
        let silent = IterationResult { counted: false, ..iteration() };
        assert_eq!(
            unusable("this VM", &vm_result("b", vec![silent, iteration()]), &[]).as_deref(),
            Some("this VM b: 2 of 2 iterations gave no value (exit 0 ×2)")
        );
        assert_eq!(
            unusable("baseline", &vm_result("a", vec![iteration()]), &[0.0]).as_deref(),
            Some("baseline a: a value is 0, and a ratio to it is undefined")
        );
        assert_eq!(unusable("baseline", &vm_result("a", vec![iteration()]), &[2.5]), None);
    }

    #[test]
    fn a_rounds_overlap_is_the_time_all_its_runs_shared_over_the_longest() {
        let vms = [vm_with("a", &[(10.0, 12.0), (20.0, 21.0)]), vm_with("b", &[(10.1, 11.9), (21.5, 22.0)])];
        let r = round_overlaps(&vms);
        assert_eq!(r.len(), 2);
        assert_eq!((r[0].round, r[0].iterations), (1, 2));
        assert!((r[0].overlap_s - 1.8).abs() < 1e-9 && (r[0].longest_s - 2.0).abs() < 1e-9, "{:?}", r[0]);
        assert!((r[0].overlap - 0.9).abs() < 1e-9);
        assert_eq!(r[0].to_string(), "round 1: overlap 90 % of the longest iteration (2 VMs, starts within 100.0 ms)");
        // Round 2 did not meet: b started after a ended.
        assert_eq!(r[1].overlap_s, 0.0);
        assert!((r[1].start_spread_s - 1.5).abs() < 1e-9);
        // One VM alone has no overlap to speak of.
        assert!(round_overlaps(&vms[..1]).is_empty());
    }

    #[test]
    fn a_zero_baseline_says_so_instead_of_no_verdict() {
        let w = |c: &[f64], b: &[f64]| zero_baseline_words("elapsed_s", None, c, b);
        assert_eq!(w(&[0.004], &[0.0, 0.0, 0.01]).as_deref(), Some("baseline median is 0 ms: no ratio"));
        assert_eq!(w(&[0.004], &[0.0, 0.01, 0.01]).as_deref(), Some("a baseline value is 0 ms: no ratio"));
        assert_eq!(w(&[0.0], &[0.01]).as_deref(), Some("median is 0 ms: no ratio"));
        assert_eq!(w(&[0.01], &[0.01]), None);
        assert_eq!(w(&[], &[0.0]), None, "nothing to compare is another story");
        assert_eq!(
            zero_baseline_words("iops", Some("IOPS"), &[5.0], &[0.0]).as_deref(),
            Some("baseline median is 0 IOPS: no ratio")
        );
    }

    /// The report's count hints (`report::hints`) on the two shapes they are for: a
    /// kernel whose nfsstat table counts 0 READs while mountstats counts them (Debian
    /// 6.12), and per-operation counts far short of the RPC calls; and not on counts
    /// that add up.
    #[test]
    fn count_hints_fire_where_nfsstat_is_short_and_only_there() {
        let it = |reads: Option<i64>, counters: &[(&str, i64)]| IterationResult {
            metrics: BTreeMap::from([("nfs_read_calls".to_string(), reads)]),
            changed_counters: counters.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
            ..iteration()
        };
        let zero =
            it(Some(0), &[("mountstats.READ.ops", 512), ("nfs.client.rpc.calls", 515), ("nfs.client.v4.read", 512)]);
        let fine =
            it(Some(512), &[("mountstats.READ.ops", 512), ("nfs.client.rpc.calls", 515), ("nfs.client.v4.read", 512)]);
        let short =
            it(Some(3), &[("nfs.client.rpc.calls", 100), ("nfs.client.v3.read", 10), ("nfs.client.v3.getattr", 5)]);
        let few = it(Some(0), &[("nfs.client.rpc.calls", 8)]);
        let uncounted = IterationResult { counted: false, ..zero.clone() };
        let r = MeasurementResult {
            name: "m".into(),
            preset: None,
            metric: "elapsed_s".into(),
            better: Better::Lower,
            unit: None,
            baseline: "c61".into(),
            groups: vec![],
            vms: vec![
                vm_result("c61", vec![fine.clone(), fine]),
                vm_result("c612", vec![zero.clone(), zero.clone(), zero]),
                vm_result("short", vec![short]),
                vm_result("few", vec![few]),
                vm_result("uncounted", vec![uncounted]),
            ],
            rounds: vec![],
            calibration: None,
            problems: vec![],
        };
        let hints = crate::report::hints::count_hints(&r);
        assert_eq!(hints.len(), 2, "{hints:#?}");
        assert!(
            hints[0].starts_with("hint: c612: nfsstat counted 0 NFS READ calls in 3 of 3 iterations while mountstats counted 1536 READ operations"),
            "{}",
            hints[0]
        );
        assert!(
            hints[1].starts_with("hint: short: the per-operation counts of nfsstat's `Client nfs vN:` tables add up to 15 over the iterations, against 100 RPC calls"),
            "{}",
            hints[1]
        );
    }

    /// A VM's result with one counted iteration per elapsed time in `elapsed`.
    fn vm_elapsed(vm: &str, elapsed: &[f64]) -> VmResult {
        let iterations: Vec<IterationResult> =
            elapsed.iter().map(|&e| IterationResult { elapsed_s: Some(e), ..iteration() }).collect();
        VmResult {
            metric: summarize(elapsed),
            elapsed_s: summarize(elapsed),
            exit_statuses: vec![Some(0); elapsed.len()],
            outcomes: vec![Outcome::Exited { status: 0 }; elapsed.len()],
            ..vm_result(vm, iterations)
        }
    }

    #[test]
    fn the_a_a_copy_is_compared_like_a_candidate_and_gives_every_comparison_its_noise() {
        let file = crate::schema::load::parse_suite(
            Path::new("demo.yaml"),
            "name: demo\nnetwork: {subnet: 10.80.0.0/24}\nvms:\n\
             - {name: a, kernel: {debian: \"6.1\"}, address: 10.80.0.10}\n\
             - {name: b, kernel: {debian: \"6.1\"}, address: 10.80.0.11}\n\
             measure:\n  - {name: m, on: [a, b], repeat: 5, calibrate: true, run: 'true'}\n"
                .into(),
        )
        .expect("parses");
        let images = Path::new(env!("CARGO_MANIFEST_DIR")).join("../images");
        let catalog = crate::infra::images::Catalog::load(&images).expect("images/");
        let plan = crate::suite::compile(&file, &catalog).unwrap_or_else(|e| panic!("{e}"));
        let m = &plan.measurements[0];
        let base = [10.0, 10.2, 9.9, 10.1, 10.05];
        let copy_values = [10.1, 9.95, 10.15, 10.0, 9.9];
        let mut vms = vec![vm_elapsed("a", &base), vm_elapsed("b", &[15.0, 15.3, 14.9, 15.2, 15.1])];
        let mut copy = vm_elapsed("a", &copy_values);
        compare_metric(m, &mut vms, Some(&mut copy));
        let aa = copy.comparison.as_ref().expect("the copy is compared");
        assert_eq!(aa.verdict, super::super::stats::Verdict::Same, "quiet A/A: {aa:?}");
        let b = vms[1].comparison.as_ref().expect("b is compared");
        assert!(matches!(b.verdict, super::super::stats::Verdict::Slower { .. }), "{b:?}");
        assert_eq!(b.calibrated, Some(min_detectable(&copy_values, &base, &m.verdict)));
        assert_ne!(b.calibrated, b.detectable, "the A/A figure is the pair's, not b's own");

        // A noisy copy: the A/A line says the run can't be trusted.
        let mut noisy = vm_elapsed("a", &[13.0, 8.0, 12.5, 7.5, 14.0]);
        compare_metric(m, &mut vms, Some(&mut noisy));
        let r = MeasurementResult {
            name: "m".into(),
            preset: None,
            metric: "elapsed_s".into(),
            better: Better::Lower,
            unit: None,
            baseline: "a".into(),
            groups: vec![],
            vms,
            rounds: vec![],
            calibration: Some(noisy),
            problems: vec![],
        };
        let lines = crate::report::text::verdict_lines(&r);
        let lines: Vec<&str> = lines.lines().collect();
        assert_eq!(lines.len(), 2, "{lines:?}");
        assert!(
            lines[0].contains("; with the A/A pair's noise and 5 and 5 repeats, changes smaller than"),
            "{}",
            lines[0]
        );
        assert!(lines[1].starts_with("a (A/A copy) vs a: undecided"), "{}", lines[1]);
        assert!(lines[1].ends_with("this run is too noisy to trust (or the baseline drifted)"), "{}", lines[1]);
    }

    #[test]
    fn metric_values_come_from_time_metrics_and_counters() {
        let i = iteration();
        assert_eq!(metric_value("elapsed_s", &i), Some(2.5));
        assert_eq!(metric_value("system_s", &i), Some(0.4));
        assert_eq!(metric_value("rpc_retransmissions", &i), Some(7.0));
        assert_eq!(metric_value("udp_receive_errors", &i), None, "a derived metric that can't be known");
        assert_eq!(metric_value("netstat.Tcp.InSegs", &i), Some(16569.0));
        // `netstat -s` leaves zeros out: a counter first seen after `run` changed by its value.
        assert_eq!(metric_value("netstat.TcpExt.TCPOFOQueue", &i), Some(1412.0));
        assert_eq!(metric_value("netstat.TcpExt.NoSuchCounter", &i), None);
        assert_eq!(metric_value("iops", &i), Some(812.5), "the number `run` printed");
        assert_eq!(metric_value("wire.rpc.retransmissions", &i), Some(4.0), "a wire counter");
        assert_eq!(metric_value("wire.rpc.calls", &i), None, "a wire counter the iteration lacks");
    }
}
