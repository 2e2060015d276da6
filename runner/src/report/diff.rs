//! Two analysed runs of one suite side by side (`vmrepro replay`: then against now;
//! `vmrepro compare RUN_A RUN_B`): per measurement and VM, the kernel, the median then
//! and now, the verdict then and now, and the derived metrics' totals (counters).
//!
//! Verdicts **agree** when their direction is the same (`same`, `slower`/`worse`,
//! `faster`/`better`, `baseline`): the ratio ranges in brackets move with the noise and
//! are shown, not compared.
//!
//! Each VM measured in both runs also gets a verdict of its own change, now's values
//! against then's under the rule that made the runs' verdicts ([`then_now`]): a VM that
//! got slower between the runs while its verdict against the baseline stayed the same
//! (both kernels slowed down, or the host did) is said, not hidden behind "agrees".

use std::collections::BTreeSet;
use std::fmt::Write as _;

use super::published::comparison_table::fmt_value;
use crate::analyse::Results;
use crate::measure::analysis::{counted_values, oriented, verdict_text, MeasurementResult, VmResult};
use crate::measure::stats::{compare, Comparison, Verdict};
use crate::measure::verdict::VerdictPolicy;
use crate::plan::measurement::Metric;

/// The diff of two runs.
#[derive(Debug, Clone, Default)]
pub struct Diff {
    /// The printed text.
    pub text: String,
    /// Every disagreement, `measurement/vm: then → now`.
    pub disagreements: Vec<String>,
    /// Every VM whose own values changed beyond the noise from then to now,
    /// `measurement/vm: slower (1.2x–1.5x)` (see [`then_now`]); not a disagreement.
    pub changes: Vec<String>,
}

impl Diff {
    /// Whether every verdict agrees.
    pub fn agrees(&self) -> bool {
        self.disagreements.is_empty()
    }
}

/// The direction word of a VM's verdict: `baseline`, `same`, `slower`, `faster`,
/// `worse`, `better`, or `-` when it has none.
pub fn verdict_word(v: Option<&VmResult>, baseline: &str) -> String {
    match v {
        None => "absent".into(),
        Some(v) if v.vm == baseline => "baseline".into(),
        Some(v) => v.verdict.as_deref().and_then(|t| t.split_whitespace().next()).unwrap_or("-").to_string(),
    }
}

fn verdict_full(v: Option<&VmResult>, baseline: &str) -> String {
    match v {
        None => "absent".into(),
        Some(v) if v.vm == baseline => "baseline".into(),
        Some(v) => v.verdict.clone().unwrap_or_else(|| "-".into()),
    }
}

/// The smallest change a VM's comparison could have flagged, from its A/A pair when
/// the run had one (`12.5 % (A/A)`), else from its own noise (`34.7 %`), or `none (too
/// few repeats)`; `None` without a comparison or a figure (older results).
fn detectable_words(v: Option<&VmResult>) -> Option<String> {
    use crate::measure::verdict::Detectable;
    let c = v?.comparison.as_ref()?;
    let (d, from) = match (c.calibrated, c.detectable) {
        (Some(d), _) => (d, " (A/A)"),
        (None, Some(d)) => (d, ""),
        (None, None) => return None,
    };
    Some(match d {
        Detectable::Change { change, .. } => format!("{}{from}", super::text::pct(change)),
        Detectable::TooFewRepeats => format!("none (too few repeats){from}"),
    })
}

/// A VM's values of measurement `b`'s metric in run `now` (`vb`) against its values in
/// run `then` (`va`, of measurement `a`), under the rule of the runs' own comparisons
/// (now's first, else then's; the default rule when neither compared anything): the
/// verdict in words (`slower (1.1x–1.4x)`, `same`, `undecided`; `worse`/`better` for a
/// metric that is not a time or rate) and the comparison. `None` when the two runs
/// measured different metrics or either has no usable values (none counted, a 0).
pub fn then_now(
    a: &MeasurementResult,
    va: &VmResult,
    b: &MeasurementResult,
    vb: &VmResult,
) -> Option<(String, Comparison)> {
    if a.metric != b.metric || a.better != b.better {
        return None;
    }
    let values = |v: &VmResult| oriented(b.better, counted_values(&b.metric, v));
    let policy = [vb, va]
        .into_iter()
        .chain(b.vms.iter())
        .chain(a.vms.iter())
        .find_map(|v| v.comparison.as_ref().map(|c| c.policy))
        .unwrap_or_default();
    let policy = VerdictPolicy { looks: 1, ..policy };
    let cmp = compare(&values(vb), &values(va), &policy)?;
    let speed = Metric { name: b.metric.clone(), better: b.better }.is_speed();
    Some((verdict_text(&cmp, speed), cmp))
}

