//! Rules only the compiled plan can check, because they involve the steps the runner
//! generates: every `after` target exists, no two steps of a VM share a name, and no
//! wait can never end.
//!
//! The steps form a graph: each step waits for the step before it on its VM (a VM runs
//! its steps in order) and for its `after` targets. A cycle in that graph is a set of
//! waits that can never end; it is reported with the whole cycle spelt out, at the
//! `after` entry that closes it.

use std::collections::{BTreeMap, BTreeSet};

use super::ValidationError;
use crate::plan::{Dependency, Plan, StepKind};
use crate::schema::SuiteSpec;

/// An edge of the wait graph: why step `from` waits for step `to`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Why {
    /// `from` comes after `to` on the same VM.
    Order,
    /// `from`'s `after` entry number `n` names `to`.
    After(usize),
}

/// A step: (VM index, step index) in the plan.
type Node = (usize, usize);

/// Checks the compiled `plan` of `spec`; see the module docs.
pub fn check_graph(spec: &SuiteSpec, plan: &Plan) -> Vec<ValidationError> {
    let mut errs = Vec::new();
    let index = step_index(plan, &mut errs);
    let key_of = |v: usize, s: usize, n: usize| after_key(spec, plan, v, s, n);
    let edges = wait_edges(plan, &index, &key_of, &mut errs);
    find_cycles(plan, &edges, &key_of, &mut errs);
    errs
}

/// Every step by (VM name, step name); a second step of a VM with the same name is an
/// error at its origin.
fn step_index<'a>(plan: &'a Plan, errs: &mut Vec<ValidationError>) -> BTreeMap<(&'a str, &'a str), Node> {
    let mut index: BTreeMap<(&str, &str), Node> = BTreeMap::new();
    for (v, vm) in plan.vms.iter().enumerate() {
        for (s, st) in vm.steps.iter().enumerate() {
            if index.insert((vm.name.as_str(), st.name.as_str()), (v, s)).is_some() {
                errs.push(ValidationError::Rule {
                    key: st.origin.clone().unwrap_or_else(|| format!("vms[{v}]")),
                    message: format!("VM {} would have two steps named {:?}", vm.name, st.name),
                });
            }
        }
    }
    index
}

/// The key path in the suite of `after` entry `n` of step `s` of VM `v`: the step's own
/// `after[n]` for a user step, the measurement's `after` entry that produced it for an
/// iteration, else the step's origin.
fn after_key(spec: &SuiteSpec, plan: &Plan, v: usize, s: usize, n: usize) -> String {
    let st = &plan.vms[v].steps[s];
    let origin = st.origin.clone().unwrap_or_else(|| format!("vms[{v}]"));
    match &st.kind {
        StepKind::User => format!("{origin}.after[{n}]"),
        StepKind::Measure { .. } => {
            // The entry of the measurement's own `after` that produced this one.
            let m =
                origin.strip_prefix("measure[").and_then(|r| r.strip_suffix(']')).and_then(|i| i.parse::<usize>().ok());
            let dep = &st.after[n];
            m.and_then(|i| spec.measure.get(i))
                .and_then(|ms| ms.after.iter().position(|a| Dependency::parse(a).key() == dep.key()))
                .map_or(origin.clone(), |j| format!("{origin}.after[{j}]"))
        }
        _ => origin,
    }
}

/// The wait graph's edges, by VM and step index: each step waits for the one before it
/// on its VM and for its `after` targets. An `after` naming a VM or step that does not
/// exist is an error (at `key_of(vm, step, entry)`) and no edge.
fn wait_edges(
    plan: &Plan,
    index: &BTreeMap<(&str, &str), Node>,
    key_of: &dyn Fn(usize, usize, usize) -> String,
    errs: &mut Vec<ValidationError>,
) -> Vec<Vec<Vec<(Node, Why)>>> {
    let mut edges: Vec<Vec<Vec<(Node, Why)>>> = plan.vms.iter().map(|vm| vec![Vec::new(); vm.steps.len()]).collect();
    for (v, vm) in plan.vms.iter().enumerate() {
        for (s, st) in vm.steps.iter().enumerate() {
            if s > 0 {
                edges[v][s].push(((v, s - 1), Why::Order));
            }
            for (n, dep) in st.after.iter().enumerate() {
                let Some(target_vm) = plan.vms.iter().find(|x| x.name == dep.vm) else {
                    errs.push(ValidationError::Unknown {
                        key: key_of(v, s, n),
                        what: "VM",
                        value: dep.vm.clone(),
                        hint: format!(
                            " (VMs: {})",
                            plan.vms.iter().map(|x| x.name.as_str()).collect::<Vec<_>>().join(", ")
                        ),
                    });
                    continue;
                };
                let Some(step) = &dep.step else { continue };
                match index.get(&(dep.vm.as_str(), step.as_str())) {
                    Some(&to) => edges[v][s].push((to, Why::After(n))),
                    None => errs.push(ValidationError::Unknown {
                        key: key_of(v, s, n),
                        what: "step",
                        value: dep.to_string(),
                        hint: format!(
                            " (steps of {}: {})",
                            dep.vm,
                            target_vm.steps.iter().map(|x| x.name.as_str()).collect::<Vec<_>>().join(", ")
                        ),
                    }),
                }
            }
        }
    }
    edges
}

