//! The project's `images/` folder as data ([`Catalog`]): the pinned Debian kernels and
//! kernel sources (`kernels.yaml`), the rootfs recipes (`rootfs/<name>.yaml`), the
//! server profiles' parameters (`profiles/<name>.yaml`, [`ProfileParams`]), and the
//! safety checks on each (an images folder can travel with a bundle: it is untrusted).
//!
//! Every file of the folder is read through [`Folder`]: no symbolic link followed
//! below the folder itself, regular files with one hard link only, each read bounded
//! ([`MAX_RECIPE_BYTES`], [`MAX_PROFILE_SCRIPT_BYTES`], [`MAX_OVERLAY_FILE_BYTES`]).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::ImageError;
use crate::path_io::{check_relative, FileError, Folder, Kind};

/// The cap on `kernels.yaml`, a rootfs recipe and a profile's parameters file, bytes.
pub const MAX_RECIPE_BYTES: u64 = 1 << 20;
/// The cap on a profile script (`profiles/<name>.sh`), bytes.
pub const MAX_PROFILE_SCRIPT_BYTES: u64 = 1 << 20;
/// The cap on one file of a rootfs overlay or `initramfs/init`, bytes.
pub const MAX_OVERLAY_FILE_BYTES: u64 = 16 << 20;

/// One pinned Debian kernel package (an entry of `images/kernels.yaml`).
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct PinnedKernel {
    /// Kernel series named by suites, e.g. `"6.1"`.
    pub series: String,
    /// Debian flavour, e.g. `cloud-amd64`.
    pub flavour: String,
    /// Debian suite (distribution) whose index listed it, e.g. `bookworm`.
    pub suite: String,
    /// Binary package name.
    pub package: String,
    /// Package version.
    pub version: String,
    /// Path in the archive (`pool/…/*.deb`).
    pub filename: String,
    /// Size in bytes.
    pub size: u64,
    /// SHA-256 of the .deb, lowercase hex.
    pub sha256: String,
}

/// One pinned Debian kernel source package (`sources:` in `images/kernels.yaml`).
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct PinnedSource {
    /// Kernel series, e.g. `"6.1"`.
    pub series: String,
    /// Debian suite whose index listed it.
    pub suite: String,
    /// Binary package name (`linux-source-<series>`).
    pub package: String,
    /// Package version.
    pub version: String,
    /// Path in the archive.
    pub filename: String,
    /// Size in bytes.
    pub size: u64,
    /// SHA-256, lowercase hex.
    pub sha256: String,
}

/// `images/kernels.yaml`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct KernelManifest {
    /// The date of the last (re-)pinning, `YYYY-MM-DD`.
    pub(crate) pinned_on: String,
    pub(crate) kernels: Vec<PinnedKernel>,
    #[serde(default)]
    pub(crate) sources: Vec<PinnedSource>,
}

/// A rootfs recipe (`images/rootfs/<name>.yaml`).
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct RootfsRecipe {
    /// Debian distribution for mmdebstrap, e.g. `bookworm`.
    pub distribution: String,
    /// mmdebstrap `--variant`.
    pub variant: String,
    /// Further suites of the same archive added to the sources, e.g.
    /// `bookworm-backports`; a package is taken from one with apt's `pkg/suite` form.
    #[serde(default)]
    pub extra_suites: Vec<String>,
    /// Packages to include (`name`, or `name/suite` for a package from an extra suite).
    pub packages: Vec<crate::schema::DebianPackage>,
    /// Overlay folder copied over the rootfs, relative to `images/rootfs/`.
    pub overlay: PathBuf,
    /// ext4 image size in MiB.
    pub size_mib: u64,
}

/// The project's recipes, read from its `images/` folder.
#[derive(Debug, Clone)]
pub struct Catalog {
    /// The `images/` folder.
    pub dir: PathBuf,
    /// Pinned Debian kernels.
    pub kernels: Vec<PinnedKernel>,
    /// Pinned Debian kernel source packages.
    pub sources: Vec<PinnedSource>,
    /// Rootfs recipes by name, with their text (hashed into cache keys).
    pub rootfs: BTreeMap<String, (RootfsRecipe, String)>,
    /// Guest profiles by name → script path.
    pub profiles: BTreeMap<String, PathBuf>,
    /// Guest profiles by name → the script's text, read when the catalog was loaded.
    pub profile_scripts: BTreeMap<String, String>,
    /// The parameters of the profiles that take some (`profiles/<name>.yaml`).
    pub profile_params: BTreeMap<String, ProfileParams>,
}

