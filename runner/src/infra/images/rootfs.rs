//! Building the shared root filesystem image from a recipe (`images/rootfs/<name>.yaml`).
//!
//! mmdebstrap → overlay copied in → `mkfs.ext4 -d` (no mount, no loop device), plus the
//! initramfs base archive (busybox from the same rootfs and `images/initramfs/init`).
//! mmdebstrap writes a tarball and the image is made from it, so the same build works
//! as root (`--mode=root`) and as an ordinary user (`--mode=unshare`, then the image
//! is made in a user namespace mapping the rootfs's owners onto subordinate ids: see
//! [`crate::infra::host`]).
//! Cached under `rootfs/<sha256 of recipe, overlay files and init>`.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::catalog::MAX_OVERLAY_FILE_BYTES;
use super::initramfs::{write_archive, Member};
use super::{run_tool, Cache, CacheOutcome, CancelFlag, Catalog, ImageError, RootfsRecipe};
use crate::infra::hash::sha256_hex;
use crate::schema::DebianPackage;

/// Bumped when the way we build a rootfs changes, so old cache entries are not reused.
/// v2: mmdebstrap writes a tarball, unpacked and turned into the image (as an
/// ordinary user in a user namespace, see [`crate::infra::host`]).
const ROOTFS_FORMAT: &str = "vmrepro-rootfs-v2";

/// The initramfs's init script, in the images folder.
const INIT: &str = "initramfs/init";

/// A built rootfs.
#[derive(Debug, Clone)]
pub struct RootfsArtifact {
    /// Recipe name, with its extra packages (`bookworm-nfs+fio`, see [`RootfsRequest::id`]).
    pub name: String,
    /// The ext4 image (read-only base of every VM's overlay).
    pub image: PathBuf,
    /// The initramfs base archive (cpio newc).
    pub initramfs_base: PathBuf,
    /// Cache key.
    pub key: String,
    /// The shared lock that keeps `vmrepro images gc` from removing the entry while
    /// this artefact (or a clone) exists.
    pub hold: std::sync::Arc<super::cache::EntryHold>,
}

/// A rootfs to resolve: a recipe, plus packages a suite asks for on top of it (each
/// set of extra packages is its own cache entry).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RootfsRequest {
    /// Recipe name (`images/rootfs/<recipe>.yaml`).
    pub recipe: String,
    /// Extra Debian packages, sorted and without duplicates (`name` or `name/suite`).
    pub packages: Vec<DebianPackage>,
}

impl RootfsRequest {
    /// The recipe with `packages` on top (sorted and deduplicated here).
    pub fn new(recipe: &str, packages: &[DebianPackage]) -> RootfsRequest {
        let mut packages = packages.to_vec();
        packages.sort();
        packages.dedup();
        RootfsRequest { recipe: recipe.to_string(), packages }
    }

    /// Its name in progress lines, records and maps: `bookworm-nfs`, or
    /// `bookworm-nfs+fio+iperf3`.
    pub fn id(&self) -> String {
        rootfs_id(&self.recipe, &self.packages)
    }
}

/// The name of recipe `recipe` with extra `packages` (as given, e.g. read back from a
/// plan.json): `bookworm-nfs`, or `bookworm-nfs+fio+iperf3`.
pub fn rootfs_id(recipe: &str, packages: &[impl AsRef<str>]) -> String {
    std::iter::once(recipe).chain(packages.iter().map(AsRef::as_ref)).collect::<Vec<_>>().join("+")
}

