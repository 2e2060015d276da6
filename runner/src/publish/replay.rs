//! `vmrepro replay BUNDLE` and `vmrepro compare RUN_A RUN_B`.
//!
//! Replay unpacks the bundle into a private temp folder and checks it against its
//! `MANIFEST`, loads the bundled suite against the bundled `images/` folder, checks
//! every pinned kernel package's SHA-256 (the bundled `.deb` with `--with-images`, the
//! cached one, or the one fetched from the archive now: a package the archive dropped
//! is reported as such), runs the suite with the same pinned images, analyses the new
//! run and prints it against the bundled `results.json` ([`crate::report::diff`]).
//!
//! Compare opens two run folders or bundles and prints the same diff.

use std::path::{Path, PathBuf};

use super::bundle::{extract_with, Budget, BundleError, Extracted};
use crate::analyse::results::read_results;
use crate::analyse::{analyse_dir, analyse_read_only, AnalyseError, Analysis, Results, RESULTS_FILE};
use crate::events::EventSink;
use crate::infra::images::kernel::KernelSource;
use crate::infra::images::{Cache, CacheOutcome, ImageError};
use crate::path_io::Folder;
use crate::plan::Plan;
use crate::report::diff::{diff, Diff};
use crate::run::environment::{self, file_sha256, Environment};
use crate::run::record::{read_record, RunDirError};
use crate::run::{RunError, RunOptions, RunOutcome};

/// Errors of replay and compare.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    /// The bundle is unreadable, damaged or of another format.
    #[error(transparent)]
    Bundle(#[from] BundleError),
    /// The bundled suite doesn't load: the bundle, then the loader's message with
    /// paths relative to the bundle.
    #[error("{0}")]
    Suite(String),
    /// A pinned package can't be had any more.
    #[error("{0}")]
    PackageGone(String),
    /// A package's checksum is wrong.
    #[error("{0}")]
    Checksum(String),
    /// The run failed to start or record.
    #[error(transparent)]
    Run(#[from] RunError),
    /// A run folder can't be analysed.
    #[error(transparent)]
    Analyse(#[from] AnalyseError),
}

/// How to replay.
#[derive(Clone)]
pub struct ReplayOptions {
    /// Where the new run folder goes (`<root>/<suite>/<timestamp>/`).
    pub results_root: PathBuf,
    /// Artefact cache (the bundled kernels are imported into it).
    pub cache: Cache,
    /// Progress.
    pub events: EventSink,
    /// Boot every VM and save no VM state ([`RunOptions::fresh_boot`]).
    pub fresh_boot: bool,
    /// Bind each QEMU process to one host CPU ([`RunOptions::pin`]).
    pub pin: bool,
}

impl std::fmt::Debug for ReplayOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReplayOptions").field("results_root", &self.results_root).finish()
    }
}

/// What a replay found.
#[derive(Debug)]
pub struct Replayed {
    /// The new run.
    pub outcome: RunOutcome,
    /// The new run, analysed (`None` when it could not be).
    pub now: Option<Analysis>,
    /// Then against now.
    pub diff: Option<Diff>,
    /// Differences of the environment worth knowing (guest packages, rootfs key).
    pub notes: Vec<String>,
}

/// A prepared replay: the bundle unpacked and checked, its suite loaded, its packages
/// verified. Run it with [`Prepared::run`].
#[derive(Debug)]
pub struct Prepared {
    /// The bundle's temp folder, held until the replay is dropped (then removed).
    _tmp: tempfile::TempDir,
    /// The unpacked bundle.
    pub bundle: Extracted,
    /// The bundled suite, compiled.
    pub plan: Plan,
    /// The bundled catalog.
    pub catalog: crate::infra::images::Catalog,
    /// One line per checked package.
    pub checks: Vec<String>,
}

/// Unpacks and checks `bundle`, loads its suite and verifies (fetching if needed) the
/// pinned kernel packages.
///
/// Unpacks within `budget` ([`extract_with`]).
///
/// Errors: the bundle is damaged or refused ([`ReplayError::Bundle`]), its suite
/// doesn't load, a package is gone from the archive or has the wrong checksum.
///
/// Used by the integration tests (the command removes its temp folder on a signal,
/// through [`replay_temp`] and [`prepare_in`]).
#[cfg_attr(vmrepro_dead_code, allow(dead_code))]
pub fn prepare(bundle: &Path, cache: &Cache, budget: &Budget) -> Result<Prepared, ReplayError> {
    prepare_in(replay_temp()?, bundle, cache, budget)
}

