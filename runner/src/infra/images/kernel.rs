//! Preparing a kernel for our VMs: the bootable image, its modules on a read-only ext4
//! disk (with `modules.dep` from `depmod`), the initramfs part holding the modules
//! needed before the root disk can be mounted, and what the kernel provides of every
//! guest need (`needs.json`, [`super::modules::KernelFeatures`]).
//!
//! Which modules the initramfs loads comes from the kernel's own index
//! ([`super::modules::ModuleIndex`]): the modular ones among
//! [`super::modules::ROOT_DISK`] (virtio PCI, virtio-blk, ext4) with their
//! dependencies and soft dependencies, in load order. Debian's cloud flavour builds
//! ext4 in and makes the virtio drivers modules; its standard flavour makes all three
//! modules (ext4 needs jbd2, mbcache, crc16 and crc32c); 5.10 has no
//! `virtio_pci_modern_dev`, 6.12 builds `virtio_pci` in and xz-compresses its modules
//! (decompressed here for busybox `insmod`). A kernel that has a root-disk or device
//! need neither built in nor as a module is refused here, naming the option.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::initramfs::{write_archive, Member};
use super::modules::{missing_message, KernelFeatures, ModuleIndex, Need, GUEST_DEVICES, ROOT_DISK};
use super::rootfs::{make_ext4, walk_files};
use super::{run_tool, Cache, CacheOutcome, CancelFlag, ImageError, PinnedKernel};
use crate::infra::hash::sha256_hex;

/// Bumped when kernel preparation changes.
const KERNEL_FORMAT: &str = "vmrepro-kernel-v2";

/// The file a Debian or local kernel's cache entry gets: what the kernel provides of every
/// need (absent for a kernel image given without modules: nothing is known of it).
pub const NEEDS_FILE: &str = "needs.json";

/// Where a kernel comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KernelSource {
    /// A pinned Debian package.
    Debian(PinnedKernel),
    /// A local kernel image, with an optional modules tree (`…/lib/modules/<release>`).
    Local {
        /// `bzImage`/`vmlinuz`.
        image: PathBuf,
        /// Modules tree.
        modules: Option<PathBuf>,
    },
    /// Built from a Debian kernel source package.
    Source(super::source::SourceKernel),
    /// Built from a commit of a git tree the user mapped ([`super::tree`]).
    Tree(super::tree::TreeKernel),
}

impl KernelSource {
    /// Short description for progress, results and reports.
    pub fn label(&self) -> String {
        match self {
            KernelSource::Debian(p) => format!("kernel {} ({})", p.series, p.package),
            KernelSource::Local { image, .. } => format!("kernel {}", image.display()),
            KernelSource::Source(s) => s.label(),
            KernelSource::Tree(t) => t.label(),
        }
    }
}

/// A prepared kernel.
#[derive(Debug, Clone, serde::Serialize)]
pub struct KernelArtifact {
    /// Cache entry folder.
    pub dir: PathBuf,
    /// Bootable kernel image.
    pub image: PathBuf,
    /// `uname -r` of the kernel.
    pub release: String,
    /// ext4 image of `/usr/lib/modules`, if the kernel has modules.
    pub modules_disk: Option<PathBuf>,
    /// The initramfs part with the boot modules.
    pub initramfs_modules: PathBuf,
    /// What the kernel provides of every guest need: from its module index, or for a
    /// source-built kernel from its `.config`; `None` for a local kernel image given
    /// without modules.
    pub features: Option<KernelFeatures>,
    /// Cache key.
    pub key: String,
    /// The shared lock that keeps `vmrepro images gc` from removing the entry while
    /// this artefact (or a clone) exists.
    #[serde(skip)]
    pub hold: std::sync::Arc<super::cache::EntryHold>,
}

/// The cache key of a kernel's prepared entry (`kernel/<key>`), without building
/// anything: a Debian kernel's from its package's SHA-256, a local kernel's from its
/// image's bytes and its modules' names, sizes and times, a source-built one's from
/// every input (see [`super::source::SourceKernel::key`]).
///
/// Errors: a local kernel image or module that can't be read.
pub fn kernel_key(src: &KernelSource) -> Result<String, ImageError> {
    match src {
        KernelSource::Debian(k) => Ok(sha256_hex(format!("{}debian\n{}\n", format_line(), k.sha256).as_bytes())),
        KernelSource::Local { image, modules } => local_key(image, modules.as_deref()),
        KernelSource::Source(sk) => sk.key(),
        KernelSource::Tree(tk) => tk.key(),
    }
}

