//! What a kernel provides of what a vmrepro guest needs, and in which order to load it.
//!
//! A guest needs a handful of kernel features ([`Need`]): the virtio PCI transport, the
//! virtio disk and ext4 to reach its root disk ([`ROOT_DISK`], loaded by the initramfs),
//! the virtio NIC and the virtio console the guest agent talks over ([`GUEST_DEVICES`]),
//! the NFS client or server ([`NFS_CLIENT`], [`NFS_SERVER`]) and netem ([`NETEM`],
//! with `prio` and `u32` when it is filtered, [`NETEM_FILTERED`]). A kernel builds each
//! one in, as a module, or not at all; Debian's cloud flavour builds ext4 in, its
//! standard flavour makes it a module, a user's own tree may do either.
//!
//! [`ModuleIndex`] reads the files `make modules_install` and `depmod` (kmod, any
//! version since 2011) leave in `lib/modules/<release>/`: `modules.dep` (each module's
//! path and its hard dependencies), `modules.builtin` (the paths of the modules built
//! in), `modules.builtin.modinfo` (since Linux 5.2: the built-in modules' aliases),
//! `modules.softdep` (`softdep ext4 pre: crypto-crc32c`: what a module wants loaded
//! first without linking to it) and `modules.alias` (exact aliases only; the device
//! patterns are not needed here). [`ModuleIndex::load_order`] gives the modules to
//! load for a set of names, dependencies and `pre:` soft dependencies first, as
//! `modprobe` would. A kernel built without modules has its features read from its
//! `.config` instead ([`KernelFeatures::from_config`]).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::ImageError;

/// One kernel feature a guest needs: the module that provides it and the Kconfig
/// option that builds that module (in, `=y`, or as a module, `=m`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Need {
    /// Module name as `modules.dep` and `modules.builtin` spell it (`_`, not `-`).
    pub module: &'static str,
    /// The option, e.g. `CONFIG_EXT4_FS`.
    pub option: &'static str,
    /// What the guest needs it for, e.g. `the root filesystem (ext4)`.
    pub purpose: &'static str,
}

const fn need(module: &'static str, option: &'static str, purpose: &'static str) -> Need {
    Need { module, option, purpose }
}

/// Loaded by the initramfs before it mounts the root disk (`/dev/vda`, ext4) and the
/// modules disk (`/dev/vdb`, ext4), in this order.
pub const ROOT_DISK: &[Need] = &[
    need("virtio_pci", "CONFIG_VIRTIO_PCI", "the virtio PCI transport of every device"),
    need("virtio_blk", "CONFIG_VIRTIO_BLK", "the root and modules disks (virtio-blk)"),
    need("ext4", "CONFIG_EXT4_FS", "the root filesystem (ext4)"),
];

/// Every guest's devices besides its disks: loaded by the rootfs's
/// `/sbin/vmrepro-init` with `modprobe` from the modules disk.
pub const GUEST_DEVICES: &[Need] = &[
    need("virtio_net", "CONFIG_VIRTIO_NET", "the NIC (virtio-net)"),
    need("virtio_console", "CONFIG_VIRTIO_CONSOLE", "the guest agent's virtio-serial port"),
];

/// A VM that mounts NFS exports (loaded on demand by `mount -t nfs`).
pub const NFS_CLIENT: &[Need] = &[need("nfs", "CONFIG_NFS_FS", "the NFS client")];

/// A VM running a server profile (loaded on demand by `rpc.nfsd`).
pub const NFS_SERVER: &[Need] = &[need("nfsd", "CONFIG_NFSD", "the NFS server (nfsd)")];

/// A VM with `net.egress` (loaded on demand by `tc qdisc … netem`).
pub const NETEM: &[Need] = &[need("sch_netem", "CONFIG_NET_SCH_NETEM", "network emulation (netem)")];

/// A VM whose netem applies to some destinations or is seeded: netem under a `prio`
/// qdisc with `u32` filters.
pub const NETEM_FILTERED: &[Need] = &[
    need("sch_prio", "CONFIG_NET_SCH_PRIO", "the prio qdisc netem sits under (`to:` or `seed:`)"),
    need("cls_u32", "CONFIG_NET_CLS_U32", "the u32 filters that pick netem's packets (`to:` or `seed:`)"),
];

/// Every need, in the order above.
pub fn all_needs() -> impl Iterator<Item = &'static Need> {
    [ROOT_DISK, GUEST_DEVICES, NFS_CLIENT, NFS_SERVER, NETEM, NETEM_FILTERED].into_iter().flatten()
}

