//! `vmrepro export --kcidb` (runner/src/publish/kcidb.rs) on the golden run folders of
//! tests/analyse.rs (`tests/fixtures/runs/`):
//!
//! 1. each export is snapshotted (`snapshots/kcidb__<fixture>.snap`), is the same when
//!    exported again (stable ids), and is valid KCIDB v5.3 by the real validator of
//!    the `kcidb-io` package (PyPI, pinned by .ci/install-deps in a venv under the
//!    cache; `$VMREPRO_KCIDB_PYTHON` names another Python that has it). Without it the
//!    validation is skipped with a printed reason, and fails under `CI=true`;
//! 2. the validator does reject what KCIDB forbids (so a pass means something);
//! 3. statuses follow the verdicts and outcomes of the recorded runs;
//! 4. the binary writes the same JSON with `-o`, writes nothing into the run folder,
//!    and exits 2 on a folder that is not a run.

mod support;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::Value;

fn fixtures() -> Vec<PathBuf> {
    let dirs = support::recorded_runs();
    assert!(dirs.len() >= 4, "expected the recorded runs of tests/analyse.rs");
    dirs
}

fn export(dir: &Path) -> Value {
    let k = vmrepro::publish::kcidb::export(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    serde_json::to_value(k).expect("KCIDB serializes")
}

/// The Python with `kcidb_io` importable, or `None` (printed) when there is none
/// outside CI; under `CI=true` its absence fails the test.
fn validator() -> Option<PathBuf> {
    let py = std::env::var_os("VMREPRO_KCIDB_PYTHON").map(PathBuf::from).unwrap_or_else(|| {
        let cache = std::env::var_os("XDG_CACHE_HOME")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache"));
        cache.join("vmrepro-ci/kcidb-io/bin/python")
    });
    let ok = Command::new(&py).args(["-c", "import kcidb_io"]).output().is_ok_and(|o| o.status.success());
    if ok {
        return Some(py);
    }
    let why = format!("{} can't import kcidb_io (run .ci/install-deps, or set VMREPRO_KCIDB_PYTHON)", py.display());
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("the KCIDB validator is missing under CI: {why}");
    }
    eprintln!("skipped: KCIDB validation: {why}");
    None
}

/// Runs kcidb-io's schema validator (`kcidb_io.schema.V5_3.validate_exactly`, a
/// Draft 7 JSON Schema validator with format checks) on `data`; `Err` holds its message.
fn validate(py: &Path, data: &Value) -> Result<(), String> {
    let script = "import json, sys, kcidb_io\n\
                  try:\n    kcidb_io.schema.V5_3.validate_exactly(json.load(sys.stdin))\n\
                  except Exception as e:\n    print(type(e).__name__, str(e)[:2000], file=sys.stderr); sys.exit(1)\n";
    let mut child = Command::new(py)
        .args(["-c", script])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python");
    child.stdin.take().unwrap().write_all(data.to_string().as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    if out.status.success() {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

#[test]
fn golden_runs_export_as_valid_stable_kcidb() {
    let py = validator();
    for fixture in fixtures() {
        let name = fixture.file_name().unwrap().to_string_lossy().into_owned();
        let k = export(&fixture);
        assert_eq!(k, export(&fixture), "{name}: a second export differs (ids must be stable)");
        assert!(!k["tests"].as_array().unwrap().is_empty(), "{name}: no tests");
        let builds = k["builds"].as_array().unwrap();
        for t in k["tests"].as_array().unwrap() {
            assert!(builds.iter().any(|b| b["id"] == t["build_id"]), "{name}: test {} has no build", t["id"]);
        }
        if let Some(py) = &py {
            validate(py, &k).unwrap_or_else(|e| panic!("{name}: kcidb-io rejects the export: {e}"));
        }
        support::snapshot_settings().bind(|| insta::assert_json_snapshot!(format!("kcidb__{name}"), k));
    }
}

#[test]
fn the_validator_rejects_what_kcidb_forbids() {
    let Some(py) = validator() else { return };
    let good = export(&fixtures()[0]);
    validate(&py, &good).expect("the export itself is valid");
    let mut bad_status = good.clone();
    bad_status["tests"][0]["status"] = "slower".into();
    let mut bad_id = good.clone();
    bad_id["builds"][0]["id"] = "no-origin-prefix".into();
    let mut bad_version = good;
    bad_version["version"]["major"] = 4.into();
    for (what, bad) in [("status", bad_status), ("id", bad_id), ("version", bad_version)] {
        assert!(validate(&py, &bad).is_err(), "kcidb-io accepted a bad {what}");
    }
}

fn tests_of<'a>(k: &'a Value, path: &str) -> Vec<&'a Value> {
    k["tests"].as_array().unwrap().iter().filter(|t| t["path"] == path).collect()
}

#[test]
fn statuses_follow_verdicts_and_numbers_carry_units() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/runs");
    // The RTO carry-over: mainline is `slower` than the patched kernel → FAIL; the
    // patched kernel is the baseline → PASS.
    let k = export(&root.join("nfs-udp-rto-carryover-3-reads"));
    let by_vm = |k: &Value, path: &str, vm: &str| -> Value {
        tests_of(k, path).into_iter().find(|t| t["environment"]["misc"]["vm"] == vm).cloned().expect(vm)
    };
    let main = by_vm(&k, "nfs-udp-rto-carryover.nfs-read", "mainline");
    assert_eq!(main["status"], "FAIL");
    assert_eq!(main["number"]["unit"], "s");
    assert!(main["misc"]["verdict"].as_str().unwrap().starts_with("slower"), "{main}");
    assert!(main["comment"].as_str().unwrap().contains("regression"), "{main}");
    assert_eq!(by_vm(&k, "nfs-udp-rto-carryover.nfs-read", "no-carryover")["status"], "PASS");
    let tput = by_vm(&k, "nfs-udp-rto-carryover.nfs-read.throughput_mb_s", "mainline");
    assert_eq!((tput["status"].as_str(), tput["number"]["unit"].as_str()), (Some("DONE"), Some("MB/s")));
    // Two kernels built from one source: two checkouts (one carries a patch), three builds.
    assert_eq!(k["checkouts"].as_array().unwrap().len(), 3);
    assert_eq!(k["builds"].as_array().unwrap().len(), 3);

    // The A/A run: one kernel, one checkout and one build; nothing FAILs.
    let k = export(&root.join("nfs-aa-same-kernel"));
    assert_eq!(k["checkouts"].as_array().unwrap().len(), 1);
    assert_eq!(k["checkouts"][0]["misc"]["kind"], "debian");
    assert_eq!(k["checkouts"][0]["patchset_hash"], "");
    assert_eq!(k["builds"].as_array().unwrap().len(), 1);
    assert!(k["tests"].as_array().unwrap().iter().all(|t| t["status"] != "FAIL"), "{k}");
}

