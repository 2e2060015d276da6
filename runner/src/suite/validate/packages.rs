//! Rules of a VM's extra `packages`: Debian package names, each once, from a suite the
//! rootfs recipe's sources hold.

use super::ValidationError;
use crate::infra::images::{Catalog, DEFAULT_ROOTFS};
use crate::schema::{SuiteSpec, VmSpec};

/// Most extra packages of a VM.
pub const MAX_PACKAGES: usize = 50;

/// Checks the `packages` of VM `vm` (key path `k`) of suite `s`.
pub(super) fn check(errs: &mut Vec<ValidationError>, catalog: &Catalog, s: &SuiteSpec, vm: &VmSpec, k: &str) {
    let rule = |errs: &mut Vec<ValidationError>, key: String, message: String| {
        errs.push(ValidationError::Rule { key, message })
    };
    // Packages: Debian package names, from a suite the recipe's sources hold.
    let recipe_name = vm.rootfs.as_deref().or(s.defaults.rootfs.as_deref()).unwrap_or(DEFAULT_ROOTFS);
    let suites: Vec<String> = catalog
        .rootfs
        .get(recipe_name)
        .map(|(r, _)| std::iter::once(r.distribution.clone()).chain(r.extra_suites.iter().cloned()).collect())
        .unwrap_or_default();
    for (field, list) in [("packages", &vm.packages)] {
        if list.len() > MAX_PACKAGES {
            rule(errs, format!("{k}.{field}"), format!("{} packages; at most {MAX_PACKAGES}", list.len()));
        }
        for (i, p) in list.iter().enumerate() {
            if let Some(why) = package_problem(p, &suites) {
                rule(errs, format!("{k}.{field}[{i}]"), why);
            }
            // One package once: `fio` and `fio/bookworm-backports` would leave which one
            // is installed to apt.
            let name = |q: &str| q.split('/').next().unwrap_or(q).to_string();
            if let Some(j) = list[..i].iter().position(|q| name(q) == name(p)) {
                rule(
                    errs,
                    format!("{k}.{field}[{i}]"),
                    format!("package {} is already asked for at [{j}] ({:?})", name(p), list[j]),
                );
            }
        }
    }
}

/// Why `p` is not a package a rootfs can take: a Debian package name
/// (`[a-z0-9][a-z0-9+.-]+`), optionally `/suite` with a suite the recipe's sources hold.
fn package_problem(p: &str, suites: &[String]) -> Option<String> {
    let (name, suite) = match p.split_once('/') {
        Some((n, s)) => (n, Some(s)),
        None => (p, None),
    };
    if !crate::infra::images::is_debian_name(name) {
        return Some(format!(
            "{p:?} is not a Debian package name (lowercase letters, digits, '+', '.', '-'; e.g. fio, iperf3)"
        ));
    }
    if let Some(s) = suite {
        if !suites.iter().any(|x| x == s) {
            return Some(format!("{p:?}: the rootfs's sources hold {}; not {s:?}", suites.join(", ")));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn package_names() {
        let suites = vec!["bookworm".to_string(), "bookworm-backports".to_string()];
        assert_eq!(package_problem("iperf3", &suites), None);
        assert_eq!(package_problem("libc6-dev", &suites), None);
        assert_eq!(package_problem("fio/bookworm-backports", &suites), None);
        assert!(package_problem("fio/trixie", &suites).is_some());
        assert!(package_problem("fio;reboot", &suites).is_some());
        assert!(package_problem("-x", &suites).is_some());
    }
}
