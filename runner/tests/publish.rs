//! Publishing without a VM, on a real run folder kept as a fixture
//! (`fixtures/runs/nfs-aa-same-kernel/`: the `run/` folder of a bundle made on the
//! project's machine, so its host paths are already placeholders):
//!
//! - `report.md` keeps its lines within 80 columns outside fenced blocks and holds the
//!   environment, the hashes and the comparison; `report.html` is well-formed XHTML
//!   whose SVG chart holds one dot per repeat with its value and each VM's median, as
//!   in `results.json`;
//! - JUnit XML has one test case per step and per verdict;
//! - a bundle of a run folder whose files hold the publisher's home folder, host name
//!   and user name holds none of them, passes its MANIFEST, loads its suite, carries
//!   only the pinned entries it uses, and compares equal to its run;
//! - a damaged bundle is refused; a bundle whose pinned package left the archive says so.

mod support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use vmrepro::analyse::analyse_dir;
use vmrepro::infra::images::Cache;
use vmrepro::measure::analysis::counted_values;
use vmrepro::publish::archive::verify;
use vmrepro::publish::bundle::{bundle, extract, BundleOptions};
use vmrepro::publish::redact::Identity;
use vmrepro::publish::replay::{compare, open, prepare, ReplayError};
use vmrepro::report::published;
use vmrepro::run::environment::{file_sha256, Environment, ENVIRONMENT_FILE};

const HOME: &str = "/home/kmaint";
const HOST: &str = "buildbox-7";
const USER: &str = "kmaint";

fn fixture() -> PathBuf {
    support::repo_root().join("runner/tests/fixtures/runs/nfs-aa-same-kernel")
}

fn copy_tree(from: &Path, to: &Path) {
    for e in walkdir(from) {
        let rel = e.strip_prefix(from).unwrap();
        let dest = to.join(rel);
        std::fs::create_dir_all(dest.parent().unwrap()).unwrap();
        std::fs::copy(&e, &dest).unwrap();
    }
}

fn walkdir(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            if e.file_type().unwrap().is_dir() {
                stack.push(e.path());
            } else {
                out.push(e.path());
            }
        }
    }
    out.sort();
    out
}

/// A copy of the fixture run folder in `tmp/<stamp>`.
fn run_copy(tmp: &Path) -> PathBuf {
    let dir = tmp.join("results/nfs-aa-same-kernel/20261130T170000Z");
    copy_tree(&fixture(), &dir);
    dir
}

