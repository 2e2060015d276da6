//! Rules of what a VM adds to its guest: extra `packages`, `sysctl` values and `files`.

use super::kernel::{host_path_problem, Want};
use super::{guest, ValidationError};
use crate::infra::images::{Catalog, DEFAULT_ROOTFS};
use crate::schema::{SuiteFile, SuiteSpec, VmSpec};

/// Most extra packages of a VM.
pub const MAX_PACKAGES: usize = 50;
/// Most files copied into one VM.
pub const MAX_FILES: usize = 16;
/// Largest file copied into a guest, bytes (it travels through the guest agent's JSON).
pub const MAX_FILE_BYTES: u64 = 1024 * 1024;
/// Environment variables a VM's `env:` may not set, and why: the runner sets them, or
/// the shell, GNU time or the C library acts on them in every command the runner runs
/// (a measurement's script is `/bin/sh`, its timer GNU `time`, whose output the runner
/// parses).
const RESERVED_ENV: &[(&str, &str)] = &[
    ("PATH", "the runner sets it"),
    ("LC_ALL", "the runner sets it (C, so that the tools it parses print in one format)"),
    ("HOME", "the shell acts on it"),
    ("SHELL", "the shell acts on it"),
    ("IFS", "the shell splits words by it"),
    ("ENV", "the shell runs the file it names"),
    ("BASH_ENV", "bash runs the file it names before every script"),
    ("SHELLOPTS", "bash takes its options from it"),
    ("BASHOPTS", "bash takes its options from it"),
    ("GLOBIGNORE", "bash's globbing acts on it"),
    ("PROMPT_COMMAND", "bash runs it"),
    ("PS1", "the shell acts on it"),
    ("PS4", "the shell acts on it"),
    ("CDPATH", "the shell's cd acts on it"),
    ("TERM", "the runner's terminal sets it"),
    ("TIME", "GNU time takes its output format from it, and the runner parses that output"),
    ("POSIXLY_CORRECT", "GNU time then prints another format, and the runner parses that output"),
    ("GLIBC_TUNABLES", "the C library acts on it in every program"),
    ("GCONV_PATH", "the C library loads code from it"),
    ("TMPDIR", "the runner's measurement script makes its scratch folder with mktemp, which creates it under TMPDIR"),
];
/// Prefixes of reserved environment variable names, and why.
const RESERVED_ENV_PREFIXES: &[(&str, &str)] = &[
    ("LD_", "the dynamic loader acts on it in every program"),
    ("MALLOC_", "the C library's allocator acts on it in every program (MALLOC_PERTURB_, MALLOC_CHECK_, …)"),
    ("BASH_", "bash acts on it"),
    ("VMREPRO_", "the runner's own names"),
];
/// Folders no file is copied into: the kernel's and the runner's (`/proc`, `/sys`,
/// `/dev`, `/run`), the guest's programs and libraries, which the runner's own steps
/// run (`/usr` but not `/usr/local`, `/bin`, `/sbin`, `/lib*`, `/boot`), and NFS's state.
const NO_FILES_UNDER: &[&str] = &[
    "/proc",
    "/sys",
    "/dev",
    "/run",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/usr",
    "/boot",
    "/var/lib/nfs",
];
/// Symbolic links of Debian's rootfs (bookworm) that lead into a folder no file is
/// copied into, and where: a copy through them would land there.
const GUEST_SYMLINKS: &[(&str, &str)] = &[
    ("/var/run", "/run"),
    ("/var/lock", "/run/lock"),
    ("/etc/localtime", "/usr/share/zoneinfo/Etc/UTC"),
    ("/etc/os-release", "/usr/lib/os-release"),
    ("/etc/rmt", "/usr/sbin/rmt"),
];
/// Folders of Debian's rootfs (bookworm minbase and the default rootfs's packages)
/// outside [`NO_FILES_UNDER`]: the copy step's `cat > DEST` can't write a file over one.
const GUEST_FOLDERS: &[&str] = &[
    "/etc",
    "/home",
    "/media",
    "/mnt",
    "/opt",
    "/root",
    "/srv",
    "/tmp",
    "/var",
    "/lost+found",
    "/etc/alternatives",
    "/etc/apt",
    "/etc/apt/apt.conf.d",
    "/etc/apt/auth.conf.d",
    "/etc/apt/keyrings",
    "/etc/apt/preferences.d",
    "/etc/apt/sources.list.d",
    "/etc/apt/trusted.gpg.d",
    "/etc/cron.d",
    "/etc/cron.daily",
    "/etc/default",
    "/etc/dpkg",
    "/etc/gss",
    "/etc/init.d",
    "/etc/insserv.conf.d",
    "/etc/kernel",
    "/etc/kernel/postinst.d",
    "/etc/keyutils",
    "/etc/ld.so.conf.d",
    "/etc/logrotate.d",
    "/etc/modprobe.d",
    "/etc/network",
    "/etc/network/if-pre-up.d",
    "/etc/network/if-up.d",
    "/etc/nfs.conf.d",
    "/etc/opt",
    "/etc/pam.d",
    "/etc/perl",
    "/etc/profile.d",
    "/etc/python3",
    "/etc/python3.11",
    "/etc/qemu",
    "/etc/rc0.d",
    "/etc/rc1.d",
    "/etc/rc2.d",
    "/etc/rc3.d",
    "/etc/rc4.d",
    "/etc/rc5.d",
    "/etc/rc6.d",
    "/etc/rcS.d",
    "/etc/request-key.d",
    "/etc/security",
    "/etc/security/limits.d",
    "/etc/security/namespace.d",
    "/etc/selinux",
    "/etc/skel",
    "/etc/sysctl.d",
    "/etc/systemd",
    "/etc/systemd/system",
    "/etc/systemd/user",
    "/etc/terminfo",
    "/etc/ufw",
    "/etc/update-motd.d",
    "/var/backups",
    "/var/cache",
    "/var/cache/adduser",
    "/var/cache/apt",
    "/var/cache/debconf",
    "/var/cache/ldconfig",
    "/var/lib",
    "/var/lib/apt",
    "/var/lib/dpkg",
    "/var/lib/misc",
    "/var/lib/pam",
    "/var/lib/python",
    "/var/lib/systemd",
    "/var/lib/ucf",
    "/var/local",
    "/var/log",
    "/var/log/apt",
    "/var/mail",
    "/var/opt",
    "/var/spool",
    "/var/spool/mail",
    "/var/tmp",
    "/usr/local",
    "/usr/local/bin",
    "/usr/local/etc",
    "/usr/local/games",
    "/usr/local/include",
    "/usr/local/lib",
    "/usr/local/man",
    "/usr/local/sbin",
    "/usr/local/share",
    "/usr/local/share/man",
    "/usr/local/src",
];
/// Where a file may go below a [`NO_FILES_UNDER`] folder: the local programs' tree.
const FILES_ALLOWED_UNDER: &[&str] = &["/usr/local"];
/// Files the runner or the guest's init writes, or that the guest's logins rest on: a
/// copy over them would be overwritten, or break every command.
const RUNNER_FILES: &[&str] = &[
    "/etc/exports",
    "/etc/hostname",
    "/etc/hosts",
    "/etc/fstab",
    "/etc/inittab",
    "/etc/passwd",
    "/etc/shadow",
    "/etc/group",
    "/etc/nsswitch.conf",
    "/etc/ld.so.preload",
    "/etc/ld.so.cache",
];

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
        } else if let Some(why) = crate::infra::qemu::args::RUNNER_PARAMETERS
            .iter()
            .find(|(p, _)| p.strip_prefix("sysctl.").is_some_and(|n| n.replace('-', "_") == name.replace('-', "_")))
            .map(|(_, w)| w)
        {
            rule(errs, key.clone(), format!("{name} is the runner's: {why}; remove it from sysctl"));
        }
        if let Some(why) = float_problem(value, "sysctl -w would be given") {
            rule(errs, key.clone(), why);
            continue;
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
        } else if let Some(why) = reserved_env(name) {
            rule(errs, key.clone(), format!("{name} is reserved: {why}; choose another name"));
        }
        if value.len() > 4096 || value.chars().any(|c| c.is_control() && c != '\t') {
            rule(errs, key, "an environment value is at most 4096 bytes of text without control characters".into());
        }
    }
    // Files: a readable file of the suite's folder, to a strict guest path.
    if vm.files.len() > MAX_FILES {
        rule(errs, format!("{k}.files"), format!("{} files; at most {MAX_FILES}", vm.files.len()));
    }
    let mut dests: Vec<(usize, &str)> = Vec::new();
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
                        "{} is {} bytes; a file copied into a guest is at most {MAX_FILE_BYTES} bytes (1 MiB)",
                        file.resolve(&f.src).display(),
                        meta.len()
                    ),
                );
            }
        }
        if let Some(why) = guest::path_problem(&f.dest, guest::MAX_PATH_BYTES) {
            rule(errs, format!("{fk}.dest"), format!("{} {why}", f.dest));
        } else if let Some(why) = dest_problem(&f.dest) {
            rule(errs, format!("{fk}.dest"), why);
        } else if let Some(&(_, d)) = dests.iter().find(|(_, d)| *d == f.dest) {
            rule(errs, format!("{fk}.dest"), format!("{d} is copied twice"));
        } else if let Some(&(j, d)) = dests.iter().find(|(_, d)| guest::is_at_or_under(&f.dest, d)) {
            rule(
                errs,
                format!("{fk}.dest"),
                format!(
                    "{} is under {d}, which files[{j}] copies as a file: the guest can't make {d} a folder too",
                    f.dest
                ),
            );
        } else if let Some(&(j, d)) = dests.iter().find(|(_, d)| guest::is_at_or_under(d, &f.dest)) {
            rule(
                errs,
                format!("{fk}.dest"),
                format!("{} is a folder for files[{j}] ({d}); the guest can't write a file there too", f.dest),
            );
        } else {
            dests.push((i, f.dest.as_str()));
        }
        if let Some(m) = &f.mode {
            if parse_mode(m).is_none() {
                rule(errs, format!("{fk}.mode"), format!("{m:?} is not a mode in octal (e.g. \"0644\", \"0755\")"));
            }
        }
    }
}

