//! Hostile run folders and bundles through the real commands (`vmrepro analyse`,
//! `report`, `compare`, `bundle`, `replay` up to before any VM boots), no VM:
//!
//! - each kind is refused with a message naming the file or entry and what is wrong
//!   (snapshotted), or, where the command may go on (a link where it writes), handled
//!   without following the link;
//! - a canary folder outside, which the hostile inputs point into, has the same
//!   files with the same SHA-256 afterwards, and its secret text is in no output.
//!
//! Links, named pipes and hard links are built here: git can't hold a FIFO.

mod support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use support::{copy_tree, fingerprint, repo_root, vmrepro_bin};

const SECRET: &str = "CANARY-SECRET-4f1d";

fn fixture() -> PathBuf {
    repo_root().join("runner/tests/fixtures/runs/nfs-aa-same-kernel")
}

struct World {
    tmp: tempfile::TempDir,
    canary: PathBuf,
}

impl World {
    fn new() -> World {
        let tmp = tempfile::tempdir().unwrap();
        let canary = tmp.path().join("canary");
        std::fs::create_dir_all(canary.join("sub")).unwrap();
        std::fs::write(canary.join("secret"), format!("{SECRET}\n")).unwrap();
        std::fs::write(canary.join("sub/other"), format!("{SECRET} too\n")).unwrap();
        World { tmp, canary }
    }

    /// A fresh copy of the fixture run folder named `name`, changed by `edit`.
    fn run(&self, name: &str, edit: impl FnOnce(&Path)) -> PathBuf {
        let dir = self.tmp.path().join("results/nfs-aa-same-kernel").join(name);
        std::fs::create_dir_all(&dir).unwrap();
        copy_tree(&fixture(), &dir);
        edit(&dir);
        dir
    }

    /// Runs vmrepro with `args` in the scratch folder; (exit code, stderr with the
    /// scratch folder as `[TMP]`).
    fn vmrepro(&self, args: &[&str]) -> (i32, String) {
        let out = Command::new(vmrepro_bin())
            .args(args)
            .current_dir(self.tmp.path())
            .env("VMREPRO_CACHE_DIR", self.tmp.path().join("cache"))
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr).replace(&self.tmp.path().display().to_string(), "[TMP]");
        (out.status.code().unwrap_or(-1), err.trim_end().to_string())
    }
}

fn edit_run_json(dir: &Path, f: impl FnOnce(&mut serde_json::Value)) {
    let p = dir.join("run.json");
    let mut v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
    f(&mut v);
    std::fs::write(&p, serde_json::to_string_pretty(&v).unwrap()).unwrap();
}

const PROFILE_OUT: &str = "vms/server/01-profile-nfs-server-2.4.19.stdout";

