//! A corpus of malformed suites and the errors `vmrepro check` prints for them.
//!
//! Every file in `tests/fixtures/bad-suites/` is loaded, validated and compiled exactly
//! as `vmrepro check` does it, and the rendered error is snapshotted to
//! `snapshots/bad_suite__<file stem>.snap` (repository root). The snapshots are the
//! specification of our error messages: review them as a user would read them.
//!
//! To add a case, drop a file into the folder (first line: `# Mistake: …`), run
//! `INSTA_UPDATE=always cargo test --test bad_suites` (or `cargo insta review`) and
//! read the new snapshot.

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use support::{regex_literal, repo_root};
use vmrepro::infra::images::Catalog;
use vmrepro::plan::Plan;
use vmrepro::schema::load::MAX_SUITE_BYTES;
use vmrepro::schema::{load_suite, SpecError};
use vmrepro::suite::validate::files::MAX_FILE_BYTES;

const FIXTURES: &str = "runner/tests/fixtures/bad-suites";

/// What `vmrepro check FILE` does (without the CLI): load, read the catalog, compile.
fn check(path: &Path) -> Result<Plan, SpecError> {
    let file = load_suite(path)?;
    let catalog = Catalog::load(&repo_root().join("images")).expect("the repository's images/ catalog loads");
    vmrepro::suite::compile(&file, &catalog)
}

/// Snapshot settings shared by all cases: see `support::snapshot_settings_relative`.
fn settings() -> insta::Settings {
    support::snapshot_settings_relative()
}

/// The first line of a fixture, `# Mistake: …`, used as the snapshot's description.
fn mistake(path: &Path) -> String {
    let bytes = std::fs::read(path).expect("fixture is readable");
    let text = String::from_utf8_lossy(&bytes);
    let first = text.split(['\n', '\r']).next().unwrap_or_default();
    first.strip_prefix("# ").unwrap_or(first).to_string()
}

/// The properties every error must have, besides its snapshot. Returns what is
/// missing, in words (empty = fine).
fn defects(path: &Path, result: Result<Plan, SpecError>, needs_position: bool) -> (Vec<String>, Option<String>) {
    let err = match result {
        Ok(plan) => return (vec![format!("it was accepted (suite {:?}, {} VMs)", plan.suite, plan.vms.len())], None),
        Err(e) => e,
    };
    let text = err.to_string();
    let mut out = Vec::new();
    let name = path.file_name().expect("file name").to_string_lossy();
    if !text.contains(&*name) {
        out.push(format!("the message doesn't name the file {name}"));
    }
    if err.problems().is_empty() {
        out.push("the error has no located problem".to_string());
    }
    if needs_position {
        for p in err.problems() {
            if p.position.is_none() {
                out.push(format!("problem {:?} has no line:column", p.message));
            } else if p.line_text.is_none() {
                out.push(format!("problem {:?} has a position but no line to show", p.message));
            }
        }
    }
    for p in err.problems() {
        if p.file.file_name() != path.file_name() {
            out.push(format!("problem {:?} names file {}", p.message, p.file.display()));
        }
    }
    (out, Some(text))
}

/// One snapshot and one set of assertions per fixture file.
#[test]
fn bad_suites() {
    let mut failures: Vec<String> = Vec::new();
    let mut seen = 0;
    settings().bind(|| {
        insta::glob!("fixtures/bad-suites", "*.yaml", |path| {
            seen += 1;
            let stem = path.file_stem().expect("stem").to_string_lossy().into_owned();
            let started = Instant::now();
            let result = check(path);
            let took = started.elapsed();
            let (mut problems, text) = defects(path, result, true);
            if took > Duration::from_secs(5) {
                problems.push(format!("checking took {took:?}"));
            }
            for p in problems {
                failures.push(format!("{stem}: {p}"));
            }
            let mut s = insta::Settings::clone_current();
            // `glob!` appends the file name as a suffix; our names already carry it.
            s.remove_snapshot_suffix();
            s.set_description(mistake(path));
            s.bind(|| insta::assert_snapshot!(format!("bad_suite__{stem}"), text.unwrap_or_default()));
        });
    });
    assert!(seen >= 30, "only {seen} fixtures in {FIXTURES}");
    assert!(failures.is_empty(), "bad-suite fixtures with defective errors:\n  {}", failures.join("\n  "));
}

