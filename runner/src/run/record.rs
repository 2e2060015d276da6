//! `run.json`: the machine-readable record of a run, written while it runs and read
//! back by `vmrepro analyse` (with the step outputs it points to).
//!
//! Schema 2 (this version): step records carry their `kind` fields without a second
//! `name` key (schema 1 wrote a profile step's profile as `name`, shadowing the step
//! name), and `snapshot`; the run folder also holds `plan.json`, the compiled plan.

use std::path::{Path, PathBuf};

use serde::{de::DeserializeOwned, Deserialize, Serialize};

pub use crate::events::StepStatus;
pub use crate::infra::images::ImageRecord;
use crate::infra::qemu::args::Accelerator;
use crate::infra::qemu::vm::Ending;
use crate::plan::StepKind;

use crate::path_io::{FileError, Folder, PathIo, MAX_JSON_BYTES, MAX_OUTPUT_BYTES};

/// Why a run folder's file could not be read or written: what reading a run folder
/// after the run (analysis, reports, bundles) and writing it during one can meet.
/// Every file goes through [`Folder`]: no link followed, regular files only, bounded.
#[derive(Debug, thiserror::Error)]
pub enum RunDirError {
    /// A file couldn't be read or written, or was refused (a link, a named pipe, too
    /// large, a path outside the folder).
    #[error(transparent)]
    File(#[from] FileError),
    /// `run.json` has a schema this vmrepro does not read.
    #[error("{}: run.json schema {found}; this vmrepro reads schema {RUN_SCHEMA} only", path.display())]
    Schema {
        /// The file.
        path: PathBuf,
        /// Its `schema`.
        found: u32,
    },
    /// `results.json` has a schema this vmrepro does not read.
    #[error(
        "{}: results.json schema {found}; this vmrepro reads schemas {}..={} only",
        path.display(),
        crate::analyse::results::OLDEST_RESULTS_SCHEMA,
        crate::analyse::results::RESULTS_SCHEMA
    )]
    ResultsSchema {
        /// The file.
        path: PathBuf,
        /// Its `schema`.
        found: u32,
    },
    /// A JSON file of a run folder doesn't parse.
    #[error("{}: {message}", path.display())]
    Json {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
}

impl From<PathIo> for RunDirError {
    fn from(e: PathIo) -> RunDirError {
        RunDirError::File(e.into())
    }
}

/// `run.json`'s schema version.
pub const RUN_SCHEMA: u32 = 2;

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    /// Every step exited as expected.
    Passed,
    /// A step exited with an unexpected status (a test failure).
    Failed,
    /// The run couldn't complete (image, network, VM or agent failure).
    InfrastructureError,
    /// Ctrl-C or SIGTERM.
    Interrupted,
    /// The run is still going: only in a `run.json` written while it runs (or left by a
    /// runner that was killed with SIGKILL).
    Running,
}

/// One step as recorded in `run.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StepRecord {
    /// Step name.
    pub name: String,
    /// What the step is for (`kind` and its fields, see [`StepKind`]).
    #[serde(flatten)]
    pub kind: StepKind,
    /// Outcome.
    pub status: StepStatus,
    /// Exit status, when it exited.
    pub exit_code: Option<i64>,
    /// Signal, when killed.
    pub signal: Option<i64>,
    /// Expected exit status.
    pub expect_exit: i32,
    /// Wall time in seconds (host clock, includes agent round trips).
    pub duration_s: f64,
    /// When the step started, seconds after the run started (host monotonic clock);
    /// absent for a step that did not run and in run folders of older versions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_s: Option<f64>,
    /// stdout file, relative to the run folder.
    pub stdout: Option<String>,
    /// stderr file, relative to the run folder.
    pub stderr: Option<String>,
    /// Error text for `error`/`timed_out`/`skipped`.
    pub error: Option<String>,
    /// For a measured iteration that hung or whose guest died: the file with the kernel
    /// log and the blocked tasks' stacks (or the console's last lines), relative to the
    /// run folder.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diagnostics: Option<String>,
    /// Whether the suite asked for this step's stdout in its snapshot (`snapshot: true`).
    #[serde(default)]
    pub snapshot: bool,
    /// For a measured iteration of a captured VM: the bytes `[from, to)` of the VM's
    /// capture file (`vms/VM/capture.pcap`) written while the step ran, its frames
    /// ([`crate::wire`] maps an iteration onto its capture by these offsets, not by
    /// clocks: `filter-dump` stamps frames with the VM's virtual clock plus a
    /// whole-second host time). Absent otherwise and in older run folders.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capture_bytes: Option<[u64; 2]>,
}

