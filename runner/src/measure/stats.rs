//! Counter deltas, derived metrics and client-vs-baseline comparison.
//!
//! This module is responsible for turning parsed observations (see
//! [`crate::parse`]) into the numbers the reproduction reports:
//!
//! 1. [`Counters`]: a flat `name → u64` view of one observation, with stable names
//!    (made by [`Observation`](crate::measure::observer::Observation)).
//! 2. [`delta`]: per-counter change over the measured command (`after −
//!    before`), with counters missing on one side reported explicitly.
//! 3. [`summarize`] and [`compare`]: statistics over repeats and the verdict of
//!    a client against a baseline client, following the practice of the
//!    kernel test robot (0-day/LKP) and mmtests: a change is flagged only when
//!    the medians differ by more than the effect floor **and** the [min, max] ranges
//!    of the repeats do not overlap (the ranges rule), or the exact Mann–Whitney
//!    rule of [`super::verdict`].
//!
//! Nothing here runs commands or parses text itself.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;

use super::verdict::{self, Detectable, Rule, Test, VerdictPolicy};

/// Flat view of one observation: counter name → cumulative value.
///
/// Names:
/// * `netstat.<Section>.<Field>` for every `netstat -s` counter, using the
///   parser's canonical names (`netstat.Ip.ReasmFails`, `netstat.Tcp.RetransSegs`,
///   `netstat.TcpExt.~N_widgets` for unknown wordings).
/// * `nfs.client.rpc.calls`, `nfs.client.rpc.retrans`, `nfs.client.rpc.authrefrsh`.
/// * `nfs.server.rpc.<column>` (`calls`, `badcalls`, …).
/// * `nfs.client.<version>.<op>` (`nfs.client.v3.read`), `nfs.server.<table>.<op>`
///   (`nfs.server.v3.read`, `nfs.server.v4ops.putfh`).
/// * `nfs.other.<table>.<column>` for other tables, the title normalised
///   (`nfs.other.server_reply_cache.hits`).
pub type Counters = BTreeMap<String, u64>;

/// Per-counter change between two observations, see [`delta`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Deltas {
    /// `after − before` for every counter present in both observations
    /// (including zero changes). Negative values mean the counter went
    /// backwards: a reset, or a 32-bit wrap of an `nfsstat` counter; they are
    /// reported as they are, not corrected.
    pub deltas: BTreeMap<String, i64>,
    /// Counters present only in the "before" observation, with their value.
    pub only_before: BTreeMap<String, u64>,
    /// Counters present only in the "after" observation, with their value.
    /// Common and usually benign: `netstat -s` and `nfsstat` do not print many
    /// counters while they are zero, so a counter that first becomes non-zero
    /// during the measured command appears here (its change is then most
    /// likely the value itself, but this module does not assume it).
    pub only_after: BTreeMap<String, u64>,
}

impl Deltas {
    /// Change of `name` if it was present on both sides (for the unit tests).
    #[cfg(test)]
    pub fn get(&self, name: &str) -> Option<i64> {
        self.deltas.get(name).copied()
    }

    /// Changes of counters that moved (non-zero delta), for compact reports.
    pub fn changed(&self) -> BTreeMap<String, i64> {
        self.deltas.iter().filter(|(_, d)| **d != 0).map(|(k, d)| (k.clone(), *d)).collect()
    }
}

/// Change of every counter over the measured command.
///
/// A counter missing on one side is **not** reported as a change from or to
/// zero: it is listed in [`Deltas::only_before`] or [`Deltas::only_after`] with
/// its value, so the caller decides (and can see) whether "absent" meant zero.
pub fn delta(before: &Counters, after: &Counters) -> Deltas {
    let mut out = Deltas::default();
    for (k, &b) in before {
        match after.get(k) {
            Some(&a) => {
                out.deltas.insert(k.clone(), a as i64 - b as i64);
            }
            None => {
                out.only_before.insert(k.clone(), b);
            }
        }
    }
    for (k, &a) in after {
        if !before.contains_key(k) {
            out.only_after.insert(k.clone(), a);
        }
    }
    out
}

/// Statistics of one client's repeated measurements (e.g. elapsed seconds).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// Number of repeats.
    pub n: usize,
    /// Smallest value.
    pub min: f64,
    /// Largest value.
    pub max: f64,
    /// Median (mean of the two middle values for even `n`).
    pub median: f64,
    /// Arithmetic mean.
    pub mean: f64,
    /// Coefficient of variation: sample standard deviation (n − 1) divided by
    /// the mean. `None` for a single repeat or a zero mean.
    pub cv: Option<f64>,
}

