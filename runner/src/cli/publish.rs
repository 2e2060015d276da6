//! `vmrepro bundle`, `vmrepro replay`, `vmrepro compare` and `vmrepro export`: messages and exit codes
//! over [`crate::publish`].

use std::path::{Path, PathBuf};

use super::dispatch::{render, write_junit};
use super::progress::{interrupted, progress_sink};
use crate::exit;
use crate::infra::images::Cache;
use crate::run::RunStatus;

/// `vmrepro bundle`.
pub(super) fn bundle(
    run_dir: &Path,
    output: Option<PathBuf>,
    with_images: bool,
    images: Option<PathBuf>,
    cache: Cache,
) -> i32 {
    use crate::publish::bundle::{bundle, BundleError, BundleOptions};
    let out = output.unwrap_or_else(|| {
        // The suite name of an untrusted run.json becomes a plain file name in the
        // current folder (default_bundle_name sanitises it), never a path.
        let suite = crate::run::record::read_json::<crate::run::RunRecord>(&run_dir.join(crate::run::RUN_FILE))
            .map(|r| r.suite)
            .unwrap_or_else(|_| "run".into());
        PathBuf::from(crate::report::published::default_bundle_name(&suite, run_dir))
    });
    let opts = BundleOptions { with_images, cache, identity: crate::publish::redact::Identity::current(), images };
    match bundle(run_dir, &out, &opts) {
        Ok(s) => {
            outln!(
                "bundle: {} ({}, {} files, {} unpacked{})",
                s.path.display(),
                human_bytes(s.bytes),
                s.files,
                human_bytes(s.unpacked_bytes),
                if s.info.with_images { ", with the kernels" } else { "" }
            );
            for l in &s.info.cut_logs {
                outln!("  cut: {l} (over {} KiB)", crate::publish::bundle::MAX_LOG_BYTES / 1024);
            }
            for n in &s.info.notes {
                outln!("  note: {n}");
            }
            exit::SUCCESS
        }
        Err(e @ (BundleError::Image(_) | BundleError::Io { .. })) => {
            errln!("error: {e}");
            exit::INFRASTRUCTURE
        }
        Err(e) => {
            errln!("error: {e}");
            exit::CONFIG_ERROR
        }
    }
}

/// `75.5 kB`, `81.5 MB` (10^3 and 10^6 bytes).
fn human_bytes(n: u64) -> String {
    if n >= 1_000_000 {
        format!("{:.1} MB", n as f64 / 1e6)
    } else {
        format!("{:.1} kB", n as f64 / 1e3)
    }
}

/// Removes `dir`, which the unpacking thread may still be writing into until it sees
/// [`stop_unpacking`](crate::publish::archive::stop_unpacking). Done means the path is
/// gone, not that one `remove_dir_all` returned: a pass can fail on an entry renamed or
/// created under it (its `NotFound` says nothing of `dir`), so it is tried again, for at
/// most 10 s.
fn remove_while_written(dir: &Path) {
    let start = std::time::Instant::now();
    while std::fs::symlink_metadata(dir).is_ok() && start.elapsed() < std::time::Duration::from_secs(10) {
        if std::fs::remove_dir_all(dir).is_err() {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }
}

/// Runs `work` (unpacking a bundle into the temp folders `tmps`, fetching its
/// packages) on a blocking thread. On SIGINT, SIGTERM or SIGHUP first (the handler is
/// `signal`, installed before the folders were made) unpacking is stopped before its
/// next entry, `work` is given 5 s to return (it may be blocked on a download, which
/// writes nothing into the folders), the folders are removed and the process exits
/// with [`exit::INTERRUPTED`].
async fn unpack_or_interrupted<T: Send + 'static>(
    signal: impl std::future::Future<Output = ()>,
    tmps: Vec<PathBuf>,
    what: &str,
    work: impl FnOnce() -> T + Send + 'static,
) -> T {
    let task = tokio::task::spawn_blocking(work);
    tokio::pin!(task);
    tokio::select! {
        r = &mut task => r.expect("unpacking task"),
        () = signal => {
            crate::publish::archive::stop_unpacking();
            let _ = tokio::time::timeout(std::time::Duration::from_secs(5), &mut task).await;
            for t in &tmps {
                remove_while_written(t);
            }
            let shown: Vec<String> = tmps.iter().map(|t| t.display().to_string()).collect();
            let (folders, are) = if shown.len() == 1 { ("folder", "is") } else { ("folders", "are") };
            let left: Vec<&String> = shown.iter().filter(|t| Path::new(t).exists()).collect();
            if left.is_empty() {
                errln!("interrupted: the {what}'s temp {folders} {} {are} removed", shown.join(", "));
            } else {
                errln!("interrupted: the {what}'s temp {folders} {shown:?} could not all be removed; left: {left:?}");
            }
            std::process::exit(exit::INTERRUPTED);
        }
    }
}

