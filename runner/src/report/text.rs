//! The text printed at the end of `vmrepro run` and by `vmrepro analyse`: the run's
//! summary and each measurement's table.

use std::fmt::Write as _;

use crate::analyse::Analysis;
use crate::measure::analysis::{metric_value, MeasurementResult, Outcome, VmResult, NO_COMPARISON, OUTCOME_METRIC};
use crate::measure::format::{fmt_mb_s, netem_line};
use crate::plan::measurement::MeasurementPlan;
use crate::run::{RunRecord, StepStatus};

/// The run's summary: status and phase timings, each VM's kernel and boot time, and
/// every step that did not pass. (tests/suites.rs prints it; the CLI uses
/// [`summary_with_problems`] or [`summary_not_analysed`].)
#[cfg_attr(vmrepro_dead_code, allow(dead_code))]
pub fn summary(rec: &RunRecord) -> String {
    summary_with_problems(rec, 0)
}

/// [`summary`] of an analysed run with `problems` problems (failed checks, iterations
/// that did not end as expected, …): a run that passed with problems is `Failed`, as
/// its exit status says, with their count.
pub fn summary_with_problems(rec: &RunRecord, problems: usize) -> String {
    let why = (problems > 0).then(|| format!("{problems} problem{} below", if problems == 1 { "" } else { "s" }));
    summary_failed_if(rec, why)
}

/// [`summary`] of a run whose folder could not be analysed (its exit status is a
/// failure): a run that passed its steps is `Failed`, saying so.
pub fn summary_not_analysed(rec: &RunRecord) -> String {
    summary_failed_if(rec, Some("its results could not be analysed, see below".into()))
}

/// The summary, `Failed (why)` when the run's steps passed but `why` fails it: the
/// headline says what the exit status says.
fn summary_failed_if(rec: &RunRecord, why: Option<String>) -> String {
    let mut text = String::new();
    let t = &rec.timings;
    let status = match (rec.status, why) {
        (crate::run::RunStatus::Passed, Some(why)) => format!("Failed ({why})"),
        (other, _) => format!("{other:?}"),
    };
    let _ = writeln!(
        text,
        "suite {}: {status} in {:.1}s (images {:.1}s, boot {:.1}s, steps {:.1}s, teardown {:.1}s)",
        rec.suite, t.total_s, t.images_s, t.boot_s, t.steps_s, t.teardown_s
    );
    for v in &rec.vms {
        let boot = v.boot_s.map_or("-".into(), |b| format!("{b:.1}s"));
        let _ = writeln!(text, "  vm {:<14} {:<28} boot {boot}", v.name, v.kernel_release);
        for s in v.steps.iter().filter(|s| s.status != StepStatus::Passed) {
            let err = s.error.as_ref().map(|e| format!(": {e}")).unwrap_or_default();
            let _ = writeln!(text, "    step {} {:?}{err}", s.name, s.status);
        }
    }
    text
}

/// Every measurement's table (a preset's in its own layout), then the
/// problems of the VMs' setup (a sysctl not in force, a file that arrived different).
pub fn tables(a: &Analysis) -> String {
    let mut text = String::new();
    let vm_problems: Vec<String> =
        a.results.vms.iter().flat_map(|v| v.problems.iter().map(move |p| format!("problem: {}: {p}", v.vm))).collect();
    for (m, p) in a.results.measurements.iter().zip(&a.plan.measurements) {
        let _ = writeln!(text);
        match a.preset().filter(|x| x.owns(m)) {
            Some(preset) => text.push_str(&preset.table(m)),
            None => text.push_str(&table(m, p)),
        }
        text.push_str(&verdict_lines(m));
    }
    for p in vm_problems {
        let _ = writeln!(text, "{p}");
    }
    text
}

