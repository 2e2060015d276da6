//! Variants: one VM definition expanded over the values of one or more axes, the way
//! the kernel test robot's (LKP) job files expand their parameter lists.
//!
//! ```yaml
//! vms:
//!   - name: client
//!     kernel: { debian: "6.1" }
//!     address: 10.85.0.10                 # variants take 10.85.0.10, .11, …
//!     variants:
//!       env.VERS: ["3", "4.2"]            # list: labels derived from the values
//!       nfs_read.read_ahead_kb: { ra128k: 128, ra15m: 15360 }   # map: label → value
//! ```
//!
//! gives four VMs, `client-3-ra128k`, `client-3-ra15m`, `client-4-2-ra128k`,
//! `client-4-2-ra15m` (the first axis varies slowest), at 10.85.0.10–13. A list value's
//! label is its text in lowercase with every run of other characters than letters and
//! digits made one `-` (`vers=4.2` → `vers-4-2`; a map such as `{debian: "6.1"}` → its
//! values', `6-1`; an empty text → `none`; a text with no letter or digit, such as `+`,
//! has no label: give the values as a map). Names are stable: they depend only on the
//! suite. Wherever the suite names the VM (`nfs_read.clients`, `measure[].on`, `after`,
//! `net.egress.to`, `{netem: …}`), every variant is meant; as a baseline, the first.
//!
//! Axes (each sets what the VM's key of the same name would):
//!
//! | axis | values |
//! |---|---|
//! | `kernel` | kernel maps (`{debian: "6.12"}`, `{source: …}`) |
//! | `cmdline` | text appended to the VM's `cmdline` |
//! | `memory`, `cpus` | numbers |
//! | `sysctl.<name>` | the sysctl's value |
//! | `net.egress.<field>` | a netem field (`delay`, `loss`, `rate`, …) |
//! | `net.offloads` | `true`/`false` |
//! | `env.<NAME>` | text, in the environment of every command of the VM |
//! | `nfs_read.mount_options` | the client's `mount -o` options |
//! | `nfs_read.read_ahead_kb` | the client's read-ahead, KiB |
//!
//! `exclude:` and `include:` edit the product as a CI matrix's do (`variants/matrix.rs`); a
//! measurement's `baseline: {axis, value}` makes one baseline per group of the other
//! axes' values (`variants/groups.rs`).
//!
//! Validation expands the variants first and checks the plain suite that results; a
//! problem of a variant is reported at the VM's key or at the axis value that caused it
//! ([`KeyMap`]).

mod groups;
mod matrix;

use std::collections::BTreeMap;
use std::net::Ipv4Addr;

use serde_yaml::Value;

use super::validate::{limits, ValidationError};
use crate::schema::{SuiteSpec, VmSpec};

/// Most values of one axis.
pub const MAX_VALUES: usize = 16;

/// One axis of a VM's variants.
#[derive(Debug, Clone, PartialEq)]
enum Axis {
    Kernel,
    Cmdline,
    Memory,
    Cpus,
    Sysctl(String),
    NetEgress(String),
    NetOffloads,
    Env(String),
    NfsMountOptions,
    NfsReadAhead,
}

/// The axes a suite may name, for messages.
const AXES: &str = "kernel, cmdline, memory, cpus, sysctl.<name>, net.egress.<field>, net.offloads, env.<NAME>, nfs_read.mount_options, nfs_read.read_ahead_kb";

impl Axis {
    fn parse(name: &str) -> Option<Axis> {
        Some(match name {
            "kernel" => Axis::Kernel,
            "cmdline" => Axis::Cmdline,
            "memory" => Axis::Memory,
            "cpus" => Axis::Cpus,
            "net.offloads" => Axis::NetOffloads,
            "nfs_read.mount_options" => Axis::NfsMountOptions,
            "nfs_read.read_ahead_kb" => Axis::NfsReadAhead,
            _ => {
                if let Some(s) = name.strip_prefix("sysctl.").filter(|s| !s.is_empty()) {
                    Axis::Sysctl(s.to_string())
                } else if let Some(f) = name.strip_prefix("net.egress.").filter(|f| !f.is_empty()) {
                    Axis::NetEgress(f.to_string())
                } else if let Some(e) = name.strip_prefix("env.").filter(|e| !e.is_empty()) {
                    Axis::Env(e.to_string())
                } else {
                    return None;
                }
            }
        })
    }

    /// The key (below `vms[i]`) of what this axis sets, for errors found on a variant.
    /// For an `nfs_read.*` axis: the `nfs_read` map that holds a client's own value and
    /// the axis's name as written (`client_mount_options`, `nfs_read.mount_options`).
    fn nfs_client_map(&self) -> Option<(&'static str, &'static str)> {
        match self {
            Axis::NfsMountOptions => Some(("client_mount_options", "nfs_read.mount_options")),
            Axis::NfsReadAhead => Some(("client_read_ahead_kb", "nfs_read.read_ahead_kb")),
            _ => None,
        }
    }

    /// The axis's name as written (`env.LOAD`, `nfs_read.mount_options`).
    fn name(&self) -> String {
        match self.nfs_client_map() {
            Some((_, name)) => name.to_string(),
            None => self.field(),
        }
    }

    fn field(&self) -> String {
        match self {
            Axis::Kernel => "kernel".into(),
            Axis::Cmdline => "cmdline".into(),
            Axis::Memory => "memory".into(),
            Axis::Cpus => "cpus".into(),
            Axis::Sysctl(s) => format!("sysctl.{s}"),
            Axis::NetEgress(f) => format!("net.egress.{f}"),
            Axis::NetOffloads => "net.offloads".into(),
            Axis::Env(e) => format!("env.{e}"),
            Axis::NfsMountOptions | Axis::NfsReadAhead => String::new(),
        }
    }
}

