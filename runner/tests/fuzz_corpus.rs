//! The fuzz targets' corpus, replayed without the fuzzer: every input kept in
//! `fuzz/corpus/<target>/` (seeds and what the fuzzer found that reaches new code) and
//! in `fuzz/regressions/<target>/` (inputs that once broke a property) goes through the
//! same harness as `cargo fuzz run <target>` (`tests/fuzz_harness/`), with a watchdog.
//! A failure names the input file and the property it broke.
//!
//! `fuzz/findings/<target>/` holds inputs that still break a property (open bugs,
//! README there): `cargo test --test fuzz_corpus -- --ignored open_findings` replays
//! them. `cargo test --test fuzz_corpus -- --ignored write_seeds` writes the seeds again
//! (from suites/, the bad-suite fixtures, the recorded run folders and a bundle of one).

mod fuzz_harness;
mod support;

use std::path::{Path, PathBuf};
use std::time::Duration;

use fuzz_harness::{Entry, Kind, TARGETS};

/// How long one input may take here (a debug build; libFuzzer's `-timeout` in CI is 10 s
/// on an optimised one): past it, the input is reported as a hang.
const WATCHDOG: Duration = Duration::from_secs(60);

fn fuzz_dir() -> PathBuf {
    support::repo_root().join("fuzz")
}

fn inputs(folder: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(folder)
        .map(|r| r.flatten().map(|e| e.path()).filter(|p| p.is_file() && !p.ends_with("README.md")).collect())
        .unwrap_or_default();
    v.sort();
    v
}

/// Runs every input of `kind/<target>/`; returns the failures, one line each, and the
/// number of inputs run.
fn replay(kind: &str) -> (Vec<String>, usize) {
    let repo = support::repo_root();
    let mut failures = Vec::new();
    let mut n = 0;
    for (name, target) in TARGETS {
        for input in inputs(&fuzz_dir().join(kind).join(name)) {
            n += 1;
            let data = std::fs::read(&input).expect("input");
            let (tx, rx) = std::sync::mpsc::channel();
            let r = repo.clone();
            std::thread::spawn(move || {
                let got = std::panic::catch_unwind(|| target(&data, &r));
                let _ = tx.send(got);
            });
            let rel = input.strip_prefix(&repo).unwrap_or(&input).display().to_string();
            match rx.recv_timeout(WATCHDOG) {
                Ok(Ok(Ok(()))) => {}
                Ok(Ok(Err(property))) => failures.push(format!("{rel}: {property}")),
                Ok(Err(_)) => failures.push(format!("{rel}: panicked (message above)")),
                Err(_) => failures.push(format!("{rel}: still running after {WATCHDOG:?}")),
            }
        }
    }
    (failures, n)
}

#[test]
fn corpus_and_regressions_keep_every_property() {
    let (mut failures, seeds) = replay("corpus");
    assert!(seeds >= 30, "expected the seeded corpus under fuzz/corpus/, found {seeds} inputs");
    let (more, _) = replay("regressions");
    failures.extend(more);
    assert!(failures.is_empty(), "{} inputs break a property:\n{}", failures.len(), failures.join("\n"));
}

#[test]
#[ignore = "open bugs: fuzz/findings/ holds inputs that still fail (see its README)"]
fn open_findings() {
    let (failures, n) = replay("findings");
    assert!(failures.is_empty(), "{} of {n} findings still fail:\n{}", failures.len(), failures.join("\n"));
}

/// Writes `name` into `fuzz/corpus/<target>/` (the seeds are named `seed-*`).
fn seed(target: &str, name: &str, data: &[u8]) {
    let dir = fuzz_dir().join("corpus").join(target);
    std::fs::create_dir_all(&dir).expect("corpus folder");
    std::fs::write(dir.join(format!("seed-{name}")), data).expect("seed");
}

