//! Rules of the `nfs_read:` block.

use std::collections::BTreeSet;

use crate::infra::images::{Catalog, DEFAULT_ROOTFS};
use crate::plan::DEFAULT_MEMORY_MIB;
use crate::schema::nfs_read::NfsReadSpec;
use crate::schema::text::{non_ascii_hint, shown};
use crate::schema::{SuiteFile, SuiteSpec};
use crate::suite::validate::{self, guest, limits, range, ValidationError};

/// Checks the `nfs_read:` block `n` of suite `file`, one key after another.
pub fn check(errs: &mut Vec<ValidationError>, file: &SuiteFile, n: &NfsReadSpec, catalog: &Catalog) {
    let s = &file.spec;
    check_server(errs, s, n, catalog);
    check_file(errs, n);
    file_size(errs, s, n, catalog);
    check_clients(errs, s, n);
    check_source_kernel_versions(errs, file, n, catalog);
    check_read_ahead(errs, n);
    if let Some(w) = n.warmup {
        range(errs, "nfs_read.warmup", w, &limits::WARMUP, " reads");
    }
    if let Some(r) = n.repeat {
        range(errs, "nfs_read.repeat", r, &limits::REPEAT, "");
    }
    check_client_setup(errs, n);
    validate::verdict_overrides(
        errs,
        "nfs_read.client_snapshot_verdicts",
        &n.client_snapshot_verdicts,
        &n.clients,
        &n.baseline.as_deref().into_iter().collect::<Vec<_>>(),
    );
    check_snapshot_values(errs, s, n);
    check_concurrent(errs, s, n);
    check_mounts(errs, n);
    served(errs, s, n, catalog);
}

/// `snapshot_values`: each a wire counter (with every client captured) or a metric the
/// preset computes for every read (its time, throughput and the counters of `netstat -s`,
/// `nfsstat` and mountstats' READ line, as `vmrepro analyse` names them).
fn check_snapshot_values(errs: &mut Vec<ValidationError>, s: &SuiteSpec, n: &NfsReadSpec) {
    use crate::plan::measurement::ObserverKind;
    use crate::schema::capture::CaptureSpec;
    use crate::wire::summary::{COUNTERS as WIRE_COUNTERS, PREFIX as WIRE_PREFIX};
    let derived = crate::measure::observer::derived_metrics(
        ["netstat", "nfsstat", "mountstats"].into_iter().map(ObserverKind::named),
    );
    let plain = ["elapsed_s", "user_s", "system_s", "throughput_mb_s"];
    for (j, name) in n.snapshot_values.iter().enumerate() {
        let key = format!("nfs_read.snapshot_values[{j}]");
        let message = if name.starts_with(WIRE_PREFIX) {
            let uncaptured: Vec<&str> = n
                .clients
                .iter()
                .filter_map(|c| s.vms.iter().find(|v| &v.name == c))
                .filter(|v| v.capture.or(s.network.capture).unwrap_or(CaptureSpec::Off) == CaptureSpec::Off)
                .map(|v| v.name.as_str())
                .collect();
            if !WIRE_COUNTERS.contains(&name.as_str()) {
                Some(format!("{} is not a wire counter: use one of {}", shown(name, 80), WIRE_COUNTERS.join(", ")))
            } else if !uncaptured.is_empty() {
                Some(format!(
                    "{name} is counted from each client's packet capture, and {} has none; set `capture: measured` on it (or `network.capture`)",
                    uncaptured.join(", ")
                ))
            } else {
                None
            }
        } else if plain.contains(&name.as_str()) || derived.contains_key(name.as_str()) {
            None
        } else {
            Some(format!(
                "{} is not a metric of nfs_read: use {}, a derived metric ({}) or a wire counter ({}){}",
                shown(name, 80),
                plain.join(", "),
                derived.keys().copied().collect::<Vec<_>>().join(", "),
                WIRE_COUNTERS.join(", "),
                non_ascii_hint(name)
            ))
        };
        if let Some(message) = message {
            errs.push(ValidationError::Rule { key, message });
        }
    }
}

