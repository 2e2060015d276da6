//! `vmrepro export --kcidb RUN_DIR`: a run folder as KCIDB JSON, the report format of
//! the Linux kernel CI database (KernelCI's KCIDB), schema **v5.3**, the newest the
//! `kcidb-io` package (PyPI, version 141) validates (`kcidb_io.schema.V5_3`).
//!
//! # Mapping
//!
//! ```text
//! version      {major: 5, minor: 3}
//! checkouts[]  one per kernel source: a pinned Debian package (package, version,
//!              suite), a Debian source package with the patches applied to it
//!              (patchset_hash: SHA-256 over the patches' newline-terminated SHA-256
//!              sums, as KCIDB defines it), a local image, or, for runs without
//!              environment.json, the plan's kernel label
//! builds[]     one per kernel: its checkout, architecture x86_64, the config (a source
//!              build's fragments and final .config SHA-256), uname -r, the cache key;
//!              status PASS when the run resolved the kernel image
//! tests[]      one per measurement and VM, path `<suite>.<measurement>`: status from
//!              the outcomes, checks and verdict (below), number = the metric's median
//!              with its unit, comment = the report's summary line, misc = the
//!              verdict, its test and interval, the smallest detectable change, the
//!              summary of the repeats; plus `<suite>.<measurement>.elapsed_s` (s) and
//!              `.throughput_mb_s` (MB/s, 10^6 bytes/s) when they are not the metric,
//!              status DONE (KCIDB's status of an auxiliary numeric output)
//! ```
//!
//! A test's status: `SKIP` when the VM had no iteration; `MISS` when none ran; else the
//! worst of its iterations' (`crashed` or `timed out` → `FAIL`: the kernel died or
//! hung; `setup failed`, `action failed`, `signal N` → `ERROR`: the test's own code;
//! `not run` → `MISS`) and of its problems (a failed check or an unexpected exit status
//! → `FAIL`); when all of those passed, the verdict's: `slower`/`worse` and `different
//! outcome` → `FAIL`, `same`/`faster` and `same outcome` → `PASS`, `undecided` →
//! `DONE` (a number, no statement about the code; also a candidate without numbers to
//! compare), and `PASS` for a baseline.
//!
//! Ids are `vmrepro:<32 hex digits>`, the start of a SHA-256 of what the object is:
//! checkouts and builds of the kernel's facts (the same kernel has the same ids in
//! every run), tests of the run (suite, `run.json`'s `started`, suite file) and the
//! measurement, VM and metric, so exporting a run again gives the same ids.
//!
//! The run folder is untrusted (SECURITY.md): it is read only through
//! [`analyse_read_only`] and [`environment::read`] (confined, bounded, nothing
//! written into it); host paths (fragment and patch paths, the cache) are not
//! exported, only file names and SHA-256 sums; every string KCIDB constrains has its
//! NUL characters replaced and every test path component is reduced to KCIDB's path
//! grammar (`[a-zA-Z0-9_-]+`), so a crafted run still exports valid KCIDB.

use std::path::Path;

use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::analyse::{analyse_read_only, AnalyseError, Analysis};
use crate::infra::qemu::args::Accelerator;
use crate::measure::analysis::{MeasurementResult, Outcome, VmResult, OUTCOME_METRIC};
use crate::measure::stats::{Comparison, Summary, Verdict};
use crate::report::published::{plan_vms, summary_line, unit_of, PlanVm};
use crate::run::environment::{self, Environment, FileHash, KernelOrigin};

/// The KCIDB origin (CI system name) of everything vmrepro exports.
pub const ORIGIN: &str = "vmrepro";
/// The KCIDB schema version written: major.
pub const SCHEMA_MAJOR: u32 = 5;
/// The KCIDB schema version written: minor.
pub const SCHEMA_MINOR: u32 = 3;

/// A KCIDB report (`kcidb_io.schema.V5_3`'s top level).
#[derive(Debug, Clone, Serialize)]
pub struct Kcidb {
    /// Schema version.
    pub version: SchemaVersion,
    /// Kernel sources.
    pub checkouts: Vec<Checkout>,
    /// Kernels.
    pub builds: Vec<Build>,
    /// Measurements per VM.
    pub tests: Vec<Test>,
}

