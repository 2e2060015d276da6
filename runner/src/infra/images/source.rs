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
        m.extend(inputs_key_bytes(&self.fragments, &self.patches)?);
        Ok(sha256_hex(&m))
    }

    /// `-vmrepro`, plus `-<first patch's file stem>` (at most 40 characters) when
    /// patched; appended to the release by `make LOCALVERSION=…`.
    pub fn local_version(&self) -> String {
        local_version(&self.patches)
    }

    /// Short description for progress and results.
    pub fn label(&self) -> String {
        let mut s = format!("kernel {} from source", self.source.package);
        if !self.patches.is_empty() {
            s.push_str(&format!(" + {}", file_names(&self.patches)));
        }
        s
    }

    /// Builds the kernel into `out` (an empty folder): `vmlinuz`, `release`, `config`,
    /// `build.log`, `initramfs-modules.cpio` (empty module list).
    ///
    /// Holds the cache's kernel build lock ([`super::buildlock`]) throughout, so source
    /// kernels build one at a time and a later one reuses the earlier one's ccache
    /// objects; the wait, if any, is noted in `build.log`.
    pub fn build(&self, cache: &Cache, out: &Path) -> Result<(), ImageError> {
        let log = out.join("build.log");
        let _build_lock = build_lock(cache, &log)?;
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
        let fragments = copy_inputs(&inputs, "fragment", &self.fragments)?;
        let patches = copy_inputs(&inputs, "patch", &self.patches)?;
        let ccache = ccache_dir(cache);
        let writable: Vec<&Path> = std::iter::once(out).chain(ccache.as_deref()).collect();
        Kbuild {
            cache,
            src: &tree,
            obj: None,
            writable: &writable,
            log: &log,
            label: self.label(),
            origin: &self.source.package,
            local_version: self.local_version(),
        }
        .build(&patches, &self.patches, &fragments, &self.fragments, out)?;
        std::fs::remove_dir_all(&stage).map_err(ImageError::io("removing source tree", &stage))?;
        std::fs::remove_dir_all(&inputs).map_err(ImageError::io("removing", &inputs))?;
        Ok(())
    }
}

/// One kernel build with kbuild, in the sandbox: the part a Debian source package and a
/// git tree ([`super::tree`]) share once their source is in place.
pub(super) struct Kbuild<'a> {
    /// The cache (its compiler cache and cancel flag).
    pub cache: &'a Cache,
    /// The kernel source tree (read; written only by the patches).
    pub src: &'a Path,
    /// The object folder (`make O=…`), or `None` to build in `src`.
    pub obj: Option<&'a Path>,
    /// The only folders the sandbox can write (the source or object folder must be
    /// among them, or under one of them).
    pub writable: &'a [&'a Path],
    /// The build log every step appends to.
    pub log: &'a Path,
    /// The kernel's label, for error messages.
    pub label: String,
    /// What the source is, for "option doesn't exist in …" (a package name, a commit).
    pub origin: &'a str,
    /// `make LOCALVERSION=…`.
    pub local_version: String,
}

