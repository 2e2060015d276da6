//! The preset interface: what the report asks of a built-in scenario, so that
//! `report/` renders any preset without naming one.
//!
//! A run of a suite with a preset has, besides its measurements, the preset's own plan
//! facts and results. [`Preset`] holds both (one variant per built-in scenario; today
//! `nfs_read`) and gives the report what only the preset knows: its measurement's
//! table, a section of its own facts, the differences it adds between two VMs and its
//! raw output files.

use std::path::Path;

use serde::Serialize;

use super::nfs_read;
use crate::measure::analysis::MeasurementResult;
use crate::plan::measurement::SnapshotPolicy;
use crate::plan::nfs_read::NfsPlan;

/// The facts of a run's preset, from `plan.json` and `results.json`.
#[derive(Debug, Clone, Copy)]
pub enum Preset<'a> {
    /// `nfs_read`: its plan facts (absent from plans written before they were saved)
    /// and its results.
    NfsRead {
        /// Its part of the plan.
        plan: Option<&'a NfsPlan>,
        /// Its results.
        results: &'a nfs_read::results::NfsResults,
    },
}

/// A section of the preset's own facts in the published report: a title, a table (as
/// preformatted text) and paragraphs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PresetSection {
    /// Section title.
    pub title: String,
    /// Preformatted table text.
    pub table: String,
    /// Paragraphs below the table.
    pub paragraphs: Vec<String>,
}

/// A preset's part of a snapshot (under its name in the snapshot file), one variant per
/// built-in scenario.
#[derive(Debug, Serialize)]
#[serde(untagged)]
pub enum PresetSnapshot {
    /// `nfs_read`'s facts (see [`nfs_read::snapshot`]).
    NfsRead(nfs_read::snapshot::NormNfs),
}

/// One raw output file of an iteration, with its caption.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawOutput {
    /// What the file holds, and its path in the run folder.
    pub caption: String,
    /// Its text.
    pub text: String,
}

impl Preset<'_> {
    /// The scenario's name, as in [`MeasurementResult::preset`].
    pub fn name(&self) -> &'static str {
        match self {
            Preset::NfsRead { .. } => nfs_read::SCENARIO,
        }
    }

    /// Whether measurement `m` is the preset's own.
    pub fn owns(&self, m: &MeasurementResult) -> bool {
        m.preset.as_deref() == Some(self.name())
    }

    /// The table of the preset's measurement `m`, in the preset's layout.
    pub fn table(&self, m: &MeasurementResult) -> String {
        match self {
            Preset::NfsRead { results, .. } => nfs_read::results::table(results, m),
        }
    }

    /// The section of the preset's own facts (`nfs_read`: the server and the mounts).
    pub fn section(&self) -> PresetSection {
        match self {
            Preset::NfsRead { plan, results } => nfs_read::report::mounts_section(*plan, results),
        }
    }

    /// What the preset adds to the differences between VMs `base` and `cand`
    /// (`nfs_read`: the mount options asked for and negotiated).
    pub fn differences(&self, base: &str, cand: &str) -> Vec<String> {
        match self {
            Preset::NfsRead { plan, results } => nfs_read::report::differences(*plan, results, base, cand),
        }
    }

    /// What a snapshot keeps of the preset's facts and of its measurement `m`, whose
    /// verdicts are kept as `policy` says.
    pub fn snapshot(&self, m: &MeasurementResult, policy: &SnapshotPolicy) -> PresetSnapshot {
        match self {
            Preset::NfsRead { results, .. } => {
                PresetSnapshot::NfsRead(nfs_read::snapshot::normalise(results, m, policy))
            }
        }
    }

    /// The preset's own raw output of iteration `iteration` of `vm` in the run folder
    /// `dir`, when it wrote one (`nfs_read`: `nfs/<vm>/read-<N>.txt`).
    pub fn raw_output(&self, dir: &Path, m: &MeasurementResult, vm: &str, iteration: u32) -> Option<RawOutput> {
        match self {
            Preset::NfsRead { .. } if self.owns(m) => nfs_read::report::raw_output(dir, &m.name, vm, iteration),
            Preset::NfsRead { .. } => None,
        }
    }
}