/// `version`.
#[derive(Debug, Clone, Serialize)]
pub struct SchemaVersion {
    /// [`SCHEMA_MAJOR`].
    pub major: u32,
    /// [`SCHEMA_MINOR`].
    pub minor: u32,
}

/// A KCIDB checkout: one kernel source.
#[derive(Debug, Clone, Serialize)]
pub struct Checkout {
    /// `vmrepro:<hash of misc>`.
    pub id: String,
    /// [`ORIGIN`].
    pub origin: String,
    /// `debian` for Debian packages and source packages.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tree_name: Option<String>,
    /// The source in words (`Debian package linux-image-6.1.0-50-cloud-amd64 6.1.176-1 (bookworm)`).
    pub comment: String,
    /// SHA-256 over the patches' SHA-256 sums (`""`: none applied; absent: unknown).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub patchset_hash: Option<String>,
    /// The commit built, for a kernel from a git tree (40 hex digits).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub git_commit_hash: Option<String>,
    /// `git describe` of that commit.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub git_commit_name: Option<String>,
    /// What the source is.
    pub misc: SourceFacts,
}

/// What a kernel source is (a checkout's `misc`; its id hashes this).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum SourceFacts {
    /// A pinned Debian binary package.
    Debian {
        /// Package name.
        package: String,
        /// Version.
        version: String,
        /// Debian suite whose index listed it.
        suite: String,
    },
    /// A Debian source package, with patches.
    Source {
        /// Source package name.
        package: String,
        /// Version.
        version: String,
        /// SHA-256 of the source `.deb`.
        sha256: String,
        /// Patches in order: file name and SHA-256.
        patches: Vec<NamedHash>,
    },
    /// A commit of a git tree the user mapped, with patches.
    Tree {
        /// The tree's short name in the suite.
        tree: String,
        /// The commit id.
        commit: String,
        /// Patches in order: file name and SHA-256.
        patches: Vec<NamedHash>,
    },
    /// A local kernel image.
    Local {
        /// Its file name.
        image: String,
        /// Its SHA-256.
        sha256: String,
    },
    /// A run without `environment.json`: only the plan's kernel label is known.
    Label {
        /// `debian:6.1 (linux-image-… 6.1.176-1)`, `kernel linux-source-6.1 from source + x.patch`.
        kernel: String,
    },
}

/// A file name and its SHA-256 (no folder: host paths are not exported).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NamedHash {
    /// File name.
    pub name: String,
    /// SHA-256, hex.
    pub sha256: String,
}

/// A KCIDB build: one kernel.
#[derive(Debug, Clone, Serialize)]
pub struct Build {
    /// `vmrepro:<hash of the checkout id and misc>`.
    pub id: String,
    /// Its checkout.
    pub checkout_id: String,
    /// [`ORIGIN`].
    pub origin: String,
    /// The kernel as `run.json` names it.
    pub comment: String,
    /// `x86_64` (every VM is `qemu-system-x86_64`).
    pub architecture: String,
    /// A source build's configuration: `defconfig+kvm_guest.config` and its fragments.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub config_name: Option<String>,
    /// `PASS` when the run resolved the kernel image (fetched, built or cached).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<Status>,
    /// What the kernel is.
    pub misc: BuildFacts,
}

/// What a kernel is beyond its source (a build's `misc`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BuildFacts {
    /// `uname -r` (empty: unknown).
    pub release: String,
    /// SHA-256 of the Debian `.deb`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deb_sha256: Option<String>,
    /// A source build's config fragments in order.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub fragments: Vec<NamedHash>,
    /// A source build's final `.config`, SHA-256.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub config_sha256: Option<String>,
    /// The image cache key (SHA-256 of every input of the kernel) from `run.json`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cache_key: Option<String>,
}

