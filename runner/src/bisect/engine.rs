//! The search: which commit to run next, what a run's verdict makes of it (bad, good
//! or skipped), when git has named the first bad commit, and the verification of that
//! culprit with the confidence it earns.
//!
//! A run is asked of a [`Judge`] (the real one builds the kernel and runs the suite,
//! [`super::judge`]; tests give a table). Everything else is decided here from the
//! runs' results and the git history alone, so the same results always make the same
//! search: a resumed bisect replays the runs recorded in `bisect.json` and only runs
//! what is missing.
//!
//! The rules:
//! - `--bad` runs first; its verdict against the baseline (slower, faster, or a
//!   different outcome) is the direction that counts as bad. `same` or undecided there
//!   ends the bisect: there is nothing to look for.
//! - `--good` runs next and must not show that direction.
//! - Each step runs the commit git's `rev-list --bisect-all` puts first (skipped ones
//!   left out). The bad direction marks it bad; `same` (or the other direction) marks
//!   it good; an undecided verdict runs it again, its values pooled with the earlier
//!   runs', up to `--max-runs` runs (the test's α is shared among them, Bonferroni);
//!   still undecided, a build failure, a boot failure, or no values mark it skipped.
//! - When no commit is left between the good ones and the bad one, the bad one is the
//!   culprit; when only skipped ones are left, the culprit is one of them and the bad
//!   one, and the bisect says so.
//! - The culprit and its first parent then run `--verify` times each, alternately,
//!   each run judged alone: the culprit should show the direction, the parent should
//!   not. The culprit is verified when each behaved as expected in more than half of
//!   its runs and never the opposite way.

use std::path::{Path, PathBuf};

use super::state::{Judgement, Role, RunEntry, State};
use super::BisectError;
use crate::infra::images::tree::TreeCommit;
use crate::measure::analysis::oriented;
use crate::measure::stats::{compare, Comparison, Verdict};
use crate::plan::measurement::VerdictPolicy;
use crate::schema::measure::Better;

/// Runs the suite with the bisected VM on one commit.
pub trait Judge {
    /// Builds `commit`'s kernel and runs the suite into the new folder `run_dir`; what
    /// the bisected VM showed against its baseline. A kernel that does not build, a VM
    /// that does not boot, or a VM without values is a [`Judgement`], not an error.
    ///
    /// Errors: what stops the whole bisect (the baseline failed, the host failed, an
    /// interruption).
    fn judge(
        &mut self,
        commit: &TreeCommit,
        run_dir: &Path,
    ) -> impl std::future::Future<Output = Result<Judgement, BisectError>>;
}

impl<T: Judge> Judge for &mut T {
    fn judge(
        &mut self,
        commit: &TreeCommit,
        run_dir: &Path,
    ) -> impl std::future::Future<Output = Result<Judgement, BisectError>> {
        (**self).judge(commit, run_dir)
    }
}

/// Which way the bad commits differ from the baseline.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    /// The metric is worse (a time longer, a rate lower).
    Slower,
    /// The metric is better.
    Faster,
    /// `compare: outcome`: the outcomes differ.
    Different,
}

impl Direction {
    /// `slower`, `faster`, `a different outcome`.
    pub fn words(self) -> &'static str {
        match self {
            Direction::Slower => "slower",
            Direction::Faster => "faster",
            Direction::Different => "a different outcome",
        }
    }
}

/// What the runs of one commit showed.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Seen {
    /// A change: the verdict said `slower`/`faster`, or the outcomes differ.
    Changed(Direction),
    /// No change: `same`, or the same outcomes.
    Same,
    /// The verdict stayed undecided.
    Undecided,
    /// Nothing to judge: the build or the boot failed, or no values (why).
    Failed(String),
}

/// How git is told about a commit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mark {
    /// `git bisect good`.
    Good,
    /// `git bisect bad`.
    Bad,
    /// `git bisect skip`.
    Skip,
}

