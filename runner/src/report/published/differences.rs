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
    let (sx, sy) = (setup(x), setup(y));
    for name in sx.keys().chain(sy.keys()).collect::<BTreeSet<_>>() {
        match (sx.get(name), sy.get(name)) {
            (Some(p), Some(q)) if p != q => d.push(format!("step {name} runs a different script on {base} and {cand}")),
            (Some(_), None) => d.push(format!("step {name} runs on {base} only")),
            (None, Some(_)) => d.push(format!("step {name} runs on {cand} only")),
            _ => {}
        }
    }
    d
}