/// A KCIDB status, highest priority first (KCIDB's order).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Status {
    /// The tested code is faulty.
    Fail,
    /// The test's own code failed.
    Error,
    /// The test did not run (the harness).
    Miss,
    /// The tested code is correct.
    Pass,
    /// A number, no statement about the code.
    Done,
    /// Not applicable.
    Skip,
}

/// A KCIDB test: one measurement on one VM, or one of its auxiliary numbers.
#[derive(Debug, Clone, Serialize)]
pub struct Test {
    /// `vmrepro:<hash of the run, measurement, VM and path>`.
    pub id: String,
    /// The VM's kernel.
    pub build_id: String,
    /// [`ORIGIN`].
    pub origin: String,
    /// `<suite>.<measurement>[.elapsed_s|.throughput_mb_s]`.
    pub path: String,
    /// The report's summary line (candidates) or the baseline's median.
    pub comment: String,
    /// See the module docs.
    pub status: Status,
    /// The median over the counted repeats.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub number: Option<Number>,
    /// When its first iteration started (RFC 3339, UTC).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub start_time: Option<String>,
    /// Its iterations' steps together, seconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub duration: Option<f64>,
    /// The VM.
    pub environment: TestEnvironment,
    /// The verdict and the repeats (absent on auxiliary numbers).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub misc: Option<TestFacts>,
}

/// A KCIDB number.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Number {
    /// The value (finite).
    pub value: f64,
    /// `s`, `MB/s`, the suite's unit; absent: dimensionless (a count).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unit: Option<String>,
}

/// A test's `environment`: the VM it ran in.
#[derive(Debug, Clone, Serialize)]
pub struct TestEnvironment {
    /// `VM client-6-1, 384 MiB, 1 vCPU, tcg`.
    pub comment: String,
    /// The same, as fields.
    pub misc: VmFacts,
}

/// The VM of a test.
#[derive(Debug, Clone, Serialize)]
pub struct VmFacts {
    /// VM name.
    pub vm: String,
    /// Guest memory, MiB.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory_mib: Option<u64>,
    /// vCPUs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpus: Option<u32>,
    /// Acceleration used.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub accel: Option<Accelerator>,
}

/// A test's `misc`: what the KCIDB fields don't carry.
#[derive(Debug, Clone, Serialize)]
pub struct TestFacts {
    /// Measurement name.
    pub measurement: String,
    /// The verdict's metric.
    pub metric: String,
    /// The VM it is compared with.
    pub baseline: String,
    /// The verdict in words (absent for a baseline).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub verdict: Option<String>,
    /// How each iteration ended, counted (`exit 0 ×3`).
    pub outcomes: String,
    /// The metric over the counted repeats.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub summary: Option<Summary>,
    /// The comparison: ratio, verdict rule, test (p-value, interval), smallest
    /// detectable change (`results.json`'s).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub comparison: Option<Comparison>,
    /// This VM's problems in the measurement.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub problems: Vec<String>,
}

/// Reads run folder `dir` (without writing into it) and returns it as KCIDB.
///
/// Errors: as [`analyse_read_only`] (not a run folder, a file refused or unreadable);
/// `plan.json`'s VMs can't be read.
pub fn export(dir: &Path) -> Result<Kcidb, AnalyseError> {
    let a = analyse_read_only(dir)?;
    let vms = plan_vms(dir)?;
    Ok(kcidb(&a, environment::read(dir).as_ref(), &vms))
}

