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
    let product = Product { axes };
    for (ekey, pairs) in &exclude {
        product.exclude(vm, ekey, pairs, &mut combos, &mut errs);
    }
    for (ekey, pairs) in &include {
        product.include(ekey, pairs, &mut combos, &mut errs);
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

/// A rule error at `key`.
fn rule(key: &str, message: String) -> ValidationError {
    ValidationError::Rule { key: key.to_string(), message }
}

/// The axes of a VM's product, which its `exclude` and `include` entries edit.
struct Product<'a> {
    /// Each axis with its values, in order.
    axes: &'a [(Axis, Vec<AxisValue>)],
}

impl Product<'_> {
    /// The values of axis `a`, when the product has it.
    fn axis(&self, a: &Axis) -> Option<&[AxisValue]> {
        self.axes.iter().find(|(x, _)| x == a).map(|(_, v)| v.as_slice())
    }

    /// Whether combination `c` has every value `pairs` give for the product's axes
    /// (pairs of other axes are ignored).
    fn combo_matches(&self, c: &Combo, pairs: &[Pair]) -> bool {
        pairs
            .iter()
            .filter(|p| self.axis(&p.axis).is_some())
            .all(|p| c.iter().any(|(a, av)| *a == p.axis && matches(av, &p.value)))
    }

    /// Applies exclusion `ekey` (of VM `vm`) to `combos`. Each of its pairs must name an
    /// axis and a value of the product, and it must remove a combination.
    fn exclude(
        &self,
        vm: &VmSpec,
        ekey: &str,
        pairs: &[Pair],
        combos: &mut Vec<Combo>,
        errs: &mut Vec<ValidationError>,
    ) {
        let mut ok = true;
        for p in pairs {
            match self.axis(&p.axis) {
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
            return;
        }
        let before = combos.len();
        combos.retain(|c| !self.combo_matches(c, pairs));
        if combos.len() == before {
            errs.push(rule(ekey, "this exclusion matches no combination left by the ones before it".into()));
        }
    }

    /// Applies inclusion `ekey` to `combos`: the combinations it matches get its other
    /// axes (it must add one); when it matches none, it is a new combination, which
    /// names every axis of the product.
    fn include(&self, ekey: &str, pairs: &[Pair], combos: &mut Vec<Combo>, errs: &mut Vec<ValidationError>) {
        let matched: Vec<usize> = (0..combos.len()).filter(|&n| self.combo_matches(&combos[n], pairs)).collect();
        let extras: Vec<&Pair> = pairs.iter().filter(|p| self.axis(&p.axis).is_none()).collect();
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
            return;
        }
        let Some(mut combo) = self.new_combo(ekey, pairs, errs) else { return };
        for p in extras {
            combo
                .push((p.axis.clone(), AxisValue { label: String::new(), value: p.value.clone(), key: p.key.clone() }));
        }
        combos.push(combo);
    }

    /// The new combination inclusion `ekey` adds: one value of every axis of the
    /// product, in its order (a value the axis lacks gets a label of its own, which must
    /// be a valid one); `None` when it lacks an axis.
    fn new_combo(&self, ekey: &str, pairs: &[Pair], errs: &mut Vec<ValidationError>) -> Option<Combo> {
        let mut combo = Combo::new();
        for (axis, values) in self.axes {
            let Some(p) = pairs.iter().find(|p| p.axis == *axis) else {
                errs.push(rule(
                    ekey,
                    format!(
                        "this inclusion matches no combination, so it adds one, and a new combination names every axis of the product: it lacks {}",
                        axis.name()
                    ),
                ));
                return None;
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
        (!combo.is_empty()).then_some(combo)
    }
}