impl Kbuild<'_> {
    /// Applies `patches` (copies, with the suite's paths `given_patches` for messages),
    /// configures `defconfig` + `kvm_guest.config` + `fragments` (`olddefconfig`), checks
    /// that every `=y` stuck and that the guest's needs are built in, builds `bzImage`,
    /// and writes into `out`: `vmlinuz`, `release`, `config`, `initramfs-modules.cpio`
    /// (empty module list).
    ///
    /// Errors: [`ImageError::Tool`] for a step that fails (its log tail),
    /// [`ImageError::Kernel`] for a fragment line that did not stick or a need missing.
    pub fn build(
        &self,
        patches: &[PathBuf],
        given_patches: &[PathBuf],
        fragments: &[PathBuf],
        given_fragments: &[PathBuf],
        out: &Path,
    ) -> Result<(), ImageError> {
        let note = |text: &str| log_note(self.log, text);
        let sandboxed = |cmd: &mut Command| -> Result<Command, ImageError> {
            cmd.current_dir(self.src).env("KBUILD_BUILD_USER", "vmrepro").env("KBUILD_BUILD_HOST", "vmrepro");
            super::sandbox::sandboxed(cmd, self.writable)
        };
        let step = |cmd: &mut Command, what: &str| -> Result<(), ImageError> {
            note(what);
            let t0 = std::time::Instant::now();
            run_tool(&mut sandboxed(cmd)?, what, Some(self.log), self.cache.cancel_flag())?;
            note(&format!("{what}: {:.1}s", t0.elapsed().as_secs_f64()));
            Ok(())
        };
        for (p, given) in patches.iter().zip(given_patches) {
            step(
                Command::new("patch").args(["-p1", "--forward", "--batch", "-i"]).arg(p),
                &format!("patch -p1 < {}", given.display()),
            )?;
        }
        // `uname -r` tells the builds apart: 6.1.176-vmrepro, 6.1.176-vmrepro-<patch>.
        let make = || {
            let mut m = make_cmd(self.cache);
            m.arg(format!("LOCALVERSION={}", self.local_version));
            if let Some(obj) = self.obj {
                m.arg(format!("O={}", obj.display()));
            }
            m
        };
        let objdir = self.obj.unwrap_or(self.src);
        let dot_config = objdir.join(".config");
        step(make().arg("defconfig"), "make defconfig")?;
        step(make().arg("kvm_guest.config"), "make kvm_guest.config")?;
        let mut merge = Command::new("scripts/kconfig/merge_config.sh");
        if let Some(obj) = self.obj {
            merge.arg("-O").arg(obj);
        }
        merge.arg("-m").arg(&dot_config).args(fragments);
        step(&mut merge, "merge_config.sh")?;
        step(make().arg("olddefconfig"), "make olddefconfig")?;
        // Every `=y` a fragment asks for must have stuck (a dependency may veto it).
        let config = std::fs::read_to_string(&dot_config).map_err(ImageError::io("reading .config", objdir))?;
        for (f, given) in fragments.iter().zip(given_fragments) {
            let text = std::fs::read_to_string(f).map_err(ImageError::io("reading fragment", given))?;
            for line in text.lines().map(str::trim).filter(|l| l.starts_with("CONFIG_") && l.ends_with("=y")) {
                if !config.lines().any(|c| c == line) {
                    return Err(ImageError::Kernel(format!("{}: {line} did not stick after olddefconfig (a dependency is missing or the option doesn't exist in {})", given.display(), self.origin)));
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
                &format!("{} (its .config after olddefconfig; no modules are built)", self.label),
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
            self.cache.cancel_flag(),
        )?;
        std::fs::write(out.join("release"), format!("{}\n", release.trim())).map_err(ImageError::io("writing", out))?;
        std::fs::copy(objdir.join("arch/x86/boot/bzImage"), out.join("vmlinuz"))
            .map_err(ImageError::io("copying bzImage", objdir))?;
        std::fs::write(out.join("config"), &config).map_err(ImageError::io("writing config", out))?;
        let cpio = out.join("initramfs-modules.cpio");
        write_archive(
            &cpio,
            &[
                Member::Dir { name: "modules".into() },
                Member::File { name: "boot-modules".into(), mode: 0o644, data: b"\n".to_vec() },
            ],
        )
        .map_err(ImageError::io("writing initramfs", &cpio))
    }
}

/// Appends `### text` to the build log `log` (best effort: a log that can't be written
/// loses the line, not the build).
pub(super) fn log_note(log: &Path, text: &str) {
    let _ = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .and_then(|mut f| std::io::Write::write_all(&mut f, format!("### {text}\n").as_bytes()));
}

/// Takes the cache's kernel build lock ([`super::buildlock`]), noting in `log` how long
/// it waited.
///
/// Errors: as [`super::buildlock::acquire`] (cancelled while waiting).
pub(super) fn build_lock(cache: &Cache, log: &Path) -> Result<super::buildlock::BuildLock, ImageError> {
    let waited = std::time::Instant::now();
    let lock = super::buildlock::acquire(cache.root(), cache.cancel_flag(), || {
        log_note(log, "waiting for another kernel build to finish (kernel-build.lock)")
    })?;
    log_note(log, &format!("build lock taken after {:.1}s", waited.elapsed().as_secs_f64()));
    Ok(lock)
}

/// Copies the suite's `files` (`what`: `"fragment"` or `"patch"`) into `inputs`
/// (created) as `<what>-<index>-<name>`, read as [`read_input`] does; returns the copies.
///
/// Errors: [`ImageError::File`] for a file that is a link, a pipe, a hard link or over
/// its cap; [`ImageError::Io`] when a copy can't be written.
pub(super) fn copy_inputs(inputs: &Path, what: &str, files: &[PathBuf]) -> Result<Vec<PathBuf>, ImageError> {
    std::fs::create_dir_all(inputs).map_err(ImageError::io("creating", inputs))?;
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
}

/// The key bytes of the suite's fragments and patches, in order (each file's bytes after
/// a `fragment`/`patch` line), then the compiler's version: what a kernel build's cache
/// key covers besides its source.
///
/// Errors: as [`read_input`].
pub(super) fn inputs_key_bytes(fragments: &[PathBuf], patches: &[PathBuf]) -> Result<Vec<u8>, ImageError> {
    let mut m = Vec::new();
    for (what, files) in [("fragment", fragments), ("patch", patches)] {
        for f in files {
            m.extend(format!("{what}\n").into_bytes());
            m.extend(read_input(what, f)?);
        }
    }
    m.extend(Command::new("gcc").arg("--version").output().map(|o| o.stdout).unwrap_or_default());
    Ok(m)
}

/// `-vmrepro`, plus `-<first patch's file stem>` (at most 40 characters) when
/// patched; appended to the release by `make LOCALVERSION=…`.
pub(super) fn local_version(patches: &[PathBuf]) -> String {
    let mut v = String::from("-vmrepro");
    if let Some(p) = patches.first() {
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

/// `a.patch+b.patch`: the file names of `files`, joined.
pub(super) fn file_names(files: &[PathBuf]) -> String {
    files.iter().map(|p| p.file_name().unwrap_or_default().to_string_lossy().into_owned()).collect::<Vec<_>>().join("+")
}

/// The compiler cache folder, `<cache>/ccache` (created), when ccache is installed.
pub(super) fn ccache_dir(cache: &Cache) -> Option<PathBuf> {
    super::sandbox::on_path("ccache").then(|| {
        let dir = cache.root().join("ccache");
        let _ = std::fs::create_dir_all(&dir);
        dir
    })
}

/// A `make` command; with `CC="ccache gcc"` (cache in [`ccache_dir`]) when ccache is
/// installed.
pub(super) fn make_cmd(cache: &Cache) -> Command {
    let mut cmd = Command::new("make");
    if let Some(dir) = ccache_dir(cache) {
        cmd.args(["CC=ccache gcc", "HOSTCC=ccache gcc"])
            .env("CCACHE_DIR", dir)
            .env("CCACHE_NOHASHDIR", "1")
            .env("CCACHE_MAXSIZE", "5G");
    }
    cmd
}