/// A text that changes whenever the list of needs does (part of the kernel cache key,
/// so that entries prepared for another list are not reused).
pub fn needs_fingerprint() -> String {
    all_needs().map(|n| format!("{}={}", n.module, n.option)).collect::<Vec<_>>().join(",")
}

/// How a kernel provides one need.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Provision {
    /// Built into the kernel image.
    BuiltIn,
    /// A module in the kernel's modules tree.
    Module,
    /// Neither.
    Missing,
}

/// What one kernel provides of every [`Need`] (`needs.json` in a prepared kernel's
/// cache entry).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KernelFeatures {
    /// Need's module name → how the kernel provides it.
    pub needs: BTreeMap<String, Provision>,
}

impl KernelFeatures {
    /// Looks every need up in a module index.
    pub fn from_index(index: &ModuleIndex) -> Self {
        KernelFeatures { needs: all_needs().map(|n| (n.module.to_string(), index.provides(n.module))).collect() }
    }

    /// Reads every need's option from a kernel `.config`: `=y` is built in; `=m` is
    /// missing, since the kernel built from that config comes without modules (vmrepro
    /// builds only its `bzImage`); anything else is missing.
    pub fn from_config(config: &str) -> Self {
        let set: BTreeSet<&str> = config.lines().map(str::trim).filter(|l| l.ends_with("=y")).collect();
        KernelFeatures {
            needs: all_needs()
                .map(|n| {
                    let on = set.contains(format!("{}=y", n.option).as_str());
                    (n.module.to_string(), if on { Provision::BuiltIn } else { Provision::Missing })
                })
                .collect(),
        }
    }

    /// The needs of `wanted` that this kernel lacks, in order.
    pub fn missing<'a>(&self, wanted: &'a [Need]) -> Vec<&'a Need> {
        wanted.iter().filter(|n| self.needs.get(n.module).is_none_or(|p| *p == Provision::Missing)).collect()
    }
}

/// The sentence naming what `kernel` lacks of `missing` (non-empty), e.g.
/// ``kernel 6.1.0-50-amd64 (…): CONFIG_EXT4_FS (module `ext4`, for the root filesystem
/// (ext4)) is neither built in nor a module; set it to y or m``; `values` is what the
/// option may be set to (`y or m`, or `y` for a kernel built without modules).
pub fn missing_message(kernel: &str, missing: &[&Need], values: &str) -> String {
    let each: Vec<String> =
        missing.iter().map(|n| format!("{} (module `{}`, for {})", n.option, n.module, n.purpose)).collect();
    let (verb, them) = if missing.len() == 1 { ("is", "it") } else { ("are", "them") };
    format!("{kernel}: {} {verb} neither built in nor a module; set {them} to {values}", each.join(", "))
}

/// The most bytes read of any one index file (Debian's 6.1 `modules.alias`, the largest,
/// is 1.3 MB).
const MAX_INDEX_BYTES: u64 = 64 * 1024 * 1024;

/// A kernel's modules: which exist, which are built in, their dependencies, soft
/// dependencies and exact aliases. Names are folded to `_` (`crc32c-intel.ko` is
/// `crc32c_intel`), as the kernel and kmod do.
#[derive(Debug, Clone, Default)]
pub struct ModuleIndex {
    /// Module path (relative to the modules tree) → hard dependencies' paths.
    deps: BTreeMap<String, Vec<String>>,
    /// Module name → path.
    by_name: BTreeMap<String, String>,
    /// Names of the modules built in.
    builtin: BTreeSet<String>,
    /// Alias → module names (modular or built in).
    aliases: BTreeMap<String, BTreeSet<String>>,
    /// Module name → its `pre:` soft dependencies (names or aliases).
    softdeps: BTreeMap<String, Vec<String>>,
}

/// The texts of a modules tree's index files (empty when a file is absent).
#[derive(Debug, Clone, Copy, Default)]
pub struct IndexFiles<'a> {
    /// `modules.dep`.
    pub dep: &'a str,
    /// `modules.builtin`.
    pub builtin: &'a str,
    /// `modules.builtin.modinfo` (`name.key=value` records separated by NUL bytes).
    pub builtin_modinfo: &'a [u8],
    /// `modules.softdep`.
    pub softdep: &'a str,
    /// `modules.alias`.
    pub alias: &'a str,
}

