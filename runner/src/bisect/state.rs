//! The bisect folder's memory, `bisect.json`: what was asked (suite, VM, measurement,
//! the good and bad commits, the settings) and every run so far with what it showed.
//! It is written after every run (temp file and rename, through
//! [`crate::path_io::Folder`]), so an interrupted bisect resumes: the search is a pure
//! function of the runs' results, and on resume [`super::engine`] replays the recorded
//! ones instead of running them again.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::infra::images::tree::TreeCommit;
use crate::run::record::{read_json, write_json, RunDirError};

/// `bisect.json`'s schema version.
pub const BISECT_SCHEMA: u32 = 1;
/// The state file's name in the bisect folder.
pub const STATE_FILE: &str = "bisect.json";

/// What a bisect was asked to do: a resumed bisect must be asked the same.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Question {
    /// The suite's name.
    pub suite: String,
    /// SHA-256 of the suite file's bytes.
    pub suite_sha256: String,
    /// The VM whose kernel is bisected.
    pub vm: String,
    /// The measurement whose verdict decides.
    pub measurement: String,
    /// Its verdict metric (`elapsed_s`, `outcome`, …).
    pub metric: String,
    /// The baseline VM the bisected VM is compared with.
    pub baseline: String,
    /// The tree's short name.
    pub tree: String,
    /// The commit known good.
    pub good: TreeCommit,
    /// The commit known bad.
    pub bad: TreeCommit,
    /// Runs of the culprit and of its parent each, to verify it (`--verify`).
    pub verify: u32,
    /// Runs at most per commit while its verdict is undecided (`--max-runs`).
    pub max_runs: u32,
}

/// Why a commit was run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// `--bad`, run first: its verdict gives the direction that counts as bad.
    BadEndpoint,
    /// `--good`, run second: it must not show that direction.
    GoodEndpoint,
    /// A commit git picked between them.
    Step,
    /// The culprit, run again to verify it.
    VerifyCulprit,
    /// The culprit's parent, run again to verify the culprit.
    VerifyParent,
}

impl Role {
    /// In words, for tables and progress lines.
    pub fn words(self) -> &'static str {
        match self {
            Role::BadEndpoint => "bad endpoint",
            Role::GoodEndpoint => "good endpoint",
            Role::Step => "step",
            Role::VerifyCulprit => "verify culprit",
            Role::VerifyParent => "verify parent",
        }
    }
}

/// What one run showed of the bisected VM against its baseline.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Judgement {
    /// The verdict metric's values over the counted iterations (as measured, not
    /// oriented), the VM's and its baseline's.
    Measured {
        /// The bisected VM's values.
        candidate: Vec<f64>,
        /// The baseline VM's values.
        baseline: Vec<f64>,
    },
    /// `compare: outcome`: whether the VM's outcomes differed from its baseline's, and
    /// the VM's outcomes in words (`exit 32 ×3`).
    Outcome {
        /// The outcomes differ.
        differs: bool,
        /// The VM's outcomes.
        words: String,
    },
    /// The kernel did not build (`git bisect skip`); the build's error.
    BuildFailed {
        /// The error, with the build log's tail.
        error: String,
    },
    /// The VM did not boot or its agent never answered (`git bisect skip`).
    BootFailed {
        /// The run's error.
        error: String,
    },
    /// The VM booted but gave no value of the metric (`git bisect skip`).
    NoValues {
        /// Why (`3 of 3 iterations failed (timed out ×3)`).
        why: String,
    },
}

/// One run of the suite for a commit (or the build that stopped it).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunEntry {
    /// Why the commit was run.
    pub role: Role,
    /// The commit.
    pub commit: TreeCommit,
    /// Its run folder, relative to the bisect folder (absent when the build failed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_dir: Option<String>,
    /// What it showed.
    pub judgement: Judgement,
}

/// `bisect.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct State {
    /// [`BISECT_SCHEMA`].
    pub schema: u32,
    /// What was asked.
    pub question: Question,
    /// Every run, in the order they ran.
    pub runs: Vec<RunEntry>,
}

impl State {
    /// A new bisect's state.
    pub fn new(question: Question) -> Self {
        State { schema: BISECT_SCHEMA, question, runs: Vec::new() }
    }

    /// The state in bisect folder `dir`, if it has one.
    ///
    /// Errors: it can't be read (a link, too large, not JSON), or is of another schema.
    pub fn read(dir: &Path) -> Result<Option<Self>, RunDirError> {
        let path = dir.join(STATE_FILE);
        if std::fs::symlink_metadata(&path).is_err() {
            return Ok(None);
        }
        let s: State = read_json(&path)?;
        if s.schema != BISECT_SCHEMA {
            let message = format!("schema {}; this vmrepro reads bisect.json schema {BISECT_SCHEMA} only", s.schema);
            return Err(RunDirError::Json { path, message });
        }
        Ok(Some(s))
    }

    /// Writes it into bisect folder `dir`.
    ///
    /// Errors: as [`write_json`].
    pub fn write(&self, dir: &Path) -> Result<(), RunDirError> {
        write_json(&dir.join(STATE_FILE), self)
    }
}
