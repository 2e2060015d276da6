//! A compiled measurement ([`MeasurementPlan`]) and its expansion into steps.
//!
//! [`expand`] adds, for every round (warm-up rounds first, then the measured ones) and
//! every measured VM in order, one iteration step (the script of
//! [`super::script::iteration_script`]) to that VM; with `concurrent: false` each
//! iteration waits for the one before it, so one VM is measured at a time; with
//! `concurrent: true`, every iteration of a round (warm-up rounds too) waits for every
//! iteration of the round before (and its `after` actions) to end, so that a round's
//! iterations start together and a fast VM's later iterations never run alone (and
//! the stopping rule of adaptive repeats sees whole rounds). Each remote
//! observer adds a step to its VM before every iteration and one after the last; the
//! plan records which remote steps surround which iteration
//! ([`Iteration::remote`]), so the analysis never rebuilds step names. Each action of
//! `each:` adds a step to its VM around every iteration (or round), likewise listed
//! in [`Iteration::actions`]. With `calibrate: true` every measured round ends with
//! the baseline VM's A/A copy ([`Iteration::copy`], step `<name>-aa-<N>`): the same
//! commands on the same VM, a second set of iterations interleaved with the others
//! and waited for like theirs, so that its values differ from the baseline's by the
//! noise of the run alone.

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
///
/// With `concurrent: true` every round is a barrier: each iteration of round `r + 1`
/// waits for all of round `r` (its iterations, or its last `after` action) to end,
/// directly or through the round's `before` actions.
pub fn expand(
    m: &mut MeasurementPlan,
    vms: &mut [VmPlan],
    after: &[Dependency],
    timeout: Duration,
    origin: &str,
    previous: &mut Option<Dependency>,
) {
    // Remote observations need one iteration at a time to belong to one iteration.
    let mut remote = Remote {
        observers: if m.concurrent { vec![] } else { m.remote.iter().cloned().enumerate().collect() },
        open: vec![None; m.remote.len()],
        measurement: &m.name,
        timeout,
        origin,
    };
    let actions = m.actions.clone();
    let place = |vms: &mut [VmPlan], round: Option<u32>, when: When, vm: Option<&str>, step: &str, waits| {
        add_actions(&actions, vms, ActionSite { when, measured: vm, step, round, waits }, &m.name, timeout, origin)
    };
    // With `concurrent: true`: what the next round's first steps wait for (the barrier
    // between rounds): the last `after` action of the round, or all its iterations.
    let mut round_end: Vec<Dependency> = Vec::new();
    for round in 1..=m.warmup + m.repeat {
        let warmup = round <= m.warmup;
        let number = if warmup { round } else { round - m.warmup };
        let round_step = names::iteration(&m.name, warmup, number);
        // The measured round an action surrounds: with adaptive repeats it runs only
        // when its round is needed.
        let measured_round = (!warmup).then_some(number);
        let barrier = std::mem::take(&mut round_end);
        let round_before = if m.concurrent {
            let waits = after.iter().cloned().chain(barrier.iter().cloned()).collect();
            place(vms, measured_round, When::Before, None, &round_step, waits)
        } else {
            vec![]
        };
        let first_of_round = m.iterations.len();
        // `calibrate: true` (never concurrent): the baseline's A/A copy runs last in
        // every measured round, as if it were one more candidate.
        let copy = (m.calibrate && !warmup).then(|| m.vms.iter().find(|v| v.vm == m.baseline)).flatten();
        let entries: Vec<_> = m.vms.iter().map(|v| (v.clone(), false)).chain(copy.map(|v| (v.clone(), true))).collect();
        for (mv, is_copy) in &entries {
            let step = if *is_copy {
                names::iteration_copy(&m.name, number)
            } else {
                names::iteration(&m.name, warmup, number)
            };
            let mut deps: Vec<Dependency> = after.to_vec();
            if !m.concurrent {
                deps.extend(previous.clone());
            }
            // `before` actions already wait for the barrier; without them, the round does.
            if round_before.is_empty() {
                deps.extend(barrier.iter().cloned());
            }
            let readings = remote.before(vms, &mut m.iterations, &mv.vm, &step, previous, &mut deps);
            let mut its_actions = if m.concurrent {
                round_before.clone()
            } else {
                place(vms, measured_round, When::Before, Some(&mv.vm), &step, deps.clone())
            };
            deps.extend(its_actions.iter().map(|a| Dependency::passed_else_skip(&a.vm, &a.step)));
            let script = iteration_script(&step, &mv.commands, &m.observers, &m.records, m.metric_file());
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
                let ended = vec![Dependency::ended(&mv.vm, &step)];
                let done = place(vms, measured_round, When::After, Some(&mv.vm), &step, ended);
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
                copy: *is_copy,
                remote: readings,
                actions: its_actions,
            });
        }
        if m.concurrent {
            let ended: Vec<Dependency> =
                m.iterations[first_of_round..].iter().map(|i| Dependency::ended(&i.vm, &i.step)).collect();
            let done = place(vms, measured_round, When::After, None, &round_step, ended.clone());
            round_end = match done.last() {
                Some(last) => vec![Dependency::ended(&last.vm, &last.step)],
                None => ended,
            };
            for it in &mut m.iterations[first_of_round..] {
                it.actions.extend(done.iter().cloned());
            }
        }
    }
    remote.finish(vms, &mut m.iterations, previous);
}

