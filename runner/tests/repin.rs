//! `vmrepro images repin` against a local copy of the archive's indexes
//! (`tests/fixtures/archive/`, real index stanzas; the pinned 6.1 kernel removed from
//! bookworm's index on purpose, as a point release would). No network, no VM.

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;

use vmrepro::exit::{INFRASTRUCTURE, SUCCESS};
use vmrepro::infra::images::Catalog;

/// A project copy (its `images/` with the real `kernels.yaml`) and a `file:` archive.
struct Setup {
    _dir: tempfile::TempDir,
    images: PathBuf,
    mirror: String,
}

fn setup() -> Setup {
    // Outside the repository, whose path the snapshot settings redact first.
    let base = std::env::temp_dir().join("vmrepro-repin-test");
    std::fs::create_dir_all(&base).unwrap();
    let dir = tempfile::tempdir_in(&base).unwrap();
    let images = dir.path().join("images");
    std::fs::create_dir_all(images.join("rootfs")).unwrap();
    // The real manifest, pinned long ago (so that the new `pinned_on` always shows).
    let manifest = std::fs::read_to_string(support::repo_root().join("images/kernels.yaml")).unwrap();
    let old_date = manifest.lines().find(|l| l.starts_with("pinned_on:")).expect("pinned_on").to_string();
    std::fs::write(images.join("kernels.yaml"), manifest.replace(&old_date, "pinned_on: 2000-01-01")).unwrap();
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/archive");
    for (archive, suite) in [
        ("debian", "bullseye"),
        ("debian", "bookworm"),
        ("debian", "bookworm-backports"),
        ("debian-security", "bookworm-security"),
        ("debian-security", "bullseye-security"),
    ] {
        let text = std::fs::read(fixtures.join(format!("{suite}.Packages"))).unwrap();
        let d = dir.path().join(archive).join("dists").join(suite).join("main/binary-amd64");
        std::fs::create_dir_all(&d).unwrap();
        if suite == "bullseye-security" {
            // An archive without the .xz: the plain index is read instead.
            std::fs::write(d.join("Packages"), text).unwrap();
        } else {
            let mut xz = xz2::write::XzEncoder::new(Vec::new(), 6);
            std::io::Write::write_all(&mut xz, &text).unwrap();
            std::fs::write(d.join("Packages.xz"), xz.finish().unwrap()).unwrap();
        }
    }
    let mirror = format!("file://{}/debian", dir.path().display());
    Setup { images, mirror, _dir: dir }
}

fn repin(s: &Setup, args: &[&str]) -> (i32, String) {
    let out = Command::new(support::vmrepro_bin())
        .args(["images", "repin", "--images"])
        .arg(&s.images)
        .args(args)
        .env("VMREPRO_DEBIAN_MIRROR", &s.mirror)
        .env_remove("VMREPRO_DEBIAN_SECURITY_MIRROR")
        .output()
        .expect("running vmrepro");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stderr), String::from_utf8_lossy(&out.stdout));
    (out.status.code().expect("exited"), text)
}

fn settings(s: &Setup) -> insta::Settings {
    let mut st = support::snapshot_settings();
    let root = s.images.parent().unwrap().display().to_string();
    st.add_filter(&support::regex_literal(&root), "[archive]");
    st.add_filter(r"(\+ |, )pinned_on: \d{4}-\d{2}-\d{2}", "${1}pinned_on: [today]");
    st
}

/// The lines that differ between two texts, as `- old` / `+ new` (in order).
fn changed_lines(old: &str, new: &str) -> String {
    let (a, b): (Vec<&str>, Vec<&str>) = (old.lines().collect(), new.lines().collect());
    assert_eq!(a.len(), b.len(), "repin changes values, never the number of lines");
    a.iter().zip(&b).filter(|(x, y)| x != y).map(|(x, y)| format!("- {x}\n+ {y}\n")).collect()
}