#[test]
fn report_md_reads_in_a_mail_and_html_holds_the_numbers() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = run_copy(tmp.path());
    let w = published::write(&dir).unwrap();
    let a = analyse_dir(&dir).unwrap();
    let md = std::fs::read_to_string(&w.markdown).unwrap();

    // The text: 80 columns outside fences, and the facts a maintainer asks for.
    let mut fenced = false;
    for l in md.lines() {
        if l.starts_with("```") {
            fenced = !fenced;
            continue;
        }
        assert!(fenced || l.chars().count() <= 80, "line over 80 columns: {l:?}");
    }
    assert!(md.starts_with("[vmrepro] nfs-aa-same-kernel: "), "{}", md.lines().next().unwrap());
    let env: Environment = serde_json::from_str(&std::fs::read_to_string(dir.join(ENVIRONMENT_FILE)).unwrap()).unwrap();
    for needle in [
        env.suite.sha256.as_str(),
        env.host.qemu_version.as_str(),
        env.host.cpu_model.as_str(),
        env.vmrepro.git_commit.as_str(),
        "linux-image-6.1.0-50-cloud-amd64",
        "efe19f605b6f54a8352e68d85a629abb2d30b72a085faef603a9152590baa791",
        "value %stddev",
        "%change",
        "elapsed_s",
        "vmrepro replay nfs-aa-same-kernel-20261130T170000Z.tar.gz",
        "nfs-common",
        "proto=tcp",
        "an A/A comparison",
        "netstat.Tcp.InSegs",
    ] {
        assert!(md.contains(needle), "report.md lacks {needle:?}");
    }

    // The page: well-formed XHTML, one SVG chart per measurement holding every repeat.
    let html = std::fs::read_to_string(&w.html).unwrap();
    assert!(!html.contains("<script"), "no script");
    assert!(!html.contains("http://") || !html.contains("src=\"http"), "no external asset");
    let opt = roxmltree::ParsingOptions { allow_dtd: true, ..Default::default() };
    let doc = roxmltree::Document::parse_with_options(&html, opt).expect("report.html is well-formed XML");
    let svg_ns = "http://www.w3.org/2000/svg";
    let charts: Vec<_> = doc.descendants().filter(|n| n.has_tag_name((svg_ns, "svg"))).collect();
    assert_eq!(charts.len(), a.results.measurements.len());
    let m = &a.results.measurements[0];
    let chart = charts[0];
    let class = |n: &roxmltree::Node, c: &str| n.attribute("class") == Some(c);
    for v in &m.vms {
        let want = counted_values(&m.metric, v);
        assert_eq!(want.len(), 5, "the fixture has 5 counted repeats per client (after a warm-up read)");
        let got: Vec<f64> = chart
            .descendants()
            .filter(|n| {
                n.has_tag_name((svg_ns, "circle")) && class(n, "repeat") && n.attribute("data-vm") == Some(&v.vm)
            })
            .map(|n| n.attribute("data-value").unwrap().parse().unwrap())
            .collect();
        assert_eq!(got, want, "dots of {}", v.vm);
        let median: f64 = chart
            .descendants()
            .find(|n| class(n, "median") && n.attribute("data-vm") == Some(&v.vm))
            .and_then(|n| n.attribute("data-value"))
            .unwrap()
            .parse()
            .unwrap();
        assert_eq!(median, v.metric.as_ref().unwrap().median);
    }
    let base = chart.descendants().find(|n| class(n, "baseline-median")).expect("the baseline is marked");
    let base_median: f64 = base.attribute("data-value").unwrap().parse().unwrap();
    assert_eq!(base_median, m.vm(&m.baseline).unwrap().metric.as_ref().unwrap().median);
    // The page says what the text says: the same tables.
    let pre: String = doc.descendants().filter(|n| n.has_tag_name("pre")).filter_map(|n| n.text()).collect();
    assert!(pre.contains("%change") && pre.contains("elapsed_s"));
}

/// A run made with `--pin` says where each QEMU ran, and its report reproduces it
/// pinned; an unpinned run's report mentions no pinning.
/// The first line follows the kernel test robot's regression reports ("noticed a
/// -34.6% regression of <metric> on <commit>"): the RTO carry-over's mainline kernel.
#[test]
fn the_headline_reads_as_the_kernel_test_robots_regression_line() {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/runs/nfs-udp-rto-carryover-3-reads");
    let a = vmrepro::analyse::analyse_read_only(&fixture).unwrap();
    assert_eq!(
        published::headline(&a.results.suite, &a.results.measurements),
        "[vmrepro] nfs-udp-rto-carryover: +247.8% regression of nfs-read.elapsed_s on 6.1.176-vmrepro (mainline)"
    );
}

#[test]
fn a_pinned_run_says_so_and_is_reproduced_pinned() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = run_copy(tmp.path());
    let unpinned = std::fs::read_to_string(published::write(&dir).unwrap().markdown).unwrap();
    assert!(!unpinned.contains("--pin"), "an unpinned run's report mentions --pin");

    // As `vmrepro run --pin` writes it where pinning was not possible: said, not reproduced.
    let path = dir.join("run.json");
    let mut run: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let why = vmrepro::infra::qemu::pin::PinError::TooFewCpus(1).to_string();
    run["pin_notice"] = why.clone().into();
    std::fs::write(&path, serde_json::to_string_pretty(&run).unwrap()).unwrap();
    let md = std::fs::read_to_string(published::write(&dir).unwrap().markdown).unwrap();
    let words = md.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(words.contains(&format!("QEMU pinned (--pin): asked for, not applied: {why}")), "{md}");
    assert!(!md.contains("vmrepro run --pin"), "{md}");
    run.as_object_mut().unwrap().remove("pin_notice");

    // The fixture's run.json as `vmrepro run --pin` writes it on 2 CPUs.
    let mut names = Vec::new();
    for vm in run["vms"].as_array_mut().unwrap() {
        let cpu = if vm["name"] == "server" { 0 } else { 1 };
        names.push(format!("{} CPU {cpu}", vm["name"].as_str().unwrap()));
        vm["pinned_cpu"] = cpu.into();
    }
    std::fs::write(&path, serde_json::to_string_pretty(&run).unwrap()).unwrap();
    let md = std::fs::read_to_string(published::write(&dir).unwrap().markdown).unwrap();
    let line = md.lines().find(|l| l.contains("QEMU pinned (--pin)")).expect("the pinning is reported");
    assert!(line.ends_with(&names.join(", ")), "{line}");
    assert!(md.contains("vmrepro run --pin suites/nfs-aa-same-kernel.yaml"), "{md}");
    assert!(md.contains("vmrepro replay --pin nfs-aa-same-kernel-20261130T170000Z.tar.gz"), "{md}");
}