/// The table of a measurement: per VM the median of the metric (and of the elapsed
/// time and throughput when they are not the metric, and of the measurement's `table`
/// columns), the ratio to the baseline, the verdict and `run`'s exit statuses; below it
/// the derived metrics that moved.
pub fn table(m: &MeasurementResult, p: &MeasurementPlan) -> String {
    if m.metric == OUTCOME_METRIC {
        return outcome_table(m, p);
    }
    let mut t = String::new();
    let better = match p.metric.better {
        crate::schema::measure::Better::Lower => "lower",
        crate::schema::measure::Better::Higher => "higher",
    };
    let unit = m.unit.as_ref().map_or(String::new(), |u| format!(" in {u}"));
    let printed = match &p.output_metric {
        Some(o) if o.name == m.metric => format!(", printed by `run` ({})", output_source(o)),
        _ => String::new(),
    };
    let _ = writeln!(t, "measurement {}: {}{unit}{printed} ({better} is better)", m.name, m.metric);
    let show_elapsed = m.metric != "elapsed_s";
    let show_mbs = p.bytes.is_some() && m.metric != "throughput_mb_s";
    let (nw, vw) = widths(m);
    let mut head = format!("{:<nw$} {:>12}", "kernel (vm)", format!("median {}", short(&m.metric)));
    if show_elapsed {
        head.push_str(&format!(" {:>9}", "median s"));
    }
    if show_mbs {
        head.push_str(&format!(" {:>7}", "MB/s"));
    }
    for c in &p.table {
        head.push_str(&format!(" {:>w$}", c, w = c.len().max(8)));
    }
    head.push_str(&format!(" {:>6} {:<vw$} {}", "ratio", "verdict", "outcomes"));
    let _ = writeln!(t, "{head}");
    for (group, v) in grouped(m) {
        if let Some(g) = group {
            let _ = writeln!(t, "{g}");
        }
        let verdict = verdict_cell(m, v);
        let mut line = format!(
            "{:<nw$} {:>12}",
            format!("{} ({})", v.kernel_release, v.vm),
            v.metric.as_ref().map_or("-".into(), |s| fmt_value(s.median))
        );
        if show_elapsed {
            let median = |s: &crate::measure::stats::Summary| {
                crate::measure::format::fmt_small(s.median).unwrap_or(format!("{:.2}", s.median))
            };
            line.push_str(&format!(" {:>9}", v.elapsed_s.as_ref().map_or("-".into(), median)));
        }
        if show_mbs {
            line.push_str(&format!(" {:>7}", v.median_mb_s.map_or("-".into(), fmt_mb_s)));
        }
        for c in &p.table {
            let values: Vec<f64> =
                v.iterations.iter().filter(|i| i.counted).filter_map(|i| metric_value(c, i)).collect();
            let median = crate::measure::stats::summarize(&values).map_or("-".into(), |s| fmt_value(s.median));
            line.push_str(&format!(" {:>w$}", median, w = c.len().max(8)));
        }
        let exits: Vec<String> = v.outcomes.iter().map(short_outcome).collect();
        line.push_str(&format!(
            " {:>6} {:<vw$} {}",
            v.ratio_to_baseline.map_or("-".into(), |x| format!("{x:.2}")),
            verdict,
            exits.join(" ")
        ));
        let _ = writeln!(t, "{}", line.trim_end());
    }
    let n = m.vms.first().map_or(0, |v| v.iterations.len());
    let _ = writeln!(
        t,
        "({n} iteration(s) per VM; counters are deltas over `run`, summed over iterations; MB = 10^6 bytes)"
    );
    for v in &m.vms {
        let moved: Vec<String> =
            v.totals.iter().filter_map(|(k, x)| x.filter(|x| *x != 0).map(|x| format!("{k} {x}"))).collect();
        if !moved.is_empty() {
            let _ = writeln!(t, "{}: {}", v.vm, moved.join(", "));
        }
        netem_line(&mut t, v);
    }
    for r in &m.rounds {
        let _ = writeln!(t, "{r}");
    }
    for v in &m.vms {
        if let Some(why) = v.verdict.as_deref().and_then(|w| w.strip_prefix(NO_COMPARISON)) {
            let _ = writeln!(t, "{NO_COMPARISON} for {}{why}", v.vm);
        }
    }
    outcome_lines(&mut t, m, p);
    for h in crate::report::hints::count_hints(m) {
        let _ = writeln!(t, "{h}");
    }
    for pr in &m.problems {
        let _ = writeln!(t, "problem: {pr}");
    }
    t
}

