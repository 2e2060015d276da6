//! `vmrepro bundle RUN_DIR -o FILE.tar.gz|.tar.zst`: one file to attach to a bug
//! report, and its reading back ([`extract`]) for `replay` and `compare`.
//!
//! # Layout
//!
//! One top folder `<suite>-<run folder name>/` holding:
//!
//! ```text
//! BUNDLE.json              what the bundle holds (BundleInfo, schema 1)
//! MANIFEST                 "<sha256>  <path>" of every other file (`sha256sum -c MANIFEST`),
//!                          each packet capture's preceded by "# bytes <size> <path>"
//! project/suites/<suite>.yaml   the suite, at its place in the project
//! project/…                every file it references (fragments, patches, local kernels)
//! project/images/kernels.yaml   the pinned entries it uses (and nothing else)
//! project/images/rootfs/<name>.yaml, <overlay>/…, initramfs/init, profiles/<p>.sh
//! run/                     the run folder: plan.json, run.json, results.json,
//!                          environment.json, report.md, report.html, vms/<vm>/… (serial
//!                          consoles, QEMU command lines, step outputs), nfs/<client>/…
//! packages/<file>.deb      with --with-images: the pinned kernel packages
//! kernels/<n>/…            with --with-images: each source-built kernel (vmlinuz,
//!                          release, config, initramfs-modules.cpio)
//! ```
//!
//! Paths inside `project/` are the files' paths relative to the project folder (the
//! parent of `images/`), so the suite's relative references still resolve, and the
//! rootfs recipe, overlay and `/init` are byte for byte the ones used: the rootfs cache
//! key computed from them on replay is the same. Text copies are redacted
//! ([`super::redact`]); serial consoles and QEMU's stderr over [`MAX_LOG_BYTES`] keep
//! their head and tail with a note. A packet capture (`run/vms/<vm>/capture.pcap`) is
//! binary evidence: it is carried byte for byte (read up to
//! [`crate::wire::pcap::MAX_CAPTURE_BYTES`], the size `vmrepro wire` and `analyse`
//! read), never redacted, and refused, naming the byte, when it holds what redaction
//! would replace (a host path, the host name, the user name); its size is in the
//! MANIFEST. Tar headers carry no owner, group or user name and
//! a fixed time, so bundling the same run twice gives the same archive contents.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

#[cfg_attr(vmrepro_dead_code, allow(unused_imports))]
pub use super::archive::extract;
use super::archive::write_archive;
pub use super::archive::{extract_with, Budget, Compression, Extracted};
use super::redact::{Identity, Redactor};
use crate::infra::images::kernel::KernelSource;
use crate::infra::images::{Cache, Catalog, ImageError};
use crate::path_io::{Folder, Kind, MAX_OUTPUT_BYTES};
use crate::plan::{Plan, StepKind};
use crate::report::published;
use crate::run::environment::{self, file_sha256, ToolInfo};
use crate::run::record::{read_record, RunRecord};
use crate::run::RUN_FILE;

/// Bundle format version.
pub const BUNDLE_SCHEMA: u32 = 1;
/// Name of the bundle's description.
pub const BUNDLE_FILE: &str = "BUNDLE.json";
/// Name of the checksum list.
pub const MANIFEST_FILE: &str = "MANIFEST";
/// What starts a MANIFEST line giving a file's size: `# bytes <size> <path>` (only
/// packet captures have one).
pub const MANIFEST_SIZE: &str = "# bytes";
/// Serial consoles and QEMU stderr larger than this are cut (head and tail kept).
pub const MAX_LOG_BYTES: usize = 256 * 1024;
/// The time in every tar header (2024-01-01T00:00:00Z).
pub(super) const MTIME: u64 = 1_704_067_200;