/// Why the YAML value `v` is a number that can't stand for the text it becomes, if it
/// is: a float (`1e7`, `4.0`) becomes `10000000.0`, `4.0`; `.inf` and `.nan` are no
/// number at all. For values the runner hands on as text (`sysctl`, `checks[].equals`).
/// `then` says what the float's text would be used as (`sysctl -w would be given`).
pub(super) fn float_problem(v: &serde_yaml::Value, then: &str) -> Option<String> {
    let serde_yaml::Value::Number(n) = v else { return None };
    let f = n.as_f64().filter(|_| n.is_f64())?;
    if !f.is_finite() {
        return Some(format!("{n} is not a finite number; write a number, or quote the text (\"{n}\")"));
    }
    let fix = if f.fract() == 0.0 && f.abs() < 1e15 {
        format!("write the integer ({}) or quote the text", f as i64)
    } else {
        "quote the text as it should read".to_string()
    };
    Some(format!("{n} is a YAML float (a number with '.' or an exponent), so {then} the text {n}; {fix}"))
}

/// Why environment variable `name` is reserved, if it is.
fn reserved_env(name: &str) -> Option<&'static str> {
    RESERVED_ENV
        .iter()
        .find(|(n, _)| *n == name)
        .or_else(|| RESERVED_ENV_PREFIXES.iter().find(|(p, _)| name.starts_with(p)))
        .map(|(_, why)| *why)
}