/// One VM as recorded in `run.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct VmRecord {
    /// Name.
    pub name: String,
    /// Kernel source.
    pub kernel: String,
    /// `uname -r` of the booted kernel (from the kernel image).
    pub kernel_release: String,
    /// Address/prefix.
    pub address: String,
    /// MAC.
    pub mac: String,
    /// Tap device in the namespace.
    pub tap: String,
    /// Acceleration used.
    pub accel: Accelerator,
    /// QEMU's PID (also its process group) while it ran.
    pub pid: Option<u32>,
    /// QEMU start → ready for its first step (guest agent answered, state saved if
    /// this run saved it, identity applied), seconds.
    pub boot_s: Option<f64>,
    /// Where `boot_s` went: when its start passed each point, seconds since QEMU was
    /// spawned (absent in older run folders). Of the last QEMU when it booted instead.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_phases: Option<crate::infra::qemu::vm::StartPhases>,
    /// How QEMU ended.
    pub ending: Option<Ending>,
    /// Files, relative to the run folder.
    pub console_log: String,
    /// The exact QEMU command line.
    pub qemu_cmdline: String,
    /// Steps in plan order.
    pub steps: Vec<StepRecord>,
    /// Guest clock against the host's over the run (from `guest-get-time`).
    pub clock: Option<ClockCheck>,
    /// How it started: `booted`, or `restored` from a saved VM state (absent in runs
    /// of runners before saved states).
    #[serde(default)]
    pub start: Option<VmStart>,
    /// The saved-state key of its kind (`<cache>/vmstate/<key>`), when saved states
    /// were used (not with `--fresh-boot`).
    #[serde(default)]
    pub state: Option<String>,
    /// How its kind's saved state holds the guest's RAM: `mapped` (a RAM file each
    /// restored VM maps copy-on-write) or `copied` (in the migration stream: the
    /// fallback, with a notice saying why); absent when saved states were not used and
    /// in run folders of older versions, whose states were all copied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state_ram: Option<crate::infra::qemu::state::StateRam>,
    /// Whether this run saved its kind's state (it booted and none was saved yet).
    #[serde(default)]
    pub state_saved: bool,
    /// The host CPU its QEMU was bound to (`--pin`, see [`crate::infra::qemu::pin`]);
    /// absent when it ran unpinned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pinned_cpu: Option<usize>,
    /// Its packet capture, when it had one (absent in older run folders).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capture: Option<CaptureRecord>,
}

/// A VM's packet capture as the run left it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CaptureRecord {
    /// The file, relative to the run folder (`vms/VM/capture.pcap`).
    pub file: String,
    /// Its size when last looked at (after each step), bytes.
    pub bytes: u64,
    /// The size at which it is stopped (`network.capture_max_bytes`), bytes.
    pub max_bytes: u64,
    /// Whether it recorded only measured iterations (`capture: measured`).
    pub measured_only: bool,
    /// Why it stopped before the run ended (the size cap reached, or QMP refused to
    /// turn it on or off), in words; absent when it ran to the end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped: Option<String>,
}

/// How a VM started.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum VmStart {
    /// QEMU booted its kernel.
    Booted,
    /// QEMU loaded a saved VM state (`-incoming`).
    Restored,
}

/// How the guest's clock kept time against the host's between the guest agent's first
/// answer and the VM's last step. A too-lean kernel config (no stable clocksource)
/// shows here as a drift of thousands of ppm.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ClockCheck {
    /// Host seconds between the two samples.
    pub interval_s: f64,
    /// Guest clock minus host clock at the first sample, seconds.
    pub offset_s: f64,
    /// (guest interval − host interval) / host interval, in parts per million.
    pub drift_ppm: f64,
}

/// Wall time of the run's phases, seconds.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Timings {
    /// Image resolution (fetch/build or cache hits).
    pub images_s: f64,
    /// Accel probe, network, QEMU start → every agent answered.
    pub boot_s: f64,
    /// The part of `boot_s` spent creating the network namespace, bridge and taps
    /// (0 in run folders of older versions).
    #[serde(default)]
    pub network_s: f64,
    /// Steps.
    pub steps_s: f64,
    /// Shutdown.
    pub teardown_s: f64,
    /// Whole run.
    pub total_s: f64,
}

