//! Building the shared root filesystem image from a recipe (`images/rootfs/<name>.yaml`).
//!
//! mmdebstrap → overlay copied in → `mkfs.ext4 -d` (no mount, no loop device), plus the
//! initramfs base archive (busybox from the same rootfs and `images/initramfs/init`).
//! Cached under `rootfs/<sha256 of recipe, overlay files and init>`.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::initramfs::{write_archive, Member};
use super::{run_tool, Cache, CacheOutcome, CancelFlag, Catalog, ImageError, RootfsRecipe};
use crate::infra::sha256_hex;

/// Bumped when the way we build a rootfs changes, so old cache entries are not reused.
const ROOTFS_FORMAT: &str = "vmrepro-rootfs-v1";

/// A built rootfs.
#[derive(Debug, Clone)]
pub struct RootfsArtifact {
    /// Recipe name.
    pub name: String,
    /// Cache entry folder.
    pub dir: PathBuf,
    /// The ext4 image (read-only base of every VM's overlay).
    pub image: PathBuf,
    /// The initramfs base archive (cpio newc).
    pub initramfs_base: PathBuf,
    /// Cache key.
    pub key: String,
}

/// The cache key of a rootfs recipe: every input's bytes.
pub fn rootfs_key(catalog: &Catalog, name: &str) -> Result<String, ImageError> {
    let (recipe, text) = catalog.rootfs.get(name).ok_or_else(|| ImageError::Recipe {
        path: catalog.dir.join("rootfs").join(format!("{name}.yaml")),
        message: "no such rootfs recipe".into(),
    })?;
    let mut material = format!("{ROOTFS_FORMAT}\n{text}\n").into_bytes();
    let overlay = catalog.dir.join("rootfs").join(&recipe.overlay);
    for f in walk_files(&overlay)? {
        let rel = f.strip_prefix(&overlay).unwrap_or(&f);
        material.extend_from_slice(rel.to_string_lossy().as_bytes());
        material.extend_from_slice(&std::fs::read(&f).map_err(ImageError::io("reading overlay", &f))?);
    }
    let init = catalog.dir.join("initramfs/init");
    material.extend_from_slice(&std::fs::read(&init).map_err(ImageError::io("reading initramfs init", &init))?);
    Ok(sha256_hex(&material))
}

/// Returns the rootfs `name`, building it if the cache lacks it (mmdebstrap from the
/// Debian archive the host's apt uses, see [`super::debian::archive_url`]).
///
/// Errors: [`ImageError`] naming the tool or file that failed.
pub fn resolve_rootfs(
    cache: &Cache,
    catalog: &Catalog,
    name: &str,
) -> Result<(RootfsArtifact, CacheOutcome), ImageError> {
    let key = rootfs_key(catalog, name)?;
    let (recipe, _) = &catalog.rootfs[name];
    let (dir, outcome) = cache.get_or_build("rootfs", &key, |tmp| build(catalog, recipe, tmp, cache.cancel_flag()))?;
    let art = RootfsArtifact {
        name: name.to_string(),
        image: dir.join("rootfs.ext4"),
        initramfs_base: dir.join("initramfs-base.cpio"),
        dir,
        key,
    };
    Ok((art, outcome))
}

fn build(catalog: &Catalog, recipe: &RootfsRecipe, out: &Path, cancel: &CancelFlag) -> Result<(), ImageError> {
    let mirror = super::debian::archive_url()?;
    let root = out.join("root");
    let mut mm = Command::new("mmdebstrap");
    mm.arg(format!("--variant={}", recipe.variant))
        .arg(format!("--include={}", recipe.packages.join(",")))
        .arg("--mode=auto")
        .arg(&recipe.distribution)
        .arg(&root)
        .arg(format!("deb {mirror} {} main", recipe.distribution));
    for suite in &recipe.extra_suites {
        mm.arg(format!("deb {mirror} {suite} main"));
    }
    run_tool(&mut mm, "mmdebstrap", Some(&out.join("mmdebstrap.log")), cancel)?;

    let overlay = catalog.dir.join("rootfs").join(&recipe.overlay);
    for f in walk_files(&overlay)? {
        let rel = f.strip_prefix(&overlay).unwrap_or(&f);
        let dest = root.join(rel);
        if let Some(parent) = dest.parent() {
            std::fs::create_dir_all(parent).map_err(ImageError::io("creating overlay folder", parent))?;
        }
        std::fs::copy(&f, &dest).map_err(ImageError::io("copying overlay file", &dest))?;
    }
    // The guests' modules disk is mounted here by the initramfs.
    std::fs::create_dir_all(root.join("usr/lib/modules"))
        .map_err(ImageError::io("creating modules mount point", &root))?;

    let busybox_path = root.join("usr/bin/busybox");
    let busybox = std::fs::read(&busybox_path)
        .map_err(ImageError::io("reading busybox from the rootfs (is busybox-static in the recipe?)", &busybox_path))?;
    let init_path = catalog.dir.join("initramfs/init");
    let init = std::fs::read(&init_path).map_err(ImageError::io("reading initramfs init", &init_path))?;
    let members = vec![
        Member::Dir { name: "bin".into() },
        Member::Dir { name: "dev".into() },
        Member::Dir { name: "proc".into() },
        Member::Dir { name: "sys".into() },
        Member::Dir { name: "newroot".into() },
        Member::Dir { name: "modules".into() },
        Member::CharDev { name: "dev/console".into(), major: 5, minor: 1 },
        Member::File { name: "bin/busybox".into(), mode: 0o755, data: busybox },
        Member::File { name: "init".into(), mode: 0o755, data: init },
    ];
    let cpio = out.join("initramfs-base.cpio");
    write_archive(&cpio, &members).map_err(ImageError::io("writing initramfs", &cpio))?;

    let image = out.join("rootfs.ext4");
    make_ext4(&root, &image, recipe.size_mib, "vmrepro-root", cancel)?;
    std::fs::remove_dir_all(&root).map_err(ImageError::io("removing rootfs staging folder", &root))?;
    Ok(())
}

/// Creates an ext4 image of `size_mib` MiB at `image` holding the tree `src`
/// (`mkfs.ext4 -d`, no mount needed).
pub(crate) fn make_ext4(
    src: &Path,
    image: &Path,
    size_mib: u64,
    label: &str,
    cancel: &CancelFlag,
) -> Result<(), ImageError> {
    let f = std::fs::File::create(image).map_err(ImageError::io("creating image", image))?;
    f.set_len(size_mib * 1024 * 1024).map_err(ImageError::io("sizing image", image))?;
    drop(f);
    let mut mkfs = Command::new("mkfs.ext4");
    mkfs.args(["-q", "-F", "-L", label, "-E", "root_owner=0:0", "-d"]).arg(src).arg(image);
    run_tool(&mut mkfs, "mkfs.ext4", None, cancel)?;
    Ok(())
}

/// Every regular file below `dir`, sorted (empty if `dir` doesn't exist).
pub(crate) fn walk_files(dir: &Path) -> Result<Vec<PathBuf>, ImageError> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else { continue };
        for e in rd {
            let e = e.map_err(ImageError::io("listing", &d))?;
            let p = e.path();
            let ft = e.file_type().map_err(ImageError::io("listing", &p))?;
            if ft.is_dir() {
                stack.push(p);
            } else if ft.is_file() {
                out.push(p);
            }
        }
    }
    out.sort();
    Ok(out)
}