/// `server`: a VM with an NFS server profile.
fn check_server(errs: &mut Vec<ValidationError>, s: &SuiteSpec, n: &NfsReadSpec, catalog: &Catalog) {
    match s.vms.iter().find(|v| v.name == n.server) {
        None => errs.push(ValidationError::Unknown {
            key: "nfs_read.server".into(),
            what: "VM",
            value: n.server.clone(),
            hint: String::new(),
        }),
        Some(v) => {
            let exports = v.profile.as_ref().is_some_and(|p| p.name.starts_with("nfs-server"));
            if !exports {
                let known = catalog
                    .profiles
                    .keys()
                    .filter(|p| p.starts_with("nfs-server"))
                    .cloned()
                    .collect::<Vec<_>>()
                    .join(", ");
                errs.push(ValidationError::Rule {
                    key: "nfs_read.server".into(),
                    message: format!(
                        "VM {:?} does not export anything: give it an NFS server profile (profile: one of {known})",
                        n.server
                    ),
                });
            }
        }
    }
}

/// `export` and `file.name`: strict guest paths, the file's path short enough under
/// both the export and the mount point.
fn check_file(errs: &mut Vec<ValidationError>, n: &NfsReadSpec) {
    // The export goes to the profile as `$1` (quoted) and from there into
    // `/etc/exports`, one line per export: a space or line break would add options or
    // a second export, so the path is held to the strict pattern.
    guest::check_guest_dir(errs, "nfs_read.export", "export", &n.export, guest::MAX_EXPORT_BYTES);
    let f = &n.file;
    if let Some(why) = guest::relative_name_problem(&f.name) {
        errs.push(ValidationError::Rule {
            key: "nfs_read.file.name".into(),
            message: format!("file name {} {why}", shown(&f.name, 80)),
        });
    } else {
        let mount_point = n.mount_point.as_deref().unwrap_or(crate::scenarios::nfs_read::DEFAULT_MOUNT_POINT);
        for (base, what) in [(n.export.as_str(), "export"), (mount_point, "mount point")] {
            let full = base.len() + 1 + f.name.len();
            if full > guest::MAX_PATH_BYTES {
                errs.push(ValidationError::Rule {
                    key: "nfs_read.file.name".into(),
                    message: format!(
                        "the file's path under the {what} is {full} bytes; a guest path is at most {} bytes (PATH_MAX)",
                        guest::MAX_PATH_BYTES
                    ),
                });
            }
        }
    }
}

/// `clients` (VMs, not the server, each once) and `baseline` (one of them).
fn check_clients(errs: &mut Vec<ValidationError>, s: &SuiteSpec, n: &NfsReadSpec) {
    if n.clients.is_empty() {
        errs.push(ValidationError::Rule {
            key: "nfs_read.clients".into(),
            message: "at least one client is needed".into(),
        });
    }
    let mut seen = BTreeSet::new();
    for (i, c) in n.clients.iter().enumerate() {
        let key = format!("nfs_read.clients[{i}]");
        if !s.vms.iter().any(|v| &v.name == c) {
            errs.push(ValidationError::Unknown { key, what: "VM", value: c.clone(), hint: String::new() });
        } else if *c == n.server {
            errs.push(ValidationError::Rule { key, message: "the server can't also be a client".into() });
        } else if !seen.insert(c) {
            errs.push(ValidationError::Duplicate {
                key,
                what: "client",
                value: c.clone(),
                first: "nfs_read.clients".into(),
            });
        }
    }
    // Debian's kernels are built with CONFIG_NFS_DISABLE_UDP_SUPPORT=y (5.10, 6.1, 6.12):
    // their `mount -o proto=udp` exits 32. A source-built kernel can mount UDP.
    for c in &n.clients {
        let Some(vm) = s.vms.iter().find(|v| &v.name == c) else { continue };
        let Some((key, options)) = client_mount(n, c) else { continue };
        if vm.kernel.debian.is_some() && asks(options).1.as_deref() == Some("udp") {
            errs.push(ValidationError::Rule {
                key,
                message: format!(
                    "mount options {options:?} ask for UDP on client {c}, whose Debian kernel can't mount NFS over UDP (Debian builds with CONFIG_NFS_DISABLE_UDP_SUPPORT=y); give {c} a source-built kernel with UDP support (images/kernels/nfs-udp-guest.config) or mount with proto=tcp"
                ),
            });
        }
    }
    if let Some(b) = &n.baseline {
        if !n.clients.contains(b) {
            errs.push(ValidationError::Unknown {
                key: "nfs_read.baseline".into(),
                what: "client",
                value: b.clone(),
                hint: " among nfs_read.clients".into(),
            });
        }
    }
}

