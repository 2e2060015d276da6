//! What the host must allow an ordinary (non-root) user, checked where it is first
//! needed, with one message per missing prerequisite that says how to fix it (the
//! one-time setup is docs/src/operations/rootless.md, "Running as an ordinary user").
//!
//! Root needs none of this. An ordinary user needs:
//! - unprivileged user namespaces: the run's private network lives in one, and so does
//!   mmdebstrap's `--mode=unshare` rootfs build ([`check_userns`], [`diagnose_userns`]);
//! - read-write access to `/dev/net/tun`, for the VMs' tap devices ([`check_tun`]);
//! - subordinate uid and gid ranges (`/etc/subuid`, `/etc/subgid`) and the setuid
//!   helpers `newuidmap`/`newgidmap` (package `uidmap`), so that mmdebstrap can map
//!   the rootfs's users ([`check_subids`]);
//! - optionally `/dev/kvm` (group `kvm`): without it VMs use TCG ([`kvm_hint`]).
//!
//! [`doctor`] runs every check, for `vmrepro doctor`.

use std::path::Path;

/// A missing prerequisite: what is wrong and the commands that fix it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{problem}\n  fix: {fix}")]
pub struct Missing {
    /// What is missing, naming the file or setting.
    pub problem: String,
    /// How to fix it (commands to run once, as root where they say `sudo`).
    pub fix: String,
}

/// Subordinate ids mmdebstrap's unshare mode needs: a full 16-bit range.
pub const SUBID_COUNT: u64 = 65536;

/// Whether we run as root (then nothing here applies).
pub fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

/// Our user name (the uid as text if it has no passwd entry).
pub fn user_name() -> String {
    let uid = nix::unistd::geteuid();
    nix::unistd::User::from_uid(uid).ok().flatten().map_or_else(|| uid.to_string(), |u| u.name)
}

fn read_sysctl(path: &str) -> Option<String> {
    std::fs::read_to_string(path).ok().map(|s| s.trim().to_string())
}

/// Tries to create a user namespace (in a short-lived child, `true`); on failure says
/// why and how to allow it. Root: always `Ok`.
///
/// Errors: [`Missing`] from [`diagnose_userns`].
pub fn check_userns() -> Result<(), Missing> {
    if is_root() {
        return Ok(());
    }
    let mut cmd = std::process::Command::new("true");
    cmd.stdin(std::process::Stdio::null()).stdout(std::process::Stdio::null()).stderr(std::process::Stdio::null());
    // SAFETY: the closure only makes an async-signal-safe system call.
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(&mut cmd, || {
            nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWUSER).map_err(std::io::Error::from)
        });
    }
    match cmd.status() {
        Ok(_) => Ok(()),
        Err(e) => Err(diagnose_userns(&e, &read_sysctl)),
    }
}

/// [`diagnose_userns`] with this host's sysctls.
pub fn userns_error(err: &std::io::Error) -> Missing {
    diagnose_userns(err, &read_sysctl)
}

/// Why creating a user namespace failed with `err`, from the sysctls that forbid it
/// (read with `sysctl`, a path under `/proc/sys` → its trimmed value):
/// `kernel.unprivileged_userns_clone=0` (Debian's patch, kernels before 6.x),
/// `user.max_user_namespaces=0`, `kernel.apparmor_restrict_unprivileged_userns=1`
/// (Ubuntu 23.10+); otherwise a container's seccomp policy is the usual cause.
pub fn diagnose_userns(err: &std::io::Error, sysctl: &dyn Fn(&str) -> Option<String>) -> Missing {
    let is = |path: &str, value: &str| sysctl(path).is_some_and(|v| v == value);
    let persist = |setting: &str| {
        format!("sudo sysctl -w {setting}; to keep it after a reboot: echo {setting} | sudo tee /etc/sysctl.d/90-vmrepro.conf")
    };
    let problem =
        |why: &str| format!("unprivileged user namespaces are turned off ({why}; creating one failed: {err})");
    if is("/proc/sys/kernel/unprivileged_userns_clone", "0") {
        Missing {
            problem: problem("kernel.unprivileged_userns_clone = 0"),
            fix: persist("kernel.unprivileged_userns_clone=1"),
        }
    } else if is("/proc/sys/user/max_user_namespaces", "0") {
        Missing { problem: problem("user.max_user_namespaces = 0"), fix: persist("user.max_user_namespaces=15000") }
    } else if is("/proc/sys/kernel/apparmor_restrict_unprivileged_userns", "1") {
        Missing {
            problem: problem("AppArmor restricts them: kernel.apparmor_restrict_unprivileged_userns = 1"),
            fix: persist("kernel.apparmor_restrict_unprivileged_userns=0"),
        }
    } else {
        Missing {
            problem: format!("cannot create a user namespace ({err}), although no sysctl forbids it"),
            fix: "in a container, allow unshare(2) (e.g. docker --security-opt seccomp=unconfined), or run vmrepro as root".into(),
        }
    }
}