/// One commit's runs for one purpose, and what they made of it.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Evaluation {
    /// Why it ran.
    pub role: Role,
    /// The commit.
    pub commit: TreeCommit,
    /// What its runs showed (pooled over them, for a step).
    pub seen: Seen,
    /// The verdict in words (`slower (3.0x–3.5x)`, `same`, `undecided`,
    /// `build failed: …`).
    pub words: String,
    /// The comparison of the pooled values (absent for outcomes and failures).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comparison: Option<Comparison>,
    /// The median of the bisected VM's values of the metric, as measured (pooled).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub median: Option<f64>,
    /// The median of its baseline's values in the same runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline_median: Option<f64>,
    /// The mark git was given (absent for verification runs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mark: Option<Mark>,
    /// Its run folders, relative to the bisect folder.
    pub runs: Vec<String>,
}

/// The culprit's verification.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Verification {
    /// Runs of each (`--verify`).
    pub runs: u32,
    /// The culprit's first parent.
    pub parent: TreeCommit,
    /// Culprit runs that showed the bad direction.
    pub culprit_as_expected: u32,
    /// Culprit runs that showed no change (or the other direction).
    pub culprit_contrary: u32,
    /// Parent runs that showed no change (or the other direction).
    pub parent_as_expected: u32,
    /// Parent runs that showed the bad direction.
    pub parent_contrary: u32,
}

impl Verification {
    /// Each behaved as expected in more than half of its runs, and never the opposite way.
    pub fn verified(&self) -> bool {
        2 * self.culprit_as_expected > self.runs
            && 2 * self.parent_as_expected > self.runs
            && self.culprit_contrary == 0
            && self.parent_contrary == 0
    }

    /// Each behaved as expected in every run.
    pub fn unanimous(&self) -> bool {
        self.culprit_as_expected == self.runs && self.parent_as_expected == self.runs
    }
}

/// How sure the bisect is of its culprit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Confidence {
    /// Verified in every run, every step's mark agrees with the culprit, no step
    /// skipped.
    High,
    /// Verified, with a run, a step or a skip short of that.
    Medium,
    /// Not verified: the culprit is not a result.
    Low,
}

/// How a bisect ended.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Outcome {
    /// The direction the bad endpoint showed.
    pub direction: Direction,
    /// Every commit's runs, in order: the endpoints, the steps, the verification runs
    /// (one each).
    pub evaluations: Vec<Evaluation>,
    /// The first bad commit git named, if it named one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub culprit: Option<TreeCommit>,
    /// When only skipped commits were left: the commits the first bad one is among.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub possible: Vec<TreeCommit>,
    /// The culprit's verification.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verification: Option<Verification>,
    /// Marked runs (endpoints, steps and verification runs) whose mark agrees with
    /// the culprit (bad exactly where the culprit is an ancestor of the commit or the
    /// commit itself).
    pub agreeing: u32,
    /// Marked runs that could agree or not (skips and undecided ones left out).
    pub decided: u32,
    /// The confidence in the culprit (absent without one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confidence: Option<Confidence>,
}

/// One bisect over the runs of a [`Judge`].
pub struct Engine<'a, J> {
    /// The user's checkout (read only).
    pub checkout: &'a Path,
    /// The bisect folder (`bisect.json`, `runs/`).
    pub dir: &'a Path,
    /// The measurement's verdict settings; `looks` is raised to the runs a step may
    /// take (Bonferroni over them).
    pub policy: VerdictPolicy,
    /// Which way the metric is better.
    pub better: Better,
    /// Runs the suite.
    pub judge: J,
    /// What was asked and what ran.
    pub state: State,
    /// Progress lines.
    pub say: &'a dyn Fn(&str),
}

impl<J> std::fmt::Debug for Engine<'_, J> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine").field("dir", &self.dir).field("runs", &self.state.runs.len()).finish()
    }
}