/// Summarises repeated values. `None` if `values` is empty or contains a
/// non-finite value.
pub fn summarize(values: &[f64]) -> Option<Summary> {
    if values.is_empty() || values.iter().any(|v| !v.is_finite()) {
        return None;
    }
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    let median = if n % 2 == 1 { v[n / 2] } else { (v[n / 2 - 1] + v[n / 2]) / 2.0 };
    let mean = v.iter().sum::<f64>() / n as f64;
    let cv = (n >= 2 && mean != 0.0).then(|| {
        let var = v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
        var.sqrt() / mean.abs()
    });
    Some(Summary { n, min: v[0], max: v[n - 1], median, mean, cv })
}

/// Outcome of comparing a client's elapsed times with the baseline client's.
///
/// `low`/`high` bound how many times slower (for `Slower`: candidate ÷
/// baseline) or faster (for `Faster`: baseline ÷ candidate) the candidate is,
/// computed from the extremes of the repeats and rounded outwards to the grid
/// of [`ratio_grid_step`].
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "verdict", rename_all = "lowercase")]
pub enum Verdict {
    /// No change flagged. Ranges rule: the medians differ by at most the floor, or
    /// the ranges of the repeats overlap. Mann–Whitney rule: the interval of the
    /// ratio lies inside ± the floor.
    Same,
    /// Mann–Whitney rule only: neither a change nor its absence is shown (the test
    /// does not reject, or the change is within the floor, and the interval reaches
    /// beyond the floor).
    Undecided,
    /// The candidate takes `low`–`high` times as long as the baseline.
    Slower {
        /// Lower bound of the time ratio.
        low: f64,
        /// Upper bound of the time ratio.
        high: f64,
    },
    /// The baseline takes `low`–`high` times as long as the candidate.
    Faster {
        /// Lower bound of the speed-up.
        low: f64,
        /// Upper bound of the speed-up.
        high: f64,
    },
}

impl fmt::Display for Verdict {
    /// `same`, `slower (2.5x–3.5x)`, `faster (1.2x–1.4x)`; a single value when
    /// both bounds round to the same grid point (`slower (3.0x)`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (word, low, high) = match *self {
            Verdict::Same => return f.write_str("same"),
            Verdict::Undecided => return f.write_str("undecided"),
            Verdict::Slower { low, high } => ("slower", low, high),
            Verdict::Faster { low, high } => ("faster", low, high),
        };
        if low == high {
            write!(f, "{word} ({})", fmt_ratio(low))
        } else {
            write!(f, "{word} ({}–{})", fmt_ratio(low), fmt_ratio(high))
        }
    }
}

fn fmt_ratio(r: f64) -> String {
    if r < 10.0 {
        format!("{r:.1}x")
    } else {
        format!("{r:.0}x")
    }
}

/// Grid on which verdict ratios are reported, so that small noise does not
/// change the words in a report: steps of 0.1 below 2×, 0.5 from 2× to 10×, 1
/// from 10× to 100×, 10 above.
pub fn ratio_grid_step(ratio: f64) -> f64 {
    if ratio < 2.0 {
        0.1
    } else if ratio < 10.0 {
        0.5
    } else if ratio < 100.0 {
        1.0
    } else {
        10.0
    }
}

/// Rounds `ratio` down to the grid of [`ratio_grid_step`].
pub fn floor_to_grid(ratio: f64) -> f64 {
    let step = ratio_grid_step(ratio);
    tidy((ratio / step + 1e-9).floor() * step)
}

/// Rounds `ratio` up to the grid of [`ratio_grid_step`].
pub fn ceil_to_grid(ratio: f64) -> f64 {
    let step = ratio_grid_step(ratio);
    tidy((ratio / step - 1e-9).ceil() * step)
}