/// The KCIDB of an analysed run: `env` from its `environment.json` (if any), `vms`
/// from its `plan.json`. A pure function.
pub fn kcidb(a: &Analysis, env: Option<&Environment>, vms: &[PlanVm]) -> Kcidb {
    let mut checkouts: Vec<Checkout> = Vec::new();
    let mut builds: Vec<Build> = Vec::new();
    let mut build_of = std::collections::BTreeMap::new();
    let mut names: Vec<&str> = vms.iter().map(|v| v.name.as_str()).collect();
    for m in &a.results.measurements {
        names.extend(m.vms.iter().map(|v| v.vm.as_str()).filter(|n| !vms.iter().any(|p| p.name == *n)));
    }
    for name in names {
        let (c, b) = kernel(a, env, vms, name);
        if !checkouts.iter().any(|x| x.id == c.id) {
            checkouts.push(c);
        }
        build_of.insert(name.to_string(), b.id.clone());
        if !builds.iter().any(|x| x.id == b.id) {
            builds.push(b);
        }
    }
    let run_key = [a.record.suite.as_str(), a.record.started.as_str(), a.record.suite_file.as_str()];
    let mut tests = Vec::new();
    for m in &a.results.measurements {
        for v in &m.vms {
            let build_id = build_of.get(&v.vm).cloned().unwrap_or_default();
            tests.extend(measurement_tests(a, vms, &run_key, m, v, &build_id));
        }
    }
    Kcidb { version: SchemaVersion { major: SCHEMA_MAJOR, minor: SCHEMA_MINOR }, checkouts, builds, tests }
}

/// `vmrepro:` and the first 32 hex digits of the SHA-256 of `parts` (each
/// length-prefixed, so no two lists of parts hash alike).
fn id(parts: &[&str]) -> String {
    let mut h = Sha256::new();
    for p in parts {
        h.update((p.len() as u64).to_le_bytes());
        h.update(p.as_bytes());
    }
    format!("{ORIGIN}:{}", &hex::encode(h.finalize())[..32])
}

/// `s` with every NUL replaced (KCIDB's strings are `^[^\0]*$`).
fn text(s: &str) -> String {
    s.replace('\0', "\u{fffd}")
}

/// `s` as one KCIDB test path component: `[a-zA-Z0-9_-]+`, anything else `_`.
fn path_part(s: &str) -> String {
    let p: String =
        s.chars().map(|c| if c.is_ascii_alphanumeric() || matches!(c, '_' | '-') { c } else { '_' }).collect();
    if p.is_empty() {
        "_".into()
    } else {
        p
    }
}

/// The last component of a (relative or host) path: no folder is exported.
fn file_name(path: &str) -> String {
    text(path.rsplit('/').next().unwrap_or(path))
}

fn named(files: &[FileHash]) -> Vec<NamedHash> {
    files.iter().map(|f| NamedHash { name: file_name(&f.path), sha256: text(&f.sha256) }).collect()
}

/// KCIDB's patchset hash: the SHA-256 of each patch's SHA-256 (hex) and a newline, in
/// order (`sha256sum *.patch | cut -c-64 | sha256sum`); `""` without patches.
pub fn patchset_hash(patch_sha256s: &[&str]) -> String {
    if patch_sha256s.is_empty() {
        return String::new();
    }
    let mut h = Sha256::new();
    for s in patch_sha256s {
        h.update(s.as_bytes());
        h.update(b"\n");
    }
    hex::encode(h.finalize())
}

fn is_sha256(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
}

/// For a kernel built here (a source package or a tree): records its fragments and final
/// `.config` in `facts`, and returns the patchset hash (`None` when a patch could not be
/// read and has no SHA-256), the patches by name, ` + a.patch + b.patch` for the
/// comment, and the config name (`defconfig+kvm_guest.config+<fragments>`).
fn built_here(
    facts: &mut BuildFacts,
    fragments: &[FileHash],
    patches: &[FileHash],
    config_sha256: Option<&str>,
) -> (Option<String>, Vec<NamedHash>, String, String) {
    facts.fragments = named(fragments);
    facts.config_sha256 = config_sha256.map(text);
    let sums: Vec<&str> = patches.iter().map(|p| p.sha256.as_str()).collect();
    // A patch that could not be read has no SHA-256: the patchset's is unknown.
    let hash = sums.iter().all(|s| is_sha256(s)).then(|| patchset_hash(&sums));
    let names = named(patches);
    let with: String = names.iter().map(|p| format!(" + {}", p.name)).collect();
    let config = std::iter::once("defconfig+kvm_guest.config".to_string())
        .chain(facts.fragments.iter().map(|f| f.name.clone()))
        .collect::<Vec<_>>()
        .join("+");
    (hash, names, with, config)
}

