//! Detection power and false-alarm rate of the verdict rules, on the same data: the
//! run folders that `docs/src/findings/scripts/verdict-power/power.sh` made
//! (BENCHMARKS.md, "Verdict power and false alarms").
//!
//! ```text
//! cargo run --example verdict_power -- results/power
//! ```
//!
//! Reads `OUT/<setting>/verdict-power/<timestamp>/results.json` (setting: `default` or
//! `pin`), takes each VM's passed reads (`elapsed_s`, seconds) of the measurement
//! `nfs-read` and compares, with [`vmrepro::measure::stats::compare`]:
//! - each `client-<x>` (behind the rate limit set for a slowdown of about `x` %)
//!   against the baseline `client-a`: a `slower` verdict is a detection;
//! - `client-aa` and `client-ab` (the same as the baseline) against `client-a`:
//!   `slower` or `faster` is a false alarm;
//!
//! under three rules: the default exact Mann–Whitney rule (α 0.01, 10 % floor) on all
//! repeats, the ranges rule (medians > 10 % apart, ranges apart) on the same repeats,
//! and the ranges rule on the first 3 repeats only (its usual setting). Prints Markdown
//! tables. Exit 1 when no run folder is found.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use vmrepro::analyse::results::read_results;
use vmrepro::events::StepStatus;
use vmrepro::measure::stats::{compare, Verdict};
use vmrepro::measure::verdict::{Detectable, Rule, VerdictPolicy};
use vmrepro::path_io::Folder;

/// The rules compared: a name and how many of the repeats each uses (`None`: all).
const RULES: [(&str, Rule, Option<usize>); 3] = [
    ("Mann–Whitney", Rule::MannWhitney, None),
    ("ranges", Rule::Ranges, None),
    ("ranges, 3 reads", Rule::Ranges, Some(3)),
];

/// One run's samples (seconds): the baseline's, each A/A copy's, each level's.
struct Run {
    base: Vec<f64>,
    aa: Vec<Vec<f64>>,
    levels: BTreeMap<u32, Vec<f64>>,
}

/// Counts of the verdicts of one rule over several comparisons.
#[derive(Default, Clone, Copy)]
struct Tally {
    slower: u32,
    faster: u32,
    same: u32,
    undecided: u32,
    none: u32,
}

impl Tally {
    fn add(&mut self, v: Option<&Verdict>) {
        match v {
            Some(Verdict::Slower { .. }) => self.slower += 1,
            Some(Verdict::Faster { .. }) => self.faster += 1,
            Some(Verdict::Same) => self.same += 1,
            Some(Verdict::Undecided) => self.undecided += 1,
            None => self.none += 1,
        }
    }
}

fn verdict(rule: Rule, take: Option<usize>, cand: &[f64], base: &[f64]) -> Option<Verdict> {
    let cut = |xs: &[f64]| -> Vec<f64> { xs.iter().copied().take(take.unwrap_or(usize::MAX)).collect() };
    let policy = VerdictPolicy { rule, ..VerdictPolicy::default() };
    compare(&cut(cand), &cut(base), &policy).map(|c| c.verdict)
}

fn detectable(cand: &[f64], base: &[f64]) -> Option<f64> {
    let c = compare(cand, base, &VerdictPolicy::default())?;
    match c.detectable? {
        Detectable::Change { change, .. } => Some(change),
        Detectable::TooFewRepeats => None,
    }
}

fn median(xs: &mut [f64]) -> Option<f64> {
    if xs.is_empty() {
        return None;
    }
    xs.sort_by(f64::total_cmp);
    let n = xs.len();
    Some(if n % 2 == 1 { xs[n / 2] } else { (xs[n / 2 - 1] + xs[n / 2]) / 2.0 })
}

fn read_run(dir: &Path) -> Result<Run, String> {
    let folder = Folder::open(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let r = read_results(&folder, "results.json").map_err(|e| e.to_string())?;
    let m = r
        .measurements
        .iter()
        .find(|m| m.name == "nfs-read")
        .ok_or_else(|| format!("{}: no measurement nfs-read", dir.display()))?;
    let values = |vm: &str| -> Vec<f64> {
        m.vms
            .iter()
            .filter(|v| v.vm == vm)
            .flat_map(|v| v.iterations.iter())
            .filter(|i| i.status == StepStatus::Passed)
            .filter_map(|i| i.elapsed_s)
            .collect()
    };
    let mut run = Run { base: values("client-a"), aa: Vec::new(), levels: BTreeMap::new() };
    for v in &m.vms {
        match v.vm.strip_prefix("client-") {
            Some("aa" | "ab") => run.aa.push(values(&v.vm)),
            Some(x) => {
                if let Ok(x) = x.parse::<u32>() {
                    run.levels.insert(x, values(&v.vm));
                }
            }
            None => {}
        }
    }
    Ok(run)
}

/// `OUT/<setting>/*/*/results.json` → runs by setting (`suites`, the suite files, is
/// skipped).
fn find_runs(out: &Path) -> BTreeMap<String, Vec<Run>> {
    let mut runs: BTreeMap<String, Vec<Run>> = BTreeMap::new();
    let dirs = |p: &Path| -> Vec<PathBuf> {
        let mut v: Vec<PathBuf> = std::fs::read_dir(p)
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.is_dir() && !p.is_symlink())
            .collect();
        v.sort();
        v
    };
    for setting in dirs(out) {
        let name = setting.file_name().unwrap_or_default().to_string_lossy().into_owned();
        if name == "suites" {
            continue;
        }
        for run in dirs(&setting).iter().flat_map(|s| dirs(s)) {
            match read_run(&run) {
                Ok(r) => runs.entry(name.clone()).or_default().push(r),
                Err(e) => eprintln!("skipped: {e}"),
            }
        }
    }
    runs
}