/// A suite over [`MAX_SUITE_BYTES`] is refused before it is parsed. Generated, not
/// checked in; its temporary folder is redacted from the snapshot.
#[test]
fn file_too_large() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("file-too-large.yaml");
    let mut text = String::from("# Mistake: a suite larger than 1 MiB.\nname: demo\ndescription: >\n");
    while text.len() as u64 <= MAX_SUITE_BYTES {
        text.push_str("  All work and no play makes Jack a dull boy. All work and no play makes Jack a dull boy.\n");
    }
    text.push_str("network:\n  subnet: 10.80.0.0/24\nvms:\n  - name: alpha\n    kernel: { debian: \"6.1\" }\n    address: 10.80.0.10\n");
    std::fs::write(&path, &text).expect("write");

    let (missing, rendered) = defects(&path, check(&path), false);
    assert!(missing.is_empty(), "{missing:?}");
    let rendered = rendered.expect("an error");
    assert!(rendered.contains(&text.len().to_string()), "names the size: {rendered}");

    let mut s = settings();
    s.add_filter(&regex_literal(&format!("{}/", dir.path().display())), "$$TMPDIR/");
    s.set_description("Mistake: a suite larger than 1 MiB (generated in a temporary folder).");
    s.bind(|| insta::assert_snapshot!("bad_suite__file-too-large", rendered));
}

/// A file for `files:` over [`MAX_FILE_BYTES`] is refused with its path and size.
/// Generated in a temporary folder beside the suite; the folder is redacted.
#[test]
fn copied_file_too_large() {
    let dir = tempfile::tempdir().expect("tempdir");
    let big = dir.path().join("big.bin");
    std::fs::write(&big, vec![b'x'; MAX_FILE_BYTES as usize + 1]).expect("write");
    let path = dir.path().join("copied-file-too-large.yaml");
    let text = "# Mistake: a file to copy into the guest larger than 1 MiB.\nname: demo\nnetwork:\n  subnet: 10.80.0.0/24\nvms:\n  - name: alpha\n    kernel: { debian: \"6.1\" }\n    address: 10.80.0.10\n    files: [{ src: big.bin, dest: /root/big.bin }]\n";
    std::fs::write(&path, text).expect("write");

    let (missing, rendered) = defects(&path, check(&path), false);
    assert!(missing.is_empty(), "{missing:?}");
    let rendered = rendered.expect("an error");
    assert!(rendered.contains(&format!("{}", big.display())), "names the file: {rendered}");
    assert!(rendered.contains(&(MAX_FILE_BYTES + 1).to_string()), "names the size: {rendered}");

    let mut s = settings();
    s.add_filter(&regex_literal(&format!("{}/", dir.path().display())), "$$TMPDIR/");
    s.set_description("Mistake: a file to copy into the guest larger than 1 MiB (generated in a temporary folder).");
    s.bind(|| insta::assert_snapshot!("bad_suite__copied-file-too-large", rendered));
}

/// Devices that never end (`/dev/zero`) or yield random bytes (`/dev/urandom`) are
/// refused as not regular files, without reading them, in well under a second.
#[test]
fn endless_files_are_refused_without_reading_them_all() {
    for dev in ["/dev/zero", "/dev/urandom"] {
        let path = Path::new(dev);
        if !path.exists() {
            continue;
        }
        let started = Instant::now();
        let result = check(path);
        let took = started.elapsed();
        assert!(took < Duration::from_secs(10), "{dev}: took {took:?}");
        let (missing, rendered) = defects(path, result, false);
        assert!(missing.is_empty(), "{dev}: {missing:?}");
        let rendered = rendered.expect("an error");
        assert!(rendered.contains("not a regular file"), "{dev}: says why: {rendered}");
        if dev == "/dev/zero" {
            settings().bind(|| insta::assert_snapshot!("bad_suite__dev-zero", rendered));
        }
    }
}

