//! Every suite in `suites/` is a test: it boots real VMs (QEMU, Debian kernels, the
//! bookworm rootfs, a real bridge), runs, and its normalised result is compared with
//! the insta snapshot `snapshots/<suite>__result.snap` (see `vmrepro::report::snapshot` for
//! what is kept). With `CI` set a mismatch fails and nothing is written; locally a
//! mismatch leaves a `.snap.new` to review with `cargo insta review`.
//!
//! Suites run one at a time (the lock file of [`support::vm_lock`]), so they don't
//! compete for the 2 cores and blur each other's timings. The suites of
//! [`BESIDE_OTHERS`] are the exception: their measured commands wait on timers, not on
//! the CPU, so each runs beside the others under a second lock
//! ([`support::beside_lock`]), after resolving its images under the first (a kernel
//! compile must not run beside a timed suite). They are listed first, so that with two
//! or more test threads one of them starts at once.
//!
//! One more trial is not a suite file: `run_suite::bisect/nfs-udp-rto-bisect.yaml`
//! ([`bisect_test`]), `vmrepro bisect` on a kernel git tree made from Debian's
//! `linux-source-6.1`. It builds its kernels under the suites' lock, then runs beside
//! the others like the RTO suite (its reads wait on RPC timers too), so the harness
//! runs three test threads by default: the two timer-bound trials and the suites one
//! at a time.
//!
//! The harness is libtest-mimic's (as datatest-stable's is): one test per suite, named
//! `run_suite::<file>`, so `--exact`, filters and `--list` (which nextest reads) work as
//! before.

mod bisect_test;
mod support;

use std::path::{Path, PathBuf};

use vmrepro::infra::images::{Cache, Catalog};
use vmrepro::run::{RunOptions, RunStatus};

type TestResult = Result<(), Box<dyn std::error::Error>>;

/// Suites whose measured commands wait on timers rather than on the CPU, run beside the
/// other suites (see the module docs). `nfs-udp-rto-carryover`: one NFS READ in flight
/// through 13 % seeded loss, so its reads wait on RPC retransmit timeouts: its three
/// QEMUs used 0.14 of a core over its 349 s (47.5 CPU-seconds), against 1.0–1.6 cores
/// for the suites that read at full speed, and beside them it dropped and retransmitted
/// the same packets and kept its verdict (BENCHMARKS.md, "Suites beside each other").
const BESIDE_OTHERS: &[&str] = &["nfs-udp-rto-carryover.yaml"];

/// The bisect trial's name (`tests/bisect_test/`): a suite name, so `-- rto-bisect`
/// and `--exact` pick it as they pick a suite.
const BISECT_TRIAL: &str = "run_suite::bisect/nfs-udp-rto-bisect.yaml";