impl ModuleIndex {
    /// Parses the index files. Lines that don't fit their file's format are skipped.
    pub fn parse(files: &IndexFiles<'_>) -> Self {
        let mut ix = ModuleIndex::default();
        for line in files.dep.lines() {
            let Some((m, rest)) = line.split_once(':') else { continue };
            let m = m.trim();
            ix.deps.insert(m.to_string(), rest.split_whitespace().map(str::to_string).collect());
            ix.by_name.insert(module_name(m), m.to_string());
        }
        ix.builtin.extend(files.builtin.lines().map(str::trim).filter(|l| !l.is_empty()).map(module_name));
        for record in files.builtin_modinfo.split(|&b| b == 0) {
            let Ok(record) = std::str::from_utf8(record) else { continue };
            let Some((key, value)) = record.split_once('=') else { continue };
            let Some((name, field)) = key.split_once('.') else { continue };
            let name = name.replace('-', "_");
            ix.builtin.insert(name.clone());
            if field == "alias" && is_exact(value) {
                ix.aliases.entry(value.to_string()).or_default().insert(name);
            }
        }
        for line in files.alias.lines() {
            let mut w = line.split_whitespace();
            if let (Some("alias"), Some(alias), Some(name)) = (w.next(), w.next(), w.next()) {
                if is_exact(alias) {
                    ix.aliases.entry(alias.to_string()).or_default().insert(name.replace('-', "_"));
                }
            }
        }
        for line in files.softdep.lines() {
            let mut w = line.split_whitespace();
            if w.next() != Some("softdep") {
                continue;
            }
            let Some(name) = w.next() else { continue };
            let mut pre = Vec::new();
            let mut in_pre = false;
            for t in w {
                match t {
                    "pre:" => in_pre = true,
                    "post:" => in_pre = false,
                    t if in_pre => pre.push(t.to_string()),
                    _ => {}
                }
            }
            ix.softdeps.entry(name.replace('-', "_")).or_default().extend(pre);
        }
        ix
    }

    /// Reads the index files of the modules tree `tree` (`…/lib/modules/<release>`, after
    /// `depmod`), each bounded to 64 MiB.
    ///
    /// Errors: `modules.dep` missing or unreadable, an index file larger than the bound.
    pub fn read(tree: &Path) -> Result<Self, ImageError> {
        let read = |name: &str, required: bool| -> Result<Vec<u8>, ImageError> {
            let path = tree.join(name);
            match std::fs::File::open(&path) {
                Ok(f) => {
                    let mut bytes = Vec::new();
                    std::io::Read::read_to_end(&mut std::io::Read::take(f, MAX_INDEX_BYTES + 1), &mut bytes)
                        .map_err(ImageError::io("reading module index", &path))?;
                    if bytes.len() as u64 > MAX_INDEX_BYTES {
                        return Err(ImageError::Kernel(format!(
                            "{}: larger than {} MiB, not a module index",
                            path.display(),
                            MAX_INDEX_BYTES >> 20
                        )));
                    }
                    Ok(bytes)
                }
                Err(e) if !required && e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
                Err(e) => Err(ImageError::io("reading module index", &path)(e)),
            }
        };
        let dep = read("modules.dep", true)?;
        let builtin = read("modules.builtin", false)?;
        let modinfo = read("modules.builtin.modinfo", false)?;
        let softdep = read("modules.softdep", false)?;
        let alias = read("modules.alias", false)?;
        let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
        let (dep, builtin, softdep, alias) = (text(&dep), text(&builtin), text(&softdep), text(&alias));
        Ok(ModuleIndex::parse(&IndexFiles {
            dep: &dep,
            builtin: &builtin,
            builtin_modinfo: &modinfo,
            softdep: &softdep,
            alias: &alias,
        }))
    }

    /// How the kernel provides module (or alias) `name`.
    pub fn provides(&self, name: &str) -> Provision {
        let folded = name.replace('-', "_");
        if self.builtin.contains(&folded) {
            Provision::BuiltIn
        } else if self.by_name.contains_key(&folded) {
            Provision::Module
        } else {
            match self.alias(name) {
                Some(names) if names.iter().any(|n| self.builtin.contains(n)) => Provision::BuiltIn,
                Some(names) if names.iter().any(|n| self.by_name.contains_key(n)) => Provision::Module,
                _ => Provision::Missing,
            }
        }
    }