/// One value of an axis.
#[derive(Debug, Clone)]
struct AxisValue {
    label: String,
    value: Value,
    /// Its key path (`vms[1].variants.kernel[0]`, or `….kernel.v6-1` in a map).
    key: String,
}

/// Where a key path of the expanded suite comes from in the suite as written.
#[derive(Debug, Clone, Default)]
pub struct KeyMap {
    /// Expanded VM index → (the VM's index as written, `[(field below the VM, the key
    /// of the axis value that set it)]`).
    vms: BTreeMap<usize, (usize, Vec<(String, String)>)>,
    /// A rewritten list's key (`nfs_read.clients`) → expanded index → index as written.
    lists: BTreeMap<String, Vec<usize>>,
    /// A key an axis value set outside the VM (`nfs_read.client_mount_options.<variant>`)
    /// → the axis value's key.
    keys: BTreeMap<String, String>,
}

impl KeyMap {
    /// The key as written for `key` of the expanded suite (unchanged when it is not about
    /// a variant or a rewritten list).
    pub fn remap(&self, key: &str) -> String {
        if let Some(k) = self.keys.get(key) {
            return k.clone();
        }
        if let Some(rest) = key.strip_prefix("vms[") {
            if let Some((idx, tail)) = rest.split_once(']') {
                if let Some((orig, fields)) = idx.parse::<usize>().ok().and_then(|j| self.vms.get(&j)) {
                    for (field, axis_key) in fields {
                        if !field.is_empty() && (tail == format!(".{field}") || tail.starts_with(&format!(".{field}.")))
                        {
                            return axis_key.clone();
                        }
                    }
                    return format!("vms[{orig}]{tail}");
                }
            }
        }
        for (list, map) in &self.lists {
            if let Some(rest) = key.strip_prefix(list.as_str()).and_then(|r| r.strip_prefix('[')) {
                if let Some((idx, tail)) = rest.split_once(']') {
                    if let Some(orig) = idx.parse::<usize>().ok().and_then(|n| map.get(n)) {
                        return format!("{list}[{orig}]{tail}");
                    }
                }
            }
        }
        key.to_string()
    }
}

/// The axes of VM `vm` (index `i`), or the errors of its `variants:` block.
fn axes(vm: &VmSpec, i: usize) -> Result<Vec<(Axis, Vec<AxisValue>)>, Vec<ValidationError>> {
    let mut out = Vec::new();
    let mut errs = Vec::new();
    for (name, values) in &vm.variants {
        let name = match name {
            Value::String(s) => s.clone(),
            other => crate::schema::text::scalar_text(other),
        };
        if matrix::KEYS.contains(&name.as_str()) {
            continue;
        }
        let key = format!("vms[{i}].variants.{name}");
        let Some(axis) = Axis::parse(&name) else {
            errs.push(ValidationError::Rule { key, message: format!("{name:?} is not a variant axis (axes: {AXES})") });
            continue;
        };
        let vals: Vec<AxisValue> = match values {
            Value::Sequence(seq) => seq
                .iter()
                .enumerate()
                .map(|(k, v)| AxisValue { label: list_label(v), value: v.clone(), key: format!("{key}[{k}]") })
                .collect(),
            Value::Mapping(m) => m
                .iter()
                .map(|(l, v)| {
                    let label = crate::schema::text::scalar_text(l);
                    AxisValue { key: format!("{key}.{label}"), label, value: v.clone() }
                })
                .collect(),
            _ => {
                errs.push(ValidationError::Rule {
                    key,
                    message: "an axis takes a list of values, or a map from label to value".into(),
                });
                continue;
            }
        };
        if vals.is_empty() || vals.len() > MAX_VALUES {
            errs.push(ValidationError::OutOfRange {
                key: key.clone(),
                value: format!("{} values", vals.len()),
                range: format!("1 to {MAX_VALUES}"),
            });
        }
        let mut seen: BTreeMap<&str, &str> = BTreeMap::new();
        for v in &vals {
            if !label_ok(&v.label) {
                errs.push(ValidationError::Rule {
                    key: v.key.clone(),
                    message: format!(
                        "{:?} can't label a variant (lowercase letters, digits and '-', at most 16 characters; give the values as a map `label: value` to choose)",
                        v.label
                    ),
                });
            } else if let Some(first) = seen.insert(&v.label, &v.key) {
                errs.push(ValidationError::Rule {
                    key: v.key.clone(),
                    message: format!(
                        "label {:?} is also the label of {first}; give the values as a map `label: value`",
                        v.label
                    ),
                });
            }
        }
        out.push((axis, vals));
    }
    if errs.is_empty() {
        Ok(out)
    } else {
        Err(errs)
    }
}

/// Whether `label` can name a variant: lowercase letters, digits and inner `-`, at most
/// 16 characters.
fn label_ok(label: &str) -> bool {
    !label.is_empty()
        && label.len() <= 16
        && label.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !label.starts_with('-')
        && !label.ends_with('-')
}

