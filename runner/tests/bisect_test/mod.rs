//! The `vmrepro bisect` trial of `tests/suites.rs` (`run_suite::bisect/nfs-udp-rto-bisect.yaml`):
//! a real kernel git history, real VMs.
//!
//! The tree is made from Debian's `linux-source-6.1` by
//! `suites/bisect/make-test-tree.sh`: a base with the RPC no-carry-over patch (fast),
//! then five commits, the third of which reverts it (slow). The bisect of
//! `suites/bisect/nfs-udp-rto-bisect.yaml` must name that commit and verify it; it is
//! interrupted once after its first runs and resumed with the same command; one of
//! its runs is then bundled with `--with-images` and replayed with no tree mapped.
//!
//! Its kernels (one per commit of the tree, all but the first from a few changed
//! files, and the first mostly from the ccache the source-built 6.1 kernels filled)
//! are built first under the suites' lock, like every suite's images; its runs then
//! go beside the other suites, as the RTO suite's do (one NFS READ in flight through
//! seeded loss waits on RPC timers, not on the CPU), under the same second lock, so
//! that its kernel builds never run beside the RTO suite's reads.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::support;
use vmrepro::infra::images::kernel::KernelSource;
use vmrepro::infra::images::tree::{resolve_rev, Trees};
use vmrepro::infra::images::{Cache, Catalog};

/// `git -C tree rev-parse REV`.
fn rev_parse(tree: &Path, rev: &str) -> String {
    let out = Command::new("git").arg("-C").arg(tree).args(["rev-parse", rev]).output().unwrap();
    assert!(out.status.success(), "git rev-parse {rev}");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// Makes the test tree at `dir` from the pinned `linux-source-6.1` (fetched into the
/// cache if it is not there yet).
fn make_tree(dir: &Path) {
    let root = support::repo_root();
    let catalog = Catalog::load(&root.join("images")).unwrap();
    let src = catalog.debian_source("6.1").expect("images/kernels.yaml pins linux-source-6.1");
    let (deb, _) =
        vmrepro::infra::images::debian::fetch_deb(&Cache::from_env(), &src.filename, src.size, &src.sha256).unwrap();
    let t0 = Instant::now();
    let st = Command::new("sh")
        .arg(root.join("suites/bisect/make-test-tree.sh"))
        .arg(&deb)
        .arg(root.join("images/kernels/patches/sunrpc-no-rto-carryover.patch"))
        .arg(dir)
        .status()
        .unwrap();
    assert!(st.success(), "make-test-tree.sh failed");
    eprintln!("bisect test: tree made in {:.0} s", t0.elapsed().as_secs_f64());
}

/// `vmrepro --tree linux=TREE bisect … --verify 2 --dir DIR`, output to `log`.
fn bisect_cmd(tree: &Path, dir: &Path, log: &Path) -> Command {
    let mut c = Command::new(support::vmrepro_bin());
    c.current_dir(support::repo_root())
        .arg("--tree")
        .arg(format!("linux={}", tree.display()))
        .args(["bisect", "suites/bisect/nfs-udp-rto-bisect.yaml", "--vm", "mainline", "--good", "base"])
        .args(["--verify", "2", "--dir"])
        .arg(dir)
        .env_remove("VMREPRO_TREES")
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(log).unwrap())
        .stderr(std::fs::File::create(log.with_extension("stderr")).unwrap());
    c
}

/// The runs `bisect.json` in `dir` records (0 when it has none yet).
fn recorded_runs(dir: &Path) -> usize {
    std::fs::read(dir.join("bisect.json"))
        .ok()
        .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
        .and_then(|v| v["runs"].as_array().map(Vec::len))
        .unwrap_or(0)
}

