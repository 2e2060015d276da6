//! Rules of a VM's `files`: a readable file of the suite's folder, at most
//! [`MAX_FILE_BYTES`], copied to a strict guest path that the runner, the guest's init
//! and its programs leave alone, each once, with an octal mode.

use super::guest::{self, GUEST_FOLDERS, GUEST_SYMLINKS};
use super::kernel::{host_path_problem, Want};
use super::ValidationError;
use crate::schema::{SuiteFile, VmSpec};

/// Most files copied into one VM.
pub const MAX_FILES: usize = 16;
/// Largest file copied into a guest, bytes (it travels through the guest agent's JSON).
pub const MAX_FILE_BYTES: u64 = 1024 * 1024;
/// Folders no file is copied into: the kernel's and the runner's (`/proc`, `/sys`,
/// `/dev`, `/run`), the guest's programs and libraries, which the runner's own steps
/// run (`/usr` but not `/usr/local`, `/bin`, `/sbin`, `/lib*`, `/boot`), and NFS's state.
pub(super) const NO_FILES_UNDER: &[&str] = &[
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

/// Checks the `files` of VM `vm` (key path `k`) of the suite `file`.
pub(super) fn check(errs: &mut Vec<ValidationError>, file: &SuiteFile, vm: &VmSpec, k: &str) {
    let rule = |errs: &mut Vec<ValidationError>, key: String, message: String| {
        errs.push(ValidationError::Rule { key, message })
    };
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
    fn modes() {
        assert_eq!(parse_mode("0755"), Some(0o755));
        assert_eq!(parse_mode("644"), Some(0o644));
        assert_eq!(parse_mode("0855"), None);
        assert_eq!(parse_mode("7777"), None);
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
