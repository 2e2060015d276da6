//! What the report needs of `plan.json` (each VM's settings and steps), and what
//! differs between two compared VMs besides their kernel.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use serde::Deserialize;

use crate::analyse::Analysis;
use crate::run::record::read_json;
use crate::run::record::RunDirError;
use crate::run::PLAN_FILE;
use crate::schema::{Accel, VmNetSpec};

impl PlanVm {
    /// Its rootfs with the extra packages (`bookworm-nfs+fio`).
    pub fn rootfs_id(&self) -> String {
        crate::infra::images::rootfs::rootfs_id(&self.rootfs, &self.packages)
    }
}

/// What the report needs of a VM in `plan.json`.
#[derive(Debug, Clone, Deserialize)]
pub struct PlanVm {
    /// Name.
    pub name: String,
    /// Kernel label.
    pub kernel: String,
    /// Rootfs recipe.
    pub rootfs: String,
    /// Extra packages in its rootfs.
    #[serde(default)]
    pub packages: Vec<String>,
    /// Memory, MiB.
    pub memory_mib: u64,
    /// vCPUs.
    pub cpus: u32,
    /// Requested acceleration.
    pub accel: Accel,
    /// Extra kernel command line.
    #[serde(default)]
    pub cmdline: Option<String>,
    /// Network conditions of its NIC.
    #[serde(default)]
    pub net: Option<VmNetSpec>,
    /// Environment of its commands (`env:`, a variant axis `env.NAME` included).
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Its `sysctl:` values.
    #[serde(default)]
    pub sysctl: BTreeMap<String, String>,
    /// Files copied into it.
    #[serde(default)]
    pub files: Vec<PlanFile>,
    /// Its steps.
    #[serde(default)]
    pub steps: Vec<PlanStep>,
}

/// What the report needs of a step in `plan.json`.
#[derive(Debug, Clone, Deserialize)]
pub struct PlanStep {
    /// Step name.
    pub name: String,
    /// Its script.
    pub script: String,
    /// Its kind (`user`, `scenario`, `measure`, …).
    pub kind: String,
}

/// What the report needs of a file copied into a VM (`files:` in `plan.json`).
#[derive(Debug, Clone, Deserialize)]
pub struct PlanFile {
    /// Where it goes in the guest.
    pub dest: String,
    /// Its SHA-256 (hex) when the suite was compiled.
    pub sha256: String,
}

#[derive(Debug, Deserialize)]
struct PlanVms {
    vms: Vec<PlanVm>,
}

/// The VMs of `plan.json` in run folder `dir`.
///
/// Errors: the file can't be read or parsed.
pub fn plan_vms(dir: &Path) -> Result<Vec<PlanVm>, RunDirError> {
    Ok(read_json::<PlanVms>(&dir.join(PLAN_FILE))?.vms)
}

pub(super) fn vm_of<'a>(vms: &'a [PlanVm], name: &str) -> Option<&'a PlanVm> {
    vms.iter().find(|v| v.name == name)
}

/// A VM's network conditions in words (`None`: the kernel's defaults).
pub fn net_words(net: &VmNetSpec) -> String {
    let mut parts = Vec::new();
    if let Some(e) = &net.egress {
        let mut q = Vec::new();
        for (k, v) in [
            ("loss", &e.loss),
            ("delay", &e.delay),
            ("jitter", &e.jitter),
            ("rate", &e.rate),
            ("reorder", &e.reorder),
            ("duplicate", &e.duplicate),
        ] {
            if let Some(v) = v {
                q.push(format!("{k} {v}"));
            }
        }
        if let Some(l) = e.limit {
            q.push(format!("limit {l}"));
        }
        if let Some(s) = e.seed {
            q.push(format!("seed {s}"));
        }
        let to = if e.to.is_empty() { "all packets".to_string() } else { format!("packets to {}", e.to.join(", ")) };
        parts.push(format!("netem on its egress ({to}): {}", q.join(", ")));
    }
    if net.offloads == Some(false) {
        parts.push("TSO/GSO/GRO off, gso_max_segs 1".into());
    }
    parts.join("; ")
}

/// What differs between the guest settings of `x` (the baseline) and `y` that a suite
/// writes per VM: environment variables (`env:`, e.g. a variant axis `env.LOAD`),
/// `sysctl:` values and copied files, one phrase each, in key order.
fn settings_differences(x: &PlanVm, y: &PlanVm) -> Vec<String> {
    let (base, cand) = (x.name.as_str(), y.name.as_str());
    let mut d = Vec::new();
    let mut maps = |what: &str, unset: &str, p: &BTreeMap<String, String>, q: &BTreeMap<String, String>| {
        for key in p.keys().chain(q.keys()).collect::<BTreeSet<_>>() {
            let (a, b) = (p.get(key), q.get(key));
            if a != b {
                let shown = |v: Option<&String>| v.map_or_else(|| unset.to_string(), |v| format!("{v:?}"));
                d.push(format!("{what} {key}: {base} {}, {cand} {}", shown(a), shown(b)));
            }
        }
    };
    maps("environment variable", "unset", &x.env, &y.env);
    maps("sysctl", "the kernel's default", &x.sysctl, &y.sysctl);
    let files = |v: &PlanVm| -> BTreeMap<String, String> {
        v.files.iter().map(|f| (f.dest.clone(), f.sha256.clone())).collect()
    };
    d.extend(presence_differences((base, cand), &files(x), &files(y), |dest, on| match on {
        Some(vm) => format!("file {dest} is copied into {vm} only"),
        None => format!("file {dest} has other contents on {base} and {cand}"),
    }));
    d
}