/// A list value's label: its derived label, or, when the value has text but no letter
/// or digit (`"+"`, `"--"`), that text itself, which the label check then refuses
/// (labelling it `none` would name a value that is there after one that isn't).
fn list_label(v: &Value) -> String {
    let label = label_of(v);
    let empty = match v {
        Value::String(s) => s.is_empty(),
        Value::Sequence(s) => s.is_empty(),
        Value::Mapping(m) => m.is_empty(),
        _ => false,
    };
    if label == "none" && !empty {
        match v {
            Value::Mapping(_) | Value::Sequence(_) => serde_yaml::to_string(v).unwrap_or_default().trim().to_string(),
            other => crate::schema::text::scalar_text(other),
        }
    } else {
        label
    }
}

/// A value's derived label (see the module docs).
fn label_of(v: &Value) -> String {
    let text = match v {
        Value::Mapping(m) => m.values().map(label_of).filter(|l| l != "none").collect::<Vec<_>>().join("-"),
        Value::Sequence(s) => s.iter().map(label_of).collect::<Vec<_>>().join("-"),
        other => crate::schema::text::scalar_text(other),
    };
    let mut out = String::new();
    for c in text.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c.to_ascii_lowercase());
        } else if !out.ends_with('-') {
            out.push('-');
        }
    }
    let out = out.trim_matches('-').to_string();
    if out.is_empty() {
        "none".into()
    } else {
        out
    }
}

/// The plain suite `spec`'s variants expand into, and where its keys come from; or the
/// errors of the `variants:` blocks (the suite is not expanded then).
pub fn expand(spec: &SuiteSpec) -> Result<(SuiteSpec, KeyMap), Vec<ValidationError>> {
    let all_axes = all_axes(spec)?;
    let mut errs = axisless_edits(spec, &all_axes);
    if all_axes.iter().all(Vec::is_empty) {
        let mut out = spec.clone();
        set_groups(&mut out, &groups::Variants::new(), &mut errs);
        return if errs.is_empty() { Ok((out, KeyMap::default())) } else { Err(errs) };
    }
    if let Some(e) = too_many_vms(&all_axes) {
        return Err(vec![e]);
    }
    let mut x = Expansion::new(spec);
    for (i, (vm, axes)) in spec.vms.iter().zip(&all_axes).enumerate() {
        x.add_vm(spec, i, vm, axes, &mut errs);
    }
    errs.extend(collisions(spec, &x.out, &x.map, &all_axes));
    if !errs.is_empty() {
        return Err(errs);
    }
    let Expansion { mut out, mut map, expanded_names, nfs_mount, nfs_ra, variants } = x;
    set_groups(&mut out, &variants, &mut errs);
    if !errs.is_empty() {
        return Err(errs);
    }
    rewrite_references(&mut out, &expanded_names, &mut map, nfs_mount, nfs_ra);
    Ok((out, map))
}

/// A VM's axes, each with its values, in order (empty: the VM has no variants).
type Axes = Vec<(Axis, Vec<AxisValue>)>;

/// The axes of every VM of `spec`, in order (empty for a VM without variants); or the
/// errors of all their `variants:` blocks.
fn all_axes(spec: &SuiteSpec) -> Result<Vec<Axes>, Vec<ValidationError>> {
    let mut errs = Vec::new();
    let mut all_axes = Vec::new();
    for (i, vm) in spec.vms.iter().enumerate() {
        match axes(vm, i) {
            Ok(a) => all_axes.push(a),
            Err(e) => {
                errs.extend(e);
                all_axes.push(vec![]);
            }
        }
    }
    if errs.is_empty() {
        Ok(all_axes)
    } else {
        Err(errs)
    }
}

/// An error for each `exclude`/`include` of a VM that has no axis to edit.
fn axisless_edits(spec: &SuiteSpec, all_axes: &[Axes]) -> Vec<ValidationError> {
    let mut errs = Vec::new();
    for (i, vm) in spec.vms.iter().enumerate().filter(|(i, _)| all_axes[*i].is_empty()) {
        for k in matrix::KEYS.iter().filter(|k| vm.variants.contains_key(**k)) {
            errs.push(ValidationError::Rule {
                key: format!("vms[{i}].variants.{k}"),
                message: format!("{k} edits the product of the VM's axes, and it has none"),
            });
        }
    }
    errs
}

/// The error when the axes' products add up to more than [`limits::VMS`] VMs, at the
/// first `variants:` block.
fn too_many_vms(all_axes: &[Axes]) -> Option<ValidationError> {
    // Saturating: 64 axes of two values would overflow; anything that large is refused.
    let total: usize = all_axes
        .iter()
        .map(|a| a.iter().map(|(_, v)| v.len()).fold(1usize, usize::saturating_mul))
        .fold(0usize, usize::saturating_add);
    if total <= limits::VMS {
        return None;
    }
    let key = all_axes.iter().position(|a| !a.is_empty()).map_or("vms".into(), |i| format!("vms[{i}].variants"));
    Some(ValidationError::OutOfRange {
        key,
        value: if total == usize::MAX {
            format!("at least {total} VMs with the variants expanded")
        } else {
            format!("{total} VMs with the variants expanded")
        },
        range: format!("at most {} VMs in a suite", limits::VMS),
    })
}

/// The expanded suite as it is built, VM by VM, with what the later passes need.
struct Expansion {
    /// The suite with each VM replaced by its variants (references not yet rewritten).
    out: SuiteSpec,
    /// Where the keys of `out` come from.
    map: KeyMap,
    /// Base name → its variants' names, in order.
    expanded_names: BTreeMap<String, Vec<String>>,
    /// Variant name → its nfs_read mount options (an nfs_read axis).
    nfs_mount: BTreeMap<String, String>,
    /// Variant name → its nfs_read read-ahead, KiB (an nfs_read axis).
    nfs_ra: BTreeMap<String, u32>,
    /// Base name → its variants with the axis values of each.
    variants: groups::Variants,
}

