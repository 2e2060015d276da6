//! Compiling the suite's measurements: the `nfs_read` preset's first, then every
//! `measure:` entry in suite order, each expanded into iteration steps on its VMs
//! ([`crate::measure::expand`]).

use std::time::Duration;

use crate::plan::measurement::{
    Action, Adaptive, Better, Bytes, Check, Commands, Expect, Extract, MeasuredVm, MeasurementPlan, Metric, MetricFrom,
    Observer, OutputMetric, Record, RemoteObserver, Scope, SnapshotPolicy, VerdictPolicy, When,
};
use crate::plan::nfs_read::NfsPlan;
use crate::plan::{names, Dependency, VmPlan, DEFAULT_METRIC, DEFAULT_OUTPUT_METRIC, DEFAULT_REPEAT};
use crate::schema::measure::{BaselineSpec, MeasureSpec, ObserverSpec, OutputMetricSpec};
use crate::schema::repeat::RepeatSpec;
use crate::schema::text::scalar_text;
use crate::schema::SuiteSpec;

/// Compiles the `nfs_read` preset (if used) and every `measure:` entry of suite `s`,
/// adding their steps to `vms`. Sequential measurements run one after another, in
/// suite order; a concurrent one waits only for its `after`.
pub(super) fn compile_measurements(
    s: &SuiteSpec,
    vms: &mut [VmPlan],
    step_timeout: Duration,
) -> (Option<NfsPlan>, Vec<MeasurementPlan>) {
    let mut measurements = Vec::new();
    let mut previous = None;
    let nfs_read = s.nfs_read.as_ref().map(|n| {
        let (nfs, mut m) = crate::scenarios::nfs_read::expand(n, s, vms, step_timeout);
        let ready = Dependency::step(&nfs.server, names::NFS_SERVER_READY);
        crate::measure::expand::expand(&mut m, vms, &[ready], step_timeout, "nfs_read", &mut previous);
        measurements.push(m);
        nfs
    });
    for (i, spec) in s.measure.iter().enumerate() {
        let origin = format!("measure[{i}]");
        let mut m = compile_measurement(spec, s);
        let after = after_dependencies(spec, &measurements);
        let mut none = None;
        let previous = if m.concurrent { &mut none } else { &mut previous };
        crate::measure::expand::expand(&mut m, vms, &after, spec.timeout.unwrap_or(step_timeout), &origin, previous);
        measurements.push(m);
    }
    (nfs_read, measurements)
}

/// Compiles one validated `measure:` entry (its iterations are added by
/// [`crate::measure::expand::expand`]).
pub fn compile_measurement(spec: &MeasureSpec, suite: &SuiteSpec) -> MeasurementPlan {
    let commands = Commands { setup: spec.setup.clone(), run: spec.run.clone(), teardown: spec.teardown.clone() };
    let mut observers = Vec::new();
    let mut remote = Vec::new();
    for o in &spec.observe {
        match o {
            ObserverSpec::Local(kind, settings) => observers.push(Observer {
                kind: *kind,
                scope: settings.as_ref().map(|m| Scope { mount: m.mount.clone(), ops: m.ops.clone() }),
            }),
            ObserverSpec::Netem(vm) => {
                remote.push(RemoteObserver::Netem { vm: vm.clone(), seeded: suite.seeded_netem(vm) })
            }
        }
    }
    let output_metric = spec.metric.as_ref().map(output_metric);
    let metric = spec
        .compare
        .clone()
        .or_else(|| output_metric.as_ref().map(|o| o.name.clone()))
        .unwrap_or_else(|| DEFAULT_METRIC.into());
    let better = match &output_metric {
        Some(o) if o.name == metric => o.better,
        _ => spec.better.unwrap_or(if metric == "throughput_mb_s" { Better::Higher } else { Better::Lower }),
    };
    let snap = spec.snapshot.clone().unwrap_or_default();
    let adaptive = spec.repeat.and_then(|r| r.bounds()).map(|(min, max)| Adaptive { min, max });
    let mut verdict = VerdictPolicy::from_specs(suite.verdict.as_ref(), spec.verdict.as_ref());
    if let Some(a) = adaptive {
        verdict.looks = crate::measure::adaptive::looks(a, verdict.alpha);
    }
    MeasurementPlan {
        name: spec.name.clone(),
        preset: None,
        vms: spec.on.iter().map(|vm| MeasuredVm { vm: vm.clone(), commands: commands.clone() }).collect(),
        baseline: spec.baselines().first().map_or_else(|| spec.on[0].clone(), |b| b.to_string()),
        groups: match &spec.baseline {
            Some(BaselineSpec::Groups(g)) => g.clone(),
            _ => vec![],
        },
        repeat: match spec.repeat {
            None => DEFAULT_REPEAT,
            Some(RepeatSpec::Count(n)) => n,
            Some(_) => adaptive.map_or(DEFAULT_REPEAT, |a| a.max),
        },
        adaptive,
        warmup: spec.warmup.unwrap_or(0),
        concurrent: spec.concurrent.unwrap_or(false),
        calibrate: spec.calibrate.unwrap_or(false),
        expect_exit: spec.expect_exit.unwrap_or(0),
        observers,
        remote,
        records: spec
            .record
            .iter()
            .map(|r| Record { name: r.name.clone(), command: r.run.clone(), when: r.when.unwrap_or_default() })
            .collect(),
        actions: actions(spec),
        bytes: spec.bytes.map(Bytes::Fixed),
        output_metric,
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
            values: snap.values,
            sections: snap.sections,
        },
        verdict,
        iterations: vec![],
    }
}

/// The actions of `spec.each`, `before` then `after`, each list in order.
fn actions(spec: &MeasureSpec) -> Vec<Action> {
    let Some(each) = &spec.each else { return vec![] };
    let list = |specs: &[crate::schema::measure::ActionSpec], when: When| -> Vec<Action> {
        specs
            .iter()
            .zip(1..)
            .map(|(a, number)| Action { vm: a.on.clone(), command: a.run.clone(), when, number })
            .collect()
    };
    let mut all = list(&each.before, When::Before);
    all.extend(list(&each.after, When::After));
    all
}

/// A validated `metric:` (exactly one of `json` and `regex`).
fn output_metric(o: &OutputMetricSpec) -> OutputMetric {
    let extract = match (&o.json, &o.regex) {
        (Some(pointer), _) => Extract::Json(pointer.clone()),
        (None, re) => Extract::Regex(re.clone().unwrap_or_default()),
    };
    OutputMetric {
        name: o.name.clone().unwrap_or_else(|| DEFAULT_OUTPUT_METRIC.into()),
        from: o.from.clone().unwrap_or(MetricFrom::Stdout),
        extract,
        unit: o.unit.clone(),
        better: o.better.unwrap_or(Better::Lower),
    }
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
