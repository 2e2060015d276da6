//! Normalising a run for snapshot tests: keep what is stable from run to run and must
//! not change silently; drop what is volatile.
//!
//! Kept exactly: suite status, every VM's kernel release, step names, statuses and
//! exit codes, the stdout of steps marked `snapshot: true`, for a preset what its
//! [`Preset::snapshot`](crate::scenarios::preset::Preset::snapshot) keeps, and for other measurements what their `snapshot:` policy names (the
//! verdict, `run`'s exit statuses, the signs of chosen metrics, chosen sections).
//! Dropped: timestamps, durations, PIDs, temp paths, MACs, raw counters and absolute
//! times.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::analyse::Analysis;
use crate::measure::analysis::{IterationResult, MeasurementResult, OUTCOME_METRIC};
use crate::measure::script::Section;
use crate::measure::stats::{Comparison, Verdict};
use crate::plan::measurement::MeasurementPlan;
use crate::run::record::RunDirError;
use crate::scenarios::preset::PresetSnapshot;
use crate::schema::SnapshotVerdicts;

/// The normalised view of a run.
#[derive(Debug, Serialize)]
pub struct Normalised {
    /// Suite name.
    pub suite: String,
    /// Status.
    pub status: crate::run::RunStatus,
    /// VMs.
    pub vms: Vec<NormVm>,
    /// The preset's own facts, under the preset's name (`nfs_read:`), from
    /// [`Preset::snapshot`](crate::scenarios::preset::Preset::snapshot).
    #[serde(flatten)]
    pub preset: BTreeMap<&'static str, PresetSnapshot>,
    /// Measurements of `measure:`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub measurements: Vec<NormMeasurement>,
}

/// A VM, normalised.
#[derive(Debug, Serialize)]
pub struct NormVm {
    /// Name.
    pub name: String,
    /// Kernel release.
    pub kernel_release: String,
    /// Steps.
    pub steps: Vec<NormStep>,
}

/// A step, normalised.
#[derive(Debug, Serialize)]
pub struct NormStep {
    /// Name.
    pub name: String,
    /// Status.
    pub status: crate::run::StepStatus,
    /// Exit code.
    pub exit_code: Option<i64>,
    /// Trimmed stdout, for steps marked `snapshot: true`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stdout: Option<String>,
}

/// A measurement other than a preset's, normalised per its `snapshot:` policy.
#[derive(Debug, Serialize)]
pub struct NormMeasurement {
    /// Name.
    pub name: String,
    /// The verdict's metric.
    pub metric: String,
    /// The baseline VM (with `groups`: the first group's).
    pub baseline: String,
    /// Groups of VMs each compared with its own baseline (absent without).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<crate::schema::measure::BaselineGroup>,
    /// Measured VMs.
    pub vms: Vec<NormMeasuredVm>,
    /// Problems (failed checks, unexpected exit statuses, unreadable outputs).
    pub problems: Vec<String>,
}

/// A measured VM, normalised.
#[derive(Debug, Serialize)]
pub struct NormMeasuredVm {
    /// VM name.
    pub vm: String,
    /// Kernel release printed by the guest.
    pub kernel_release: String,
    /// Measured iterations.
    pub iterations: usize,
    /// How each iteration ended (when the policy keeps it): `exit 0`, `timed out`, …
    #[serde(skip_serializing_if = "Option::is_none")]
    pub outcomes: Option<Vec<String>>,
    /// Verdict against the baseline (absent for the baseline or with `verdict: none`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub verdict: Option<String>,
    /// The policy's metrics and counters as `0` / `> 0` (summed over the counted
    /// iterations; `unknown` when not knowable).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub signs: BTreeMap<String, &'static str>,
    /// The policy's values: per metric or counter, its value in every counted iteration
    /// (whole numbers without decimals, `unknown` where an iteration lacks it).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub values: BTreeMap<String, Vec<serde_yaml::Value>>,
    /// The policy's sections, trimmed, from the first measured iteration.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub sections: BTreeMap<String, String>,
}

/// Normalises an analysed run.
///
/// Errors: the stdout of a `snapshot: true` step can't be read.
pub fn normalise(a: &Analysis) -> Result<Normalised, RunDirError> {
    let rec = &a.record;
    let mut vms = Vec::new();
    for v in &rec.vms {
        let mut steps = Vec::new();
        for s in &v.steps {
            let stdout = if s.snapshot { Some(a.stdout(s)?.trim().to_string()) } else { None };
            steps.push(NormStep { name: s.name.clone(), status: s.status, exit_code: s.exit_code, stdout });
        }
        vms.push(NormVm { name: v.name.clone(), kernel_release: v.kernel_release.clone(), steps });
    }
    let own = a.results.measurements.iter().zip(&a.plan.measurements).find(|(_, p)| p.preset.is_some());
    let preset = a.preset().zip(own).map(|(pr, (m, p))| (pr.name(), pr.snapshot(m, &p.snapshot))).into_iter().collect();
    let measurements = a
        .results
        .measurements
        .iter()
        .zip(&a.plan.measurements)
        .filter(|(_, p)| p.preset.is_none())
        .map(|(m, p)| norm_measurement(m, p))
        .collect();
    Ok(Normalised { suite: rec.suite.clone(), status: rec.status, vms, preset, measurements })
}