impl Expansion {
    /// An expansion of `spec` with no VM yet.
    fn new(spec: &SuiteSpec) -> Self {
        let mut out = spec.clone();
        out.vms.clear();
        Expansion {
            out,
            map: KeyMap::default(),
            expanded_names: BTreeMap::new(),
            nfs_mount: BTreeMap::new(),
            nfs_ra: BTreeMap::new(),
            variants: groups::Variants::new(),
        }
    }

    /// Adds VM `vm` (`vms[i]` of `spec`) with `axes`: as it is without axes, else one VM
    /// per combination of the edited product, named by its labels, at consecutive
    /// addresses, each with its axes' values applied. A VM the refusals reject adds
    /// nothing; its errors, and any value that does not apply, go to `errs`.
    fn add_vm(
        &mut self,
        spec: &SuiteSpec,
        i: usize,
        vm: &VmSpec,
        axes: &[(Axis, Vec<AxisValue>)],
        errs: &mut Vec<ValidationError>,
    ) {
        if axes.is_empty() {
            self.map.vms.insert(self.out.vms.len(), (i, vec![]));
            self.out.vms.push(VmSpec { variants: Default::default(), ..vm.clone() });
            return;
        }
        let combos = match matrix::edit(vm, i, axes, product(axes)) {
            Ok(c) => c,
            Err(e) => {
                errs.extend(e);
                return;
            }
        };
        // The refusals judge every axis a variant sets: the product's and those an
        // `include` adds.
        let mut set_axes = axes.to_vec();
        for (axis, av) in combos.iter().flatten() {
            if !set_axes.iter().any(|(a, _)| a == axis) {
                set_axes.push((axis.clone(), vec![av.clone()]));
            }
        }
        let refused = refusals(spec, i, vm, &set_axes, combos.len());
        if !refused.is_empty() {
            errs.extend(refused);
            return;
        }
        let mut names = Vec::new();
        for (n, combo) in combos.iter().enumerate() {
            let mut v = VmSpec { variants: Default::default(), ..vm.clone() };
            // Axes an `include` adds (no label) don't name the variant.
            let labels: Vec<&str> = combo.iter().map(|(_, av)| av.label.as_str()).filter(|l| !l.is_empty()).collect();
            v.name = format!("{}-{}", vm.name, labels.join("-"));
            v.address = match u32::from(vm.address).checked_add(n as u32) {
                Some(a) => Ipv4Addr::from(a),
                None => {
                    errs.push(ValidationError::Rule {
                        key: format!("vms[{i}].address"),
                        message: format!(
                            "{} variants need {} addresses after {}",
                            combos.len(),
                            combos.len(),
                            vm.address
                        ),
                    });
                    break;
                }
            };
            let mut fields = Vec::new();
            for (axis, av) in combo {
                if let Err(e) = apply(&mut v, axis, &av.value, &mut self.nfs_mount, &mut self.nfs_ra) {
                    errs.push(ValidationError::Rule { key: av.key.clone(), message: e });
                }
                fields.push((axis.field(), av.key.clone()));
                if let Some((set, _)) = axis.nfs_client_map() {
                    self.map.keys.insert(format!("nfs_read.{set}.{}", v.name), av.key.clone());
                }
            }
            self.map.vms.insert(self.out.vms.len(), (i, fields));
            names.push(v.name.clone());
            self.variants.entry(vm.name.clone()).or_default().push((v.name.clone(), combo.clone()));
            self.out.vms.push(v);
        }
        self.expanded_names.insert(vm.name.clone(), names);
    }
}

/// Replaces each measurement's `baseline: {axis, value}` of `s` (its `on` still as
/// written) with its groups ([`groups::groups`]), or adds their problems to `errs`.
fn set_groups(s: &mut SuiteSpec, variants: &groups::Variants, errs: &mut Vec<ValidationError>) {
    let found = groups::groups(s, variants, errs);
    for (mi, g) in found {
        s.measure[mi].baseline = Some(crate::schema::measure::BaselineSpec::Groups(g));
    }
}