/// Why no file may be copied to guest path `dest` (already a strict path), if so.
fn dest_problem(dest: &str) -> Option<String> {
    let under = |d: &str| guest::is_at_or_under(dest, d);
    if dest == "/" {
        return Some("/ is the guest's root folder; give a file's path".into());
    }
    if let Some((link, target)) = GUEST_SYMLINKS.iter().find(|(l, _)| under(l)) {
        let landed = format!("{target}{}", &dest[link.len()..]);
        let why = dest_problem(&landed).unwrap_or_default();
        return Some(format!(
            "{dest} goes through {link}, a symbolic link to {target} in the guest, so it would be written to {landed}: {why}"
        ));
    }
    if GUEST_FOLDERS.contains(&dest) {
        return Some(format!(
            "{dest} is a folder of the guest's rootfs; the copy writes a file, so give its full path (e.g. {dest}/NAME)"
        ));
    }
    if let Some(d) = NO_FILES_UNDER.iter().find(|d| under(d)).filter(|_| !FILES_ALLOWED_UNDER.iter().any(|a| under(a)))
    {
        let what = match *d {
            "/proc" | "/sys" | "/dev" | "/run" => "a folder of the kernel or the runner",
            "/var/lib/nfs" => "NFS's own state",
            _ => "the guest system's programs and libraries, which the runner's steps run (/usr/local is allowed)",
        };
        return Some(format!("{dest} is under {d}, {what}; copy it elsewhere"));
    }
    RUNNER_FILES.contains(&dest).then(|| {
        format!(
            "{dest} is written by the runner or the guest's init, or every login rests on it; copy the file elsewhere"
        )
    })
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

/// Why `src` (a `files[].src`) is not inside the suite file's folder, if it is not: what a
/// suite copies into a guest can end up in its published results, so a suite may only
/// name files that travel with it. Symbolic links are followed (`..` folded by hand for a
/// path that does not exist).
fn outside_suite_folder(file: &SuiteFile, src: &std::path::Path) -> Option<String> {
    let folder = super::kernel::real_dir(&file.dir);
    let (_, real) = super::kernel::real_path(file, src);
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

    #[test]
    fn reserved_environment_names() {
        for name in [
            "PATH",
            "TIME",
            "POSIXLY_CORRECT",
            "BASH_ENV",
            "SHELLOPTS",
            "LD_PRELOAD",
            "BASH_XTRACEFD",
            "VMREPRO_X",
            "TMPDIR",
            "MALLOC_PERTURB_",
            "MALLOC_ARENA_MAX",
        ] {
            assert!(reserved_env(name).is_some(), "{name}");
        }
        for name in ["VERS", "TIMEOUT", "NFS_VERS", "LDX", "BASHFUL", "TMP", "MALLOC"] {
            assert_eq!(reserved_env(name), None, "{name}");
        }
    }

    #[test]
    fn file_destinations() {
        for ok in
            ["/root/a.sh", "/usr/local/bin/tool", "/etc/modprobe.d/nfs.conf", "/srv/x", "/usrx/y", "/etc/exports.d/x"]
        {
            assert_eq!(dest_problem(ok), None, "{ok}");
        }
        for bad in [
            "/",
            "/proc/sys/x",
            "/usr/bin/time",
            "/bin/sh",
            "/sbin/vmrepro-init",
            "/lib/modules/x",
            "/boot/vmlinuz",
            "/var/lib/nfs/etab",
            "/etc/exports",
            "/etc/hostname",
            "/etc/passwd",
            "/etc/ld.so.preload",
            "/etc",
            "/tmp",
            "/usr/local/bin",
            "/var/tmp",
            "/etc/default",
            "/var/run/x",
            "/var/lock/x/y",
            "/etc/localtime",
        ] {
            assert!(dest_problem(bad).is_some(), "{bad}");
        }
        for (link, _) in GUEST_SYMLINKS {
            let why = dest_problem(&format!("{link}/x")).unwrap_or_default();
            assert!(why.ends_with("copy it elsewhere"), "{link}: {why}");
        }
    }
}
