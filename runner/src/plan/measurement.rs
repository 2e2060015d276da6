//! A compiled measurement: what the plan holds of it (the measured VMs and their
//! commands, observers, records, checks, the metric, the snapshot policy, and every
//! iteration with the remote readings around it). Its behaviour is in
//! [`crate::measure`]: expansion into steps, the guest script, the observers' parsing,
//! the analysis.

use serde::{Deserialize, Serialize};

pub use crate::schema::measure::{Better, MetricFrom, When};
use crate::schema::SnapshotVerdicts;

/// A measurement, ready to expand and to analyse.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MeasurementPlan {
    /// Name (iteration steps are `<name>-<N>`).
    pub name: String,
    /// The built-in scenario that made it (`nfs_read`), if any: its results and
    /// snapshot are shaped by that scenario.
    pub preset: Option<String>,
    /// The measured VMs, in order, with their commands.
    pub vms: Vec<MeasuredVm>,
    /// The VM the others are compared with.
    pub baseline: String,
    /// Measured iterations per VM.
    pub repeat: u32,
    /// Unmeasured iterations per VM before the measured ones.
    pub warmup: u32,
    /// All VMs at once.
    pub concurrent: bool,
    /// Expected exit status of `run`.
    pub expect_exit: i32,
    /// Observers read in the measured VM around every iteration.
    pub observers: Vec<Observer>,
    /// Observers read in other VMs around every iteration.
    pub remote: Vec<RemoteObserver>,
    /// Named commands whose output is kept as sections.
    pub records: Vec<Record>,
    /// Bytes `run` moves, for `throughput_mb_s`.
    pub bytes: Option<Bytes>,
    /// A number `run` prints, parsed in every iteration (`measure[].metric`); absent
    /// from plans saved before it existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_metric: Option<OutputMetric>,
    /// The metric the verdict uses.
    pub metric: Metric,
    /// Checks on every measured iteration's output.
    pub checks: Vec<Check>,
    /// Extra table columns (metric or counter names).
    #[serde(default)]
    pub table: Vec<String>,
    /// What the suite's snapshot keeps.
    pub snapshot: SnapshotPolicy,
    /// Every iteration, in the order they run.
    pub iterations: Vec<Iteration>,
}

impl MeasurementPlan {
    /// The guest file the output metric is read from, when it is read from a file.
    pub fn metric_file(&self) -> Option<&str> {
        match &self.output_metric {
            Some(OutputMetric { from: MetricFrom::File(path), .. }) => Some(path),
            _ => None,
        }
    }
}

/// One measured VM and the commands of its iterations.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MeasuredVm {
    /// VM name.
    pub vm: String,
    /// Setup, timed run and teardown.
    #[serde(flatten)]
    pub commands: Commands,
}

/// Where the byte count of `run` comes from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Bytes {
    /// Known in advance.
    Fixed(u64),
    /// The number a record printed in each iteration (e.g. `wc -c < FILE`).
    Record(String),
}

/// The metric a verdict uses, and which direction is better.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Metric {
    /// `elapsed_s`, `user_s`, `system_s`, `throughput_mb_s`, a derived metric name
    /// (`rpc_retransmissions`) or a counter name (`netstat.Tcp.RetransSegs`).
    pub name: String,
    /// Which direction is better.
    pub better: Better,
}

impl Metric {
    /// Whether the metric is a duration or a rate, so that its verdict words are
    /// `slower`/`faster` (otherwise `worse`/`better`; `outcome` has its own words).
    pub fn is_speed(&self) -> bool {
        matches!(self.name.as_str(), "elapsed_s" | "user_s" | "system_s" | "throughput_mb_s")
    }
}

/// A number the measured command prints: where it is and how to find it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutputMetric {
    /// Its name (`value` unless the suite names it), a metric like `elapsed_s`.
    pub name: String,
    /// Where it is printed.
    pub from: MetricFrom,
    /// How it is found there.
    pub extract: Extract,
    /// Its unit, for tables and reports (`IOPS`, `bit/s`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unit: Option<String>,
    /// Which direction is better.
    pub better: Better,
}

/// How an [`OutputMetric`] is found in its text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Extract {
    /// The text is JSON; the number is at this RFC 6901 pointer.
    Json(String),
    /// The first match of this regular expression; its one capture group is the number.
    Regex(String),
}

