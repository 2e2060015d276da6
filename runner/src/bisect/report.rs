//! What a finished bisect leaves in its folder:
//! - `bisect.log`, in `git bisect log` format (`git bisect start`, a `# bad:`/`# good:`/
//!   `# skip:` comment and its `git bisect bad|good|skip <id>` line per endpoint and
//!   step, vmrepro's verdict as a comment, then `# first bad commit:` or `# possible
//!   first bad commit:` lines), so `git bisect replay bisect.log` in the tree reaches
//!   the same culprit;
//! - `bisect-report.md`, in the style of a 0-day bisect mail: the change, the first
//!   bad commit (id, subject, date), the verification counts and the confidence, a
//!   table of the runs (commit, verdict, medians, ratio, p-value), the command that
//!   makes the bisect again, and a last `#regzbot introduced: <id>` line when the
//!   culprit verified;
//! - `results.json` ([`BisectResults`], schema [`BISECT_RESULTS_SCHEMA`]).

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use super::engine::{short, Confidence, Evaluation, Mark, Outcome};
use super::state::{Question, Role};
use super::{BisectError, Finished};
use crate::path_io::Folder;

/// `results.json`'s schema version in a bisect folder.
pub const BISECT_RESULTS_SCHEMA: u32 = 1;

/// A bisect folder's `results.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BisectResults {
    /// [`BISECT_RESULTS_SCHEMA`].
    pub schema: u32,
    /// What was asked.
    pub question: Question,
    /// Whether the culprit verified (false without a culprit).
    pub verified: bool,
    /// The steps (every evaluation, verification runs included), the culprit, the
    /// verification and the confidence.
    pub outcome: Outcome,
}

/// Writes `bisect.log`, `bisect-report.md` and `results.json` into the bisect folder;
/// `reproduce` is the command that makes the bisect again.
///
/// Errors: a file can't be written.
pub fn write(f: &Finished, reproduce: &str) -> Result<(), BisectError> {
    let folder = Folder::open(&f.dir).map_err(crate::run::record::RunDirError::from)?;
    let put = |name: &str, text: &str| -> Result<(), BisectError> {
        folder.write(name, text.as_bytes(), 0o644).map_err(|e| BisectError::Folder(e.into()))
    };
    put("bisect.log", &log(&f.question, &f.outcome))?;
    put("bisect-report.md", &markdown(&f.question, &f.outcome, reproduce))?;
    let results = BisectResults {
        schema: BISECT_RESULTS_SCHEMA,
        question: f.question.clone(),
        verified: verified(&f.outcome),
        outcome: f.outcome.clone(),
    };
    put("results.json", &(serde_json::to_string_pretty(&results).expect("serializable") + "\n"))
}

/// Whether the bisect named a culprit that verified.
pub fn verified(o: &Outcome) -> bool {
    o.culprit.is_some() && o.verification.as_ref().is_some_and(super::engine::Verification::verified)
}

/// `bisect.log`: what `git bisect log` would print for the same marks.
pub fn log(q: &Question, o: &Outcome) -> String {
    let mut s = String::from("git bisect start\n");
    for e in o.evaluations.iter().filter(|e| matches!(e.role, Role::BadEndpoint | Role::GoodEndpoint | Role::Step)) {
        let Some(mark) = e.mark else { continue };
        let word = match mark {
            Mark::Bad => "bad",
            Mark::Good => "good",
            Mark::Skip => "skip",
        };
        let _ = writeln!(s, "# {word}: [{}] {}", e.commit.commit, e.commit.subject);
        let _ = writeln!(s, "# vmrepro: {} of {} against {}: {}", q.metric, q.vm, q.baseline, one_line(&e.words));
        let _ = writeln!(s, "git bisect {word} {}", e.commit.commit);
    }
    match &o.culprit {
        Some(c) => {
            let _ = writeln!(s, "# first bad commit: [{}] {}", c.commit, c.subject);
        }
        None => {
            s.push_str("# only skipped commits left to test\n");
            for c in &o.possible {
                let _ = writeln!(s, "# possible first bad commit: [{}] {}", c.commit, c.subject);
            }
        }
    }
    s
}

/// The change the bad endpoint showed, in the kernel test robot's words: `+253.7%
/// regression of nfs-read.elapsed_s` (the change of the median, signed), or `a
/// different outcome of mount`.
fn change_words(q: &Question, o: &Outcome) -> String {
    let bad = o.evaluations.iter().find(|e| e.role == Role::BadEndpoint);
    match bad.and_then(|e| Some((e.median?, e.baseline_median?))) {
        Some((m, b)) if b != 0.0 => {
            let word = match o.direction {
                super::engine::Direction::Faster => "improvement",
                _ => "regression",
            };
            format!("{:+.1}% {word} of {}.{}", (m / b - 1.0) * 100.0, q.measurement, q.metric)
        }
        _ => format!("{} of {}", o.direction.words(), q.measurement),
    }
}