/// Client `c`'s mount options and the key they come from: its
/// `client_mount_options.<c>`, else `mount_options`; `None` when neither is given.
fn client_mount<'a>(n: &'a NfsReadSpec, c: &str) -> Option<(String, &'a String)> {
    match n.client_mount_options.get(c) {
        Some(o) => Some((format!("nfs_read.client_mount_options.{c}"), o)),
        None => n.mount_options.as_ref().map(|o| ("nfs_read.mount_options".to_string(), o)),
    }
}

/// The NFS client versions that need a config option of their own, and that option:
/// `NFS_V4_1` and `NFS_V4_2` are off unless set (no default in 6.1's `fs/nfs/Kconfig`,
/// neither in `x86_64_defconfig` nor `kvm_guest.config`); the others count as offered
/// unless a fragment turns them off.
const VERSION_OPTIONS: &[(&str, &str, bool)] = &[
    ("2", "NFS_V2", true),
    ("3", "NFS_V3", true),
    ("4", "NFS_V4", true),
    ("4.0", "NFS_V4", true),
    ("4.1", "NFS_V4_1", false),
    ("4.2", "NFS_V4_2", false),
];

/// A client whose kernel is built from config fragments must offer the NFS version its
/// mount asks for: a `vers=4.2` mount on a kernel whose fragments leave
/// `CONFIG_NFS_V4_2` out fails with exit 32 in every iteration. The fragments' last word
/// on an option wins, as in the kernel's `merge_config.sh`.
///
/// What is known before the build: for `kernel: {source: …}` (a pinned Debian source
/// package, `defconfig` + `kvm_guest.config` + fragments) the fragments and the
/// defaults of [`VERSION_OPTIONS`]; for `kernel: {tree: …}` only what the fragments say,
/// since an option no fragment sets takes the default of that tree's `Kconfig` and
/// defconfig at `rev`, which only the build's `olddefconfig` works out. Debian kernels
/// offer every version (their table in the suite reference), and a local `kernel:
/// {path}` comes with no config. A fragment that can't be read is skipped here (the
/// kernel's own check reports it); reads go through the confined layer, bounded.
fn check_source_kernel_versions(errs: &mut Vec<ValidationError>, file: &SuiteFile, n: &NfsReadSpec, catalog: &Catalog) {
    for c in &n.clients {
        let Some(vm) = file.spec.vms.iter().find(|v| &v.name == c) else { continue };
        let (fragments, defaults_known, built) = match (&vm.kernel.source, &vm.kernel.tree) {
            (Some(source), _) => (&source.fragments, true, "source-built kernel".to_string()),
            (None, Some(tree)) => (&vm.kernel.fragments, false, format!("kernel from tree {tree}")),
            (None, None) => continue,
        };
        let Some((key, options)) = client_mount(n, c) else { continue };
        let Some(vers) = asks(options).0 else { continue };
        let Some(&(_, option, default)) = VERSION_OPTIONS.iter().find(|(v, _, _)| *v == vers) else { continue };
        let mut set = None;
        let mut said_by = None;
        for fragment in fragments {
            let Ok((folder, rel)) = super::kernel::confined_file(file, &catalog.dir, fragment) else { continue };
            let Ok(bytes) = folder.read(&rel, super::kernel::MAX_FRAGMENT_BYTES) else { continue };
            if let Some(on) = String::from_utf8_lossy(&bytes).lines().rev().find_map(|l| option_state(l, option)) {
                set = Some(on);
                said_by = Some(fragment);
            }
        }
        let offered = set.unwrap_or(default || !defaults_known);
        if !offered {
            let why = match said_by {
                Some(f) => format!("{} turns CONFIG_{option} off", f.display()),
                None => format!("no fragment sets CONFIG_{option}=y, and it is off unless set"),
            };
            errs.push(ValidationError::Rule {
                key,
                message: format!(
                    "mount options {options:?} ask for NFS version {vers} on client {c}, whose {built} lacks it: {why}; add CONFIG_{option}=y to a fragment{} or mount with a version it has (suite reference: NFS versions each kernel offers)",
                    if option == "NFS_V4_2" { " (with CONFIG_NFS_V4_1=y)" } else { "" }
                ),
            });
        }
    }
}

/// What config fragment line `line` says of `CONFIG_<option>`: `Some(true)` for `=y` or
/// `=m`, `Some(false)` for `=n` or `# CONFIG_<option> is not set`, `None` when it is
/// about another option.
fn option_state(line: &str, option: &str) -> Option<bool> {
    let line = line.trim();
    let name = format!("CONFIG_{option}");
    if let Some(rest) = line.strip_prefix("# ").and_then(|r| r.strip_prefix(name.as_str())) {
        return (rest.trim() == "is not set").then_some(false);
    }
    let value = line.strip_prefix(name.as_str())?.strip_prefix('=')?;
    Some(matches!(value.trim(), "y" | "m"))
}