impl<J: Judge> Engine<'_, J> {
    /// Bisects: the endpoints, the steps, the verification.
    ///
    /// Errors: the endpoints do not differ as they should (nothing to bisect), git
    /// fails, `bisect.json` disagrees with this search, or the judge's errors.
    pub async fn bisect(mut self) -> Result<Outcome, BisectError> {
        let mut runs = Runs::default();
        let q = self.state.question.clone();
        let direction = self.endpoints(&q, &mut runs).await?;
        let (culprit, possible) = self.search(&q, direction, &mut runs).await?;
        let verification = match &culprit {
            Some(c) if q.verify > 0 => self.verify(c, q.verify, direction, &mut runs).await?,
            _ => None,
        };
        let mut outcome = Outcome {
            direction,
            evaluations: runs.evaluations,
            culprit,
            possible,
            verification,
            agreeing: 0,
            decided: 0,
            confidence: None,
        };
        self.judge_confidence(&mut outcome)?;
        Ok(outcome)
    }

    /// Runs the bad endpoint (its verdict is the direction that counts as bad), then
    /// the good one (which must not show it); the direction.
    ///
    /// Errors: [`BisectError::Endpoints`] when they do not differ so.
    async fn endpoints(&mut self, q: &super::state::Question, runs: &mut Runs) -> Result<Direction, BisectError> {
        let bad_end = self.evaluate(Role::BadEndpoint, &q.bad, q.max_runs, runs).await?;
        let direction = match &bad_end.seen {
            Seen::Changed(d) => *d,
            other => {
                return Err(BisectError::Endpoints(format!(
                    "the bad commit {} ({}) shows no change against baseline {}: {}{}; there is nothing to bisect",
                    short(&q.bad.commit),
                    q.bad.describe,
                    q.baseline,
                    bad_end.words,
                    match other {
                        Seen::Undecided => format!(" after {} run(s)", bad_end.runs.len()),
                        _ => String::new(),
                    }
                )))
            }
        };
        runs.evaluations.push(Evaluation { mark: Some(Mark::Bad), ..bad_end });
        let good_end = self.evaluate(Role::GoodEndpoint, &q.good, q.max_runs, runs).await?;
        let problem = match mark_of(&good_end.seen, direction) {
            Mark::Good => None,
            Mark::Bad => Some(format!(
                "is {} too ({}): give a --good commit that does not show the change",
                direction.words(),
                good_end.words
            )),
            Mark::Skip => Some(format!("can't be judged: {}", good_end.words)),
        };
        if let Some(p) = problem {
            return Err(BisectError::Endpoints(format!(
                "the good commit {} ({}) {p}",
                short(&q.good.commit),
                q.good.describe
            )));
        }
        runs.evaluations.push(Evaluation { mark: Some(Mark::Good), ..good_end });
        Ok(direction)
    }

    /// The steps, until git's range holds no untested commit: the first bad commit,
    /// or (only skipped commits left) none and the commits it is among.
    ///
    /// Errors: git's, and the judge's.
    async fn search(
        &mut self,
        q: &super::state::Question,
        direction: Direction,
        runs: &mut Runs,
    ) -> Result<(Option<TreeCommit>, Vec<TreeCommit>), BisectError> {
        let mut bad = q.bad.clone();
        let mut goods = vec![q.good.commit.clone()];
        let mut skipped: Vec<TreeCommit> = Vec::new();
        loop {
            let left: Vec<String> = super::git::candidates(self.checkout, &bad.commit, &goods)
                .map_err(BisectError::Git)?
                .into_iter()
                .filter(|c| *c != bad.commit)
                .collect();
            let skipped_left = skipped.iter().filter(|s| left.contains(&s.commit)).count();
            let Some(next) = left.iter().find(|c| !skipped.iter().any(|s| s.commit == **c)) else {
                if left.is_empty() {
                    return Ok((Some(bad), Vec::new()));
                }
                let mut possible: Vec<TreeCommit> =
                    skipped.iter().filter(|s| left.contains(&s.commit)).cloned().collect();
                possible.push(bad);
                return Ok((None, possible));
            };
            let commit = crate::infra::images::tree::resolve_rev(self.checkout, next).map_err(BisectError::Git)?;
            (self.say)(&format!(
                "bisect: {} commit(s) left to test (roughly {} step(s)); next {} {:?}",
                left.len() - skipped_left,
                super::git::steps_left(left.len() + 1),
                short(&commit.commit),
                commit.subject
            ));
            let e = self.evaluate(Role::Step, &commit, q.max_runs, runs).await?;
            let mark = mark_of(&e.seen, direction);
            match mark {
                Mark::Bad => bad = commit.clone(),
                Mark::Good => goods.push(commit.commit.clone()),
                Mark::Skip => skipped.push(commit.clone()),
            }
            runs.evaluations.push(Evaluation { mark: Some(mark), ..e });
        }
    }

    /// Runs `culprit`'s first parent and `culprit` `n` times each, alternately, each run
    /// judged alone; `None` for a root commit (no parent to compare).
    ///
    /// Errors: git's, and the judge's.
    async fn verify(
        &mut self,
        culprit: &TreeCommit,
        n: u32,
        direction: Direction,
        runs: &mut Runs,
    ) -> Result<Option<Verification>, BisectError> {
        let Some(parent) = super::git::first_parent(self.checkout, &culprit.commit).map_err(BisectError::Git)? else {
            return Ok(None);
        };
        let mut v = Verification {
            runs: n,
            parent: parent.clone(),
            culprit_as_expected: 0,
            culprit_contrary: 0,
            parent_as_expected: 0,
            parent_contrary: 0,
        };
        for _ in 0..n {
            let p = self.evaluate(Role::VerifyParent, &parent, 1, runs).await?;
            match mark_of(&p.seen, direction) {
                Mark::Good => v.parent_as_expected += 1,
                Mark::Bad => v.parent_contrary += 1,
                Mark::Skip => {}
            }
            runs.evaluations.push(p);
            let k = self.evaluate(Role::VerifyCulprit, culprit, 1, runs).await?;
            match mark_of(&k.seen, direction) {
                Mark::Bad => v.culprit_as_expected += 1,
                Mark::Good => v.culprit_contrary += 1,
                Mark::Skip => {}
            }
            runs.evaluations.push(k);
        }
        Ok(Some(v))
    }

    /// Counts the runs that agree with the culprit and sets the confidence.
    fn judge_confidence(&self, o: &mut Outcome) -> Result<(), BisectError> {
        let Some(culprit) = &o.culprit else { return Ok(()) };
        let mut skips = false;
        for e in &o.evaluations {
            let mark = e.mark.unwrap_or_else(|| mark_of(&e.seen, o.direction));
            if mark == Mark::Skip {
                skips |= e.role == Role::Step;
                continue;
            }
            let predicted_bad =
                super::git::is_ancestor(self.checkout, &culprit.commit, &e.commit.commit).map_err(BisectError::Git)?;
            o.decided += 1;
            if predicted_bad == (mark == Mark::Bad) {
                o.agreeing += 1;
            }
        }
        o.confidence = Some(match &o.verification {
            Some(v) if v.verified() && v.unanimous() && o.agreeing == o.decided && !skips => Confidence::High,
            Some(v) if v.verified() => Confidence::Medium,
            // `--verify 0`: nothing verified it.
            _ => Confidence::Low,
        });
        Ok(())
    }

    /// Runs `commit` for `role` until its verdict is decided or `max_runs` runs were
    /// made (the values pooled), or once when it can't be judged.
    async fn evaluate(
        &mut self,
        role: Role,
        commit: &TreeCommit,
        max_runs: u32,
        runs: &mut Runs,
    ) -> Result<Evaluation, BisectError> {
        let policy = VerdictPolicy { looks: self.policy.looks.max(max_runs), ..self.policy };
        let (mut candidate, mut baseline) = (Vec::new(), Vec::new());
        let mut folders = Vec::new();
        for attempt in 1..=max_runs.max(1) {
            let (judgement, run_dir) = self.run(role, commit, &mut runs.next_run).await?;
            folders.extend(run_dir);
            let (seen, words, comparison) = match judgement {
                Judgement::Measured { candidate: c, baseline: b } => {
                    candidate.extend(c);
                    baseline.extend(b);
                    let cmp = compare(
                        &oriented(self.better, candidate.clone()),
                        &oriented(self.better, baseline.clone()),
                        &policy,
                    );
                    match cmp {
                        None => (Seen::Failed("no comparison: a value is 0 or not finite".into()), String::new(), None),
                        Some(cmp) => {
                            let seen = match cmp.verdict {
                                Verdict::Slower { .. } => Seen::Changed(Direction::Slower),
                                Verdict::Faster { .. } => Seen::Changed(Direction::Faster),
                                Verdict::Same => Seen::Same,
                                Verdict::Undecided => Seen::Undecided,
                            };
                            (seen, cmp.verdict.to_string(), Some(cmp))
                        }
                    }
                }
                Judgement::Outcome { differs: true, words } => {
                    (Seen::Changed(Direction::Different), format!("different outcome ({words})"), None)
                }
                Judgement::Outcome { differs: false, words } => (Seen::Same, format!("same outcome ({words})"), None),
                Judgement::BuildFailed { error } => {
                    (Seen::Failed(format!("build failed: {error}")), String::new(), None)
                }
                Judgement::BootFailed { error } => (Seen::Failed(format!("boot failed: {error}")), String::new(), None),
                Judgement::NoValues { why } => (Seen::Failed(format!("no values: {why}")), String::new(), None),
            };
            let words = match &seen {
                Seen::Failed(why) => why.clone(),
                _ => words,
            };
            if seen != Seen::Undecided || attempt >= max_runs {
                let median = |xs: &[f64]| crate::measure::stats::summarize(xs).map(|s| s.median);
                let e = Evaluation {
                    role,
                    commit: commit.clone(),
                    seen,
                    words,
                    comparison,
                    median: median(&candidate),
                    baseline_median: median(&baseline),
                    mark: None,
                    runs: folders,
                };
                (self.say)(&format!(
                    "bisect: {} {} ({}): {}{}",
                    role.words(),
                    short(&commit.commit),
                    commit.describe,
                    first_line(&e.words),
                    if e.runs.len() > 1 { format!(" (values of {} runs)", e.runs.len()) } else { String::new() }
                ));
                return Ok(e);
            }
            (self.say)(&format!(
                "bisect: {} {}: undecided after {attempt} run(s); running it again",
                role.words(),
                short(&commit.commit)
            ));
        }
        unreachable!("the last attempt returns")
    }

    /// One run of `commit` for `role`: the next recorded run when resuming (which must
    /// be this one), else a new one into `runs/NN-<role>-<commit>` (recorded in
    /// `bisect.json` before this returns).
    async fn run(
        &mut self,
        role: Role,
        commit: &TreeCommit,
        replay: &mut usize,
    ) -> Result<(Judgement, Option<String>), BisectError> {
        if let Some(r) = self.state.runs.get(*replay) {
            if r.role != role || r.commit.commit != commit.commit {
                return Err(BisectError::Resume(format!(
                    "run {} of {} is {} {}, but this bisect now runs {} {} (the tree or the suite's results changed?); give another --dir to start over",
                    *replay + 1,
                    self.dir.join(super::state::STATE_FILE).display(),
                    r.role.words(),
                    short(&r.commit.commit),
                    role.words(),
                    short(&commit.commit)
                )));
            }
            *replay += 1;
            return Ok((r.judgement.clone(), r.run_dir.clone()));
        }
        let rel = format!(
            "runs/{:02}-{}-{}",
            self.state.runs.len() + 1,
            role.words().replace(' ', "-"),
            short(&commit.commit)
        );
        let run_dir: PathBuf = self.dir.join(&rel);
        // A folder left by an interrupted run of this number: ours, inside the bisect
        // folder, and never recorded.
        if std::fs::symlink_metadata(&run_dir).is_ok_and(|m| m.is_dir()) {
            std::fs::remove_dir_all(&run_dir)
                .map_err(|e| BisectError::Io(format!("removing {}: {e}", run_dir.display())))?;
        }
        let judgement = self.judge.judge(commit, &run_dir).await?;
        let ran = std::fs::symlink_metadata(&run_dir).is_ok_and(|m| m.is_dir());
        let entry =
            RunEntry { role, commit: commit.clone(), run_dir: ran.then(|| rel.clone()), judgement: judgement.clone() };
        self.state.runs.push(entry);
        *replay += 1;
        self.state.write(self.dir)?;
        Ok((judgement, ran.then_some(rel)))
    }
}