/// The checkout and build of VM `name`'s kernel.
fn kernel(a: &Analysis, env: Option<&Environment>, vms: &[PlanVm], name: &str) -> (Checkout, Build) {
    let rec = a.record.vm(name);
    let label = rec.map(|r| r.kernel.clone()).filter(|k| !k.is_empty());
    let plan_label = vms.iter().find(|v| v.name == name).map(|v| v.kernel.clone());
    let label = text(&label.or(plan_label.clone()).unwrap_or_else(|| "unknown kernel".into()));
    let image = rec.and_then(|r| a.record.images.iter().find(|i| i.what == r.kernel));
    let info = env.and_then(|e| e.kernels.iter().find(|k| k.vm == name));
    let release = info
        .map(|k| k.release.clone())
        .filter(|r| !r.is_empty())
        .or_else(|| rec.map(|r| r.kernel_release.clone()))
        .unwrap_or_default();
    let mut facts = BuildFacts {
        release: text(&release),
        deb_sha256: None,
        fragments: vec![],
        config_sha256: None,
        cache_key: image.map(|i| text(&i.key)),
    };
    let mut git: Option<(String, String)> = None;
    let (source, comment, tree, patchset, config_name) = match info.map(|k| &k.origin) {
        Some(KernelOrigin::Debian { package, version, suite, sha256, .. }) => {
            facts.deb_sha256 = Some(text(sha256));
            let s = SourceFacts::Debian { package: text(package), version: text(version), suite: text(suite) };
            (s, format!("Debian package {package} {version} ({suite})"), Some("debian"), Some(String::new()), None)
        }
        Some(KernelOrigin::Source { package, version, sha256, fragments, patches, config_sha256 }) => {
            let (hash, names, with, config) = built_here(&mut facts, fragments, patches, config_sha256.as_deref());
            let comment = format!("Debian source package {package} {version}{with}");
            let s = SourceFacts::Source {
                package: text(package),
                version: text(version),
                sha256: text(sha256),
                patches: names,
            };
            (s, comment, Some("debian"), hash, Some(config))
        }
        Some(KernelOrigin::Tree { tree, rev, commit, describe, subject, fragments, patches, config_sha256 }) => {
            let (hash, names, with, config) = built_here(&mut facts, fragments, patches, config_sha256.as_deref());
            let comment = format!("tree {tree} at {rev} ({describe}, {commit}: {subject}){with}");
            git = Some((text(commit), text(describe)));
            let s = SourceFacts::Tree { tree: text(tree), commit: text(commit), patches: names };
            (s, comment, Some(tree.as_str()), hash, Some(config))
        }
        Some(KernelOrigin::Local { image, .. }) => {
            let s = SourceFacts::Local { image: file_name(&image.path), sha256: text(&image.sha256) };
            (s, format!("local kernel image {}", file_name(&image.path)), None, None, None)
        }
        None => {
            let kernel = text(&plan_label.unwrap_or_else(|| label.clone()));
            (SourceFacts::Label { kernel: kernel.clone() }, kernel, None, None, None)
        }
    };
    let source_json = serde_json::to_string(&source).expect("serializes");
    let checkout_id = id(&["checkout", &source_json]);
    let facts_json = serde_json::to_string(&facts).expect("serializes");
    let build_id = id(&["build", &checkout_id, &facts_json]);
    let checkout = Checkout {
        id: checkout_id.clone(),
        origin: ORIGIN.into(),
        tree_name: tree.map(String::from),
        comment: text(&comment),
        patchset_hash: patchset,
        git_commit_hash: git.as_ref().map(|g| g.0.clone()),
        git_commit_name: git.map(|g| g.1),
        misc: source,
    };
    let build = Build {
        id: build_id,
        checkout_id,
        origin: ORIGIN.into(),
        comment: label,
        architecture: "x86_64".into(),
        config_name,
        status: (image.is_some() || info.is_some()).then_some(Status::Pass),
        misc: facts,
    };
    (checkout, build)
}

