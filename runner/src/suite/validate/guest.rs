//! Rules for text that reaches the guest: commands (`run`, `setup`, `teardown`,
//! records, `client_setup`) and the paths the runner writes into generated commands
//! and `/etc/exports` (`nfs_read.export`, `mount_point`, `file.name`,
//! `mountstats.mount`).
//!
//! A command is the user's own shell text and stays free, but it must fit in one exec
//! argument and hold no NUL. Every path the runner puts into a generated command is
//! checked against a strict pattern here *and* quoted with
//! [`crate::plan::shell_quote`] there: either alone would do; together a mistake
//! in one is caught by the other.

use crate::plan::Plan;
use crate::schema::text::{non_ascii_hint, shown};

use super::ValidationError;

/// Longest command, script or path the guest can take as one exec argument, bytes:
/// Linux's `MAX_ARG_STRLEN` (32 pages of 4 KiB = 131072) minus the terminating NUL.
/// Every step runs as `/bin/sh -c SCRIPT` through the guest agent.
pub const MAX_EXEC_ARG_BYTES: usize = 32 * 4096 - 1;

/// Longest guest path, bytes (`PATH_MAX` 4096 minus the NUL).
pub const MAX_PATH_BYTES: usize = 4095;

/// Longest name of one path component, bytes (`NAME_MAX`).
pub const MAX_NAME_BYTES: usize = 255;

/// Longest NFS export path, bytes (NFSv3's `MNTPATHLEN`).
pub const MAX_EXPORT_BYTES: usize = 1024;

/// Longest `mount -o` option list, bytes. The kernel takes one page of mount data and
/// `mount.nfs` adds its own options (`addr=…`) to the user's; a kilobyte leaves room.
pub const MAX_MOUNT_OPTIONS_BYTES: usize = 1024;

/// Folders of the guest's own system. A mount point or export there (or below) hides or
/// writes into what the guest runs on: binaries and libraries (`/usr`, `/lib`), its
/// configuration (`/etc`), the kernel's virtual filesystems (`/proc`, `/sys`, `/dev`,
/// `/run`), NFS's own state (`/var/lib/nfs`). Below them nothing is a sensible place
/// for a test mount either, so the whole subtree is refused: a user of this kind of
/// tool mounts under `/mnt`, `/srv`, `/home`, `/opt` or `/media`.
pub const SYSTEM_DIRS: &[&str] = &[
    "/bin", "/boot", "/dev", "/etc", "/lib", "/lib32", "/lib64", "/libx32", "/proc", "/run", "/sbin", "/sys", "/usr",
    "/var",
];

/// Checks a shell command given by the user (`key` is its key path).
pub fn check_command(errs: &mut Vec<ValidationError>, key: &str, command: &str) {
    let rule = |message: String| ValidationError::Rule { key: key.into(), message };
    if command.trim().is_empty() {
        errs.push(rule("the command is empty".into()));
    } else if command.contains('\0') {
        errs.push(rule("the command contains a NUL byte, which no exec argument can hold".into()));
    } else if command.len() > MAX_EXEC_ARG_BYTES {
        errs.push(rule(format!(
            "the command is {} bytes; a guest command is at most {MAX_EXEC_ARG_BYTES} bytes (one exec argument, Linux's MAX_ARG_STRLEN): split it into several steps, or ship it as a profile under images/profiles/",
            command.len()
        )));
    }
}

/// Checks every step of the compiled `plan` fits in one exec argument: a measurement's
/// iteration script holds its `setup`, `run`, `teardown` and records, each quoted, so
/// commands that fit alone may not fit together.
pub fn check_plan_scripts(plan: &Plan) -> Vec<ValidationError> {
    let mut errs = Vec::new();
    let mut reported = std::collections::BTreeSet::new();
    for (v, vm) in plan.vms.iter().enumerate() {
        for st in &vm.steps {
            let key = st.origin.clone().unwrap_or_else(|| format!("vms[{v}]"));
            if st.script.len() > MAX_EXEC_ARG_BYTES && reported.insert(key.clone()) {
                errs.push(ValidationError::Rule {
                    key,
                    message: format!(
                        "the guest script of step {} on {} is {} bytes; one exec argument holds at most {MAX_EXEC_ARG_BYTES} (Linux's MAX_ARG_STRLEN): shorten its commands",
                        st.name,
                        vm.name,
                        st.script.len()
                    ),
                });
            }
        }
    }
    errs
}

/// Why `p` is not an absolute guest path of the strict form, or `None`: starts with
/// `/`; ASCII letters, digits, `.`, `_`, `-` and `/` only; no empty, `.` or `..`
/// component and no trailing `/`; no component starting with `-` or longer than
/// [`MAX_NAME_BYTES`]; at most `max` bytes in all.
pub fn path_problem(p: &str, max: usize) -> Option<String> {
    if !p.starts_with('/') {
        return Some("must be an absolute path (starting with '/')".into());
    }
    if let Some(c) = p.chars().find(|c| !(c.is_ascii_alphanumeric() || "._-/".contains(*c))) {
        let (what, hint) = match c {
            ' ' => ("a space".to_string(), String::new()),
            '\n' | '\r' => ("a line break".to_string(), String::new()),
            '\t' => ("a tab".to_string(), String::new()),
            c if c.is_ascii_control() => ("a control character".to_string(), String::new()),
            c if c.is_ascii() => (format!("'{c}'"), String::new()),
            _ => ("a non-ASCII character".to_string(), non_ascii_hint(p)),
        };
        return Some(format!(
            "holds {what}; a guest path may use only ASCII letters, digits, '.', '_', '-' and '/'{hint}"
        ));
    }
    if p.len() > max {
        return Some(format!("is {} bytes; at most {max}", p.len()));
    }
    if p == "/" {
        return None;
    }
    if p.ends_with('/') {
        return Some("must not end with '/'".into());
    }
    for c in p[1..].split('/') {
        match c {
            "" => return Some("holds an empty component ('//')".into()),
            "." | ".." => return Some(format!("holds a '{c}' component; write the path without it")),
            _ if c.starts_with('-') => return Some(format!("holds a component starting with '-' ({c:?})")),
            _ if c.len() > MAX_NAME_BYTES => {
                return Some(format!("has a component of {} bytes; at most {MAX_NAME_BYTES} (NAME_MAX)", c.len()))
            }
            _ => {}
        }
    }
    None
}