#[test]
fn junit_has_one_case_per_step_and_per_verdict() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = run_copy(tmp.path());
    let a = analyse_dir(&dir).unwrap();
    let xml = vmrepro::report::junit::junit(&a.record, Some(&a.results));
    let doc = roxmltree::Document::parse(&xml).unwrap();
    let cases: Vec<_> = doc.descendants().filter(|n| n.has_tag_name("testcase")).collect();
    let steps: usize = a.record.vms.iter().map(|v| v.steps.len()).sum();
    let verdicts: usize = a.results.measurements.iter().map(|m| m.vms.len()).sum();
    assert_eq!(cases.len(), steps + verdicts);
    assert!(cases.iter().any(|c| c.attribute("name") == Some("server/nfs-server-ready")));
    let b = cases.iter().find(|c| c.attribute("name") == Some("nfs-read/client-b")).unwrap();
    assert!(b.descendants().any(|n| n.has_tag_name("property") && n.attribute("name") == Some("verdict")));
    // The fixture run passed: no failure element anywhere.
    assert!(!doc.descendants().any(|n| n.has_tag_name("failure")), "{xml}");
}

/// A run folder as it would be on a publisher's machine: the fixture with its
/// placeholders turned back into host paths under `HOME`, and the host and user names
/// written where tools print them.
/// Points run folder `dir`'s `environment.json` at the project `root` (its suite
/// nfs-aa-same-kernel, with its SHA-256, and its images folder) and the cache `cache`.
fn set_project(dir: &Path, root: &Path, cache: &str) {
    let mut env: Environment =
        serde_json::from_str(&std::fs::read_to_string(dir.join(ENVIRONMENT_FILE)).unwrap()).unwrap();
    let suite = root.join("suites/nfs-aa-same-kernel.yaml");
    env.suite.path = suite.display().to_string();
    env.suite.project_root = root.display().to_string();
    env.suite.sha256 = file_sha256(&suite).unwrap();
    env.images_dir = root.join("images").display().to_string();
    env.cache_root = cache.to_string();
    std::fs::write(dir.join(ENVIRONMENT_FILE), serde_json::to_string_pretty(&env).unwrap()).unwrap();
}

fn private_run(tmp: &Path) -> (PathBuf, Cache) {
    let root = support::repo_root();
    let dir = run_copy(tmp);
    let cache = format!("{HOME}/.cache/vmrepro");
    for f in walkdir(&dir) {
        let text = String::from_utf8_lossy(&std::fs::read(&f).unwrap()).into_owned();
        let text = text
            .replace("$CACHE", &cache)
            .replace("$RUN_DIR", &dir.display().to_string())
            .replace("$PROJECT", &root.display().to_string())
            .replace("$TMP/vmrepro-run-", "/tmp/vmrepro-run-");
        std::fs::write(&f, text).unwrap();
    }
    // Where the host name and user name show up in real life: a tool's stderr, a prompt
    // in a console, a path.
    let console = dir.join("vms/client-a/console.log");
    let mut c = std::fs::read_to_string(&console).unwrap();
    c.push_str(&format!("\n{USER}@{HOST}:~$ ls {HOME}/src/linux\nbuilt by {USER} on {HOST}.example.org\n"));
    // Big enough to be cut.
    c.push_str(&"[    1.000000] filler line of a chatty kernel\n".repeat(8000));
    std::fs::write(&console, c).unwrap();
    std::fs::write(
        dir.join("vms/client-b/qemu.stderr"),
        format!("qemu-system-x86_64: warning: {HOST}: cannot open {HOME}/.config/qemu.conf for {USER}\n"),
    )
    .unwrap();
    set_project(&dir, &root, &cache);
    // The reports are made again from these files.
    let _ = std::fs::remove_file(dir.join("report.md"));
    let _ = std::fs::remove_file(dir.join("report.html"));
    (dir, Cache::new(PathBuf::from(cache)))
}

