//! A compiled measurement ([`MeasurementPlan`]) and its expansion into steps.
//!
//! [`expand`] adds, for every round (warm-up rounds first, then the measured ones) and
//! every measured VM in order, one iteration step (the script of
//! [`super::script::iteration_script`]) to that VM; with `concurrent: false` each
//! iteration waits for the one before it, so one VM is measured at a time; with
//! adaptive repeats and `concurrent: true`, each round waits for every VM's previous
//! one (the stopping rule looks at whole rounds). Each remote
//! observer adds a step to its VM before every iteration and one after the last; the
//! plan records which remote steps surround which iteration
//! ([`Iteration::remote`]), so the analysis never rebuilds step names.

use std::time::Duration;

use super::script::iteration_script;
use crate::plan::measurement::{Iteration, MeasurementPlan, RemoteObserver, RemoteReading};
use crate::plan::{names, netem, Dependency, StepKind, StepPlan, VmPlan};

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
    // Adaptive repeats decide after each whole round: concurrent VMs wait for it.
    let barrier = m.concurrent && m.adaptive.is_some();
    let mut last_round: Vec<Dependency> = vec![];
    for round in 1..=m.warmup + m.repeat {
        let warmup = round <= m.warmup;
        let number = if warmup { round } else { round - m.warmup };
        let mut this_round = vec![];
        for mv in &m.vms {
            let step = names::iteration(&m.name, warmup, number);
            let mut deps: Vec<Dependency> = after.to_vec();
            if !m.concurrent {
                deps.extend(previous.clone());
            }
            if barrier {
                deps.extend(last_round.iter().cloned());
                this_round.push(Dependency::ended(&mv.vm, &step));
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
            let script = iteration_script(&mv.commands, &m.observers, &m.records, m.metric_file());
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
        last_round = this_round;
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
