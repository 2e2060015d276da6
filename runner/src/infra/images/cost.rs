//! What a suite will fetch or build before its VMs boot, and what the cache already
//! has (`vmrepro plan --cost SUITE`): per kernel its package (`debs/<sha256>`, fetched
//! from the Debian archive) and its prepared entry (`kernel/<key>`: extracted, or
//! compiled from a source package), per rootfs recipe with its extra packages its
//! image (`rootfs/<key>`, built with mmdebstrap), and the saved VM states
//! (`vmstate/<key>`) of the same kernel, rootfs and memory. Nothing is fetched, built
//! or locked: it only looks at the cache's folders.
//!
//! Sizes: of a cached entry, the disk space it takes ([`gc::disk_usage`], allocated
//! bytes); of a package not yet fetched, its size in `images/kernels.yaml`. When:
//! the entry folder's modification time (the cache renames a finished build into
//! place, so that is when it was built), and for a saved state the seconds its save
//! took (`meta.json`, [`StateMeta::took_s`]); the cache records no build duration for
//! kernels and root filesystems.

use std::collections::BTreeSet;
use std::path::Path;
use std::time::{Duration, SystemTime};

use super::gc::{self, EntryId};
use super::kernel::{cache_entries, KernelSource};
use super::rootfs::{rootfs_key_with, RootfsRequest};
use super::{Cache, Catalog};
use crate::infra::qemu::state::{StateMeta, KIND as VMSTATE, META_FILE};

/// What a missing item costs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Work {
    /// Downloaded (a Debian package).
    Fetch,
    /// Built on this machine (a kernel prepared or compiled, a rootfs).
    Build,
    /// Made during the run (a saved VM state: the first VM of its kind boots and saves it).
    Save,
}

/// One cache entry the suite needs.
#[derive(Debug, Clone)]
pub struct CostItem {
    /// What it is, e.g. `package linux-image-6.1.0-50-cloud-amd64 6.1.176-1`.
    pub what: String,
    /// How it is made when missing, in words (`fetched from the Debian archive`).
    pub how: String,
    /// Its kind of work.
    pub work: Work,
    /// Its cache entry `(kind, key)`; `None` when it could not be named (see `problem`).
    pub entry: Option<EntryId>,
    /// The VMs that need it, in plan order.
    pub vms: Vec<String>,
    /// Whether the cache has it (a complete entry).
    pub cached: bool,
    /// Disk space of the cached entry, bytes.
    pub disk_bytes: Option<u64>,
    /// Bytes to download when it is not cached (a package's size in `kernels.yaml`).
    pub download_bytes: Option<u64>,
    /// Time since it was built (its folder's modification time), when cached.
    pub age: Option<Duration>,
    /// Seconds its last build took, where the cache records it (saved states).
    pub took_s: Option<f64>,
    /// Why the entry could not be named (e.g. a local kernel file that is missing).
    pub problem: Option<String>,
}

/// The cost of booting the VMs of a plan: `vms` as `(vm, kernel, rootfs, memory MiB)`
/// (from [`crate::plan::Plan::vms`]), each entry once, in the order a run resolves
/// them (root filesystems, then kernels), then the saved VM states. Reads only.
pub fn suite_cost(
    catalog: &Catalog,
    cache: &Cache,
    vms: &[(String, KernelSource, RootfsRequest, u64)],
) -> Vec<CostItem> {
    let mut items: Vec<CostItem> = Vec::new();
    let add = |items: &mut Vec<CostItem>, item: CostItem| match items
        .iter_mut()
        .find(|i| i.entry.is_some() && i.entry == item.entry || i.entry.is_none() && i.what == item.what)
    {
        Some(i) => i.vms.extend(item.vms),
        None => items.push(item),
    };
    for (vm, _, rootfs, _) in vms {
        let how = match rootfs.packages.as_slice() {
            [] => format!("built with mmdebstrap from images/rootfs/{}.yaml", rootfs.recipe),
            p => format!(
                "built with mmdebstrap from images/rootfs/{}.yaml with extra packages {}",
                rootfs.recipe,
                p.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")
            ),
        };
        let entry = rootfs_key_with(catalog, rootfs).map(|k| ("rootfs".to_string(), k));
        add(&mut items, item(cache, format!("rootfs {}", rootfs.id()), how, Work::Build, entry, vm, None));
    }
    for (vm, kernel, _, _) in vms {
        match cache_entries(kernel) {
            Ok(entries) => {
                for (kind, key) in entries {
                    let (what, how, work, size) = describe(kind, kernel);
                    add(&mut items, item(cache, what, how, work, Ok((kind.to_string(), key)), vm, size));
                }
            }
            Err(e) => {
                let (what, how, work, _) = describe("kernel", kernel);
                add(&mut items, item(cache, what, how, work, Err(e), vm, None));
            }
        }
    }
    let states = saved_states(cache);
    for (vm, kernel, rootfs, memory) in vms {
        let release = kernel_release(cache, kernel);
        let rootfs_id = rootfs.id();
        let found: Vec<&(EntryId, StateMeta, std::path::PathBuf)> = states
            .iter()
            .filter(|(_, m, _)| {
                release.as_deref() == Some(m.kernel_release.as_str())
                    && m.rootfs == rootfs_id
                    && m.memory_mib == *memory
            })
            .collect();
        let what =
            format!("saved VM state: {}, {rootfs_id}, {memory} MiB", release.as_deref().unwrap_or(&kernel.label()));
        let how = "saved during the run by the first VM of its kind that boots (later runs start from it)".to_string();
        if found.is_empty() {
            let mut i =
                item(cache, what.clone(), how.clone(), Work::Save, Ok((VMSTATE.into(), String::new())), vm, None);
            // No entry of its kind yet: its key is only known at boot (QEMU's arguments).
            (i.entry, i.cached, i.disk_bytes, i.age) = (None, false, None, None);
            add(&mut items, i);
        }
        for (id, meta, _) in found {
            let mut i = item(cache, what.clone(), how.clone(), Work::Save, Ok(id.clone()), vm, None);
            i.took_s = Some(meta.took_s);
            add(&mut items, i);
        }
    }
    items
}