/// A server profile's parameters with their defaults (`images/profiles/<name>.yaml`),
/// declared with the rest of the profile's parameters in [`crate::schema::profile`].
pub use crate::schema::profile::ProfileDefaults as ProfileParams;

/// mmdebstrap's `--variant`s.
const MMDEBSTRAP_VARIANTS: &[&str] =
    &["extract", "custom", "essential", "apt", "required", "minbase", "buildd", "important", "debootstrap", "standard"];

/// Whether `s` is a Debian package or archive suite name: 2–64 characters of
/// `[a-z0-9+.-]`, starting with a letter or digit (Debian Policy 5.6.1 for packages;
/// suites such as `bookworm-backports` fit too). Nothing that passes can be read as a
/// command-line option or carry a shell or list separator.
pub fn is_debian_name(s: &str) -> bool {
    let mut c = s.chars();
    (2..=64).contains(&s.len())
        && c.next().is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
        && c.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "+.-".contains(c))
}

impl RootfsRecipe {
    /// What makes this recipe (from the images folder `images`) unsafe or impossible to
    /// build, or `None`. An images folder can travel with a suite (the nearest `images/`
    /// above it is used), so its fields reach mmdebstrap and the overlay copy only as
    /// Debian names, a known variant, a size in range, and an overlay folder inside
    /// `images/rootfs/` (a plain relative path, no symbolic link on the way).
    pub fn problem(&self, images: &Folder) -> Option<String> {
        if !is_debian_name(&self.distribution) {
            return Some(format!(
                "distribution: {:?} is not a Debian distribution name (e.g. bookworm)",
                self.distribution
            ));
        }
        if !MMDEBSTRAP_VARIANTS.contains(&self.variant.as_str()) {
            return Some(format!(
                "variant: {:?} is not an mmdebstrap variant ({})",
                self.variant,
                MMDEBSTRAP_VARIANTS.join(", ")
            ));
        }
        if let Some(s) = self.extra_suites.iter().find(|s| !is_debian_name(s)) {
            return Some(format!("extra_suites: {s:?} is not a Debian suite name (e.g. bookworm-backports)"));
        }
        for p in &self.packages {
            if p.suite().is_some_and(|s| s != self.distribution && !self.extra_suites.iter().any(|x| x == s)) {
                return Some(format!(
                    "packages: {p:?} names a suite that is not the distribution or one of extra_suites"
                ));
            }
        }
        if !(64..=65536).contains(&self.size_mib) {
            return Some(format!("size_mib: {} is out of range (64 to 65536)", self.size_mib));
        }
        let rel = self.overlay.to_string_lossy();
        let rootfs = images.display("rootfs");
        if let Err(e) = check_relative(&rel, &rootfs) {
            return Some(format!("overlay: {e}"));
        }
        match images.kind(&format!("rootfs/{rel}")) {
            Ok(Some(Kind::Folder)) => None,
            Ok(Some(Kind::Other("a symbolic link"))) => Some(format!(
                "overlay: {} is a symbolic link; links in {} are not followed",
                rootfs.join(&self.overlay).display(),
                images.path().display()
            )),
            Ok(Some(_)) => Some(format!("overlay: {} is not a folder", rootfs.join(&self.overlay).display())),
            Ok(None) => Some(format!("overlay: {} does not exist", rootfs.join(&self.overlay).display())),
            Err(e) => Some(format!("overlay: {e}")),
        }
    }
}

/// The default rootfs recipe name.
pub const DEFAULT_ROOTFS: &str = "bookworm-nfs";
/// The default Debian kernel flavour.
pub const DEFAULT_FLAVOUR: &str = "cloud-amd64";