/// Whether we may open `/dev/net/tun` read-write (root: always).
///
/// Errors: [`Missing`] naming the device, its owner and mode, and the group or udev
/// rule that grants access (or "log in again" when we were added to its group after
/// this session started).
pub fn check_tun() -> Result<(), Missing> {
    check_device_rw(Path::new("/dev/net/tun"), &tun_fix)
}

fn tun_fix(user: &str, group: Option<&str>) -> String {
    let group = group.filter(|g| *g != "root").unwrap_or("tun");
    format!(
        "sudo groupadd -f {group} && sudo chgrp {group} /dev/net/tun && sudo chmod 0660 /dev/net/tun && sudo usermod -aG {group} {user}, then log in again; \
         to keep it after a reboot: echo 'KERNEL==\"tun\", GROUP=\"{group}\", MODE=\"0660\"' | sudo tee /etc/udev/rules.d/60-vmrepro-tun.rules \
         (or MODE=\"0666\", Debian's default, for every user)"
    )
}

/// Why `/dev/kvm` can't be opened (`err`), and how to allow it: `None` when the error
/// is not about permissions. KVM is optional (`accel: auto` falls back to TCG).
pub fn kvm_hint(err: &std::io::Error) -> Option<String> {
    if err.kind() != std::io::ErrorKind::PermissionDenied {
        return None;
    }
    let user = user_name();
    let group = file_group(Path::new("/dev/kvm"));
    Some(match group.as_deref() {
        Some("kvm") => format!("add {user} to group kvm: sudo usermod -aG kvm {user}, then log in again"),
        other => format!(
            "/dev/kvm belongs to group {}: sudo groupadd -f kvm && sudo chgrp kvm /dev/kvm && sudo chmod 0660 /dev/kvm && sudo usermod -aG kvm {user}, then log in again (Debian's udev rule does the first part at boot)",
            other.unwrap_or("?")
        ),
    })
}

fn file_group(path: &Path) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let gid = std::fs::metadata(path).ok()?.gid();
    nix::unistd::Group::from_gid(nix::unistd::Gid::from_raw(gid)).ok().flatten().map(|g| g.name)
}

/// Read-write access to a device for an ordinary user; `fix(user, group)` says how.
fn check_device_rw(path: &Path, fix: &dyn Fn(&str, Option<&str>) -> String) -> Result<(), Missing> {
    use nix::unistd::{access, AccessFlags};
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    if is_root() {
        return Ok(());
    }
    let meta = match std::fs::metadata(path) {
        Ok(m) => m,
        Err(e) => {
            return Err(Missing {
                problem: format!("{}: {e}", path.display()),
                fix: "sudo modprobe tun (the device is created by the tun module)".into(),
            })
        }
    };
    if access(path, AccessFlags::R_OK | AccessFlags::W_OK).is_ok() {
        return Ok(());
    }
    let user = user_name();
    let group = file_group(path);
    let owner = nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(meta.uid()))
        .ok()
        .flatten()
        .map_or_else(|| meta.uid().to_string(), |u| u.name);
    let problem = format!(
        "{} is not readable and writable by {user} (owner {owner}, group {}, mode {:04o})",
        path.display(),
        group.as_deref().unwrap_or("?"),
        meta.permissions().mode() & 0o7777
    );
    // In the group's member list but not in this session's groups: added after login.
    let listed = group
        .as_deref()
        .and_then(|g| nix::unistd::Group::from_name(g).ok().flatten())
        .is_some_and(|g| g.mem.contains(&user));
    if listed && meta.permissions().mode() & 0o060 == 0o060 {
        return Err(Missing {
            problem: format!(
                "{problem}; {user} was added to group {} after this session started",
                group.unwrap_or_default()
            ),
            fix: "log in again (or start a shell with `newgrp <group>`)".into(),
        });
    }
    Err(Missing { problem, fix: fix(&user, group.as_deref()) })
}

/// One `name:start:count` line of `/etc/subuid` or `/etc/subgid`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubIdRange {
    /// User name or numeric uid.
    pub owner: String,
    /// First subordinate id.
    pub start: u64,
    /// Number of ids.
    pub count: u64,
}