/// One item: looked up in the cache.
fn item(
    cache: &Cache,
    what: String,
    how: String,
    work: Work,
    entry: Result<EntryId, super::ImageError>,
    vm: &str,
    download_bytes: Option<u64>,
) -> CostItem {
    let (entry, problem) = match entry {
        Ok(e) => (Some(e), None),
        Err(e) => (None, Some(e.to_string())),
    };
    let path = entry.as_ref().map(|(k, key)| cache.entry_path(k, key)).filter(|p| p.is_dir());
    let age = path.as_deref().and_then(modified_age);
    CostItem {
        what,
        how,
        work,
        entry,
        vms: vec![vm.to_string()],
        cached: path.is_some(),
        disk_bytes: path.as_deref().map(gc::disk_usage),
        download_bytes: if path.is_some() { None } else { download_bytes },
        age,
        took_s: None,
        problem,
    }
}

fn modified_age(path: &Path) -> Option<Duration> {
    let t = std::fs::metadata(path).and_then(|m| m.modified()).ok()?;
    SystemTime::now().duration_since(t).ok()
}

/// What a kernel's entry of `kind` is, how it is made, and its download size.
fn describe(kind: &str, k: &KernelSource) -> (String, String, Work, Option<u64>) {
    match (kind, k) {
        ("debs", KernelSource::Debian(p)) => (
            format!("package {} {}", p.package, p.version),
            format!("fetched from the Debian archive ({})", p.suite),
            Work::Fetch,
            Some(p.size),
        ),
        ("debs", KernelSource::Source(s)) => (
            format!("package {} {}", s.source.package, s.source.version),
            format!("fetched from the Debian archive ({})", s.source.suite),
            Work::Fetch,
            Some(s.source.size),
        ),
        (_, KernelSource::Source(s)) => {
            let fragments: BTreeSet<String> =
                s.fragments.iter().filter_map(|f| f.file_name()).map(|f| f.to_string_lossy().into_owned()).collect();
            let with = if fragments.is_empty() {
                String::new()
            } else {
                format!(" with {}", fragments.into_iter().collect::<Vec<_>>().join(", "))
            };
            (
                k.label(),
                format!("compiled from the source package{with} (a source build, the longest item)"),
                Work::Build,
                None,
            )
        }
        (_, KernelSource::Tree(t)) => (
            k.label(),
            match &t.checkout {
                Some(c) => format!("compiled from commit {} of the tree mapped at {}", t.resolved.commit, c.display()),
                None => format!(
                    "compiled from commit {} (tree `{}` not mapped here: a bundle's kernel must be imported)",
                    t.resolved.commit, t.tree
                ),
            },
            Work::Build,
            None,
        ),
        _ => (k.label(), "prepared from the kernel image (modules disk, initramfs)".into(), Work::Build, None),
    }
}

/// `uname -r` of a kernel whose prepared entry is cached (its `release` file), else
/// of a pinned Debian package (from its name: `linux-image-<release>`).
fn kernel_release(cache: &Cache, k: &KernelSource) -> Option<String> {
    let from_cache = cache_entries(k).ok().and_then(|e| {
        let (_, key) = e.into_iter().find(|(kind, _)| *kind == "kernel")?;
        // Bounded: a release file is one short line.
        let text =
            crate::path_io::Folder::open(&cache.entry_path("kernel", &key)).ok()?.read_text("release", 4096).ok()?;
        Some(text.trim().chars().take(200).collect::<String>())
    });
    from_cache.or_else(|| match k {
        KernelSource::Debian(p) => p.package.strip_prefix("linux-image-").map(str::to_string),
        _ => None,
    })
}

/// Every saved VM state in the cache with what it was saved from (entries whose
/// `meta.json` can't be read are left out: they can't be matched to a VM).
fn saved_states(cache: &Cache) -> Vec<(EntryId, StateMeta, std::path::PathBuf)> {
    cache
        .list()
        .into_iter()
        .filter(|(kind, _, _)| kind == VMSTATE)
        .filter_map(|(kind, key, path)| {
            let text = crate::path_io::Folder::open(&path).ok()?.read_text(META_FILE, 64 * 1024).ok()?;
            let meta: StateMeta = serde_json::from_str(&text).ok()?;
            Some(((kind, key), meta, path))
        })
        .collect()
}