/// A replay's private temp folder (`$TMPDIR/vmrepro-replay-XXXXXX`, mode 0700), for
/// [`prepare_in`]; the caller knows its path, to remove it on a signal.
///
/// Errors: [`BundleError::Io`].
pub fn replay_temp() -> Result<tempfile::TempDir, ReplayError> {
    temp_folder("vmrepro-replay-")
}

/// A private temp folder for [`open_in`] to unpack a bundle in
/// (`$TMPDIR/vmrepro-compare-XXXXXX`, mode 0700); the caller knows its path, to
/// remove it on a signal.
///
/// Errors: [`BundleError::Io`].
pub fn compare_temp() -> Result<tempfile::TempDir, ReplayError> {
    temp_folder("vmrepro-compare-")
}

/// `message` with the temp folder `tmp` a bundle is unpacked in left out of every
/// path (`/tmp/vmrepro-replay-XXXXXX/b/run` becomes `b/run`): the folder says nothing
/// and is gone once the command ends.
fn inside(message: &str, tmp: &Path) -> String {
    message.replace(&format!("{}/", tmp.display()), "")
}

/// `$TMPDIR/<prefix>XXXXXX`, mode 0700.
fn temp_folder(prefix: &str) -> Result<tempfile::TempDir, ReplayError> {
    Ok(tempfile::Builder::new().prefix(prefix).tempdir().map_err(|e| BundleError::Io {
        what: "creating temp folder",
        path: std::env::temp_dir(),
        source: e,
    })?)
}

/// [`prepare`] unpacking into `tmp` (held by the result, removed when it is dropped).
///
/// Errors: as [`prepare`].
pub fn prepare_in(
    tmp: tempfile::TempDir,
    bundle: &Path,
    cache: &Cache,
    budget: &Budget,
) -> Result<Prepared, ReplayError> {
    let ex = extract_with(bundle, tmp.path(), budget)?;
    let suite = ex.top.join(&ex.info.suite_file);
    let images = ex.top.join(&ex.info.images_dir);
    // The one call site that loads a suite from a bundle: confined to the unpacked
    // bundle, so a crafted bundle can't make the runner read files outside it.
    let mut trees = crate::infra::images::tree::Trees::current().map_err(ReplayError::Suite)?;
    for t in &ex.info.trees {
        trees.pin(&t.tree, &t.rev, t.commit().map_err(ReplayError::Suite)?);
    }
    let options = crate::suite::LoadOptions { confine_to: Some(ex.top.clone()), trees };
    let (plan, catalog) = crate::suite::load_with(&suite, Some(&images), &options).map_err(|e| {
        ReplayError::Suite(format!(
            "{}: the bundled suite does not load: {}",
            bundle.display(),
            inside(&e.to_string(), tmp.path())
        ))
    })?;
    let mut checks = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    for v in &plan.vms {
        if !seen.insert(v.kernel.label()) {
            continue;
        }
        match &v.kernel {
            KernelSource::Debian(k) => {
                checks.push(verify_deb(&ex, cache, &k.package, &k.version, &k.filename, k.size, &k.sha256)?)
            }
            KernelSource::Source(_) | KernelSource::Tree(_) => {
                if let Some(b) = ex.info.kernels.iter().find(|b| b.label == v.kernel.label()) {
                    let key = crate::infra::images::kernel::kernel_key(&v.kernel)
                        .map_err(|e| ReplayError::Checksum(e.to_string()))?;
                    let from = ex.top.join(&b.path);
                    let (_, outcome) = cache
                        .get_or_build("kernel", &key, |tmp| {
                            for f in crate::infra::images::rootfs::walk_files(&from)? {
                                let name = f.file_name().unwrap_or_default();
                                std::fs::copy(&f, tmp.join(name)).map_err(ImageError::io("importing kernel", &f))?;
                            }
                            Ok(())
                        })
                        .map_err(|e| ReplayError::Checksum(e.to_string()))?;
                    checks.push(format!(
                        "{}: built kernel {} {} (its files checked against MANIFEST)",
                        v.kernel.label(),
                        b.release,
                        if outcome == CacheOutcome::Built {
                            "imported from the bundle"
                        } else {
                            "already in the cache"
                        }
                    ));
                } else if let KernelSource::Source(sk) = &v.kernel {
                    let s = &sk.source;
                    checks.push(verify_deb(&ex, cache, &s.package, &s.version, &s.filename, s.size, &s.sha256)?);
                } else if let KernelSource::Tree(tk) = &v.kernel {
                    checks.push(match &tk.checkout {
                        Some(c) => format!("{}: built here from the tree mapped at {}", v.kernel.label(), c.display()),
                        None => format!(
                            "{}: tree `{}` is not mapped here and the bundle has no built kernel (made without --with-images): the run needs `--tree {}=PATH`",
                            v.kernel.label(),
                            tk.tree,
                            tk.tree
                        ),
                    });
                }
            }
            KernelSource::Local { image, .. } => {
                checks.push(format!(
                    "{}: local image sha256 {}",
                    v.kernel.label(),
                    file_sha256(image).unwrap_or_else(|e| e.to_string())
                ));
            }
        }
    }
    Ok(Prepared { _tmp: tmp, bundle: ex, plan, catalog, checks })
}