/// `BUNDLE.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BundleInfo {
    /// [`BUNDLE_SCHEMA`].
    pub schema: u32,
    /// Suite name.
    pub suite: String,
    /// The suite file inside the bundle (`project/suites/<suite>.yaml`).
    pub suite_file: String,
    /// The `images/` folder inside the bundle.
    pub images_dir: String,
    /// The run folder inside the bundle (`run`).
    pub run: String,
    /// The vmrepro that made the bundle.
    pub created_by: ToolInfo,
    /// Whether the kernels are inside.
    pub with_images: bool,
    /// Bundled kernel packages.
    #[serde(default)]
    pub packages: Vec<BundledPackage>,
    /// Bundled source-built kernels.
    #[serde(default)]
    pub kernels: Vec<BundledKernel>,
    /// The commit each git-tree kernel (`kernel: {tree, rev}`) resolved to, so that a
    /// replayer without the tree loads the suite (and finds the bundled kernel).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub trees: Vec<BundledTree>,
    /// The placeholders that replaced host-specific text.
    pub placeholders: Vec<String>,
    /// Logs that were cut.
    #[serde(default)]
    pub cut_logs: Vec<String>,
    /// Notes on the redaction (names too short to replace).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

/// A git-tree kernel's revision and what it resolved to when the run was made.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BundledTree {
    /// The tree's short name in the suite.
    pub tree: String,
    /// The revision as the suite gives it.
    pub rev: String,
    /// The commit id (40 hex digits).
    pub commit: String,
    /// `git describe` of it.
    pub describe: String,
    /// Its subject line.
    pub subject: String,
    /// Its committer date (ISO 8601).
    pub date: String,
}

impl BundledTree {
    /// What `rev` of `tree` resolved to, as [`crate::infra::images::tree::Trees::pin`] takes it.
    ///
    /// Errors: a commit id that is not 40 hex digits (a crafted BUNDLE.json).
    pub fn commit(&self) -> Result<crate::infra::images::tree::TreeCommit, String> {
        if self.commit.len() != 40 || !self.commit.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(format!(
                "BUNDLE.json: trees: commit `{}` is not 40 hex digits",
                crate::schema::text::escape_controls(&self.commit)
            ));
        }
        Ok(crate::infra::images::tree::TreeCommit {
            commit: self.commit.to_ascii_lowercase(),
            describe: self.describe.clone(),
            subject: self.subject.clone(),
            date: self.date.clone(),
        })
    }
}

/// A pinned kernel package inside the bundle.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BundledPackage {
    /// Package name.
    pub package: String,
    /// Version.
    pub version: String,
    /// Pinned SHA-256.
    pub sha256: String,
    /// Path inside the bundle.
    pub path: String,
}

/// A source-built kernel inside the bundle.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BundledKernel {
    /// [`KernelSource::label`].
    pub label: String,
    /// Its release.
    pub release: String,
    /// Folder inside the bundle holding the cache entry's files.
    pub path: String,
}