/// Removes binary floating-point noise (`2.5000000000000004` → `2.5`).
fn tidy(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

/// A candidate client's repeats compared with the baseline client's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    /// Summary of the candidate's values.
    pub candidate: Summary,
    /// Summary of the baseline's values.
    pub baseline: Summary,
    /// Candidate median ÷ baseline median (unrounded).
    pub median_ratio: f64,
    /// Whether the [min, max] ranges of the two sets of repeats overlap
    /// (touching ends count as overlap).
    pub ranges_overlap: bool,
    /// The verdict, see [`compare`].
    pub verdict: Verdict,
    /// The rule, significance level and effect floor that made [`Comparison::verdict`]
    /// (absent from results written before rules existed: the ranges rule).
    #[serde(default = "VerdictPolicy::recorded_before")]
    pub policy: VerdictPolicy,
    /// The exact Mann–Whitney test on the same values, whatever the rule (absent from
    /// older results).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub test: Option<Test>,
    /// The smallest change the rule could have flagged with this run's noise and
    /// numbers of repeats (absent from older results).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detectable: Option<Detectable>,
    /// With `calibrate: true`: the smallest change the rule could have flagged with the
    /// noise of the baseline's A/A pair (the baseline and its copy, the same VM measured
    /// twice) and its numbers of repeats; absent without an A/A pair and from older
    /// results.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub calibrated: Option<Detectable>,
}

/// Compares a candidate client's repeated elapsed times (seconds; lower is
/// better) with the baseline client's, under `policy`'s rule; the exact Mann–Whitney
/// test ([`verdict::test`]) and the smallest detectable change
/// ([`verdict::min_detectable`]) are computed under either rule.
///
/// [`Rule::MannWhitney`]: `Slower` when the test's p-value is below `alpha` and the
/// Hodges–Lehmann ratio exceeds `1 + floor`, with the test's interval as `low`–`high`
/// (rounded outwards to the grid); `Faster` symmetrically; `Same` when the interval
/// lies within `[1/(1 + floor), 1 + floor]`; `Undecided` otherwise.
///
/// [`Rule::Ranges`] (0-day/LKP and mmtests practice): the verdict is `Slower` only if the
/// median ratio exceeds `1 + floor` **and** every candidate repeat
/// is slower than every baseline repeat (`min(candidate) > max(baseline)`);
/// symmetrically `Faster` if the baseline's median exceeds the candidate's by
/// that factor and `max(candidate) < min(baseline)`; otherwise `Same`. The
/// reported interval is the worst-case pairing of the repeats —
/// `[min(c)/max(b), max(c)/min(b)]` when slower, `[min(b)/max(c), max(b)/min(c)]`
/// when faster — with the low bound rounded down and the high bound rounded up
/// to the [`ratio_grid_step`] grid, so it always contains the measured interval
/// and only changes when noise crosses a grid line.
///
/// With a single repeat per client the ranges are points, so only the median
/// threshold decides; run at least 3 repeats for the separation test to mean
/// anything. Returns `None` if either slice is empty or contains a non-finite
/// or non-positive value (a ratio of elapsed times is then undefined).
pub fn compare(candidate: &[f64], baseline: &[f64], policy: &VerdictPolicy) -> Option<Comparison> {
    let c = summarize(candidate)?;
    let b = summarize(baseline)?;
    if c.min <= 0.0 || b.min <= 0.0 {
        return None;
    }
    let median_ratio = c.median / b.median;
    let threshold = 1.0 + policy.floor;
    let test = verdict::test(candidate, baseline, policy.level());
    let verdict = match policy.rule {
        Rule::Ranges if median_ratio > threshold && c.min > b.max => {
            Verdict::Slower { low: floor_to_grid(c.min / b.max), high: ceil_to_grid(c.max / b.min) }
        }
        Rule::Ranges if 1.0 / median_ratio > threshold && c.max < b.min => {
            Verdict::Faster { low: floor_to_grid(b.min / c.max), high: ceil_to_grid(b.max / c.min) }
        }
        Rule::Ranges => Verdict::Same,
        Rule::MannWhitney => mann_whitney_verdict(&test, policy),
    };
    Some(Comparison {
        ranges_overlap: !(c.min > b.max || c.max < b.min),
        detectable: Some(verdict::min_detectable(candidate, baseline, policy)),
        candidate: c,
        baseline: b,
        median_ratio,
        verdict,
        policy: *policy,
        test: Some(test),
        calibrated: None,
    })
}