/// A named pipe (FIFO) as the suite, directly or through a symbolic link, is refused
/// at once, naming the path: opening it for reading would wait for a writer forever.
#[test]
fn named_pipes_are_refused_without_waiting() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fifo = dir.path().join("pipe.yaml");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).expect("mkfifo");
    let link = dir.path().join("link.yaml");
    std::os::unix::fs::symlink(&fifo, &link).expect("symlink");
    for path in [&fifo, &link] {
        let started = Instant::now();
        let result = check(path);
        let took = started.elapsed();
        assert!(took < Duration::from_secs(10), "{}: took {took:?}", path.display());
        let (missing, rendered) = defects(path, result, false);
        assert!(missing.is_empty(), "{}: {missing:?}", path.display());
        let rendered = rendered.expect("an error");
        assert!(rendered.contains(&format!("{}: not a regular file but a named pipe", path.display())), "{rendered}");
    }
    let folder = dir.path().join("folder.yaml");
    std::fs::create_dir(&folder).expect("mkdir");
    let rendered = check(&folder).expect_err("a folder is refused").to_string();
    assert!(rendered.contains("not a regular file but a folder"), "{rendered}");
}

/// Pathological nesting (100,000 `{a: ` in 400 KB; 300,000 unclosed `[`; 300,000
/// nested `- `) is refused by a cheap scan before any YAML parser sees it: libyaml
/// alone took about 90 s of CPU on such input. Generated, not checked in.
#[test]
fn pathological_nesting_is_refused_quickly() {
    let dir = tempfile::tempdir().expect("tempdir");
    let head = "# Mistake: pathological nesting (generated).\nname: demo\nnetwork:\n  subnet: 10.80.0.0/24\nvms: ";
    let cases = [
        ("nesting-flow-mappings", "{a: ".repeat(100_000)),
        ("nesting-unclosed-brackets", "[".repeat(300_000)),
        ("nesting-block-sequences", format!("\n{}x\n", "- ".repeat(300_000))),
    ];
    for (stem, body) in cases {
        let path = dir.path().join(format!("{stem}.yaml"));
        std::fs::write(&path, format!("{head}{body}")).expect("write");
        let started = Instant::now();
        let result = check(&path);
        let took = started.elapsed();
        assert!(took < Duration::from_secs(10), "{stem}: took {took:?}");
        let (missing, rendered) = defects(&path, result, true);
        assert!(missing.is_empty(), "{stem}: {missing:?}");
        let rendered = rendered.expect("an error");
        assert!(rendered.contains("nested more than 64 levels"), "{stem}: {rendered}");
        let mut s = settings();
        s.add_filter(&regex_literal(&format!("{}/", dir.path().display())), "$$TMPDIR/");
        s.set_description(format!("Mistake: {stem} (generated in a temporary folder)."));
        s.bind(|| insta::assert_snapshot!(format!("bad_suite__{stem}"), rendered));
    }
}

/// Commands too long for one exec argument (Linux's `MAX_ARG_STRLEN`, 128 KiB): a step's
/// `run` alone, and a measurement whose `run` and `setup` fit alone but not together in
/// its iteration script. Generated, not checked in (the files are 130–170 KB).
#[test]
fn commands_longer_than_an_exec_argument_are_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let head = "name: demo\nnetwork:\n  subnet: 10.80.0.0/24\nvms:\n  - name: alpha\n    kernel: { debian: \"6.1\" }\n    address: 10.80.0.10\n";
    let long = |n: usize| format!("echo {}", "x".repeat(n));
    let cases = [
        ("run-too-long", format!("{head}    steps:\n      - name: big\n        run: {}\n", long(140_000))),
        (
            "measure-script-too-long",
            format!(
                "{head}measure:\n  - name: write\n    on: [alpha]\n    setup: {}\n    run: {}\n",
                long(70_000),
                long(70_000)
            ),
        ),
    ];
    for (stem, body) in cases {
        let path = dir.path().join(format!("{stem}.yaml"));
        std::fs::write(&path, format!("# Mistake: {stem} (generated).\n{body}")).expect("write");
        let (missing, rendered) = defects(&path, check(&path), true);
        assert!(missing.is_empty(), "{stem}: {missing:?}");
        let rendered = rendered.expect("an error");
        assert!(rendered.contains("131071"), "{stem}: names the limit: {rendered}");
        let mut s = settings();
        s.add_filter(&regex_literal(&format!("{}/", dir.path().display())), "$$TMPDIR/");
        s.set_description(format!("Mistake: {stem} (generated in a temporary folder)."));
        s.bind(|| insta::assert_snapshot!(format!("bad_suite__{stem}"), rendered));
    }
}