#[test]
fn a_stale_pin_is_moved_to_the_newest_of_its_kind_and_nothing_else_changes() {
    let s = setup();
    let before = std::fs::read_to_string(s.images.join("kernels.yaml")).unwrap();
    let (code, out) = repin(&s, &["--stale-only"]);
    assert_eq!(code, SUCCESS, "{out}");
    let after = std::fs::read_to_string(s.images.join("kernels.yaml")).unwrap();
    settings(&s).bind(|| {
        insta::assert_snapshot!("repin__stale_only_output", out);
        insta::assert_snapshot!("repin__stale_only_kernels_yaml_changes", changed_lines(&before, &after));
    });

    let catalog = Catalog::load(&s.images).expect("the rewritten manifest loads");
    let k = catalog.debian_kernel("6.1", "cloud-amd64").unwrap();
    assert_eq!(
        (k.package.as_str(), k.version.as_str(), k.suite.as_str()),
        ("linux-image-6.1.0-57-cloud-amd64", "6.1.192-3", "bookworm-security"),
        "the newest 6.1 cloud image, not its -dbg or -unsigned twin"
    );
    assert_eq!(
        (k.filename.as_str(), k.size, k.sha256.as_str()),
        (
            "pool/updates/main/l/linux-signed-amd64/linux-image-6.1.0-57-cloud-amd64_6.1.192-3_amd64.deb",
            26705532,
            "4fdd0172a8c3f41a97e92465b2ac1867e1c10d82d7aeed3d26ee7a5d14df1754"
        ),
        "path, size and SHA-256 as the index lists them"
    );
    assert_eq!(catalog.debian_kernel("5.10", "cloud-amd64").unwrap().version, "5.10.223-1", "still listed: kept");

    // Nothing stale is left: a second run changes nothing.
    let (code, out) = repin(&s, &["--stale-only"]);
    assert_eq!(code, SUCCESS, "{out}");
    assert!(out.contains("is up to date"), "{out}");
    assert_eq!(std::fs::read_to_string(s.images.join("kernels.yaml")).unwrap(), after);
}

#[test]
fn every_pin_moves_to_the_newest_of_its_kind_in_its_suites() {
    let s = setup();
    let (code, out) = repin(&s, &["--dry-run"]);
    assert_eq!(code, SUCCESS, "{out}");
    assert!(out.contains("dry run:"), "{out}");
    settings(&s).bind(|| insta::assert_snapshot!("repin__all_dry_run_output", out));
    let (code, out) = repin(&s, &[]);
    assert_eq!(code, SUCCESS, "{out}");
    let catalog = Catalog::load(&s.images).unwrap();
    let v = |series: &str| catalog.debian_kernel(series, "cloud-amd64").unwrap().version.clone();
    assert_eq!(v("5.10"), "5.10.262-1", "from bullseye-security, read from its plain Packages");
    assert_eq!(v("6.1"), "6.1.192-3");
    assert_eq!(v("6.12"), "6.12.95-1~bpo12+1", "backports only: not 6.12.117 of bookworm-security");
    assert_eq!(catalog.debian_source("6.1").unwrap().version, "6.1.192-3");
}

#[test]
fn an_unreachable_index_is_an_infrastructure_error_and_writes_nothing() {
    let s = setup();
    std::fs::remove_dir_all(s.images.parent().unwrap().join("debian/dists/bookworm")).unwrap();
    let before = std::fs::read_to_string(s.images.join("kernels.yaml")).unwrap();
    let (code, out) = repin(&s, &[]);
    assert_eq!(code, INFRASTRUCTURE, "{out}");
    assert!(out.contains("dists/bookworm/main/binary-amd64/Packages.xz: not found"), "{out}");
    assert_eq!(std::fs::read_to_string(s.images.join("kernels.yaml")).unwrap(), before);
}

/// Every kind of hostile or broken index entry (`tests/fixtures/bad-indexes/`, each
/// one field of a kernel stanza changed) is refused as bad input, naming the index,
/// the entry and the field, and `kernels.yaml` is left as it was.
#[test]
fn a_bad_index_entry_is_refused_and_writes_nothing() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/bad-indexes");
    let mut seen = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "Packages") {
            continue;
        }
        seen += 1;
        let stem = path.file_stem().unwrap().to_string_lossy().into_owned();
        let s = setup();
        let d = s.images.parent().unwrap().join("debian/dists/bookworm/main/binary-amd64");
        std::fs::remove_file(d.join("Packages.xz")).unwrap();
        std::fs::copy(&path, d.join("Packages")).unwrap();
        let before = std::fs::read_to_string(s.images.join("kernels.yaml")).unwrap();
        let (code, out) = repin(&s, &[]);
        assert_eq!(code, vmrepro::exit::CONFIG_ERROR, "{stem}: {out}");
        assert!(out.contains("the index of bookworm") && out.contains("nothing was written"), "{stem}: {out}");
        assert_eq!(std::fs::read_to_string(s.images.join("kernels.yaml")).unwrap(), before, "{stem}");
        settings(&s).bind(|| insta::assert_snapshot!(format!("repin_bad_index__{stem}"), out));
    }
    assert!(seen >= 10, "only {seen} bad indexes");
}