fn identity() -> Identity {
    Identity { home: Some(HOME.into()), host: Some(HOST.into()), user: Some(USER.into()) }
}

/// Run folder `dir` bundled into `tmp/name` (as [`identity`] publishes it) and
/// unpacked into `tmp/x`: the bundle and what unpacking it gave.
fn bundled(tmp: &Path, dir: &Path, cache: Cache, name: &str) -> (PathBuf, vmrepro::publish::bundle::Extracted) {
    let out = tmp.join(name);
    bundle(dir, &out, &BundleOptions { with_images: false, cache, identity: identity(), images: None }).unwrap();
    let x = tmp.join("x");
    std::fs::create_dir(&x).unwrap();
    let ex = extract(&out, &x).unwrap();
    (out, ex)
}

#[test]
fn a_bundle_leaks_no_host_path_or_name() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, cache) = private_run(tmp.path());
    // The planted names are there before bundling (else this test could not fail).
    let before: String =
        walkdir(&dir).iter().map(|f| String::from_utf8_lossy(&std::fs::read(f).unwrap()).into_owned()).collect();
    for needle in [HOME, HOST, USER] {
        assert!(before.contains(needle), "fixture lacks {needle}");
    }
    let out = tmp.path().join("b.tar.gz");
    let opts = BundleOptions { with_images: false, cache, identity: identity(), images: None };
    let summary = bundle(&dir, &out, &opts).unwrap();
    assert_eq!(summary.info.cut_logs, ["run/vms/client-a/console.log"]);

    let x = tmp.path().join("x");
    std::fs::create_dir(&x).unwrap();
    let ex = extract(&out, &x).unwrap();
    let repo = support::repo_root().display().to_string();
    let tmp_path = tmp.path().display().to_string();
    let mut files = 0;
    for f in walkdir(&ex.top) {
        let data = std::fs::read(&f).unwrap();
        let text = String::from_utf8_lossy(&data);
        for needle in [HOME, HOST, USER, repo.as_str(), tmp_path.as_str(), "/tmp/vmrepro-run-"] {
            assert!(!text.contains(needle), "{} holds {needle:?}", f.display());
        }
        files += 1;
    }
    assert_eq!(files, summary.files);
    let console = std::fs::read_to_string(ex.top.join("run/vms/client-a/console.log")).unwrap();
    assert!(console.contains("$USER@$HOSTNAME:~$ ls $HOME/src/linux"), "redacted in place");
    assert!(console.contains("bytes cut here"));
    assert!(console.len() < 300 * 1024);
    let cmdline = std::fs::read_to_string(ex.top.join("run/vms/client-a/qemu-cmdline.txt")).unwrap();
    assert!(cmdline.contains("$CACHE/"), "{cmdline}");
    assert!(cmdline.contains("$TMP/vmrepro-run-"), "{cmdline}");
    assert!(cmdline.contains("-accel tcg -cpu max"), "the rest is left alone: {cmdline}");
}