/// The cache key of a recipe with extra packages: the recipe's inputs and the packages
/// (none: the plain recipe's key).
pub fn rootfs_key_with(catalog: &Catalog, request: &RootfsRequest) -> Result<String, ImageError> {
    let name = request.recipe.as_str();
    let (recipe, text) = catalog.rootfs.get(name).ok_or_else(|| ImageError::Recipe {
        path: catalog.dir.join("rootfs").join(format!("{name}.yaml")),
        message: "no such rootfs recipe".into(),
    })?;
    let mut material = format!("{ROOTFS_FORMAT}\n{text}\n").into_bytes();
    // Through the confined layer: a link, pipe or hard link in the overlay is refused
    // here, before the build copies the overlay into the rootfs.
    let overlay = format!("rootfs/{}", recipe.overlay.display());
    for (rel, data) in catalog.read_tree(&overlay, MAX_OVERLAY_FILE_BYTES)? {
        material.extend_from_slice(rel.as_bytes());
        material.extend_from_slice(&data);
    }
    material.extend_from_slice(&catalog.read(INIT, MAX_OVERLAY_FILE_BYTES)?);
    if !request.packages.is_empty() {
        let names: Vec<&str> = request.packages.iter().map(DebianPackage::as_str).collect();
        material.extend_from_slice(format!("\nextra packages: {}\n", names.join(",")).as_bytes());
    }
    Ok(sha256_hex(&material))
}

/// Returns the rootfs `name`, building it if the cache lacks it (mmdebstrap from the
/// Debian archive the host's apt uses, see [`super::debian::archive_url`]).
///
/// Errors: [`ImageError`] naming the tool or file that failed.
pub fn resolve_rootfs(
    cache: &Cache,
    catalog: &Catalog,
    request: &RootfsRequest,
) -> Result<(RootfsArtifact, CacheOutcome), ImageError> {
    let key = rootfs_key_with(catalog, request)?;
    let (recipe, _) = &catalog.rootfs[&request.recipe];
    let (dir, outcome, hold) = cache
        .get_or_build_held("rootfs", &key, |tmp| build(catalog, recipe, &request.packages, tmp, cache.cancel_flag()))?;
    let art = RootfsArtifact {
        name: request.id(),
        image: dir.join("rootfs.ext4"),
        initramfs_base: dir.join("initramfs-base.cpio"),
        key,
        hold: std::sync::Arc::new(hold),
    };
    Ok((art, outcome))
}

/// Turns mmdebstrap's tarball into the ext4 image, run by `sh`: as root, or, for an
/// ordinary user, as root of a user namespace that maps root to the user and every
/// other id the rootfs uses onto the user's subordinate ids (so the tarball's owners
/// are kept, the build folder is writable, and the staging folder can be removed;
/// `mmdebstrap --unshare-helper` maps root to a subordinate id, which can't write into
/// the user's folders). Unpacks
/// the tarball without `/dev` (device nodes can't be made there; the guest's `/dev`
/// is a devtmpfs anyway), copies the overlay on top, copies busybox out for the
/// initramfs, and makes the image with `mkfs.ext4 -d`. Paths come in the environment,
/// so nothing is quoted.
const TAR_TO_EXT4: &str = r#"set -eu
stage="$VMREPRO_OUT/stage"
mkdir "$stage"
trap 'rm -rf "$stage"' EXIT
tar -C "$stage" --numeric-owner --exclude='./dev/*' -xpf "$VMREPRO_TAR"
cd "$VMREPRO_OVERLAY"
# File by file, through the rootfs's own (relative) /sbin -> usr/sbin symlinks.
find . -type d -exec mkdir -p "$stage/{}" \;
find . -type f -exec cp --preserve=mode {} "$stage/{}" \;
mkdir -p "$stage/usr/lib/modules"
cp "$stage/usr/bin/busybox" "$VMREPRO_OUT/busybox"
mkfs.ext4 -q -F -L vmrepro-root -E root_owner=0:0 -d "$stage" "$VMREPRO_IMAGE"
"#;