/// Every kind of hostile *file* where a `file:` archive's index should be (made here: a
/// link to a file outside, a linked folder on the way, a named pipe, a folder, an index
/// over its compressed or text cap, a decompression bomb, a file that isn't xz) is
/// refused as bad input without being followed, read past its cap or blocked on;
/// `kernels.yaml` keeps its checksum, and the file a link points at is not named as read.
#[test]
fn a_hostile_index_file_is_refused_and_writes_nothing() {
    use vmrepro::infra::images::index::{MAX_COMPRESSED_BYTES, MAX_INDEX_BYTES};
    let sha = |p: &Path| {
        use sha2::Digest;
        hex::encode(sha2::Sha256::digest(std::fs::read(p).unwrap()))
    };
    type Plant = fn(&Path, &Path);
    let kinds: [(&str, Plant); 8] = [
        ("index-is-a-link", |d, outside| {
            // The link points at a valid index: following it would succeed.
            std::fs::rename(d.join("Packages.xz"), outside.join("Packages.xz")).unwrap();
            std::os::unix::fs::symlink(outside.join("Packages.xz"), d.join("Packages.xz")).unwrap();
        }),
        ("folder-on-the-way-is-a-link", |d, outside| {
            let dists = d.parent().unwrap().parent().unwrap();
            std::fs::rename(dists, outside.join("bookworm")).unwrap();
            std::os::unix::fs::symlink(outside.join("bookworm"), dists).unwrap();
        }),
        ("index-is-a-named-pipe", |d, _| {
            std::fs::remove_file(d.join("Packages.xz")).unwrap();
            nix::unistd::mkfifo(&d.join("Packages.xz"), nix::sys::stat::Mode::from_bits_truncate(0o644)).unwrap();
        }),
        ("index-is-a-folder", |d, _| {
            std::fs::remove_file(d.join("Packages.xz")).unwrap();
            std::fs::create_dir(d.join("Packages.xz")).unwrap();
        }),
        ("compressed-index-too-large", |d, _| {
            // Sparse: refused by its size before a byte is read.
            std::fs::File::options()
                .write(true)
                .open(d.join("Packages.xz"))
                .unwrap()
                .set_len(MAX_COMPRESSED_BYTES + 1)
                .unwrap();
        }),
        ("plain-index-too-large", |d, _| {
            std::fs::remove_file(d.join("Packages.xz")).unwrap();
            std::fs::File::create(d.join("Packages")).unwrap().set_len(MAX_INDEX_BYTES + 1).unwrap();
        }),
        ("decompression-bomb", |d, _| {
            // 39 KiB of xz (`xz -1` of 257 MiB of newlines) that expands past the text cap.
            let bomb =
                Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/bad-indexes/decompression-bomb.Packages.xz");
            std::fs::copy(bomb, d.join("Packages.xz")).unwrap();
        }),
        ("index-not-xz", |d, _| {
            let plain =
                std::fs::read(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/archive/bookworm.Packages"));
            std::fs::write(d.join("Packages.xz"), plain.unwrap()).unwrap();
        }),
    ];
    let mut shown = String::new();
    for (name, plant) in kinds {
        let s = setup();
        let outside = s.images.parent().unwrap().join("outside");
        std::fs::create_dir(&outside).unwrap();
        let d = s.images.parent().unwrap().join("debian/dists/bookworm/main/binary-amd64");
        plant(&d, &outside);
        let before = sha(&s.images.join("kernels.yaml"));
        let (code, out) = repin(&s, &[]);
        assert_eq!(code, vmrepro::exit::CONFIG_ERROR, "{name}: {out}");
        assert!(out.contains("nothing was written"), "{name}: {out}");
        assert!(!out.contains("read the index of bookworm"), "{name}: {out}");
        assert_eq!(sha(&s.images.join("kernels.yaml")), before, "{name}: kernels.yaml changed");
        let error = out.lines().find(|l| l.starts_with("error:")).unwrap_or_default().to_string();
        shown.push_str(&format!("{name}:\n  {error}\n"));
        let root = s.images.parent().unwrap().display().to_string();
        shown = shown.replace(&root, "[archive]");
    }
    settings(&setup()).bind(|| insta::assert_snapshot!("repin__hostile_index_files", shown));
}