impl Catalog {
    /// Finds the `images/` folder: `explicit` if given, else `$VMREPRO_IMAGES`, else the
    /// nearest `images/kernels.yaml` above `start`, else the one this binary was built
    /// from.
    pub fn locate(explicit: Option<&Path>, start: &Path) -> Result<PathBuf, ImageError> {
        if let Some(p) = explicit {
            return Ok(p.to_path_buf());
        }
        if let Some(p) = std::env::var_os("VMREPRO_IMAGES") {
            return Ok(PathBuf::from(p));
        }
        let start_abs = std::fs::canonicalize(start).unwrap_or_else(|_| start.to_path_buf());
        for dir in start_abs.ancestors() {
            let cand = dir.join("images");
            if cand.join("kernels.yaml").is_file() {
                return Ok(cand);
            }
        }
        let builtin = Path::new(env!("CARGO_MANIFEST_DIR")).join("../images");
        if builtin.join("kernels.yaml").is_file() {
            return Ok(builtin);
        }
        Err(ImageError::NoImagesDir { start: start_abs, builtin })
    }

    /// Reads every recipe in `dir` through [`Folder`] (see the module docs): a link, a
    /// named pipe, a hard link or a file over its cap where a recipe, a profile script
    /// or its parameters are expected is refused, naming the file.
    ///
    /// Errors: [`ImageError::File`] for such a file, [`ImageError::Recipe`] for one that
    /// doesn't parse or fails its checks.
    pub fn load(dir: &Path) -> Result<Self, ImageError> {
        let folder = Folder::open(dir)?;
        let recipe_err =
            |p: &Path, e: serde_yaml::Error| ImageError::Recipe { path: p.to_path_buf(), message: e.to_string() };

        let kpath = dir.join("kernels.yaml");
        let manifest: KernelManifest = serde_yaml::from_str(&folder.read_text("kernels.yaml", MAX_RECIPE_BYTES)?)
            .map_err(|e| recipe_err(&kpath, e))?;

        let mut rootfs = BTreeMap::new();
        let rdir = dir.join("rootfs");
        for (name, _) in folder.sub("rootfs")?.list()? {
            if let Some(stem) = name.strip_suffix(".yaml") {
                let rel = format!("rootfs/{name}");
                let text = folder.read_text(&rel, MAX_RECIPE_BYTES)?;
                let recipe: RootfsRecipe = serde_yaml::from_str(&text).map_err(|e| recipe_err(&dir.join(&rel), e))?;
                rootfs.insert(stem.to_string(), (recipe, text));
            }
        }

        let mut profiles = BTreeMap::new();
        let mut profile_scripts = BTreeMap::new();
        let mut profile_params = BTreeMap::new();
        let listing = match folder.kind("profiles")? {
            None => Vec::new(),
            Some(_) => folder.sub("profiles")?.list()?,
        };
        for (file, _) in listing {
            let Some(name) = file.strip_suffix(".sh") else { continue };
            let rel = format!("profiles/{file}");
            profile_scripts.insert(name.to_string(), folder.read_text(&rel, MAX_PROFILE_SCRIPT_BYTES)?);
            let params = format!("profiles/{name}.yaml");
            if folder.kind(&params)?.is_some() {
                let defaults: ProfileParams = serde_yaml::from_str(&folder.read_text(&params, MAX_RECIPE_BYTES)?)
                    .map_err(|e| recipe_err(&dir.join(&params), e))?;
                profile_params.insert(name.to_string(), defaults);
            }
            profiles.insert(name.to_string(), dir.join(&rel));
        }
        for (name, (recipe, _)) in &rootfs {
            if let Some(message) = recipe.problem(&folder) {
                return Err(ImageError::Recipe { path: rdir.join(format!("{name}.yaml")), message });
            }
        }
        let pins = manifest.kernels.iter().map(|k| (&k.package, &k.suite, &k.version, &k.filename, k.size, &k.sha256));
        let sources =
            manifest.sources.iter().map(|k| (&k.package, &k.suite, &k.version, &k.filename, k.size, &k.sha256));
        for (i, (package, suite, version, filename, size, sha256)) in pins.chain(sources).enumerate() {
            if let Some((field, why)) = super::pin::pin_problem(package, suite, version, filename, size, sha256) {
                let message = format!("entry {}: {}: {why}", i + 1, field.key());
                return Err(ImageError::Recipe { path: kpath.clone(), message });
            }
        }
        Ok(Catalog {
            dir: dir.to_path_buf(),
            kernels: manifest.kernels,
            sources: manifest.sources,
            rootfs,
            profiles,
            profile_scripts,
            profile_params,
        })
    }