/// The index of VM `name` in `vms`. Panics when it is not there (validated).
fn vm_index(vms: &[VmPlan], name: &str) -> usize {
    vms.iter().position(|v| v.name == name).expect("validated VM")
}

/// The remote observers of a measurement as its iterations are added: each reads its
/// VM before every iteration and once after the last, so that one reading is both the
/// `after` of an iteration and the `before` of the next.
struct Remote<'a> {
    /// Each observer with its index in the measurement's `remote` (none when the
    /// measurement is concurrent).
    observers: Vec<(usize, RemoteObserver)>,
    /// Per observer: the iteration and reading whose `after` step is still to be named.
    open: Vec<Option<(usize, usize)>>,
    /// The measurement's name.
    measurement: &'a str,
    /// Limits each step.
    timeout: Duration,
    /// The steps' origin (key path in the suite).
    origin: &'a str,
}

impl Remote<'_> {
    /// Adds each observer's reading before iteration `step` of measured VM `measured`
    /// (the next one to be pushed to `iterations`) to the observer's VM, after
    /// `previous`; the iteration waits for it (`deps`) unless it is on its own VM. The
    /// reading also ends the observer's previous iteration. Returns the iteration's
    /// readings.
    fn before(
        &mut self,
        vms: &mut [VmPlan],
        iterations: &mut [Iteration],
        measured: &str,
        step: &str,
        previous: &Option<Dependency>,
        deps: &mut Vec<Dependency>,
    ) -> Vec<RemoteReading> {
        let mut readings = Vec::new();
        for (ri, r) in &self.observers {
            let RemoteObserver::Netem { vm: rvm, seeded } = r;
            let name = names::netem_before(*seeded, measured, step);
            let script =
                if *seeded { netem::reseed_script(&vms[vm_index(vms, rvm)]) } else { netem::STATS_SCRIPT.into() };
            let rv = vm_index(vms, rvm);
            vms[rv].steps.push(
                StepPlan::new(&name, script, StepKind::observe(self.measurement, r), self.timeout)
                    .after(previous.iter().cloned())
                    .origin(self.origin),
            );
            if rvm != measured {
                deps.push(Dependency::step(rvm, &name));
            }
            if let Some((it, rd)) = self.open[*ri].take() {
                let reading: &mut RemoteReading = &mut iterations[it].remote[rd];
                reading.after = name.clone();
            }
            self.open[*ri] = Some((iterations.len(), readings.len()));
            readings.push(RemoteReading { observer: *ri, vm: rvm.clone(), before: name, after: String::new() });
        }
        readings
    }

    /// Adds each observer's final reading, after `previous` (the last iteration), which
    /// ends its last iteration.
    fn finish(&mut self, vms: &mut [VmPlan], iterations: &mut [Iteration], previous: &Option<Dependency>) {
        for (ri, r) in &self.observers {
            let name = names::netem_final(self.measurement);
            let rv = vm_index(vms, r.vm());
            vms[rv].steps.push(
                StepPlan::new(&name, netem::STATS_SCRIPT.into(), StepKind::observe(self.measurement, r), self.timeout)
                    .after(previous.iter().cloned())
                    .origin(self.origin),
            );
            if let Some((it, rd)) = self.open[*ri].take() {
                iterations[it].remote[rd].after = name;
            }
        }
    }
}

