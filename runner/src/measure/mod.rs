//! The scenario-neutral measurement layer: time any command on several VMs (one per
//! kernel or setting under test), with observers read around every iteration, and
//! compare each VM with a baseline.
//!
//! - [`spec`]: the `measure:` YAML block;
//! - [`observer`]: what is read around each iteration (`netstat -s`, `nfsstat`,
//!   `mountstats`, another VM's netem) and the derived metrics, as data;
//! - [`script`]: the guest script of one iteration and its sections;
//! - [`plan`]: a compiled measurement and its expansion into steps;
//! - [`analysis`]: a saved run folder → per-iteration numbers, summaries, verdicts;
//! - [`stats`]: counter deltas, summaries and the verdict rule.
//!
//! Built-in scenarios ([`crate::scenarios`]) are presets: they expand into ordinary
//! steps plus a [`plan::MeasurementPlan`].

pub mod analysis;
pub mod expand;
pub mod observer;
pub mod script;
pub mod stats;

use crate::plan::measurement::{
    Better, Bytes, Check, Commands, Expect, MeasuredVm, MeasurementPlan, Metric, Observer, Record, RemoteObserver,
    SnapshotPolicy,
};
use crate::schema::measure::{MeasureSpec, ObserverSpec};

use crate::plan::{names, Dependency, DEFAULT_REPEAT};
use crate::schema::SuiteSpec;

/// The metric a verdict uses by default.
pub const DEFAULT_METRIC: &str = "elapsed_s";

/// Compiles one validated `measure:` entry (its iterations are added by
/// [`plan::expand`]).
pub fn compile(spec: &MeasureSpec, suite: &SuiteSpec) -> MeasurementPlan {
    let commands = Commands { setup: spec.setup.clone(), run: spec.run.clone(), teardown: spec.teardown.clone() };
    let mut observers = Vec::new();
    let mut remote = Vec::new();
    for o in &spec.observe {
        match o {
            ObserverSpec::Netstat => observers.push(Observer::Netstat),
            ObserverSpec::Nfsstat => observers.push(Observer::Nfsstat),
            ObserverSpec::Mountstats(m) => {
                observers.push(Observer::Mountstats { mount: m.mount.clone(), ops: m.ops.clone() })
            }
            ObserverSpec::ProcNet => observers.push(Observer::ProcNet),
            ObserverSpec::ProcRpcNfs => observers.push(Observer::ProcRpcNfs),
            ObserverSpec::Netem(vm) => {
                remote.push(RemoteObserver::Netem { vm: vm.clone(), seeded: seeded_netem(suite, vm) })
            }
        }
    }
    let metric = spec.compare.clone().unwrap_or_else(|| DEFAULT_METRIC.into());
    let better = spec.better.unwrap_or(if metric == "throughput_mb_s" { Better::Higher } else { Better::Lower });
    let snap = spec.snapshot.clone().unwrap_or_default();
    MeasurementPlan {
        name: spec.name.clone(),
        preset: None,
        vms: spec.on.iter().map(|vm| MeasuredVm { vm: vm.clone(), commands: commands.clone() }).collect(),
        baseline: spec.baseline.clone().unwrap_or_else(|| spec.on[0].clone()),
        repeat: spec.repeat.unwrap_or(DEFAULT_REPEAT),
        warmup: spec.warmup.unwrap_or(0),
        concurrent: spec.concurrent.unwrap_or(false),
        expect_exit: spec.expect_exit.unwrap_or(0),
        observers,
        remote,
        records: spec
            .record
            .iter()
            .map(|r| Record { name: r.name.clone(), command: r.run.clone(), when: r.when.unwrap_or_default() })
            .collect(),
        bytes: spec.bytes.map(Bytes::Fixed),
        metric: Metric { name: metric, better },
        checks: spec
            .checks
            .iter()
            .flat_map(|c| {
                let equals = c.equals.as_ref().map(|v| Expect::Equals(scalar_text(v)));
                let contains = c.contains.clone().map(Expect::Contains);
                equals.into_iter().chain(contains).map(|expect| Check {
                    section: c.section.clone(),
                    only: None,
                    expect,
                })
            })
            .collect(),
        table: spec.table.clone(),
        snapshot: SnapshotPolicy {
            verdict: snap.verdict.unwrap_or_default(),
            verdict_by_vm: snap.verdict_by_vm,
            outcome: snap.outcome.unwrap_or(true),
            signs: snap.signs,
            sections: snap.sections,
        },
        iterations: vec![],
    }
}

/// A YAML scalar as the text a guest would print (`100000000`, `true`, `abc`); other
/// values as their YAML.
pub fn scalar_text(v: &serde_yaml::Value) -> String {
    match v {
        serde_yaml::Value::String(s) => s.clone(),
        serde_yaml::Value::Number(n) => n.to_string(),
        serde_yaml::Value::Bool(b) => b.to_string(),
        other => serde_yaml::to_string(other).unwrap_or_default().trim().to_string(),
    }
}

/// Whether VM `vm` of `suite` has a seeded netem on its egress.
pub fn seeded_netem(suite: &SuiteSpec, vm: &str) -> bool {
    suite
        .vms
        .iter()
        .find(|v| v.name == vm)
        .and_then(|v| v.net.as_ref()?.egress.as_ref())
        .is_some_and(|e| e.seed.is_some())
}

/// What every iteration of `spec` waits for: its `after` entries, where the name of an
/// earlier measurement stands for every VM's last iteration of it (ended, whatever its
/// outcome).
pub fn after_dependencies(spec: &MeasureSpec, earlier: &[MeasurementPlan]) -> Vec<Dependency> {
    let mut deps = Vec::new();
    for a in &spec.after {
        match earlier.iter().find(|m| &m.name == a) {
            Some(m) => {
                for mv in &m.vms {
                    if let Some(last) = m.iterations.iter().rfind(|i| i.vm == mv.vm) {
                        deps.push(Dependency::ended(&mv.vm, &last.step));
                    }
                }
            }
            None => deps.push(Dependency::parse(a)),
        }
    }
    deps
}

/// Names of the suite's measurements (the preset's included when used), for
/// reserving their iteration step names.
pub fn measurement_names(suite: &SuiteSpec) -> Vec<&str> {
    let mut v: Vec<&str> = suite.measure.iter().map(|m| m.name.as_str()).collect();
    if suite.nfs_read.is_some() {
        v.push(names::NFS_READ_MEASUREMENT);
    }
    v
}