fn norm_measurement(m: &MeasurementResult, p: &MeasurementPlan) -> NormMeasurement {
    let policy = &p.snapshot;
    NormMeasurement {
        name: m.name.clone(),
        metric: m.metric.clone(),
        baseline: m.baseline.clone(),
        groups: m.groups.clone(),
        vms: m
            .vms
            .iter()
            .map(|v| NormMeasuredVm {
                vm: v.vm.clone(),
                kernel_release: v.kernel_release.clone(),
                iterations: v.iterations.len(),
                outcomes: policy.outcome.then(|| v.outcomes.iter().map(ToString::to_string).collect()),
                verdict: if p.metric.name == OUTCOME_METRIC {
                    (policy.verdict_of(&v.vm) != SnapshotVerdicts::None)
                        .then(|| v.verdict.as_ref().map(|w| w.split(':').next().unwrap_or(w).to_string()))
                        .flatten()
                } else {
                    v.comparison.as_ref().and_then(|c| verdict_for(policy.verdict_of(&v.vm), c, p.metric.is_speed()))
                },
                signs: policy
                    .signs
                    .iter()
                    .map(|name| {
                        let counted = v.iterations.iter().filter(|i| i.counted);
                        let sum: Option<f64> = counted
                            .map(|i| crate::measure::analysis::metric_value(name, i))
                            .try_fold(0.0, |acc, x| Some(acc + x?));
                        let sign = match sum {
                            None => "unknown",
                            Some(s) if s > 0.0 => "> 0",
                            Some(s) if s < 0.0 => "< 0",
                            Some(_) => "0",
                        };
                        (name.clone(), sign)
                    })
                    .collect(),
                values: kept_values(&policy.values, &v.iterations),
                sections: policy
                    .sections
                    .iter()
                    .filter_map(|s| {
                        let text = v.iterations.first()?.raw.sections.get(Section::Record(s))?;
                        Some((s.clone(), text.trim().to_string()))
                    })
                    .collect(),
            })
            .collect(),
        problems: m.problems.clone(),
    }
}

/// Each of `names` (a policy's `values`) in every counted one of `iterations`, in
/// order: a whole number as an integer (counters), else rounded to three decimals,
/// the string `unknown` where the iteration lacks it.
pub(crate) fn kept_values(
    names: &[String],
    iterations: &[IterationResult],
) -> BTreeMap<String, Vec<serde_yaml::Value>> {
    names
        .iter()
        .map(|name| {
            let values = iterations
                .iter()
                .filter(|i| i.counted)
                .map(|i| match crate::measure::analysis::metric_value(name, i) {
                    None => serde_yaml::Value::from("unknown"),
                    Some(x) if x.fract() == 0.0 && x.abs() < 1e15 => serde_yaml::Value::from(x as i64),
                    Some(x) => serde_yaml::Value::from((x * 1000.0).round() / 1000.0),
                })
                .collect();
            (name.clone(), values)
        })
        .collect()
}

/// A verdict as the policy keeps it.
pub(crate) fn verdict_for(policy: SnapshotVerdicts, c: &Comparison, speed: bool) -> Option<String> {
    let (worse, better) = if speed { ("slower", "faster") } else { ("worse", "better") };
    match policy {
        SnapshotVerdicts::RatioClass => Some(verdict_words(&c.verdict, c.median_ratio, worse, better)),
        SnapshotVerdicts::Direction => Some(verdict_direction(&c.verdict, worse, better).into()),
        SnapshotVerdicts::None => None,
    }
}

/// `same`, `undecided`, `worse` or `better` (`slower`/`faster` for times): the verdict
/// without its ratio.
pub fn verdict_direction(v: &Verdict, worse: &'static str, better: &'static str) -> &'static str {
    match v {
        Verdict::Same => "same",
        Verdict::Undecided => "undecided",
        Verdict::Slower { .. } => worse,
        Verdict::Faster { .. } => better,
    }
}

/// `same`, or e.g. `slower: median ratio in 2x–10x` — the verdict's word and the class
/// of the median ratio (1.1–1.5, 1.5–2, 2–10, 10–100, over 100). The classes are wide on
/// purpose: a client behind a fixed rate limit reads in the same time whether the
/// machine is busy or not, but the baseline's time moves by up to 2× with the host's
/// load, so a narrower class would flip between a quiet CI machine and a busy laptop.
///
/// `worse`/`better` are the words for the two directions (`slower`/`faster` for times).
pub fn verdict_words(v: &Verdict, median_ratio: f64, worse: &str, better: &str) -> String {
    let (word, r) = match v {
        Verdict::Same => return "same".into(),
        Verdict::Undecided => return "undecided".into(),
        Verdict::Slower { .. } => (worse, median_ratio),
        Verdict::Faster { .. } => (better, 1.0 / median_ratio),
    };
    let class = match r {
        r if r < 1.5 => "1.1x–1.5x",
        r if r < 2.0 => "1.5x–2x",
        r if r < 10.0 => "2x–10x",
        r if r < 100.0 => "10x–100x",
        _ => "over 100x",
    };
    format!("{word}: median ratio in {class}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdict_classes_double() {
        let verdict_words = |v: &Verdict, r: f64| verdict_words(v, r, "slower", "faster");
        assert_eq!(verdict_words(&Verdict::Same, 3.0), "same");
        assert_eq!(verdict_words(&Verdict::Slower { low: 2.5, high: 3.5 }, 3.0), "slower: median ratio in 2x–10x");
        assert_eq!(verdict_words(&Verdict::Slower { low: 4.5, high: 5.5 }, 5.0), "slower: median ratio in 2x–10x");
        assert_eq!(verdict_words(&Verdict::Slower { low: 1.1, high: 1.3 }, 1.2), "slower: median ratio in 1.1x–1.5x");
        assert_eq!(
            verdict_words(&Verdict::Faster { low: 5.0, high: 6.0 }, 1.0 / 5.5),
            "faster: median ratio in 2x–10x"
        );
    }
}
