//! Adaptive repeats (`repeat: {min, max}` or `repeat: auto`): the stopping rule and
//! the correction of α for looking at the data more than once.
//!
//! Rounds alternate between the VMs as with a fixed count (every VM's iteration `r`
//! before any VM's `r + 1`). After each round `r` from `min` on, the measurement is
//! analysed as it stands ([`super::analysis::analyse`]); when every comparison is
//! decided (`slower`, `faster` or `same` under the Mann–Whitney rule) the later
//! rounds are not run. At `max` the run stops whatever the verdicts: a comparison
//! undecided then stays `undecided`.
//!
//! Looking after every round and stopping at the first decision would raise the
//! false-alarm rate above α (each look is another chance for noise to cross the
//! line). The correction is Bonferroni over the looks: every test, at every look and
//! in the final verdict, runs at `α / L`, so that the chance of any false `slower` or
//! `faster`, or of an interval that misses the true ratio, over all looks is at most
//! α. `L` counts only the rounds at which the exact test can reach `p < α / L` at
//! all ([`looks`]): a look that can't reject can't raise a false alarm. Bonferroni
//! rather than an alpha-spending rule (Pocock, O'Brien–Fleming): those boundaries
//! come from the normal approximation of the increments of a statistic, which the
//! exact rank test on a handful of repeats does not have; Bonferroni holds for any
//! test and any stopping pattern, and its cost (conservative when the looks are
//! correlated, as they are here) is the price of that.

use crate::plan::measurement::Adaptive;

use super::analysis::MeasurementResult;
use super::stats::Verdict;

/// The smallest two-sided p-value of the exact Mann–Whitney test with `n` repeats on
/// each side: `2 / C(2n, n)`.
fn smallest_p(n: u32) -> f64 {
    let n = f64::from(n);
    // C(2n, n) = Π_{k=1..n} (n + k) / k.
    let c: f64 = (1..=n as u32).map(|k| (n + f64::from(k)) / f64::from(k)).product();
    (2.0 / c).min(1.0)
}

/// How many looks `alpha` is shared among: the smallest `L` such that at most `L` of
/// the rounds `min..=max` can reach `p < alpha / L` (with as many repeats per side as
/// rounds; failed iterations only make a round's smallest p-value larger). At least 1.
pub fn looks(a: Adaptive, alpha: f64) -> u32 {
    let rounds = a.max.saturating_sub(a.min) + 1;
    (1..=rounds)
        .find(|&l| (a.min..=a.max).filter(|&n| smallest_p(n) < alpha / f64::from(l)).count() as u32 <= l)
        .unwrap_or(rounds)
}

/// Whether every comparison is decided: each candidate VM has a comparison with the
/// baseline and its verdict is not `undecided`, and so has the baseline's A/A copy
/// (`calibrate: true`). A VM without one (no usable values yet) is undecided.
pub fn all_decided(m: &MeasurementResult) -> bool {
    let decided =
        |v: &crate::measure::analysis::VmResult| v.comparison.as_ref().is_some_and(|c| c.verdict != Verdict::Undecided);
    m.vms.iter().filter(|v| v.vm != m.baseline).all(decided) && m.calibration.as_ref().is_none_or(decided)
}

