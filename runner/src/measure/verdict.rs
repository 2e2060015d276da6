//! The verdict rules and their statistics: an exact Mann–Whitney U test, the
//! Hodges–Lehmann ratio with its exact confidence interval, and the smallest change a
//! run could have flagged.
//!
//! Two rules decide a comparison of a candidate VM's repeats with the baseline's
//! (both oriented so that larger is worse, see [`super::analysis`]):
//!
//! * [`Rule::MannWhitney`] (the default of new suites): `slower`/`faster` when the
//!   two-sided exact Mann–Whitney test rejects "no change" at `p < alpha` **and** the
//!   Hodges–Lehmann estimate of the ratio is beyond the effect floor; `same` when the
//!   `1 − alpha` interval of the ratio lies inside `[1/(1+floor), 1+floor]`;
//!   `undecided` otherwise.
//! * [`Rule::Ranges`] (the 0-day/mmtests rule, kept by name): medians more than the
//!   floor apart **and** separated [min, max] ranges, else `same`; it never says
//!   `undecided`.
//!
//! Why an exact Mann–Whitney test rather than a permutation test on the difference of
//! medians: with the 3 to 20 repeats a VM run affords here, both are exact, but the
//! U test's null distribution depends only on the ranks, so it is computed exactly for
//! every sample size the suites allow (a dynamic programme over the pooled
//! mid-ranks, which also makes it exact when values tie) rather than estimated from
//! random permutations, and it has a dual interval (the order statistics of the
//! pairwise differences) that is exact too. On log values the shift it estimates is
//! the log of a ratio, the quantity the reports print. No distribution crate is needed:
//! the distribution is counted, not approximated.
//!
//! The exact test has a floor of its own: with `m` and `n` repeats the smallest
//! two-sided p-value is `2 / C(m+n, m)` (0.10 for 3 and 3, 0.029 for 4 and 4, 0.0079 for
//! 5 and 5), so at `alpha = 0.01` a comparison needs at least 5 repeats per side to be
//! decided; with fewer the rule says `undecided` and [`min_detectable`] says why.

use serde::{Deserialize, Serialize};

pub use crate::plan::measurement::{Rule, VerdictPolicy};

/// The exact Mann–Whitney test of a candidate's values against the baseline's, on
/// their logarithms, with the Hodges–Lehmann ratio and its interval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Test {
    /// Two-sided exact p-value of "no change" (conditional on ties).
    pub p_value: f64,
    /// The smallest two-sided p-value these sample sizes can give (`2 / C(m+n, m)`).
    pub min_p_value: f64,
    /// Hodges–Lehmann estimate of candidate ÷ baseline: the exponential of the median
    /// of the pairwise log differences.
    pub ratio: f64,
    /// Confidence of [`Test::interval`] (`1 − alpha`).
    pub confidence: f64,
    /// `[low, high]` of candidate ÷ baseline at [`Test::confidence`], from the order
    /// statistics of the pairwise ratios (exact when no values tie); `None` when the
    /// sample sizes are too small for that confidence.
    pub interval: Option<[f64; 2]>,
}

/// Counts, for every value of `2 × rank sum`, the ways of choosing `m` of `scores`
/// (each `2 × mid-rank`) with that sum, as a distribution (probabilities summing to 1).
fn rank_sum_distribution(scores: &[usize], m: usize) -> Vec<f64> {
    let max: usize = scores.iter().sum();
    // ways[k][s]: ways to choose k of the scores seen so far with sum s.
    let mut ways = vec![vec![0f64; max + 1]; m + 1];
    ways[0][0] = 1.0;
    let mut reach = 0;
    for &a in scores {
        reach += a;
        for k in (1..=m).rev() {
            let (lower, upper) = ways.split_at_mut(k);
            for s in (a..=reach).rev() {
                upper[0][s] += lower[k - 1][s - a];
            }
        }
    }
    let total: f64 = ways[m].iter().sum();
    ways[m].iter().map(|w| w / total).collect()
}

/// `2 × mid-rank` of every value in the pooled sample (ties share their mean rank).
fn doubled_midranks(pooled: &[f64]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..pooled.len()).collect();
    order.sort_by(|&a, &b| pooled[a].total_cmp(&pooled[b]));
    let mut ranks = vec![0; pooled.len()];
    let mut i = 0;
    while i < order.len() {
        let mut j = i;
        while j + 1 < order.len() && pooled[order[j + 1]] == pooled[order[i]] {
            j += 1;
        }
        // Ranks i+1..=j+1 share (i+1+j+1)/2; doubled: i+j+2.
        for &o in &order[i..=j] {
            ranks[o] = i + j + 2;
        }
        i = j + 1;
    }
    ranks
}