fn main() -> ExitCode {
    let Some(out) = std::env::args_os().nth(1).map(PathBuf::from) else {
        eprintln!("usage: verdict_power OUT (the folder power.sh wrote)");
        return ExitCode::from(2);
    };
    let runs = find_runs(&out);
    if runs.is_empty() {
        eprintln!("no run folders under {}", out.display());
        return ExitCode::FAILURE;
    }
    let rate = |x: u32| {
        std::fs::read_to_string(out.join(format!("rate.{x}")))
            .map(|s| s.trim().to_string())
            .unwrap_or_else(|_| "?".into())
    };

    println!("Detection: client-<x> against client-a (slower / undecided / same / faster; no comparison)\n");
    print!("| setting | slowdown asked | rate | runs | ratio of medians: median (min–max) |");
    for (name, ..) in RULES {
        print!(" {name} |");
    }
    println!(" Mann–Whitney: smallest detectable change, median |");
    println!("|---|---|---|---|---|{}---|", "---|".repeat(RULES.len()));
    let mut aa: BTreeMap<String, (u32, Vec<Tally>)> = BTreeMap::new();
    for (setting, rs) in &runs {
        let levels: std::collections::BTreeSet<u32> = rs.iter().flat_map(|r| r.levels.keys().copied()).collect();
        for x in levels {
            let pairs: Vec<(&Vec<f64>, &Vec<f64>)> =
                rs.iter().filter_map(|r| Some((r.levels.get(&x)?, &r.base))).collect();
            let mut ratios: Vec<f64> =
                pairs.iter().filter_map(|(s, b)| Some(median(&mut s.to_vec())? / median(&mut b.to_vec())?)).collect();
            let (lo, hi) =
                (ratios.iter().copied().fold(f64::INFINITY, f64::min), ratios.iter().copied().fold(0.0, f64::max));
            let med = median(&mut ratios);
            print!(
                "| {setting} | {x} % | {} | {} | {} |",
                rate(x),
                pairs.len(),
                med.map_or("-".into(), |m| format!("{m:.3} ({lo:.3}–{hi:.3})"))
            );
            for (_, rule, take) in RULES {
                let mut t = Tally::default();
                for (s, b) in &pairs {
                    t.add(verdict(rule, take, s, b).as_ref());
                }
                print!(
                    " {} / {} / {} / {}{} |",
                    t.slower,
                    t.undecided,
                    t.same,
                    t.faster,
                    if t.none > 0 { format!("; {}", t.none) } else { String::new() }
                );
            }
            let mut mdc: Vec<f64> = pairs.iter().filter_map(|(s, b)| detectable(s, b)).collect();
            println!(" {} |", median(&mut mdc).map_or("-".into(), |m| format!("{:.1} %", m * 100.0)));
        }
        let entry = aa.entry(setting.clone()).or_insert_with(|| (0, vec![Tally::default(); RULES.len()]));
        for r in rs {
            for copy in &r.aa {
                entry.0 += 1;
                for (i, (_, rule, take)) in RULES.iter().enumerate() {
                    entry.1[i].add(verdict(*rule, *take, copy, &r.base).as_ref());
                }
            }
        }
    }
    println!("\nFalse alarms: client-aa and client-ab (the same as the baseline) against client-a, in every run\n");
    print!("| setting | comparisons |");
    for (name, ..) in RULES {
        print!(" {name}: false alarms (slower + faster) / undecided / same |");
    }
    println!();
    println!("|---|---|{}", "---|".repeat(RULES.len()));
    for (setting, (n, tallies)) in &aa {
        print!("| {setting} | {n} |");
        for t in tallies {
            print!(
                " {} / {} / {}{} |",
                t.slower + t.faster,
                t.undecided,
                t.same,
                if t.none > 0 { format!("; {} none", t.none) } else { String::new() }
            );
        }
        println!();
    }
    ExitCode::SUCCESS
}