/// Errors of bundling and of reading bundles.
#[derive(Debug, thiserror::Error)]
pub enum BundleError {
    /// The folder is not a finished run folder.
    #[error("{}: not a run folder ({missing} is missing)", dir.display())]
    NotARunFolder {
        /// The folder.
        dir: PathBuf,
        /// What is missing.
        missing: String,
    },
    /// The suite can't be loaded again.
    #[error("loading the run's suite {}: {message}", path.display())]
    Suite {
        /// The suite file.
        path: PathBuf,
        /// Why.
        message: String,
    },
    /// The suite file changed since the run.
    #[error("the suite {} changed since the run (SHA-256 then {then}, now {now}); bundle a run of the suite as it is, or restore the file", path.display())]
    SuiteChanged {
        /// The suite file.
        path: PathBuf,
        /// Recorded SHA-256.
        then: String,
        /// Current SHA-256.
        now: String,
    },
    /// A referenced file lies outside the project folder.
    #[error("{} is outside the project folder {}; a bundle keeps files at their place in the project", path.display(), root.display())]
    Outside {
        /// The file.
        path: PathBuf,
        /// The project folder.
        root: PathBuf,
    },
    /// An image could not be found or fetched.
    #[error("{0}")]
    Image(#[from] ImageError),
    /// The file is not a bundle, or is damaged.
    #[error("{}: {message}", path.display())]
    Format {
        /// The bundle.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// Reading or writing failed.
    #[error("{what} {}: {source}", path.display())]
    Io {
        /// What we were doing.
        what: &'static str,
        /// The path.
        path: PathBuf,
        /// Cause.
        source: std::io::Error,
    },
}

pub(super) fn io<'a>(what: &'static str, path: &'a Path) -> impl FnOnce(std::io::Error) -> BundleError + 'a {
    move |source| BundleError::Io { what, path: path.to_path_buf(), source }
}

/// How to bundle.
#[derive(Debug, Clone)]
pub struct BundleOptions {
    /// Also carry the kernels (pinned `.deb`s, source-built kernels).
    pub with_images: bool,
    /// The artefact cache (where the kernels are).
    pub cache: Cache,
    /// The publisher, for redaction.
    pub identity: Identity,
    /// The `images/` folder (default: the one the run recorded).
    pub images: Option<PathBuf>,
}

/// What [`bundle`] wrote.
#[derive(Debug, Clone)]
pub struct BundleSummary {
    /// The bundle.
    pub path: PathBuf,
    /// Its size, bytes.
    pub bytes: u64,
    /// Files inside (MANIFEST included).
    pub files: usize,
    /// Total size of the files before compression, bytes.
    pub unpacked_bytes: u64,
    /// What was carried.
    pub info: BundleInfo,
}

/// One file of a bundle: its bytes and mode.
#[derive(Debug, Clone)]
pub(super) struct Entry {
    /// Its bytes.
    pub data: Vec<u8>,
    /// Its mode bits.
    pub mode: u32,
}

/// The regular files below `dir` (a rootfs overlay or a modules tree), sorted,
/// listed through the confined layer: a symbolic link, pipe or device there is
/// refused by name (the rootfs build and the kernel preparation refuse them too),
/// never followed nor skipped.
///
/// Errors: [`BundleError::Format`] naming the entry.
fn tree_files(dir: &Path) -> Result<Vec<PathBuf>, BundleError> {
    let bad = |path: PathBuf, message: String| BundleError::Format { path, message };
    let folder = Folder::open(dir).map_err(|e| bad(dir.to_path_buf(), e.to_string()))?;
    let mut out = Vec::new();
    for (rel, kind) in folder.walk().map_err(|e| bad(dir.to_path_buf(), e.to_string()))? {
        match kind {
            Kind::File(_) => out.push(dir.join(rel)),
            Kind::Folder => {}
            Kind::Other(what) => {
                return Err(bad(folder.display(&rel), format!("{what}; a bundle carries only regular files")))
            }
        }
    }
    Ok(out)
}

/// The redactor for run folder `run_dir` (see [`super::redact`]).
pub fn redactor_for(run_dir: &Path, record: &RunRecord, identity: &Identity, cache: &Cache) -> Redactor {
    let env = environment::read(run_dir);
    let mut r = Redactor::new();
    r.path(std::path::absolute(run_dir).unwrap_or_else(|_| run_dir.to_path_buf()), "$RUN_DIR");
    if let Some(t) = &record.temp_dir {
        let name = Path::new(t).file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        r.path(t, &format!("$TMP/{name}"));
    }
    if let Some(e) = &env {
        let project = Path::new(&e.suite.project_root);
        if let Some(dir) = Path::new(&e.suite.path).parent() {
            if !dir.starts_with(project) {
                r.path(dir, "$SUITE_DIR");
            }
        }
        r.path(project, "$PROJECT");
        r.path(&e.cache_root, "$CACHE");
    }
    r.path(cache.root(), "$CACHE");
    if let Some(h) = &identity.home {
        r.path(h, "$HOME");
    }
    if let Some(h) = &identity.host {
        r.word(h, "$HOSTNAME");
    }
    if let Some(u) = &identity.user {
        r.word(u, "$USER");
    }
    r
}

/// Keeps the first quarter and the last half of `data` when it is over `max` bytes,
/// with a note between them.
pub fn cut_log(data: &[u8], max: usize) -> Option<Vec<u8>> {
    if data.len() <= max {
        return None;
    }
    let head = max / 4;
    let tail = max / 2;
    let mut out = data[..head].to_vec();
    out.extend_from_slice(
        format!(
            "\n[vmrepro bundle: {} bytes cut here; this log was {} bytes, the whole log is in the run folder]\n",
            data.len() - head - tail,
            data.len()
        )
        .as_bytes(),
    );
    out.extend_from_slice(&data[data.len() - tail..]);
    Some(out)
}

/// This machine's tree mappings, with the `(tree, rev)` of every kernel the run built
/// from a git tree pinned to the commit it built (from `environment.json`): a branch
/// that has moved since, or a bisect step's commit, is bundled as it ran, not as the
/// revision resolves today.
///
/// Errors: a malformed `VMREPRO_TREES`.
fn trees_as_run(env: Option<&environment::Environment>) -> Result<crate::infra::images::tree::Trees, String> {
    use crate::infra::images::tree::{resolve_rev, TreeCommit, Trees};
    let mut trees = Trees::current()?;
    for k in env.map_or(&[][..], |e| e.kernels.as_slice()) {
        if let environment::KernelOrigin::Tree { tree, rev, commit, describe, subject, .. } = &k.origin {
            let date =
                trees.checkout(tree).and_then(|c| resolve_rev(c, commit).ok()).map(|c| c.date).unwrap_or_default();
            let pin = TreeCommit { commit: commit.clone(), describe: describe.clone(), subject: subject.clone(), date };
            trees.pin(tree, rev, pin);
        }
    }
    Ok(trees)
}

/// The entries of `images/kernels.yaml` that `plan` uses, as YAML text.
fn pinned_entries(catalog: &Catalog, plan: &Plan) -> Result<String, BundleError> {
    let path = catalog.dir.join("kernels.yaml");
    let text = crate::path_io::read_named(&path, crate::path_io::MAX_JSON_BYTES)
        .map(|d| String::from_utf8_lossy(&d).into_owned())
        .map_err(|e| BundleError::Format { path: path.clone(), message: e.to_string() })?;
    let mut doc: serde_yaml::Value =
        serde_yaml::from_str(&text).map_err(|e| BundleError::Format { path: path.clone(), message: e.to_string() })?;
    let mut used = BTreeSet::new();
    for v in &plan.vms {
        match &v.kernel {
            KernelSource::Debian(k) => {
                used.insert(k.sha256.clone());
            }
            KernelSource::Source(s) => {
                used.insert(s.source.sha256.clone());
            }
            KernelSource::Local { .. } | KernelSource::Tree(_) => {}
        }
    }
    for key in ["kernels", "sources"] {
        if let Some(serde_yaml::Value::Sequence(seq)) = doc.get_mut(key) {
            seq.retain(|e| e.get("sha256").and_then(|s| s.as_str()).is_some_and(|s| used.contains(s)));
        }
    }
    let body = serde_yaml::to_string(&doc).map_err(|e| BundleError::Format { path, message: e.to_string() })?;
    Ok(format!(
        "# The entries of images/kernels.yaml that this bundle's suite uses (vmrepro bundle).\n\
         # Fetch a package from the Debian archive (or a snapshot archive) at <archive>/<filename>\n\
         # and check its size and SHA-256.\n{body}"
    ))
}

/// The files of a bundle by their path inside it (`project/…`, `run/…`, `BUNDLE.json`, …).
type Entries = BTreeMap<String, Entry>;

/// Bundles run folder `run_dir` into `out` (`.tar.gz`, `.tgz` or `.tar.zst`).
///
/// Errors: see [`BundleError`].
pub fn bundle(run_dir: &Path, out: &Path, opts: &BundleOptions) -> Result<BundleSummary, BundleError> {
    let compression = Compression::of(out)?;
    let run_folder = open_run_folder(run_dir)?;
    let record: RunRecord = read_record(run_dir)
        .map_err(|e| BundleError::Format { path: run_dir.join(RUN_FILE), message: e.to_string() })?;
    let env = environment::read(run_dir);
    let suite_path = suite_as_run(&record, env.as_ref())?;
    let images = opts.images.clone().or_else(|| env.as_ref().map(|e| PathBuf::from(&e.images_dir)));
    let suite_error = |message: String| BundleError::Suite { path: suite_path.clone(), message };
    let options =
        crate::suite::LoadOptions { trees: trees_as_run(env.as_ref()).map_err(suite_error)?, ..Default::default() };
    let (plan, catalog) =
        crate::suite::load_with(&suite_path, images.as_deref(), &options).map_err(|e| suite_error(e.to_string()))?;
    if !run_dir.join(published::REPORT_MD).is_file() || !run_dir.join(published::REPORT_HTML).is_file() {
        published::write(run_dir)
            .map_err(|e| BundleError::Format { path: run_dir.to_path_buf(), message: e.to_string() })?;
    }
    let catalog_dir = std::fs::canonicalize(&catalog.dir).unwrap_or_else(|_| catalog.dir.clone());
    let root = catalog_dir.parent().map(Path::to_path_buf).unwrap_or_default();
    let mut redactor = redactor_for(run_dir, &record, &opts.identity, &opts.cache);
    if env.is_none() {
        // Without environment.json the project and suite folders are known only now:
        // they are host paths too (run.json's suite_file names them).
        if let Some(dir) = suite_path.parent().filter(|d| !d.starts_with(&root)) {
            redactor.path(dir, "$SUITE_DIR");
        }
        redactor.path(&root, "$PROJECT");
    }

    // The project: the suite and every file its VMs use.
    let mut entries = Entries::new();
    // The project's files through the confined layer, relative to the project
    // folder: a file that is a link, a pipe or has a second hard link is refused by
    // name, every read is bounded; only the folders above a file are resolved.
    let folder = Folder::open(&root).map_err(|e| BundleError::Format { path: root.clone(), message: e.to_string() })?;
    let project = Project { root: &root, folder: &folder, redactor: &redactor };
    let suite_key = project.add(&mut entries, &suite_path)?;
    for v in &plan.vms {
        project.add_vm(&mut entries, &catalog, v)?;
    }
    project.add(&mut entries, &catalog.dir.join("initramfs/init"))?;
    let images_rel = catalog_dir.strip_prefix(&root).map_or_else(|_| "images".into(), |p| p.display().to_string());
    entries.insert(
        format!("project/{images_rel}/kernels.yaml"),
        Entry { data: pinned_entries(&catalog, &plan)?.into_bytes(), mode: 0o644 },
    );

    let RunFiles { cut_logs, captures } = add_run_folder(&mut entries, &run_folder, run_dir, &redactor)?;
    let (packages, kernels) =
        if opts.with_images { add_kernels(&mut entries, &plan, &opts.cache)? } else { (Vec::new(), Vec::new()) };

    let info = BundleInfo {
        schema: BUNDLE_SCHEMA,
        suite: plan.suite.clone(),
        suite_file: suite_key,
        images_dir: format!("project/{images_rel}"),
        run: "run".into(),
        created_by: ToolInfo::current(),
        with_images: opts.with_images,
        packages,
        kernels,
        trees: plan
            .vms
            .iter()
            .filter_map(|v| match &v.kernel {
                KernelSource::Tree(t) => Some(BundledTree {
                    tree: t.tree.clone(),
                    rev: t.rev.clone(),
                    commit: t.resolved.commit.clone(),
                    describe: t.resolved.describe.clone(),
                    subject: t.resolved.subject.clone(),
                    date: t.resolved.date.clone(),
                }),
                _ => None,
            })
            .fold(Vec::new(), |mut acc: Vec<BundledTree>, t| {
                if !acc.contains(&t) {
                    acc.push(t);
                }
                acc
            }),
        placeholders: ["$RUN_DIR", "$TMP", "$SUITE_DIR", "$PROJECT", "$CACHE", "$HOME", "$HOSTNAME", "$USER"]
            .map(String::from)
            .to_vec(),
        cut_logs,
        notes: redactor
            .skipped()
            .iter()
            .map(|w| format!("{w:?} (the host or user name) is shorter than {} characters and was not replaced: it can't be told apart from ordinary words", super::redact::MIN_WORD))
            .collect(),
    };
    add_description(&mut entries, &info, &redactor, &captures);

    let top = published::default_bundle_name(&plan.suite, run_dir).trim_end_matches(".tar.gz").to_string();
    let unpacked_bytes = entries.values().map(|e| e.data.len() as u64).sum();
    let files = entries.len();
    write_archive(out, &top, &entries, compression)?;
    let bytes = std::fs::metadata(out).map_err(io("reading", out))?.len();
    Ok(BundleSummary { path: out.to_path_buf(), bytes, files, unpacked_bytes, info })
}

/// Opens run folder `run_dir` through the confined layer, after checking that it holds
/// `run.json` and nothing but regular files and folders.
///
/// Errors: [`BundleError::NotARunFolder`] without `run.json`; [`BundleError::Format`]
/// naming the first link, pipe or device, or when the folder can't be opened or walked.
fn open_run_folder(run_dir: &Path) -> Result<Folder, BundleError> {
    let run_folder = Folder::open(run_dir)
        .map_err(|e| BundleError::Format { path: run_dir.to_path_buf(), message: e.to_string() })?;
    if !run_folder.is_file(RUN_FILE) {
        return Err(BundleError::NotARunFolder { dir: run_dir.to_path_buf(), missing: RUN_FILE.into() });
    }
    // A link, pipe or device anywhere in the run folder is refused before anything is
    // read through it.
    for (rel, kind) in
        run_folder.walk().map_err(|e| BundleError::Format { path: run_dir.to_path_buf(), message: e.to_string() })?
    {
        if let Kind::Other(what) = kind {
            return Err(BundleError::Format {
                path: run_dir.to_path_buf(),
                message: format!("{rel} is {what}; a run folder holds only regular files and folders"),
            });
        }
    }
    Ok(run_folder)
}

/// The suite file as the run used it: the absolute path `environment.json` recorded
/// (checked against its recorded SHA-256), else run.json's `suite_file`.
///
/// Errors: [`BundleError::SuiteChanged`] when the file's hash differs from the
/// recorded one; [`BundleError::Io`] when it can't be read.
fn suite_as_run(record: &RunRecord, env: Option<&environment::Environment>) -> Result<PathBuf, BundleError> {
    let suite_path = env.map_or_else(|| PathBuf::from(&record.suite_file), |e| PathBuf::from(&e.suite.path));
    if let Some(e) = env {
        let now = file_sha256(&suite_path).map_err(io("reading suite", &suite_path))?;
        if now != e.suite.sha256 {
            return Err(BundleError::SuiteChanged { path: suite_path, then: e.suite.sha256.clone(), now });
        }
    }
    Ok(suite_path)
}

/// The project folder `root` (the parent of `images/`) as a bundle carries it: each
/// file under `project/<its path relative to root>`, redacted.
struct Project<'a> {
    /// The project folder, canonical.
    root: &'a Path,
    /// The same folder, opened: every file is read through it.
    folder: &'a Folder,
    /// Redacts every copy.
    redactor: &'a Redactor,
}

impl Project<'_> {
    /// Adds file `p` to `entries`, read through [`Project::folder`]; returns its path
    /// inside the bundle.
    ///
    /// Errors: [`BundleError::Outside`] when `p` is not under the project folder;
    /// [`BundleError::Io`] when its folder can't be resolved; [`BundleError::Format`]
    /// when the confined layer refuses it (a link, a pipe, a second hard link, over
    /// [`MAX_OUTPUT_BYTES`]).
    fn add(&self, entries: &mut Entries, p: &Path) -> Result<String, BundleError> {
        let name = p
            .file_name()
            .ok_or_else(|| BundleError::Format { path: p.to_path_buf(), message: "not a file name".into() })?;
        let parent = p.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
        let abs = std::fs::canonicalize(parent).map_err(io("reading", p))?.join(name);
        let rel = abs
            .strip_prefix(self.root)
            .map_err(|_| BundleError::Outside { path: abs.clone(), root: self.root.to_path_buf() })?;
        let rel = rel.display().to_string();
        let refused =
            |e: crate::path_io::FileError| BundleError::Format { path: p.to_path_buf(), message: e.to_string() };
        let (file, _) = self.folder.open_file(&rel).map_err(refused)?;
        let exec = {
            use std::os::unix::fs::PermissionsExt;
            file.metadata().map(|m| m.permissions().mode() & 0o111 != 0).unwrap_or(false)
        };
        drop(file);
        let data = self.folder.read(&rel, MAX_OUTPUT_BYTES).map_err(refused)?;
        let key = format!("project/{rel}");
        let json = key.ends_with(".json");
        entries.insert(
            key.clone(),
            Entry { data: self.redactor.apply_file(&data, json), mode: if exec { 0o755 } else { 0o644 } },
        );
        Ok(key)
    }

