//! Rules of a VM's `profile:` and its parameters.

use std::collections::BTreeSet;

use super::{guest, range, ValidationError};
use crate::infra::images::Catalog;
use crate::schema::profile::ProfileDefaults;
use crate::schema::{ProfileSpec, SuiteSpec, VmSpec};

/// NFS versions any server profile may name.
const NFS_VERSIONS: &[&str] = &["2", "3", "4", "4.0", "4.1", "4.2"];
/// nfsd threads.
const THREADS: std::ops::RangeInclusive<u32> = 1..=256;
/// `/proc/fs/nfsd/max_block_size`: the kernel takes 1 KiB to 1 MiB (NFSSVC_MAXBLKSIZE).
const BLOCK_SIZE: std::ops::RangeInclusive<u64> = 1024..=1024 * 1024;

/// Checks the profile of VM `vm` (key path `k`, e.g. `vms[0]`).
pub(super) fn check(errs: &mut Vec<ValidationError>, catalog: &Catalog, s: &SuiteSpec, vm: &VmSpec, k: &str) {
    let Some(p) = &vm.profile else { return };
    let key = format!("{k}.profile");
    if !catalog.profiles.contains_key(&p.name) {
        let known = catalog.profiles.keys().cloned().collect::<Vec<_>>().join(", ");
        errs.push(ValidationError::Unknown {
            key: if p.exports.is_some() || !p.params.given().is_empty() { format!("{key}.name") } else { key },
            what: "profile",
            value: p.name.clone(),
            hint: format!(" (known: {known})"),
        });
        return;
    }
    let Some(defaults) = catalog.profile_params.get(&p.name) else {
        let given = p.exports.as_ref().map(|_| "exports").into_iter().chain(p.params.given());
        if let Some(field) = given.into_iter().next() {
            rule(errs, format!("{key}.{field}"), format!("profile {} takes no parameters", p.name));
        }
        return;
    };
    check_exports(errs, s, vm, p, &key);
    if let Some(vs) = &p.params.nfs_versions {
        check_nfs_versions(errs, vm, p, defaults, vs, &key);
    }
    if let Some(t) = p.params.threads {
        range(errs, &format!("{key}.threads"), t, &THREADS, " threads");
    }
    if let Some(b) = p.params.block_size.flatten() {
        range(errs, &format!("{key}.block_size"), b, &BLOCK_SIZE, " bytes");
        if BLOCK_SIZE.contains(&b) && b % 1024 != 0 {
            rule(errs, format!("{key}.block_size"), format!("{b} bytes is not a whole number of KiB"));
        }
    }
}

/// Adds a rule error at `key`.
fn rule(errs: &mut Vec<ValidationError>, key: String, message: String) {
    errs.push(ValidationError::Rule { key, message })
}

/// The exports of profile `p` of VM `vm` (key path `key`): there is one (or the VM is
/// nfs_read's server, whose export is added), each a guest folder exported once, with
/// an exports(5) option list.
fn check_exports(errs: &mut Vec<ValidationError>, s: &SuiteSpec, vm: &VmSpec, p: &ProfileSpec, key: &str) {
    // No hidden default export: the suite says what the server exports.
    let from_nfs_read = s.nfs_read.as_ref().is_some_and(|n| n.server == vm.name);
    let given = p.exports.as_ref().map_or(0, Vec::len);
    if given == 0 && !from_nfs_read {
        rule(
            errs,
            key.to_string(),
            format!(
                "profile {} on VM {} exports nothing: give its exports, e.g. `profile: {{name: {}, exports: [{{path: /srv/export}}]}}`, or make the VM nfs_read's server",
                p.name, vm.name, p.name
            ),
        );
    }
    let mut paths = BTreeSet::new();
    if let Some(n) = s.nfs_read.as_ref().filter(|_| from_nfs_read) {
        paths.insert(n.export.trim_end_matches('/').to_string());
    }
    for (i, e) in p.exports.iter().flatten().enumerate() {
        let ek = format!("{key}.exports[{i}]");
        guest::check_guest_dir(errs, &format!("{ek}.path"), "export", &e.path, guest::MAX_EXPORT_BYTES);
        if !paths.insert(e.path.trim_end_matches('/').to_string()) {
            rule(errs, format!("{ek}.path"), format!("{} is exported twice", e.path));
        }
        if let Some(o) = &e.options {
            if o.is_empty()
                || o.len() > 256
                || !o.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || ",=_.:-".contains(c))
            {
                rule(
                    errs,
                    format!("{ek}.options"),
                    format!("{o:?} is not an exports(5) option list (lowercase letters, digits, ',', '=', '_', '.', ':', '-'; at most 256 bytes)"),
                );
            }
        }
    }
}

/// `nfs_versions` `vs` of profile `p` of VM `vm` (key path `key`): at least one, each
/// among those the profile allows (its `nfs_versions_allowed`, else [`NFS_VERSIONS`])
/// and given once, and not NFSv2 alone where the kernel can't serve it.
fn check_nfs_versions(
    errs: &mut Vec<ValidationError>,
    vm: &VmSpec,
    p: &ProfileSpec,
    defaults: &ProfileDefaults,
    vs: &[String],
    key: &str,
) {
    let allowed: Vec<&str> = defaults
        .nfs_versions_allowed
        .as_ref()
        .map_or_else(|| NFS_VERSIONS.to_vec(), |a| a.iter().map(String::as_str).collect());
    if vs.is_empty() {
        rule(errs, format!("{key}.nfs_versions"), "at least one NFS version is served".into());
    }
    let mut seen = BTreeSet::new();
    for (i, v) in vs.iter().enumerate() {
        if !allowed.contains(&v.as_str()) {
            rule(
                errs,
                format!("{key}.nfs_versions[{i}]"),
                format!("profile {} serves NFS versions {}; not {v:?}", p.name, allowed.join(", ")),
            );
        } else if !seen.insert(v) {
            rule(errs, format!("{key}.nfs_versions[{i}]"), format!("version {v} is given twice"));
        }
    }
    // NFSv2 alone serves nothing where the kernel can't serve it.
    if !serves_nfsv2(vm) && !vs.is_empty() && vs.iter().all(|v| v == "2") {
        rule(
            errs,
            format!("{key}.nfs_versions"),
            format!(
                "profile {} can't serve NFSv2 on VM {}'s Debian kernel (rpc.nfsd fails to enable it there), so nfs_versions [\"2\"] would serve nothing; add \"3\"",
                p.name, vm.name
            ),
        );
    }
}

/// Whether the profiles can serve NFSv2 on VM `vm`'s kernel: not on a Debian kernel. On
/// every recorded run of the shipped rootfs (Debian 5.10, 6.1 and 6.12 servers)
/// `rpc.nfsd --nfs-version 2` failed and the profile fell back to the other versions
/// asked for; source-built kernels set `CONFIG_NFSD_V2=y`
/// (`images/kernels/nfs-udp-guest.config`).
pub(super) fn serves_nfsv2(vm: &VmSpec) -> bool {
    vm.kernel.debian.is_none()
}
