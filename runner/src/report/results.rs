//! `results.json` (schema 2) and the analysis of a whole run folder.
//!
//! [`analyse_dir`] is a pure function of a run folder: it reads `plan.json` (the
//! compiled plan), `run.json` (what happened) and the step outputs they name, analyses
//! every measurement ([`crate::measure::analysis`]) and the `nfs_read` preset's own
//! facts ([`crate::scenarios::nfs_read::results`]), and writes `results.json` and the
//! report-layout files. `vmrepro run` calls it at the end of a run; `vmrepro analyse
//! RUN_DIR` calls it again on any finished run, with no VM.
//!
//! # `results.json`, schema 2
//!
//! ```text
//! schema         2
//! suite          suite name
//! measurements[] one per measurement (the nfs_read preset's is named "nfs-read"):
//!   name, preset ("nfs_read" or absent), metric ("elapsed_s", …), better ("lower"|"higher"),
//!   baseline     VM name
//!   vms[]        vm, kernel_release (uname -r in the guest),
//!                metric / elapsed_s: {n, min, max, median, mean, cv} over counted iterations,
//!                median_mb_s, ratio_to_baseline, comparison {candidate, baseline,
//!                median_ratio, ranges_overlap, verdict {verdict: same|slower|faster, low, high}},
//!                verdict (words), totals {derived metric: sum or null}, exit_statuses[],
//!     iterations[] iteration, step, status, exit_status, elapsed_s, user_s, system_s,
//!                bytes, throughput_mb_s (MB = 10^6 bytes), metrics {derived: delta or null},
//!                changed_counters {name: delta}, appeared_counters {name: value},
//!                remote [{vm, observer, sent_packets, dropped_packets}],
//!                records {name: trimmed text}, counted
//!   problems[]   failed checks, unreadable outputs, unexpected exit statuses
//! nfs_read       (suites with nfs_read) server {vm, kernel_release, profile {key: value}},
//!                file_bytes, baseline, clients [{vm, mount {nfs_version, transport, rsize,
//!                wsize, read_ahead_kb, options}, reads [{iteration, raw, mount, rpc_read
//!                {ops, transmissions, major_timeouts, bytes_sent, bytes_received, queue_ms,
//!                rtt_ms, execute_ms, errors}}]}], notes[]
//! ```
//!
//! Schema 1 (before measurements existed) had one `clients[]` list with fixed metric
//! fields; its numbers are the `nfs-read` measurement's, field for field:
//! `clients[].reads[].metrics.<derived>` → `iterations[].metrics.<derived>`,
//! `reads[].netem` → `iterations[].remote`, `reads[].rpc_read` → `nfs_read.clients[].reads[].rpc_read`.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::measure::analysis::{self, MeasurementResult};
use crate::plan::measurement::MeasurementPlan;
use crate::plan::nfs_read::NfsPlan;
use crate::run::record::{read_json, write_json, RunRecord, StepRecord};
use crate::run::{RunError, PLAN_FILE, RUN_FILE};
use crate::scenarios::nfs_read;

/// `results.json`'s schema version.
pub const RESULTS_SCHEMA: u32 = 2;
/// Name of the results in a run folder.
pub const RESULTS_FILE: &str = "results.json";

/// `results.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Results {
    /// [`RESULTS_SCHEMA`].
    pub schema: u32,
    /// Suite name.
    pub suite: String,
    /// Every measurement.
    pub measurements: Vec<MeasurementResult>,
    /// The `nfs_read` preset's facts.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nfs_read: Option<nfs_read::results::NfsResults>,
}

impl Results {
    /// Every problem of every measurement, `<measurement>: <problem>`.
    pub fn problems(&self) -> Vec<String> {
        self.measurements.iter().flat_map(|m| m.problems.iter().map(move |p| format!("{}: {p}", m.name))).collect()
    }
}

/// What `analyse` needs of `plan.json` (the rest of the plan is there for people).
#[derive(Debug, Clone, Deserialize)]
pub struct PlanView {
    /// Suite name.
    pub suite: String,
    /// Measurements with their iterations.
    pub measurements: Vec<MeasurementPlan>,
    /// The `nfs_read` preset's facts.
    pub nfs_read: Option<NfsPlan>,
}

/// A run folder, analysed.
#[derive(Debug)]
pub struct Analysis {
    /// The run folder.
    pub dir: PathBuf,
    /// Its `plan.json`.
    pub plan: PlanView,
    /// Its `run.json`.
    pub record: RunRecord,
    /// Its results (also written as `results.json`).
    pub results: Results,
}

impl Analysis {
    /// The stdout of `step` (empty when it has none), for the snapshot of `snapshot: true` steps.
    ///
    /// Errors: the file is named but can't be read.
    pub fn stdout(&self, step: &StepRecord) -> Result<String, RunError> {
        step.stdout_text(&self.dir)
    }
}

/// Errors of [`analyse_dir`].
#[derive(Debug, thiserror::Error)]
pub enum AnalyseError {
    /// The folder lacks `plan.json` or `run.json`.
    #[error("{} is not a run folder of this vmrepro: {missing} is missing (run folders of vmrepro before run.json schema 2 have no plan.json)", dir.display())]
    NotARunFolder {
        /// The folder.
        dir: PathBuf,
        /// The missing file.
        missing: &'static str,
    },
    /// A file couldn't be read, parsed or written.
    #[error(transparent)]
    Run(#[from] RunError),
}

/// Analyses the run folder `dir` and writes `results.json` (and the `nfs_read`
/// report-layout files) into it. Reads nothing but the folder.
///
/// Errors: [`AnalyseError::NotARunFolder`] without `plan.json`/`run.json`;
/// [`AnalyseError::Run`] when a file can't be read, parsed or written.
pub fn analyse_dir(dir: &Path) -> Result<Analysis, AnalyseError> {
    for missing in [PLAN_FILE, RUN_FILE] {
        if !dir.join(missing).is_file() {
            return Err(AnalyseError::NotARunFolder { dir: dir.to_path_buf(), missing });
        }
    }
    let plan: PlanView = read_json(&dir.join(PLAN_FILE))?;
    let record: RunRecord = read_json(&dir.join(RUN_FILE))?;
    let mut measurements = Vec::new();
    let mut nfs = None;
    for m in &plan.measurements {
        let r = analysis::analyse(m, &record, dir)?;
        if let (Some(p), Some(nfs_read::SCENARIO)) = (&plan.nfs_read, m.preset.as_deref()) {
            nfs = Some(nfs_read::results::analyse(p, m, &r, &record, dir)?);
        }
        measurements.push(r);
    }
    let results = Results { schema: RESULTS_SCHEMA, suite: plan.suite.clone(), measurements, nfs_read: nfs };
    write_json(&dir.join(RESULTS_FILE), &results)?;
    Ok(Analysis { dir: dir.to_path_buf(), plan, record, results })
}