    /// Adds the files VM `v` uses: its kernel's fragments and patches (or local image
    /// and modules), its profiles with their parameter defaults, its rootfs recipe and
    /// overlay.
    ///
    /// Errors: as [`Project::add`], and [`tree_files`] on a modules folder or an overlay.
    fn add_vm(&self, entries: &mut Entries, catalog: &Catalog, v: &crate::plan::VmPlan) -> Result<(), BundleError> {
        match &v.kernel {
            KernelSource::Source(s) => {
                for f in s.fragments.iter().chain(&s.patches) {
                    self.add(entries, f)?;
                }
            }
            KernelSource::Tree(t) => {
                for f in t.fragments.iter().chain(&t.patches) {
                    self.add(entries, f)?;
                }
            }
            KernelSource::Local { image, modules } => {
                self.add(entries, image)?;
                if let Some(m) = modules {
                    for f in tree_files(m)? {
                        self.add(entries, &f)?;
                    }
                }
            }
            KernelSource::Debian(_) => {}
        }
        for st in &v.steps {
            if let StepKind::Profile { profile } = &st.kind {
                if let Some(p) = catalog.profiles.get(profile) {
                    self.add(entries, p)?;
                    // Its parameters' defaults, which the bundled plan was compiled with.
                    let params = p.with_extension("yaml");
                    if params.is_file() {
                        self.add(entries, &params)?;
                    }
                }
            }
        }
        let recipe = catalog.dir.join("rootfs").join(format!("{}.yaml", v.rootfs));
        self.add(entries, &recipe)?;
        if let Some((r, _)) = catalog.rootfs.get(&v.rootfs) {
            for f in tree_files(&catalog.dir.join("rootfs").join(&r.overlay))? {
                self.add(entries, &f)?;
            }
        }
        Ok(())
    }
}