/// Whether round `rounds + 1` is needed after `rounds` rounds: below `min` always, at
/// `max` never, in between while a comparison is undecided (`decided` is
/// [`all_decided`] of the analysis after those rounds).
pub fn another_round(a: Adaptive, rounds: u32, decided: bool) -> bool {
    rounds < a.min || (rounds < a.max && !decided)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::stats::{compare, Verdict};
    use crate::plan::measurement::VerdictPolicy;

    #[test]
    fn smallest_p_values() {
        assert!((smallest_p(3) - 0.1).abs() < 1e-12);
        assert!((smallest_p(5) - 2.0 / 252.0).abs() < 1e-12);
        assert!((smallest_p(7) - 2.0 / 3432.0).abs() < 1e-12);
    }

    #[test]
    fn only_rounds_that_can_reject_are_looks() {
        // α 0.01 over 5..=15: 2/C(14,7) = 5.8e-4 is the first below 0.01/9; rounds 7..=15
        // are 9 looks. With 8 looks (1.25e-3) round 7 would still count: 9 > 8.
        assert_eq!(looks(Adaptive { min: 5, max: 15 }, 0.01), 9);
        assert_eq!(looks(Adaptive { min: 3, max: 15 }, 0.01), 9);
        // One round that can reject: no correction.
        assert_eq!(looks(Adaptive { min: 7, max: 7 }, 0.01), 1);
        // No round can ever reject: every round is "a look", none can raise an alarm.
        assert_eq!(looks(Adaptive { min: 1, max: 3 }, 0.01), 1);
    }

    #[test]
    fn the_bounds_decide_before_the_verdicts() {
        let a = Adaptive { min: 3, max: 15 };
        assert!(another_round(a, 2, true), "min rounds always run");
        assert!(!another_round(a, 3, true));
        assert!(another_round(a, 3, false));
        assert!(!another_round(a, 15, false), "undecided at max stays undecided");
    }

    /// A deterministic stream of standard normal numbers (a 64-bit LCG and Box–Muller),
    /// so the simulated runs are the same in every test run.
    struct Normal(u64);
    impl Normal {
        fn uniform(&mut self) -> f64 {
            self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((self.0 >> 11) as f64 + 0.5) / (1u64 << 53) as f64
        }
        fn next(&mut self) -> f64 {
            let (u, v) = (self.uniform(), self.uniform());
            (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
        }
    }

    /// Runs one adaptive A/B sequence: each round adds one baseline and one candidate
    /// value (log-normal with `noise` as σ of the log; the candidate `ratio` times the
    /// baseline); returns the rounds run and the final verdict.
    fn simulate(rng: &mut Normal, a: Adaptive, ratio: f64, noise: f64) -> (u32, Verdict) {
        let policy = VerdictPolicy { looks: looks(a, 0.01), ..VerdictPolicy::default() };
        let (mut base, mut cand) = (Vec::new(), Vec::new());
        let mut rounds = 0;
        loop {
            base.push(10.0 * (noise * rng.next()).exp());
            cand.push(10.0 * ratio * (noise * rng.next()).exp());
            rounds += 1;
            let verdict = compare(&cand, &base, &policy).expect("positive values").verdict;
            if !another_round(a, rounds, verdict != Verdict::Undecided) {
                return (rounds, verdict);
            }
        }
    }

    #[test]
    fn a_large_change_stops_early_and_is_flagged() {
        let mut rng = Normal(1);
        let a = Adaptive { min: 3, max: 15 };
        for _ in 0..20 {
            let (rounds, verdict) = simulate(&mut rng, a, 1.5, 0.03);
            assert!(matches!(verdict, Verdict::Slower { .. }), "{verdict:?}");
            assert!(rounds < 15, "a 50 % change in 3 % noise is decided before max, took {rounds}");
        }
    }

    #[test]
    fn quiet_a_a_stops_with_same_and_noise_runs_to_max_undecided() {
        let mut rng = Normal(2);
        let a = Adaptive { min: 3, max: 15 };
        let (rounds, verdict) = simulate(&mut rng, a, 1.0, 0.01);
        assert_eq!(verdict, Verdict::Same);
        assert!(rounds < 15, "1 % noise: same before max, took {rounds}");
        // ±40 % noise: 15 rounds can't show a change inside ±10 % nor rule one out.
        let (rounds, verdict) = simulate(&mut rng, a, 1.0, 0.4);
        assert_eq!((rounds, verdict), (15, Verdict::Undecided));
    }

    #[test]
    fn repeated_looks_keep_false_alarms_at_most_alpha() {
        // A/A sequences in ±20 % noise, stopping at the first decision: with the
        // correction (5 looks at 0.002) the share flagged stays under α = 1 % (at most 2
        // of 200); looked at without it (every round from 3 on at 0.01) more are flagged.
        let a = Adaptive { min: 3, max: 10 };
        assert_eq!(looks(a, 0.01), 5);
        let runs = 200;
        let mut rng = Normal(3);
        let alarm = |v: Verdict| matches!(v, Verdict::Slower { .. } | Verdict::Faster { .. });
        let flagged = (0..runs).filter(|_| alarm(simulate(&mut rng, a, 1.0, 0.2).1)).count();
        let naive = |rng: &mut Normal| {
            let policy = VerdictPolicy::default();
            let (mut b, mut c) = (Vec::new(), Vec::new());
            for r in 1..=a.max {
                b.push(10.0 * (0.2 * rng.next()).exp());
                c.push(10.0 * (0.2 * rng.next()).exp());
                let v = compare(&c, &b, &policy).unwrap().verdict;
                if r >= a.min && v != Verdict::Undecided {
                    return alarm(v);
                }
            }
            false
        };
        let mut rng = Normal(3);
        let naive_flagged = (0..runs).filter(|_| naive(&mut rng)).count();
        eprintln!("false alarms in {runs} A/A sequences: {flagged} corrected, {naive_flagged} uncorrected");
        assert!(flagged <= runs / 100, "{flagged} false alarms in {runs} A/A sequences");
        assert!(naive_flagged > flagged, "uncorrected looks flag more: {naive_flagged} vs {flagged}");
    }
}