    /// The modules to load for `roots` (names), as paths relative to the modules tree,
    /// each after its `pre:` soft dependencies and its dependencies. A root or soft
    /// dependency that is built in (itself, or one module of its alias) adds nothing;
    /// one that is missing adds nothing either (see [`KernelFeatures::missing`]).
    pub fn load_order(&self, roots: &[&str]) -> Vec<String> {
        let mut seen = BTreeSet::new();
        let mut out = Vec::new();
        for r in roots {
            self.visit_name(r, &mut seen, &mut out);
        }
        out
    }

    /// The modules of alias `name` (aliases keep their dashes: `crypto-crc32c`).
    fn alias(&self, name: &str) -> Option<&BTreeSet<String>> {
        self.aliases.get(name)
    }

    fn visit_name(&self, name: &str, seen: &mut BTreeSet<String>, out: &mut Vec<String>) {
        let folded = name.replace('-', "_");
        if self.builtin.contains(&folded) {
            return;
        }
        if let Some(path) = self.by_name.get(&folded) {
            self.visit_path(path, seen, out);
            return;
        }
        // An alias (`crypto-crc32c`): satisfied if one of its modules is built in,
        // else every module of it is loaded, as `modprobe` does.
        let Some(names) = self.alias(name) else { return };
        if names.iter().any(|n| self.builtin.contains(n)) {
            return;
        }
        for n in names {
            if let Some(path) = self.by_name.get(n) {
                self.visit_path(path, seen, out);
            }
        }
    }

    fn visit_path(&self, path: &str, seen: &mut BTreeSet<String>, out: &mut Vec<String>) {
        if !seen.insert(path.to_string()) {
            return;
        }
        for soft in self.softdeps.get(&module_name(path)).into_iter().flatten() {
            self.visit_name(soft, seen, out);
        }
        for d in self.deps.get(path).into_iter().flatten() {
            self.visit_path(d, seen, out);
        }
        out.push(path.to_string());
    }
}

/// An alias without glob characters (device aliases such as `pci:v00001AF4d*` are
/// patterns, not names a guest asks for).
fn is_exact(alias: &str) -> bool {
    !alias.is_empty() && !alias.contains(['*', '?', '['])
}

