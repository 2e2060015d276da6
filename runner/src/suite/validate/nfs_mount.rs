//! The grammar of an NFS client's `mount -o` options (`nfs_read.mount_options`,
//! `nfs_read.client_mount_options`, the `nfs_read.mount_options` variant axis): a
//! comma-separated list where every option is a row of one allowlist, [`OPTIONS`],
//! with its value in that row's grammar (nfs(5) and mount(8), as `mount.nfs` of
//! nfs-utils 2.6 and the kernel's `fs/nfs/fs_context.c` take them). Which versions
//! and transports the server serves, and which clients can mount UDP, is checked by
//! [`super::nfs_read`] on top.

/// What value a mount option takes.
#[derive(Debug, Clone, Copy)]
pub enum Value {
    /// None (`hard`, `nolock`).
    Flag,
    /// A decimal whole number from `min` to `max`, in `unit`.
    Int {
        /// Least value.
        min: u64,
        /// Greatest value.
        max: u64,
        /// What the number counts (`bytes`, `tenths of a second`).
        unit: &'static str,
    },
    /// One of these words.
    OneOf(&'static [&'static str]),
}

/// One mount option a suite may give: its name (lower case, as mount.nfs takes it),
/// its value and what it does.
#[derive(Debug, Clone, Copy)]
pub struct MountOption {
    /// The name.
    pub name: &'static str,
    /// The value's grammar.
    pub value: Value,
    /// What it does, for the reference table.
    pub what: &'static str,
}

const fn o(name: &'static str, value: Value, what: &'static str) -> MountOption {
    MountOption { name, value, what }
}

/// The NFS versions there are, as a mount asks for them (`vers=4` with
/// `minorversion=N` is `4.N`).
pub const NFS_VERSIONS: &[&str] = &["2", "3", "4", "4.0", "4.1", "4.2"];

/// The transports a client can mount the server with (`proto=`): it is reached at
/// its IPv4 address on the bridge, so not `tcp6`/`udp6`, and a virtio NIC has no RDMA.
pub const TRANSPORTS: &[&str] = &["tcp", "udp"];

const SECONDS: Value = Value::Int { min: 0, max: 3600, unit: "seconds" };

