//! A compiled measurement ([`MeasurementPlan`]) and its expansion into steps.
//!
//! [`expand`] adds, for every round (warm-up rounds first, then the measured ones) and
//! every measured VM in order, one iteration step (the script of
//! [`super::script::iteration_script`]) to that VM; with `concurrent: false` each
//! iteration waits for the one before it, so one VM is measured at a time. Each remote
//! observer adds a step to its VM before every iteration and one after the last; the
//! plan records which remote steps surround which iteration
//! ([`Iteration::remote`]), so the analysis never rebuilds step names. Each action of
//! `each:` adds a step to its VM around every iteration (or round), likewise listed
//! in [`Iteration::actions`].

use std::time::Duration;

use super::script::iteration_script;
use crate::plan::measurement::{Action, ActionStep, Iteration, MeasurementPlan, RemoteObserver, RemoteReading, When};
use crate::plan::{names, netem, shell_quote, Dependency, StepKind, StepPlan, Until, VmPlan};

/// Adds `m`'s steps to `vms` and fills [`MeasurementPlan::iterations`].
///
/// `after` is what every iteration waits for; `previous` is the last iteration of the
/// measurement before (for sequential measurements), and is left at this one's last.
/// Iterations wait for the one before them only to have *ended*: a VM whose iteration
/// fails or hangs does not keep the others from being measured.
/// `timeout` limits each step. Panics if `m` names a VM that `vms` lacks (validated).
///
/// Actions (`each:`) become steps on their VMs: the `before` ones wait for what the
/// iteration waits for, each for the one before it, and the iteration waits for all
/// of them to pass (a failed one skips only that iteration); the `after` ones wait for
/// the iteration to end, and the next iteration waits for them to end. With
/// `concurrent: true` they surround each round instead: the round's iterations wait
/// for its `before` actions, its `after` actions for all of its iterations, and the
/// next round's actions for those.
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
    let actions = m.actions.clone();
    let place = |vms: &mut [VmPlan], when: When, vm: Option<&str>, step: &str, waits: Vec<Dependency>| {
        add_actions(&actions, vms, ActionSite { when, measured: vm, step, waits }, &m.name, timeout, origin)
    };
    // With `concurrent: true` and actions: what the next round's first step waits for.
    let mut round_end: Vec<Dependency> = Vec::new();
    for round in 1..=m.warmup + m.repeat {
        let warmup = round <= m.warmup;
        let number = if warmup { round } else { round - m.warmup };
        let round_step = names::iteration(&m.name, warmup, number);
        let round_before = if m.concurrent {
            let waits = after.iter().cloned().chain(round_end.drain(..)).collect();
            place(vms, When::Before, None, &round_step, waits)
        } else {
            vec![]
        };
        let first_of_round = m.iterations.len();
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
            let mut its_actions = if m.concurrent {
                round_before.clone()
            } else {
                place(vms, When::Before, Some(&mv.vm), &step, deps.clone())
            };
            deps.extend(its_actions.iter().map(|a| Dependency::passed_else_skip(&a.vm, &a.step)));
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
            *previous = Some(Dependency::ended(&mv.vm, &step));
            if !m.concurrent {
                let done = place(vms, When::After, Some(&mv.vm), &step, vec![Dependency::ended(&mv.vm, &step)]);
                if let Some(last) = done.last() {
                    *previous = Some(Dependency::ended(&last.vm, &last.step));
                }
                its_actions.extend(done);
            }
            m.iterations.push(Iteration {
                vm: mv.vm.clone(),
                step: step.clone(),
                number,
                warmup,
                remote: readings,
                actions: its_actions,
            });
        }
        if m.concurrent && !actions.is_empty() {
            let ended: Vec<Dependency> =
                m.iterations[first_of_round..].iter().map(|i| Dependency::ended(&i.vm, &i.step)).collect();
            let done = place(vms, When::After, None, &round_step, ended.clone());
            round_end = match done.last() {
                Some(last) => vec![Dependency::ended(&last.vm, &last.step)],
                None => ended,
            };
            for it in &mut m.iterations[first_of_round..] {
                it.actions.extend(done.iter().cloned());
            }
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

/// Where a list of actions goes: before or after iteration (or round) `step` of
/// measured VM `measured` (`None`: a concurrent round), once `waits` are met.
struct ActionSite<'a> {
    when: When,
    measured: Option<&'a str>,
    step: &'a str,
    waits: Vec<Dependency>,
}

/// Adds the steps of `actions`' `site.when` list to their VMs, in order, and returns
/// them. The first waits for `site.waits`; each `before` action waits for the one
/// before it to pass, each `after` one for the one before it to end.
fn add_actions(
    actions: &[Action],
    vms: &mut [VmPlan],
    site: ActionSite<'_>,
    measurement: &str,
    timeout: Duration,
    origin: &str,
) -> Vec<ActionStep> {
    let mut placed: Vec<ActionStep> = Vec::new();
    for (index, a) in actions.iter().enumerate().filter(|(_, a)| a.when == site.when) {
        let before = site.when == When::Before;
        let name = names::action(before, a.number as usize, site.measured, site.step);
        // A dependency that did not pass skips this action only: an action's VM (often
        // the server) goes on with its later steps.
        let waits = match placed.last() {
            None => site
                .waits
                .iter()
                .map(|d| match d.until {
                    Until::Passed => Dependency { until: Until::PassedElseSkip, ..d.clone() },
                    _ => d.clone(),
                })
                .collect(),
            Some(p) if before => vec![Dependency::passed_else_skip(&p.vm, &p.step)],
            Some(p) => vec![Dependency::ended(&p.vm, &p.step)],
        };
        let v = vms.iter().position(|v| v.name == a.vm).expect("validated VM");
        let kind = StepKind::Action { measurement: measurement.to_string(), when: a.when, action: a.number };
        vms[v].steps.push(StepPlan::new(&name, action_script(&a.command), kind, timeout).after(waits).origin(origin));
        placed.push(ActionStep { action: index, vm: a.vm.clone(), step: name });
    }
    placed
}

/// The guest script of an action: `command` with its stderr into its stdout, so that
/// the two are kept in the order they were printed.
pub fn action_script(command: &str) -> String {
    format!("exec 2>&1\nsh -c {}\n", shell_quote(command))
}
