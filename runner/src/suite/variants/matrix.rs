//! `exclude:` and `include:` in a VM's `variants:`, with the semantics of a GitHub
//! Actions matrix (`jobs.<id>.strategy.matrix`): the product of the axes first, then
//! every `exclude` entry removes the combinations it matches, then every `include`
//! entry extends the combinations it matches or, when it matches none, adds one.
//!
//! ```yaml
//! variants:
//!   kernel: { v5-10: { debian: "5.10" }, v6-12: { debian: "6.12" } }
//!   env.ENGINE: [psync, io_uring]
//!   exclude:
//!     - { kernel: v5-10, env.ENGINE: io_uring }     # no io_uring on 5.10
//!   include:
//!     - { kernel: v6-12, env.DEPTH: "32" }          # extends client-v6-12-*
//! ```
//!
//! An entry is a map from axis to value; a value matches an axis value by its label
//! (`v5-10`) or by the value as written (`{debian: "5.10"}`). `exclude` names only
//! axes the product has and values they have. An `include` entry is matched on the
//! product's axes it names; its other axes extend every combination it matches (they
//! don't name the variant). When it matches none (a new value, or a combination an
//! `exclude` removed), it is a new combination and names every axis of the product.
//! Every entry must do something: an exclusion that removes nothing, or an inclusion
//! that matches combinations and adds nothing to them, is an error at its line.

use serde_yaml::Value;

use super::{label_ok, list_label, Axis, AxisValue, AXES, MAX_VALUES};
use crate::schema::text::scalar_text;
use crate::schema::VmSpec;
use crate::suite::validate::ValidationError;

/// One combination of axis values: a variant.
pub(super) type Combo = Vec<(Axis, AxisValue)>;

/// The keys of `variants:` that are no axis.
pub(super) const KEYS: [&str; 2] = ["exclude", "include"];

/// One axis value of an `exclude`/`include` entry.
struct Pair {
    axis: Axis,
    name: String,
    value: Value,
    key: String,
}

/// The entries of `vms[i].variants.<which>`, or what is wrong with them.
fn entries(vm: &VmSpec, i: usize, which: &str, errs: &mut Vec<ValidationError>) -> Vec<(String, Vec<Pair>)> {
    let key = format!("vms[{i}].variants.{which}");
    let Some(list) = vm.variants.get(which) else { return vec![] };
    let rule = |key: String, message: String| ValidationError::Rule { key, message };
    let Value::Sequence(list) = list else {
        errs.push(rule(key, format!("{which} is a list of maps from axis to value")));
        return vec![];
    };
    if list.len() > MAX_VALUES {
        errs.push(ValidationError::OutOfRange {
            key: key.clone(),
            value: format!("{} entries", list.len()),
            range: format!("at most {MAX_VALUES}"),
        });
        return vec![];
    }
    let mut out = Vec::new();
    for (j, e) in list.iter().enumerate() {
        let ekey = format!("{key}[{j}]");
        let Value::Mapping(m) = e else {
            errs.push(rule(ekey, "an entry is a map from axis to value (`{kernel: v6-1, env.LOAD: busy}`)".into()));
            continue;
        };
        if m.is_empty() {
            errs.push(rule(ekey, "an empty entry matches every combination; name at least one axis".into()));
            continue;
        }
        let mut pairs = Vec::new();
        for (name, value) in m {
            let name = scalar_text(name);
            let pkey = format!("{ekey}.{name}");
            match Axis::parse(&name) {
                Some(axis) => pairs.push(Pair { axis, name, value: value.clone(), key: pkey }),
                None => errs.push(rule(pkey, format!("{name:?} is not a variant axis (axes: {AXES})"))),
            }
        }
        out.push((ekey, pairs));
    }
    out
}

/// Whether the entry value `v` means the axis value `av`: its label or its value.
pub(super) fn matches(av: &AxisValue, v: &Value) -> bool {
    av.value == *v || matches!(v, Value::String(s) if *s == av.label)
}

/// The labels of `values`, for messages.
fn labels(values: &[AxisValue]) -> String {
    values.iter().map(|v| v.label.as_str()).collect::<Vec<_>>().join(", ")
}