/// Why VM `vm` (`vms[i]`) can't have the variants of `axes` (`combos` of them), each
/// problem of the first kind found; empty when it can: nfs_read's server has none, an
/// nfs_read axis needs the VM to be a client, an axis may not also be the VM's own
/// setting, and the variants' addresses must fit in the subnet.
fn refusals(
    spec: &SuiteSpec,
    i: usize,
    vm: &VmSpec,
    axes: &[(Axis, Vec<AxisValue>)],
    combos: usize,
) -> Vec<ValidationError> {
    if spec.nfs_read.as_ref().is_some_and(|n| n.server == vm.name) {
        return vec![ValidationError::Rule {
            key: format!("vms[{i}].variants"),
            message: format!(
                "VM {} is nfs_read's server: one server serves every client, so it has no variants",
                vm.name
            ),
        }];
    }
    // An nfs_read axis sets what nfs_read does on this VM: without nfs_read reading
    // on it, its variants would be identical VMs under different names.
    let reads_here = spec.nfs_read.as_ref().is_some_and(|n| n.clients.iter().any(|c| c == &vm.name));
    if let Some((axis, _)) =
        axes.iter().find(|(a, _)| matches!(a, Axis::NfsMountOptions | Axis::NfsReadAhead)).filter(|_| !reads_here)
    {
        let name = if matches!(axis, Axis::NfsMountOptions) { "mount_options" } else { "read_ahead_kb" };
        return vec![ValidationError::Rule {
            key: format!("vms[{i}].variants.nfs_read.{name}"),
            message: format!(
                "VM {} is not one of nfs_read's clients, so nfs_read.{name} changes nothing on it (put it in nfs_read.clients, or vary `env.<NAME>` for a measurement's own mount)",
                vm.name
            ),
        }];
    }
    // An axis that sets what the VM itself sets replaces it in every variant: the
    // VM's own value would never run.
    let own = |axis: &Axis| match axis {
        Axis::Env(e) => vm.env.contains_key(e),
        Axis::Sysctl(n) => vm.sysctl.contains_key(n),
        Axis::NetEgress(f) => vm
            .net
            .as_ref()
            .and_then(|n| n.egress.as_ref())
            .and_then(|e| serde_yaml::to_value(e).ok())
            .and_then(|e| e.as_mapping().and_then(|m| m.get(f.as_str())).map(|v| !v.is_null()))
            .unwrap_or(false),
        Axis::NetOffloads => vm.net.as_ref().is_some_and(|n| n.offloads.is_some()),
        Axis::Memory => vm.memory.is_some(),
        Axis::Cpus => vm.cpus.is_some(),
        // nfs_read's per-client settings are the VM's own, given in nfs_read.
        Axis::NfsMountOptions => spec.nfs_read.as_ref().is_some_and(|n| n.client_mount_options.contains_key(&vm.name)),
        Axis::NfsReadAhead => spec.nfs_read.as_ref().is_some_and(|n| n.client_read_ahead_kb.contains_key(&vm.name)),
        _ => false,
    };
    let overridden: Vec<&Axis> = axes.iter().map(|(a, _)| a).filter(|a| own(a)).collect();
    if !overridden.is_empty() {
        let mut errs = Vec::new();
        for a in overridden {
            let (key, what, axis) = match a.nfs_client_map() {
                Some((set, axis)) => {
                    let own = format!("nfs_read.{set}.{}", vm.name);
                    (own.clone(), own, axis.to_string())
                }
                None => (format!("vms[{i}].{}", a.field()), a.field(), a.field()),
            };
            errs.push(ValidationError::Rule {
                key,
                message: format!(
                    "VM {} sets {what} itself and also varies it (variants: {axis}): every variant replaces this value, so it never runs; remove it here, or make it one of the axis's values",
                    vm.name,
                ),
            });
        }
        return errs;
    }
    // Variant n takes the VM's address + n: all of them must be host addresses of
    // the subnet (the VM's own address is checked with the others, later).
    let subnet = spec.network.subnet;
    let last = u32::from(vm.address).checked_add(combos as u32 - 1).map(Ipv4Addr::from);
    if subnet.contains(&vm.address) && last.is_none_or(|l| !subnet.contains(&l) || l == subnet.broadcast()) {
        let hosts_left = u32::from(subnet.broadcast()).saturating_sub(u32::from(vm.address));
        return vec![ValidationError::Rule {
            key: format!("vms[{i}].address"),
            message: format!(
                "VM {}'s {} variants take {} consecutive addresses from {}, but the subnet {subnet} has only {hosts_left} host address{} from there (its last is {}); start them lower or use a larger subnet",
                vm.name,
                combos,
                combos,
                vm.address,
                if hosts_left == 1 { "" } else { "es" },
                Ipv4Addr::from(u32::from(subnet.broadcast()) - 1)
            ),
        }];
    }
    Vec::new()
}

/// The names and addresses a variant VM of `out` shares with another VM, each reported at
/// the `variants:` block of `spec` that generated it (duplicates between VMs as written
/// are left to the suite checker, which reports them at the VMs' own keys).
fn collisions(
    spec: &SuiteSpec,
    out: &SuiteSpec,
    map: &KeyMap,
    all_axes: &[Vec<(Axis, Vec<AxisValue>)>],
) -> Vec<ValidationError> {
    let origin = |j: usize| map.vms.get(&j).map_or(j, |(o, _)| *o);
    let generated = |j: usize| !all_axes[origin(j)].is_empty();
    let whose = |x: usize| {
        if generated(x) {
            format!("the variant {} of vms[{}]", out.vms[x].name, origin(x))
        } else {
            format!("vms[{}] ({})", origin(x), out.vms[x].name)
        }
    };
    let mut errs = Vec::new();
    let mut reported = std::collections::BTreeSet::new();
    for (j, a) in out.vms.iter().enumerate() {
        for (k, b) in out.vms.iter().enumerate().skip(j + 1) {
            let (variant, other) = if generated(k) {
                (k, j)
            } else if generated(j) {
                (j, k)
            } else {
                continue;
            };
            let (o, v) = (origin(variant), &out.vms[variant]);
            let message = if a.name == b.name {
                format!("generates the VM name {}, which {} also has; rename one of them", v.name, whose(other))
            } else if a.address == b.address {
                let n = (0..out.vms.len()).filter(|&x| origin(x) == o).count();
                format!(
                    "its {n} variants take {n} addresses from {} up, and {} is also the address of {}; give vms[{o}] an address followed by {n} free ones",
                    spec.vms[o].address,
                    v.address,
                    whose(other),
                )
            } else {
                continue;
            };
            if reported.insert((o, message.clone())) {
                errs.push(ValidationError::Rule { key: format!("vms[{o}].variants"), message });
            }
        }
    }
    errs
}

