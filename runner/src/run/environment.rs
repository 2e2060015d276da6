//! `environment.json`: what a published report says about where and with what a run
//! ran, recorded while it runs so that `vmrepro report RUN_DIR` reads nothing but the
//! run folder.
//!
//! Recorded once the images are resolved (before any VM boots):
//!
//! - the host: `uname -r` (`/proc/sys/kernel/osrelease`), the CPU model (first `model
//!   name` of `/proc/cpuinfo`), the number of CPUs this process may use, and the first
//!   line of `qemu-system-x86_64 --version` (or `$VMREPRO_QEMU --version`);
//! - vmrepro's version (`Cargo.toml`) and the git commit it was built from (`build.rs`:
//!   `VMREPRO_GIT_COMMIT` at build time, else `git rev-parse HEAD`, `-dirty` when tracked
//!   files differed, else `unknown`);
//! - the suite file's path and SHA-256, the project folder (the parent of `images/`)
//!   and its git commit at run time (`-dirty` when the suite or `images/` differ);
//! - per VM, its kernel: a pinned Debian package (name, version, archive path, size,
//!   SHA-256), a source build (source package and SHA-256, each fragment and patch with
//!   its SHA-256, the SHA-256 of the final `.config`) or a local image (its SHA-256);
//! - per rootfs: the recipe file's SHA-256, the cache key (recipe, overlay and initramfs
//!   `/init` together) and the versions of the guest packages that matter to the
//!   measurements, read from the dpkg database **inside the rootfs image** with
//!   `debugfs -R 'cat /var/lib/dpkg/status'` (e2fsprogs; read-only, no VM needed, and
//!   it is the image every VM's overlay is based on).
//!
//! Host paths are kept here (the cache, the project); `vmrepro bundle` replaces them
//! with placeholders in the copy it publishes. The host name and user name are never
//! recorded.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::infra::images::kernel::KernelSource;
use crate::infra::images::{Cache, Catalog, KernelArtifact, RootfsArtifact};
use crate::plan::Plan;

/// Name of the environment record in a run folder.
pub const ENVIRONMENT_FILE: &str = "environment.json";
/// Its schema version.
pub const ENVIRONMENT_SCHEMA: u32 = 1;

/// Guest packages whose versions the report lists (absent ones are left out).
pub const GUEST_PACKAGES: &[&str] = &[
    "nfs-common",
    "nfs-kernel-server",
    "iproute2",
    "net-tools",
    "time",
    "procps",
    "ethtool",
    "kmod",
    "busybox-static",
    "qemu-guest-agent",
    "libc6",
];

/// `environment.json`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Environment {
    /// [`ENVIRONMENT_SCHEMA`].
    pub schema: u32,
    /// The host.
    pub host: HostInfo,
    /// vmrepro itself.
    pub vmrepro: ToolInfo,
    /// The suite file.
    pub suite: SuiteInfo,
    /// The artefact cache's root folder (a host path).
    pub cache_root: String,
    /// The `images/` folder used (a host path).
    pub images_dir: String,
    /// Each VM's kernel, in suite order.
    pub kernels: Vec<KernelInfo>,
    /// Each root filesystem used.
    pub rootfs: Vec<RootfsInfo>,
    /// What could not be recorded, and why.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

/// Facts about the host.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct HostInfo {
    /// `uname -r`.
    pub kernel: String,
    /// CPU model (`/proc/cpuinfo`).
    pub cpu_model: String,
    /// CPUs this process may use.
    pub cpus: usize,
    /// First line of `qemu-system-x86_64 --version`.
    pub qemu_version: String,
}

/// vmrepro's version.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolInfo {
    /// Crate version.
    pub version: String,
    /// Git commit it was built from (see the module docs).
    pub git_commit: String,
}

impl ToolInfo {
    /// This binary.
    pub fn current() -> ToolInfo {
        ToolInfo { version: env!("CARGO_PKG_VERSION").to_string(), git_commit: env!("VMREPRO_GIT_COMMIT").to_string() }
    }
}

/// The suite file.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct SuiteInfo {
    /// Absolute path at run time (a host path).
    pub path: String,
    /// The project folder: the parent of the `images/` folder (a host path).
    pub project_root: String,
    /// The suite's path relative to the project folder, when it is inside it.
    pub relative_path: Option<String>,
    /// SHA-256 of the file's bytes.
    pub sha256: String,
    /// The git commit of the project folder at run time (`git rev-parse HEAD`), with
    /// `-dirty` when the suite or `images/` differ from it; `None` outside a git
    /// checkout. Unlike [`ToolInfo::git_commit`] (fixed when vmrepro was built) this is
    /// the commit whose suite and images the run used.
    #[serde(default)]
    pub project_commit: Option<String>,
}