/// Checks one pinned `.deb`: the bundled copy (imported into the cache), else the
/// cached copy, else a fresh download; each against the pinned SHA-256.
fn verify_deb(
    ex: &Extracted,
    cache: &Cache,
    package: &str,
    version: &str,
    filename: &str,
    size: u64,
    sha256: &str,
) -> Result<String, ReplayError> {
    let base = Path::new(filename).file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    if let Some(b) = ex.info.packages.iter().find(|p| p.sha256 == sha256) {
        let f = ex.top.join(&b.path);
        let got = file_sha256(&f).map_err(|e| ReplayError::Checksum(format!("{}: {e}", f.display())))?;
        if got != sha256 {
            return Err(ReplayError::Checksum(format!(
                "the bundled {package} {version} has SHA-256 {got}, the pin says {sha256}"
            )));
        }
        cache
            .get_or_build("debs", sha256, |tmp| {
                std::fs::copy(&f, tmp.join(&base)).map(|_| ()).map_err(ImageError::io("importing package", &f))
            })
            .map_err(|e| ReplayError::Checksum(e.to_string()))?;
        return Ok(format!("{package} {version}: sha256 {sha256} ok (carried in the bundle)"));
    }
    let cached = cache.entry_path("debs", sha256).join(&base);
    if cached.is_file() {
        let got = file_sha256(&cached).map_err(|e| ReplayError::Checksum(format!("{}: {e}", cached.display())))?;
        if got != sha256 {
            return Err(ReplayError::Checksum(format!(
                "the cached {package} {version} ({}) has SHA-256 {got}, the pin says {sha256}; remove that cache entry",
                cached.display()
            )));
        }
        return Ok(format!("{package} {version}: sha256 {sha256} ok (cached)"));
    }
    match crate::infra::images::debian::fetch_deb(cache, filename, size, sha256) {
        Ok(_) => Ok(format!("{package} {version}: sha256 {sha256} ok (fetched from the archive now)")),
        Err(e) => Err(ReplayError::PackageGone(format!(
            "the pinned kernel package {package} {version} cannot be had: {e}\n\
             Debian's archive drops superseded kernel versions at every point release. Replay a bundle made with \
             `vmrepro bundle --with-images`, or set VMREPRO_DEBIAN_MIRROR to a snapshot archive that still has {filename}."
        ))),
    }
}

impl Prepared {
    /// Runs the bundled suite, analyses it (writing its reports) and compares it with
    /// the bundled results.
    ///
    /// Errors: the run folder can't be written, or the bundled results can't be read.
    pub async fn run(
        self,
        opts: &ReplayOptions,
        interrupt: impl std::future::Future<Output = ()>,
    ) -> Result<Replayed, ReplayError> {
        let run_opts = RunOptions {
            results_root: opts.results_root.clone(),
            cache: opts.cache.clone(),
            catalog: self.catalog.clone(),
            events: opts.events.clone(),
            run_dir: None,
            fresh_boot: opts.fresh_boot,
            pin: opts.pin,
            state_ram: Default::default(),
        };
        let outcome = crate::run::run(&self.plan, &run_opts, interrupt).await?;
        let then_dir = self.bundle.top.join(&self.bundle.info.run);
        let then = read_run_results(&then_dir).map_err(|e| ReplayError::Run(e.into()))?;
        let now = analyse_dir(&outcome.dir).ok();
        if let Some(a) = &now {
            let _ = crate::report::published::write_analysed(a);
        }
        let diff = now.as_ref().map(|a| diff(&then, &a.results, "then", "now"));
        let notes = environment_notes(environment::read(&then_dir).as_ref(), environment::read(&outcome.dir).as_ref());
        Ok(Replayed { outcome, now, diff, notes })
    }
}