/// The widths of the name column (`kernel (vm)`, at least 42 so that tables of short
/// names keep their layout) and of the verdict column (at least 20), so that long VM
/// names, kernel releases and verdicts never push the later columns out of line.
fn widths(m: &MeasurementResult) -> (usize, usize) {
    let name = m.vms.iter().map(|v| format!("{} ({})", v.kernel_release, v.vm).chars().count()).max().unwrap_or(0);
    let verdict = m.vms.iter().map(|v| verdict_cell(m, v).chars().count()).max().unwrap_or(0);
    (name.max(42), verdict.max(20))
}

/// The verdict column of VM `v`: `baseline`, its verdict, `no comparison` when it could
/// not be compared (the reason follows the table, see [`NO_COMPARISON`]), else `-`.
fn verdict_cell(m: &MeasurementResult, v: &VmResult) -> String {
    if m.is_baseline(&v.vm) {
        return "baseline".into();
    }
    match v.verdict.as_deref() {
        Some(w) if w.starts_with(NO_COMPARISON) => NO_COMPARISON.into(),
        Some(w) => w.to_string(),
        None => "-".into(),
    }
}

/// The table of a measurement that compares outcomes (`compare: outcome`).
fn outcome_table(m: &MeasurementResult, p: &MeasurementPlan) -> String {
    let mut t = String::new();
    let _ = writeln!(t, "measurement {}: outcome (how each iteration ended)", m.name);
    let (nw, vw) = widths(m);
    let _ = writeln!(t, "{:<nw$} {:<vw$} outcomes", "kernel (vm)", "verdict");
    for (group, v) in grouped(m) {
        if let Some(g) = group {
            let _ = writeln!(t, "{g}");
        }
        let verdict = verdict_cell(m, v);
        let outcomes: Vec<String> = v.outcomes.iter().map(short_outcome).collect();
        let _ =
            writeln!(t, "{:<nw$} {:<vw$} {}", format!("{} ({})", v.kernel_release, v.vm), verdict, outcomes.join(" "));
    }
    for r in &m.rounds {
        let _ = writeln!(t, "{r}");
    }
    outcome_lines(&mut t, m, p);
    for pr in &m.problems {
        let _ = writeln!(t, "problem: {pr}");
    }
    t
}

/// The VMs of `m` in the table's order: with groups, group by group, each group's
/// first VM with the group's heading (`group client-v6-1 (baseline client-v6-1-idle):`);
/// else in measured order.
fn grouped(m: &MeasurementResult) -> Vec<(Option<String>, &VmResult)> {
    if m.groups.is_empty() {
        return m.vms.iter().map(|v| (None, v)).collect();
    }
    let mut out = Vec::new();
    for g in &m.groups {
        for (n, v) in g.vms.iter().filter_map(|name| m.vm(name)).enumerate() {
            out.push(((n == 0).then(|| format!("group {} (baseline {}):", g.name, g.baseline)), v));
        }
    }
    out
}