/// `vmrepro replay`.
pub(super) async fn replay(
    bundle: &Path,
    results: PathBuf,
    junit: Option<&Path>,
    cache: Cache,
    fresh_boot: bool,
    pin: bool,
    budget: crate::publish::bundle::Budget,
) -> i32 {
    use crate::publish::replay::{prepare_in, replay_temp, ReplayError, ReplayOptions};
    let config_or_infra = |e: &ReplayError| match e {
        ReplayError::Bundle(_) | ReplayError::Suite(_) => exit::CONFIG_ERROR,
        _ => exit::INFRASTRUCTURE,
    };
    // Installed before anything is unpacked: SIGINT/SIGTERM/SIGHUP while the bundle is
    // unpacked and its packages fetched removes the temp folder (the run itself
    // handles signals below, and the folder goes with `prepared`).
    let signal = interrupted();
    let tmp = match replay_temp() {
        Ok(t) => t,
        Err(e) => {
            errln!("error: {e}");
            return config_or_infra(&e);
        }
    };
    let tmps = vec![tmp.path().to_path_buf()];
    let (b, c) = (bundle.to_path_buf(), cache.clone());
    let prepared = match unpack_or_interrupted(signal, tmps, "replay", move || prepare_in(tmp, &b, &c, &budget)).await {
        Ok(p) => p,
        Err(e) => {
            errln!("error: {e}");
            return config_or_infra(&e);
        }
    };
    outln!(
        "bundle: {} (suite {}, made by vmrepro {} {})",
        bundle.display(),
        prepared.bundle.info.suite,
        prepared.bundle.info.created_by.version,
        prepared.bundle.info.created_by.git_commit
    );
    for c in &prepared.checks {
        outln!("verified: {c}");
    }
    let opts = ReplayOptions { results_root: results, cache, events: progress_sink(), fresh_boot, pin };
    let r = match prepared.run(&opts, interrupted()).await {
        Ok(r) => r,
        Err(e) => {
            errln!("error: {e}");
            return exit::INFRASTRUCTURE;
        }
    };
    match &r.now {
        Some(a) => {
            out!("{}", render(a));
            outln!("report: {}", a.dir.join(crate::report::published::REPORT_MD).display());
            write_junit(junit, &crate::report::junit::junit(&a.record, Some(&a.results)));
        }
        None => {
            out!("{}", crate::report::summary_not_analysed(&r.outcome.record));
            write_junit(junit, &crate::report::junit::junit(&r.outcome.record, None));
        }
    }
    for n in &r.notes {
        outln!("note: {n}");
    }
    match r.outcome.record.status {
        RunStatus::InfrastructureError | RunStatus::Running => return exit::INFRASTRUCTURE,
        RunStatus::Interrupted => return exit::INTERRUPTED,
        _ => {}
    }
    match &r.diff {
        Some(d) => {
            outln!("\nthen (the bundle) against now ({}):", r.outcome.dir.display());
            out!("{}", d.text);
            if d.agrees() && r.outcome.record.status == RunStatus::Passed {
                exit::SUCCESS
            } else {
                exit::TEST_FAILURE
            }
        }
        None => exit::TEST_FAILURE,
    }
}

/// `vmrepro compare`. A bundle is unpacked into a private temp folder, removed on
/// SIGINT, SIGTERM or SIGHUP as `replay`'s is.
pub(super) async fn compare(a: &Path, b: &Path, budget: &crate::publish::bundle::Budget) -> i32 {
    use crate::publish::replay::{compare, compare_temp, open_in};
    let signal = interrupted();
    let (ta, tb) = match (compare_temp(), compare_temp()) {
        (Ok(x), Ok(y)) => (x, y),
        (Err(e), _) | (_, Err(e)) => {
            errln!("error: {e}");
            return exit::INFRASTRUCTURE;
        }
    };
    let tmps = vec![ta.path().to_path_buf(), tb.path().to_path_buf()];
    let (pa, pb, budget) = (a.to_path_buf(), b.to_path_buf(), *budget);
    let opened =
        unpack_or_interrupted(signal, tmps, "compare", move || (open_in(ta, &pa, &budget), open_in(tb, &pb, &budget)))
            .await;
    let (ra, rb) = match opened {
        (Ok(x), Ok(y)) => (x, y),
        (Err(e), _) | (_, Err(e)) => {
            errln!("error: {e}");
            return exit::CONFIG_ERROR;
        }
    };
    outln!("A: {}\nB: {}", a.display(), b.display());
    let (d, notes) = compare(&ra, &rb);
    for n in &notes {
        outln!("note: {n}");
    }
    out!("{}", d.text);
    if d.agrees() {
        exit::SUCCESS
    } else {
        exit::TEST_FAILURE
    }
}

/// `vmrepro export --kcidb`: the JSON on stdout, or `kcidb: FILE` with `-o`. Exit 2
/// (config error) when the run folder can't be read, 3 when the file can't be written.
pub(super) fn export_kcidb(run_dir: &Path, output: Option<&Path>) -> i32 {
    let k = match crate::publish::kcidb::export(run_dir) {
        Ok(k) => k,
        Err(e) => {
            errln!("error: {e}");
            return exit::CONFIG_ERROR;
        }
    };
    match output {
        None => {
            outln!("{}", serde_json::to_string_pretty(&k).expect("KCIDB serializes"));
            exit::SUCCESS
        }
        Some(p) => match crate::run::record::write_json(p, &k) {
            Ok(()) => {
                outln!("kcidb: {}", p.display());
                exit::SUCCESS
            }
            Err(e) => {
                errln!("error: {e}");
                exit::INFRASTRUCTURE
            }
        },
    }
}