/// The options a suite may give, one row each: the version and transport, the I/O
/// sizes and retransmission the NFS regressions vary, caching, locking and the
/// generic mount flags. Anything else is refused, `addr=`/`mountaddr=`/`clientaddr=`
/// among them (the runner mounts the server VM at its own address), `bg` (the mount
/// would return before it is done) and `sec=` other than `sys` (the guests have no
/// Kerberos).
pub const OPTIONS: &[MountOption] = &[
    o("defaults", Value::Flag, "mount's defaults (rw, suid, dev, exec, auto, nouser, async)"),
    o("vers", Value::OneOf(NFS_VERSIONS), "NFS version; also `nfsvers=`, `v3`, `v4.1`, …"),
    o("nfsvers", Value::OneOf(NFS_VERSIONS), "as `vers`"),
    o("minorversion", Value::Int { min: 0, max: 2, unit: "" }, "NFSv4 minor version, with `vers=4`"),
    o("v2", Value::Flag, "vers=2"),
    o("v3", Value::Flag, "vers=3"),
    o("v4", Value::Flag, "vers=4"),
    o("v4.0", Value::Flag, "vers=4.0"),
    o("v4.1", Value::Flag, "vers=4.1"),
    o("v4.2", Value::Flag, "vers=4.2"),
    o("proto", Value::OneOf(TRANSPORTS), "transport; also `tcp`, `udp`"),
    o("tcp", Value::Flag, "proto=tcp"),
    o("udp", Value::Flag, "proto=udp (NFSv2 and v3; not on a Debian kernel)"),
    o("mountproto", Value::OneOf(TRANSPORTS), "transport of the MOUNT protocol (v2, v3)"),
    o("port", Value::Int { min: 0, max: 65535, unit: "" }, "the server's NFS port (0: ask rpcbind)"),
    o("mountport", Value::Int { min: 0, max: 65535, unit: "" }, "the server's MOUNT port"),
    o("mountvers", Value::Int { min: 1, max: 3, unit: "" }, "MOUNT protocol version"),
    o("rsize", Value::Int { min: 1024, max: 1_048_576, unit: "bytes" }, "largest READ (the kernel rounds down)"),
    o("wsize", Value::Int { min: 1024, max: 1_048_576, unit: "bytes" }, "largest WRITE (the kernel rounds down)"),
    o(
        "timeo",
        Value::Int { min: 1, max: 6000, unit: "tenths of a second" },
        "RPC timeout before the first retransmission",
    ),
    o("retrans", Value::Int { min: 0, max: 100, unit: "" }, "retransmissions before a major timeout"),
    o("retry", Value::Int { min: 0, max: 60, unit: "minutes" }, "how long mount.nfs retries"),
    o("nconnect", Value::Int { min: 1, max: 16, unit: "" }, "TCP connections to the server"),
    o("namlen", Value::Int { min: 1, max: 255, unit: "bytes" }, "longest file name (v2, v3)"),
    o("hard", Value::Flag, "retry requests forever"),
    o("soft", Value::Flag, "fail a request after `retrans` retransmissions"),
    o("intr", Value::Flag, "ignored by kernels since 2.6.25"),
    o("nointr", Value::Flag, "ignored by kernels since 2.6.25"),
    o("sec", Value::OneOf(&["sys"]), "security flavour (AUTH_SYS only: the guests have no Kerberos)"),
    o("lock", Value::Flag, "NLM locking"),
    o("nolock", Value::Flag, "local locks only"),
    o("local_lock", Value::OneOf(&["none", "all", "flock", "posix"]), "which locks stay local"),
    o("ac", Value::Flag, "attribute caching"),
    o("noac", Value::Flag, "no attribute caching"),
    o("actimeo", SECONDS, "all attribute cache times"),
    o("acregmin", SECONDS, "attribute cache time of files, least"),
    o("acregmax", SECONDS, "attribute cache time of files, most"),
    o("acdirmin", SECONDS, "attribute cache time of folders, least"),
    o("acdirmax", SECONDS, "attribute cache time of folders, most"),
    o("lookupcache", Value::OneOf(&["all", "none", "pos", "positive"]), "which lookups are cached"),
    o("cto", Value::Flag, "close-to-open consistency"),
    o("nocto", Value::Flag, "no close-to-open consistency"),
    o("sharecache", Value::Flag, "mounts of one export share a cache"),
    o("nosharecache", Value::Flag, "each mount its own cache"),
    o("resvport", Value::Flag, "a privileged source port"),
    o("noresvport", Value::Flag, "any source port"),
    o("rdirplus", Value::Flag, "READDIRPLUS"),
    o("nordirplus", Value::Flag, "no READDIRPLUS"),
    o("acl", Value::Flag, "the NFSACL side protocol (v3)"),
    o("noacl", Value::Flag, "no NFSACL"),
    o("fg", Value::Flag, "mount in the foreground (the default)"),
    o("ro", Value::Flag, "read-only"),
    o("rw", Value::Flag, "read-write"),
    o("sync", Value::Flag, "synchronous writes"),
    o("async", Value::Flag, "asynchronous writes"),
    o("atime", Value::Flag, "update access times"),
    o("noatime", Value::Flag, "no access times"),
    o("relatime", Value::Flag, "access times relative to changes"),
    o("nodiratime", Value::Flag, "no access times of folders"),
    o("nosuid", Value::Flag, "ignore set-user-ID bits"),
    o("nodev", Value::Flag, "ignore device files"),
    o("noexec", Value::Flag, "no programs run from the mount"),
];

/// Options refused with a reason of their own (not a grammar slip): what the runner
/// decides, and what the bridge can't carry.
const REFUSED: &[(&str, &str)] = &[
    ("addr", "the runner mounts the server VM at its own address"),
    ("mountaddr", "the runner mounts the server VM at its own address"),
    ("clientaddr", "the client's address is the one the runner gives its VM"),
    ("bg", "the mount would go on in the background while the measurement starts"),
    ("rdma", BRIDGE),
];

/// Why a transport other than [`TRANSPORTS`] can't reach the server.
const BRIDGE: &str = "the server is mounted at its IPv4 address on the bridge (virtio-net, no RDMA), over tcp or udp";

