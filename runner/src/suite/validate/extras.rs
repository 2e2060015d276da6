//! Rules of what a VM adds to its guest: extra `packages`, `sysctl` values and `files`.

use std::collections::BTreeSet;

use super::kernel::{host_path_problem, Want};
use super::{guest, ValidationError};
use crate::infra::images::{Catalog, DEFAULT_ROOTFS};
use crate::spec::{SuiteFile, SuiteSpec, VmSpec};

/// Most extra packages of a VM.
pub const MAX_PACKAGES: usize = 50;
/// Most files copied into one VM.
pub const MAX_FILES: usize = 16;
/// Largest file copied into a guest, bytes (it travels through the guest agent's JSON).
pub const MAX_FILE_BYTES: u64 = 1024 * 1024;
/// Environment variables a VM's `env:` may not set.
const RESERVED_ENV: &[&str] = &["PATH", "LC_ALL", "HOME", "SHELL", "IFS", "ENV", "PS1", "PS4", "CDPATH", "TERM"];
/// Folders no file is copied into: the kernel's and the runner's.
const NO_FILES_UNDER: &[&str] = &["/proc", "/sys", "/dev", "/run"];

/// Checks VM `vm` (key path `k`) of suite `s`.
pub(super) fn check(
    errs: &mut Vec<ValidationError>,
    file: &SuiteFile,
    catalog: &Catalog,
    s: &SuiteSpec,
    vm: &VmSpec,
    k: &str,
) {
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
    // sysctl: dotted names and plain values (they reach `sysctl -w`, quoted).
    for (name, value) in &vm.sysctl {
        let key = format!("{k}.sysctl.{name}");
        let ok_name = name.len() <= 128
            && name.split('.').count() >= 2
            && name
                .split('.')
                .all(|c| !c.is_empty() && c.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-'));
        if !ok_name {
            rule(errs, key.clone(), format!("{name:?} is not a sysctl name (dotted, e.g. net.ipv4.ipfrag_time)"));
        }
        let text = match value {
            serde_yaml::Value::String(v) => v.clone(),
            serde_yaml::Value::Number(n) => n.to_string(),
            serde_yaml::Value::Bool(b) => if *b { "1" } else { "0" }.to_string(),
            _ => {
                rule(errs, key.clone(), "a sysctl value is a number or a short text".into());
                continue;
            }
        };
        if text.is_empty()
            || text.len() > 256
            || text.starts_with('-') && text[1..].parse::<i64>().is_err()
            || !text.chars().all(|c| c.is_ascii_alphanumeric() || " ._:,/+-".contains(c))
        {
            rule(
                errs,
                key,
                format!(
                    "{text:?} is not a sysctl value (letters, digits, spaces and . _ : , / + -; at most 256 bytes)"
                ),
            );
        }
    }
    // Environment: plain names (not the ones the shell or the loader act on), plain text.
    for (name, value) in &vm.env {
        let key = format!("{k}.env.{name}");
        let mut c = name.chars();
        let ok = name.len() <= 64
            && c.next().is_some_and(|c| c.is_ascii_uppercase() || c == '_')
            && c.all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_');
        if !ok {
            rule(errs, key.clone(), format!("{name:?} is not an environment variable name (uppercase letters, digits and '_', not starting with a digit)"));
        } else if RESERVED_ENV.contains(&name.as_str()) || name.starts_with("LD_") || name.starts_with("VMREPRO_") {
            rule(
                errs,
                key.clone(),
                format!("{name} is set by the runner or acted on by the shell or the loader; choose another name"),
            );
        }
        if value.len() > 4096 || value.chars().any(|c| c.is_control() && c != '\t') {
            rule(errs, key, "an environment value is at most 4096 bytes of text without control characters".into());
        }
    }
    // Files: a readable file of the suite's folder, to a strict guest path.
    if vm.files.len() > MAX_FILES {
        rule(errs, format!("{k}.files"), format!("{} files; at most {MAX_FILES}", vm.files.len()));
    }
    let mut dests = BTreeSet::new();
    for (i, f) in vm.files.iter().enumerate() {
        let fk = format!("{k}.files[{i}]");
        if let Some(why) = outside_suite_folder(file, &f.src) {
            rule(errs, format!("{fk}.src"), why);
        } else if let Some(why) = host_path_problem(file, &f.src, Want::File("a file to copy into the guest")) {
            rule(errs, format!("{fk}.src"), why);
        } else if let Ok(meta) = std::fs::metadata(file.resolve(&f.src)) {
            if meta.len() > MAX_FILE_BYTES {
                rule(
                    errs,
                    format!("{fk}.src"),
                    format!(
                        "is {} bytes; a file copied into a guest is at most {MAX_FILE_BYTES} bytes (1 MiB)",
                        meta.len()
                    ),
                );
            }
        }
        if let Some(why) = guest::path_problem(&f.dest, guest::MAX_PATH_BYTES) {
            rule(errs, format!("{fk}.dest"), format!("{} {why}", f.dest));
        } else if f.dest == "/" || NO_FILES_UNDER.iter().any(|d| f.dest == *d || f.dest.starts_with(&format!("{d}/"))) {
            rule(
                errs,
                format!("{fk}.dest"),
                format!(
                    "{} is in a folder of the kernel or the runner ({}); copy it elsewhere",
                    f.dest,
                    NO_FILES_UNDER.join(", ")
                ),
            );
        } else if !dests.insert(f.dest.as_str()) {
            rule(errs, format!("{fk}.dest"), format!("{} is copied twice", f.dest));
        }
        if let Some(m) = &f.mode {
            if parse_mode(m).is_none() {
                rule(errs, format!("{fk}.mode"), format!("{m:?} is not a mode in octal (e.g. \"0644\", \"0755\")"));
            }
        }
    }
}

/// Permission bits from their octal text (`"0755"`, `"644"`).
pub fn parse_mode(m: &str) -> Option<u32> {
    let digits = m.strip_prefix('0').filter(|d| d.len() == 3).unwrap_or(m);
    (digits.len() == 3 && digits.chars().all(|c| ('0'..='7').contains(&c)))
        .then(|| u32::from_str_radix(digits, 8).ok())
        .flatten()
}

/// Why `p` is not a package a rootfs can take: a Debian package name
/// (`[a-z0-9][a-z0-9+.-]+`), optionally `/suite` with a suite the recipe's sources hold.
fn package_problem(p: &str, suites: &[String]) -> Option<String> {
    let (name, suite) = match p.split_once('/') {
        Some((n, s)) => (n, Some(s)),
        None => (p, None),
    };
    let mut c = name.chars();
    let ok = name.len() >= 2
        && name.len() <= 64
        && c.next().is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
        && c.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "+.-".contains(c));
    if !ok {
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

/// Why `src` (a `files[].src`) is not inside the suite file's folder, if it is not: what a
/// suite copies into a guest can end up in its published results, so a suite may only
/// name files that travel with it. Symbolic links are followed (`..` folded by hand for a
/// path that does not exist).
fn outside_suite_folder(file: &SuiteFile, src: &std::path::Path) -> Option<String> {
    let folder = std::fs::canonicalize(&file.dir).unwrap_or_else(|_| super::kernel::lexically_normal(&file.dir));
    let given = if src.is_absolute() { src.to_path_buf() } else { file.dir.join(src) };
    let given = std::path::absolute(&given).unwrap_or(given);
    let real = std::fs::canonicalize(&given).unwrap_or_else(|_| super::kernel::lexically_normal(&given));
    (!real.starts_with(&folder)).then(|| {
        format!(
            "{} is outside the suite's folder {}; a file copied into a guest must be inside it (what a guest sees can end up in published results)",
            real.display(),
            folder.display()
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_and_package_names() {
        assert_eq!(parse_mode("0755"), Some(0o755));
        assert_eq!(parse_mode("644"), Some(0o644));
        assert_eq!(parse_mode("0855"), None);
        assert_eq!(parse_mode("7777"), None);
        let suites = vec!["bookworm".to_string(), "bookworm-backports".to_string()];
        assert_eq!(package_problem("iperf3", &suites), None);
        assert_eq!(package_problem("libc6-dev", &suites), None);
        assert_eq!(package_problem("fio/bookworm-backports", &suites), None);
        assert!(package_problem("fio/trixie", &suites).is_some());
        assert!(package_problem("fio;reboot", &suites).is_some());
        assert!(package_problem("-x", &suites).is_some());
    }
}
