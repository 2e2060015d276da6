//! Two analysed runs of one suite side by side (`vmrepro replay`: then against now;
//! `vmrepro compare RUN_A RUN_B`): per measurement and VM, the kernel, the median then
//! and now, the verdict then and now, and the derived metrics' totals (counters).
//!
//! Verdicts **agree** when their direction is the same (`same`, `slower`/`worse`,
//! `faster`/`better`, `baseline`): the ratio ranges in brackets move with the noise and
//! are shown, not compared.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use super::published::comparison_table::fmt_value;
use crate::analyse::Results;
use crate::measure::analysis::VmResult;

/// The diff of two runs.
#[derive(Debug, Clone, Default)]
pub struct Diff {
    /// The printed text.
    pub text: String,
    /// Every disagreement, `measurement/vm: then → now`.
    pub disagreements: Vec<String>,
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
    if d.disagreements.is_empty() {
        let _ = writeln!(d.text, "\nevery verdict agrees");
    } else {
        let _ = writeln!(d.text, "\n{} verdict(s) differ: {}", d.disagreements.len(), d.disagreements.join("; "));
    }
    d
}