/// `run.json`: the machine-readable summary of a run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunRecord {
    /// Schema version of this file ([`RUN_SCHEMA`]).
    pub schema: u32,
    /// Suite name.
    pub suite: String,
    /// Suite file.
    pub suite_file: String,
    /// Start time (RFC 3339, UTC).
    pub started: String,
    /// Outcome.
    pub status: RunStatus,
    /// Error text for infrastructure errors and interruptions.
    pub error: Option<String>,
    /// Accelerator used and why (for fallbacks).
    pub accel: Option<Accelerator>,
    /// The fallback notice, if any.
    pub accel_notice: Option<String>,
    /// Why `--pin` was asked for and not applied (every VM then ran unpinned), e.g.
    /// "--pin needs at least 2 usable CPUs …"; absent when it was applied or not asked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pin_notice: Option<String>,
    /// Bridge subnet.
    pub subnet: String,
    /// MTU.
    pub mtu: u32,
    /// The run's private 0700 temp folder (QMP/QGA sockets, overlays, initrds); removed
    /// at the end of the run.
    pub temp_dir: Option<String>,
    /// The run's private network namespace (gone at the end of the run).
    pub network_namespace: Option<NamespaceRecord>,
    /// Things teardown could not clean up (empty when everything was removed).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub teardown_problems: Vec<String>,
    /// Images used.
    pub images: Vec<ImageRecord>,
    /// Phase timings.
    pub timings: Timings,
    /// VMs.
    pub vms: Vec<VmRecord>,
    /// Measurements with adaptive repeats whose every comparison was decided before
    /// `max`: name → the rounds run (their later iterations are skipped as not needed,
    /// and left out of the analysis). Absent when none stopped early.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub decided_after: std::collections::BTreeMap<String, u32>,
}

/// The run's network namespace as recorded in `run.json`, to check that it is gone.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct NamespaceRecord {
    /// PID of the process that held it.
    pub holder_pid: u32,
    /// Inode of the namespace (as in `/proc/<pid>/ns/net` → `net:[<inode>]`).
    pub inode: u64,
}

impl RunRecord {
    /// Whether the run pinned its QEMUs (`--pin`): some VM has a `pinned_cpu`.
    pub fn pinned(&self) -> bool {
        self.vms.iter().any(|v| v.pinned_cpu.is_some())
    }

    /// The VM named `name`.
    pub fn vm(&self, name: &str) -> Option<&VmRecord> {
        self.vms.iter().find(|v| v.name == name)
    }
}

impl VmRecord {
    /// The step named `name`.
    pub fn step(&self, name: &str) -> Option<&StepRecord> {
        self.steps.iter().find(|s| s.name == name)
    }
}

impl StepRecord {
    /// The step's stdout as text (lossy UTF-8), read from its file under `run_dir`;
    /// empty when the step produced no output file (it did not run, or its VM failed).
    ///
    /// Errors: [`RunDirError::File`] when the file is named but can't be read, is a link,
    /// not a regular file, outside `run_dir` or over [`MAX_OUTPUT_BYTES`].
    pub fn stdout_text(&self, run_dir: &Path) -> Result<String, RunDirError> {
        Ok(String::from_utf8_lossy(&self.stdout_bytes(run_dir)?).into_owned())
    }

    /// The step's stdout as the guest printed it, byte for byte (see [`Self::stdout_text`]).
    ///
    /// Errors: as [`Self::stdout_text`].
    pub fn stdout_bytes(&self, run_dir: &Path) -> Result<Vec<u8>, RunDirError> {
        let Some(rel) = &self.stdout else { return Ok(Vec::new()) };
        match Folder::open(run_dir)?.read(rel, MAX_OUTPUT_BYTES) {
            Err(FileError::Outside { path, .. }) => Err(RunDirError::Json {
                path: run_dir.join(super::RUN_FILE),
                message: format!(
                    "step {}: stdout {path:?} is not a plain relative path inside the run folder",
                    self.name
                ),
            }),
            r => Ok(r?),
        }
    }
}

/// The folder of `path` and its file name, for [`write_json`] and [`read_json`].
fn split(path: &Path) -> Result<(Folder, String), RunDirError> {
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    Ok((Folder::open(dir)?, name))
}

/// Writes `value` as pretty JSON to `path` atomically (a temp file created exclusively
/// in its folder, then renamed; a link at `path` is replaced, not followed).
///
/// Errors: [`RunDirError::File`] naming the file.
pub fn write_json<T: Serialize>(path: &Path, value: &T) -> Result<(), RunDirError> {
    let text = serde_json::to_string_pretty(value).expect("serializable") + "\n";
    let (dir, name) = split(path)?;
    Ok(dir.write(&name, text.as_bytes(), 0o644)?)
}

/// Reads a JSON file written by [`write_json`] (no link followed, a regular file of at
/// most [`MAX_JSON_BYTES`]).
///
/// Errors: [`RunDirError::File`] when it can't be read or is refused, [`RunDirError::Json`]
/// when it doesn't parse as `T`.
pub fn read_json<T: DeserializeOwned>(path: &Path) -> Result<T, RunDirError> {
    let (dir, name) = split(path)?;
    read_json_in(&dir, &name)
}