/// Every cache entry a kernel needs, as `(kind, key)`: the package it comes from
/// (`debs/<sha256>`, Debian and source-built kernels) and its prepared entry.
///
/// Errors: as [`kernel_key`].
pub fn cache_entries(src: &KernelSource) -> Result<Vec<(&'static str, String)>, ImageError> {
    let mut out = Vec::new();
    match src {
        KernelSource::Debian(k) => out.push(("debs", k.sha256.clone())),
        KernelSource::Source(sk) => out.push(("debs", sk.source.sha256.clone())),
        KernelSource::Local { .. } | KernelSource::Tree(_) => {}
    }
    out.push(("kernel", kernel_key(src)?));
    Ok(out)
}

/// Returns the prepared kernel, fetching and building what the cache lacks.
pub fn resolve_kernel(cache: &Cache, src: &KernelSource) -> Result<(KernelArtifact, CacheOutcome), ImageError> {
    let key = kernel_key(src)?;
    // The package stays held until the kernel is prepared from it.
    let (deb, _deb_hold) = match src {
        KernelSource::Debian(k) => {
            let (deb, _, hold) = super::debian::fetch_deb_held(cache, &k.filename, k.size, &k.sha256)?;
            (Some(deb), Some(hold))
        }
        _ => (None, None),
    };
    let (dir, outcome, hold) = cache.get_or_build_held("kernel", &key, |tmp| {
        match src {
            KernelSource::Source(sk) => return sk.build(cache, tmp),
            KernelSource::Tree(tk) => return tk.build(cache, tmp),
            _ => {}
        }
        let stage = tmp.join("stage");
        let (image, modules) = match (src, &deb) {
            (KernelSource::Debian(_), Some(deb)) => extract_deb(deb, &stage, cache.cancel_flag())?,
            (KernelSource::Local { image, modules }, _) => (image.clone(), modules.clone()),
            _ => unreachable!("a Debian kernel always has its package"),
        };
        build(&src.label(), &image, modules.as_deref(), tmp, cache.cancel_flag())?;
        if stage.exists() {
            std::fs::remove_dir_all(&stage).map_err(ImageError::io("removing staging folder", &stage))?;
        }
        Ok(())
    })?;
    let release = std::fs::read_to_string(dir.join("release"))
        .map_err(ImageError::io("reading kernel release", &dir))?
        .trim()
        .to_string();
    let modules_disk = dir.join("modules.ext4");
    let features = read_features(src, &dir)?;
    let art = KernelArtifact {
        image: dir.join("vmlinuz"),
        release,
        modules_disk: modules_disk.exists().then_some(modules_disk),
        initramfs_modules: dir.join("initramfs-modules.cpio"),
        features,
        dir,
        key,
        hold: std::sync::Arc::new(hold),
    };
    Ok((art, outcome))
}

/// The first lines of a Debian or local kernel's key material: the format and the list
/// of needs, so that an entry prepared for another list (another initramfs module set,
/// another `needs.json`) is not reused.
fn format_line() -> String {
    format!("{KERNEL_FORMAT}\n{}\n", super::modules::needs_fingerprint())
}

fn local_key(image: &Path, modules: Option<&Path>) -> Result<String, ImageError> {
    let mut material = format!("{}local\n", format_line()).into_bytes();
    material.extend(read_image(image)?);
    if let Some(m) = modules {
        for f in walk_files(m)? {
            let meta = std::fs::metadata(&f).map_err(ImageError::io("reading module", &f))?;
            let mtime = meta
                .modified()
                .ok()
                .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                .map_or(0, |d| d.as_nanos());
            material.extend(format!("{}\0{}\0{}\n", f.display(), meta.len(), mtime).into_bytes());
        }
    }
    Ok(sha256_hex(&material))
}