/// Compares run `then` (labelled `then_label`) with run `now`.
pub fn diff(then: &Results, now: &Results, then_label: &str, now_label: &str) -> Diff {
    let mut d = Diff::default();
    let t = &mut d.text;
    if then.suite != now.suite {
        let _ = writeln!(t, "warning: different suites: {} ({then_label}) and {} ({now_label})", then.suite, now.suite);
    }
    let names: Vec<&String> = {
        let mut seen = BTreeSet::new();
        then.measurements.iter().chain(&now.measurements).map(|m| &m.name).filter(|n| seen.insert(*n)).collect()
    };
    for name in names {
        let a = then.measurements.iter().find(|m| &m.name == name);
        let b = now.measurements.iter().find(|m| &m.name == name);
        let m = b.or(a).expect("in one of them");
        let _ = writeln!(t, "\nmeasurement {name}: median {} ({then_label} → {now_label})", m.metric);
        let head = format!(
            "{:<14} {:<30} {:>10} {:>10} {:>8}  {:<20} {:<20}",
            "VM",
            "kernel",
            then_label,
            now_label,
            "change",
            format!("verdict {then_label}"),
            format!("verdict {now_label}")
        );
        let _ = writeln!(t, "{}", head.trim_end());
        let vms: Vec<&String> = {
            let mut seen = BTreeSet::new();
            a.into_iter().chain(b).flat_map(|m| m.vms.iter().map(|v| &v.vm)).filter(|n| seen.insert(*n)).collect()
        };
        for vm in vms {
            let va = a.and_then(|m| m.vm(vm));
            let vb = b.and_then(|m| m.vm(vm));
            let base_a = a.map_or("", |m| m.baseline_of(vm));
            let base_b = b.map_or("", |m| m.baseline_of(vm));
            let kernel = match (va.map(|v| &v.kernel_release), vb.map(|v| &v.kernel_release)) {
                (Some(x), Some(y)) if x == y => x.clone(),
                (Some(x), Some(y)) => format!("{x} → {y}"),
                (x, y) => x.or(y).cloned().unwrap_or_default(),
            };
            let med = |v: Option<&VmResult>| v.and_then(|v| v.metric.as_ref()).map(|s| s.median);
            let (ma, mb) = (med(va), med(vb));
            let change = match (ma, mb) {
                (Some(x), Some(y)) if x != 0.0 => format!("{:+.1}%", (y - x) / x.abs() * 100.0),
                _ => "-".into(),
            };
            let (wa, wb) = (verdict_word(va, base_a), verdict_word(vb, base_b));
            let agree = wa == wb;
            if !agree {
                d.disagreements.push(format!("{name}/{vm}: {wa} → {wb}"));
            }
            let row = format!(
                "{:<14} {:<30} {:>10} {:>10} {:>8}  {:<20} {:<20}{}",
                vm,
                kernel,
                ma.map_or("-".into(), fmt_value),
                mb.map_or("-".into(), fmt_value),
                change,
                verdict_full(va, base_a),
                verdict_full(vb, base_b),
                if agree { "" } else { "  << differs" }
            );
            let _ = writeln!(t, "{}", row.trim_end());
            let keys: BTreeSet<&String> = va.into_iter().chain(vb).flat_map(|v| v.totals.keys()).collect();
            let total = |v: Option<&VmResult>, k: &str| {
                v.and_then(|v| v.totals.get(k).copied().flatten()).map_or("-".to_string(), |x| x.to_string())
            };
            let moved: Vec<String> = keys
                .into_iter()
                .map(|k| (k, total(va, k), total(vb, k)))
                .filter(|(_, x, y)| x != "0" || y != "0")
                .map(|(k, x, y)| format!("{k} {x} → {y}"))
                .collect();
            if !moved.is_empty() {
                let _ = writeln!(t, "{:<14} counters (totals over the repeats): {}", "", moved.join(", "));
            }
            let (da, db) = (detectable_words(va), detectable_words(vb));
            if da.is_some() || db.is_some() {
                let (da, db) = (da.unwrap_or_else(|| "-".into()), db.unwrap_or_else(|| "-".into()));
                let _ = writeln!(t, "{:<14} smallest detectable change: {da} → {db}", "");
            }
            if let (Some(ma), Some(va), Some(mb), Some(vb)) = (a, va, b, vb) {
                if let Some((words, cmp)) = then_now(ma, va, mb, vb) {
                    let line = super::text::comparison_line(now_label, then_label, Some(&words), &cmp);
                    let _ = writeln!(t, "{:<14} {line}", "");
                    if matches!(cmp.verdict, Verdict::Slower { .. } | Verdict::Faster { .. }) {
                        d.changes.push(format!("{name}/{vm}: {words}"));
                    }
                }
            }
        }
        let (ca, cb) = (a.and_then(|m| m.calibration.as_ref()), b.and_then(|m| m.calibration.as_ref()));
        if let Some(base) = ca.or(cb).map(|c| c.vm.clone()) {
            let word = |c: Option<&VmResult>| c.map_or("absent".to_string(), |c| verdict_full(Some(c), ""));
            let _ = writeln!(t, "A/A copy of {base}: {} → {}", word(ca), word(cb));
        }
        let pa = a.map_or(0, |m| m.problems.len());
        let pb = b.map_or(0, |m| m.problems.len());
        if pa + pb > 0 {
            let _ = writeln!(t, "problems: {pa} {then_label}, {pb} {now_label}");
            for p in b.map(|m| m.problems.as_slice()).unwrap_or_default() {
                let _ = writeln!(t, "  {now_label}: {p}");
            }
        }
    }
    if !d.changes.is_empty() {
        let _ = writeln!(
            d.text,
            "\n{} VM(s) changed beyond the noise from {then_label} to {now_label}: {}",
            d.changes.len(),
            d.changes.join("; ")
        );
    }
    if d.disagreements.is_empty() {
        let _ = writeln!(d.text, "\nevery verdict agrees");
    } else {
        let _ = writeln!(d.text, "\n{} verdict(s) differ: {}", d.disagreements.len(), d.disagreements.join("; "));
    }
    d
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analyse::results::read_results;
    use crate::path_io::Folder;

    /// The recorded A/A run (`tests/fixtures/runs/nfs-aa-same-kernel`: client-a the
    /// baseline, client-b `same`, 3 reads each, verdicts by the ranges rule).
    fn aa_run() -> Results {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/runs/nfs-aa-same-kernel");
        read_results(&Folder::open(&dir).unwrap(), "results.json").unwrap()
    }

    /// The run with client-b's reads `factor` times as long; its verdict against the
    /// baseline is left as recorded.
    fn slowed(mut r: Results, factor: f64) -> Results {
        let b = r.measurements[0].vms.iter_mut().find(|v| v.vm == "client-b").unwrap();
        for i in &mut b.iterations {
            i.elapsed_s = i.elapsed_s.map(|x| x * factor);
        }
        r
    }

    #[test]
    fn a_vm_whose_own_values_moved_is_said_even_when_its_verdict_agrees() {
        let then = aa_run();
        let same = diff(&then, &aa_run(), "then", "now");
        assert!(same.agrees() && same.changes.is_empty(), "{}", same.text);
        assert!(same.text.contains("now vs then: same (ranges, floor 10 %)"), "{}", same.text);

        let now = slowed(aa_run(), 3.0);
        let d = diff(&then, &now, "then", "now");
        assert!(d.agrees(), "its verdict against client-a is still `same`: {}", d.text);
        assert_eq!(d.changes.len(), 1, "{}", d.text);
        assert!(d.changes[0].starts_with("nfs-read/client-b: slower ("), "{:?}", d.changes);
        assert!(
            d.text.contains("1 VM(s) changed beyond the noise from then to now: nfs-read/client-b: slower"),
            "{}",
            d.text
        );
        let (m, v) = (&now.measurements[0], now.measurements[0].vm("client-a").unwrap());
        let (words, _) = then_now(&then.measurements[0], then.measurements[0].vm("client-a").unwrap(), m, v).unwrap();
        assert_eq!(words, "same", "client-a did not change");
    }

    /// The run with each VM's counted iterations cut to its first `n` (uncounted ones
    /// kept; warm-ups are not among a VM's iterations).
    fn first_reads(mut r: Results, n: usize) -> Results {
        for v in &mut r.measurements[0].vms {
            let mut kept = 0;
            v.iterations.retain(|i| {
                kept += usize::from(i.counted);
                !i.counted || kept <= n
            });
        }
        r
    }

    #[test]
    fn then_now_follows_the_runs_rule_and_is_undecided_where_three_reads_cannot_tell() {
        let mw = |mut r: Results| {
            for v in &mut r.measurements[0].vms {
                if let Some(c) = &mut v.comparison {
                    c.policy = VerdictPolicy::default();
                }
            }
            r
        };
        let client_b = |then: &Results, now: &Results| {
            let (a, b) = (&then.measurements[0], &now.measurements[0]);
            then_now(a, a.vm("client-b").unwrap(), b, b.vm("client-b").unwrap()).unwrap()
        };
        // 3 and 3 repeats: the exact test's smallest p is 0.10, so even 3x is undecided.
        let (then, now) = (mw(first_reads(aa_run(), 3)), mw(first_reads(slowed(aa_run(), 3.0), 3)));
        let (words, cmp) = client_b(&then, &now);
        assert_eq!(words, "undecided", "3 and 3 repeats can't reach p < 0.01");
        assert!(cmp.test.unwrap().min_p_value >= 0.10);
        assert!(diff(&then, &now, "then", "now").changes.is_empty());
        // The recorded 5 and 5 can (smallest p 7.94e-3): 3x is said, with its class.
        let (words, cmp) = client_b(&mw(aa_run()), &mw(slowed(aa_run(), 3.0)));
        assert!(words.starts_with("slower (") && words.contains("3"), "{words}");
        assert!(cmp.test.unwrap().min_p_value < 0.01);
    }

    #[test]
    fn different_metrics_give_no_then_now_verdict() {
        let then = aa_run();
        let mut now = aa_run();
        now.measurements[0].metric = "user_s".into();
        let (a, b) = (&then.measurements[0], &now.measurements[0]);
        assert!(then_now(a, a.vm("client-b").unwrap(), b, b.vm("client-b").unwrap()).is_none());
    }
}