/// Builds the kernel of VM `mainline` at every commit of the tree (base to bad), and
/// the suite's other images.
fn build_images(tree: &Path) {
    let root = support::repo_root();
    let mut trees = Trees::default();
    trees.map("linux", tree.to_path_buf());
    let options = vmrepro::suite::LoadOptions { trees, ..Default::default() };
    let (plan, catalog) =
        vmrepro::suite::load_with(&root.join("suites/bisect/nfs-udp-rto-bisect.yaml"), None, &options).unwrap();
    let vm = plan.vms.iter().position(|v| v.name == "mainline").unwrap();
    // base..bad with base itself: `base^@` (base's parents) is empty for the tree's root
    // commit, where `base^..bad` is an unknown revision, git fails, and nothing would be
    // built here (the bisect would then compile its kernels beside the timed suites).
    let out = Command::new("git").arg("-C").arg(tree).args(["rev-list", "bad", "--not", "base^@"]).output().unwrap();
    assert!(out.status.success(), "git rev-list bad --not base^@: {}", String::from_utf8_lossy(&out.stderr));
    let cache = Cache::from_env();
    let events: vmrepro::events::EventSink = std::sync::Arc::new(|_| {});
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let commits: Vec<String> = String::from_utf8_lossy(&out.stdout).lines().rev().map(str::to_string).collect();
    assert_eq!(commits.len(), 6, "the test tree has a base and five commits to bad");
    let t0 = Instant::now();
    for commit in &commits {
        let mut p = plan.clone();
        let KernelSource::Tree(k) = &p.vms[vm].kernel else { panic!("mainline's kernel is from a tree") };
        let k = vmrepro::infra::images::tree::TreeKernel { resolved: resolve_rev(tree, commit).unwrap(), ..k.clone() };
        p.vms[vm].kernel = KernelSource::Tree(k);
        let r = rt.block_on(vmrepro::run::images::resolve(&p, &cache, &catalog, &events));
        assert!(r.failures.is_empty(), "building {commit}: {:?}", r.failures);
    }
    eprintln!(
        "bisect test: images and a kernel for each of the {} commits ready in {:.0} s",
        commits.len(),
        t0.elapsed().as_secs_f64()
    );
}