/// Where a list of actions goes: before or after iteration (or round) `step` of
/// measured VM `measured` (`None`: a concurrent round), once `waits` are met.
struct ActionSite<'a> {
    when: When,
    measured: Option<&'a str>,
    step: &'a str,
    /// The measured round (`None`: a warm-up round).
    round: Option<u32>,
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
        let kind = StepKind::Action {
            measurement: measurement.to_string(),
            when: a.when,
            action: a.number,
            round: site.round,
        };
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

#[cfg(test)]
mod tests {
    use std::path::Path;

    use crate::plan::{Plan, Until};

    /// A server and two measured clients; `extra` goes into the measurement.
    fn plan(extra: &str) -> Plan {
        let text = format!(
            "name: demo\nnetwork: {{subnet: 10.80.0.0/24}}\nvms:\n\
             - {{name: server, kernel: {{debian: \"6.1\"}}, address: 10.80.0.1}}\n\
             - {{name: a, kernel: {{debian: \"6.1\"}}, address: 10.80.0.10}}\n\
             - {{name: b, kernel: {{debian: \"6.1\"}}, address: 10.80.0.11}}\n\
             measure:\n  - name: m\n    on: [a, b]\n    repeat: 2\n    run: 'true'\n    after: [server]\n{extra}"
        );
        let file = crate::schema::load::parse_suite(Path::new("demo.yaml"), text).expect("parses");
        let images = Path::new(env!("CARGO_MANIFEST_DIR")).join("../images");
        let catalog = crate::infra::images::Catalog::load(&images).expect("images/");
        crate::suite::compile(&file, &catalog).unwrap_or_else(|e| panic!("{e}"))
    }

    /// Step `step` of VM `vm`, and what it waits for as `vm/step:until`.
    fn waits(p: &Plan, vm: &str, step: &str) -> Vec<String> {
        let v = p.vms.iter().find(|v| v.name == vm).expect("VM");
        let s = v.steps.iter().find(|s| s.name == step).unwrap_or_else(|| panic!("{vm}/{step}"));
        s.after
            .iter()
            .map(|d| {
                let until = match d.until {
                    Until::Passed => "passed",
                    Until::Ended => "ended",
                    Until::PassedElseSkip => "else-skip",
                };
                format!("{d}:{until}")
            })
            .collect()
    }

    const EACH: &str = "    each:\n      before: [{on: server, run: r1}, {on: server, run: r2}]\n      after: [{on: server, run: a1}]\n";

    #[test]
    fn sequential_actions_surround_every_iteration_in_order() {
        let p = plan(EACH);
        let server: Vec<&str> = p.vms[0].steps.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(
            server,
            [
                "action-before-1-a-m-1",
                "action-before-2-a-m-1",
                "action-after-1-a-m-1",
                "action-before-1-b-m-1",
                "action-before-2-b-m-1",
                "action-after-1-b-m-1",
                "action-before-1-a-m-2",
                "action-before-2-a-m-2",
                "action-after-1-a-m-2",
                "action-before-1-b-m-2",
                "action-before-2-b-m-2",
                "action-after-1-b-m-2",
            ]
        );
        // The first action waits for what the iteration waits for, the next for it.
        assert_eq!(
            waits(&p, "server", "action-before-1-b-m-1"),
            ["server:else-skip", "server/action-after-1-a-m-1:ended"]
        );
        assert_eq!(waits(&p, "server", "action-before-2-b-m-1"), ["server/action-before-1-b-m-1:else-skip"]);
        assert_eq!(
            waits(&p, "b", "m-1"),
            [
                "server:passed",
                "server/action-after-1-a-m-1:ended",
                "server/action-before-1-b-m-1:else-skip",
                "server/action-before-2-b-m-1:else-skip"
            ]
        );
        assert_eq!(waits(&p, "server", "action-after-1-b-m-1"), ["b/m-1:ended"]);
        let m = &p.measurements[0];
        let steps: Vec<&str> = m.iterations[1].actions.iter().map(|a| a.step.as_str()).collect();
        assert_eq!(steps, ["action-before-1-b-m-1", "action-before-2-b-m-1", "action-after-1-b-m-1"]);
        assert_eq!(m.actions[2].key(), "each.after[0]");
        assert!(p.vms[0].steps[0].script.contains("sh -c 'r1'"), "{}", p.vms[0].steps[0].script);
    }