/// The line that says how the VMs' outcomes differ, when they do.
fn outcome_lines(t: &mut String, m: &MeasurementResult, p: &MeasurementPlan) {
    let mut words: Vec<String> = m.vms.iter().map(VmResult::outcome_words).collect();
    words.dedup();
    if words.len() > 1 {
        let command = p.vms.first().map_or("", |v| v.commands.run.split_whitespace().next().unwrap_or(""));
        let per_vm: Vec<String> = m
            .vms
            .iter()
            .map(|v| {
                let base = if m.is_baseline(&v.vm) { ", baseline" } else { "" };
                format!("{} on {} ({}{base})", v.outcome_words(), v.kernel_release, v.vm)
            })
            .collect();
        let _ = writeln!(t, "outcomes differ: `{command}` {}", per_vm.join("; "));
    }
}

/// An outcome in the table's column: the exit status, `sig9`, `setup:32`, `timeout`,
/// `crash`, `-` (not run), `action` (an action around it failed).
fn short_outcome(o: &Outcome) -> String {
    match o {
        Outcome::Exited { status } => status.to_string(),
        Outcome::Signalled { signal } => format!("sig{signal}"),
        Outcome::SetupFailed { status } => format!("setup:{}", status.map_or("?".into(), |s| s.to_string())),
        Outcome::TimedOut => "timeout".into(),
        Outcome::Crashed => "crash".into(),
        Outcome::NotRun => "-".into(),
        Outcome::ActionFailed => "action".into(),
    }
}

/// Where an output metric is read: `stdout, /jobs/0/read/iops`, `file /tmp/x.json, regex …`.
fn output_source(o: &crate::plan::measurement::OutputMetric) -> String {
    use crate::plan::measurement::{Extract, MetricFrom};
    let from = match &o.from {
        MetricFrom::Stdout => "stdout".to_string(),
        MetricFrom::File(path) => format!("file {path}"),
    };
    match &o.extract {
        Extract::Json(pointer) => format!("{from}, JSON {pointer}"),
        Extract::Regex(re) => format!("{from}, regex {re:?}"),
    }
}

/// A column title for a metric: `s` for seconds, `MB/s`, else the name.
fn short(metric: &str) -> &str {
    match metric {
        "elapsed_s" | "user_s" | "system_s" => "s",
        "throughput_mb_s" => "MB/s",
        other => other,
    }
}

/// Whole numbers as they are, values below 0.1 with three significant digits (a
/// few milliseconds), other values with two decimals.
fn fmt_value(v: f64) -> String {
    if let Some(small) = crate::measure::format::fmt_small(v) {
        small
    } else if v.fract() == 0.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.2}")
    }
}

/// One line per comparison of a measurement: the rule, the exact Mann–Whitney test
/// (p-value, Hodges–Lehmann ratio, interval), the verdict, and the smallest change the
/// run could have flagged, e.g.
/// `client-b vs client-a: undecided (mann_whitney, α 0.01, floor 10 %): p = 0.70 (3 and 3 repeats: p ≥ 0.10), ratio 0.82x, no 99 % interval; no change could be flagged: 3 and 3 repeats can't reach p < 0.01`.
/// With `calibrate: true` each line also gives the smallest change the A/A pair's
/// noise allows, and a last line the A/A pair's own verdict
/// (`client-a (A/A copy) vs client-a: same …`), with a warning when it is not `same`.
pub fn verdict_lines(m: &MeasurementResult) -> String {
    let mut t = String::new();
    for v in m.vms.iter().filter(|v| !m.is_baseline(&v.vm)) {
        let Some(c) = &v.comparison else { continue };
        let mut line = comparison_line(&v.vm, m.baseline_of(&v.vm), v.verdict.as_deref(), c);
        let pair = m.calibration.as_ref().and_then(|a| a.comparison.as_ref());
        if let (Some(aa), Some(pair)) = (c.calibrated, pair) {
            let sizes = format!("{} and {} repeats", pair.candidate.n, pair.baseline.n);
            let _ = write!(line, "; {}", detectable_words(aa, &c.policy, "the A/A pair's noise", &sizes));
        }
        let _ = writeln!(t, "{line}");
    }
    if let Some(aa) = &m.calibration {
        match &aa.comparison {
            Some(c) => {
                let mut line = comparison_line(&format!("{} (A/A copy)", aa.vm), &m.baseline, aa.verdict.as_deref(), c);
                if c.verdict != crate::measure::stats::Verdict::Same {
                    let _ = write!(
                        line,
                        "; the A/A pair is not `same`: this run is too noisy to trust (or the baseline drifted)"
                    );
                }
                let _ = writeln!(t, "{line}");
            }
            None => {
                let _ = writeln!(t, "{} (A/A copy) vs {}: no values to compare", aa.vm, m.baseline);
            }
        }
    }
    t
}

