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
//! vms[]          (VMs given a profile, packages, sysctl or files) vm, profile {name, params
//!                {exports [{path, options}], nfs_versions, threads, block_size, udp}},
//!                packages[], sysctl {name: {set, in_force}}, files [{dest, bytes, mode,
//!                sha256, guest_sha256}], problems[]
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
use std::collections::BTreeMap;

use crate::plan::nfs_read::NfsPlan;
use crate::plan::{names, FilePlan, ProfilePlan};
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
    /// What each VM was given besides its kernel: profile, sysctl, files, packages
    /// (only VMs given any).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub vms: Vec<VmFacts>,
}

impl Results {
    /// Every problem of every measurement (`<measurement>: <problem>`) and of the VMs'
    /// setup (`<vm>: <problem>`).
    pub fn problems(&self) -> Vec<String> {
        self.measurements
            .iter()
            .flat_map(|m| m.problems.iter().map(move |p| format!("{}: {p}", m.name)))
            .chain(self.vms.iter().flat_map(|v| v.problems.iter().map(move |p| format!("{}: {p}", v.vm))))
            .collect()
    }
}

/// What a VM was given besides its kernel, as planned and as the guest reported it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct VmFacts {
    /// VM name.
    pub vm: String,
    /// Its profile and the parameters in force.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<ProfilePlan>,
    /// Extra packages in its rootfs (their versions: `environment.json`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub packages: Vec<String>,
    /// `sysctl:` name → the value the suite set and the value the guest printed back.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub sysctl: BTreeMap<String, SysctlFact>,
    /// Files copied in, with the SHA-256 the guest computed of what it wrote.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<FileFact>,
    /// A value not in force, a file that arrived different, a step that did not pass.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub problems: Vec<String>,
}

/// One `sysctl:` value.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SysctlFact {
    /// What the suite set.
    pub set: String,
    /// What `sysctl NAME` printed afterwards (`None`: not printed).
    pub in_force: Option<String>,
}

/// One file copied into the guest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileFact {
    /// Where it went.
    pub dest: String,
    /// Size, bytes.
    pub bytes: u64,
    /// Mode, octal text (`0644`).
    pub mode: String,
    /// SHA-256 of the host's file.
    pub sha256: String,
    /// SHA-256 of the guest's copy (`sha256sum`; `None`: the step did not run).
    pub guest_sha256: Option<String>,
}

/// What `analyse` needs of a VM in `plan.json`.
#[derive(Debug, Clone, Deserialize)]
pub struct PlanVmView {
    /// Name.
    pub name: String,
    /// Profile.
    #[serde(default)]
    pub profile: Option<ProfilePlan>,
    /// Extra packages.
    #[serde(default)]
    pub packages: Vec<String>,
    /// `sysctl:` values.
    #[serde(default)]
    pub sysctl: BTreeMap<String, String>,
    /// Files copied in.
    #[serde(default)]
    pub files: Vec<FilePlan>,
}

/// The facts of VM `v`: planned, and read back from its `sysctl` and `copy-file-*`
/// steps' outputs.
fn vm_facts(v: &PlanVmView, rec: &RunRecord, dir: &Path) -> Result<VmFacts, RunError> {
    let mut problems = Vec::new();
    let vr = rec.vm(&v.name);
    let step_out = |name: &str| -> Result<Option<String>, RunError> {
        match vr.and_then(|r| r.step(name)) {
            Some(s) if s.status == crate::run::StepStatus::Passed => Ok(Some(s.stdout_text(dir)?)),
            _ => Ok(None),
        }
    };
    let mut sysctl = BTreeMap::new();
    if !v.sysctl.is_empty() {
        let printed: BTreeMap<String, String> = step_out(names::SYSCTL)?
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.split_once(" = ").map(|(k, v)| (k.trim().to_string(), v.trim().to_string())))
            .collect();
        let words = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
        for (k, set) in &v.sysctl {
            let in_force = printed.get(k).cloned();
            match &in_force {
                None => problems.push(format!("sysctl {k}: not printed back (did the sysctl step run?)")),
                Some(now) if words(now) != words(set) => {
                    problems.push(format!("sysctl {k} is {now:?} in the guest; the suite set {set:?}"))
                }
                Some(_) => {}
            }
            sysctl.insert(k.clone(), SysctlFact { set: set.clone(), in_force });
        }
    }
    let mut files = Vec::new();
    for (n, f) in v.files.iter().enumerate() {
        let guest_sha256 =
            step_out(&names::copy_file(n + 1))?.and_then(|o| o.split_whitespace().next().map(str::to_string));
        match &guest_sha256 {
            None => problems.push(format!("{}: not copied", f.dest)),
            Some(g) if g != &f.sha256 => {
                problems.push(format!("{}: the guest's copy has SHA-256 {g}, the file {}", f.dest, f.sha256))
            }
            Some(_) => {}
        }
        files.push(FileFact {
            dest: f.dest.clone(),
            bytes: f.bytes,
            mode: format!("{:04o}", f.mode),
            sha256: f.sha256.clone(),
            guest_sha256,
        });
    }
    Ok(VmFacts {
        vm: v.name.clone(),
        profile: v.profile.clone(),
        packages: v.packages.clone(),
        sysctl,
        files,
        problems,
    })
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
    let mut vms = Vec::new();
    for v in &plan.vms {
        if v.profile.is_some() || !v.packages.is_empty() || !v.sysctl.is_empty() || !v.files.is_empty() {
            vms.push(vm_facts(v, &record, dir)?);
        }
    }
    let results = Results { schema: RESULTS_SCHEMA, suite: plan.suite.clone(), measurements, nfs_read: nfs, vms };
    write_json(&dir.join(RESULTS_FILE), &results)?;
    Ok(Analysis { dir: dir.to_path_buf(), plan, record, results })
}