#[test]
fn a_bundle_round_trips_and_compares_equal_to_its_run() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, cache) = private_run(tmp.path());
    let (out, ex) = bundled(tmp.path(), &dir, cache, "b.tar.zst");
    assert_eq!(ex.info.suite, "nfs-aa-same-kernel");
    assert_eq!(ex.info.suite_file, "project/suites/nfs-aa-same-kernel.yaml");
    for f in [
        "project/images/rootfs/bookworm-nfs.yaml",
        "project/images/rootfs/bookworm-nfs/overlay/sbin/vmrepro-init",
        "project/images/initramfs/init",
        "project/images/profiles/nfs-server-2.4.19.sh",
        "run/results.json",
        "run/report.md",
        "run/report.html",
        "run/vms/server/console.log",
        "run/vms/client-a/qemu-cmdline.txt",
        "run/nfs/client-a/read-1.txt",
    ] {
        assert!(ex.top.join(f).is_file(), "bundle lacks {f}");
    }
    use std::os::unix::fs::PermissionsExt;
    let init = ex.top.join("project/images/rootfs/bookworm-nfs/overlay/sbin/vmrepro-init");
    assert_ne!(init.metadata().unwrap().permissions().mode() & 0o111, 0, "executables stay executable");
    // Only the pinned entry the suite uses.
    let pins = std::fs::read_to_string(ex.top.join("project/images/kernels.yaml")).unwrap();
    assert!(pins.contains("linux-image-6.1.0-50-cloud-amd64"));
    assert!(!pins.contains("linux-image-5.10") && !pins.contains("linux-source"), "{pins}");
    // The bundled suite loads against the bundled images, and its rootfs is the same.
    let (plan, catalog) =
        vmrepro::suite::load(&ex.top.join(&ex.info.suite_file), Some(&ex.top.join(&ex.info.images_dir))).unwrap();
    assert_eq!(plan.vms.len(), 3);
    let here = vmrepro::infra::images::Catalog::load(&support::repo_root().join("images")).unwrap();
    let recipe = vmrepro::infra::images::rootfs::RootfsRequest::new("bookworm-nfs", &[]);
    assert_eq!(
        vmrepro::infra::images::rootfs::rootfs_key_with(&catalog, &recipe).unwrap(),
        vmrepro::infra::images::rootfs::rootfs_key_with(&here, &recipe).unwrap()
    );
    // Bundle against run folder: the same results, every verdict agrees.
    let budget = vmrepro::publish::bundle::Budget::default();
    let (a, b) = (open(&dir, &budget).unwrap(), open(&out, &budget).unwrap());
    let (d, _) = compare(&a, &b);
    assert!(d.agrees(), "{}", d.text);
    assert!(d.text.contains("client-b"));

    // A run whose verdict differs is told apart.
    let other = tmp.path().join("other");
    copy_tree(&dir, &other);
    let path = other.join("results.json");
    let mut r: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let vms = r["measurements"][0]["vms"].as_array_mut().unwrap();
    let b_vm = vms.iter_mut().find(|v| v["vm"] == "client-b").unwrap();
    b_vm["verdict"] = "slower (1.2x–1.4x)".into();
    std::fs::write(&path, serde_json::to_string(&r).unwrap()).unwrap();
    let (d, _) = compare(&a, &open(&other, &budget).unwrap());
    assert!(!d.agrees());
    assert_eq!(d.disagreements, ["nfs-read/client-b: same → slower"], "{}", d.text);
}

#[test]
fn a_damaged_bundle_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, cache) = private_run(tmp.path());
    let (_, ex) = bundled(tmp.path(), &dir, cache, "b.tar.gz");
    assert!(verify(&ex.top).is_ok());
    std::fs::write(ex.top.join("run/results.json"), "{}").unwrap();
    let e = verify(&ex.top).unwrap_err().to_string();
    assert!(e.contains("run/results.json") && e.contains("damaged"), "{e}");
    std::fs::write(ex.top.join("extra.txt"), "x").unwrap();
    std::fs::remove_file(ex.top.join("run/results.json")).unwrap();
    assert!(verify(&ex.top).is_err());
    let not = tmp.path().join("not.tar.gz");
    std::fs::write(&not, b"plain text").unwrap();
    assert!(extract(&not, &tmp.path().join("y")).is_err());
}

#[test]
fn replay_says_plainly_when_a_pinned_package_left_the_archive() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, cache) = private_run(tmp.path());
    let out = tmp.path().join("b.tar.gz");
    bundle(&dir, &out, &BundleOptions { with_images: false, cache, identity: identity(), images: None }).unwrap();
    // An empty cache and an archive that has nothing (every path 404).
    let archive = support::FileServer::start(BTreeMap::new());
    std::env::set_var("VMREPRO_DEBIAN_MIRROR", format!("{}/debian", archive.url));
    let empty = Cache::new(tmp.path().join("empty-cache"));
    let e = prepare(&out, &empty, &vmrepro::publish::bundle::Budget::default()).unwrap_err();
    std::env::remove_var("VMREPRO_DEBIAN_MIRROR");
    assert!(matches!(e, ReplayError::PackageGone(_)), "{e}");
    let text = e.to_string();
    assert!(text.contains("linux-image-6.1.0-50-cloud-amd64 6.1.176-1 cannot be had"), "{text}");
    assert!(text.contains("404") && text.contains("--with-images"), "{text}");
}