/// An iteration's status (see the module docs).
fn outcome_status(o: &Outcome) -> Status {
    match o {
        Outcome::Exited { .. } => Status::Pass,
        Outcome::Crashed | Outcome::TimedOut => Status::Fail,
        Outcome::Signalled { .. } | Outcome::SetupFailed { .. } | Outcome::ActionFailed => Status::Error,
        Outcome::NotRun => Status::Miss,
    }
}

/// The status of VM `v` in measurement `m`, with `problems` its problems.
pub fn status(m: &MeasurementResult, v: &VmResult, problems: &[String]) -> Status {
    let outcomes: Vec<Outcome> =
        if v.outcomes.is_empty() { v.iterations.iter().map(|i| i.outcome).collect() } else { v.outcomes.clone() };
    if outcomes.is_empty() {
        return Status::Skip;
    }
    if outcomes.iter().all(|o| *o == Outcome::NotRun) {
        return Status::Miss;
    }
    let mut worst = outcomes.iter().map(outcome_status).min().unwrap_or(Status::Pass);
    if !problems.is_empty() {
        worst = worst.min(Status::Fail);
    }
    if worst != Status::Pass {
        return worst;
    }
    if m.metric == OUTCOME_METRIC {
        return match v.verdict.as_deref() {
            Some("different outcome") => Status::Fail,
            _ => Status::Pass,
        };
    }
    match v.comparison.as_ref().map(|c| c.verdict) {
        Some(Verdict::Slower { .. }) => Status::Fail,
        Some(Verdict::Same | Verdict::Faster { .. }) => Status::Pass,
        Some(Verdict::Undecided) => Status::Done,
        // A baseline, or a candidate without numbers to compare.
        None if m.is_baseline(&v.vm) => Status::Pass,
        None => Status::Done,
    }
}

fn finite(x: f64) -> Option<f64> {
    x.is_finite().then_some(x)
}

/// The unit of `m`'s metric for KCIDB: the suite's, else `s`/`MB/s`, else none (a count).
fn metric_unit(m: &MeasurementResult) -> Option<String> {
    match m.unit.as_deref() {
        Some(u) => Some(text(u)),
        None => Some(unit_of(&m.metric)).filter(|u| *u != "count").map(String::from),
    }
}