/// Every combination of the axes' values, the first axis varying slowest.
fn product(axes: &[(Axis, Vec<AxisValue>)]) -> Vec<Vec<(Axis, AxisValue)>> {
    let mut out: Vec<Vec<(Axis, AxisValue)>> = vec![vec![]];
    for (axis, values) in axes {
        out = out
            .into_iter()
            .flat_map(|prefix| {
                values.iter().map(move |v| {
                    let mut c = prefix.clone();
                    c.push((axis.clone(), v.clone()));
                    c
                })
            })
            .collect();
    }
    out
}

/// Sets what `axis` sets on the variant `v` to `value`; a value of the wrong kind is an
/// error in words.
fn apply(
    v: &mut VmSpec,
    axis: &Axis,
    value: &Value,
    nfs_mount: &mut BTreeMap<String, String>,
    nfs_ra: &mut BTreeMap<String, u32>,
) -> Result<(), String> {
    let text = |value: &Value| -> Result<String, String> {
        match value {
            Value::String(_) | Value::Number(_) | Value::Bool(_) => Ok(crate::schema::text::scalar_text(value)),
            _ => Err("this axis takes plain values (text or numbers)".into()),
        }
    };
    match axis {
        Axis::Kernel => {
            v.kernel = serde_yaml::from_value(value.clone()).map_err(|e| format!("not a kernel: {e}"))?;
        }
        Axis::Cmdline => {
            let extra = text(value)?;
            v.cmdline = match (v.cmdline.take(), extra.is_empty()) {
                (c, true) => c,
                (Some(c), false) => Some(format!("{c} {extra}")),
                (None, false) => Some(extra),
            };
        }
        Axis::Memory => v.memory = Some(value.as_u64().ok_or("memory is a whole number of MiB")?),
        Axis::Cpus => {
            v.cpus = Some(value.as_u64().and_then(|c| u32::try_from(c).ok()).ok_or("cpus is a whole number")?)
        }
        Axis::Sysctl(name) => {
            text(value)?;
            v.sysctl.insert(name.clone(), value.clone());
        }
        Axis::NetEgress(field) => {
            let net = v.net.get_or_insert_with(Default::default);
            let mut egress = serde_yaml::to_value(net.egress.clone().unwrap_or_default()).map_err(|e| e.to_string())?;
            if let Value::Mapping(m) = &mut egress {
                m.insert(Value::String(field.clone()), value.clone());
            }
            net.egress = Some(serde_yaml::from_value(egress).map_err(|e| format!("net.egress.{field}: {e}"))?);
        }
        Axis::NetOffloads => {
            let b = value.as_bool().ok_or("net.offloads is true or false")?;
            v.net.get_or_insert_with(Default::default).offloads = Some(b);
        }
        Axis::Env(name) => {
            v.env.insert(name.clone(), text(value)?);
        }
        Axis::NfsMountOptions => {
            nfs_mount.insert(v.name.clone(), text(value)?);
        }
        Axis::NfsReadAhead => {
            let kb =
                value.as_u64().and_then(|k| u32::try_from(k).ok()).ok_or("read_ahead_kb is a whole number of KiB")?;
            nfs_ra.insert(v.name.clone(), kb);
        }
    }
    Ok(())
}

/// Makes every reference to a VM with variants name all of its variants (its first as
/// a baseline), recording in `map` how rewritten lists' indices relate.
fn rewrite_references(
    s: &mut SuiteSpec,
    names: &BTreeMap<String, Vec<String>>,
    map: &mut KeyMap,
    nfs_mount: BTreeMap<String, String>,
    nfs_ra: BTreeMap<String, u32>,
) {
    let list = |list: &[String], key: &str, map: &mut KeyMap| -> Vec<String> {
        let mut out = Vec::new();
        let mut idx = Vec::new();
        for (n, x) in list.iter().enumerate() {
            match names.get(x) {
                Some(vs) => {
                    for v in vs {
                        out.push(v.clone());
                        idx.push(n);
                    }
                }
                None => {
                    out.push(x.clone());
                    idx.push(n);
                }
            }
        }
        map.lists.insert(key.to_string(), idx);
        out
    };
    // `after` entries: `vm` or `vm/step`; extra variants are added at the end, so the
    // entries as written keep their indices.
    let after = |after: &[String]| -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        let mut extra = Vec::new();
        for a in after {
            let (vm, step) = match a.split_once('/') {
                Some((v, s)) => (v, Some(s)),
                None => (a.as_str(), None),
            };
            match names.get(vm) {
                Some(vs) => {
                    let with = |v: &String| step.map_or(v.clone(), |s| format!("{v}/{s}"));
                    out.push(with(&vs[0]));
                    extra.extend(vs[1..].iter().map(with));
                }
                None => out.push(a.clone()),
            }
        }
        out.extend(extra);
        out
    };
    let first = |x: &str| names.get(x).map_or(x.to_string(), |vs| vs[0].clone());
    for (i, vm) in s.vms.iter_mut().enumerate() {
        for st in &mut vm.steps {
            st.after = after(&st.after);
        }
        if let Some(e) = vm.net.as_mut().and_then(|n| n.egress.as_mut()) {
            e.to = list(&e.to, &format!("vms[{i}].net.egress.to"), map);
        }
    }
    if let Some(n) = &mut s.nfs_read {
        n.clients = list(&n.clients, "nfs_read.clients", map);
        n.baseline = n.baseline.as_deref().map(first);
        n.client_mount_options = expand_keys(&n.client_mount_options, names);
        n.client_mount_options.extend(nfs_mount);
        n.client_setup = expand_keys(&n.client_setup, names);
        let baseline: Vec<String> = n.baseline.clone().or_else(|| n.clients.first().cloned()).into_iter().collect();
        n.client_snapshot_verdicts = expand_overrides(&n.client_snapshot_verdicts, names, &n.clients, &baseline);
        n.client_read_ahead_kb = expand_keys(&n.client_read_ahead_kb, names);
        n.client_read_ahead_kb.extend(nfs_ra);
    }
    for (m, spec) in s.measure.iter_mut().enumerate() {
        spec.on = list(&spec.on, &format!("measure[{m}].on"), map);
        if let Some(crate::schema::measure::BaselineSpec::Vm(b)) = &mut spec.baseline {
            *b = first(b);
        }
        let baselines: Vec<String> = spec.baselines().into_iter().map(String::from).collect();
        if let Some(snap) = &mut spec.snapshot {
            snap.verdict_by_vm = expand_overrides(&snap.verdict_by_vm, names, &spec.on, &baselines);
        }
        spec.after = after(&spec.after);
        let mut observe = Vec::new();
        for o in &spec.observe {
            match o {
                crate::schema::measure::ObserverSpec::Netem(vm) if names.contains_key(vm) => {
                    observe.extend(names[vm].iter().map(|v| crate::schema::measure::ObserverSpec::Netem(v.clone())))
                }
                other => observe.push(other.clone()),
            }
        }
        spec.observe = observe;
    }
}