/// `read_ahead_kb` and `client_read_ahead_kb`: whole pages, for clients.
fn check_read_ahead(errs: &mut Vec<ValidationError>, n: &NfsReadSpec) {
    let per_client = n.client_read_ahead_kb.iter().map(|(c, kb)| (format!("nfs_read.client_read_ahead_kb.{c}"), *kb));
    for (key, kb) in n.read_ahead_kb.map(|kb| ("nfs_read.read_ahead_kb".to_string(), kb)).into_iter().chain(per_client)
    {
        // The kernel keeps read-ahead in pages (4 KiB on x86-64) and reads back the
        // rounded value, so another value would fail the scenario's own check.
        if kb > limits::READ_AHEAD_KB || kb % 4 != 0 {
            errs.push(ValidationError::OutOfRange {
                key,
                value: format!("{kb} KiB"),
                range: format!(
                    "0 to {} KiB, in whole 4 KiB pages; the kernel rounds other values down",
                    limits::READ_AHEAD_KB
                ),
            });
        }
    }
    for c in n.client_read_ahead_kb.keys() {
        if !n.clients.contains(c) {
            errs.push(ValidationError::Unknown {
                key: format!("nfs_read.client_read_ahead_kb.{c}"),
                what: "client",
                value: c.clone(),
                hint: " among nfs_read.clients".into(),
            });
        }
    }
}

/// `client_setup`: commands, for clients.
fn check_client_setup(errs: &mut Vec<ValidationError>, n: &NfsReadSpec) {
    for (c, command) in &n.client_setup {
        guest::check_command(errs, &format!("nfs_read.client_setup.{c}"), command);
        if !n.clients.contains(c) {
            errs.push(ValidationError::Unknown {
                key: format!("nfs_read.client_setup.{c}"),
                what: "client",
                value: c.clone(),
                hint: String::new(),
            });
        }
    }
}

/// `concurrent`: not with a seeded netem.
fn check_concurrent(errs: &mut Vec<ValidationError>, s: &SuiteSpec, n: &NfsReadSpec) {
    if n.concurrent == Some(true) {
        for v in &s.vms {
            if v.net.as_ref().and_then(|x| x.egress.as_ref()).is_some_and(|e| e.seed.is_some()) {
                errs.push(ValidationError::Rule {
                    key: "nfs_read.concurrent".into(),
                    message: format!(
                        "VM {} has a seeded netem, which is reseeded before each read; \
                         concurrent reads would share one drop sequence in no fixed order",
                        v.name
                    ),
                });
            }
        }
    }
}

/// `mount_point`, `mount_options` and `client_mount_options`.
fn check_mounts(errs: &mut Vec<ValidationError>, n: &NfsReadSpec) {
    if let Some(m) = &n.mount_point {
        guest::check_guest_dir(errs, "nfs_read.mount_point", "mount point", m, guest::MAX_PATH_BYTES);
        // Each iteration keeps its temporary files in a folder under /tmp, made before
        // the mount: a mount over /tmp itself would hide them.
        if m == "/tmp" {
            errs.push(ValidationError::Rule {
                key: "nfs_read.mount_point".into(),
                message:
                    "mount point \"/tmp\" would hide the measurement's own temporary files; use a folder under /mnt"
                        .into(),
            });
        }
    }
    for (c, o) in &n.client_mount_options {
        let key = format!("nfs_read.client_mount_options.{c}");
        if !n.clients.contains(c) {
            errs.push(ValidationError::Unknown {
                key: key.clone(),
                what: "client",
                value: c.clone(),
                hint: String::new(),
            });
        }
        mount_options(errs, &key, o);
    }
    if let Some(o) = &n.mount_options {
        mount_options(errs, "nfs_read.mount_options", o);
    }
}