/// A check on an iteration's output.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Check {
    /// Section name (`stdout`, `stderr`, or a record).
    pub section: String,
    /// Only for this measured VM (`None`: every VM).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub only: Option<String>,
    /// What must hold.
    pub expect: Expect,
}

/// What a [`Check`] requires of the section's text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Expect {
    /// The text, trimmed, equals this.
    Equals(String),
    /// The text contains this.
    Contains(String),
}

/// What a suite's snapshot keeps of a measurement.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapshotPolicy {
    /// How much of each verdict.
    pub verdict: SnapshotVerdicts,
    /// Per-VM overrides of `verdict`, by VM name (`nfs_read.client_snapshot_verdicts`,
    /// `measure[].snapshot.verdict_by_vm`); absent from plans saved before they existed.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub verdict_by_vm: std::collections::BTreeMap<String, SnapshotVerdicts>,
    /// How each iteration ended.
    pub outcome: bool,
    /// Metrics or counters kept as `0` / `> 0`.
    pub signs: Vec<String>,
    /// Sections kept verbatim.
    pub sections: Vec<String>,
}

impl SnapshotPolicy {
    /// How much of `vm`'s verdict the snapshot keeps: its override, else `verdict`.
    pub fn verdict_of(&self, vm: &str) -> SnapshotVerdicts {
        self.verdict_by_vm.get(vm).copied().unwrap_or(self.verdict)
    }
}

/// One iteration of one VM.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Iteration {
    /// The measured VM.
    pub vm: String,
    /// Its step.
    pub step: String,
    /// 1-based number among the VM's measured iterations (or among its warm-ups).
    pub number: u32,
    /// A warm-up (its output is kept, its numbers are left out).
    pub warmup: bool,
    /// The remote observations around it.
    pub remote: Vec<RemoteReading>,
}

/// Which steps of a remote observer's VM read it just before and just after an iteration.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RemoteReading {
    /// Index into [`MeasurementPlan::remote`].
    pub observer: usize,
    /// The remote VM.
    pub vm: String,
    /// Its step before the iteration.
    pub before: String,
    /// Its step after the iteration (before the next one, or after the last).
    pub after: String,
}

/// A local observer: read in the measured VM before and after every iteration.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Observer {
    /// `netstat -s`.
    Netstat,
    /// `nfsstat` (client and server RPC and per-procedure counts).
    Nfsstat,
    /// `/proc/self/mountstats` for the NFS mount on `mount`: the listed operations'
    /// RPC statistics (every operation when `ops` is empty).
    Mountstats {
        /// Mount point (absolute path).
        mount: String,
        /// Operation names as the kernel prints them (`READ`, `WRITE`, `COMMIT`, …).
        ops: Vec<String>,
    },
    /// Raw `/proc/net/snmp` and `/proc/net/netstat`.
    ProcNet,
    /// Raw `/proc/net/rpc/nfs`.
    ProcRpcNfs,
}

/// The kind of an [`Observer`] (one observer per kind in a measurement).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ObserverKind {
    /// `netstat -s`.
    Netstat,
    /// `nfsstat`.
    Nfsstat,
    /// `/proc/self/mountstats`.
    Mountstats,
    /// Raw `/proc/net/snmp` + `/proc/net/netstat`.
    ProcNet,
    /// Raw `/proc/net/rpc/nfs`.
    ProcRpcNfs,
}

/// A remote observer: read in *another* VM than the measured one around every iteration.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RemoteObserver {
    /// The netem qdisc on VM `vm`'s `eth0` (`net.egress` of that VM): packets sent and
    /// dropped during each iteration, from `tc -s qdisc show`. When the netem is
    /// seeded, the observation before each iteration also reseeds it.
    Netem {
        /// The VM carrying the netem.
        vm: String,
        /// Whether it is seeded (and so reseeded before every iteration).
        seeded: bool,
    },
}

/// A named command whose output is kept as a section of every iteration.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    /// Section name.
    pub name: String,
    /// Shell command (run with `sh -c`; stdout and stderr kept).
    pub command: String,
    /// When it runs.
    pub when: When,
}

/// The commands of one measured VM's iterations.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Commands {
    /// Run before each iteration (e.g. mount, drop caches).
    pub setup: Option<String>,
    /// The timed workload.
    pub run: String,
    /// Run after each iteration (e.g. unmount).
    pub teardown: Option<String>,
}
