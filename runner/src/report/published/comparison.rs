//! The comparison of a candidate VM with its baseline as the report words it: the
//! direction of its verdict, the one-line headline and summary lines, and the rows of
//! the kernel test robot's table (elapsed time, throughput, the metric, every derived
//! metric and every counter that changed).

use std::collections::BTreeSet;

use super::comparison_table::{self, Row};
use crate::measure::analysis::{metric_value, IterationResult, MeasurementResult, VmResult, OUTCOME_METRIC};
use crate::measure::stats::{summarize, Summary, Verdict};

/// Unit of a metric for labels.
pub fn unit_of(metric: &str) -> &'static str {
    match metric {
        "elapsed_s" | "user_s" | "system_s" => "s",
        "throughput_mb_s" => "MB/s",
        _ => "count",
    }
}

/// How a candidate compares with its baseline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// Worse beyond the noise (the verdict rule's `slower`/`worse`).
    Regression,
    /// Better beyond the noise.
    Improvement,
    /// Within the noise.
    Same,
    /// Neither a change nor its absence shown (the Mann–Whitney rule).
    Undecided,
    /// Not compared (no values).
    Unknown,
}

/// The direction of `v`'s verdict.
pub fn direction(v: &VmResult) -> Direction {
    match v.comparison.as_ref().map(|c| c.verdict) {
        Some(Verdict::Slower { .. }) => Direction::Regression,
        Some(Verdict::Faster { .. }) => Direction::Improvement,
        Some(Verdict::Same) => Direction::Same,
        Some(Verdict::Undecided) => Direction::Undecided,
        None => Direction::Unknown,
    }
}

/// The metric's median change of `cand` against `base`, percent.
fn pct(base: &VmResult, cand: &VmResult) -> Option<f64> {
    let (b, c) = (base.metric.as_ref()?.median, cand.metric.as_ref()?.median);
    (b != 0.0).then(|| (c - b) / b.abs() * 100.0)
}

pub(super) fn who(v: &VmResult) -> String {
    if v.kernel_release.is_empty() {
        v.vm.clone()
    } else {
        format!("{} ({})", v.kernel_release, v.vm)
    }
}

/// The report's first line: the largest regression (else improvement) in the kernel
/// test robot's words ("noticed a -34.6% regression of stress-ng.….ops_per_sec on"),
/// the change of the metric's median, signed, e.g. `[vmrepro] nfs-udp-rto-carryover:
/// +247.8% regression of nfs-read.elapsed_s on 6.1.176-vmrepro (mainline)`, or `no
/// change beyond noise`. A `compare: outcome` measurement speaks of outcomes
/// (`outcome_headline`), and comes first when a VM's outcome differs.
pub fn headline(suite: &str, measurements: &[MeasurementResult]) -> String {
    let outcomes: Vec<&MeasurementResult> = measurements.iter().filter(|m| m.metric == OUTCOME_METRIC).collect();
    let differs = |m: &&&MeasurementResult| m.vms.iter().any(|v| v.verdict.as_deref() == Some(DIFFERENT));
    if let Some(m) = outcomes.iter().find(differs).or(outcomes.first().filter(|_| outcomes.len() == measurements.len()))
    {
        return format!("[vmrepro] {suite}: {}", outcome_headline(m));
    }
    let mut best: Option<(Direction, f64, String)> = None;
    for m in measurements {
        for c in m.vms.iter().filter(|v| m.metric != OUTCOME_METRIC && !m.is_baseline(&v.vm)) {
            let Some(base) = m.vm(m.baseline_of(&c.vm)) else { continue };
            let d = direction(c);
            let Some(p) = pct(base, c) else { continue };
            if !matches!(d, Direction::Regression | Direction::Improvement) {
                continue;
            }
            let rank = |d: Direction| u8::from(d == Direction::Regression);
            let better = match &best {
                None => true,
                Some((bd, bp, _)) => (rank(d), p.abs()) > (rank(*bd), bp.abs()),
            };
            if better {
                best = Some((d, p, format!("{}.{} on {}", m.name, m.metric, who(c))));
            }
        }
    }
    match best {
        Some((d, p, what)) => {
            let word = if d == Direction::Regression { "regression" } else { "improvement" };
            format!("[vmrepro] {suite}: {p:+.1}% {word} of {what}")
        }
        None => {
            let what = measurements
                .iter()
                .find(|m| m.metric != OUTCOME_METRIC)
                .map(|m| format!(" in {}.{}", m.name, m.metric))
                .unwrap_or_default();
            format!("[vmrepro] {suite}: no change beyond noise{what}")
        }
    }
}

/// The verdict of a VM whose outcomes are not its baseline's (`compare: outcome`).
const DIFFERENT: &str = "different outcome";