/// The Mann–Whitney rule's verdict from its test (see [`compare`]).
fn mann_whitney_verdict(t: &Test, policy: &VerdictPolicy) -> Verdict {
    let threshold = 1.0 + policy.floor;
    match t.interval {
        Some([lo, hi]) if t.p_value < policy.level() && t.ratio > threshold => {
            Verdict::Slower { low: floor_to_grid(lo), high: ceil_to_grid(hi) }
        }
        Some([lo, hi]) if t.p_value < policy.level() && 1.0 / t.ratio > threshold => {
            Verdict::Faster { low: floor_to_grid(1.0 / hi), high: ceil_to_grid(1.0 / lo) }
        }
        Some([lo, hi]) if lo >= 1.0 / threshold && hi <= threshold => Verdict::Same,
        _ => Verdict::Undecided,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn compare_ranges(c: &[f64], b: &[f64]) -> Option<Comparison> {
        compare(c, b, &VerdictPolicy::recorded_before())
    }

    #[test]
    fn mann_whitney_decides_with_enough_repeats_and_says_undecided_otherwise() {
        let mw = VerdictPolicy::default();
        let base = [10.0, 10.4, 9.8, 10.1, 10.3, 9.9];
        let slow: Vec<f64> = base.iter().map(|x| x * 1.5).collect();
        let c = compare(&slow, &base, &mw).unwrap();
        assert!(matches!(c.verdict, Verdict::Slower { .. }), "{:?}", c.verdict);
        let fast: Vec<f64> = base.iter().map(|x| x / 1.5).collect();
        assert!(matches!(compare(&fast, &base, &mw).unwrap().verdict, Verdict::Faster { .. }));
        // The same values 3 by 3: the exact test can't go below p = 0.1.
        let c = compare(&slow[..3], &base[..3], &mw).unwrap();
        assert_eq!(c.verdict, Verdict::Undecided);
        assert_eq!(c.verdict.to_string(), "undecided");
        assert_eq!(c.detectable, Some(Detectable::TooFewRepeats));
        // A/A with quiet repeats: the interval lies inside ±10 %.
        let again = [10.1, 10.2, 9.9, 10.0, 10.35, 9.85];
        assert_eq!(compare(&again, &base, &mw).unwrap().verdict, Verdict::Same);
        // Significant but small (+4 %): not slower; the interval inside ±10 %: same.
        let bit: Vec<f64> = base.iter().map(|x| x * 1.04).collect();
        assert_eq!(compare(&bit, &base, &mw).unwrap().verdict, Verdict::Same);
        // ±25 % noise, no change: undecided, not same.
        let noisy_a = [10.0, 13.0, 7.5, 11.0, 8.5, 12.0];
        let noisy_b = [11.0, 8.0, 12.5, 9.0, 13.0, 7.8];
        assert_eq!(compare(&noisy_a, &noisy_b, &mw).unwrap().verdict, Verdict::Undecided);
    }

    fn counters(pairs: &[(&str, u64)]) -> Counters {
        pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
    }

    #[test]
    fn delta_reports_one_sided_counters_explicitly() {
        let before = counters(&[("a", 10), ("b", 5), ("gone", 1)]);
        let after = counters(&[("a", 15), ("b", 5), ("new", 7)]);
        let d = delta(&before, &after);
        assert_eq!(d.get("a"), Some(5));
        assert_eq!(d.get("b"), Some(0));
        assert_eq!(d.get("new"), None, "not silently treated as 7 - 0");
        assert_eq!(d.only_after, counters(&[("new", 7)]));
        assert_eq!(d.only_before, counters(&[("gone", 1)]));
        assert_eq!(d.changed(), [("a".to_string(), 5)].into_iter().collect());
    }

    #[test]
    fn delta_keeps_negative_changes() {
        let d = delta(&counters(&[("wrap", 4_294_967_290)]), &counters(&[("wrap", 3)]));
        assert_eq!(d.get("wrap"), Some(3 - 4_294_967_290));
    }

    #[test]
    fn summary_statistics() {
        let s = summarize(&[3.0, 1.0, 2.0]).unwrap();
        assert_eq!((s.n, s.min, s.median, s.max, s.mean), (3, 1.0, 2.0, 3.0, 2.0));
        assert!((s.cv.unwrap() - 0.5).abs() < 1e-12);
        assert_eq!(summarize(&[4.0, 1.0, 2.0, 3.0]).unwrap().median, 2.5);
        let one = summarize(&[5.0]).unwrap();
        assert_eq!((one.median, one.cv), (5.0, None));
        assert_eq!(summarize(&[2.0, 2.0]).unwrap().cv, Some(0.0));
        assert_eq!(summarize(&[]), None);
        assert_eq!(summarize(&[1.0, f64::NAN]), None);
    }

    #[test]
    fn grid_rounding() {
        assert_eq!(floor_to_grid(1.37), 1.3);
        assert_eq!(ceil_to_grid(1.37), 1.4);
        assert_eq!(floor_to_grid(2.74), 2.5);
        assert_eq!(ceil_to_grid(2.74), 3.0);
        assert_eq!(floor_to_grid(2.5), 2.5);
        assert_eq!(ceil_to_grid(2.5), 2.5);
        assert_eq!(ceil_to_grid(1.96), 2.0);
        assert_eq!(floor_to_grid(13.7), 13.0);
        assert_eq!(ceil_to_grid(137.0), 140.0);
    }

    #[test]
    fn verdict_slower_with_separated_ranges() {
        let base = [40.1, 41.9, 43.0];
        let cand = [120.4, 131.0, 140.2];
        let c = compare_ranges(&cand, &base).unwrap();
        assert!(!c.ranges_overlap);
        // 120.4/43.0 = 2.80 -> 2.5 ; 140.2/40.1 = 3.50 -> 3.5
        assert_eq!(c.verdict, Verdict::Slower { low: 2.5, high: 3.5 });
        assert_eq!(c.verdict.to_string(), "slower (2.5x–3.5x)");
        assert!((c.median_ratio - 131.0 / 41.9).abs() < 1e-12);
        // Noise that stays inside the grid cells does not change the words.
        let c2 = compare_ranges(&[121.0, 130.0, 139.0], &[40.5, 42.0, 42.8]).unwrap();
        assert_eq!(c2.verdict.to_string(), "slower (2.5x–3.5x)");
    }

    #[test]
    fn verdict_faster_is_symmetric() {
        let c = compare_ranges(&[40.1, 41.9, 43.0], &[120.4, 131.0, 140.2]).unwrap();
        assert_eq!(c.verdict, Verdict::Faster { low: 2.5, high: 3.5 });
        assert_eq!(c.verdict.to_string(), "faster (2.5x–3.5x)");
    }

    #[test]
    fn verdict_same_when_ranges_overlap_despite_large_median_change() {
        // Medians 10 vs 20 (2x), but one baseline outlier overlaps the candidate range.
        let c = compare_ranges(&[19.0, 20.0, 21.0], &[9.0, 10.0, 25.0]).unwrap();
        assert!(c.ranges_overlap);
        assert_eq!(c.verdict, Verdict::Same);
        assert_eq!(c.verdict.to_string(), "same");
    }

    #[test]
    fn verdict_same_for_small_but_separated_change() {
        let c = compare_ranges(&[10.6, 10.7, 10.8], &[10.0, 10.1, 10.2]).unwrap();
        assert!(!c.ranges_overlap);
        assert_eq!(c.verdict, Verdict::Same, "+6 % is below the floor");
    }

    #[test]
    fn verdict_identical_values() {
        let c = compare_ranges(&[5.0, 5.0], &[5.0, 5.0]).unwrap();
        assert_eq!((c.verdict, c.median_ratio, c.ranges_overlap), (Verdict::Same, 1.0, true));
    }

    #[test]
    fn verdict_single_repeat_relies_on_threshold() {
        let c = compare_ranges(&[3.0], &[1.0]).unwrap();
        assert_eq!(c.verdict, Verdict::Slower { low: 3.0, high: 3.0 });
        assert_eq!(c.verdict.to_string(), "slower (3.0x)");
        assert_eq!(compare_ranges(&[1.05], &[1.0]).unwrap().verdict, Verdict::Same);
    }

    #[test]
    fn verdict_threshold_boundary_is_exclusive() {
        // 2.2 / 2.0 is exactly the threshold (up to rounding) and not "more than 10 %".
        let c = compare_ranges(&[2.2], &[2.0]).unwrap();
        assert!(c.median_ratio <= 1.0 + crate::plan::measurement::DEFAULT_FLOOR + 1e-12);
        assert_eq!(c.verdict, Verdict::Same);
        assert_eq!(compare_ranges(&[2.25], &[2.0]).unwrap().verdict, Verdict::Slower { low: 1.1, high: 1.2 });
    }

    #[test]
    fn compare_rejects_unusable_input() {
        assert!(compare_ranges(&[], &[1.0]).is_none());
        assert!(compare_ranges(&[1.0], &[0.0]).is_none());
        assert!(compare_ranges(&[f64::INFINITY], &[1.0]).is_none());
    }

    #[test]
    fn verdict_serialises_with_tag() {
        let v = serde_json::to_value(Verdict::Slower { low: 2.5, high: 3.5 }).unwrap();
        assert_eq!(v, serde_json::json!({"verdict": "slower", "low": 2.5, "high": 3.5}));
        let same: Verdict = serde_json::from_str(r#"{"verdict":"same"}"#).unwrap();
        assert_eq!(same, Verdict::Same);
    }
}