#[test]
fn hostile_run_folders_are_refused_and_nothing_outside_is_read_or_written() {
    let w = World::new();
    let before = fingerprint(&w.canary);
    let secret = w.canary.join("secret");
    let mut seen = BTreeMap::new();

    // Refused by analyse, report and compare, each kind by name.
    type Edit<'a> = Box<dyn Fn(&Path) + 'a>;
    let refused: Vec<(&str, Edit)> = vec![
        (
            "suite-name-control-characters",
            Box::new(|d: &Path| edit_run_json(d, |v| v["suite"] = "x\u{1b}[2J\nerror: all checks passed".into())),
        ),
        (
            "step-name-newline",
            Box::new(|d: &Path| edit_run_json(d, |v| v["vms"][0]["steps"][0]["name"] = "a\nPASSED".into())),
        ),
        (
            "step-output-outside",
            Box::new(|d: &Path| {
                edit_run_json(d, |v| v["vms"][0]["steps"][0]["stdout"] = "../../../canary/secret".into())
            }),
        ),
        (
            "step-output-absolute",
            Box::new(|d: &Path| {
                let s = secret.display().to_string();
                edit_run_json(d, |v| v["vms"][0]["steps"][0]["stdout"] = s.into())
            }),
        ),
        (
            "step-output-link",
            Box::new(|d: &Path| {
                std::fs::remove_file(d.join(PROFILE_OUT)).unwrap();
                std::os::unix::fs::symlink(&secret, d.join(PROFILE_OUT)).unwrap();
            }),
        ),
        (
            "step-output-folder-link",
            Box::new(|d: &Path| {
                std::fs::rename(d.join("vms/server"), d.join("vms/server.real")).unwrap();
                std::os::unix::fs::symlink(d.join("vms/server.real"), d.join("vms/server")).unwrap();
            }),
        ),
        (
            "step-output-fifo",
            Box::new(|d: &Path| {
                std::fs::remove_file(d.join(PROFILE_OUT)).unwrap();
                nix::unistd::mkfifo(&d.join(PROFILE_OUT), nix::sys::stat::Mode::from_bits_truncate(0o644)).unwrap();
            }),
        ),
        (
            "run-json-link",
            Box::new(|d: &Path| {
                std::fs::rename(d.join("run.json"), w.canary.join("../run.json")).unwrap();
                std::os::unix::fs::symlink(w.canary.join("../run.json"), d.join("run.json")).unwrap();
            }),
        ),
        ("unknown-schema", Box::new(|d: &Path| edit_run_json(d, |v| v["schema"] = 99.into()))),
        // Every file run.json names is checked by its key before anything is read.
        (
            "step-stderr-outside",
            Box::new(|d: &Path| {
                edit_run_json(d, |v| v["vms"][0]["steps"][1]["stderr"] = "vms/../../../../canary/secret".into())
            }),
        ),
        (
            "step-diagnostics-absolute",
            Box::new(|d: &Path| {
                let s = secret.display().to_string();
                edit_run_json(d, |v| v["vms"][1]["steps"][0]["diagnostics"] = s.into())
            }),
        ),
        (
            "console-log-outside",
            Box::new(|d: &Path| edit_run_json(d, |v| v["vms"][2]["console_log"] = "../../../canary/secret".into())),
        ),
        (
            "qemu-cmdline-home",
            Box::new(|d: &Path| edit_run_json(d, |v| v["vms"][0]["qemu_cmdline"] = "~/canary/secret".into())),
        ),
        (
            "step-output-home",
            Box::new(|d: &Path| edit_run_json(d, |v| v["vms"][0]["steps"][0]["stdout"] = "~root/x".into())),
        ),
    ];
    for (name, edit) in &refused {
        let dir = w.run(name, |d| {
            std::fs::remove_file(d.join("results.json")).unwrap();
            edit(d)
        });
        let d = dir.display().to_string();
        for cmd in ["analyse", "report", "compare", "export"] {
            let args: Vec<&str> = match cmd {
                "compare" => vec![cmd, &d, &d],
                "export" => vec![cmd, "--kcidb", &d],
                _ => vec![cmd, &d],
            };
            let (code, err) = w.vmrepro(&args);
            assert_ne!(code, 0, "{cmd} {name} passed: {err}");
            assert!(!dir.join("results.json").exists(), "{cmd} {name} wrote results.json");
            seen.insert(format!("{name} ({cmd})"), err);
        }
    }

    // compare reads a run folder's results.json as it is: through the confined layer
    // (a link or pipe is refused, never analysed around), with a schema it reads, and
    // with a run.json it reads (schema and paths) beside it.
    type Kind<'a> = (&'a str, Edit<'a>);
    let compared: Vec<Kind> = vec![
        (
            "results-json-link",
            Box::new(|d: &Path| {
                std::fs::copy(d.join("results.json"), w.canary.join("../results.json")).unwrap();
                std::fs::remove_file(d.join("results.json")).unwrap();
                std::os::unix::fs::symlink(w.canary.join("../results.json"), d.join("results.json")).unwrap();
            }),
        ),
        (
            "results-json-fifo",
            Box::new(|d: &Path| {
                std::fs::remove_file(d.join("results.json")).unwrap();
                nix::unistd::mkfifo(&d.join("results.json"), nix::sys::stat::Mode::from_bits_truncate(0o644)).unwrap();
            }),
        ),
        (
            "results-json-unknown-schema",
            Box::new(|d: &Path| {
                let p = d.join("results.json");
                let mut v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
                v["schema"] = 7.into();
                std::fs::write(&p, v.to_string()).unwrap();
            }),
        ),
        ("results-json-beside-unknown-run-schema", Box::new(|d: &Path| edit_run_json(d, |v| v["schema"] = 1.into()))),
        (
            "results-json-beside-outside-path",
            Box::new(|d: &Path| edit_run_json(d, |v| v["vms"][0]["steps"][0]["stdout"] = "../../x".into())),
        ),
    ];
    for (name, edit) in &compared {
        let dir = w.run(name, |d| edit(d));
        let d = dir.display().to_string();
        let (code, err) = w.vmrepro(&["compare", &d, &d]);
        assert_ne!(code, 0, "compare {name} passed: {err}");
        seen.insert(format!("{name} (compare)"), err);
    }
    // The pristine fixture's results.json (schema 2, written before iterations had an
    // outcome) still compares: that schema is one this vmrepro reads.
    let f = fixture().display().to_string();
    let (code, err) = w.vmrepro(&["compare", &f, &f]);
    assert_eq!(code, 0, "{err}");

    // wire: a capture that is a link, a pipe or too large is refused by name.
    let captures: Vec<Kind> = vec![
        (
            "capture-link",
            Box::new(|d: &Path| std::os::unix::fs::symlink(&secret, d.join("vms/client-a/capture.pcap")).unwrap()),
        ),
        (
            "capture-fifo",
            Box::new(|d: &Path| {
                let p = d.join("vms/client-a/capture.pcap");
                nix::unistd::mkfifo(&p, nix::sys::stat::Mode::from_bits_truncate(0o644)).unwrap();
            }),
        ),
        (
            "capture-too-large",
            Box::new(|d: &Path| {
                // Sparse: its size says more than the cap, and nothing is read.
                let f = std::fs::File::create(d.join("vms/client-a/capture.pcap")).unwrap();
                f.set_len(vmrepro::wire::pcap::MAX_CAPTURE_BYTES + 1).unwrap();
            }),
        ),
    ];
    for (name, edit) in &captures {
        let dir = w.run(name, |d| edit(d));
        let d = dir.display().to_string();
        for vm in [Some("client-a"), None] {
            let mut args = vec!["wire", &d[..]];
            args.extend(vm);
            let (code, err) = w.vmrepro(&args);
            assert_ne!(code, 0, "wire {name} passed: {err}");
            seen.insert(format!("{name} (wire{})", vm.map(|v| format!(" {v}")).unwrap_or_default()), err);
        }
        // bundle refuses a link or pipe by name before anything else, writes nothing
        // and reads nothing through it. (This fixture's suite is not where its
        // environment.json says, so bundle gets no further: the size cap is in
        // tests/publish.rs, on a run that bundles.)
        if *name != "capture-too-large" {
            let (code, err) = w.vmrepro(&["bundle", &d, "-o", "capture.tar.gz"]);
            assert_ne!(code, 0, "bundle {name} passed: {err}");
            assert!(!w.tmp.path().join("capture.tar.gz").exists());
            seen.insert(format!("{name} (bundle)"), err);
        }
        // report goes on and names it in the wire section.
        let (code, err) = w.vmrepro(&["report", &d]);
        assert_eq!(code, 0, "report {name}: {err}");
        let md = std::fs::read_to_string(dir.join("report.md")).unwrap().replace('\n', " ");
        let at = md.find("The captures could not be read").unwrap_or_else(|| panic!("{md}"));
        // (A path longer than a line is cut across lines.)
        let why: String = md[at..].chars().take(300).filter(|c| !c.is_whitespace()).collect();
        assert!(why.contains("vms/client-a/capture.pcap"), "{why}");
        assert!(!md.contains(SECRET));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    // Links where the commands write: replaced, never followed (a dangling link's
    // target is not created).
    let dir = w.run("write-links", |d| {
        std::os::unix::fs::symlink(w.canary.join("new-results.json"), d.join("results.json.link")).unwrap();
        std::fs::remove_file(d.join("results.json")).unwrap();
        std::os::unix::fs::symlink(w.canary.join("new-results.json"), d.join("results.json")).unwrap();
        std::os::unix::fs::symlink(w.canary.join("sub/other"), d.join("report.md")).unwrap();
        std::os::unix::fs::symlink(w.canary.join("report.html"), d.join("report.html")).unwrap();
    });
    let d = dir.display().to_string();
    let (code, err) = w.vmrepro(&["report", &d]);
    assert_eq!(code, 0, "{err}");
    for f in ["results.json", "report.md", "report.html"] {
        let meta = std::fs::symlink_metadata(dir.join(f)).unwrap();
        assert!(meta.is_file(), "{f} is still a link");
        assert!(!std::fs::read_to_string(dir.join(f)).unwrap().contains(SECRET), "{f} holds the canary");
    }
    // compare only reads: a run folder without results.json stays without one.
    let plain = w.run("compare-reads-only", |d| std::fs::remove_file(d.join("results.json")).unwrap());
    let p = plain.display().to_string();
    let (code, err) = w.vmrepro(&["compare", &p, &d]);
    assert_eq!(code, 0, "{err}");
    assert!(!plain.join("results.json").exists(), "compare wrote results.json");

    // bundle: a link in the run folder is refused; a suite name from run.json never
    // becomes a path.
    let linked = w.run("bundle-link", |d| std::os::unix::fs::symlink(&secret, d.join("vms/notes.txt")).unwrap());
    let (code, err) = w.vmrepro(&["bundle", &linked.display().to_string(), "-o", "out.tar.gz"]);
    assert_ne!(code, 0);
    assert!(!w.tmp.path().join("out.tar.gz").exists());
    seen.insert("bundle-link (bundle)".into(), err);
    let name = vmrepro::report::published::default_bundle_name("../../canary/x\n", Path::new("/r/20261130T170000Z"));
    assert_eq!(name, "_.._canary_x_-20261130T170000Z.tar.gz");

    assert_eq!(fingerprint(&w.canary), before, "the canary folder changed");
    insta::assert_yaml_snapshot!("bad_runs", seen);
}

/// A tar archive of `entries` (path, type, data, link target), gzip-compressed.
fn tar_gz(path: &Path, entries: &[(&str, tar::EntryType, &[u8], Option<&str>)]) {
    let mut b = tar::Builder::new(Vec::new());
    for (name, kind, data, link) in entries {
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(*kind);
        h.set_mode(0o644);
        h.set_size(data.len() as u64);
        if name.len() > 99 {
            // A GNU long-name entry first (as GNU tar writes long paths).
            b.append_data(&mut h, name, *data).unwrap();
            continue;
        }
        // set_path refuses `..` and absolute paths: write the raw name.
        let raw = &mut h.as_old_mut().name;
        raw[..name.len()].copy_from_slice(name.as_bytes());
        if let Some(l) = link {
            h.set_link_name(l).unwrap();
        }
        h.set_cksum();
        b.append(&h, *data).unwrap();
    }
    let tar = b.into_inner().unwrap();
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    std::io::Write::write_all(&mut gz, &tar).unwrap();
    std::fs::write(path, gz.finish().unwrap()).unwrap();
}

fn bundle_info(suite_file: &str) -> Vec<u8> {
    serde_json::to_vec(&serde_json::json!({
        "schema": 1, "suite": "s", "suite_file": suite_file, "images_dir": "project/images", "run": "run",
        "created_by": {"version": "0", "git_commit": "0"}, "with_images": false, "placeholders": []
    }))
    .unwrap()
}

fn manifest(files: &[(&str, &[u8])]) -> Vec<u8> {
    files
        .iter()
        .map(|(p, d)| format!("{}  {p}\n", hex::encode(<sha2::Sha256 as sha2::Digest>::digest(d))))
        .collect::<String>()
        .into_bytes()
}

#[test]
fn hostile_bundles_are_refused_naming_the_entry_and_nothing_outside_is_touched() {
    use tar::EntryType::{Directory as D, Link as H, Regular as F, Symlink as L};
    let w = World::new();
    let before = fingerprint(&w.canary);
    let secret = w.canary.join("secret").display().to_string();
    let info = bundle_info("project/suites/s.yaml");
    let good = [("b/BUNDLE.json", &info[..])];
    let man = manifest(&[("BUNDLE.json", &info)]);
    let abs_info = bundle_info(&secret);
    let abs_man = manifest(&[("BUNDLE.json", &abs_info)]);
    let big = vec![b'x'; 4000];
    let escape = format!("{}/escaped", w.canary.display());
    let deep = format!("b/{}x", "d/".repeat(40));
    let long_path = format!("b/{}x", format!("{}/", "a".repeat(200)).repeat(6));
    let long_component = format!("b/{}", "c".repeat(300));
    let twice_man = [manifest(&[("BUNDLE.json", &info)]), manifest(&[("BUNDLE.json", &info)])].concat();
    let home_man = manifest(&[("~/BUNDLE.json", &info)]);
    let mut extra: serde_json::Value = serde_json::from_slice(&info).unwrap();
    extra["run_on_host"] = "sh -c 'cat /etc/shadow'".into();
    let extra_info = serde_json::to_vec(&extra).unwrap();
    let extra_man = manifest(&[("BUNDLE.json", &extra_info)]);
    let mut pkg: serde_json::Value = serde_json::from_slice(&info).unwrap();
    pkg["packages"] = serde_json::json!([{"package": "p", "version": "1", "sha256": "0", "path": "packages/p.deb", "url": "http://x"}]);
    let pkg_info = serde_json::to_vec(&pkg).unwrap();
    let pkg_man = manifest(&[("BUNDLE.json", &pkg_info)]);
    let home_info = bundle_info("~/suites/s.yaml");
    let home_info_man = manifest(&[("BUNDLE.json", &home_info)]);
    type E<'a> = (&'a str, tar::EntryType, &'a [u8], Option<&'a str>);
    let top: E = ("b", D, b"", None);
    let kinds: Vec<(&str, Vec<E>, &[&str])> = vec![
        ("symlink", vec![top, ("b/x", L, b"", Some(&secret))], &[]),
        ("hard-link", vec![top, ("b/x", H, b"", Some(&secret))], &[]),
        ("absolute", vec![top, (&escape, F, b"x", None)], &[]),
        ("dot-dot", vec![top, ("b/../../canary/escaped", F, b"x", None)], &[]),
        ("fifo", vec![top, ("b/p", tar::EntryType::Fifo, b"", None)], &[]),
        ("two-tops", vec![top, ("c", D, b"", None)], &[]),
        ("twice", vec![top, ("b/x", F, b"1", None), ("b/x", F, b"2", None)], &[]),
        ("too-big", vec![top, ("b/x", F, &big, None)], &["--max-unpacked-bytes", "1000"]),
        ("too-big-file", vec![top, ("b/x", F, &big, None)], &["--max-file-bytes", "1000"]),
        ("too-many", vec![top, ("b/x", F, b"", None), ("b/y", F, b"", None)], &["--max-entries", "2"]),
        ("no-manifest", vec![top, (good[0].0, F, good[0].1, None)], &[]),
        (
            "unlisted",
            vec![top, ("b/MANIFEST", F, &man, None), (good[0].0, F, good[0].1, None), ("b/extra", F, b"e", None)],
            &[],
        ),
        ("deep", vec![top, (&deep, F, b"x", None)], &[]),
        ("long-path", vec![top, (&long_path, F, b"x", None)], &[]),
        ("long-component", vec![top, (&long_component, F, b"x", None)], &[]),
        ("home-entry", vec![top, ("b/~root", D, b"", None), ("b/~root/x", F, b"x", None)], &[]),
        ("manifest-twice", vec![top, ("b/MANIFEST", F, &twice_man, None), (good[0].0, F, good[0].1, None)], &[]),
        ("manifest-home", vec![top, ("b/MANIFEST", F, &home_man, None), (good[0].0, F, good[0].1, None)], &[]),
        (
            "unknown-key-in-bundle-json",
            vec![top, ("b/MANIFEST", F, &extra_man, None), ("b/BUNDLE.json", F, &extra_info, None)],
            &[],
        ),
        (
            "unknown-package-key-in-bundle-json",
            vec![top, ("b/MANIFEST", F, &pkg_man, None), ("b/BUNDLE.json", F, &pkg_info, None)],
            &[],
        ),
        (
            "home-in-bundle-json",
            vec![top, ("b/MANIFEST", F, &home_info_man, None), ("b/BUNDLE.json", F, &home_info, None)],
            &[],
        ),
        (
            "absolute-in-bundle-json",
            vec![top, ("b/MANIFEST", F, &abs_man, None), ("b/BUNDLE.json", F, &abs_info, None)],
            &[],
        ),
    ];
    let mut seen = BTreeMap::new();
    for (name, entries, flags) in &kinds {
        let file = w.tmp.path().join(format!("{name}.tar.gz"));
        tar_gz(&file, entries);
        let f = file.display().to_string();
        let mut args = vec!["replay", &f[..], "--results", "replayed"];
        args.extend_from_slice(flags);
        let (code, err) = w.vmrepro(&args);
        assert_ne!(code, 0, "{name}: {err}");
        seen.insert(format!("{name} (replay)"), err);
        let mut args = vec!["compare", &f[..], &f[..]];
        args.extend_from_slice(flags);
        let (code, err) = w.vmrepro(&args);
        assert_ne!(code, 0, "{name}: {err}");
        seen.insert(format!("{name} (compare)"), err);
    }
    // A truncated archive names the entry it ends in.
    let file = w.tmp.path().join("truncated.tar.gz");
    tar_gz(&file, &[("b", D, b"", None), ("b/x", F, &vec![7u8; 200_000], None)]);
    let data = std::fs::read(&file).unwrap();
    std::fs::write(&file, &data[..data.len() / 2]).unwrap();
    let (code, err) = w.vmrepro(&["replay", &file.display().to_string()]);
    assert_ne!(code, 0);
    seen.insert("truncated (replay)".into(), err);

    assert!(!w.tmp.path().join("replayed").exists(), "a refused bundle started a run");
    assert_eq!(fingerprint(&w.canary), before, "the canary folder changed");
    insta::assert_yaml_snapshot!("bad_bundles", seen);
}