/// `combos` (the product of `axes`, of VM `vm` = `vms[i]`) with the VM's `exclude`
/// and `include` applied, or every problem of them.
pub(super) fn edit(
    vm: &VmSpec,
    i: usize,
    axes: &[(Axis, Vec<AxisValue>)],
    mut combos: Vec<Combo>,
) -> Result<Vec<Combo>, Vec<ValidationError>> {
    let mut errs = Vec::new();
    let exclude = entries(vm, i, "exclude", &mut errs);
    let include = entries(vm, i, "include", &mut errs);
    let rule = |key: &str, message: String| ValidationError::Rule { key: key.to_string(), message };
    let product_axis = |a: &Axis| axes.iter().find(|(x, _)| x == a).map(|(_, v)| v.as_slice());
    let combo_matches = |c: &Combo, pairs: &[Pair]| {
        pairs
            .iter()
            .filter(|p| product_axis(&p.axis).is_some())
            .all(|p| c.iter().any(|(a, av)| *a == p.axis && matches(av, &p.value)))
    };
    for (ekey, pairs) in &exclude {
        let mut ok = true;
        for p in pairs {
            match product_axis(&p.axis) {
                None => {
                    errs.push(rule(
                        &p.key,
                        format!("VM {} does not vary {}, so no combination has it", vm.name, p.name),
                    ));
                    ok = false;
                }
                Some(values) if !values.iter().any(|av| matches(av, &p.value)) => {
                    errs.push(rule(
                        &p.key,
                        format!(
                            "{} is not a value of {} (its labels: {})",
                            crate::schema::text::shown(&scalar_text(&p.value), 80),
                            p.name,
                            labels(values)
                        ),
                    ));
                    ok = false;
                }
                Some(_) => {}
            }
        }
        if !ok {
            continue;
        }
        let before = combos.len();
        combos.retain(|c| !combo_matches(c, pairs));
        if combos.len() == before {
            errs.push(rule(ekey, "this exclusion matches no combination left by the ones before it".into()));
        }
    }
    for (ekey, pairs) in &include {
        let matched: Vec<usize> = (0..combos.len()).filter(|&n| combo_matches(&combos[n], pairs)).collect();
        let extras: Vec<&Pair> = pairs.iter().filter(|p| product_axis(&p.axis).is_none()).collect();
        if !matched.is_empty() {
            if extras.is_empty() {
                errs.push(rule(
                    ekey,
                    "this inclusion matches combinations the product already has and adds no other axis to them".into(),
                ));
            }
            for n in matched {
                for p in &extras {
                    let av = AxisValue { label: String::new(), value: p.value.clone(), key: p.key.clone() };
                    combos[n].retain(|(a, _)| *a != p.axis);
                    combos[n].push((p.axis.clone(), av));
                }
            }
            continue;
        }
        // A new combination: one value of every axis of the product, in its order.
        let mut combo = Combo::new();
        for (axis, values) in axes {
            let Some(p) = pairs.iter().find(|p| p.axis == *axis) else {
                errs.push(rule(
                    ekey,
                    format!(
                        "this inclusion matches no combination, so it adds one, and a new combination names every axis of the product: it lacks {}",
                        axis.name()
                    ),
                ));
                combo.clear();
                break;
            };
            let av = values.iter().find(|av| matches(av, &p.value)).cloned().unwrap_or_else(|| AxisValue {
                label: list_label(&p.value),
                value: p.value.clone(),
                key: p.key.clone(),
            });
            if !label_ok(&av.label) {
                errs.push(rule(
                    &p.key,
                    format!(
                        "{:?} can't label a variant (lowercase letters, digits and '-', at most 16 characters); give the value a label in the axis's map and name that",
                        av.label
                    ),
                ));
            }
            combo.push((axis.clone(), av));
        }
        if combo.is_empty() {
            continue;
        }
        for p in extras {
            combo
                .push((p.axis.clone(), AxisValue { label: String::new(), value: p.value.clone(), key: p.key.clone() }));
        }
        combos.push(combo);
    }
    if combos.is_empty() && errs.is_empty() {
        errs.push(rule(
            &format!("vms[{i}].variants.exclude"),
            format!("the exclusions leave VM {} no variant", vm.name),
        ));
    }
    if errs.is_empty() {
        Ok(combos)
    } else {
        Err(errs)
    }
}