/// Sends `sig` to `child`, waits (at most 30 s) for it to end, checks it exited as
/// interrupted; its stderr.
fn signal_and_wait(child: &mut std::process::Child, sig: nix::sys::signal::Signal) -> String {
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(child.id() as i32), sig).unwrap();
    let start = std::time::Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(start.elapsed().as_secs() < 30, "the command did not end on {sig}");
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    assert_eq!(status.code(), Some(vmrepro::exit::INTERRUPTED), "{sig}: {err}");
    err
}

/// SIGINT or SIGTERM while `vmrepro replay` unpacks and checks a bundle (here: blocked
/// fetching a pinned package from an archive that accepts and never answers) removes
/// the replay's private temp folder, and the exit code says "interrupted".
#[test]
fn replay_removes_its_temp_folder_on_a_signal() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, cache) = private_run(tmp.path());
    let out = tmp.path().join("b.tar.gz");
    bundle(&dir, &out, &BundleOptions { with_images: false, cache, identity: identity(), images: None }).unwrap();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for s in listener.incoming().flatten() {
            held.push(s);
            let _ = tx.send(());
        }
    });
    for sig in [nix::sys::signal::Signal::SIGINT, nix::sys::signal::Signal::SIGTERM] {
        let tmpdir = tmp.path().join(format!("tmpdir-{sig}"));
        std::fs::create_dir(&tmpdir).unwrap();
        let mut child = std::process::Command::new(support::vmrepro_bin())
            .args(["replay", &out.display().to_string(), "--results", &tmp.path().join("r").display().to_string()])
            .env("TMPDIR", &tmpdir)
            .env("VMREPRO_CACHE_DIR", tmp.path().join(format!("cache-{sig}")))
            .env("VMREPRO_DEBIAN_MIRROR", format!("http://127.0.0.1:{port}/debian"))
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        if rx.recv_timeout(std::time::Duration::from_secs(60)).is_err() {
            let _ = child.kill();
            let o = child.wait_with_output().unwrap();
            panic!("replay never reached the archive: {}", String::from_utf8_lossy(&o.stderr));
        }
        let names = |d: &Path| -> Vec<String> {
            std::fs::read_dir(d).unwrap().flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect()
        };
        let before = names(&tmpdir);
        assert!(before.iter().any(|n| n.starts_with("vmrepro-replay-")), "no temp folder while blocked: {before:?}");
        let err = signal_and_wait(&mut child, sig);
        assert!(err.contains("temp folder") && err.contains("is removed"), "{err}");
        assert_eq!(names(&tmpdir), Vec::<String>::new(), "{sig} left the temp folder");
    }
}

/// SIGINT or SIGTERM while `vmrepro compare` unpacks a bundle (here: one of 60 000
/// small entries, which takes seconds) removes its private temp folders, as `replay`
/// does, and the exit code says "interrupted".
#[test]
fn compare_removes_its_temp_folders_on_a_signal() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("many.tar.gz");
    let mut b = tar::Builder::new(flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast()));
    for i in 0..60_000 {
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(tar::EntryType::Regular);
        h.set_mode(0o644);
        h.set_size(1);
        b.append_data(&mut h, format!("b/d{}/f{i}", i % 100), &b"x"[..]).unwrap();
    }
    std::fs::write(&out, b.into_inner().unwrap().finish().unwrap()).unwrap();
    let names = |d: &Path| -> Vec<String> {
        std::fs::read_dir(d).unwrap().flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect()
    };
    for sig in [nix::sys::signal::Signal::SIGINT, nix::sys::signal::Signal::SIGTERM] {
        let tmpdir = tmp.path().join(format!("tmpdir-{sig}"));
        std::fs::create_dir(&tmpdir).unwrap();
        let bundle = out.display().to_string();
        let mut child = std::process::Command::new(support::vmrepro_bin())
            .args(["compare", &bundle, &bundle, "--max-entries", "100000"])
            .env("TMPDIR", &tmpdir)
            .env("VMREPRO_CACHE_DIR", tmp.path().join(format!("cache-{sig}")))
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        // Wait until the first bundle is being unpacked: its top folder has files.
        let start = std::time::Instant::now();
        loop {
            let unpacking =
                names(&tmpdir).iter().any(|n| n.starts_with("vmrepro-compare-") && tmpdir.join(n).join("b").is_dir());
            if unpacking {
                break;
            }
            if let Some(s) = child.try_wait().unwrap() {
                panic!("compare ended ({s}) before it was seen unpacking");
            }
            assert!(start.elapsed().as_secs() < 60, "compare never started unpacking");
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        let err = signal_and_wait(&mut child, sig);
        assert!(err.contains("temp folders") && err.contains("are removed"), "{err}");
        assert_eq!(names(&tmpdir), Vec::<String>::new(), "{sig} left a temp folder");
    }
}