/// One raw tar entry: a GNU header with `name` written as is (no checks), `kind`,
/// `data` (padded to 512 bytes) and a size field of `announced` (else the data's).
fn raw_entry(out: &mut Vec<u8>, name: &[u8], kind: tar::EntryType, data: &[u8], announced: Option<u64>) {
    let mut h = tar::Header::new_gnu();
    h.set_entry_type(kind);
    h.set_mode(0o644);
    h.set_size(announced.unwrap_or(data.len() as u64));
    h.as_old_mut().name[..name.len()].copy_from_slice(name);
    h.set_cksum();
    out.extend_from_slice(h.as_bytes());
    out.extend_from_slice(data);
    out.resize(out.len().div_ceil(512) * 512, 0);
}

/// A PAX extended header's records (`"LEN key=value\n"`, LEN counting itself).
fn pax(records: &[(&str, &str)]) -> Vec<u8> {
    let mut out = Vec::new();
    for (k, v) in records {
        let body = format!(" {k}={v}\n");
        let mut len = body.len() + 1;
        while format!("{len}").len() + body.len() != len {
            len += 1;
        }
        out.extend_from_slice(format!("{len}{body}").as_bytes());
    }
    out
}

/// GNU long names (`L`, `K`) and PAX headers (`x`, `g`): every check on a path
/// applies to the name after the header is applied, the header itself is read
/// within a cap (never whole), and what would make a link, a sparse file or a size
/// other tar readers disagree on is refused by name.
#[test]
fn long_name_and_pax_headers_are_checked_as_the_name_they_give() {
    use tar::EntryType::{Directory as D, GNULongLink as K, GNULongName as LN, Regular as F, Symlink as S};
    use tar::EntryType::{XGlobalHeader as G, XHeader as X};
    let w = World::new();
    let before = fingerprint(&w.canary);
    let escape = format!("{}/escaped", w.canary.display());
    let secret = w.canary.join("secret").display().to_string();
    let deep = format!("b/{}x", "dd/".repeat(40));
    let info = bundle_info("project/suites/s.yaml");
    let man = manifest(&[("BUNDLE.json", &info)]);
    let at = "././@LongLink".as_bytes();
    type R<'a> = (Vec<u8>, tar::EntryType, Vec<u8>, Option<u64>);
    let top: R = (b"b".to_vec(), D, vec![], None);
    let file = |n: &str| -> R { (n.as_bytes().to_vec(), F, b"x".to_vec(), None) };
    let long = |n: &str| -> R { (at.to_vec(), LN, format!("{n}\0").into_bytes(), None) };
    let px = |r: &[(&str, &str)]| -> R { (b"b/PaxHeaders/x".to_vec(), X, pax(r), None) };
    let kinds: Vec<(&str, Vec<R>)> = vec![
        ("longname-dot-dot", vec![top.clone(), long("b/../../canary/escaped"), file("b/short")]),
        ("longname-absolute", vec![top.clone(), long(&escape), file("b/short")]),
        ("longname-deep", vec![top.clone(), long(&deep), file("b/short")]),
        ("longname-home", vec![top.clone(), long("b/~root/x"), file("b/short")]),
        ("longname-outside-top", vec![top.clone(), long("c/x"), file("b/short")]),
        ("longname-on-a-symlink", vec![top.clone(), long("b/x"), (b"b/y".to_vec(), S, vec![], None)]),
        ("longname-huge", vec![top.clone(), (at.to_vec(), LN, vec![b'a'; 600], Some(1 << 30))]),
        ("longname-twice", vec![top.clone(), long("b/x"), long("b/y"), file("b/short")]),
        ("longname-dangling", vec![top.clone(), long("b/x")]),
        ("longlink", vec![top.clone(), (at.to_vec(), K, format!("{secret}\0").into_bytes(), None), file("b/x")]),
        ("pax-path-dot-dot", vec![top.clone(), px(&[("path", "b/../../canary/escaped")]), file("b/short")]),
        ("pax-path-absolute", vec![top.clone(), px(&[("path", &escape)]), file("b/short")]),
        ("pax-path-deep", vec![top.clone(), px(&[("path", &deep)]), file("b/short")]),
        ("pax-linkpath", vec![top.clone(), px(&[("linkpath", &secret)]), file("b/x")]),
        ("pax-size", vec![top.clone(), px(&[("size", "999999999")]), file("b/x")]),
        ("pax-sparse", vec![top.clone(), px(&[("GNU.sparse.major", "1"), ("GNU.sparse.minor", "0")]), file("b/x")]),
        ("pax-huge", vec![top.clone(), (b"b/PaxHeaders/x".to_vec(), X, vec![b'9'; 600], Some(1 << 30))]),
        ("pax-malformed", vec![top.clone(), (b"b/PaxHeaders/x".to_vec(), X, b"garbage\n".to_vec(), None), file("b/x")]),
        ("pax-global-path", vec![top.clone(), (b"g".to_vec(), G, pax(&[("path", &escape)]), None), file("b/x")]),
        ("pax-and-longname", vec![top.clone(), px(&[("path", "b/x")]), long("b/y"), file("b/short")]),
        ("folder-with-data", vec![top.clone(), (b"b/d".to_vec(), D, vec![b'z'; 100], None)]),
        ("longname-newline", vec![top.clone(), long("b/x\nerror: all checks passed"), file("b/short")]),
        ("pax-path-escape-character", vec![top.clone(), px(&[("path", "b/\u{1b}[2Jx")]), file("b/short")]),
        ("file-named-as-folder", vec![top.clone(), file("b/x/")]),
        // Within the limits, the names the headers give are used: this one unpacks and
        // is refused later, for its missing run (not for its headers).
        (
            "pax-and-longname-within-limits",
            vec![
                top.clone(),
                (b"g".to_vec(), G, pax(&[("comment", "made by bsdtar")]), None),
                px(&[("path", "b/MANIFEST"), ("mtime", "1700000000.5")]),
                (b"b/M".to_vec(), F, man.clone(), None),
                long("b/BUNDLE.json"),
                (b"b/B".to_vec(), F, info.clone(), None),
            ],
        ),
    ];
    let mut seen = BTreeMap::new();
    for (name, entries) in &kinds {
        let mut tar = Vec::new();
        for (n, k, d, a) in entries {
            raw_entry(&mut tar, n, *k, d, *a);
        }
        tar.resize(tar.len() + 1024, 0);
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        std::io::Write::write_all(&mut gz, &tar).unwrap();
        let file = w.tmp.path().join(format!("{name}.tar.gz"));
        std::fs::write(&file, gz.finish().unwrap()).unwrap();
        let f = file.display().to_string();
        let (code, err) = w.vmrepro(&["replay", &f, "--results", "replayed"]);
        assert_ne!(code, 0, "{name}: {err}");
        seen.insert(format!("{name} (replay)"), err);
        let (code, err) = w.vmrepro(&["compare", &f, &f]);
        assert_ne!(code, 0, "{name}: {err}");
        seen.insert(format!("{name} (compare)"), err);
    }
    assert!(!w.tmp.path().join("replayed").exists(), "a refused bundle started a run");
    assert!(!w.canary.join("escaped").exists(), "an entry was unpacked outside");
    assert_eq!(fingerprint(&w.canary), before, "the canary folder changed");
    insta::assert_yaml_snapshot!("bad_bundle_headers", seen);
}