/// Parses `/etc/subuid`-format text (comments and malformed lines skipped).
pub fn parse_subids(text: &str) -> Vec<SubIdRange> {
    text.lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .filter_map(|l| {
            let mut f = l.trim().splitn(3, ':');
            let owner = f.next()?.to_string();
            let start = f.next()?.parse().ok()?;
            let count = f.next()?.parse().ok()?;
            Some(SubIdRange { owner, start, count })
        })
        .collect()
}

/// The ranges of `user` in `ranges`. mmdebstrap (and this runner) read them by user
/// name only, and want exactly one.
pub fn subids_of<'a>(ranges: &'a [SubIdRange], user: &str) -> Vec<&'a SubIdRange> {
    ranges.iter().filter(|r| r.owner == user).collect()
}

/// A free range of [`SUBID_COUNT`] ids after every range in `taken` (from 100000, as
/// `useradd` allocates them).
pub fn free_subid_start(taken: &[SubIdRange]) -> u64 {
    taken.iter().map(|r| r.start + r.count).max().unwrap_or(0).max(100_000)
}

/// Whether we (not root) have one range of at least [`SUBID_COUNT`] subordinate uids
/// and one of gids under our user name (as mmdebstrap's unshare mode reads them) and
/// the `newuidmap`/`newgidmap` helpers; returns the first uid and gid of the ranges
/// (`None` for root).
///
/// Errors: [`Missing`] with the `usermod` commands that fix it (a free range, and
/// removing an existing range that is too small or one too many).
pub fn check_subids() -> Result<Option<(u64, u64)>, Missing> {
    if is_root() {
        return Ok(None);
    }
    for helper in ["newuidmap", "newgidmap"] {
        if find_in_path(helper).is_none() {
            return Err(Missing {
                problem: format!(
                    "{helper} is not installed (building the rootfs as an ordinary user maps its users with it)"
                ),
                fix: "sudo apt-get install uidmap".into(),
            });
        }
    }
    let user = user_name();
    let read = |p: &str| std::fs::read_to_string(p).map(|t| parse_subids(&t)).unwrap_or_default();
    let (subuid, subgid) = (read("/etc/subuid"), read("/etc/subgid"));
    let (u, g) = (subids_of(&subuid, &user), subids_of(&subgid, &user));
    let good = |r: &[&SubIdRange]| r.len() == 1 && r[0].count >= SUBID_COUNT;
    if good(&u) && good(&g) {
        return Ok(Some((u[0].start, g[0].start)));
    }
    let describe = |r: &[&SubIdRange]| match r.len() {
        0 => "none".to_string(),
        _ => r.iter().map(|x| format!("{}-{}", x.start, x.start + x.count.max(1) - 1)).collect::<Vec<_>>().join(", "),
    };
    let mut fix = String::from("sudo usermod");
    for r in u.iter().filter(|_| !good(&u)) {
        fix.push_str(&format!(" --del-subuids {}-{}", r.start, r.start + r.count.max(1) - 1));
    }
    for r in g.iter().filter(|_| !good(&g)) {
        fix.push_str(&format!(" --del-subgids {}-{}", r.start, r.start + r.count.max(1) - 1));
    }
    if !good(&u) {
        let su = free_subid_start(&subuid);
        fix.push_str(&format!(" --add-subuids {su}-{}", su + SUBID_COUNT - 1));
    }
    if !good(&g) {
        let sg = free_subid_start(&subgid);
        fix.push_str(&format!(" --add-subgids {sg}-{}", sg + SUBID_COUNT - 1));
    }
    fix.push_str(&format!(" {user}"));
    Err(Missing {
        problem: format!(
            "{user}'s subordinate ids: uids {} (/etc/subuid), gids {} (/etc/subgid); building the rootfs as an ordinary user (mmdebstrap --mode=unshare) needs one range of {SUBID_COUNT} of each, under the user name",
            describe(&u),
            describe(&g)
        ),
        fix,
    })
}

fn find_in_path(program: &str) -> Option<std::path::PathBuf> {
    std::env::var_os("PATH").and_then(|p| std::env::split_paths(&p).map(|d| d.join(program)).find(|c| c.is_file()))
}

/// One line of `vmrepro doctor`.
#[derive(Debug, Clone)]
pub struct Check {
    /// What was checked.
    pub what: &'static str,
    /// `Ok(detail)` or what is missing.
    pub result: Result<String, Missing>,
    /// Whether a run can go on without it (KVM: TCG instead).
    pub optional: bool,
}