/// The KCIDB tests of VM `v` in measurement `m` of run `a`.
fn measurement_tests(
    a: &Analysis,
    vms: &[PlanVm],
    run_key: &[&str; 3],
    m: &MeasurementResult,
    v: &VmResult,
    build_id: &str,
) -> Vec<Test> {
    let prefix = format!("{}: ", v.vm);
    let problems: Vec<String> = m.problems.iter().filter(|p| p.starts_with(&prefix)).map(|p| text(p)).collect();
    let base_path = format!("{}.{}", path_part(&a.results.suite), path_part(&m.name));
    let rec = a.record.vm(&v.vm);
    let steps: Vec<_> = v.iterations.iter().filter_map(|i| rec.and_then(|r| r.step(&i.step))).collect();
    let duration = finite(steps.iter().map(|s| s.duration_s).sum::<f64>()).filter(|d| *d >= 0.0 && !steps.is_empty());
    let start_time =
        steps.iter().filter_map(|s| s.started_s).filter(|s| s.is_finite()).reduce(f64::min).and_then(|offset| {
            let started = humantime::parse_rfc3339_weak(&a.record.started).ok()?;
            let at = started.checked_add(std::time::Duration::try_from_secs_f64(offset).ok()?)?;
            Some(humantime::format_rfc3339_millis(at).to_string())
        });
    let plan = vms.iter().find(|p| p.name == v.vm);
    let env = TestEnvironment {
        comment: text(&format!(
            "VM {}{}{}{}",
            v.vm,
            plan.map(|p| format!(", {} MiB", p.memory_mib)).unwrap_or_default(),
            plan.map(|p| format!(", {} vCPU", p.cpus)).unwrap_or_default(),
            rec.map(|r| format!(
                ", {}",
                serde_json::to_value(r.accel).ok().and_then(|x| x.as_str().map(String::from)).unwrap_or_default()
            ))
            .unwrap_or_default()
        )),
        misc: VmFacts {
            vm: text(&v.vm),
            memory_mib: plan.map(|p| p.memory_mib),
            cpus: plan.map(|p| p.cpus),
            accel: rec.map(|r| r.accel),
        },
    };
    let baseline = m.baseline_of(&v.vm);
    let comment = match m.vm(baseline) {
        Some(base) if baseline != v.vm => summary_line(m, base, v),
        _ => match &v.metric {
            Some(s) => format!(
                "{}.{}: baseline {}: median {} {} over {} repeats",
                m.name,
                m.metric,
                v.vm,
                crate::report::published::comparison_table::fmt_value(s.median),
                metric_unit(m).unwrap_or_default(),
                s.n
            ),
            None => format!("{}.{}: {}: {}", m.name, m.metric, v.vm, v.outcome_words()),
        },
    };
    let test_id = |path: &str| id(&["test", run_key[0], run_key[1], run_key[2], &m.name, &v.vm, path]);
    let main = Test {
        id: test_id(&base_path),
        build_id: build_id.into(),
        origin: ORIGIN.into(),
        path: base_path.clone(),
        comment: text(comment.trim_end()),
        status: status(m, v, &problems),
        number: v.metric.as_ref().and_then(|s| finite(s.median)).map(|value| Number { value, unit: metric_unit(m) }),
        start_time: start_time.clone(),
        duration,
        environment: env.clone(),
        misc: Some(TestFacts {
            measurement: text(&m.name),
            metric: text(&m.metric),
            baseline: text(baseline),
            verdict: v.verdict.as_deref().map(text),
            outcomes: text(&v.outcome_words()),
            summary: v.metric.clone(),
            comparison: v.comparison.clone(),
            problems,
        }),
    };
    let mut tests = vec![main];
    let aux = [("elapsed_s", v.elapsed_s.as_ref().map(|s| s.median), "s"), ("throughput_mb_s", v.median_mb_s, "MB/s")];
    for (metric, value, unit) in aux {
        let Some(value) = value.and_then(finite) else { continue };
        if metric == m.metric {
            continue;
        }
        let path = format!("{base_path}.{metric}");
        tests.push(Test {
            id: test_id(&path),
            build_id: build_id.into(),
            origin: ORIGIN.into(),
            comment: format!("{}.{metric} of {}: median over the counted repeats", text(&m.name), text(&v.vm)),
            path,
            status: Status::Done,
            number: Some(Number { value, unit: Some(unit.into()) }),
            start_time: start_time.clone(),
            duration,
            environment: env.clone(),
            misc: None,
        });
    }
    tests
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patchset_hash_is_kcidbs_sum_of_sums() {
        // `printf 'a\n' | sha256sum`-style: the hash of "<sum>\n" for one patch.
        let one = "0".repeat(64);
        let want = hex::encode(Sha256::digest(format!("{one}\n")));
        assert_eq!(patchset_hash(&[&one]), want);
        assert_eq!(patchset_hash(&[]), "");
        assert_ne!(patchset_hash(&[&one, &one]), want);
    }

    #[test]
    fn ids_are_stable_and_length_prefixed() {
        assert_eq!(id(&["a", "b"]), id(&["a", "b"]));
        assert_ne!(id(&["ab", ""]), id(&["a", "b"]));
        assert!(id(&["x"]).starts_with("vmrepro:") && id(&["x"]).len() == "vmrepro:".len() + 32);
    }

    #[test]
    fn path_parts_keep_kcidbs_grammar() {
        assert_eq!(path_part("nfs-read_1"), "nfs-read_1");
        assert_eq!(path_part("a.b/c\0d é"), "a_b_c_d__");
        assert_eq!(path_part(""), "_");
        assert_eq!(text("a\0b"), "a\u{fffd}b");
        assert_eq!(file_name("/home/someone/patches/x.patch"), "x.patch");
    }
}
