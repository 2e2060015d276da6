//! Every suite in `suites/` is a test: it boots real VMs (QEMU, Debian kernels, the
//! bookworm rootfs, a real bridge), runs, and its normalised result is compared with
//! the insta snapshot `snapshots/<suite>__result.snap` (see `vmrepro::snapshot` for
//! what is kept). With `CI` set a mismatch fails and nothing is written; locally a
//! mismatch leaves a `.snap.new` to review with `cargo insta review`.
//!
//! Suites run one at a time (a lock file), so they don't compete for the 2 cores and
//! blur each other's timings.

use std::path::Path;

use vmrepro::images::{Cache, Catalog};
use vmrepro::run::{RunOptions, RunStatus};

fn run_suite(path: &Path) -> datatest_stable::Result<()> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let lock_path = Path::new(env!("CARGO_TARGET_TMPDIR")).join("vm-suites.lock");
    let lock = std::fs::File::create(&lock_path)?;
    let _guard = nix::fcntl::Flock::lock(lock, nix::fcntl::FlockArg::LockExclusive).map_err(|(_, e)| e)?;

    let file = vmrepro::spec::load_suite(path)?;
    let catalog = Catalog::load(&root.join("images"))?;
    let plan = vmrepro::plan::compile(&file, &catalog)?;
    let opts = RunOptions {
        results_root: Path::new(env!("CARGO_TARGET_TMPDIR")).join("suite-results"),
        cache: Cache::from_env(),
        catalog,
        events: std::sync::Arc::new(|e| {
            if let vmrepro::events::Event::Notice(n) = e {
                eprintln!("{n}");
            }
        }),
        run_dir: None,
    };
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let report = rt.block_on(vmrepro::report::run_and_report(&plan, &opts, std::future::pending()))?;
    eprintln!("{}", report.text);
    assert_ne!(
        report.status,
        RunStatus::InfrastructureError,
        "suite {} could not run: {}",
        plan.suite,
        report.outcome.record.error.as_deref().unwrap_or("")
    );
    let with_verdicts = plan.nfs_read.as_ref().is_some_and(|n| n.snapshot_verdicts);
    let normalised = vmrepro::snapshot::normalise(&report.outcome.record, report.nfs.as_ref(), with_verdicts);
    let mut settings = insta::Settings::clone_current();
    settings.set_snapshot_path(root.join("snapshots"));
    settings.set_prepend_module_to_snapshot(false);
    settings.set_input_file(path);
    settings.bind(|| insta::assert_yaml_snapshot!(format!("{}__result", plan.suite), normalised));
    assert_eq!(
        report.status,
        RunStatus::Passed,
        "suite {} failed; results in {}",
        plan.suite,
        report.outcome.dir.display()
    );
    assert_eq!(report.checks_failed, 0, "suite {} result checks failed:\n{}", plan.suite, report.text);
    Ok(())
}

datatest_stable::harness!(run_suite, "../suites", r"^.*\.yaml$");