/// Keyed things (files by destination, steps by name) that one of `bx` (of VM `base`)
/// and `cy` (of VM `cand`) has and the other lacks, or that differ: `words(key,
/// Some(vm))` for a key only `vm` has, `words(key, None)` for one both have, differently.
fn presence_differences(
    (base, cand): (&str, &str),
    bx: &BTreeMap<String, String>,
    cy: &BTreeMap<String, String>,
    words: impl Fn(&str, Option<&str>) -> String,
) -> Vec<String> {
    (bx.keys().chain(cy.keys()).collect::<BTreeSet<_>>().into_iter())
        .filter_map(|k| match (bx.get(k), cy.get(k)) {
            (Some(p), Some(q)) if p != q => Some(words(k, None)),
            (Some(_), None) => Some(words(k, Some(base))),
            (None, Some(_)) => Some(words(k, Some(cand))),
            _ => None,
        })
        .collect()
}

/// What differs between VMs `a` (the baseline) and `b` besides the kernel.
pub fn environment_differences(a: &Analysis, vms: &[PlanVm], base: &str, cand: &str) -> Vec<String> {
    let (Some(x), Some(y)) = (vm_of(vms, base), vm_of(vms, cand)) else {
        return vec![format!("{base} or {cand} is missing from plan.json")];
    };
    let mut d = Vec::new();
    let diff = |what: &str, p: String, q: String| (p != q).then(|| format!("{what}: {base} {p}, {cand} {q}"));
    d.extend(diff("memory", format!("{} MiB", x.memory_mib), format!("{} MiB", y.memory_mib)));
    d.extend(diff("vCPUs", x.cpus.to_string(), y.cpus.to_string()));
    d.extend(diff("requested accel", format!("{:?}", x.accel).to_lowercase(), format!("{:?}", y.accel).to_lowercase()));
    let used = |n: &str| a.record.vm(n).map(|v| format!("{:?}", v.accel).to_lowercase()).unwrap_or_default();
    d.extend(diff("accel used", used(base), used(cand)));
    d.extend(diff("rootfs", x.rootfs_id(), y.rootfs_id()));
    d.extend(diff(
        "kernel command line",
        x.cmdline.clone().unwrap_or_else(|| "(none added)".into()),
        y.cmdline.clone().unwrap_or_else(|| "(none added)".into()),
    ));
    let words = |n: &Option<VmNetSpec>| n.as_ref().map(net_words).unwrap_or_else(|| "kernel defaults".into());
    d.extend(diff("network conditions of its NIC", words(&x.net), words(&y.net)));
    d.extend(settings_differences(x, y));
    for other in vms {
        let Some(e) = other.net.as_ref().and_then(|n| n.egress.as_ref()) else { continue };
        if e.to.is_empty() || other.name == base || other.name == cand {
            continue;
        }
        let (p, q) = (e.to.contains(&x.name), e.to.contains(&y.name));
        if p != q {
            let hit = if p { base } else { cand };
            d.push(format!("the netem on {}'s egress reaches {hit} only", other.name));
        }
    }
    if let Some(p) = a.preset() {
        d.extend(p.differences(base, cand));
    }
    // Steps other than the measurement's own: setup a suite gives one VM and not the other.
    let setup = |v: &PlanVm| -> BTreeMap<String, String> {
        v.steps
            .iter()
            .filter(|s| matches!(s.kind.as_str(), "user" | "scenario" | "net_conditions" | "profile"))
            .map(|s| (s.name.clone(), s.script.clone()))
            .collect()
    };
    d.extend(presence_differences((base, cand), &setup(x), &setup(y), |name, on| match on {
        Some(vm) => format!("step {name} runs on {vm} only"),
        None => format!("step {name} runs a different script on {base} and {cand}"),
    }));
    d
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A VM of `plan.json` as the compiler writes it, with `extra` fields merged in.
    fn vm(name: &str, extra: serde_json::Value) -> PlanVm {
        let mut v = serde_json::json!({
            "name": name, "kernel": "debian:6.1", "rootfs": "bookworm-nfs",
            "memory_mib": 384, "cpus": 1, "accel": "auto", "steps": []
        });
        v.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn a_variant_axis_on_env_sysctl_or_files_is_named_as_a_difference() {
        let idle = vm(
            "client-idle",
            serde_json::json!({"env": {"LOAD": "0"}, "sysctl": {"vm.dirty_ratio": "20"},
                "files": [{"dest": "/usr/local/bin/a", "sha256": "00", "mode": "0755"}]}),
        );
        let busy = vm(
            "client-busy",
            serde_json::json!({"env": {"LOAD": "2", "EXTRA": "x"},
                "files": [{"dest": "/usr/local/bin/a", "sha256": "11", "mode": "0755"},
                          {"dest": "/etc/b", "sha256": "22", "mode": "0644"}]}),
        );
        assert_eq!(
            settings_differences(&idle, &busy),
            [
                "environment variable EXTRA: client-idle unset, client-busy \"x\"",
                "environment variable LOAD: client-idle \"0\", client-busy \"2\"",
                "sysctl vm.dirty_ratio: client-idle \"20\", client-busy the kernel's default",
                "file /etc/b is copied into client-busy only",
                "file /usr/local/bin/a has other contents on client-idle and client-busy",
            ]
        );
    }

    #[test]
    fn vms_with_the_same_settings_differ_in_nothing() {
        let settings = serde_json::json!({"env": {"LOAD": "0"}, "sysctl": {"vm.dirty_ratio": "20"}});
        assert_eq!(settings_differences(&vm("a", settings.clone()), &vm("b", settings)), Vec::<String>::new());
        assert_eq!(
            settings_differences(&vm("a", serde_json::json!({})), &vm("b", serde_json::json!({}))),
            Vec::<String>::new()
        );
    }
}