/// The headline of a `compare: outcome` measurement without the suite: the first VM
/// whose outcomes differ from its baseline's, with both in words, e.g. `different
/// outcome of mount on 6.12.48+deb13-cloud-amd64 (new): setup failed (exit 32) ×1 vs
/// exit 0 ×1 on 5.10.0-35-cloud-amd64 (old)` (and how many more differ), else `same
/// outcome of mount on every VM: exit 0 ×3`.
pub fn outcome_headline(m: &MeasurementResult) -> String {
    let differ: Vec<&VmResult> = m.vms.iter().filter(|v| v.verdict.as_deref() == Some(DIFFERENT)).collect();
    let Some(c) = differ.first() else {
        let mut words: Vec<String> = m.vms.iter().map(VmResult::outcome_words).collect();
        words.dedup();
        return match words.as_slice() {
            [one] => format!("same outcome of {} on every VM: {one}", m.name),
            _ => format!("same outcome of {} on every VM as on its baseline", m.name),
        };
    };
    let base = m.vm(m.baseline_of(&c.vm)).map_or("-".into(), |b| format!("{} on {}", b.outcome_words(), who(b)));
    let more = match differ.len() {
        1 => String::new(),
        n => format!(" (and {} more VM{})", n - 1, if n == 2 { "" } else { "s" }),
    };
    format!("different outcome of {} on {}: {} vs {base}{more}", m.name, who(c), c.outcome_words())
}

/// The summary line of candidate `c` against `base` in measurement `m`: for `compare:
/// outcome` in outcomes (`mount.outcome: different outcome: new-release (new) vs
/// old-release (old): setup failed (exit 32) ×1 vs exit 0 ×1`), else in medians.
pub fn summary_line(m: &MeasurementResult, base: &VmResult, c: &VmResult) -> String {
    if m.metric == OUTCOME_METRIC {
        let verdict = c.verdict.clone().unwrap_or_else(|| "not compared".into());
        return format!(
            "{}.{}: {verdict}: {} vs {}: {} vs {}",
            m.name,
            m.metric,
            who(c),
            who(base),
            c.outcome_words(),
            base.outcome_words()
        );
    }
    let unit = m.unit.as_deref().unwrap_or(unit_of(&m.metric));
    let med = |v: &VmResult| v.metric.as_ref().map_or("-".into(), |s| comparison_table::fmt_value(s.median));
    let change = pct(base, c).map_or(String::new(), |p| format!(" ({p:+.1}%)"));
    let verdict = c.verdict.clone().unwrap_or_else(|| "not compared".into());
    let word = match direction(c) {
        Direction::Regression => "regression: ",
        Direction::Improvement => "improvement: ",
        Direction::Same => "no change beyond noise: ",
        Direction::Undecided => "undecided (this run could not tell): ",
        Direction::Unknown => "",
    };
    format!(
        "{}.{}: {word}{} vs {}: median {} vs {} {unit}{change}, verdict {verdict}",
        m.name,
        m.metric,
        who(c),
        who(base),
        med(c),
        med(base)
    )
}

pub(super) fn counted(v: &VmResult) -> impl Iterator<Item = &IterationResult> {
    v.iterations.iter().filter(|i| i.counted)
}

fn summary_of(v: &VmResult, f: impl Fn(&IterationResult) -> Option<f64>) -> Option<Summary> {
    summarize(&counted(v).filter_map(f).collect::<Vec<_>>())
}

/// The value of a counter's change in an iteration ([`metric_value`]: its delta, or
/// its value when it appeared during `run`), else 0.
fn counter_value(i: &IterationResult, name: &str) -> f64 {
    metric_value(name, i).unwrap_or(0.0)
}

/// The rows of the comparison of `cand` with `base`: elapsed time, throughput, the
/// metric (when it is neither), every derived metric and every counter that changed.
pub fn comparison_rows(m: &MeasurementResult, base: &VmResult, cand: &VmResult) -> Vec<Row> {
    let mut rows = Vec::new();
    let pair = |f: &dyn Fn(&IterationResult) -> Option<f64>| (summary_of(base, f), summary_of(cand, f));
    let (b, c) = pair(&|i| i.elapsed_s);
    rows.push(Row { name: "elapsed_s".into(), base: b, cand: c });
    let (b, c) = pair(&|i| i.throughput_mb_s);
    if b.is_some() || c.is_some() {
        rows.push(Row { name: "throughput_mb_s".into(), base: b, cand: c });
    }
    if !matches!(m.metric.as_str(), "elapsed_s" | "throughput_mb_s") {
        rows.push(Row { name: m.metric.clone(), base: base.metric.clone(), cand: cand.metric.clone() });
    }
    let derived: BTreeSet<&String> = base.totals.keys().chain(cand.totals.keys()).collect();
    for d in derived {
        if *d == m.metric {
            continue;
        }
        let f = |i: &IterationResult| i.metrics.get(d.as_str()).copied().flatten().map(|x| x as f64);
        let (b, c) = pair(&f);
        if [&b, &c].iter().any(|s| s.as_ref().is_some_and(|s| s.max != 0.0 || s.min != 0.0)) {
            rows.push(Row { name: d.clone(), base: b, cand: c });
        }
    }
    let names: BTreeSet<&String> = counted(base)
        .chain(counted(cand))
        .flat_map(|i| i.changed_counters.keys().chain(i.appeared_counters.keys()))
        .collect();
    for n in names {
        let f = |i: &IterationResult| Some(counter_value(i, n));
        let (b, c) = pair(&f);
        rows.push(Row { name: n.clone(), base: b, cand: c });
    }
    rows
}
