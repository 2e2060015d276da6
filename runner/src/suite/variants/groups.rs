//! Baselines within groups: `baseline: {axis: A, value: V}` of a measurement splits the
//! variants of each VM of `on` into groups that agree on every axis but `A` (their name:
//! the VM's and those axes' labels, `client-v6-1`), and makes the variant with `A` = `V`
//! each group's baseline. Each group is compared on its own.

use std::collections::BTreeMap;

use super::matrix::{matches, Combo};
use super::{Axis, AXES};
use crate::schema::measure::{BaselineGroup, BaselineSpec};
use crate::schema::text::{scalar_text, shown};
use crate::schema::SuiteSpec;
use crate::suite::validate::ValidationError;

/// The variants of each VM that has them: VM name → `[(variant name, its combination)]`.
pub(super) type Variants = BTreeMap<String, Vec<(String, Combo)>>;

/// For each measurement of `spec` (by index) whose baseline is an axis value, its
/// groups; the problems of such baselines go into `errs`.
pub(super) fn groups(
    spec: &SuiteSpec,
    variants: &Variants,
    errs: &mut Vec<ValidationError>,
) -> BTreeMap<usize, Vec<BaselineGroup>> {
    let mut out = BTreeMap::new();
    for (mi, m) in spec.measure.iter().enumerate() {
        let Some(BaselineSpec::Axis(b)) = &m.baseline else { continue };
        let key = format!("measure[{mi}].baseline");
        let rule = |key: String, message: String| ValidationError::Rule { key, message };
        let Some(axis) = Axis::parse(&b.axis) else {
            errs.push(rule(format!("{key}.axis"), format!("{:?} is not a variant axis (axes: {AXES})", b.axis)));
            continue;
        };
        let varies = |vm: &str| {
            variants
                .get(vm)
                .is_some_and(|vs| vs.iter().any(|(_, c)| c.iter().any(|(a, av)| *a == axis && !av.label.is_empty())))
        };
        if !m.on.iter().any(|vm| varies(vm)) {
            let with: Vec<&str> = m.on.iter().filter(|vm| variants.contains_key(*vm)).map(String::as_str).collect();
            let hint = if with.is_empty() {
                "no VM of it has variants".to_string()
            } else {
                format!("its VMs with variants ({}) don't vary it", with.join(", "))
            };
            errs.push(rule(format!("{key}.axis"), format!("no VM of measure[{mi}].on varies {}: {hint}", b.axis)));
            continue;
        }
        let value = shown(&scalar_text(&b.value), 80);
        let mut groups: Vec<BaselineGroup> = Vec::new();
        for (k, vm) in m.on.iter().enumerate() {
            if !varies(vm) {
                errs.push(rule(
                    format!("measure[{mi}].on[{k}]"),
                    format!(
                        "VM {vm} does not vary {}, so it is in no group with a baseline ({} = {value}); measure it in another measurement",
                        b.axis, b.axis
                    ),
                ));
                continue;
            }
            let vs = &variants[vm.as_str()];
            let mut mine: Vec<BaselineGroup> = Vec::new();
            let mut base_seen = false;
            for (name, combo) in vs {
                let others: Vec<&str> = combo
                    .iter()
                    .filter(|(a, av)| *a != axis && !av.label.is_empty())
                    .map(|(_, av)| av.label.as_str())
                    .collect();
                let gname = std::iter::once(vm.as_str()).chain(others).collect::<Vec<_>>().join("-");
                let is_base = combo.iter().any(|(a, av)| *a == axis && !av.label.is_empty() && matches(av, &b.value));
                base_seen |= is_base;
                let g = match mine.iter_mut().find(|g| g.name == gname) {
                    Some(g) => g,
                    None => {
                        mine.push(BaselineGroup { name: gname, baseline: String::new(), vms: vec![] });
                        mine.last_mut().expect("pushed")
                    }
                };
                g.vms.push(name.clone());
                if is_base && g.baseline.is_empty() {
                    g.baseline = name.clone();
                }
            }
            if !base_seen {
                let mut labels: Vec<&str> = vs
                    .iter()
                    .flat_map(|(_, c)| c.iter().filter(|(a, _)| *a == axis).map(|(_, av)| av.label.as_str()))
                    .collect();
                labels.sort_unstable();
                labels.dedup();
                errs.push(rule(
                    format!("{key}.value"),
                    format!("{value} is not a value of {} on VM {vm} (its labels: {})", b.axis, labels.join(", ")),
                ));
                continue;
            }
            for g in &mine {
                if g.baseline.is_empty() {
                    errs.push(rule(
                        key.clone(),
                        format!(
                            "the group {} ({}) has no variant with {} = {value} to be its baseline (an exclusion removed it?); include it, or measure these VMs elsewhere",
                            g.name,
                            g.vms.join(", "),
                            b.axis
                        ),
                    ));
                }
            }
            groups.extend(mine);
        }
        out.insert(mi, groups);
    }
    out
}