#[test]
#[ignore = "writes the seeds into fuzz/corpus/ (run by hand, then commit)"]
fn write_seeds() {
    let repo = support::repo_root();
    // Suites: the repository's (their `files/`-free ones as plain YAML) and every bad
    // suite, with the files the bad suites name beside them.
    let bad = repo.join("runner/tests/fixtures/bad-suites");
    let side: Vec<Entry> = fuzz_harness::entries_of(&bad.join("files"))
        .into_iter()
        .map(|e| Entry { path: format!("files/{}", e.path), ..e })
        .collect();
    for dir in [repo.join("suites"), bad.clone()] {
        for f in inputs(&dir).into_iter().filter(|f| f.extension().is_some_and(|e| e == "yaml")) {
            let text = std::fs::read(&f).expect("suite");
            let stem = f.file_stem().unwrap().to_string_lossy().into_owned();
            if String::from_utf8_lossy(&text).contains("files/") {
                let mut entries = vec![Entry { path: "suite.yaml".into(), kind: Kind::File(text) }];
                entries.extend(side.iter().cloned());
                seed("suite", &stem, &fuzz_harness::to_bytes(&entries));
            } else {
                seed("suite", &stem, &text);
            }
        }
    }
    // Run folders: the recorded ones (step outputs cut to 4 KiB, so that the fuzzer's
    // inputs stay small) and one with a link and a pipe where outputs are expected.
    let runs = repo.join("runner/tests/fixtures/runs");
    let mut smallest: Option<(usize, PathBuf)> = None;
    for d in std::fs::read_dir(&runs).unwrap().flatten().map(|e| e.path()).filter(|p| p.is_dir()) {
        let tmp = tempfile::tempdir().unwrap();
        copy_cut(&d, tmp.path(), 4096);
        let data = fuzz_harness::to_bytes(&fuzz_harness::entries_of(tmp.path()));
        let name = d.file_name().unwrap().to_string_lossy().into_owned();
        if smallest.as_ref().is_none_or(|(n, _)| data.len() < *n) {
            smallest = Some((data.len(), d.clone()));
        }
        seed("run_folder", &name, &data);
    }
    let (_, small) = smallest.expect("a recorded run");
    let tmp = tempfile::tempdir().unwrap();
    copy_cut(&small, tmp.path(), 4096);
    let mut data = fuzz_harness::to_bytes(&fuzz_harness::entries_of(tmp.path()));
    data.extend_from_slice(b"=== results.json -> @canary/victim\n=== report.md -> ../canary/new\n");
    // An open finding (fuzz/findings/README.md), kept out of the corpus until fixed.
    let findings = fuzz_dir().join("findings/run_folder");
    std::fs::create_dir_all(&findings).expect("findings folder");
    std::fs::write(findings.join("report-md-through-dangling-link"), &data).expect("finding");
    // Bundles: one made by `vmrepro::publish::bundle` from a recorded run (as
    // tests/publish.rs makes them), as bytes and as a folder.
    let tmp = tempfile::tempdir().unwrap();
    let run = tmp.path().join("results/nfs-aa-same-kernel/20261130T170000Z");
    copy_cut(&runs.join("nfs-aa-same-kernel"), &run, 4096);
    // The placeholders back to paths (as tests/publish.rs does), so that the bundle
    // finds its suite.
    let cache_dir = tmp.path().join("cache");
    for (from, to) in [("$PROJECT", repo.clone()), ("$CACHE", cache_dir.clone()), ("$RUN_DIR", run.clone())] {
        for f in fuzz_harness::entries_of(&run) {
            let p = run.join(&f.path);
            if let Kind::File(data) = f.kind {
                let text = String::from_utf8_lossy(&data).replace(from, &to.display().to_string());
                std::fs::write(&p, text).unwrap();
            }
        }
    }
    let env_file = run.join(vmrepro::run::environment::ENVIRONMENT_FILE);
    let mut env: vmrepro::run::environment::Environment =
        serde_json::from_str(&std::fs::read_to_string(&env_file).unwrap()).unwrap();
    env.suite.sha256 = vmrepro::run::environment::file_sha256(Path::new(&env.suite.path)).unwrap();
    std::fs::write(&env_file, serde_json::to_string_pretty(&env).unwrap()).unwrap();
    let cache = vmrepro::infra::images::Cache::new(cache_dir);
    let identity = vmrepro::publish::redact::Identity { home: None, host: None, user: None };
    let opts = vmrepro::publish::bundle::BundleOptions { with_images: false, cache, identity, images: None };
    let out = tmp.path().join("b.tar.gz");
    vmrepro::publish::bundle::bundle(&run, &out, &opts).expect("bundle of the recorded run");
    seed("bundle", "nfs-aa-same-kernel.tar.gz", &std::fs::read(&out).unwrap());
    let x = tmp.path().join("x");
    std::fs::create_dir(&x).unwrap();
    let ex = vmrepro::publish::bundle::extract(&out, &x).expect("the bundle reads back");
    let top = ex.top.file_name().unwrap().to_string_lossy().into_owned();
    // Without its MANIFEST: the harness writes the MANIFEST of a folder that has none.
    let folder: Vec<Entry> = fuzz_harness::entries_of(&ex.top)
        .into_iter()
        .filter(|e| e.path != "MANIFEST")
        .map(|e| Entry { path: format!("{top}/{}", e.path), ..e })
        .collect();
    let folder = fuzz_harness::to_bytes(&folder);
    seed("bundle", "nfs-aa-same-kernel", &folder);
}

/// Copies the folder `from` to `to`, each file cut to `max` bytes.
fn copy_cut(from: &Path, to: &Path, max: usize) {
    for e in std::fs::read_dir(from).unwrap().flatten() {
        let p = e.path();
        let dest = to.join(e.file_name());
        if p.is_dir() {
            std::fs::create_dir_all(&dest).unwrap();
            copy_cut(&p, &dest, max);
        } else {
            std::fs::create_dir_all(to).unwrap();
            let mut data = std::fs::read(&p).unwrap();
            if ["README.md", "report.md", "report.html", "results.schema1.json"].iter().any(|n| p.ends_with(n)) {
                continue;
            }
            // JSON files stay whole (a cut one only says "does not parse").
            if p.extension().is_none_or(|x| x != "json") {
                data.truncate(max);
            }
            std::fs::write(&dest, data).unwrap();
        }
    }
}
