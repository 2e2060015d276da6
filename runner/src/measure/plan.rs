//! A compiled measurement ([`MeasurementPlan`]) and its expansion into steps.
//!
//! [`expand`] adds, for every round (warm-up rounds first, then the measured ones) and
//! every measured VM in order, one iteration step (the script of
//! [`super::script::iteration_script`]) to that VM; with `concurrent: false` each
//! iteration waits for the one before it, so one VM is measured at a time. Each remote
//! observer adds a step to its VM before every iteration and one after the last; the
//! plan records which remote steps surround which iteration
//! ([`Iteration::remote`]), so the analysis never rebuilds step names.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::observer::{Observer, RemoteObserver};
use super::script::{iteration_script, Commands, Record};
use super::spec::Better;
use crate::suite::plan::{names, netem, Dependency, StepKind, StepPlan, VmPlan};
use crate::suite::spec::SnapshotVerdicts;

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

/// A check on an iteration's output.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Check {
    /// Section name (`stdout`, `stderr`, or a record).
    pub section: String,
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
    /// How each iteration ended.
    pub outcome: bool,
    /// Metrics or counters kept as `0` / `> 0`.
    pub signs: Vec<String>,
    /// Sections kept verbatim.
    pub sections: Vec<String>,
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

/// Adds `m`'s steps to `vms` and fills [`MeasurementPlan::iterations`].
///
/// `after` is what every iteration waits for; `previous` is the last iteration of the
/// measurement before (for sequential measurements), and is left at this one's last.
/// Iterations wait for the one before them only to have *ended*: a VM whose iteration
/// fails or hangs does not keep the others from being measured.
/// `timeout` limits each step. Panics if `m` names a VM that `vms` lacks (validated).
pub fn expand(
    m: &mut MeasurementPlan,
    vms: &mut [VmPlan],
    after: &[Dependency],
    timeout: Duration,
    origin: &str,
    previous: &mut Option<Dependency>,
) {
    let vm_index = |vms: &[VmPlan], name: &str| vms.iter().position(|v| v.name == name).expect("validated VM");
    // Remote observations need one iteration at a time to belong to one iteration.
    let remote: Vec<(usize, RemoteObserver)> =
        if m.concurrent { vec![] } else { m.remote.iter().cloned().enumerate().collect() };
    // Per remote observer: the iteration whose `after` step is still to be named.
    let mut open: Vec<Option<(usize, usize)>> = vec![None; m.remote.len()];
    for round in 1..=m.warmup + m.repeat {
        let warmup = round <= m.warmup;
        let number = if warmup { round } else { round - m.warmup };
        for mv in &m.vms {
            let step = names::iteration(&m.name, warmup, number);
            let mut deps: Vec<Dependency> = after.to_vec();
            if !m.concurrent {
                deps.extend(previous.clone());
            }
            let mut readings = Vec::new();
            for (ri, r) in &remote {
                let RemoteObserver::Netem { vm: rvm, seeded } = r;
                let name = names::netem_before(*seeded, &mv.vm, &step);
                let script =
                    if *seeded { netem::reseed_script(&vms[vm_index(vms, rvm)]) } else { netem::STATS_SCRIPT.into() };
                let rv = vm_index(vms, rvm);
                vms[rv].steps.push(
                    StepPlan::new(&name, script, StepKind::observe(&m.name, r), timeout)
                        .after(previous.iter().cloned())
                        .origin(origin),
                );
                if rvm != &mv.vm {
                    deps.push(Dependency::step(rvm, &name));
                }
                if let Some((it, rd)) = open[*ri].take() {
                    let reading: &mut RemoteReading = &mut m.iterations[it].remote[rd];
                    reading.after = name.clone();
                }
                open[*ri] = Some((m.iterations.len(), readings.len()));
                readings.push(RemoteReading { observer: *ri, vm: rvm.clone(), before: name, after: String::new() });
            }
            let script = iteration_script(&mv.commands, &m.observers, &m.records);
            let v = vm_index(vms, &mv.vm);
            vms[v].steps.push(
                StepPlan::new(
                    &step,
                    script,
                    StepKind::Measure { measurement: m.name.clone(), iteration: number, warmup },
                    timeout,
                )
                .after(deps)
                .origin(origin),
            );
            m.iterations.push(Iteration { vm: mv.vm.clone(), step: step.clone(), number, warmup, remote: readings });
            *previous = Some(Dependency::ended(&mv.vm, &step));
        }
    }
    for (ri, r) in &remote {
        let name = names::netem_final(&m.name);
        let rv = vm_index(vms, r.vm());
        vms[rv].steps.push(
            StepPlan::new(&name, netem::STATS_SCRIPT.into(), StepKind::observe(&m.name, r), timeout)
                .after(previous.iter().cloned())
                .origin(origin),
        );
        if let Some((it, rd)) = open[*ri].take() {
            m.iterations[it].remote[rd].after = name;
        }
    }
}