/// A project file the bundle carries (here: a rootfs overlay file) that is a hard link
/// to a file outside, or a symbolic link, is refused by `bundle` naming it; the
/// outside file's text is in no message and no bundle is written.
#[test]
fn bundle_refuses_a_project_file_that_is_a_link() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, cache) = private_run(tmp.path());
    let outside = tmp.path().join("outside-secret");
    std::fs::write(&outside, "CANARY-SECRET-bundle\n").unwrap();
    let project = tmp.path().join("project");
    std::fs::create_dir_all(&project).unwrap();
    for sub in ["suites", "images"] {
        let st = std::process::Command::new("cp")
            .args(["-a", &support::repo_root().join(sub).display().to_string(), &project.display().to_string()])
            .status()
            .unwrap();
        assert!(st.success(), "copying {sub}");
    }
    let overlay = project.join("images/rootfs/bookworm-nfs/overlay/etc/inittab");
    set_project(&dir, &project, &cache.root().display().to_string());
    type Plant = fn(&Path, &Path);
    let plants: [(&str, Plant); 2] = [
        ("hard link", |o, f| std::fs::hard_link(o, f).unwrap()),
        ("symbolic link", |o, f| std::os::unix::fs::symlink(o, f).unwrap()),
    ];
    for (word, plant) in plants {
        std::fs::remove_file(&overlay).unwrap();
        plant(&outside, &overlay);
        let out = tmp.path().join("b.tar.gz");
        let opts = BundleOptions { with_images: false, cache: cache.clone(), identity: identity(), images: None };
        let e = bundle(&dir, &out, &opts).expect_err(word).to_string();
        assert!(e.contains(word) && e.contains("inittab"), "{word}: {e}");
        assert!(!e.contains("CANARY"), "{e}");
        assert!(!out.exists(), "{word}: a bundle was written");
    }
}

/// A real capture (the wire fixture: 699 frames of the RTO suite's `mainline` client)
/// planted in the private run as client-a's, the window of its first counted iteration
/// (the step after the warm-up read) the whole file: `(run folder, cache, the capture's
/// bytes)`.
fn private_run_with_capture(tmp: &Path) -> (PathBuf, Cache, Vec<u8>) {
    let (dir, cache) = private_run(tmp);
    let pcap =
        std::fs::read(support::repo_root().join("runner/tests/fixtures/wire/nfs-udp-rto-carryover-mainline.pcap"))
            .unwrap();
    std::fs::write(dir.join("vms/client-a/capture.pcap"), &pcap).unwrap();
    let path = dir.join("run.json");
    let mut run: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let vm = run["vms"].as_array_mut().unwrap().iter_mut().find(|v| v["name"] == "client-a").unwrap();
    vm["capture"] = serde_json::json!({"file": "vms/client-a/capture.pcap", "bytes": pcap.len(),
        "max_bytes": 67108864, "measured_only": true});
    let first = vm["steps"].as_array_mut().unwrap().iter_mut().find(|s| s["warmup"] == false).unwrap();
    first["capture_bytes"] = serde_json::json!([24, pcap.len()]);
    std::fs::write(&path, serde_json::to_string_pretty(&run).unwrap()).unwrap();
    // results.json with the iteration's wire counters, as a run would have written it.
    analyse_dir(&dir).unwrap();
    (dir, cache, pcap)
}