/// Every prerequisite, checked now (for `vmrepro doctor`).
pub fn doctor() -> Vec<Check> {
    let ok = |s: &str| Ok(s.to_string());
    let root = is_root();
    let mut out = vec![
        Check {
            what: "user namespaces",
            result: check_userns().and_then(|()| ok(if root { "root: not needed" } else { "can be created" })),
            optional: false,
        },
        Check {
            what: "/dev/net/tun",
            result: check_tun().and_then(|()| ok(if root { "root" } else { "readable and writable" })),
            optional: false,
        },
        Check {
            what: "subordinate ids",
            result: check_subids().and_then(|_| ok(if root { "root: not needed" } else { "enough for mmdebstrap" })),
            optional: false,
        },
    ];
    let kvm = match std::fs::OpenOptions::new().read(true).write(true).open("/dev/kvm") {
        Ok(_) => Ok("can be opened (whether it runs guests is probed at the first run)".to_string()),
        Err(e) => Err(Missing {
            problem: format!("/dev/kvm: {e}; VMs will use TCG (software emulation, slower)"),
            fix: kvm_hint(&e)
                .unwrap_or_else(|| "load the kvm module, or use a host with hardware virtualisation".into()),
        }),
    };
    out.push(Check { what: "/dev/kvm", result: kvm, optional: true });
    for tool in ["qemu-system-x86_64", "qemu-img", "mmdebstrap", "mkfs.ext4", "depmod", "dpkg-deb", "ip"] {
        let result = match find_in_path(tool) {
            Some(p) => Ok(p.display().to_string()),
            None => {
                Err(Missing { problem: format!("{tool} is not installed"), fix: "run .ci/install-deps as root".into() })
            }
        };
        out.push(Check { what: tool, result, optional: false });
    }
    if find_in_path("qemu-system-x86_64").is_some() {
        let result = crate::infra::qemu::state::qemu_maps_memfd()
            .map(|()| "QEMU maps a memfd as guest RAM: restored VMs map their saved RAM".to_string())
            .map_err(|e| Missing {
                problem: format!("{e}; saved states will carry the RAM in their stream (slower restores)"),
                fix: "a kernel with memfd_create (Linux ≥ 3.17) and a QEMU ≥ 8.2 that may open /proc/self/fd".into(),
            });
        out.push(Check { what: "saved-state RAM", result, optional: true });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn userns_diagnosis_names_the_sysctl_that_forbids_it() {
        let err = std::io::Error::from_raw_os_error(libc::EPERM);
        let only = |key: &'static str, value: &'static str| move |p: &str| (p == key).then(|| value.to_string());
        let m = diagnose_userns(&err, &only("/proc/sys/kernel/unprivileged_userns_clone", "0"));
        assert!(m.problem.contains("kernel.unprivileged_userns_clone = 0"), "{m}");
        assert!(m.fix.starts_with("sudo sysctl -w kernel.unprivileged_userns_clone=1"), "{m}");
        let m = diagnose_userns(&err, &only("/proc/sys/user/max_user_namespaces", "0"));
        assert!(m.fix.contains("user.max_user_namespaces=15000"), "{m}");
        let m = diagnose_userns(&err, &only("/proc/sys/kernel/apparmor_restrict_unprivileged_userns", "1"));
        assert!(m.fix.contains("apparmor_restrict_unprivileged_userns=0"), "{m}");
        let m = diagnose_userns(&err, &|_| None);
        assert!(m.problem.contains("no sysctl forbids it") && m.fix.contains("seccomp"), "{m}");
    }

    #[test]
    fn subid_ranges_are_counted_per_user_and_a_free_range_is_proposed() {
        let text = "# comment\nalice:100000:65536\n1001:165536:65536\nbroken line\nbob:231072:1000\n";
        let r = parse_subids(text);
        assert_eq!(r.len(), 3);
        let count = |u: &str| subids_of(&r, u).iter().map(|x| x.count).sum::<u64>();
        assert_eq!(count("alice"), 65536);
        assert_eq!(count("carol"), 0, "mmdebstrap reads ranges by user name, not by uid");
        assert_eq!(count("bob"), 1000);
        assert_eq!(free_subid_start(&r), 232072);
        assert_eq!(free_subid_start(&[]), 100_000);
    }

    #[test]
    fn missing_renders_problem_then_fix() {
        let m = Missing { problem: "p".into(), fix: "f".into() };
        assert_eq!(m.to_string(), "p\n  fix: f");
    }
}