/// A file and its SHA-256.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileHash {
    /// Relative to the project folder when inside it, else absolute.
    pub path: String,
    /// SHA-256 of its bytes (empty when it could not be read).
    pub sha256: String,
}

/// One VM's kernel.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct KernelInfo {
    /// VM name.
    pub vm: String,
    /// `uname -r` of the kernel image.
    pub release: String,
    /// Where it comes from.
    pub origin: KernelOrigin,
}

/// Where a VM's kernel comes from.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum KernelOrigin {
    /// A pinned Debian package.
    Debian {
        /// Package name.
        package: String,
        /// Version.
        version: String,
        /// Debian suite whose index listed it.
        suite: String,
        /// Path in the archive.
        filename: String,
        /// Size, bytes.
        size: u64,
        /// SHA-256 of the `.deb`.
        sha256: String,
    },
    /// Built from a Debian source package.
    Source {
        /// Source package name.
        package: String,
        /// Its version.
        version: String,
        /// SHA-256 of the source `.deb`.
        sha256: String,
        /// Config fragments in order.
        fragments: Vec<FileHash>,
        /// Patches in order.
        patches: Vec<FileHash>,
        /// SHA-256 of the final `.config` (from the kernel's cache entry).
        config_sha256: Option<String>,
    },
    /// Built from a commit of a git tree the user mapped (`kernel: {tree, rev}`).
    Tree {
        /// The tree's short name in the suite.
        tree: String,
        /// The revision as the suite gives it.
        rev: String,
        /// The commit id it resolved to.
        commit: String,
        /// `git describe --tags --always` of the commit.
        describe: String,
        /// The commit's subject line.
        subject: String,
        /// Config fragments in order.
        fragments: Vec<FileHash>,
        /// Patches in order.
        patches: Vec<FileHash>,
        /// SHA-256 of the final `.config` (from the kernel's cache entry).
        config_sha256: Option<String>,
    },
    /// A local kernel image.
    Local {
        /// The image.
        image: FileHash,
        /// Its modules tree, if given.
        modules: Option<String>,
    },
}

/// One root filesystem.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct RootfsInfo {
    /// Its name: the recipe, with the suite's extra packages (`bookworm-nfs+fio`).
    pub name: String,
    /// Recipe name (`images/rootfs/<recipe>.yaml`).
    #[serde(default)]
    pub recipe: String,
    /// Extra packages the suite asked for on top of the recipe.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub extra_packages: Vec<String>,
    /// SHA-256 of `images/rootfs/<recipe>.yaml`.
    pub recipe_sha256: String,
    /// Cache key (recipe, overlay files and initramfs `/init`).
    pub cache_key: String,
    /// `package → version` for [`GUEST_PACKAGES`] and the extra packages installed in
    /// the image.
    pub packages: BTreeMap<String, String>,
    /// Where the versions were read.
    pub packages_source: String,
}