/// The trial (see the module docs).
pub fn run() -> Result<(), Box<dyn std::error::Error>> {
    let tmp = support::test_tmpdir().join("bisect");
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(&tmp)?;
    let tree = tmp.join("tree");
    // Beside the suites that run one at a time, one timer-bound trial at a time: the
    // RTO suite's exact counts (its snapshot keeps its retransmissions) don't hold
    // when kernels compile beside its reads.
    let _beside = support::beside_lock();
    {
        // Like every suite's images: one build at a time, before any timed run.
        let _images = support::vm_lock();
        make_tree(&tree);
        build_images(&tree);
    }
    let culprit = rev_parse(&tree, "bad~2");
    let parent = rev_parse(&tree, "bad~3");
    let dir = tmp.join("bisect");

    // Interrupted once its first three runs (both endpoints, the first step) are
    // recorded: exit 130, and the runs stay recorded.
    let t0 = Instant::now();
    let mut child = bisect_cmd(&tree, &dir, &tmp.join("first.log")).spawn().unwrap();
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        if recorded_runs(&dir) >= 3 {
            nix::sys::signal::kill(nix::unistd::Pid::from_raw(child.id() as i32), nix::sys::signal::Signal::SIGINT)
                .unwrap();
            break child.wait().unwrap();
        }
        assert!(t0.elapsed() < Duration::from_secs(3600), "no 3 runs within an hour");
        std::thread::sleep(Duration::from_millis(500));
    };
    let first_err = std::fs::read_to_string(tmp.join("first.stderr")).unwrap();
    assert_eq!(status.code(), Some(vmrepro::exit::INTERRUPTED), "{first_err}");
    assert!(first_err.contains("the same command resumes the bisect"), "{first_err}");
    let interrupted_at = recorded_runs(&dir);
    eprintln!("bisect test: interrupted after {interrupted_at} runs, {:.0} s", t0.elapsed().as_secs_f64());

    // The same command resumes it and runs only what is missing.
    let t1 = Instant::now();
    let status = bisect_cmd(&tree, &dir, &tmp.join("second.log")).status().unwrap();
    let out = std::fs::read_to_string(tmp.join("second.log")).unwrap();
    let err = std::fs::read_to_string(tmp.join("second.stderr")).unwrap();
    eprintln!("bisect test: resumed and finished in {:.0} s\n{out}", t1.elapsed().as_secs_f64());
    assert_eq!(status.code(), Some(vmrepro::exit::SUCCESS), "{out}\n{err}");
    assert!(err.contains(&format!("resuming {}: {interrupted_at} run(s) recorded", dir.display())), "{err}");
    assert!(out.contains(&format!("first bad commit: {}", &culprit[..12])), "{out}");

    let results: serde_json::Value = serde_json::from_slice(&std::fs::read(dir.join("results.json")).unwrap()).unwrap();
    let o = &results["outcome"];
    assert_eq!(o["culprit"]["commit"], culprit.as_str());
    assert_eq!(o["direction"], "slower");
    assert_eq!(results["verified"], true);
    let v = &o["verification"];
    assert_eq!(v["parent"]["commit"], parent.as_str());
    assert_eq!((v["culprit_as_expected"].as_u64(), v["parent_as_expected"].as_u64()), (Some(2), Some(2)), "{v}");
    // Each run folder is recorded once, numbered in order: nothing ran twice.
    let state: serde_json::Value = serde_json::from_slice(&std::fs::read(dir.join("bisect.json")).unwrap()).unwrap();
    let runs: Vec<&str> = state["runs"].as_array().unwrap().iter().map(|r| r["run_dir"].as_str().unwrap()).collect();
    for (i, r) in runs.iter().enumerate() {
        assert!(r.starts_with(&format!("runs/{:02}-", i + 1)) && dir.join(r).join("results.json").is_file(), "{r}");
    }
    let log = std::fs::read_to_string(dir.join("bisect.log")).unwrap();
    assert!(
        log.starts_with("git bisect start\n") && log.contains(&format!("# first bad commit: [{culprit}]")),
        "{log}"
    );
    let report = std::fs::read_to_string(dir.join("bisect-report.md")).unwrap();
    assert!(report.trim_end().ends_with(&format!("#regzbot introduced: {}", &culprit[..12])), "{report}");
    assert!(report.contains("regression of nfs-read.elapsed_s"), "{report}");

    // The bad endpoint's run, bundled with its kernels, replays where the tree is not
    // mapped: the kernel built from the tree comes from the bundle.
    let bad_run: PathBuf = dir.join(runs[0]);
    let bundle = tmp.join("bad-endpoint.tar.gz");
    let st = Command::new(support::vmrepro_bin())
        .arg("--tree")
        .arg(format!("linux={}", tree.display()))
        .args(["bundle", "--with-images", "-o"])
        .arg(&bundle)
        .arg(&bad_run)
        .status()
        .unwrap();
    assert!(st.success(), "bundle");
    // Its tree kernel leaves the cache: the replay must take it from the bundle.
    let record: serde_json::Value = serde_json::from_slice(&std::fs::read(bad_run.join("run.json")).unwrap()).unwrap();
    let key = record["images"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["what"].as_str().is_some_and(|w| w.starts_with("kernel linux@")))
        .and_then(|i| i["key"].as_str())
        .expect("run.json records the tree kernel's cache key")
        .to_string();
    std::fs::remove_dir_all(Cache::from_env().root().join("kernel").join(&key)).unwrap();
    let replay = Command::new(support::vmrepro_bin())
        .args(["replay"])
        .arg(&bundle)
        .arg("--results")
        .arg(tmp.join("replayed"))
        .env_remove("VMREPRO_TREES")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&replay.stdout);
    assert_eq!(replay.status.code(), Some(0), "{text}\n{}", String::from_utf8_lossy(&replay.stderr));
    assert!(text.contains("imported from the bundle"), "{text}");
    assert!(text.contains(&culprit[..12]) || text.contains(&rev_parse(&tree, "bad")[..12]), "{text}");
    Ok(())
}
