//! Kernels built from source: a Debian `linux-source-X.Y` package, a base config
//! (`defconfig` + `kvm_guest.config`), config fragments and patch files from the suite.
//!
//! Built once, cached under `kernel/<sha256 of every input>` with the build log
//! (`build.log`) and the final `.config` (`config`) kept in the entry. Everything the
//! guest needs must be built in (`CONFIG_MODULES` may be off): no modules disk is made.
//! Every command that runs code from the tree runs in the sandbox of [`super::sandbox`]
//! (no network, writes only to the build folder and the compiler cache); the suite's
//! fragments and patches are copied into the build folder first.
//! When `ccache` is installed, compiler results are kept in `<cache>/ccache`, so a
//! second kernel that differs by one patch rebuilds in a fraction of the time.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::initramfs::{write_archive, Member};
use super::{run_tool, Cache, ImageError, PinnedSource};
use crate::infra::hash::sha256_hex;

/// Reads the suite's fragment or patch `f` (`what`: `"fragment"` or `"patch"`): not a
/// link, a pipe or a hard link, at most its cap (the checks validation made, again at
/// the read that counts).
///
/// Errors: [`ImageError::File`].
fn read_input(what: &str, f: &Path) -> Result<Vec<u8>, ImageError> {
    use crate::suite::validate::kernel::{MAX_FRAGMENT_BYTES, MAX_PATCH_BYTES};
    let limit = if what == "patch" { MAX_PATCH_BYTES } else { MAX_FRAGMENT_BYTES };
    Ok(crate::path_io::read_named(f, limit)?)
}

/// Bumped when the way we build kernels changes.
const SOURCE_FORMAT: &str = "vmrepro-source-kernel-v2";

/// A kernel to build from source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceKernel {
    /// The pinned source package.
    pub source: PinnedSource,
    /// Config fragments merged over `defconfig` + `kvm_guest.config`, in order.
    pub fragments: Vec<PathBuf>,
    /// Patches applied with `patch -p1`, in order.
    pub patches: Vec<PathBuf>,
}

impl SourceKernel {
    /// The cache key: source package, fragments' and patches' bytes, compiler version.
    pub fn key(&self) -> Result<String, ImageError> {
        let mut m = format!("{SOURCE_FORMAT}\n{}\n", self.source.sha256).into_bytes();
        for (what, files) in [("fragment", &self.fragments), ("patch", &self.patches)] {
            for f in files {
                m.extend(format!("{what}\n").into_bytes());
                m.extend(read_input(what, f)?);
            }
        }
        let cc = Command::new("gcc").arg("--version").output().map(|o| o.stdout).unwrap_or_default();
        m.extend(cc);
        Ok(sha256_hex(&m))
    }

    /// `-vmrepro`, plus `-<first patch's file stem>` (at most 40 characters) when
    /// patched; appended to the release by `make LOCALVERSION=…`.
    pub fn local_version(&self) -> String {
        let mut v = String::from("-vmrepro");
        if let Some(p) = self.patches.first() {
            let stem: String = p
                .file_stem()
                .unwrap_or_default()
                .to_string_lossy()
                .chars()
                .filter(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '.')
                .take(40)
                .collect();
            v.push('-');
            v.push_str(&stem);
        }
        v
    }

    /// Short description for progress and results.
    pub fn label(&self) -> String {
        let names = |v: &[PathBuf]| {
            v.iter()
                .map(|p| p.file_name().unwrap_or_default().to_string_lossy().into_owned())
                .collect::<Vec<_>>()
                .join("+")
        };
        let mut s = format!("kernel {} from source", self.source.package);
        if !self.patches.is_empty() {
            s.push_str(&format!(" + {}", names(&self.patches)));
        }
        s
    }