#[test]
fn the_binary_writes_the_same_json_and_nothing_into_the_run() {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/runs/nfs-read-100mb");
    let before: Vec<_> = std::fs::read_dir(&fixture).unwrap().flatten().map(|e| e.file_name()).collect();
    let tmp = tempfile::tempdir().unwrap();
    let out_file = tmp.path().join("kcidb.json");
    let out = Command::new(support::vmrepro_bin())
        .args(["export", "--kcidb"])
        .arg(&fixture)
        .arg("-o")
        .arg(&out_file)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let written: Value = serde_json::from_str(&std::fs::read_to_string(&out_file).unwrap()).unwrap();
    assert_eq!(written, export(&fixture));
    let after: Vec<_> = std::fs::read_dir(&fixture).unwrap().flatten().map(|e| e.file_name()).collect();
    assert_eq!(before, after, "export wrote into the run folder");
    // Printed without -o.
    let out = Command::new(support::vmrepro_bin()).args(["export", "--kcidb"]).arg(&fixture).output().unwrap();
    assert_eq!(serde_json::from_slice::<Value>(&out.stdout).unwrap(), written);
    // Not a run folder: exit 2 (a config error), naming the missing file.
    let out = Command::new(support::vmrepro_bin()).args(["export", "--kcidb"]).arg(tmp.path()).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("plan.json is missing"), "{out:?}");
}

/// A run folder is untrusted: names with NULs, dots and slashes (which KCIDB's string
/// and path grammars refuse) and a `started` that is no time still export as valid
/// KCIDB, and no host path of environment.json reaches the output.
#[test]
fn a_crafted_run_still_exports_valid_kcidb() {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/runs/nfs-aa-same-kernel");
    let tmp = support::copy_run(&fixture);
    let edit = |file: &str, f: &dyn Fn(&mut Value)| {
        let p = tmp.path().join(file);
        let mut v: Value = serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
        f(&mut v);
        std::fs::write(&p, v.to_string()).unwrap();
    };
    // Control characters in run.json's names are refused before any export (see
    // tests/hostile.rs); dots, slashes and spaces are left, and the NULs elsewhere.
    let evil = "a_b/../c.d e";
    edit("plan.json", &|v| v["suite"] = evil.into());
    edit("run.json", &|v| {
        v["suite"] = evil.into();
        v["started"] = "yesterday\u{0}".into();
    });
    edit("environment.json", &|v| v["kernels"][0]["origin"]["package"] = "pkg\u{0}".into());
    let k = export(tmp.path());
    let text = k.to_string();
    assert!(!text.contains("\\u0000"), "a NUL reached the export");
    assert!(!text.contains("$PROJECT") && !text.contains("$CACHE"), "a host path reached the export");
    assert!(k["tests"].as_array().unwrap().iter().all(|t| t["path"].as_str().unwrap().starts_with("a_b____c_d_e.")));
    if let Some(py) = validator() {
        validate(&py, &k).unwrap_or_else(|e| panic!("kcidb-io rejects the crafted run's export: {e}"));
    }
}