/// `m` with each key that names a VM with variants replaced by one entry per variant
/// (`names`: VM name → its variants' names), the value copied.
fn expand_keys<V: Clone>(m: &BTreeMap<String, V>, names: &BTreeMap<String, Vec<String>>) -> BTreeMap<String, V> {
    m.iter()
        .flat_map(|(k, v)| {
            names.get(k).cloned().unwrap_or_else(|| vec![k.clone()]).into_iter().map(move |n| (n, v.clone()))
        })
        .collect()
}

/// Per-VM snapshot verdict overrides with a VM that has variants replaced by those of
/// its variants that are `compared`, other than the `baselines` (which have no verdict). A
/// key naming no compared variant, one variant, or the baseline itself is kept as
/// written, for the checks to judge where it was written.
fn expand_overrides<V: Clone>(
    m: &BTreeMap<String, V>,
    names: &BTreeMap<String, Vec<String>>,
    compared: &[String],
    baselines: &[String],
) -> BTreeMap<String, V> {
    let mut out = BTreeMap::new();
    for (k, v) in m {
        let variants: Vec<&String> = names.get(k).into_iter().flatten().filter(|n| compared.contains(n)).collect();
        if variants.is_empty() {
            out.insert(k.clone(), v.clone());
        } else {
            out.extend(variants.into_iter().filter(|n| !baselines.contains(n)).map(|n| (n.clone(), v.clone())));
        }
    }
    // A key written for one variant wins over its VM's.
    out.extend(m.iter().filter(|(k, _)| !names.contains_key(*k)).map(|(k, v)| (k.clone(), v.clone())));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn suite(yaml: &str) -> SuiteSpec {
        serde_yaml::from_str(yaml).unwrap()
    }

    #[test]
    fn labels_are_derived_from_values() {
        assert_eq!(label_of(&Value::from("vers=4.2")), "vers-4-2");
        assert_eq!(label_of(&Value::from(15360)), "15360");
        assert_eq!(label_of(&Value::from("")), "none");
        assert_eq!(list_label(&Value::from("")), "none");
        // Text without a letter or digit keeps its text, which can't be a label.
        assert_eq!(list_label(&Value::from("+")), "+");
        assert_eq!(list_label(&Value::from("vers=4.2")), "vers-4-2");
        let k: Value = serde_yaml::from_str(r#"{debian: "6.12"}"#).unwrap();
        assert_eq!(label_of(&k), "6-12");
    }

    #[test]
    fn a_vm_expands_over_the_product_and_references_follow() {
        let s = suite(
            r#"
name: t
network: { subnet: 10.85.0.0/24 }
vms:
  - { name: server, kernel: { debian: "6.1" }, address: 10.85.0.1, profile: nfs-server-modern }
  - name: client
    kernel: { debian: "6.1" }
    address: 10.85.0.10
    variants:
      env.VERS: ["3", "4.2"]
      nfs_read.read_ahead_kb: { ra128k: 128, ra15m: 15360 }
nfs_read:
  server: server
  export: /srv/export
  file: { name: f, block_size: 1000, count: 1 }
  clients: [client]
  baseline: client
  client_snapshot_verdicts: { client: none }
measure:
  - { name: m, on: [client], run: "true", after: [client/x], snapshot: { verdict_by_vm: { client: direction } } }
"#,
        );
        let (e, map) = expand(&s).unwrap();
        let names: Vec<&str> = e.vms.iter().map(|v| v.name.as_str()).collect();
        assert_eq!(names, ["server", "client-3-ra128k", "client-3-ra15m", "client-4-2-ra128k", "client-4-2-ra15m"]);
        assert_eq!(e.vms[4].address, "10.85.0.13".parse::<Ipv4Addr>().unwrap());
        assert_eq!(e.vms[3].env["VERS"], "4.2");
        let n = e.nfs_read.as_ref().unwrap();
        assert_eq!(n.clients.len(), 4);
        assert_eq!(n.baseline.as_deref(), Some("client-3-ra128k"));
        assert_eq!(n.client_read_ahead_kb["client-4-2-ra15m"], 15360);
        assert_eq!(e.measure[0].on.len(), 4);
        // A verdict override naming a VM with variants covers its variants but the
        // baseline (the first), which has no verdict.
        let compared = ["client-3-ra15m", "client-4-2-ra128k", "client-4-2-ra15m"];
        assert_eq!(n.client_snapshot_verdicts.keys().collect::<Vec<_>>(), compared);
        let by_vm = &e.measure[0].snapshot.as_ref().unwrap().verdict_by_vm;
        assert_eq!(by_vm.keys().collect::<Vec<_>>(), compared);
        assert_eq!(
            e.measure[0].after,
            ["client-3-ra128k/x", "client-3-ra15m/x", "client-4-2-ra128k/x", "client-4-2-ra15m/x"]
        );
        // Keys of the expanded suite point back at what was written.
        assert_eq!(map.remap("vms[3].address"), "vms[1].address");
        assert_eq!(map.remap("vms[3].env.VERS"), "vms[1].variants.env.VERS[1]");
        assert_eq!(map.remap("nfs_read.clients[3]"), "nfs_read.clients[0]");
        assert_eq!(map.remap("vms[0].profile"), "vms[0].profile");
    }

    #[test]
    fn exclude_and_include_edit_the_product_and_groups_follow_the_baseline_axis() {
        let s = suite(
            r#"
name: t
network: { subnet: 10.85.0.0/24 }
vms:
  - name: c
    kernel: { debian: "6.1" }
    address: 10.85.0.10
    variants:
      kernel: { a: { debian: "6.1" }, b: { debian: "6.12" } }
      env.LOAD: { idle: "0", busy: "2" }
      exclude: [{ kernel: a, env.LOAD: busy }]
      include:
        - { kernel: b, env.LOAD: "4" }
        - { kernel: a, env.DEPTH: "32" }
        - { kernel: { debian: "6.12" }, env.LOAD: idle, env.EXTRA: "x" }
measure:
  - { name: m, on: [c], baseline: { axis: kernel, value: b }, run: "true" }
  - { name: n, on: [c], baseline: { axis: env.LOAD, value: "0" }, run: "true" }
"#,
        );
        let (e, _) = expand(&s).unwrap();
        let names: Vec<&str> = e.vms.iter().map(|v| v.name.as_str()).collect();
        assert_eq!(names, ["c-a-idle", "c-b-idle", "c-b-busy", "c-b-4"]);
        // An include's other axes extend what it matches (by label or by value) and
        // don't name the variant.
        assert_eq!(e.vms[0].env.get("DEPTH").map(String::as_str), Some("32"));
        assert_eq!(e.vms[1].env.get("EXTRA").map(String::as_str), Some("x"));
        assert_eq!(e.vms[3].env["LOAD"], "4");
        let groups = |m: usize| match &e.measure[m].baseline {
            Some(crate::schema::measure::BaselineSpec::Groups(g)) => {
                g.iter().map(|g| (g.name.clone(), g.baseline.clone(), g.vms.len())).collect::<Vec<_>>()
            }
            other => panic!("{other:?}"),
        };
        // Any axis can be the grouping one: by kernel, each load is a group.
        assert_eq!(
            groups(0),
            [
                ("c-idle".to_string(), "c-b-idle".to_string(), 2),
                ("c-busy".into(), "c-b-busy".into(), 1),
                ("c-4".into(), "c-b-4".into(), 1)
            ]
        );
        assert_eq!(groups(1), [("c-a".to_string(), "c-a-idle".to_string(), 1), ("c-b".into(), "c-b-idle".into(), 3)]);
    }

    #[test]
    fn an_edit_that_does_nothing_or_a_group_without_baseline_is_refused() {
        let base = "name: t\nnetwork: { subnet: 10.85.0.0/24 }\nvms:\n  - name: c\n    kernel: { debian: \"6.1\" }\n    address: 10.85.0.10\n    variants:\n      kernel: { a: { debian: \"6.1\" }, b: { debian: \"6.12\" } }\n      env.LOAD: [idle, busy]\n";
        let key = |extra: &str| {
            let errs = expand(&suite(&format!("{base}{extra}"))).unwrap_err();
            errs.iter().map(|e| e.key().to_string()).collect::<Vec<_>>()
        };
        assert_eq!(
            key("      exclude: [{ kernel: a }, { kernel: a, env.LOAD: idle }]\n"),
            ["vms[0].variants.exclude[1]"]
        );
        assert_eq!(key("      include: [{ kernel: a }]\n"), ["vms[0].variants.include[0]"]);
        assert_eq!(key("      exclude: [{ kernel: a }, { kernel: b }]\n"), ["vms[0].variants.exclude"]);
        assert_eq!(
            key("      exclude: [{ kernel: b, env.LOAD: idle }]\nmeasure:\n  - { name: m, on: [c], baseline: { axis: env.LOAD, value: idle }, run: \"true\" }\n"),
            ["measure[0].baseline"]
        );
    }

    #[test]
    fn too_many_vms_and_unknown_axes_are_refused() {
        let many = suite(
            "name: t\nnetwork: { subnet: 10.85.0.0/24 }\nvms:\n  - name: c\n    kernel: { debian: \"6.1\" }\n    address: 10.85.0.10\n    variants: { memory: [256, 384, 512, 640, 768], cpus: [1, 2, 3, 4] }\n",
        );
        let err = expand(&many).unwrap_err();
        assert!(err[0].to_string().contains("20 VMs"), "{err:?}");
        let bad = suite(
            "name: t\nnetwork: { subnet: 10.85.0.0/24 }\nvms:\n  - name: c\n    kernel: { debian: \"6.1\" }\n    address: 10.85.0.10\n    variants: { kernal: [a] }\n",
        );
        assert_eq!(expand(&bad).unwrap_err()[0].key(), "vms[0].variants.kernal");
    }
}