/// Collects the environment of a run of `plan` whose images resolved to `kernels`
/// (by [`KernelSource::label`]) and `rootfs` (by recipe name). Never fails: what can't
/// be found is left empty with a note.
// Over 100 lines, kept whole for now: one pass over the run's facts (the suite, each
// kernel, each rootfs, the host and tools), run only by `vmrepro run` (the VM tier),
// so a split could not be checked by `cargo fast`.
pub fn collect(
    plan: &Plan,
    catalog: &Catalog,
    cache: &Cache,
    kernels: &HashMap<String, KernelArtifact>,
    rootfs: &HashMap<String, RootfsArtifact>,
) -> Environment {
    let mut notes = Vec::new();
    let project = std::fs::canonicalize(&catalog.dir)
        .unwrap_or_else(|_| catalog.dir.clone())
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default();
    let suite_abs = std::path::absolute(&plan.suite_file).unwrap_or_else(|_| plan.suite_file.clone());
    let suite_abs = std::fs::canonicalize(&suite_abs).unwrap_or(suite_abs);
    let suite = SuiteInfo {
        path: suite_abs.display().to_string(),
        project_root: project.display().to_string(),
        relative_path: suite_abs.strip_prefix(&project).ok().map(|p| p.display().to_string()),
        sha256: file_sha256(&suite_abs).unwrap_or_else(|e| {
            notes.push(format!("suite file {}: {e}", suite_abs.display()));
            String::new()
        }),
        project_commit: project_commit(&project, &[&suite_abs, &catalog.dir]),
    };
    let rel = |p: &Path| -> FileHash {
        let abs = std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
        FileHash {
            path: abs.strip_prefix(&project).map_or_else(|_| abs.display().to_string(), |r| r.display().to_string()),
            sha256: file_sha256(&abs).unwrap_or_default(),
        }
    };
    let mut kinfo = Vec::new();
    for v in &plan.vms {
        let art = kernels.get(&v.kernel.label());
        let origin = match &v.kernel {
            KernelSource::Debian(k) => KernelOrigin::Debian {
                package: k.package.clone(),
                version: k.version.clone(),
                suite: k.suite.clone(),
                filename: k.filename.clone(),
                size: k.size,
                sha256: k.sha256.clone(),
            },
            KernelSource::Source(s) => KernelOrigin::Source {
                package: s.source.package.clone(),
                version: s.source.version.clone(),
                sha256: s.source.sha256.clone(),
                fragments: s.fragments.iter().map(|f| rel(f)).collect(),
                patches: s.patches.iter().map(|f| rel(f)).collect(),
                config_sha256: art.and_then(|a| file_sha256(&a.dir.join("config")).ok()),
            },
            KernelSource::Tree(t) => KernelOrigin::Tree {
                tree: t.tree.clone(),
                rev: t.rev.clone(),
                commit: t.resolved.commit.clone(),
                describe: t.resolved.describe.clone(),
                subject: t.resolved.subject.clone(),
                fragments: t.fragments.iter().map(|f| rel(f)).collect(),
                patches: t.patches.iter().map(|f| rel(f)).collect(),
                config_sha256: art.and_then(|a| file_sha256(&a.dir.join("config")).ok()),
            },
            KernelSource::Local { image, modules } => {
                KernelOrigin::Local { image: rel(image), modules: modules.as_ref().map(|m| m.display().to_string()) }
            }
        };
        kinfo.push(KernelInfo {
            vm: v.name.clone(),
            release: art.map(|a| a.release.clone()).unwrap_or_default(),
            origin,
        });
    }
    let mut requests: Vec<_> = plan.vm_images().map(|(_, r)| r).collect();
    requests.sort();
    requests.dedup();
    let mut rinfo = Vec::new();
    for r in requests {
        let name = r.id();
        let recipe = catalog.dir.join("rootfs").join(format!("{}.yaml", r.recipe));
        let mut info = RootfsInfo {
            name: name.clone(),
            recipe: r.recipe.clone(),
            extra_packages: r.packages.iter().map(ToString::to_string).collect(),
            recipe_sha256: file_sha256(&recipe).unwrap_or_default(),
            cache_key: rootfs.get(&name).map(|a| a.key.clone()).unwrap_or_default(),
            packages: BTreeMap::new(),
            packages_source: "/var/lib/dpkg/status in the rootfs image (debugfs)".into(),
        };
        // An extra package named `pkg/suite` is installed as `pkg`.
        let extra: Vec<&str> = r.packages.iter().map(|p| p.name()).collect();
        let wanted: Vec<&str> = GUEST_PACKAGES.iter().copied().chain(extra).collect();
        match rootfs.get(&name).map(|a| dpkg_status_of_image(&a.image)) {
            Some(Ok(text)) => info.packages = installed_versions(&text, &wanted),
            Some(Err(e)) => notes.push(format!("guest package versions of rootfs {name}: {e}")),
            None => notes.push(format!("rootfs {name} was not resolved")),
        }
        rinfo.push(info);
    }
    Environment {
        schema: ENVIRONMENT_SCHEMA,
        host: HostInfo {
            kernel: read_trim("/proc/sys/kernel/osrelease"),
            cpu_model: cpu_model(&std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default()),
            cpus: std::thread::available_parallelism().map_or(0, |n| n.get()),
            qemu_version: crate::infra::qemu::qemu_version(),
        },
        vmrepro: ToolInfo::current(),
        suite,
        cache_root: cache.root().display().to_string(),
        images_dir: std::fs::canonicalize(&catalog.dir).unwrap_or_else(|_| catalog.dir.clone()).display().to_string(),
        kernels: kinfo,
        rootfs: rinfo,
        notes,
    }
}