/// What a bisect has done so far: its evaluations, and the index in `bisect.json` of
/// its next run (a recorded run at that index is replayed, not run).
#[derive(Debug, Default)]
struct Runs {
    evaluations: Vec<Evaluation>,
    next_run: usize,
}

/// What `seen` makes of a commit when the bad direction is `direction`.
pub fn mark_of(seen: &Seen, direction: Direction) -> Mark {
    match seen {
        Seen::Changed(d) if *d == direction => Mark::Bad,
        Seen::Changed(_) | Seen::Same => Mark::Good,
        Seen::Undecided | Seen::Failed(_) => Mark::Skip,
    }
}

/// The first 12 digits of a commit id.
pub fn short(commit: &str) -> &str {
    &commit[..commit.len().min(12)]
}

/// The first line of `s` (a build error's log tail follows it).
fn first_line(s: &str) -> &str {
    s.lines().next().unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bisect::git::tests::linear;
    use crate::bisect::state::Question;
    use crate::schema::measure::Rule;
    use std::collections::BTreeMap;

    /// A judge from a table: commit → what its runs show in turn (the last one
    /// repeats; `default` for commits not in the table), interrupted once
    /// `stop_after` runs were made.
    struct Table {
        shows: BTreeMap<String, Vec<Judgement>>,
        default: Judgement,
        calls: Vec<String>,
        stop_after: Option<usize>,
    }

    impl Table {
        /// Commits from `ids[culprit]` on take 3 s, the others 1 s, the baseline 1 s.
        fn culprit_at(ids: &[String], culprit: usize) -> Table {
            let shows = ids[culprit..].iter().map(|id| (id.clone(), vec![measured(&[3.0], &[1.0])])).collect();
            Table { shows, default: measured(&[1.0], &[1.0]), calls: Vec::new(), stop_after: None }
        }
    }

    impl Judge for Table {
        async fn judge(&mut self, commit: &TreeCommit, run_dir: &Path) -> Result<Judgement, BisectError> {
            if self.stop_after == Some(self.calls.len()) {
                return Err(BisectError::Interrupted);
            }
            let n = self.calls.iter().filter(|c| **c == commit.commit).count();
            self.calls.push(commit.commit.clone());
            std::fs::create_dir_all(run_dir).unwrap();
            Ok(match self.shows.get(&commit.commit) {
                Some(list) => list[n.min(list.len() - 1)].clone(),
                None => self.default.clone(),
            })
        }
    }

    fn measured(c: &[f64], b: &[f64]) -> Judgement {
        Judgement::Measured { candidate: c.to_vec(), baseline: b.to_vec() }
    }

    fn question(repo: &Path, good: &str, bad: &str, verify: u32) -> Question {
        let r = |id: &str| crate::infra::images::tree::resolve_rev(repo, id).unwrap();
        Question {
            suite: "s".into(),
            suite_sha256: "0".repeat(64),
            vm: "new".into(),
            measurement: "m".into(),
            metric: "elapsed_s".into(),
            baseline: "old".into(),
            tree: "t".into(),
            good: r(good),
            bad: r(bad),
            verify,
            max_runs: 3,
        }
    }

    const RANGES: VerdictPolicy = VerdictPolicy { rule: Rule::Ranges, alpha: 0.01, floor: 0.10, looks: 1 };
    const MANN_WHITNEY: VerdictPolicy = VerdictPolicy { rule: Rule::MannWhitney, alpha: 0.01, floor: 0.10, looks: 1 };

    /// Runs a bisect of `state` in `dir` with `judge` to its end.
    fn bisect(
        repo: &Path,
        dir: &Path,
        state: State,
        judge: &mut Table,
        policy: VerdictPolicy,
    ) -> Result<Outcome, BisectError> {
        let say = |_: &str| {};
        let engine = Engine { checkout: repo, dir, policy, better: Better::Lower, judge, state, say: &say };
        tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(engine.bisect())
    }

    #[test]
    fn the_culprit_is_found_verified_and_its_log_replays_in_git() {
        let (repo, ids) = linear(9);
        let dir = tempfile::tempdir().unwrap();
        let mut judge = Table::culprit_at(&ids, 5);
        let q = question(repo.path(), &ids[0], &ids[8], 2);
        let o = bisect(repo.path(), dir.path(), State::new(q.clone()), &mut judge, RANGES).unwrap();
        assert_eq!(o.direction, Direction::Slower);
        assert_eq!(o.culprit.as_ref().unwrap().commit, ids[5]);
        let v = o.verification.clone().unwrap();
        assert_eq!((v.parent.commit.as_str(), v.culprit_as_expected, v.parent_as_expected), (ids[4].as_str(), 2, 2));
        assert!(v.verified() && v.unanimous());
        assert_eq!(o.confidence, Some(Confidence::High));
        assert_eq!(o.agreeing, o.decided);
        // Endpoints, at most ceil(log2 8) = 3 steps, 2 × 2 verification runs.
        let steps = o.evaluations.iter().filter(|e| e.role == Role::Step).count();
        assert!((2..=3).contains(&steps), "{steps} steps");
        assert_eq!(judge.calls.len(), 2 + steps + 4);
        assert_eq!(judge.calls[..2], [ids[8].clone(), ids[0].clone()]);
        // bisect.json holds every run, in order.
        let saved = State::read(dir.path()).unwrap().unwrap();
        assert_eq!(saved.runs.len(), judge.calls.len());
        assert!(saved.runs.iter().all(|r| r.run_dir.as_deref().is_some_and(|d| dir.path().join(d).is_dir())));
        // git itself reaches the same first bad commit from our log.
        let log = crate::bisect::report::log(&q, &o);
        std::fs::write(dir.path().join("bisect.log"), &log).unwrap();
        let out = std::process::Command::new("git")
            .args(["bisect", "replay"])
            .arg(dir.path().join("bisect.log"))
            .current_dir(repo.path())
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains(&format!("{} is the first bad commit", ids[5])), "{text}\n{log}");
        let report = crate::bisect::report::markdown(&q, &o, "vmrepro bisect …");
        assert!(report.contains(&format!("#regzbot introduced: {}", &ids[5][..12])), "{report}");
        assert!(report.contains("+200.0% regression of m.elapsed_s"), "{report}");
    }

    #[test]
    fn an_interrupted_bisect_resumes_without_running_a_recorded_run_again() {
        let (repo, ids) = linear(9);
        let whole = tempfile::tempdir().unwrap();
        let q = question(repo.path(), &ids[0], &ids[8], 1);
        let mut all = Table::culprit_at(&ids, 3);
        let expected = bisect(repo.path(), whole.path(), State::new(q.clone()), &mut all, RANGES).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let mut first = Table { stop_after: Some(3), ..Table::culprit_at(&ids, 3) };
        let e = bisect(repo.path(), dir.path(), State::new(q.clone()), &mut first, RANGES).unwrap_err();
        assert!(matches!(e, BisectError::Interrupted), "{e}");
        // A leftover run folder of the interrupted run is replaced.
        std::fs::create_dir_all(dir.path().join("runs/04-step-leftover")).unwrap();
        let saved = State::read(dir.path()).unwrap().unwrap();
        assert_eq!(saved.runs.len(), 3);
        let mut rest = Table::culprit_at(&ids, 3);
        let resumed = bisect(repo.path(), dir.path(), saved, &mut rest, RANGES).unwrap();
        assert_eq!(rest.calls, all.calls[3..]);
        assert_eq!(resumed.culprit, expected.culprit);
        assert_eq!(resumed.evaluations.len(), expected.evaluations.len());
        // A state that another search made is refused, naming the run that differs.
        let mut other = State::read(dir.path()).unwrap().unwrap();
        other.runs[2].commit = other.runs[0].commit.clone();
        let e = bisect(repo.path(), dir.path(), other, &mut Table::culprit_at(&ids, 3), RANGES).unwrap_err();
        assert!(matches!(e, BisectError::Resume(_)) && e.to_string().contains("run 3 of"), "{e}");
    }

    #[test]
    fn a_commit_that_does_not_build_is_skipped_and_only_skipped_ones_left_are_said() {
        let (repo, ids) = linear(6);
        let dir = tempfile::tempdir().unwrap();
        let mut judge = Table::culprit_at(&ids, 3);
        for i in [2, 3] {
            judge
                .shows
                .insert(ids[i].clone(), vec![Judgement::BuildFailed { error: "make: *** [Makefile] Error 2".into() }]);
        }
        let q = question(repo.path(), &ids[0], &ids[5], 2);
        let o = bisect(repo.path(), dir.path(), State::new(q.clone()), &mut judge, RANGES).unwrap();
        assert_eq!(o.culprit, None);
        let possible: Vec<&str> = o.possible.iter().map(|c| c.commit.as_str()).collect();
        assert!(possible.contains(&ids[3].as_str()) && possible.contains(&ids[2].as_str()), "{possible:?}");
        assert!(o.evaluations.iter().any(|e| e.mark == Some(Mark::Skip) && e.words.starts_with("build failed: make")));
        let log = crate::bisect::report::log(&q, &o);
        assert!(log.contains("# only skipped commits left to test") && log.contains("git bisect skip"), "{log}");
        assert!(!crate::bisect::report::markdown(&q, &o, "x").contains("#regzbot"));
    }

    #[test]
    fn an_undecided_commit_runs_again_with_its_values_pooled() {
        let (repo, ids) = linear(3);
        let dir = tempfile::tempdir().unwrap();
        let slow = measured(&[2.0, 2.1, 2.05], &[1.0, 1.05, 1.02]);
        let same = measured(&[1.0, 1.01, 1.02], &[1.0, 1.01, 1.02]);
        let mut judge = Table {
            shows: [(ids[2].clone(), vec![slow.clone()]), (ids[1].clone(), vec![slow])].into(),
            default: same,
            calls: Vec::new(),
            stop_after: None,
        };
        let q = question(repo.path(), &ids[0], &ids[2], 0);
        let o = bisect(repo.path(), dir.path(), State::new(q), &mut judge, MANN_WHITNEY).unwrap();
        // 3 against 3 can't reach p < 0.01 (p >= 0.10): each commit ran twice, and 6
        // against 6 decided (p = 0.002 < 0.01 / 3 runs).
        let bad_end = &o.evaluations[0];
        assert_eq!((bad_end.runs.len(), &bad_end.seen), (2, &Seen::Changed(Direction::Slower)), "{}", bad_end.words);
        assert_eq!(o.culprit.as_ref().unwrap().commit, ids[1]);
        // `--verify 0`: nothing verified it, and the report says so.
        assert_eq!(o.confidence, Some(Confidence::Low));
    }

    #[test]
    fn endpoints_that_do_not_differ_end_the_bisect_with_a_reason() {
        let (repo, ids) = linear(4);
        let q = question(repo.path(), &ids[0], &ids[3], 1);
        let mut nothing = Table::culprit_at(&ids, 4);
        let e = bisect(repo.path(), tempfile::tempdir().unwrap().path(), State::new(q.clone()), &mut nothing, RANGES)
            .unwrap_err();
        assert!(e.to_string().contains("shows no change") && e.to_string().contains("nothing to bisect"), "{e}");
        let mut all_bad = Table::culprit_at(&ids, 0);
        let e =
            bisect(repo.path(), tempfile::tempdir().unwrap().path(), State::new(q), &mut all_bad, RANGES).unwrap_err();
        assert!(e.to_string().contains("is slower too"), "{e}");
    }
}