/// `vm vs baseline: verdict (rule): test; smallest detectable change` for one comparison.
pub(crate) fn comparison_line(
    vm: &str,
    baseline: &str,
    verdict: Option<&str>,
    c: &crate::measure::stats::Comparison,
) -> String {
    use crate::measure::verdict::Rule;
    let p = &c.policy;
    let rule = match p.rule {
        Rule::Ranges => format!("ranges, floor {}", pct(p.floor)),
        Rule::MannWhitney => format!("mann_whitney, α {}, floor {}", alpha_words(p), pct(p.floor)),
    };
    let sizes = format!("{} and {} repeats", c.candidate.n, c.baseline.n);
    let mut line = format!("{vm} vs {baseline}: {} ({rule})", verdict.unwrap_or("-"));
    if let Some(test) = &c.test {
        let level = pct(test.confidence);
        let interval = test.interval.map_or(format!("no {level} interval from {sizes}"), |[lo, hi]| {
            format!("{level} interval {lo:.2}x–{hi:.2}x")
        });
        let _ = write!(
            line,
            ": Mann–Whitney p = {} ({sizes}: p ≥ {}), ratio {:.2}x, {interval}",
            fmt_p(test.p_value),
            fmt_p(test.min_p_value),
            test.ratio
        );
    }
    if let Some(d) = c.detectable {
        let _ = write!(line, "; {}", detectable_words(d, p, "this noise", &sizes));
    }
    line
}

/// The smallest detectable change in words, from `noise` (`this noise`) and `sizes`
/// (`5 and 5 repeats`): `with this noise and 5 and 5 repeats, changes smaller than
/// 34.7 % would not be flagged` (`(the floor)` when the floor sets it), or why no
/// change could be.
fn detectable_words(
    d: crate::measure::verdict::Detectable,
    p: &crate::plan::measurement::VerdictPolicy,
    noise: &str,
    sizes: &str,
) -> String {
    use crate::measure::verdict::Detectable;
    match d {
        Detectable::Change { change, by_floor } => {
            let why = if by_floor { " (the floor)" } else { "" };
            format!("with {noise} and {sizes}, changes smaller than {}{why} would not be flagged", pct(change))
        }
        Detectable::TooFewRepeats => {
            format!("no change could be flagged: {sizes} can't reach p < {}", fmt_p(p.level()))
        }
    }
}

/// A fraction as a percentage: `10 %`, `99 %`, `99.9 %`, `34.7 %` (one decimal unless whole).
pub(crate) fn pct(x: f64) -> String {
    let v = x * 100.0;
    if (v - v.round()).abs() > 1e-6 {
        format!("{v:.1} %")
    } else {
        format!("{v:.0} %")
    }
}

/// A p-value with two significant digits (`0.70`, `0.0079`).
/// A policy's α: `0.01`, or with adaptive repeats `0.01 over 9 looks (1.11e-3 each)`.
pub fn alpha_words(p: &crate::plan::measurement::VerdictPolicy) -> String {
    if p.looks > 1 {
        format!("{} over {} looks ({} each)", p.alpha, p.looks, fmt_p(p.level()))
    } else {
        p.alpha.to_string()
    }
}

fn fmt_p(p: f64) -> String {
    if p >= 0.01 {
        format!("{p:.2}")
    } else {
        format!("{p:.2e}")
    }
}