/// A suite taken from a bundle (`LoadOptions::confine_to`) may name only files inside the
/// bundle's folder: `..` out of it, an absolute path elsewhere and a symbolic link
/// pointing out are refused, each at its key. Loaded as a repository suite, the same
/// paths are refused by the kernel-build rule (fragments and patches come from the
/// suite's folder or the images folder).
#[test]
fn bundle_suites_may_not_leave_their_folder() {
    use vmrepro::schema::{load_suite_with, LoadOptions};
    let tmp = tempfile::tempdir().expect("tempdir");
    let bundle = tmp.path().join("bundle");
    let outside = tmp.path().join("outside");
    for d in [bundle.join("patches"), outside.clone()] {
        std::fs::create_dir_all(&d).expect("mkdir");
    }
    std::fs::write(bundle.join("patches/good.patch"), "--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n").expect("write");
    std::fs::write(outside.join("secret.patch"), "secret\n").expect("write");
    std::os::unix::fs::symlink(outside.join("secret.patch"), bundle.join("patches/link.patch")).expect("symlink");
    let path = bundle.join("bundle-paths-outside.yaml");
    std::fs::write(
        &path,
        "# Mistake: a bundled suite names files outside its bundle.\nname: demo\nnetwork:\n  subnet: 10.80.0.0/24\nvms:\n  - name: alpha\n    address: 10.80.0.10\n    kernel:\n      source:\n        debian: \"6.1\"\n        patches:\n          - patches/good.patch\n          - ../outside/secret.patch\n          - patches/link.patch\n          - /etc/passwd\n          - ../../../../../../../../etc/passwd\n",
    )
    .expect("write");
    let catalog = Catalog::load(&repo_root().join("images")).expect("images/");

    // As a repository suite: a kernel build's fragments and patches must still lie in
    // the suite's folder or the images folder, so the same four are refused.
    let file = load_suite(&path).unwrap_or_else(|e| panic!("{e}"));
    let err = vmrepro::suite::compile(&file, &catalog).expect_err("refused");
    let keys: Vec<&str> = err.problems().iter().filter_map(|p| p.key.as_deref()).collect();
    assert_eq!(keys.len(), 4, "{err}");
    assert!(err.to_string().contains("outside the suite's folder and the images folder"), "{err}");

    // From a bundle: every path but the first is refused.
    let options = LoadOptions { confine_to: Some(bundle.clone()), ..Default::default() };
    let file = load_suite_with(&path, &options).unwrap_or_else(|e| panic!("{e}"));
    let result = vmrepro::suite::compile(&file, &catalog);
    let (missing, rendered) = defects(&path, result, true);
    assert!(missing.is_empty(), "{missing:?}");
    let err = vmrepro::suite::compile(&file, &catalog).expect_err("refused");
    let keys: Vec<&str> = err.problems().iter().filter_map(|p| p.key.as_deref()).collect();
    assert_eq!(
        keys,
        [
            "vms[0].kernel.source.patches[1]",
            "vms[0].kernel.source.patches[2]",
            "vms[0].kernel.source.patches[3]",
            "vms[0].kernel.source.patches[4]"
        ]
    );
    let mut s = settings();
    let real = std::fs::canonicalize(tmp.path()).expect("canonical");
    for dir in [real.as_path(), tmp.path()] {
        s.add_filter(&regex_literal(&format!("{}/", dir.display())), "$$TMPDIR/");
    }
    s.set_description("Mistake: a suite loaded from a bundle names files outside the bundle (generated).");
    s.bind(|| insta::assert_snapshot!("bad_suite__bundle-paths-outside", rendered.expect("an error")));

    // Inside the bundle, the plan builds with the real path that was checked.
    let ok = bundle.join("ok.yaml");
    std::fs::write(&ok, "name: demo\nnetwork:\n  subnet: 10.80.0.0/24\nvms:\n  - name: alpha\n    address: 10.80.0.10\n    kernel:\n      source:\n        debian: \"6.1\"\n        patches: [./patches/../patches/good.patch]\n").expect("write");
    let file = load_suite_with(&ok, &options).unwrap_or_else(|e| panic!("{e}"));
    let plan = vmrepro::suite::compile(&file, &catalog).unwrap_or_else(|e| panic!("{e}"));
    let vmrepro::infra::images::kernel::KernelSource::Source(k) = &plan.vms[0].kernel else {
        panic!("a source kernel");
    };
    let good = std::fs::canonicalize(bundle.join("patches/good.patch")).expect("canonical");
    assert_eq!(k.patches, [good]);
}