/// Distribution of the count statistic U (0..=m·n) when no values tie.
fn u_distribution(m: usize, n: usize) -> Vec<f64> {
    let scores: Vec<usize> = (1..=m + n).map(|r| 2 * r).collect();
    let dist = rank_sum_distribution(&scores, m);
    let offset = m * (m + 1);
    (0..=m * n).map(|u| dist.get(2 * u + offset).copied().unwrap_or(0.0)).collect()
}

/// The largest `u` with `P(U ≤ u) < alpha / 2` when no values tie: the test rejects
/// when a side's count is at most this. `None` when not even `U = 0` is that unlikely.
fn critical_u(m: usize, n: usize, alpha: f64) -> Option<usize> {
    let mut cum = 0.0;
    let mut crit = None;
    for (u, p) in u_distribution(m, n).into_iter().enumerate() {
        cum += p;
        if cum < alpha / 2.0 {
            crit = Some(u);
        } else {
            break;
        }
    }
    crit
}

fn median_sorted(v: &[f64]) -> f64 {
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// Sorted pairwise differences `a_i − b_j`.
fn pairwise(a: &[f64], b: &[f64]) -> Vec<f64> {
    let mut d: Vec<f64> = a.iter().flat_map(|x| b.iter().map(move |y| x - y)).collect();
    d.sort_by(f64::total_cmp);
    d
}

/// The exact two-sided Mann–Whitney test of `candidate` against `baseline` (positive,
/// finite values; both non-empty), on logarithms, at level `alpha`.
pub fn test(candidate: &[f64], baseline: &[f64], alpha: f64) -> Test {
    let (m, n) = (candidate.len(), baseline.len());
    let lc: Vec<f64> = candidate.iter().map(|x| x.ln()).collect();
    let lb: Vec<f64> = baseline.iter().map(|x| x.ln()).collect();
    let pooled: Vec<f64> = lc.iter().chain(&lb).copied().collect();
    let ranks = doubled_midranks(&pooled);
    let observed: usize = ranks[..m].iter().sum();
    let dist = rank_sum_distribution(&ranks, m);
    let below: f64 = dist[..=observed].iter().sum();
    let above: f64 = dist[observed..].iter().sum();
    let p_value = (2.0 * below.min(above)).min(1.0);
    let null = u_distribution(m, n);
    let min_p_value = (2.0 * null[0]).min(1.0);
    let diffs = pairwise(&lc, &lb);
    let interval = critical_u(m, n, alpha).map(|u| {
        // [d_(k), d_(mn+1−k)] with k = u + 1 (1-based), the dual of rejecting at U ≤ u.
        [diffs[u].exp(), diffs[diffs.len() - 1 - u].exp()]
    });
    Test { p_value, min_p_value, ratio: median_sorted(&diffs).exp(), confidence: 1.0 - alpha, interval }
}

/// What [`min_detectable`] found.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Detectable {
    /// Changes smaller than `change` (a fraction: 0.25 is 25 %, in either direction)
    /// would not be flagged.
    Change {
        /// The smallest change flagged.
        change: f64,
        /// Whether the effect floor, not the noise and the number of repeats, sets it.
        by_floor: bool,
    },
    /// No change of any size can be flagged with these numbers of repeats: the
    /// smallest p-value they can give is not below `alpha`.
    TooFewRepeats,
}