fn build(
    catalog: &Catalog,
    recipe: &RootfsRecipe,
    extra: &[DebianPackage],
    out: &Path,
    cancel: &CancelFlag,
) -> Result<(), ImageError> {
    let mirror = super::debian::archive_url()?;
    // As root, mmdebstrap chroots; as an ordinary user it works in a user namespace
    // that maps the rootfs's users onto our subordinate ids (checked first, so a
    // missing setup is one message that says what to do, not mmdebstrap's).
    let rootless = !crate::infra::host::is_root();
    let subids = if rootless {
        crate::infra::host::check_userns()?;
        crate::infra::host::check_subids()?
    } else {
        None
    };
    let tar = out.join("root.tar");
    let log = out.join("mmdebstrap.log");
    let mmdebstrap = || {
        let mut mm = Command::new("mmdebstrap");
        mm.arg(format!("--variant={}", recipe.variant));
        mm.args(include_args(recipe.packages.iter().chain(extra)));
        mm.arg(if rootless { "--mode=unshare" } else { "--mode=root" })
            .arg(&recipe.distribution)
            .arg(&tar)
            .arg(format!("deb {mirror} {} main", recipe.distribution));
        for suite in &recipe.extra_suites {
            mm.arg(format!("deb {mirror} {suite} main"));
        }
        // A failed attempt may leave part of the tarball.
        let _ = std::fs::remove_file(&tar);
        run_tool(&mut mm, "mmdebstrap", Some(&log), cancel)
    };
    // The archive's name failing to resolve for a few seconds fails apt at once.
    super::tool::retry_on_network(
        &format!("building rootfs {}", recipe.distribution),
        &super::tool::NETWORK_RETRY_WAITS,
        Some(cancel),
        ImageError::network_failure,
        mmdebstrap,
    )?;

    let image = out.join("rootfs.ext4");
    let f = std::fs::File::create(&image).map_err(ImageError::io("creating image", &image))?;
    f.set_len(recipe.size_mib * 1024 * 1024).map_err(ImageError::io("sizing image", &image))?;
    drop(f);
    let script = out.join("tar-to-ext4.sh");
    std::fs::write(&script, TAR_TO_EXT4).map_err(ImageError::io("writing", &script))?;
    let overlay = catalog.dir.join("rootfs").join(&recipe.overlay);
    let overlay = std::fs::canonicalize(&overlay).map_err(ImageError::io("finding the rootfs overlay", &overlay))?;
    let mut helper = match subids {
        // Root 0 → us; 1..65535 → our subordinate ids (util-linux >= 2.38, newuidmap).
        Some((uid, gid)) => {
            let mut u = Command::new("unshare");
            u.args(["--user", "--map-root-user"])
                .arg(format!("--map-users={uid},1,{}", crate::infra::host::SUBID_COUNT - 1))
                .arg(format!("--map-groups={gid},1,{}", crate::infra::host::SUBID_COUNT - 1))
                .arg("sh");
            u
        }
        None => Command::new("sh"),
    };
    helper
        .arg(&script)
        .env("VMREPRO_TAR", &tar)
        .env("VMREPRO_OVERLAY", &overlay)
        .env("VMREPRO_OUT", out)
        .env("VMREPRO_IMAGE", &image);
    run_tool(&mut helper, "rootfs tarball → ext4 image", Some(&log), cancel)?;
    for f in [&script, &tar] {
        std::fs::remove_file(f).map_err(ImageError::io("removing", f))?;
    }

    let busybox_path = out.join("busybox");
    let busybox = std::fs::read(&busybox_path)
        .map_err(ImageError::io("reading busybox from the rootfs (is busybox-static in the recipe?)", &busybox_path))?;
    std::fs::remove_file(&busybox_path).map_err(ImageError::io("removing", &busybox_path))?;
    let init = catalog.read(INIT, MAX_OVERLAY_FILE_BYTES)?;
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
    Ok(())
}

/// mmdebstrap's arguments that install `packages`: apt told to take every name
/// literally (`APT::Cmd::Pattern-Only`: no regex or glob fallback for a name no package
/// has), then one `--include=` per package, so no name is split or read as a path or a
/// pattern (see [`DebianPackage`]).
fn include_args<'a>(packages: impl Iterator<Item = &'a DebianPackage>) -> Vec<String> {
    std::iter::once("--aptopt=APT::Cmd::Pattern-Only \"true\"".to_string())
        .chain(packages.map(|p| format!("--include={p}")))
        .collect()
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_include_per_package_and_literal_names() {
        let p = |s: &str| DebianPackage::parse(s).unwrap();
        let pkgs = [p("nfs-common"), p("libstdc++6"), p("fio/bookworm-backports")];
        assert_eq!(
            include_args(pkgs.iter()),
            [
                "--aptopt=APT::Cmd::Pattern-Only \"true\"",
                "--include=nfs-common",
                "--include=libstdc++6",
                "--include=fio/bookworm-backports"
            ]
        );
    }
}