/// What a mount asks of the server: the NFS version (`"3"`, `"4"`, `"4.1"`, …) and
/// the transport (`"tcp"`, `"udp"`, or what else `proto=` names: `"rdma"`, `"tcp6"`,
/// …), from `vers=`/`nfsvers=`/`v3`/`minorversion=` and `proto=`/`udp`/`tcp`/`rdma`
/// (the last of each wins, as in mount.nfs); `None`: not given.
fn asks(options: &str) -> (Option<String>, Option<String>) {
    let (mut vers, mut minor, mut proto) = (None, None, None);
    for o in options.split(',') {
        match o.split_once('=') {
            Some(("vers" | "nfsvers", v)) => vers = Some(v.to_string()),
            Some(("minorversion", m)) => minor = Some(m.to_string()),
            Some(("proto", p)) => proto = Some(p.to_string()),
            None if matches!(o, "udp" | "tcp" | "rdma") => proto = Some(o.to_string()),
            None if matches!(o, "v2" | "v3" | "v4" | "v4.0" | "v4.1" | "v4.2") => vers = Some(o[1..].to_string()),
            _ => {}
        }
    }
    let vers = match (vers, minor) {
        (Some(v), Some(m)) if v == "4" => Some(format!("4.{m}")),
        (v, _) => v,
    };
    (vers, proto)
}

/// Every client's mount must ask for a version and transport the server's profile
/// serves (its `nfs_versions` and `udp`, or the profile's defaults): otherwise the mount
/// fails in every iteration. NFSv2 counts as served only where
/// [`super::profile::serves_nfsv2`] says so.
fn served(errs: &mut Vec<ValidationError>, s: &SuiteSpec, n: &NfsReadSpec, catalog: &Catalog) {
    let Some(vm) = s.vms.iter().find(|v| v.name == n.server) else { return };
    let Some(p) = &vm.profile else { return };
    let Some(defaults) = catalog.profile_params.get(&p.name) else { return };
    let in_force = p.params.over(&defaults.settings());
    let versions: Vec<&str> = in_force.nfs_versions.iter().map(String::as_str).collect();
    let udp = in_force.udp;
    let no_v2 = !super::profile::serves_nfsv2(vm);
    let serves = |v: &str| match v {
        "2" => versions.contains(&"2") && !no_v2,
        "4" => versions.iter().any(|s| *s == "4" || s.starts_with("4.")),
        v if v.starts_with("4.") => versions.contains(&v) || versions.contains(&"4"),
        v => versions.contains(&v),
    };
    let server = format!("profile {} on VM {}", p.name, vm.name);
    let check = |errs: &mut Vec<ValidationError>, key: String, options: &str| {
        if !options.chars().all(|c| c.is_ascii_alphanumeric() || ",=._-".contains(c)) {
            return; // not an option list: reported as such
        }
        let (vers, proto) = asks(options);
        let over_udp = proto.as_deref().map(|p| p == "udp");
        let message = match (&vers, over_udp) {
            (Some(v), Some(true)) if v.starts_with('4') => {
                format!("mount options {options:?} ask for NFSv{v} over UDP; NFSv4 runs over TCP only")
            }
            (_, Some(true)) if !udp => format!(
                "mount options {options:?} ask for UDP, but {server} serves TCP only (udp: false); set `udp: true` in its profile or mount with proto=tcp"
            ),
            (Some(v), _) if v == "2" && versions.contains(&"2") && no_v2 => format!(
                "mount options {options:?} ask for NFSv2, which {server} cannot serve on a Debian kernel (rpc.nfsd fails to enable NFSv2 there); mount with vers=3"
            ),
            (Some(v), _) if !serves(v) => format!(
                "mount options {options:?} ask for NFSv{v}, but {server} serves NFS versions {}; the mount would fail",
                versions.join(", ")
            ),
            _ => return,
        };
        errs.push(ValidationError::Rule { key, message });
    };
    for (c, o) in &n.client_mount_options {
        check(errs, format!("nfs_read.client_mount_options.{c}"), o);
    }
    // The default applies to every client without options of its own.
    if let Some(o) =
        n.mount_options.as_ref().filter(|_| n.clients.iter().any(|c| !n.client_mount_options.contains_key(c)))
    {
        check(errs, "nfs_read.mount_options".into(), o);
    }
}

/// `mount -o` options go unquoted into the mount command, so they are one word of a
/// strict alphabet, at most [`guest::MAX_MOUNT_OPTIONS_BYTES`], and each option is a
/// row of [`super::nfs_mount::OPTIONS`] with its value in the row's grammar (one
/// error per option that isn't).
fn mount_options(errs: &mut Vec<ValidationError>, key: &str, o: &str) {
    let message = if o.is_empty() || !o.chars().all(|c| c.is_ascii_alphanumeric() || ",=._-".contains(c)) {
        format!(
            "{} is not a mount option list (letters, digits, ',', '=', '.', '_', '-'){}",
            shown(o, 80),
            non_ascii_hint(o)
        )
    } else if o.len() > guest::MAX_MOUNT_OPTIONS_BYTES {
        format!("the mount options are {} bytes; at most {}", o.len(), guest::MAX_MOUNT_OPTIONS_BYTES)
    } else {
        for why in o.split(',').filter_map(super::nfs_mount::option_problem) {
            errs.push(ValidationError::Rule { key: key.into(), message: why });
        }
        return;
    };
    errs.push(ValidationError::Rule { key: key.into(), message });
}