/// Whether `rel` (a path in a run folder) is a VM's packet capture,
/// `vms/<vm>/capture.pcap`: by its place, never by what `run.json` says (a crafted
/// `run.json` could name any file).
fn is_capture(rel: &str) -> bool {
    let parts: Vec<&str> = rel.split('/').collect();
    matches!(parts.as_slice(), ["vms", vm, f] if !vm.is_empty() && *f == crate::wire::run_dir::CAPTURE_FILE)
}

/// What [`add_run_folder`] says of the files it added.
struct RunFiles {
    /// The bundle paths of the logs that were cut.
    cut_logs: Vec<String>,
    /// The bundle paths of the packet captures, with their sizes (bytes).
    captures: Vec<(String, u64)>,
}

/// Adds the run folder's files under `run/`, redacted, with serial consoles and QEMU's
/// stderr cut to [`MAX_LOG_BYTES`], and packet captures byte for byte (see the module
/// docs).
///
/// Errors: [`BundleError::Format`] when the confined layer refuses a walk or a read (a
/// link made since [`open_run_folder`], a file over [`MAX_OUTPUT_BYTES`], a capture
/// over [`crate::wire::pcap::MAX_CAPTURE_BYTES`]), or a capture holds what redaction
/// replaces.
fn add_run_folder(
    entries: &mut Entries,
    run_folder: &Folder,
    run_dir: &Path,
    redactor: &Redactor,
) -> Result<RunFiles, BundleError> {
    let mut cut_logs = Vec::new();
    let mut captures = Vec::new();
    // Through the confined layer: nothing is followed, every read is bounded.
    let refused = |message: String| BundleError::Format { path: run_dir.to_path_buf(), message };
    for (rel, kind) in run_folder.walk().map_err(|e| refused(e.to_string()))? {
        // (Links were refused above; one made since is refused by the read.)
        if !matches!(kind, Kind::File(_)) || rel.ends_with(".tmp") {
            continue;
        }
        if is_capture(&rel) {
            let data =
                run_folder.read(&rel, crate::wire::pcap::MAX_CAPTURE_BYTES).map_err(|e| refused(e.to_string()))?;
            if let Some((at, placeholder)) = redactor.first_leak(&data) {
                return Err(BundleError::Format {
                    path: run_dir.join(&rel),
                    message: format!(
                        "byte {at} holds what a bundle replaces with {placeholder} in text files (a host path, the host name or the user name); a packet capture is carried byte for byte, never redacted, so it can't go into a bundle: remove it from a copy of the run folder and bundle that"
                    ),
                });
            }
            captures.push((format!("run/{rel}"), data.len() as u64));
            entries.insert(format!("run/{rel}"), Entry { data, mode: 0o644 });
            continue;
        }
        let mut data = run_folder.read(&rel, MAX_OUTPUT_BYTES).map_err(|e| refused(e.to_string()))?;
        let f = PathBuf::from(&rel);
        let name = f.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        if name == "console.log" || name == "qemu.stderr" {
            if let Some(c) = cut_log(&data, MAX_LOG_BYTES) {
                cut_logs.push(format!("run/{rel}"));
                data = c;
            }
        }
        let json = rel.ends_with(".json");
        entries.insert(format!("run/{rel}"), Entry { data: redactor.apply_file(&data, json), mode: 0o644 });
    }
    Ok(RunFiles { cut_logs, captures })
}