    /// Builds the kernel into `out` (an empty folder): `vmlinuz`, `release`, `config`,
    /// `build.log`, `initramfs-modules.cpio` (empty module list).
    ///
    /// Holds the cache's kernel build lock ([`super::buildlock`]) throughout, so source
    /// kernels build one at a time and a later one reuses the earlier one's ccache
    /// objects; the wait, if any, is noted in `build.log`.
    // Over 100 lines, kept whole for now: only source-kernel builds (the VM tier) run
    // it, so a split could not be checked by `cargo fast`; it already reads as a list
    // of named `step(…)` calls (defconfig, fragments, patches, bzImage, initramfs).
    pub fn build(&self, cache: &Cache, out: &Path) -> Result<(), ImageError> {
        let log = out.join("build.log");
        let note = |text: &str| {
            let _ = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&log)
                .and_then(|mut f| std::io::Write::write_all(&mut f, format!("### {text}\n").as_bytes()));
        };
        let waited = std::time::Instant::now();
        let _build_lock = super::buildlock::acquire(cache.root(), cache.cancel_flag(), || {
            note("waiting for another kernel build to finish (kernel-build.lock)")
        })?;
        note(&format!("build lock taken after {:.1}s", waited.elapsed().as_secs_f64()));
        // Held until the build ends, so that gc doesn't remove the package meanwhile.
        let (deb, _, _deb_hold) =
            super::debian::fetch_deb_held(cache, &self.source.filename, self.source.size, &self.source.sha256)?;
        let stage = out.join("src");
        run_tool(Command::new("dpkg-deb").arg("-x").arg(&deb).arg(&stage), "dpkg-deb -x", None, cache.cancel_flag())?;
        let usr_src = stage.join("usr/src");
        let tarball = std::fs::read_dir(&usr_src)
            .map_err(ImageError::io("listing the source package", &usr_src))?
            .flatten()
            .map(|e| e.path())
            .find(|p| p.to_string_lossy().ends_with(".tar.xz"))
            .ok_or_else(|| ImageError::Kernel(format!("{}: no usr/src/*.tar.xz", deb.display())))?;
        run_tool(
            Command::new("tar").arg("-xf").arg(&tarball).arg("-C").arg(&usr_src),
            "tar -xf (kernel source)",
            None,
            cache.cancel_flag(),
        )?;
        std::fs::remove_file(&tarball).map_err(ImageError::io("removing tarball", &tarball))?;
        let tree = std::fs::read_dir(&usr_src)
            .map_err(ImageError::io("listing", &usr_src))?
            .flatten()
            .map(|e| e.path())
            .find(|p| p.is_dir() && p.join("Makefile").is_file())
            .ok_or_else(|| ImageError::Kernel("the source package holds no kernel tree".into()))?;
        // The suite's fragments and patches are copied into the build's folder, the
        // only host folder (with the compiler cache) the sandbox can see or write.
        let inputs = out.join("inputs");
        std::fs::create_dir_all(&inputs).map_err(ImageError::io("creating", &inputs))?;
        let copy_in = |what: &str, files: &[PathBuf]| -> Result<Vec<PathBuf>, ImageError> {
            files
                .iter()
                .enumerate()
                .map(|(i, f)| {
                    let name = f.file_name().unwrap_or_default().to_string_lossy().into_owned();
                    let dest = inputs.join(format!("{what}-{i:02}-{name}"));
                    let data = read_input(what, f)?;
                    std::fs::write(&dest, data).map_err(ImageError::io("copying into the build", f))?;
                    Ok(dest)
                })
                .collect()
        };
        let fragments = copy_in("fragment", &self.fragments)?;
        let patches = copy_in("patch", &self.patches)?;
        let ccache = ccache_dir(cache);
        let writable: Vec<&Path> = std::iter::once(out).chain(ccache.as_deref()).collect();
        let sandboxed = |cmd: &mut Command| -> Result<Command, ImageError> {
            cmd.current_dir(&tree).env("KBUILD_BUILD_USER", "vmrepro").env("KBUILD_BUILD_HOST", "vmrepro");
            super::sandbox::sandboxed(cmd, &writable)
        };
        let step = |cmd: &mut Command, what: &str| -> Result<(), ImageError> {
            note(what);
            run_tool(&mut sandboxed(cmd)?, what, Some(&log), cache.cancel_flag()).map(|_| ())
        };
        for (p, given) in patches.iter().zip(&self.patches) {
            step(
                Command::new("patch").args(["-p1", "--forward", "--batch", "-i"]).arg(p),
                &format!("patch -p1 < {}", given.display()),
            )?;
        }
        // `uname -r` tells the builds apart: 6.1.176-vmrepro, 6.1.176-vmrepro-<patch>.
        let local_version = self.local_version();
        let make = || {
            let mut m = make_cmd(cache);
            m.arg(format!("LOCALVERSION={local_version}"));
            m
        };
        step(make().arg("defconfig"), "make defconfig")?;
        step(make().arg("kvm_guest.config"), "make kvm_guest.config")?;
        let mut merge = Command::new("scripts/kconfig/merge_config.sh");
        merge.arg("-m").arg(".config").args(&fragments);
        step(&mut merge, "merge_config.sh")?;
        step(make().arg("olddefconfig"), "make olddefconfig")?;
        // Every `=y` a fragment asks for must have stuck (a dependency may veto it).
        let config = std::fs::read_to_string(tree.join(".config")).map_err(ImageError::io("reading .config", &tree))?;
        for (f, given) in fragments.iter().zip(&self.fragments) {
            let text = std::fs::read_to_string(f).map_err(ImageError::io("reading fragment", given))?;
            for line in text.lines().map(str::trim).filter(|l| l.starts_with("CONFIG_") && l.ends_with("=y")) {
                if !config.lines().any(|c| c == line) {
                    return Err(ImageError::Kernel(format!("{}: {line} did not stick after olddefconfig (a dependency is missing or the option doesn't exist in {})", given.display(), self.source.package)));
                }
            }
        }
        // Without modules, what a guest can't do without must be built in.
        let features = super::modules::KernelFeatures::from_config(&config);
        let missing: Vec<&super::modules::Need> = features
            .missing(super::modules::ROOT_DISK)
            .into_iter()
            .chain(features.missing(super::modules::GUEST_DEVICES))
            .collect();
        if !missing.is_empty() {
            return Err(ImageError::Kernel(super::modules::missing_message(
                &format!("{} (its .config after olddefconfig; no modules are built)", self.label()),
                &missing,
                "y",
            )));
        }
        let jobs = std::thread::available_parallelism().map_or(2, |n| n.get());
        step(make().arg(format!("-j{jobs}")).arg("bzImage"), "make bzImage")?;
        let release = run_tool(
            &mut sandboxed(make().args(["-s", "kernelrelease"]))?,
            "make kernelrelease",
            None,
            cache.cancel_flag(),
        )?;
        std::fs::write(out.join("release"), format!("{}\n", release.trim())).map_err(ImageError::io("writing", out))?;
        std::fs::copy(tree.join("arch/x86/boot/bzImage"), out.join("vmlinuz"))
            .map_err(ImageError::io("copying bzImage", &tree))?;
        std::fs::write(out.join("config"), &config).map_err(ImageError::io("writing config", out))?;
        let cpio = out.join("initramfs-modules.cpio");
        write_archive(
            &cpio,
            &[
                Member::Dir { name: "modules".into() },
                Member::File { name: "boot-modules".into(), mode: 0o644, data: b"\n".to_vec() },
            ],
        )
        .map_err(ImageError::io("writing initramfs", &cpio))?;
        std::fs::remove_dir_all(&stage).map_err(ImageError::io("removing source tree", &stage))?;
        std::fs::remove_dir_all(&inputs).map_err(ImageError::io("removing", &inputs))?;
        Ok(())
    }
}

/// The compiler cache folder, `<cache>/ccache` (created), when ccache is installed.
fn ccache_dir(cache: &Cache) -> Option<PathBuf> {
    super::sandbox::on_path("ccache").then(|| {
        let dir = cache.root().join("ccache");
        let _ = std::fs::create_dir_all(&dir);
        dir
    })
}

/// A `make` command; with `CC="ccache gcc"` (cache in [`ccache_dir`]) when ccache is
/// installed.
fn make_cmd(cache: &Cache) -> Command {
    let mut cmd = Command::new("make");
    if let Some(dir) = ccache_dir(cache) {
        cmd.args(["CC=ccache gcc", "HOSTCC=ccache gcc"])
            .env("CCACHE_DIR", dir)
            .env("CCACHE_NOHASHDIR", "1")
            .env("CCACHE_MAXSIZE", "5G");
    }
    cmd
}