/// A suite that repeats one mistake 30,000 times (a generated suite, near the size
/// limit) is checked in seconds and reports the first 50 problems, then how many more
/// there are: no flood of output, no time spent locating problems nobody reads.
#[test]
fn problems_are_capped() {
    use vmrepro::schema::load::MAX_PROBLEMS;
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("thirty-thousand-duplicates.yaml");
    let mut text = String::from("name: demo\nnetwork:\n  subnet: 10.80.0.0/24\nvms:\n  - name: alpha\n    kernel: { debian: \"6.1\" }\n    address: 10.80.0.10\n    steps:\n");
    for _ in 0..30_000 {
        text.push_str("      - {name: s, run: 'true'}\n");
    }
    std::fs::write(&path, &text).expect("write");
    let started = Instant::now();
    let result = check(&path);
    let took = started.elapsed();
    assert!(took < Duration::from_secs(30), "took {took:?}");
    let (missing, _) = defects(&path, check(&path), true);
    assert!(missing.is_empty(), "{missing:?}");
    let err = result.expect_err("refused");
    let problems = err.problems();
    assert_eq!(problems.len(), MAX_PROBLEMS + 1);
    assert!(
        problems[MAX_PROBLEMS].message.starts_with(&format!("… and {} more problems", 29_999 - MAX_PROBLEMS)),
        "{}",
        problems[MAX_PROBLEMS].message
    );
}

/// A byte-order mark, CRLF or CR-only line endings change nothing: every suite of the
/// repository compiles into the same plan with each of them.
#[test]
fn bom_and_line_endings_do_not_change_a_suite() {
    let catalog = Catalog::load(&repo_root().join("images")).expect("images/");
    let plan_of = |path: &Path, text: String| -> String {
        let file = vmrepro::schema::load::parse_suite(path, text).unwrap_or_else(|e| panic!("{e}"));
        let plan = vmrepro::suite::compile(&file, &catalog).unwrap_or_else(|e| panic!("{e}"));
        serde_json::to_string(&plan).expect("plan serializes")
    };
    let mut seen = 0;
    for entry in std::fs::read_dir(repo_root().join("suites")).expect("suites/").flatten() {
        let path = entry.path();
        if path.extension().is_none_or(|e| e != "yaml") {
            continue;
        }
        let text = std::fs::read_to_string(&path).expect("read");
        let plain = plan_of(&path, text.clone());
        for (what, variant) in [
            ("BOM", format!("\u{feff}{text}")),
            ("CRLF", text.replace('\n', "\r\n")),
            ("CR", text.replace('\n', "\r")),
            ("BOM+CRLF", format!("\u{feff}{}", text.replace('\n', "\r\n"))),
        ] {
            assert_eq!(plan_of(&path, variant), plain, "{} with {what}", path.display());
        }
        seen += 1;
    }
    assert!(seen >= 2);
}