/// The smallest change the rule would flag with this run's noise and numbers of
/// repeats: the candidate's and the baseline's deviations from their own medians (on
/// log values) are kept, and the candidate is shifted by a constant ratio; the result
/// is the smallest shift, slower or faster (the larger of the two), at which the
/// rule says `slower`/`faster`. For [`Rule::MannWhitney`] the shift must bring a
/// side's U count to the critical value of the exact test and the Hodges–Lehmann
/// estimate past the floor; for [`Rule::Ranges`] it must separate the ranges and move
/// the median past the floor.
pub fn min_detectable(candidate: &[f64], baseline: &[f64], policy: &VerdictPolicy) -> Detectable {
    let centred = |xs: &[f64]| -> Vec<f64> {
        let mut l: Vec<f64> = xs.iter().map(|x| x.ln()).collect();
        l.sort_by(f64::total_cmp);
        let med = median_sorted(&l);
        l.into_iter().map(|x| x - med).collect()
    };
    let (rc, rb) = (centred(candidate), centred(baseline));
    let crit = match policy.rule {
        Rule::Ranges => Some(0),
        Rule::MannWhitney => critical_u(rc.len(), rb.len(), policy.level()),
    };
    let Some(crit) = crit else { return Detectable::TooFewRepeats };
    let floor = (1.0 + policy.floor).ln();
    // Slower by δ: (rc + δ) vs rb; at most `crit` of the differences rb − rc may exceed δ.
    let shift = |a: &[f64], b: &[f64]| -> (f64, bool) {
        let d = pairwise(b, a);
        let by_test = d[d.len() - 1 - crit];
        let by_effect = match policy.rule {
            Rule::Ranges => floor,
            Rule::MannWhitney => floor - median_sorted(&pairwise(a, b)),
        };
        (by_test.max(by_effect), by_effect >= by_test)
    };
    let (slower, s_floor) = shift(&rc, &rb);
    let (faster, f_floor) = shift(&rb, &rc);
    let (delta, by_floor) = if slower >= faster { (slower, s_floor) } else { (faster, f_floor) };
    Detectable::Change { change: delta.exp() - 1.0, by_floor }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    #[test]
    fn smallest_p_values_follow_the_binomial_coefficient() {
        let t = test(&[2.0, 2.1, 2.2], &[1.0, 1.1, 1.2], 0.01);
        assert!(close(t.p_value, 0.1), "complete separation of 3 and 3: 2/20, got {}", t.p_value);
        assert!(close(t.min_p_value, 0.1));
        assert_eq!(t.interval, None, "no 99 % interval from 3 and 3 repeats");
        let t = test(&[2.0, 2.1, 2.2, 2.3, 2.4], &[1.0, 1.1, 1.2, 1.3, 1.4], 0.01);
        assert!(close(t.p_value, 2.0 / 252.0));
        assert!(t.interval.is_some());
    }

    #[test]
    fn p_value_matches_a_hand_count() {
        // c = {3, 5}, b = {1, 2, 4}: ranks of c are 3 and 5, sum 8. Of the C(5,2) = 10
        // pairs of ranks, 2 have a sum ≥ 8 ({3,5}, {4,5}): p = 2 × 2/10.
        let t = test(&[3.0, 5.0], &[1.0, 2.0, 4.0], 0.05);
        assert!(close(t.p_value, 0.4), "got {}", t.p_value);
    }

    #[test]
    fn ties_are_counted_exactly() {
        // All equal: every arrangement has the same rank sum, p = 1.
        let t = test(&[5.0, 5.0, 5.0], &[5.0, 5.0, 5.0], 0.01);
        assert!(close(t.p_value, 1.0));
        assert!(close(t.ratio, 1.0));
        // c = {2, 2}, b = {1, 1}: mid-ranks 3.5, 3.5 | 1.5, 1.5; only 1 of the 6 choices
        // has the top sum, and 1 the bottom: p = 2/6.
        let t = test(&[2.0, 2.0], &[1.0, 1.0], 0.05);
        assert!(close(t.p_value, 1.0 / 3.0), "got {}", t.p_value);
    }

    #[test]
    fn interval_is_dual_to_the_test() {
        let base = [10.0, 10.4, 9.8, 10.1, 10.3, 9.9, 10.2];
        let cand: Vec<f64> = base.iter().map(|x| x * 1.5).collect();
        let t = test(&cand, &base, 0.01);
        assert!(t.p_value < 0.01);
        let [lo, hi] = t.interval.unwrap();
        assert!(lo > 1.0 && hi > lo, "interval {lo}–{hi} excludes 1 when p < alpha");
        assert!(close(t.ratio, 1.5));
    }

    #[test]
    fn three_repeats_can_never_be_decided_at_one_percent() {
        let d = min_detectable(&[2.0, 2.1, 2.2], &[1.0, 1.1, 1.2], &VerdictPolicy::default());
        assert_eq!(d, Detectable::TooFewRepeats);
    }

    #[test]
    fn min_detectable_grows_with_noise() {
        let policy = VerdictPolicy::default();
        let quiet = [10.0, 10.1, 9.9, 10.05, 9.95, 10.02];
        let noisy = [10.0, 13.0, 7.5, 11.0, 8.5, 12.0];
        let q = min_detectable(&quiet, &quiet, &policy);
        let n = min_detectable(&noisy, &noisy, &policy);
        let Detectable::Change { change: q, by_floor: qf } = q else { panic!("{q:?}") };
        let Detectable::Change { change: n, .. } = n else { panic!("{n:?}") };
        assert!(qf && close(q, 0.10), "quiet repeats: the floor decides, got {q}");
        assert!(n > 0.3, "±25 % noise hides changes of 30 %, got {n}");
    }

    /// The smallest change `compare` flags, found by trying every shift: both samples
    /// are centred on their own medians (as [`min_detectable`] does), the candidate is
    /// multiplied by `1 + c` (slower) or divided by it (faster) for `c` in steps of
    /// 0.0001, and the first `c` whose verdict is `slower`/`faster` is kept; the answer
    /// is the larger of the two directions.
    fn brute_force(candidate: &[f64], baseline: &[f64], policy: &VerdictPolicy) -> Option<f64> {
        use crate::measure::stats::{compare, Verdict};
        let centred = |xs: &[f64]| -> Vec<f64> {
            let mut s = xs.to_vec();
            s.sort_by(f64::total_cmp);
            let med = median_sorted(&s);
            xs.iter().map(|x| 100.0 * x / med).collect()
        };
        let (c, b) = (centred(candidate), centred(baseline));
        let first = |slower: bool| {
            (1..=30_000).map(|k| f64::from(k) * 1e-4).find(|change| {
                let f = if slower { 1.0 + change } else { 1.0 / (1.0 + change) };
                let shifted: Vec<f64> = c.iter().map(|x| x * f).collect();
                let v = compare(&shifted, &b, policy).expect("positive values").verdict;
                matches!((slower, v), (true, Verdict::Slower { .. }) | (false, Verdict::Faster { .. }))
            })
        };
        Some(first(true)?.max(first(false)?))
    }

    #[test]
    fn min_detectable_agrees_with_a_brute_force_search() {
        let noisy_c = [9.1, 10.4, 11.7, 10.0, 8.8, 12.3, 9.6];
        let noisy_b = [10.2, 9.4, 11.1, 10.0, 12.6, 8.7, 10.8];
        let quiet = [10.0, 10.1, 9.9, 10.05, 9.95, 10.02];
        let seven = [5.0, 5.5, 6.1, 4.7, 5.2, 5.9, 4.9];
        let cases: [(&[f64], &[f64], VerdictPolicy); 5] = [
            (&noisy_c, &noisy_b, VerdictPolicy::default()),
            (&quiet, &quiet, VerdictPolicy::default()),
            (&noisy_c, &noisy_b, VerdictPolicy { alpha: 0.05, floor: 0.05, ..VerdictPolicy::default() }),
            (&seven, &noisy_b, VerdictPolicy { floor: 0.02, ..VerdictPolicy::default() }),
            (&noisy_c, &noisy_b, VerdictPolicy::recorded_before()),
        ];
        for (c, b, policy) in cases {
            let Detectable::Change { change, by_floor } = min_detectable(c, b, &policy) else {
                panic!("{c:?} vs {b:?}: 7 and 6 or more repeats can reach p < alpha")
            };
            let brute = brute_force(c, b, &policy).expect("some shift under 300 % is flagged");
            // The search steps by 0.0001 and flags the first step strictly past the
            // bound, so it lands at most one step above the exact answer.
            assert!(
                brute >= change - 1e-9 && brute - change <= 1e-4 + 1e-9,
                "{c:?} vs {b:?} under {policy:?}: min_detectable {change} (floor {by_floor}), brute force {brute}"
            );
        }
    }

    #[test]
    fn min_detectable_of_the_ranges_rule_is_the_separation() {
        let policy = VerdictPolicy::recorded_before();
        let d = min_detectable(&[10.0, 12.0, 14.0], &[10.0, 12.0, 14.0], &policy);
        // Ranges separate once the candidate moves past 14/10 (on log deviations:
        // max(b)/med(b) × med(c)/min(c) = 14/12 × 12/10).
        let Detectable::Change { change, by_floor } = d else { panic!("{d:?}") };
        assert!(close(change, 0.4) && !by_floor, "got {change}");
    }
}