fn main() -> std::process::ExitCode {
    let mut args = libtest_mimic::Arguments::from_args();
    // Three threads unless told otherwise: the RTO suite and the bisect trial each run
    // beside the suites that run one at a time (see the module docs).
    args.test_threads.get_or_insert(3);
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../suites");
    let mut suites: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .map(|e| e.expect("a suites folder entry").path())
        .filter(|p| p.is_file() && p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    assert!(!suites.is_empty(), "no suites in {}", dir.display());
    for name in BESIDE_OTHERS {
        // A renamed suite would silently lose its place beside the others.
        assert!(
            suites.iter().any(|p| file_name(p) == *name),
            "BESIDE_OTHERS names {name}, which is not in {}",
            dir.display()
        );
    }
    suites.sort_by_key(|p| (!beside_others(p), p.clone()));
    let mut trials: Vec<libtest_mimic::Trial> = suites
        .into_iter()
        .map(|path| {
            let name = format!("run_suite::{}", file_name(&path));
            libtest_mimic::Trial::test(name, move || run_suite(&path).map_err(|e| format!("{e:?}").into()))
        })
        .collect();
    // After the suites beside the others, before the rest: its runs go beside them too.
    let at = BESIDE_OTHERS.len().min(trials.len());
    trials.insert(
        at,
        libtest_mimic::Trial::test(BISECT_TRIAL, || bisect_test::run().map_err(|e| format!("{e:?}").into())),
    );
    libtest_mimic::run(&args, trials).exit_code()
}

fn file_name(path: &Path) -> String {
    path.file_name().unwrap_or_default().to_string_lossy().into_owned()
}

fn beside_others(path: &Path) -> bool {
    BESIDE_OTHERS.contains(&file_name(path).as_str())
}

fn run_suite(path: &Path) -> TestResult {
    let root = support::repo_root();
    let file = vmrepro::schema::load_suite(path)?;
    let catalog = Catalog::load(&root.join("images"))?;
    let plan = vmrepro::suite::compile(&file, &catalog)?;
    let cache = Cache::from_env();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let events: vmrepro::events::EventSink = std::sync::Arc::new(|e| {
        if let vmrepro::events::Event::Notice(n) = e {
            eprintln!("{n}");
        }
    });
    let _lock = if beside_others(path) {
        {
            // Builds (a source kernel takes minutes of both cores) happen one suite at a
            // time, like every other suite's; the run below then finds its images cached.
            let _images = support::vm_lock();
            // A failure here is the run's to report, with its own message and record.
            let _ = rt.block_on(vmrepro::run::images::resolve(&plan, &cache, &catalog, &events));
        }
        support::beside_lock()
    } else {
        support::vm_lock()
    };
    let opts = RunOptions {
        results_root: support::test_tmpdir().join("suite-results"),
        cache,
        catalog,
        events,
        run_dir: None,
        fresh_boot: false,
        // As `vmrepro run --pin` when VMREPRO_PIN is set, read as the CLI reads it
        // (clap's FalseyValueParser: empty, n, no, f, false, off, 0, any case, are off).
        pin: std::env::var("VMREPRO_PIN").is_ok_and(|v| {
            let v = v.to_ascii_lowercase();
            !matches!(v.as_str(), "" | "n" | "no" | "f" | "false" | "off" | "0")
        }),
        state_ram: Default::default(),
    };
    let outcome = rt.block_on(vmrepro::run::run(&plan, &opts, std::future::pending()))?;
    eprintln!("{}", vmrepro::report::summary(&outcome.record));
    assert_ne!(
        outcome.record.status,
        RunStatus::InfrastructureError,
        "suite {} could not run: {}",
        plan.suite,
        outcome.record.error.as_deref().unwrap_or("")
    );
    let analysis = vmrepro::analyse::analyse_dir(&outcome.dir)?;
    eprintln!("{}", vmrepro::report::tables(&analysis));
    // Issue 28: each capture against the client's own counters (support::wire_check),
    // before the snapshot, so that a run whose counts moved still says how they add up.
    support::wire_check::wire_against_counters(&analysis);
    let normalised = vmrepro::report::snapshot::normalise(&analysis)?;
    let snap_path = root.join("snapshots").join(format!("{}__result.snap", plan.suite));
    let changes = explain_changes(&snap_path, &serde_yaml::to_value(&normalised)?);
    if !changes.is_empty() {
        eprintln!("suite {} differs from its snapshot {}:", plan.suite, snap_path.display());
        for c in &changes {
            eprintln!("  {c}");
        }
    }
    let mut settings = support::snapshot_settings();
    settings.set_omit_expression(false);
    settings.set_input_file(path);
    settings.bind(|| insta::assert_yaml_snapshot!(format!("{}__result", plan.suite), normalised));
    assert_eq!(
        analysis.record.status,
        RunStatus::Passed,
        "suite {} failed; results in {}",
        plan.suite,
        outcome.dir.display()
    );
    let problems = analysis.results.problems();
    assert!(problems.is_empty(), "suite {} result checks failed:\n{}", plan.suite, problems.join("\n"));
    Ok(())
}

/// The differences between the stored snapshot and this run, one line each, in the
/// suite's own terms: `client client-b: kernel_release: 6.1.0-50-cloud-amd64 →
/// 5.10.0-32-cloud-amd64`, `client client-slow: verdict: same → slower: …`.
fn explain_changes(snap: &Path, new: &serde_yaml::Value) -> Vec<String> {
    let Ok(text) = std::fs::read_to_string(snap) else { return vec![format!("no snapshot yet at {}", snap.display())] };
    // An insta snapshot is a `---`-delimited header followed by the YAML value.
    let body = text.splitn(3, "---\n").nth(2).unwrap_or("");
    let Ok(old) = serde_yaml::from_str::<serde_yaml::Value>(body) else { return vec![] };
    let mut out = Vec::new();
    diff("", &old, new, &mut out);
    out
}

fn label(v: &serde_yaml::Value) -> Option<String> {
    let m = v.as_mapping()?;
    if let Some(vm) = m.get("vm").and_then(|x| x.as_str()) {
        return Some(format!("client {vm}"));
    }
    m.get("name").and_then(|x| x.as_str()).map(|n| n.to_string())
}

fn show(v: &serde_yaml::Value) -> String {
    match v {
        serde_yaml::Value::String(s) => s.clone(),
        serde_yaml::Value::Null => "(none)".into(),
        other => serde_yaml::to_string(other).unwrap_or_default().trim().replace('\n', " "),
    }
}

fn diff(at: &str, old: &serde_yaml::Value, new: &serde_yaml::Value, out: &mut Vec<String>) {
    use serde_yaml::Value;
    let join = |k: &str| if at.is_empty() { k.to_string() } else { format!("{at}: {k}") };
    match (old, new) {
        (Value::Mapping(a), Value::Mapping(b)) => {
            for (k, va) in a {
                let key = join(&show(k));
                match b.get(k) {
                    Some(vb) => diff(&key, va, vb, out),
                    None => out.push(format!("{key}: {} → (gone)", show(va))),
                }
            }
            for (k, vb) in b {
                if !a.contains_key(k) {
                    out.push(format!("{}: (new) → {}", join(&show(k)), show(vb)));
                }
            }
        }
        (Value::Sequence(a), Value::Sequence(b)) if a.len() == b.len() => {
            for (i, (va, vb)) in a.iter().zip(b).enumerate() {
                let name = label(va).filter(|l| Some(l) == label(vb).as_ref()).unwrap_or_else(|| format!("[{i}]"));
                diff(&join(&name), va, vb, out);
            }
        }
        (a, b) if a != b => out.push(format!("{at}: {} → {}", show(a), show(b))),
        _ => {}
    }
}
