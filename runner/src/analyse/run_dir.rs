//! [`analyse_dir`]: a run folder → its [`Analysis`] and `results.json`.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::results::{Results, RESULTS_FILE, RESULTS_SCHEMA};
use super::vm_facts::{vm_facts, PlanVmView};
use crate::measure::analysis;
use crate::path_io::Folder;
use crate::plan::measurement::MeasurementPlan;
use crate::plan::nfs_read::NfsPlan;
use crate::run::record::{read_json_in, read_record, write_json, RunDirError, RunRecord, StepRecord};
use crate::run::{PLAN_FILE, RUN_FILE};
use crate::scenarios::nfs_read;

/// What `analyse` needs of `plan.json` (the rest of the plan is there for people).
#[derive(Debug, Clone, Deserialize)]
pub struct PlanView {
    /// Suite name.
    pub suite: String,
    /// Measurements with their iterations.
    pub measurements: Vec<MeasurementPlan>,
    /// The `nfs_read` preset's facts.
    pub nfs_read: Option<NfsPlan>,
    /// The VMs.
    #[serde(default)]
    pub vms: Vec<PlanVmView>,
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
    pub fn stdout(&self, step: &StepRecord) -> Result<String, RunDirError> {
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
    RunDir(#[from] RunDirError),
}

/// Analyses the run folder `dir` and writes `results.json` (and the `nfs_read`
/// report-layout files) into it. Reads nothing but the folder (no link followed, every
/// file bounded, step outputs only inside it).
///
/// Errors: [`AnalyseError::NotARunFolder`] without `plan.json`/`run.json`;
/// [`AnalyseError::RunDir`] when a file can't be read, parsed or written, or `run.json`
/// has another schema than [`crate::run::record::RUN_SCHEMA`].
pub fn analyse_dir(dir: &Path) -> Result<Analysis, AnalyseError> {
    let a = analyse_with(dir, true)?;
    write_json(&dir.join(RESULTS_FILE), &a.results)?;
    Ok(a)
}

/// [`analyse_dir`] without writing anything (for `compare`, which only reads).
///
/// Errors: as [`analyse_dir`].
pub fn analyse_read_only(dir: &Path) -> Result<Analysis, AnalyseError> {
    analyse_with(dir, false)
}

fn analyse_with(dir: &Path, write: bool) -> Result<Analysis, AnalyseError> {
    let folder = Folder::open(dir).map_err(RunDirError::from)?;
    for missing in [PLAN_FILE, RUN_FILE] {
        // Only a missing file makes it "not a run folder"; a link or pipe in its place
        // is refused by the read below, by name.
        if matches!(folder.kind(missing), Ok(None)) {
            return Err(AnalyseError::NotARunFolder { dir: dir.to_path_buf(), missing });
        }
    }
    let plan: PlanView = read_json_in(&folder, PLAN_FILE)?;
    let record: RunRecord = read_record(dir)?;
    let mut measurements = Vec::new();
    let mut nfs = None;
    for m in &plan.measurements {
        let r = analysis::analyse(m, &record, dir)?;
        if let (Some(p), Some(nfs_read::SCENARIO)) = (&plan.nfs_read, m.preset.as_deref()) {
            nfs = Some(nfs_read::results::analyse(p, m, &r, &record, dir, write)?);
        }
        measurements.push(r);
    }
    let mut vms = Vec::new();
    for v in &plan.vms {
        if v.profile.is_some() || !v.packages.is_empty() || !v.sysctl.is_empty() || !v.files.is_empty() {
            vms.push(vm_facts(v, &record, dir)?);
        }
    }
    let results = Results { schema: RESULTS_SCHEMA, suite: plan.suite.clone(), measurements, nfs_read: nfs, vms };
    Ok(Analysis { dir: dir.to_path_buf(), plan, record, results })
}
