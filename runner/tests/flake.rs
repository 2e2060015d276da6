//! `flake.nix`, checked where nixpkgs can't be fetched: it parses (`nix-instantiate
//! --parse`), and its outputs evaluated against the stand-in nixpkgs in
//! `nix/test/stub-nixpkgs` (`nix/test/structure.nix`) have the expected structure:
//! packages, apps (`default`, `reproduce` running `vmrepro replay`), the dev shell,
//! checks (build + the VM-free tests), and one fixed-output fetch per pinned kernel
//! package with the URL and SHA-256 of `images/kernels.yaml`. Nothing is built.
//!
//! Skips (printing why) when `nix-instantiate` is not installed (Debian: `nix-bin`).
//! Both calls use `--readonly-mode`: nothing is written to the Nix store, and the store's
//! SQLite database is never opened, so two evaluations at once (this file's tests run in
//! parallel, and so may other checkouts' `cargo fast`) can't fail with "database is busy".
//! `nix/pinned-kernels.json` must match `images/kernels.yaml` (checked without Nix;
//! `UPDATE_NIX_PINS=1 cargo test --test flake` rewrites it).

mod support;

use std::process::Command;

use vmrepro::infra::images::Catalog;

fn nix() -> bool {
    let ok = Command::new("nix-instantiate").arg("--version").output().is_ok_and(|o| o.status.success());
    if !ok {
        eprintln!("skipped: nix-instantiate is not installed (Debian package nix-bin)");
    }
    ok
}

/// The arguments of `cargo fast` after `test` (the `fast` alias of `.cargo/config.toml`).
fn fast_tier_flags() -> String {
    let config = std::fs::read_to_string(support::repo_root().join(".cargo/config.toml")).unwrap();
    let line = config.lines().find_map(|l| l.strip_prefix("fast = \"")).expect("a `fast` alias");
    let alias = line.strip_suffix('"').expect("a one-line alias");
    alias.strip_prefix("test ").expect("a `cargo test` alias").to_string()
}

/// `checks.tests` runs the same VM-free tests as `cargo fast` (checked without Nix:
/// the flake's list is read from its text).
#[test]
fn the_flakes_tests_are_cargo_fast() {
    let flake = std::fs::read_to_string(support::repo_root().join("flake.nix")).unwrap();
    let list = flake.split("cargoTestFlags = [").nth(1).and_then(|r| r.split(']').next()).expect("cargoTestFlags");
    let flags: Vec<&str> = list.split_whitespace().map(|w| w.trim_matches('"')).collect();
    assert_eq!(flags.join(" "), fast_tier_flags());
    for binary in ["plans", "bad_suites", "parsers", "analyse", "publish", "hostile", "repin", "flake", "readme"] {
        assert!(flags.windows(2).any(|w| w == ["--test", binary]), "{binary} is in the fast tier");
    }
}

#[test]
fn pinned_kernels_json_is_current() {
    let root = support::repo_root();
    let catalog = Catalog::load(&root.join("images")).unwrap();
    let want = serde_json::json!({
        "comment": "Generated from images/kernels.yaml (runner/tests/flake.rs checks it is current; UPDATE_NIX_PINS=1 rewrites it). flake.nix reads it for pinnedKernels.",
        "kernels": catalog.kernels,
        "sources": catalog.sources,
    });
    let path = root.join("nix/pinned-kernels.json");
    if std::env::var_os("UPDATE_NIX_PINS").is_some() {
        std::fs::write(&path, serde_json::to_string_pretty(&want).unwrap() + "\n").unwrap();
    }
    let got: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert_eq!(got, want, "nix/pinned-kernels.json is stale: run UPDATE_NIX_PINS=1 cargo test --test flake");
}

#[test]
fn flake_parses() {
    if !nix() {
        return;
    }
    let root = support::repo_root();
    let out = Command::new("nix-instantiate")
        .args(["--readonly-mode", "--parse"])
        .arg(root.join("flake.nix"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn flake_outputs_have_the_expected_structure() {
    if !nix() {
        return;
    }
    let root = support::repo_root();
    let out = Command::new("nix-instantiate")
        .args(["--readonly-mode", "--eval", "--strict", "--json"])
        .arg(root.join("nix/test/structure.nix"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let names =
        |k: &str| -> Vec<String> { v[k].as_array().unwrap().iter().map(|x| x.as_str().unwrap().to_string()).collect() };
    assert_eq!(names("packages"), ["default", "reproduce", "vmrepro"]);
    assert_eq!(names("apps"), ["default", "reproduce"]);
    assert_eq!(names("appTypes"), ["app", "app"]);
    assert_eq!(names("devShells"), ["default"]);
    assert_eq!(names("checks"), ["build", "tests"]);
    assert!(v["reproduceText"].as_str().unwrap().contains("/bin/vmrepro replay \"$@\""), "{}", v["reproduceText"]);
    assert!(v["flagshipProgram"].as_str().unwrap().ends_with("/bin/vmrepro-nfs-read-100mb"));
    let flags = names("testFlags").join(" ");
    assert_eq!(flags, fast_tier_flags());
    assert_eq!(v["packageCommit"], "0123456789abcdef0123456789abcdef01234567");
    assert!(v["lockFile"].as_str().unwrap().ends_with("/Cargo.lock"));
    // One fixed-output fetch per pinned package, from the archive the caller named.
    let catalog = Catalog::load(&root.join("images")).unwrap();
    let fetches = v["kernelFetches"].as_array().unwrap();
    assert_eq!(fetches.len(), catalog.kernels.len() + catalog.sources.len());
    for k in &catalog.kernels {
        let url = format!("http://archive.example/debian/{}", k.filename);
        assert!(
            fetches.iter().any(|f| f["url"] == url.as_str() && f["sha256"] == k.sha256.as_str()),
            "no fetch of {url} with {}",
            k.sha256
        );
    }
}