/// Whether guest path `p` is folder `dir` or lies below it (`/usrx` is not below `/usr`).
pub fn is_at_or_under(p: &str, dir: &str) -> bool {
    p == dir || p.strip_prefix(dir).is_some_and(|rest| rest.starts_with('/'))
}

/// The system folder `p` is or lies under (see [`SYSTEM_DIRS`]); `/` itself counts.
pub fn system_dir(p: &str) -> Option<&'static str> {
    if p == "/" {
        return Some("/");
    }
    SYSTEM_DIRS.iter().copied().find(|d| is_at_or_under(p, d))
}

/// Checks a folder in the guest that the runner mounts over or exports (`what` names
/// it in the message): [`path_problem`] with `max` bytes, then not a system folder.
pub fn check_guest_dir(errs: &mut Vec<ValidationError>, key: &str, what: &str, p: &str, max: usize) {
    let message = if let Some(why) = path_problem(p, max) {
        format!("{what} {} {why}", shown(p, 80))
    } else if let Some(d) = system_dir(p) {
        let place =
            if d == "/" { "the guest's root folder".to_string() } else { format!("the guest's system folder {d}") };
        format!(
            "{what} {} is {place}{}; use a folder under /mnt, /srv, /home, /opt or /media",
            shown(p, 80),
            if p == d { "" } else { " (or below it)" }
        )
    } else {
        return;
    };
    errs.push(ValidationError::Rule { key: key.into(), message });
}

/// Why `name` is not a file name relative to a folder (`nfs_read.file.name`), or
/// `None`: components of ASCII letters, digits, `.`, `_` and `-`, separated by `/`;
/// none empty, `.` or `..`, none starting with `-` (it would be an option to `ls`),
/// none longer than [`MAX_NAME_BYTES`].
pub fn relative_name_problem(name: &str) -> Option<String> {
    if name.is_empty() {
        return Some("is empty".into());
    }
    if name.starts_with('/') {
        return Some("must be relative to the export (no leading '/')".into());
    }
    path_problem(&format!("/{name}"), usize::MAX)
}

/// Symbolic links of Debian's rootfs (bookworm) that lead into a folder no file is
/// copied into, and where: a copy through them would land there.
pub(super) const GUEST_SYMLINKS: &[(&str, &str)] = &[
    ("/var/run", "/run"),
    ("/var/lock", "/run/lock"),
    ("/etc/localtime", "/usr/share/zoneinfo/Etc/UTC"),
    ("/etc/os-release", "/usr/lib/os-release"),
    ("/etc/rmt", "/usr/sbin/rmt"),
];
/// Folders of Debian's rootfs (bookworm minbase and the default rootfs's packages)
/// outside [`NO_FILES_UNDER`](super::files::NO_FILES_UNDER): the copy step's `cat > DEST` can't write a file over one.
pub(super) const GUEST_FOLDERS: &[&str] = &[
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strict_paths() {
        for good in ["/", "/mnt/home", "/srv/nfs-export_1", "/a/b.c"] {
            assert_eq!(path_problem(good, MAX_PATH_BYTES), None, "{good}");
        }
        for bad in [
            "mnt",
            "/mnt/$(reboot)",
            "/mnt/`reboot`",
            "/mnt/a\"b",
            "/mnt/a'b",
            "/mnt/a b",
            "/mnt/a\nb",
            "/mnt/a;b",
            "/mnt/",
            "/mnt//a",
            "/mnt/./a",
            "/mnt/../etc",
            "/mnt/-rf",
            "/mnt/\u{430}",
        ] {
            assert!(path_problem(bad, MAX_PATH_BYTES).is_some(), "{bad:?}");
        }
        assert!(path_problem(&format!("/{}", "a".repeat(256)), MAX_PATH_BYTES).unwrap().contains("NAME_MAX"));
        assert!(path_problem(&"/a".repeat(3000), MAX_PATH_BYTES).unwrap().contains("at most 4095"));
    }

    #[test]
    fn system_folders() {
        assert_eq!(system_dir("/"), Some("/"));
        assert_eq!(system_dir("/proc"), Some("/proc"));
        assert_eq!(system_dir("/usr/local/x"), Some("/usr"));
        assert_eq!(system_dir("/usrx"), None);
        assert_eq!(system_dir("/mnt/home"), None);
        assert_eq!(system_dir("/tmp/x"), None);
    }

    #[test]
    fn relative_names() {
        assert_eq!(relative_name_problem("user/100000000.bytes"), None);
        for bad in [".", "..", "a/../b", "", "/abs", "a//b", "-x", "a b", &"n".repeat(256)] {
            assert!(relative_name_problem(bad).is_some(), "{bad:?}");
        }
    }
}