/// Unpacks a kernel .deb into `stage`; returns its image and modules tree.
fn extract_deb(deb: &Path, stage: &Path, cancel: &CancelFlag) -> Result<(PathBuf, Option<PathBuf>), ImageError> {
    run_tool(Command::new("dpkg-deb").arg("-x").arg(deb).arg(stage), "dpkg-deb -x", None, cancel)?;
    let boot = stage.join("boot");
    let vmlinuz = std::fs::read_dir(&boot)
        .map_err(ImageError::io("listing the package's /boot", &boot))?
        .flatten()
        .map(|e| e.path())
        .find(|p| p.file_name().is_some_and(|n| n.to_string_lossy().starts_with("vmlinuz-")))
        .ok_or_else(|| ImageError::Kernel(format!("{}: no boot/vmlinuz-* in the package", deb.display())))?;
    let release = vmlinuz.file_name().unwrap_or_default().to_string_lossy().trim_start_matches("vmlinuz-").to_string();
    let modules = ["lib/modules", "usr/lib/modules"].iter().map(|d| stage.join(d).join(&release)).find(|p| p.is_dir());
    Ok((vmlinuz, modules))
}

/// What a prepared kernel provides: `needs.json` of a Debian or local kernel's entry,
/// the `config` of one built from a source package or a tree.
fn read_features(src: &KernelSource, dir: &Path) -> Result<Option<KernelFeatures>, ImageError> {
    if let KernelSource::Source(_) | KernelSource::Tree(_) = src {
        let config = dir.join("config");
        let text = std::fs::read_to_string(&config).map_err(ImageError::io("reading kernel config", &config))?;
        return Ok(Some(KernelFeatures::from_config(&text)));
    }
    let path = dir.join(NEEDS_FILE);
    match std::fs::read(&path) {
        Ok(bytes) => {
            serde_json::from_slice(&bytes).map(Some).map_err(|e| ImageError::Kernel(format!("{}: {e}", path.display())))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(ImageError::io("reading", &path)(e)),
    }
}

/// Prepares the kernel `label` (for messages) into the cache entry `out`.
fn build(label: &str, image: &Path, modules: Option<&Path>, out: &Path, cancel: &CancelFlag) -> Result<(), ImageError> {
    std::fs::write(out.join("vmlinuz"), read_image(image)?).map_err(ImageError::io("copying kernel image", image))?;
    let release = match modules {
        Some(m) => m.file_name().unwrap_or_default().to_string_lossy().into_owned(),
        None => bzimage_release(image)?,
    };
    std::fs::write(out.join("release"), format!("{release}\n")).map_err(ImageError::io("writing release", out))?;

    let mut boot_members = vec![Member::Dir { name: "modules".into() }];
    let mut order = Vec::new();
    if let Some(m) = modules {
        // depmod wants <base>/lib/modules/<release>; stage a copy there.
        let base = out.join("depmod");
        let tree = base.join("lib/modules").join(&release);
        copy_tree(m, &tree)?;
        run_tool(Command::new("depmod").arg("-b").arg(&base).arg(&release), "depmod", None, cancel)?;
        let index = ModuleIndex::read(&tree)?;
        let features = KernelFeatures::from_index(&index);
        let missing: Vec<&Need> =
            features.missing(ROOT_DISK).into_iter().chain(features.missing(GUEST_DEVICES)).collect();
        if !missing.is_empty() {
            return Err(ImageError::Kernel(missing_message(&format!("{label} ({release})"), &missing, "y or m")));
        }
        let json = serde_json::to_vec_pretty(&features).map_err(|e| ImageError::Kernel(e.to_string()))?;
        std::fs::write(out.join(NEEDS_FILE), json).map_err(ImageError::io("writing", out))?;
        let roots: Vec<&str> = ROOT_DISK.iter().map(|n| n.module).collect();
        for rel in index.load_order(&roots) {
            let file = tree.join(&rel);
            let data = read_module(&file)?;
            let name = module_file_name(&rel);
            boot_members.push(Member::File { name: format!("modules/{name}"), mode: 0o644, data });
            order.push(name);
        }
        let du: u64 = walk_files(&tree)?
            .iter()
            .filter_map(|f| std::fs::metadata(f).ok())
            .map(|m| m.len().div_ceil(4096) * 4096)
            .sum();
        let size_mib = du / (1024 * 1024) * 13 / 10 + 32;
        make_ext4(&base.join("lib/modules"), &out.join("modules.ext4"), size_mib, "vmrepro-modules", cancel)?;
        std::fs::remove_dir_all(&base).map_err(ImageError::io("removing staging folder", &base))?;
    }
    boot_members.push(Member::File {
        name: "boot-modules".into(),
        mode: 0o644,
        data: format!("{}\n", order.join("\n")).into_bytes(),
    });
    let cpio = out.join("initramfs-modules.cpio");
    write_archive(&cpio, &boot_members).map_err(ImageError::io("writing initramfs", &cpio))
}

fn module_file_name(path: &str) -> String {
    format!("{}.ko", path.rsplit('/').next().unwrap_or(path).split(".ko").next().unwrap_or(path))
}

/// Reads a module, decompressing `.ko.xz` (busybox `insmod` wants plain ELF).
fn read_module(path: &Path) -> Result<Vec<u8>, ImageError> {
    let raw = std::fs::read(path).map_err(ImageError::io("reading module", path))?;
    let name = path.to_string_lossy();
    if name.ends_with(".xz") {
        let mut out = Vec::new();
        xz2::read::XzDecoder::new(&raw[..])
            .read_to_end(&mut out)
            .map_err(ImageError::io("decompressing module", path))?;
        Ok(out)
    } else if name.ends_with(".zst") || name.ends_with(".gz") {
        Err(ImageError::Kernel(format!(
            "{name}: zstd/gzip-compressed modules are not supported yet; use .ko or .ko.xz"
        )))
    } else {
        Ok(raw)
    }
}

/// Reads kernel image `image` (a suite's local kernel, or one unpacked from a pinned
/// package): not a link, a pipe or a hard link, at most
/// [`crate::suite::validate::kernel::MAX_KERNEL_IMAGE_BYTES`].
///
/// Errors: [`ImageError::File`].
fn read_image(image: &Path) -> Result<Vec<u8>, ImageError> {
    Ok(crate::path_io::read_named(image, crate::suite::validate::kernel::MAX_KERNEL_IMAGE_BYTES)?)
}

/// The release string in a bzImage's setup header (`kernel_version` field at 0x20E).
fn bzimage_release(image: &Path) -> Result<String, ImageError> {
    let data = read_image(image)?;
    let bad = || {
        ImageError::Kernel(format!(
            "{}: not a bzImage (no setup header); give `modules:` so the release is known",
            image.display()
        ))
    };
    if data.len() < 0x210 || &data[0x202..0x206] != b"HdrS" {
        return Err(bad());
    }
    let off = u16::from_le_bytes([data[0x20e], data[0x20f]]) as usize + 0x200;
    let s = data.get(off..).ok_or_else(bad)?;
    let end = s.iter().position(|&b| b == 0 || b == b' ').ok_or_else(bad)?;
    Ok(String::from_utf8_lossy(&s[..end]).into_owned())
}

/// The cap on one file of a kernel's modules tree, bytes (the largest modules are a
/// few MiB; `modules.alias` and friends below 2 MiB).
const MAX_MODULE_FILE_BYTES: u64 = 256 << 20;

/// Copies the modules tree `src` (from an images folder or a suite: untrusted) into
/// `dst` through [`crate::path_io::Folder`]: no link is followed, a file with more than
/// one hard link is refused (it could be a host file linked in), every read is
/// bounded ([`MAX_MODULE_FILE_BYTES`]); a link, pipe or device in the tree is refused
/// by name, never skipped.
///
/// Errors: [`ImageError::File`] naming the entry; [`ImageError::Io`] writing `dst`.
fn copy_tree(src: &Path, dst: &Path) -> Result<(), ImageError> {
    use crate::path_io::{FileError, Folder, Kind};
    let tree = Folder::open(src)?;
    for (rel, kind) in tree.walk()? {
        let d = dst.join(&rel);
        match kind {
            Kind::Folder => std::fs::create_dir_all(&d).map_err(ImageError::io("creating folder", &d))?,
            Kind::File(_) => {
                let data = tree.read(&rel, MAX_MODULE_FILE_BYTES)?;
                if let Some(p) = d.parent() {
                    std::fs::create_dir_all(p).map_err(ImageError::io("creating folder", p))?;
                }
                std::fs::write(&d, data).map_err(ImageError::io("copying module", &d))?;
            }
            Kind::Other("a symbolic link") => {
                return Err(FileError::Link { link: tree.display(&rel), folder: src.to_path_buf() }.into())
            }
            Kind::Other(kind) => return Err(FileError::NotRegular { path: tree.display(&rel), kind }.into()),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::modules::module_name;
    use super::*;

    /// A local kernel whose modules tree builds in virtio PCI, virtio-blk and virtio-net
    /// but has neither ext4 nor the virtio console: refused while it is prepared, with
    /// both options named, and no cache entry left behind (runs `depmod`, no VM).
    #[test]
    fn a_kernel_without_ext4_is_refused_naming_the_options() {
        let dir = tempfile::tempdir().unwrap();
        let tree = dir.path().join("lib/modules/6.1.0-mine");
        std::fs::create_dir_all(&tree).unwrap();
        std::fs::write(
            tree.join("modules.builtin"),
            "kernel/drivers/virtio/virtio_pci.ko\nkernel/drivers/block/virtio_blk.ko\nkernel/drivers/net/virtio_net.ko\n",
        )
        .unwrap();
        std::fs::write(tree.join("modules.order"), "").unwrap();
        let image = dir.path().join("bzImage");
        std::fs::write(&image, b"not booted here").unwrap();
        let cache = Cache::new(dir.path().join("cache"));
        let src = KernelSource::Local { image, modules: Some(tree) };
        let err = resolve_kernel(&cache, &src).expect_err("no ext4: refused").to_string();
        assert!(err.contains("(6.1.0-mine): CONFIG_EXT4_FS (module `ext4`, for the root filesystem (ext4))"), "{err}");
        assert!(err.contains("CONFIG_VIRTIO_CONSOLE (module `virtio_console`"), "{err}");
        assert!(err.ends_with("are neither built in nor a module; set them to y or m"), "{err}");
        assert!(!err.contains("CONFIG_VIRTIO_BLK") && !err.contains("CONFIG_NFSD"), "{err}");
        let entry = dir.path().join("cache/kernel").join(kernel_key(&src).unwrap());
        assert!(!entry.exists(), "no entry for a refused kernel");
    }

    /// A symbolic link, a hard link or a named pipe inside a local kernel's modules
    /// tree is refused by name while the kernel is prepared: nothing outside the tree
    /// is read through it (no depmod run, no VM).
    #[test]
    fn links_and_pipes_in_a_modules_tree_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let outside = dir.path().join("outside");
        std::fs::write(&outside, "CANARY host file\n").unwrap();
        let image = dir.path().join("bzImage");
        std::fs::write(&image, b"not booted here").unwrap();
        type Plant = fn(&Path, &Path);
        let kinds: [(&str, Plant, &str); 4] = [
            ("symlink", |o, t| std::os::unix::fs::symlink(o, t.join("modules.alias")).unwrap(), "symbolic link"),
            (
                "folder-link",
                |o, t| std::os::unix::fs::symlink(o.parent().unwrap(), t.join("kernel")).unwrap(),
                "symbolic link",
            ),
            ("hard-link", |o, t| std::fs::hard_link(o, t.join("modules.alias")).unwrap(), "hard link"),
            (
                "fifo",
                |_, t| nix::unistd::mkfifo(&t.join("modules.alias"), nix::sys::stat::Mode::S_IRWXU).unwrap(),
                "named pipe",
            ),
        ];
        for (name, plant, word) in kinds {
            let tree = dir.path().join(name).join("lib/modules/6.1.0-mine");
            std::fs::create_dir_all(&tree).unwrap();
            std::fs::write(tree.join("modules.order"), "").unwrap();
            plant(&outside, &tree);
            let cache = Cache::new(dir.path().join("cache"));
            let src = KernelSource::Local { image: image.clone(), modules: Some(tree.clone()) };
            let err = resolve_kernel(&cache, &src).expect_err(name).to_string();
            assert!(err.contains(word), "{name}: {err}");
            assert!(err.contains(&tree.display().to_string()), "{name}: names no path: {err}");
            assert!(!err.contains("CANARY"), "{name}: {err}");
        }
    }

    #[test]
    fn module_names_fold_suffixes() {
        assert_eq!(module_name("kernel/a/virtio-blk.ko.xz"), "virtio_blk");
        assert_eq!(module_file_name("kernel/a/virtio_blk.ko.xz"), "virtio_blk.ko");
    }
}