/// `git rev-parse HEAD` in `dir`, with `-dirty` when any of `paths` differs from it
/// (`git status --porcelain`); `None` when `dir` is not in a git checkout or git is
/// missing.
pub fn project_commit(dir: &Path, paths: &[&Path]) -> Option<String> {
    let git = |args: &[&std::ffi::OsStr]| -> Option<String> {
        // `--no-optional-locks`: `status` would otherwise refresh the checkout's index
        // under `.git/index.lock`, racing the user's own git commands.
        let out =
            std::process::Command::new("git").arg("--no-optional-locks").arg("-C").arg(dir).args(args).output().ok()?;
        out.status.success().then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
    };
    let head = git(&["rev-parse".as_ref(), "HEAD".as_ref()])?;
    let mut status: Vec<&std::ffi::OsStr> = vec!["status".as_ref(), "--porcelain".as_ref(), "--".as_ref()];
    status.extend(paths.iter().map(|p| p.as_os_str()));
    let dirty = git(&status).is_some_and(|s| !s.is_empty());
    Some(if dirty { format!("{head}-dirty") } else { head })
}

fn read_trim(path: &str) -> String {
    std::fs::read_to_string(path).map(|s| s.trim().to_string()).unwrap_or_default()
}

/// SHA-256 of a file, lowercase hex.
///
/// Errors: the file can't be read.
pub fn file_sha256(path: &Path) -> std::io::Result<String> {
    use sha2::Digest;
    use std::io::Read;
    let mut f = std::fs::File::open(path)?;
    let mut h = sha2::Sha256::new();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    Ok(hex::encode(h.finalize()))
}

/// The first `model name` of a `/proc/cpuinfo` text (x86), or its `cpu model`/`Processor`
/// line on other architectures; empty when none.
pub fn cpu_model(cpuinfo: &str) -> String {
    cpuinfo
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            matches!(k.trim(), "model name" | "cpu model" | "Processor").then(|| v.trim().to_string())
        })
        .unwrap_or_default()
}

/// `/var/lib/dpkg/status` of the ext4 image `image`, read with `debugfs` (read-only).
///
/// Errors: debugfs is missing or fails, or prints nothing.
pub fn dpkg_status_of_image(image: &Path) -> Result<String, String> {
    let out = std::process::Command::new("debugfs")
        .arg("-R")
        .arg("cat /var/lib/dpkg/status")
        .arg(image)
        .output()
        .map_err(|e| format!("cannot run debugfs (e2fsprogs): {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    if !out.status.success() || text.trim().is_empty() {
        let err = String::from_utf8_lossy(&out.stderr);
        return Err(format!("debugfs could not read /var/lib/dpkg/status: {}", err.trim()));
    }
    Ok(text)
}

/// `package → version` of the `wanted` packages that a dpkg status text lists as
/// installed (`Status: install ok installed`).
pub fn installed_versions(status: &str, wanted: &[&str]) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for stanza in status.split("\n\n") {
        let field = |name: &str| stanza.lines().find_map(|l| l.strip_prefix(name).map(|v| v.trim().to_string()));
        let (Some(pkg), Some(version)) = (field("Package:"), field("Version:")) else { continue };
        let installed = field("Status:").is_some_and(|s| s.ends_with(" installed"));
        if installed && wanted.contains(&pkg.as_str()) {
            out.insert(pkg, version);
        }
    }
    out
}

/// Reads `environment.json` from run folder `dir`; `None` when the run has none (runs
/// of vmrepro before it was recorded, or a run that stopped before its images).
pub fn read(dir: &Path) -> Option<Environment> {
    let folder = crate::path_io::Folder::open(dir).ok()?;
    crate::run::record::read_json_in(&folder, ENVIRONMENT_FILE).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dpkg_status_versions_of_installed_packages_only() {
        let status = "Package: nfs-common\nStatus: install ok installed\nVersion: 1:2.6.2-4+deb12u1\n\n\
                      Package: time\nStatus: deinstall ok config-files\nVersion: 1.9-0.2\n\n\
                      Package: iproute2\nStatus: install ok installed\nArchitecture: amd64\nVersion: 6.15.0-1~bpo12+1\n\n\
                      Package: other\nStatus: install ok installed\nVersion: 1\n";
        let v = installed_versions(status, GUEST_PACKAGES);
        assert_eq!(v.len(), 2);
        assert_eq!(v["nfs-common"], "1:2.6.2-4+deb12u1");
        assert_eq!(v["iproute2"], "6.15.0-1~bpo12+1");
    }

    #[test]
    fn cpu_model_from_cpuinfo() {
        let text = "processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 7B13\n\nprocessor\t: 1\nmodel name\t: AMD EPYC 7B13\n";
        assert_eq!(cpu_model(text), "AMD EPYC 7B13");
        assert_eq!(cpu_model(""), "");
    }
}