/// Adds the kernels themselves (`--with-images`), once per kernel label: pinned
/// packages under `packages/`, source-built and local kernels' cache entries under
/// `kernels/<n>/`.
///
/// Errors: [`BundleError::Image`] when a package can't be fetched or a kernel resolved;
/// [`BundleError::Io`] when a file can't be read.
fn add_kernels(
    entries: &mut Entries,
    plan: &Plan,
    cache: &Cache,
) -> Result<(Vec<BundledPackage>, Vec<BundledKernel>), BundleError> {
    let mut packages = Vec::new();
    let mut kernels = Vec::new();
    let mut seen = BTreeSet::new();
    for v in &plan.vms {
        if !seen.insert(v.kernel.label()) {
            continue;
        }
        match &v.kernel {
            KernelSource::Debian(k) => {
                let (deb, _) = crate::infra::images::debian::fetch_deb(cache, &k.filename, k.size, &k.sha256)?;
                let name = deb.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
                let path = format!("packages/{name}");
                let data = std::fs::read(&deb).map_err(io("reading", &deb))?;
                entries.insert(path.clone(), Entry { data, mode: 0o644 });
                packages.push(BundledPackage {
                    package: k.package.clone(),
                    version: k.version.clone(),
                    sha256: k.sha256.clone(),
                    path,
                });
            }
            KernelSource::Source(_) | KernelSource::Tree(_) | KernelSource::Local { .. } => {
                let (art, _) = crate::infra::images::kernel::resolve_kernel(cache, &v.kernel)?;
                let path = format!("kernels/{}", kernels.len() + 1);
                for name in ["vmlinuz", "release", "config", "initramfs-modules.cpio", "modules.ext4"] {
                    let f = art.dir.join(name);
                    if f.is_file() {
                        let data = std::fs::read(&f).map_err(io("reading", &f))?;
                        entries.insert(format!("{path}/{name}"), Entry { data, mode: 0o644 });
                    }
                }
                kernels.push(BundledKernel { label: v.kernel.label(), release: art.release.clone(), path });
            }
        }
    }
    Ok((packages, kernels))
}