/// Reports each cycle of `edges` once (whatever step it is entered from), by a
/// depth-first search, iterative because plans can hold thousands of steps.
fn find_cycles(
    plan: &Plan,
    edges: &[Vec<Vec<(Node, Why)>>],
    key_of: &dyn Fn(usize, usize, usize) -> String,
    errs: &mut Vec<ValidationError>,
) {
    let name = |(v, s): (usize, usize)| format!("{}/{}", plan.vms[v].name, plan.vms[v].steps[s].name);
    let mut state: Vec<Vec<u8>> = plan.vms.iter().map(|vm| vec![0u8; vm.steps.len()]).collect(); // 0 new, 1 on stack, 2 done
    let mut reported: BTreeSet<Vec<(usize, usize)>> = BTreeSet::new();
    for v in 0..plan.vms.len() {
        for s in 0..plan.vms[v].steps.len() {
            if state[v][s] != 0 {
                continue;
            }
            // Stack of (node, next edge to follow); `path` mirrors the nodes on it with
            // the edge that led to each.
            let mut stack: Vec<((usize, usize), usize)> = vec![((v, s), 0)];
            let mut path: Vec<((usize, usize), Option<Why>)> = vec![((v, s), None)];
            state[v][s] = 1;
            while let Some(&mut (node, ref mut next)) = stack.last_mut() {
                let out = &edges[node.0][node.1];
                if *next < out.len() {
                    let (to, why) = out[*next];
                    *next += 1;
                    match state[to.0][to.1] {
                        0 => {
                            state[to.0][to.1] = 1;
                            stack.push((to, 0));
                            path.push((to, Some(why)));
                        }
                        1 => {
                            let start = path.iter().position(|(n, _)| *n == to).expect("on the stack");
                            let mut cycle: Vec<((usize, usize), Why)> =
                                path[start + 1..].iter().map(|(n, w)| (*n, w.expect("not the root"))).collect();
                            cycle.push((to, why));
                            let mut nodes: Vec<(usize, usize)> = cycle.iter().map(|(n, _)| *n).collect();
                            nodes.sort();
                            if reported.insert(nodes) {
                                errs.push(cycle_error(&cycle, path[start].0, &name, key_of));
                            }
                        }
                        _ => {}
                    }
                } else {
                    state[node.0][node.1] = 2;
                    stack.pop();
                    path.pop();
                }
            }
        }
    }
}

/// The error for a cycle that starts at `first` and follows `cycle` (each node with the
/// edge that led to it) back to `first`.
fn cycle_error(
    cycle: &[((usize, usize), Why)],
    first: (usize, usize),
    name: &dyn Fn((usize, usize)) -> String,
    key_of: &dyn Fn(usize, usize, usize) -> String,
) -> ValidationError {
    let mut words = Vec::new();
    let mut from = first;
    let mut key = None;
    for (to, why) in cycle {
        match why {
            Why::Order => words.push(format!("{} runs after {}", name(from), name(*to))),
            Why::After(n) => {
                words.push(format!("{} waits for {}", name(from), name(*to)));
                key.get_or_insert_with(|| key_of(from.0, from.1, *n));
            }
        }
        from = *to;
    }
    ValidationError::Rule {
        key: key.unwrap_or_else(|| key_of(first.0, first.1, 0)),
        message: format!("these waits can never end: {}", words.join(", ")),
    }
}