/// A packet capture goes into a bundle byte for byte (never through the text
/// redaction the run's other files get), with its size in the MANIFEST; read back,
/// `analyse` derives the same wire counters from it, `compare` finds the bundle equal
/// to its run, and `vmrepro wire` prints the same. A changed size line is damage.
#[test]
fn a_capture_goes_into_a_bundle_byte_for_byte_and_reads_back() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, cache, pcap) = private_run_with_capture(tmp.path());
    let first_counted = |run: &Path| {
        let a = analyse_dir(run).unwrap();
        a.results.measurements[0].vm("client-a").unwrap().iterations.iter().find(|i| i.counted).unwrap().wire.clone()
    };
    let wire_here = first_counted(&dir);
    assert_eq!(wire_here["wire.rpc.calls"], 128.0, "{wire_here:?}");
    assert_eq!(wire_here["wire.rpc.retransmissions"], 64.0, "{wire_here:?}");
    let (out, ex) = bundled(tmp.path(), &dir, cache, "b.tar.zst");
    let carried = ex.top.join("run/vms/client-a/capture.pcap");
    assert!(std::fs::read(&carried).unwrap() == pcap, "the capture is carried byte for byte");
    let manifest = std::fs::read_to_string(ex.top.join("MANIFEST")).unwrap();
    let sha = hex::encode(<sha2::Sha256 as sha2::Digest>::digest(&pcap));
    let lines = format!("# bytes {} run/vms/client-a/capture.pcap\n{sha}  run/vms/client-a/capture.pcap\n", pcap.len());
    assert!(manifest.contains(&lines), "{manifest}");
    // analyse from the bundle: the same wire counters, from the bundled capture.
    assert_eq!(first_counted(&ex.top.join("run")), wire_here);
    let budget = vmrepro::publish::bundle::Budget::default();
    let (d, _) = compare(&open(&dir, &budget).unwrap(), &open(&out, &budget).unwrap());
    assert!(d.agrees(), "{}", d.text);
    let wire = |run: &Path| {
        let o = std::process::Command::new(env!("CARGO_BIN_EXE_vmrepro"))
            .arg("wire")
            .arg(run)
            .arg("client-a")
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8(o.stdout).unwrap()
    };
    let printed = wire(&dir);
    assert!(printed.contains("client-a: 699 frames, 128 RPC calls"), "{printed}");
    assert_eq!(wire(&ex.top.join("run")), printed);
    // A size that is not the file's is damage.
    let bad = manifest.replace(&format!("# bytes {} ", pcap.len()), &format!("# bytes {} ", pcap.len() - 1));
    std::fs::write(ex.top.join("MANIFEST"), bad).unwrap();
    let e = verify(&ex.top).unwrap_err().to_string();
    assert!(
        e.contains(&format!("run/vms/client-a/capture.pcap: {} bytes, MANIFEST line", pcap.len()))
            && e.contains("damaged"),
        "{e}"
    );
}

/// A capture that holds the host name (a frame's bytes here) can't be redacted
/// without changing the evidence: `bundle` refuses it, naming the file and the byte,
/// and writes nothing.
#[test]
fn a_capture_holding_the_host_name_is_refused_not_redacted() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, cache, mut pcap) = private_run_with_capture(tmp.path());
    let at = pcap.len() - 40;
    pcap[at..at + HOST.len() + 2].copy_from_slice(format!(" {HOST} ").as_bytes());
    std::fs::write(dir.join("vms/client-a/capture.pcap"), &pcap).unwrap();
    let out = tmp.path().join("b.tar.gz");
    let e = bundle(&dir, &out, &BundleOptions { with_images: false, cache, identity: identity(), images: None })
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("vms/client-a/capture.pcap") && e.contains(&format!("byte {}", at + 1)) && e.contains("$HOSTNAME"),
        "{e}"
    );
    assert!(!out.exists());
}

/// The bundle reads a capture up to the size `vmrepro wire` and `analyse` read
/// (1 GiB), which is also what `replay` and `compare` unpack by default, and the
/// largest `network.capture_max_bytes`: a capture over it (sparse here: nothing is
/// read) is refused by name, and nothing is written.
#[test]
fn bundle_reads_a_capture_up_to_the_capture_cap() {
    use vmrepro::wire::pcap::MAX_CAPTURE_BYTES;
    // (That the three agree is checked when vmrepro compiles: runner/src/publish/archive.rs.)
    let tmp = tempfile::tempdir().unwrap();
    let (dir, cache, _) = private_run_with_capture(tmp.path());
    let f = std::fs::File::create(dir.join("vms/client-a/capture.pcap")).unwrap();
    f.set_len(MAX_CAPTURE_BYTES + 1).unwrap();
    let out = tmp.path().join("b.tar.gz");
    let e = bundle(&dir, &out, &BundleOptions { with_images: false, cache, identity: identity(), images: None })
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("vms/client-a/capture.pcap") && e.contains(&format!("larger than {MAX_CAPTURE_BYTES} bytes")),
        "{e}"
    );
    assert!(!out.exists());
}