/// Fixtures the binary is run on: one of each stage (YAML syntax, schema, encoding,
/// cross-field rules, catalog lookups).
const CLI_CASES: &[&str] = &[
    "yaml-unclosed-bracket.yaml",
    "unknown-key-misspelt-address.yaml",
    "non-utf8.yaml",
    "duplicate-address.yaml",
    "unknown-debian-kernel-series.yaml",
    "nfs-server-without-profile.yaml",
    "duplicate-key-client-mount-options.yaml",
    "escape-in-unknown-key.yaml",
];

/// `vmrepro check FILE` on a bad suite: exit code 2, the same message on stderr as the
/// library renders, nothing on stdout, and no QEMU started.
#[test]
fn cli_check_exits_2_without_booting() {
    let root = repo_root();
    let tmp = tempfile::tempdir().expect("tempdir");
    // A fake QEMU that records any start; `check` must never reach it.
    let marker = tmp.path().join("qemu-was-started");
    let bin = tmp.path().join("bin");
    std::fs::create_dir(&bin).expect("mkdir");
    for name in ["qemu-system-x86_64", "qemu-img"] {
        let p = bin.join(name);
        std::fs::write(&p, format!("#!/bin/sh\necho \"$0 $*\" >> '{}'\nexit 1\n", marker.display())).expect("write");
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    }
    let path_var = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());

    for case in CLI_CASES {
        let rel = Path::new(FIXTURES).join(case);
        // The library's rendering with the same (relative) path, from the root.
        let expected = check(&root.join(&rel)).expect_err("a bad suite").to_string();
        let expected = expected.replace(&format!("{}/", root.display()), "");

        for qemu in [bin.join("qemu-system-x86_64"), PathBuf::from("/bin/false")] {
            let out = Command::new(env!("CARGO_BIN_EXE_vmrepro"))
                .current_dir(&root)
                .arg("check")
                .arg(&rel)
                .env("VMREPRO_QEMU", &qemu)
                .env("PATH", &path_var)
                .env("VMREPRO_CACHE_DIR", tmp.path().join("cache"))
                .env_remove("VMREPRO_IMAGES")
                .output()
                .expect("run vmrepro");
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{case} (VMREPRO_QEMU={}): stderr:\n{stderr}", qemu.display());
            assert_eq!(stderr.trim_end(), expected, "{case}: stderr is the rendered error");
            assert!(stderr.contains(case), "{case}: stderr names the file");
            assert!(
                !stderr.chars().any(|c| c.is_control() && c != '\n' && c != '\t'),
                "{case}: stderr holds a raw control character: {stderr:?}"
            );
            assert!(out.stdout.is_empty(), "{case}: nothing on stdout: {}", String::from_utf8_lossy(&out.stdout));
        }
    }
    assert!(!marker.exists(), "`vmrepro check` started QEMU: {}", std::fs::read_to_string(&marker).unwrap_or_default());
    assert!(!tmp.path().join("cache").exists(), "`vmrepro check` touched the image cache");
}

/// Several files on one command line: each bad one is reported and the exit code is 2.
#[test]
fn cli_check_reports_every_bad_file() {
    let root = repo_root();
    let a = Path::new(FIXTURES).join("duplicate-vm-name.yaml");
    let b = Path::new(FIXTURES).join("memory-negative.yaml");
    let out = Command::new(env!("CARGO_BIN_EXE_vmrepro"))
        .current_dir(&root)
        .arg("check")
        .args([&a, &b])
        .env("VMREPRO_QEMU", "/bin/false")
        .env_remove("VMREPRO_IMAGES")
        .output()
        .expect("run vmrepro");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "stderr:\n{stderr}");
    assert!(stderr.contains("duplicate-vm-name.yaml"), "{stderr}");
    assert!(stderr.contains("memory-negative.yaml"), "{stderr}");
}