/// `bisect-report.md`.
pub fn markdown(q: &Question, o: &Outcome, reproduce: &str) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "# Bisect of {} on VM {} ({})\n", q.suite, q.vm, q.tree);
    let _ = writeln!(
        s,
        "vmrepro found a {} on VM {} against baseline {}, between good {} ({}) and bad {} ({}) of tree {}, and bisected it.\n",
        change_words(q, o),
        q.vm,
        q.baseline,
        short(&q.good.commit),
        q.good.describe,
        short(&q.bad.commit),
        q.bad.describe,
        q.tree
    );
    match (&o.culprit, &o.verification) {
        (Some(c), v) => {
            let ok = verified(o);
            let head = if ok { "first bad commit" } else { "first bad commit (NOT VERIFIED: not a result)" };
            let _ = writeln!(s, "{head}: {} (\"{}\")", c.commit, c.subject);
            let _ = writeln!(s, "date: {}", c.date);
            let _ = writeln!(s, "describe: {}\n", c.describe);
            match v {
                Some(v) => {
                    let _ = writeln!(
                        s,
                        "verification: the culprit was {} in {} of {} runs; its parent {} (\"{}\") showed no change in {} of {}.",
                        o.direction.words(),
                        v.culprit_as_expected,
                        v.runs,
                        short(&v.parent.commit),
                        v.parent.subject,
                        v.parent_as_expected,
                        v.runs
                    );
                    if v.culprit_contrary + v.parent_contrary > 0 {
                        let _ = writeln!(
                            s,
                            "against it: the culprit showed no change in {} run(s), the parent the change in {}.",
                            v.culprit_contrary, v.parent_contrary
                        );
                    }
                }
                None => s.push_str("verification: none was run (`--verify 0`, or the culprit has no parent).\n"),
            }
            let conf = match o.confidence {
                Some(Confidence::High) => "high",
                Some(Confidence::Medium) => "medium",
                _ => "low",
            };
            let skips = o.evaluations.iter().filter(|e| e.mark == Some(Mark::Skip)).count();
            let _ = writeln!(
                s,
                "confidence: {conf}: {} of {} judged runs agree with this culprit (bad exactly on it and its descendants); {skips} commit(s) skipped.\n",
                o.agreeing, o.decided
            );
            if !ok {
                s.push_str("The culprit did not verify: re-run with more `--verify` runs or a suite with less noise before reporting it.\n\n");
            }
        }
        (None, _) => {
            s.push_str("No culprit: only skipped commits were left. The first bad commit is one of:\n\n");
            for c in &o.possible {
                let _ = writeln!(s, "- {} (\"{}\")", c.commit, c.subject);
            }
            s.push('\n');
        }
    }
    s.push_str(&table(q, o));
    let _ = writeln!(s, "\nTo reproduce (PATH: your checkout of the tree):\n\n    {reproduce}\n");
    s.push_str("`bisect.log` replays in the tree with `git bisect replay bisect.log`.\n");
    if let (true, Some(c)) = (verified(o), &o.culprit) {
        let _ = write!(s, "\n#regzbot introduced: {}\n", short(&c.commit));
    }
    s
}

/// The runs as a Markdown table (the p-value only under the Mann–Whitney rule: the
/// ranges rule does not use it).
fn table(q: &Question, o: &Outcome) -> String {
    let unit = if q.metric == "elapsed_s" { " s" } else { "" };
    let mut s = format!(
        "| # | role | commit | subject | verdict | median{unit} | baseline{unit} | ratio | p | mark |\n|---|---|---|---|---|---|---|---|---|---|\n"
    );
    for (i, e) in o.evaluations.iter().enumerate() {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            i + 1,
            e.role.words(),
            short(&e.commit.commit),
            cell(&e.commit.subject),
            cell(one_line(&e.words)),
            num(e.median),
            num(e.baseline_median),
            e.comparison.as_ref().map_or("-".into(), |c| format!("{:.2}", c.median_ratio)),
            e.comparison
                .as_ref()
                .filter(|c| c.policy.rule == crate::schema::measure::Rule::MannWhitney)
                .and_then(|c| c.test.as_ref())
                .map_or("-".into(), |t| format!("{:.3}", t.p_value)),
            mark_words(e, o.direction)
        );
    }
    s
}

/// A mark in words; a verification run says whether it behaved as expected.
fn mark_words(e: &Evaluation, direction: super::engine::Direction) -> &'static str {
    let mark = e.mark.unwrap_or_else(|| super::engine::mark_of(&e.seen, direction));
    match (e.role, mark) {
        (Role::VerifyCulprit, Mark::Bad) | (Role::VerifyParent, Mark::Good) => "as expected",
        (Role::VerifyCulprit, Mark::Good) | (Role::VerifyParent, Mark::Bad) => "contrary",
        (Role::VerifyCulprit | Role::VerifyParent, Mark::Skip) => "not judged",
        (_, Mark::Bad) => "bad",
        (_, Mark::Good) => "good",
        (_, Mark::Skip) => "skip",
    }
}

/// A value with 3 significant decimals, `-` when absent.
fn num(v: Option<f64>) -> String {
    v.map_or("-".into(), |v| format!("{v:.3}"))
}

/// `s` fit for a table cell (no `|`, no newline).
fn cell(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}

/// The first line of `s`.
fn one_line(s: &str) -> &str {
    s.lines().next().unwrap_or_default()
}