/// [`read_json`] of `rel` inside `dir`.
///
/// Errors: as [`read_json`].
pub fn read_json_in<T: DeserializeOwned>(dir: &Folder, rel: &str) -> Result<T, RunDirError> {
    let bytes = dir.read(rel, MAX_JSON_BYTES)?;
    serde_json::from_slice(&bytes).map_err(|e| RunDirError::Json { path: dir.display(rel), message: e.to_string() })
}

/// Reads `run.json` of run folder `dir` and refuses a schema other than [`RUN_SCHEMA`].
///
/// Errors: as [`read_json`]; [`RunDirError::Schema`].
pub fn read_record(dir: &Path) -> Result<RunRecord, RunDirError> {
    let path = dir.join(super::RUN_FILE);
    #[derive(Deserialize)]
    struct Version {
        schema: u32,
    }
    let folder = Folder::open(dir)?;
    let v: Version = read_json_in(&folder, super::RUN_FILE)?;
    if v.schema != RUN_SCHEMA {
        return Err(RunDirError::Schema { path, found: v.schema });
    }
    let record: RunRecord = read_json_in(&folder, super::RUN_FILE)?;
    record.check_paths(dir).map_err(|message| RunDirError::Json { path, message })?;
    Ok(record)
}

impl RunRecord {
    /// Checks that the names `run.json` gives (`suite`, each VM's and each step's
    /// `name`), which commands print and write into reports, hold no control character
    /// (a newline or an escape sequence would forge output lines or drive the
    /// terminal).
    ///
    /// Errors: the first such name, by its key.
    pub fn check_names(&self) -> Result<(), String> {
        let refuse = |key: String, value: &str| {
            Err(format!("{key} is {value:?}; a name in run.json holds no control character (newline, escape…)"))
        };
        if self.suite.chars().any(char::is_control) {
            return refuse("suite".into(), &self.suite);
        }
        for (i, v) in self.vms.iter().enumerate() {
            if v.name.chars().any(char::is_control) {
                return refuse(format!("vms[{i}].name"), &v.name);
            }
            for (j, st) in v.steps.iter().enumerate() {
                if st.name.chars().any(char::is_control) {
                    return refuse(format!("vms[{i}] ({}).steps[{j}].name", v.name), &st.name);
                }
            }
        }
        Ok(())
    }

    /// Checks that every file `run.json` names (each VM's `console_log` and
    /// `qemu_cmdline`, each step's `stdout`, `stderr` and `diagnostics`) is a plain
    /// relative path inside the run folder `dir`: an untrusted `run.json` can't point a
    /// reader at a host file, and such a path is refused by its key, never read or
    /// dropped.
    ///
    /// Errors: the first such path, as `vms[I] (VM).steps[J] (STEP).stdout is "…"; …`.
    pub fn check_paths(&self, dir: &Path) -> Result<(), String> {
        self.check_names()?;
        let refuse = |key: String, value: &str| {
            Err(format!("{key} is {value:?}; every file run.json names is a plain relative path inside the run folder"))
        };
        for (i, v) in self.vms.iter().enumerate() {
            let vm = format!("vms[{i}] ({})", v.name);
            for (k, value) in [("console_log", &v.console_log), ("qemu_cmdline", &v.qemu_cmdline)] {
                // Empty: the VM never started (no file).
                if !value.is_empty() && crate::path_io::check_relative(value, dir).is_err() {
                    return refuse(format!("{vm}.{k}"), value);
                }
            }
            for (j, st) in v.steps.iter().enumerate() {
                for (k, value) in [("stdout", &st.stdout), ("stderr", &st.stderr), ("diagnostics", &st.diagnostics)] {
                    let Some(value) = value else { continue };
                    if crate::path_io::check_relative(value, dir).is_err() {
                        return refuse(format!("{vm}.steps[{j}] ({}).{k}", st.name), value);
                    }
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_profile_step_has_one_name_and_reads_back() {
        let step = StepRecord {
            name: "profile-nfs-server-2.4.19".into(),
            kind: StepKind::Profile { profile: "nfs-server-2.4.19".into() },
            status: StepStatus::Passed,
            exit_code: Some(0),
            signal: None,
            expect_exit: 0,
            duration_s: 1.5,
            started_s: None,
            stdout: Some("vms/server/01-profile-nfs-server-2.4.19.stdout".into()),
            stderr: None,
            error: None,
            diagnostics: None,
            snapshot: false,
            capture_bytes: None,
        };
        let text = serde_json::to_string(&step).unwrap();
        assert_eq!(text.matches("\"name\"").count(), 1, "{text}");
        let back: StepRecord = serde_json::from_str(&text).unwrap();
        assert_eq!(back.name, "profile-nfs-server-2.4.19");
        assert_eq!(back.kind, step.kind);
    }
}
