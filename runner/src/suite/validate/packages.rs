//! Rules of the extra packages of a VM (`defaults.packages` and the VM's own
//! `packages`): each name once, from a suite the rootfs recipe's sources hold. The
//! grammar of a name ([`crate::schema::DebianPackage`]) was checked when the suite was
//! read.

use super::ValidationError;
use crate::infra::images::{Catalog, DEFAULT_ROOTFS};
use crate::schema::{DebianPackage, SuiteSpec, VmSpec};

/// Most extra packages of a VM (`defaults.packages` and its own together).
pub const MAX_PACKAGES: usize = 50;

/// Checks the packages VM `vm` (key path `k`) of suite `s` gets: the suite's
/// `defaults.packages` and its own `packages`. A problem of a `defaults` entry is
/// reported once, at its own key, even when several VMs meet it.
pub(super) fn check(errs: &mut Vec<ValidationError>, catalog: &Catalog, s: &SuiteSpec, vm: &VmSpec, k: &str) {
    let push = |errs: &mut Vec<ValidationError>, key: String, message: String| {
        let e = ValidationError::Rule { key, message };
        if !errs.contains(&e) {
            errs.push(e);
        }
    };
    let recipe_name = vm.rootfs.as_deref().or(s.defaults.rootfs.as_deref()).unwrap_or(DEFAULT_ROOTFS);
    let suites: Vec<String> = catalog
        .rootfs
        .get(recipe_name)
        .map(|(r, _)| std::iter::once(r.distribution.clone()).chain(r.extra_suites.iter().cloned()).collect())
        .unwrap_or_default();
    let all: Vec<(String, &DebianPackage)> = (s.defaults.packages.iter().enumerate())
        .map(|(i, p)| (format!("defaults.packages[{i}]"), p))
        .chain(vm.packages.iter().enumerate().map(|(i, p)| (format!("{k}.packages[{i}]"), p)))
        .collect();
    if all.len() > MAX_PACKAGES {
        let key = if vm.packages.is_empty() { "defaults.packages".to_string() } else { format!("{k}.packages") };
        push(errs, key, format!("{} packages for VM {}; at most {MAX_PACKAGES}", all.len(), vm.name));
    }
    for (i, (key, p)) in all.iter().enumerate() {
        if let Some(suite) = p.suite() {
            if !suites.iter().any(|x| x == suite) {
                push(
                    errs,
                    key.clone(),
                    format!(
                        "{:?}: the sources of rootfs {recipe_name} hold {}; not {suite:?}",
                        p.as_str(),
                        suites.join(", ")
                    ),
                );
            }
        }
        // One package once: `fio` and `fio/bookworm-backports` would leave which one
        // is installed to apt.
        if let Some((first, q)) = all[..i].iter().find(|(_, q)| q.name() == p.name() && q != p) {
            push(errs, key.clone(), format!("package {} is already asked for at {first} ({:?})", p.name(), q.as_str()));
        } else if let Some((first, _)) = all[..i].iter().find(|(fk, q)| q == p && same_list(fk, key)) {
            push(errs, key.clone(), format!("package {} is already asked for at {first}", p.as_str()));
        }
    }
}

/// Whether two keys are entries of the same list (`vms[0].packages[1]`,
/// `vms[0].packages[3]`); the same name in `defaults` and a VM is harmless.
fn same_list(a: &str, b: &str) -> bool {
    a.rsplit_once('[').map(|x| x.0) == b.rsplit_once('[').map(|x| x.0)
}