/// What `v` accepts, in words.
fn value_text(v: &Value) -> String {
    match v {
        Value::Flag => "no value".into(),
        Value::Int { min, max, unit: "" } => format!("a whole number from {min} to {max}"),
        Value::Int { min, max, unit } => format!("a whole number from {min} to {max} ({unit})"),
        Value::OneOf(words) => format!("one of {}", words.join(" | ")),
    }
}

/// Why option `opt` (one item of a `mount -o` list, already of the list's alphabet)
/// can't be given, or `None`.
pub fn option_problem(opt: &str) -> Option<String> {
    let (name, value) = match opt.split_once('=') {
        Some((n, v)) => (n, Some(v)),
        None => (opt, None),
    };
    if name.is_empty() {
        return Some(format!("mount option {opt:?} has no name (an empty item of the list, or '=' first)"));
    }
    if name.chars().any(|c| c.is_ascii_uppercase()) {
        return Some(format!(
            "mount option {name:?} has upper case letters; mount.nfs takes option names in lower case only ({})",
            name.to_ascii_lowercase()
        ));
    }
    if let Some((_, why)) = REFUSED.iter().find(|(n, _)| *n == name) {
        return Some(format!("mount option {opt:?} can't be used here: {why}; remove it"));
    }
    let Some(row) = OPTIONS.iter().find(|r| r.name == name) else {
        return Some(format!(
            "mount option {name:?} is not among the NFS mount options a suite may give (the table in docs/src/suite-reference.md, `nfs_read`)"
        ));
    };
    let ok = match (&row.value, value) {
        (Value::Flag, None) => true,
        (Value::Int { min, max, .. }, Some(v)) => {
            v.bytes().all(|b| b.is_ascii_digit()) && v.parse::<u64>().is_ok_and(|n| (*min..=*max).contains(&n))
        }
        (Value::OneOf(words), Some(v)) => words.contains(&v),
        _ => false,
    };
    let note = if matches!(name, "proto" | "mountproto") { format!(": {BRIDGE}") } else { String::new() };
    (!ok).then(|| format!("mount option {opt:?}: {name} takes {}{note}", value_text(&row.value)))
}

/// The allowlist as the Markdown table docs/src/suite-reference.md shows.
/// (Only the tests call it: they check the docs hold it.)
#[cfg_attr(vmrepro_dead_code, allow(dead_code))]
pub fn reference_table() -> String {
    let mut s = String::from("| option | value | what for |\n|---|---|---|\n");
    for r in OPTIONS {
        s.push_str(&format!("| `{}` | {} | {} |\n", r.name, value_text(&r.value).replace('|', "\\|"), r.what));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options() {
        for ok in [
            "defaults",
            "vers=3",
            "vers=4.2",
            "minorversion=1",
            "proto=udp",
            "rsize=8192",
            "wsize=1048576",
            "timeo=7",
            "retrans=3",
            "hard",
            "nolock",
            "actimeo=0",
            "sec=sys",
            "v4.1",
        ] {
            assert_eq!(option_problem(ok), None, "{ok}");
        }
        for (bad, says) in [
            ("vers=4.7", "vers takes one of"),
            ("minorversion=5", "from 0 to 2"),
            ("proto=rdma", "proto takes one of tcp | udp"),
            ("rsize=512", "from 1024 to 1048576 (bytes)"),
            ("rsize=8k", "from 1024"),
            ("timeo=0", "from 1 to 6000"),
            ("hard=1", "takes no value"),
            ("retrans", "a whole number"),
            ("sec=krb5", "one of sys"),
            ("Vers=3", "upper case"),
            ("addr=10.0.0.1", "can't be used here"),
            ("bg", "can't be used here"),
            ("fsc", "not among the NFS mount options"),
            ("=3", "has no name"),
            ("", "has no name"),
        ] {
            let got = option_problem(bad).unwrap_or_default();
            assert!(got.contains(says), "{bad}: {got}");
        }
    }

    #[test]
    fn the_table_is_in_the_reference() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/src/suite-reference.md");
        let doc = std::fs::read_to_string(path).expect("docs/src/suite-reference.md");
        let table = reference_table();
        assert!(doc.contains(&table), "docs/src/suite-reference.md must hold this table:\n{table}");
    }
}