/// What differs between two runs' environments that a reader of the diff must know.
pub fn environment_notes(then: Option<&Environment>, now: Option<&Environment>) -> Vec<String> {
    let (Some(a), Some(b)) = (then, now) else { return vec![] };
    let mut n = Vec::new();
    if a.host.cpu_model != b.host.cpu_model {
        n.push(format!("CPU: then {}, now {}", a.host.cpu_model, b.host.cpu_model));
    }
    if a.host.qemu_version != b.host.qemu_version {
        n.push(format!("QEMU: then {}, now {}", a.host.qemu_version, b.host.qemu_version));
    }
    if a.host.kernel != b.host.kernel {
        n.push(format!("host kernel: then {}, now {}", a.host.kernel, b.host.kernel));
    }
    for ra in &a.rootfs {
        if let Some(rb) = b.rootfs.iter().find(|r| r.name == ra.name) {
            if ra.cache_key != rb.cache_key {
                n.push(format!("rootfs {}: cache key differs (then {}, now {})", ra.name, ra.cache_key, rb.cache_key));
            }
            for (p, v) in &ra.packages {
                match rb.packages.get(p) {
                    Some(w) if w != v => n.push(format!("guest package {p}: then {v}, now {w}")),
                    None => n.push(format!("guest package {p}: then {v}, now absent")),
                    _ => {}
                }
            }
        }
    }
    n
}

/// A run folder or a bundle, opened for [`compare`].
#[derive(Debug)]
pub struct Opened {
    /// Its results.
    pub results: Results,
    /// Its environment, if recorded.
    pub environment: Option<Environment>,
    _tmp: Option<tempfile::TempDir>,
}

/// The `results.json` of run folder `dir`, after checking its `run.json` (schema and
/// the paths it names, [`read_record`]); both through [`Folder`] (a link, pipe or
/// device there is refused by name).
fn read_run_results(dir: &Path) -> Result<Results, RunDirError> {
    read_record(dir)?;
    read_results(&Folder::open(dir)?, RESULTS_FILE)
}

/// Opens `path`: a run folder (its `results.json`, analysed first if it has none) or a
/// bundle (unpacked within `budget` and checked). Writes nothing into a run folder.
/// `run.json` and `results.json` must have a schema this vmrepro reads, and a
/// `results.json` that is a link, pipe or device is refused (never analysed around).
///
/// Errors: neither, or unreadable, or refused.
///
/// Used by the integration tests and the fuzz harness (the command goes through
/// [`compare_temp`] and [`open_in`], to remove the temp folder on a signal).
#[cfg_attr(vmrepro_dead_code, allow(dead_code))]
pub fn open(path: &Path, budget: &Budget) -> Result<Opened, ReplayError> {
    open_in(compare_temp()?, path, budget)
}

/// [`open`] unpacking a bundle into `tmp` (held by the result, removed when it is
/// dropped; unused, and removed at once, for a run folder).
///
/// Errors: as [`open`].
pub fn open_in(tmp: tempfile::TempDir, path: &Path, budget: &Budget) -> Result<Opened, ReplayError> {
    if path.is_dir() {
        // Only reads: a run folder without results.json is analysed in memory.
        let folder = Folder::open(path).map_err(|e| ReplayError::Run(RunDirError::from(e).into()))?;
        let missing = matches!(folder.kind(RESULTS_FILE), Ok(None));
        let results =
            if missing { analyse_read_only(path)?.results } else { read_run_results(path).map_err(RunError::from)? };
        return Ok(Opened { results, environment: environment::read(path), _tmp: None });
    }
    let ex = extract_with(path, tmp.path(), budget)?;
    let dir = ex.top.join(&ex.info.run);
    let results = read_run_results(&dir)
        .map_err(|e| BundleError::Format { path: path.to_path_buf(), message: inside(&e.to_string(), tmp.path()) })?;
    Ok(Opened { results, environment: environment::read(&dir), _tmp: Some(tmp) })
}

/// The diff of two opened runs, `a` as "A" and `b` as "B".
pub fn compare(a: &Opened, b: &Opened) -> (Diff, Vec<String>) {
    (diff(&a.results, &b.results, "A", "B"), environment_notes(a.environment.as_ref(), b.environment.as_ref()))
}
