//! `results.json`, schema 5: the analysed results of a run folder.
//!
//! # Schema
//!
//! ```text
//! schema         5
//! suite          suite name
//! measurements[] one per measurement (the nfs_read preset's is named "nfs-read"):
//!   name, preset ("nfs_read" or absent), metric ("elapsed_s", …), better ("lower"|"higher"),
//!   baseline     VM name (with groups: the first group's)
//!   groups[]     (measurements with `baseline: {axis, value}`) name, baseline, vms[]: each
//!                group's VMs are compared with its own baseline
//!   vms[]        vm, kernel_release (uname -r in the guest),
//!                metric / elapsed_s: {n, min, max, median, mean, cv} over counted iterations,
//!                median_mb_s, ratio_to_baseline, comparison {candidate, baseline,
//!                median_ratio, ranges_overlap, verdict {verdict: same|slower|faster|undecided,
//!                low, high}, policy {rule: mann_whitney|ranges, alpha, floor (a fraction)},
//!                test {p_value, min_p_value, ratio (Hodges–Lehmann, candidate ÷ baseline),
//!                confidence, interval [low, high] or null}, detectable {kind: change,
//!                change (a fraction), by_floor} | {kind: too_few_repeats},
//!                calibrated (with `calibrate: true`: the same as detectable, from the
//!                noise of the baseline's A/A pair)},
//!                verdict (words), totals {derived metric: sum or null}, exit_statuses[],
//!     iterations[] iteration, step, status, exit_status, elapsed_s (the guest clock's
//!                seconds of `run`, else GNU time's), gnu_time_elapsed_s, clock
//!                {guest_start_ns, guest_end_ns, host_start_s, host_end_s}, user_s, system_s,
//!                bytes, throughput_mb_s (MB = 10^6 bytes), metrics {derived: delta or null},
//!                changed_counters {name: delta}, appeared_counters {name: value},
//!                wire {wire.* counter: count or ms} (VMs with a capture: the frames of
//!                the iteration's step, see docs/src/wire.md), remote [{vm, observer, sent_packets, dropped_packets}],
//!                records {name: trimmed text}, counted
//!   rounds[]     (concurrent measurements) round, iterations, start_spread_s, overlap_s,
//!                longest_s, overlap (a fraction of the longest `run`)
//!   calibration  (measurements with `calibrate: true`) the baseline's A/A copy as a
//!                vms[] entry (vm: the baseline's name), its comparison with the baseline
//!                and verdict (`same` unless the run is too noisy to trust)
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
//! Schema 5 added `measurements[].calibration` and `comparison.calibrated` (absent
//! without `calibrate: true`), `iterations[].wire` (with a capture),
//! `iterations[].gnu_time_elapsed_s`, `iterations[].clock` and `measurements[].rounds`,
//! with `elapsed_s` from the guest clock when there is one. Each is absent in older
//! results, so schema 4 results read as schema 5 unchanged.
//!
//! Schema 4 added `measurements[].groups` (absent without them, so schema 3 results read
//! as schema 4 unchanged).
//!
//! Schema 3 added `comparison.policy`, `comparison.test`, `comparison.detectable` and
//! the verdict `undecided` (the Mann–Whitney rule of [`crate::measure::verdict`]);
//! schema 2 results read as schema 3 with the ranges rule and no test.
//!
//! Schema 1 (before measurements existed) had one `clients[]` list with fixed metric
//! fields; its numbers are the `nfs-read` measurement's, field for field:
//! `clients[].reads[].metrics.<derived>` → `iterations[].metrics.<derived>`,
//! `reads[].netem` → `iterations[].remote`, `reads[].rpc_read` → `nfs_read.clients[].reads[].rpc_read`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::measure::analysis::{MeasurementResult, Outcome};
use crate::path_io::Folder;
use crate::plan::ProfilePlan;
use crate::run::record::{RunDirError, StepStatus};
use crate::scenarios::nfs_read;

/// `results.json`'s schema version.
pub const RESULTS_SCHEMA: u32 = 5;
/// The oldest `results.json` schema this vmrepro reads ([`read_results`]).
pub const OLDEST_RESULTS_SCHEMA: u32 = 2;
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

/// Reads `results.json` (`rel`) of a run folder or bundle through `folder` (no link
/// followed, a regular file, at most [`crate::path_io::MAX_JSON_BYTES`]), refusing a
/// schema outside [`OLDEST_RESULTS_SCHEMA`]..=[`RESULTS_SCHEMA`].
///
/// Schema 2 files written before iterations had an `outcome` (vmrepro before pass/fail
/// outcomes, which did not change the schema number) read with the outcome their
/// `status` and `exit_status` give: `timed_out` → timed out, `error` → crashed, an exit
/// status → that exit, otherwise not run (those files recorded no signal); a VM's
/// `outcomes` are its iterations' outcomes in order.
///
/// Errors: [`RunDirError::File`] (refused or unreadable), [`RunDirError::ResultsSchema`],
/// [`RunDirError::Json`] naming the file, line and column.
pub fn read_results(folder: &Folder, rel: &str) -> Result<Results, RunDirError> {
    let path = folder.display(rel);
    let bytes = folder.read(rel, crate::path_io::MAX_JSON_BYTES)?;
    let json = |e: serde_json::Error| RunDirError::Json { path: path.clone(), message: e.to_string() };
    #[derive(Deserialize)]
    struct Version {
        schema: u32,
    }
    let v: Version = serde_json::from_slice(&bytes).map_err(json)?;
    if !(OLDEST_RESULTS_SCHEMA..=RESULTS_SCHEMA).contains(&v.schema) {
        return Err(RunDirError::ResultsSchema { path, found: v.schema });
    }
    if v.schema == RESULTS_SCHEMA {
        return serde_json::from_slice(&bytes).map_err(json);
    }
    let mut value: serde_json::Value = serde_json::from_slice(&bytes).map_err(json)?;
    for m in value.get_mut("measurements").and_then(|m| m.as_array_mut()).into_iter().flatten() {
        for vm in m.get_mut("vms").and_then(|v| v.as_array_mut()).into_iter().flatten() {
            let mut outcomes = Vec::new();
            for it in vm.get_mut("iterations").and_then(|i| i.as_array_mut()).into_iter().flatten() {
                let Some(obj) = it.as_object_mut() else { continue };
                if let Some(o) = obj.get("outcome") {
                    outcomes.push(o.clone());
                    continue;
                }
                let status: Option<StepStatus> = obj.get("status").and_then(|s| serde_json::from_value(s.clone()).ok());
                let exit = obj.get("exit_status").and_then(|e| e.as_i64()).and_then(|e| i32::try_from(e).ok());
                let outcome = match (status, exit) {
                    (Some(StepStatus::TimedOut), _) => Outcome::TimedOut,
                    (Some(StepStatus::Error), _) => Outcome::Crashed,
                    (_, Some(status)) => Outcome::Exited { status },
                    _ => Outcome::NotRun,
                };
                let outcome = serde_json::to_value(outcome).expect("serializable");
                outcomes.push(outcome.clone());
                obj.insert("outcome".into(), outcome);
            }
            if let Some(obj) = vm.as_object_mut() {
                obj.entry("outcomes").or_insert(serde_json::Value::Array(outcomes));
            }
        }
    }
    serde_json::from_value(value).map_err(json)
}