/// A file a suite copies into a guest that is a link to a host file, or a named pipe,
/// is refused by `plan` (at the key, without waiting), and the host file's text is in
/// no plan; so is a link inside the suite's folder (no link is followed).
#[test]
fn a_suites_copied_file_that_is_a_link_or_pipe_is_refused() {
    let w = World::new();
    let before = fingerprint(&w.canary);
    let suite_dir = w.tmp.path().join("suite");
    std::fs::create_dir_all(&suite_dir).unwrap();
    std::os::unix::fs::symlink(w.canary.join("secret"), suite_dir.join("linked")).unwrap();
    nix::unistd::mkfifo(&suite_dir.join("pipe"), nix::sys::stat::Mode::from_bits_truncate(0o644)).unwrap();
    // A link that stays inside the suite's folder passes validation; the compiler's
    // read, through the confined layer, still follows no link.
    std::fs::write(suite_dir.join("real"), "inside\n").unwrap();
    std::os::unix::fs::symlink("real", suite_dir.join("linked-inside")).unwrap();
    let images = repo_root().join("images").display().to_string();
    let mut seen = BTreeMap::new();
    for src in ["linked", "pipe", "linked-inside"] {
        let suite = suite_dir.join(format!("{src}.yaml"));
        std::fs::write(
            &suite,
            format!(
                "name: demo\nnetwork:\n  subnet: 10.80.0.0/24\nvms:\n  - name: client\n    kernel: {{ debian: \"6.1\" }}\n    \
                 address: 10.80.0.11\n    files: [{{ src: {src}, dest: /root/{src} }}]\n"
            ),
        )
        .unwrap();
        let out = Command::new(vmrepro_bin())
            .args(["--images", &images, "plan", &suite.display().to_string()])
            .output()
            .unwrap();
        assert!(!out.status.success(), "{src}: plan passed");
        assert!(!String::from_utf8_lossy(&out.stdout).contains(SECRET));
        let err = String::from_utf8_lossy(&out.stderr).replace(&w.tmp.path().display().to_string(), "[TMP]");
        seen.insert(src.to_string(), err.trim_end().to_string());
    }
    assert_eq!(fingerprint(&w.canary), before);
    insta::assert_yaml_snapshot!("bad_suite_files", seen);
}
