//! The run's first phase: every image its plan needs, found in the cache or built or
//! fetched now.

use std::collections::HashMap;

use crate::events::EventSink;
use crate::infra::images::modules::{self, missing_message, Need};
use crate::infra::images::{resolve_all, Cache, Catalog, KernelArtifact, Resolved};
use crate::plan::{Plan, VmPlan};
use crate::run::error::RunError;

/// Resolves every VM's kernel and rootfs ([`Plan::vm_images`]) with [`resolve_all`]
/// (each image once, in parallel; found in `cache` or built or fetched now). Never
/// fails as a whole: each image's error is in the result's `failures`.
pub async fn resolve(plan: &Plan, cache: &Cache, catalog: &Catalog, events: &EventSink) -> Resolved {
    let (kernels, rootfs): (Vec<_>, Vec<_>) = plan.vm_images().unzip();
    resolve_all(&kernels, &rootfs, cache, catalog, events).await
}

/// The kernel features VM `v` needs beyond booting (which its kernel's preparation
/// checks): the NFS server for a VM with a server profile, the NFS client for every
/// other VM of a suite that has a server, netem (with `prio` and `u32` when filtered or
/// seeded) for a VM with `net.egress`.
pub fn role_needs(plan: &Plan, v: &VmPlan) -> Vec<&'static Need> {
    let mut out: Vec<&'static Need> = Vec::new();
    if v.profile.is_some() {
        out.extend(modules::NFS_SERVER);
    } else if plan.vms.iter().any(|o| o.profile.is_some()) {
        out.extend(modules::NFS_CLIENT);
    }
    if let Some(e) = v.net.as_ref().and_then(|n| n.egress.as_ref()) {
        out.extend(modules::NETEM);
        if !e.to.is_empty() || e.seed.is_some() {
            out.extend(modules::NETEM_FILTERED);
        }
    }
    out
}

/// Checks every VM's kernel against [`role_needs`], before any VM starts. A kernel
/// whose features are unknown (an image given without modules) is not checked.
///
/// Errors: [`RunError::KernelLacks`] for the first VM whose kernel lacks one.
pub fn check_role_needs(plan: &Plan, kernels: &HashMap<String, KernelArtifact>) -> Result<(), RunError> {
    for v in &plan.vms {
        let label = v.kernel.label();
        let Some(features) = kernels.get(&label).and_then(|k| k.features.as_ref()) else { continue };
        let wanted: Vec<Need> = role_needs(plan, v).into_iter().copied().collect();
        let missing = features.missing(&wanted);
        if !missing.is_empty() {
            let values = if matches!(
                v.kernel,
                crate::infra::images::kernel::KernelSource::Source(_)
                    | crate::infra::images::kernel::KernelSource::Tree(_)
            ) {
                "y (source-built kernels have no modules)"
            } else {
                "y or m"
            };
            let release = kernels.get(&label).map_or(String::new(), |k| format!(" ({})", k.release));
            return Err(RunError::KernelLacks {
                vm: v.name.clone(),
                message: missing_message(&format!("{label}{release}"), &missing, values),
            });
        }
    }
    Ok(())
}