    #[test]
    fn concurrent_actions_surround_every_round() {
        let p = plan(&format!("    concurrent: true\n{EACH}"));
        let server: Vec<&str> = p.vms[0].steps.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(
            server,
            [
                "action-before-1-m-1",
                "action-before-2-m-1",
                "action-after-1-m-1",
                "action-before-1-m-2",
                "action-before-2-m-2",
                "action-after-1-m-2"
            ]
        );
        assert_eq!(waits(&p, "server", "action-after-1-m-1"), ["a/m-1:ended", "b/m-1:ended"]);
        assert_eq!(waits(&p, "server", "action-before-1-m-2"), ["server:else-skip", "server/action-after-1-m-1:ended"]);
        for vm in ["a", "b"] {
            assert_eq!(
                waits(&p, vm, "m-2"),
                ["server:passed", "server/action-before-1-m-2:else-skip", "server/action-before-2-m-2:else-skip"]
            );
        }
        let m = &p.measurements[0];
        assert!(m.iterations.iter().all(|i| i.actions.len() == 3), "{:?}", m.iterations);
    }

    #[test]
    fn every_concurrent_round_waits_for_the_whole_round_before_warmup_too() {
        let p = plan("    concurrent: true\n    warmup: 1\n");
        for vm in ["a", "b"] {
            assert_eq!(waits(&p, vm, "m-warmup-1"), ["server:passed"]);
            assert_eq!(waits(&p, vm, "m-1"), ["server:passed", "a/m-warmup-1:ended", "b/m-warmup-1:ended"]);
            assert_eq!(waits(&p, vm, "m-2"), ["server:passed", "a/m-1:ended", "b/m-1:ended"]);
        }
    }

    #[test]
    fn concurrent_rounds_with_only_after_actions_wait_for_them() {
        let p = plan("    concurrent: true\n    each: {after: [{on: server, run: a1}]}\n");
        assert_eq!(waits(&p, "server", "action-after-1-m-1"), ["a/m-1:ended", "b/m-1:ended"]);
        for vm in ["a", "b"] {
            assert_eq!(waits(&p, vm, "m-2"), ["server:passed", "server/action-after-1-m-1:ended"]);
        }
    }

    #[test]
    fn actions_name_the_measured_round_they_surround() {
        use crate::plan::StepKind;
        let p = plan(&format!("    warmup: 1\n{EACH}"));
        let rounds: Vec<(&str, Option<u32>)> = p.vms[0]
            .steps
            .iter()
            .filter_map(|s| match &s.kind {
                StepKind::Action { round, .. } => Some((s.name.as_str(), *round)),
                _ => None,
            })
            .filter(|(name, _)| name.starts_with("action-before-1-a-"))
            .collect();
        // The warm-up round's actions always run; a measured round's run when it does.
        assert_eq!(
            rounds,
            [
                ("action-before-1-a-m-warmup-1", None),
                ("action-before-1-a-m-1", Some(1)),
                ("action-before-1-a-m-2", Some(2)),
            ]
        );
    }

    #[test]
    fn calibrate_adds_a_second_set_of_baseline_iterations_interleaved_with_the_others() {
        let p = plan("    warmup: 1\n    calibrate: true\n");
        let steps = |vm: &str| -> Vec<String> {
            p.vms.iter().find(|v| v.name == vm).expect("VM").steps.iter().map(|s| s.name.clone()).collect()
        };
        assert_eq!(steps("a"), ["m-warmup-1", "m-1", "m-aa-1", "m-2", "m-aa-2"], "no copy of warm-ups");
        assert_eq!(steps("b"), ["m-warmup-1", "m-1", "m-2"]);
        // Each round: a, b, then a's copy, which waits for b like another candidate.
        assert_eq!(waits(&p, "a", "m-aa-1"), ["server:passed", "b/m-1:ended"]);
        assert_eq!(waits(&p, "a", "m-2"), ["server:passed", "a/m-aa-1:ended"]);
        let m = &p.measurements[0];
        let copies: Vec<(&str, u32)> =
            m.iterations.iter().filter(|i| i.copy).map(|i| (i.step.as_str(), i.number)).collect();
        assert_eq!(copies, [("m-aa-1", 1), ("m-aa-2", 2)]);
        assert!(m.iterations.iter().filter(|i| i.copy).all(|i| i.vm == "a" && !i.warmup));
    }

    #[test]
    fn concurrent_rounds_with_only_before_actions_wait_for_the_round_before() {
        let p = plan("    concurrent: true\n    each: {before: [{on: server, run: r1}]}\n");
        assert_eq!(waits(&p, "server", "action-before-1-m-2"), ["server:else-skip", "a/m-1:ended", "b/m-1:ended"]);
    }
}