    /// Reads `rel` (a plain relative path) of the images folder through [`Folder`], at
    /// most `limit` bytes.
    ///
    /// Errors: [`ImageError::File`] (a link on the way, not a regular file, a hard
    /// link, over `limit`, outside).
    pub fn read(&self, rel: &str, limit: u64) -> Result<Vec<u8>, ImageError> {
        Ok(Folder::open(&self.dir)?.read(rel, limit)?)
    }

    /// Every regular file of the folder `rel` of the images folder (e.g. a rootfs
    /// overlay), as `(path relative to rel, bytes)`, sorted; each at most `limit` bytes.
    ///
    /// Errors: [`ImageError::File`] for a link, named pipe, device or socket in it (an
    /// overlay holds files and folders only) and as [`Catalog::read`].
    pub fn read_tree(&self, rel: &str, limit: u64) -> Result<Vec<(String, Vec<u8>)>, ImageError> {
        let top = Folder::open(&self.dir)?.sub(rel)?;
        let mut out = Vec::new();
        for (path, kind) in top.walk()? {
            match kind {
                Kind::Folder => {}
                Kind::File(_) => {
                    let data = top.read(&path, limit)?;
                    out.push((path, data));
                }
                Kind::Other("a symbolic link") => {
                    return Err(FileError::Link { link: top.display(&path), folder: top.path().to_path_buf() }.into())
                }
                Kind::Other(kind) => return Err(FileError::NotRegular { path: top.display(&path), kind }.into()),
            }
        }
        Ok(out)
    }

    /// The pinned kernel for `series` and `flavour`.
    pub fn debian_kernel(&self, series: &str, flavour: &str) -> Option<&PinnedKernel> {
        self.kernels.iter().find(|k| k.series == series && k.flavour == flavour)
    }

    /// The pinned kernel source package for `series`.
    pub fn debian_source(&self, series: &str) -> Option<&PinnedSource> {
        self.sources.iter().find(|k| k.series == series)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An images folder that travels with a suite can't smuggle options into
    /// mmdebstrap, copy a host folder into the rootfs, or point the download or the
    /// cache outside their places: the project's own folder loads, each planted field is
    /// refused naming the file and the field.
    #[test]
    fn a_planted_images_folder_is_refused_field_by_field() {
        let project = Path::new(env!("CARGO_MANIFEST_DIR")).join("../images");
        let tmp = tempfile::tempdir().unwrap();
        let copy = tmp.path().join("images");
        let status = std::process::Command::new("cp").arg("-r").arg(&project).arg(&copy).status().unwrap();
        assert!(status.success());
        Catalog::load(&copy).expect("the project's images folder loads");

        let recipe = copy.join("rootfs/bookworm-nfs.yaml");
        let original = std::fs::read_to_string(&recipe).unwrap();
        for (from, to, field) in [
            ("distribution: bookworm", "distribution: \"--customize-hook=touch /tmp/x\"", "distribution:"),
            ("variant: minbase", "variant: \"--hook-dir=/tmp\"", "variant:"),
            ("  - procps", "  - \"procps,--aptopt=x\"", "packages:"),
            ("overlay: bookworm-nfs/overlay", "overlay: ../../../../root", "overlay:"),
            ("size_mib: 1024", "size_mib: 99999999", "size_mib:"),
        ] {
            assert!(original.contains(from), "{from}");
            std::fs::write(&recipe, original.replace(from, to)).unwrap();
            let err = Catalog::load(&copy).expect_err(to).to_string();
            assert!(err.contains("bookworm-nfs.yaml") && err.contains(field), "{to}: {err}");
        }
        std::fs::write(&recipe, &original).unwrap();

        let pins = copy.join("kernels.yaml");
        let original = std::fs::read_to_string(&pins).unwrap();
        let sha = original.split("sha256: ").nth(1).unwrap().split_whitespace().next().unwrap().to_string();
        let file = original.split("filename: ").nth(1).unwrap().split_whitespace().next().unwrap().to_string();
        for (from, to, field) in [
            (sha.clone(), "../../../etc".to_string(), "sha256:"),
            (file.clone(), "pool/../../etc/passwd.deb".to_string(), "filename:"),
            (file, "http://example.org/x.deb".to_string(), "filename:"),
        ] {
            std::fs::write(&pins, original.replacen(&from, &to, 1)).unwrap();
            let err = Catalog::load(&copy).expect_err(&to).to_string();
            assert!(err.contains("kernels.yaml") && err.contains(field), "{to}: {err}");
        }
    }
}