/// Adds `BUNDLE.json` (`info`, redacted) and then `MANIFEST`, the SHA-256 of every
/// other entry, each of the `captures` (bundle path, bytes) preceded by its size as
/// `# bytes <size> <path>` (a comment to `sha256sum -c`, checked by [`super::archive::verify`]).
fn add_description(entries: &mut Entries, info: &BundleInfo, redactor: &Redactor, captures: &[(String, u64)]) {
    let json = serde_json::to_string_pretty(info).expect("serializable") + "\n";
    entries.insert(BUNDLE_FILE.into(), Entry { data: redactor.apply(json.as_bytes()), mode: 0o644 });
    let size = |k: &str| captures.iter().find(|(p, _)| p == k).map(|(_, n)| format!("{MANIFEST_SIZE} {n} {k}\n"));
    let manifest: String = entries
        .iter()
        .map(|(k, e)| format!("{}{}  {k}\n", size(k).unwrap_or_default(), crate::infra::hash::sha256_hex(&e.data)))
        .collect();
    entries.insert(MANIFEST_FILE.into(), Entry { data: manifest.into_bytes(), mode: 0o644 });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_logs_keep_head_and_tail() {
        let data: Vec<u8> = (0..1000u32).flat_map(|i| format!("line {i}\n").into_bytes()).collect();
        let cut = cut_log(&data, 400).unwrap();
        assert!(cut.starts_with(b"line 0\n"));
        assert!(cut.ends_with(b"line 999\n"));
        assert!(String::from_utf8_lossy(&cut).contains("bytes cut here"));
        assert!(cut_log(b"short", 400).is_none());
    }
}