/// `kernel/drivers/block/virtio_blk.ko.xz` → `virtio_blk` (dashes folded to `_`).
pub(crate) fn module_name(path: &str) -> String {
    let file = path.rsplit('/').next().unwrap_or(path);
    file.split(".ko").next().unwrap_or(file).replace('-', "_")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Excerpts of Debian's 6.1.0-50 (6.1.176-1) kernels' index files, after `depmod`:
    /// see `tests/fixtures/kernel-modules/README.md`.
    macro_rules! fixture {
        ($release:literal) => {
            ModuleIndex::parse(&IndexFiles {
                dep: include_str!(concat!("../../../tests/fixtures/kernel-modules/", $release, "/modules.dep")),
                builtin: include_str!(concat!("../../../tests/fixtures/kernel-modules/", $release, "/modules.builtin")),
                builtin_modinfo: include_bytes!(concat!(
                    "../../../tests/fixtures/kernel-modules/",
                    $release,
                    "/modules.builtin.modinfo"
                )),
                softdep: include_str!(concat!("../../../tests/fixtures/kernel-modules/", $release, "/modules.softdep")),
                alias: include_str!(concat!("../../../tests/fixtures/kernel-modules/", $release, "/modules.alias")),
            })
        };
    }

    /// The virtio modules both 6.1 flavours load for the disks, in load order.
    const VIRTIO_DISK: [&str; 6] = [
        "kernel/drivers/virtio/virtio_pci_legacy_dev.ko",
        "kernel/drivers/virtio/virtio_pci_modern_dev.ko",
        "kernel/drivers/virtio/virtio_ring.ko",
        "kernel/drivers/virtio/virtio.ko",
        "kernel/drivers/virtio/virtio_pci.ko",
        "kernel/drivers/block/virtio_blk.ko",
    ];

    fn roots() -> Vec<&'static str> {
        ROOT_DISK.iter().map(|n| n.module).collect()
    }

    #[test]
    fn standard_flavour_loads_ext4_with_its_dependencies_and_crc32c() {
        let ix = fixture!("6.1.0-50-amd64");
        assert_eq!(ix.provides("ext4"), Provision::Module);
        let order = ix.load_order(&roots());
        assert_eq!(order[..VIRTIO_DISK.len()], VIRTIO_DISK);
        assert_eq!(
            order[VIRTIO_DISK.len()..],
            [
                // ext4's `softdep ext4 pre: crypto-crc32c`: both modules of the alias,
                // by name.
                "kernel/crypto/crc32c_generic.ko",
                "kernel/arch/x86/crypto/crc32c-intel.ko",
                "kernel/lib/crc16.ko",
                "kernel/fs/mbcache.ko",
                "kernel/fs/jbd2/jbd2.ko",
                "kernel/fs/ext4/ext4.ko",
            ]
        );
        let f = KernelFeatures::from_index(&ix);
        assert!(f.needs.values().all(|p| *p == Provision::Module), "{f:?}");
        assert!(f.missing(&all_needs().copied().collect::<Vec<_>>()).is_empty());
    }

    #[test]
    fn cloud_flavour_builds_ext4_and_crc32c_in() {
        let ix = fixture!("6.1.0-50-cloud-amd64");
        assert_eq!(ix.provides("ext4"), Provision::BuiltIn);
        // Built in per modules.builtin.modinfo's alias list as well.
        assert_eq!(ix.provides("fs-ext4"), Provision::BuiltIn);
        assert_eq!(ix.provides("crypto-crc32c"), Provision::BuiltIn);
        assert_eq!(ix.provides("sch_netem"), Provision::Module);
        assert_eq!(ix.load_order(&roots()), VIRTIO_DISK, "nothing for ext4: built in");
        let f = KernelFeatures::from_index(&ix);
        assert_eq!(f.needs["ext4"], Provision::BuiltIn);
        assert_eq!(f.needs["nfsd"], Provision::Module);
    }

    #[test]
    fn nfs_and_nic_closures_follow_modules_dep() {
        let ix = fixture!("6.1.0-50-amd64");
        let order = ix.load_order(&["nfsd", "virtio_net"]);
        let pos = |m: &str| order.iter().position(|p| p.ends_with(m)).unwrap_or_else(|| panic!("{m} in {order:?}"));
        // nfsd's hard dependencies come before it, and its `pre: crypto-md5` soft
        // dependency is built into this kernel (nothing to load).
        for dep in ["sunrpc.ko", "grace.ko", "lockd.ko", "nfs_acl.ko", "auth_rpcgss.ko"] {
            assert!(pos(dep) < pos("nfsd.ko"), "{order:?}");
        }
        assert!(pos("failover.ko") < pos("net_failover.ko") && pos("net_failover.ko") < pos("virtio_net.ko"));
        assert_eq!(ix.provides("crypto-md5"), Provision::BuiltIn);
        assert_eq!(order.len(), BTreeSet::<&String>::from_iter(&order).len(), "each module once: {order:?}");
    }

    #[test]
    fn a_kernel_without_ext4_is_told_which_option_is_missing() {
        let ix = ModuleIndex::parse(&IndexFiles {
            dep: "kernel/drivers/block/virtio_blk.ko:\nkernel/drivers/net/virtio_net.ko:\n",
            builtin: "kernel/drivers/virtio/virtio_pci.ko\n",
            ..IndexFiles::default()
        });
        let f = KernelFeatures::from_index(&ix);
        let missing = f.missing(ROOT_DISK);
        assert_eq!(missing.iter().map(|n| n.option).collect::<Vec<_>>(), ["CONFIG_EXT4_FS"]);
        assert_eq!(
            missing_message("kernel 6.1.0-x (mine)", &missing, "y or m"),
            "kernel 6.1.0-x (mine): CONFIG_EXT4_FS (module `ext4`, for the root filesystem (ext4)) is \
             neither built in nor a module; set it to y or m"
        );
        assert_eq!(f.missing(GUEST_DEVICES).iter().map(|n| n.module).collect::<Vec<_>>(), ["virtio_console"]);
    }

    #[test]
    fn config_features_count_only_built_in_options() {
        let f = KernelFeatures::from_config(
            "CONFIG_VIRTIO_PCI=y\nCONFIG_VIRTIO_BLK=y\nCONFIG_EXT4_FS=m\n# CONFIG_NFSD is not set\nCONFIG_NFS_FS=y\n",
        );
        assert_eq!(f.needs["virtio_blk"], Provision::BuiltIn);
        assert_eq!(f.needs["nfs"], Provision::BuiltIn);
        assert_eq!(
            f.missing(ROOT_DISK).iter().map(|n| n.module).collect::<Vec<_>>(),
            ["ext4"],
            "=m is no use to a kernel built without modules"
        );
        assert_eq!(f.missing(NFS_SERVER).len(), 1);
    }

    #[test]
    fn the_fingerprint_names_every_need() {
        let fp = needs_fingerprint();
        assert!(all_needs().all(|n| fp.contains(n.option)), "{fp}");
    }
}