/// Share of the server's root disk its own system takes (the rootfs is ~250 MB), MiB:
/// what is left holds the measured file.
const SYSTEM_DISK_MIB: u64 = 384;

/// The measured file must be made: `dd` holds one block in the server's memory (at most
/// a quarter of it, leaving the rest to the kernel, nfsd and the page cache), and the
/// file must fit where the export lives (the root disk, or memory for a tmpfs under
/// `/tmp`), within [`limits::FILE_BYTES`].
fn file_size(errs: &mut Vec<ValidationError>, s: &SuiteSpec, n: &NfsReadSpec, catalog: &Catalog) {
    const MIB: u64 = 1024 * 1024;
    let f = &n.file;
    let Some(server) = s.vms.iter().find(|v| v.name == n.server) else { return };
    let memory_mib = server.memory.or(s.defaults.memory).unwrap_or(DEFAULT_MEMORY_MIB);
    let rootfs = server.rootfs.as_deref().or(s.defaults.rootfs.as_deref()).unwrap_or(DEFAULT_ROOTFS);
    let block_max = memory_mib.saturating_mul(MIB) / 4;
    if f.block_size == 0 || f.block_size > block_max {
        errs.push(ValidationError::OutOfRange {
            key: "nfs_read.file.block_size".into(),
            value: format!("{} bytes", f.block_size),
            range: format!(
                "1 to {block_max} bytes: dd holds one block in memory, and a quarter of the server's {memory_mib} MiB is the most that leaves room for the kernel and nfsd"
            ),
        });
    }
    if f.count == 0 {
        errs.push(ValidationError::OutOfRange {
            key: "nfs_read.file.count".into(),
            value: "0 blocks".into(),
            range: "at least 1 block".into(),
        });
    }
    let (room, place) = if n.export == "/tmp" || n.export.starts_with("/tmp/") {
        (
            memory_mib.saturating_mul(MIB) / 2,
            format!("half the server's {memory_mib} MiB: the export is on /tmp, a tmpfs"),
        )
    } else {
        match catalog.rootfs.get(rootfs) {
            Some((recipe, _)) => (
                recipe.size_mib.saturating_sub(SYSTEM_DISK_MIB).saturating_mul(MIB),
                format!(
                    "what the server's {} MiB root disk of rootfs {rootfs} leaves after its system's {SYSTEM_DISK_MIB} MiB",
                    recipe.size_mib
                ),
            ),
            None => return, // an unknown rootfs is reported on its own
        }
    };
    let (max, why) = if room < limits::FILE_BYTES { (room, place) } else { (limits::FILE_BYTES, "the limit".into()) };
    let size = u128::from(f.block_size) * u128::from(f.count);
    if f.block_size > 0 && f.count > 0 && size > u128::from(max) {
        errs.push(ValidationError::OutOfRange {
            key: "nfs_read.file".into(),
            value: format!("block_size {} × count {} = {size} bytes", f.block_size, f.count),
            range: format!("1 to {max} bytes, {why}"),
        });
    }
}

#[cfg(test)]
mod version_tests {
    use super::option_state;

    #[test]
    fn a_fragment_line_says_on_off_or_nothing_of_an_option() {
        assert_eq!(option_state("CONFIG_NFS_V4_2=y", "NFS_V4_2"), Some(true));
        assert_eq!(option_state("CONFIG_NFS_V4=m", "NFS_V4"), Some(true));
        assert_eq!(option_state("CONFIG_NFS_V3=n", "NFS_V3"), Some(false));
        assert_eq!(option_state("# CONFIG_NFS_V3 is not set", "NFS_V3"), Some(false));
        // Another option whose name starts with this one's, and comments, say nothing.
        assert_eq!(option_state("CONFIG_NFS_V4_1=y", "NFS_V4"), None);
        assert_eq!(option_state("# CONFIG_NFS_V4_1 is not set", "NFS_V4"), None);
        assert_eq!(option_state("# NFSv4.2 below", "NFS_V4_2"), None);
    }
}
