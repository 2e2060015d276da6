//! Hostile images folders (and the kernel files a suite names) through `vmrepro plan`
//! and the rootfs's cache key, no VM:
//!
//! - each kind (a profile script, its parameters, `kernels.yaml`, a recipe, the
//!   overlay, `initramfs/init`, a kernel fragment or patch, a local kernel image that
//!   is a symbolic link, a folder, a named pipe, a hard link, huge, or outside) is
//!   refused with a message naming the file and what is wrong (snapshotted), without
//!   blocking on a pipe or reading `/dev/zero`;
//! - a canary folder outside, which the hostile links point into, has the same files
//!   with the same SHA-256 afterwards, and its secret text is in no output.
//!
//! Links, named pipes and hard links are built here in a temp folder: git can't hold a
//! FIFO, and a hard link must be to a file on the same file system.

mod support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use support::{copy_tree, fingerprint, repo_root, vmrepro_bin};
use vmrepro::infra::images::rootfs::{rootfs_key_with, RootfsRequest};
use vmrepro::infra::images::Catalog;

const SECRET: &str = "CANARY-SECRET-9b2e";

/// A scratch folder with a canary folder (the secret) and fresh projects.
struct World {
    tmp: tempfile::TempDir,
    canary: PathBuf,
}

/// One project: `images/` (a copy of the repository's) and `suites/` beside it.
struct Project {
    images: PathBuf,
    suites: PathBuf,
}

impl World {
    fn new() -> World {
        let tmp = tempfile::tempdir().unwrap();
        let canary = tmp.path().join("canary");
        std::fs::create_dir_all(canary.join("profiles")).unwrap();
        std::fs::write(canary.join("secret"), format!("{SECRET}\n")).unwrap();
        std::fs::write(canary.join("profiles/nfs-server-modern.sh"), format!("echo {SECRET}\n")).unwrap();
        let mut bz = vec![0u8; 0x400];
        bz[0x202..0x206].copy_from_slice(b"HdrS");
        bz.extend_from_slice(SECRET.as_bytes());
        std::fs::write(canary.join("bzImage"), bz).unwrap();
        World { tmp, canary }
    }

    /// A fresh project `name` (a copy of the repository's images folder).
    fn project(&self, name: &str) -> Project {
        let root = self.tmp.path().join(name);
        let images = root.join("images");
        copy_tree(&repo_root().join("images"), &images);
        let suites = root.join("suites");
        std::fs::create_dir_all(&suites).unwrap();
        Project { images, suites }
    }

    /// `vmrepro --images IMAGES plan SUITE` (a suite whose client VM boots `kernel`);
    /// its stderr with the scratch folder as `[TMP]`. Asserts it failed, printed no
    /// plan and no secret.
    fn refused(&self, p: &Project, kernel: &str) -> String {
        let suite = p.suites.join("demo.yaml");
        std::fs::write(
            &suite,
            format!(
                "name: demo\nnetwork:\n  subnet: 10.80.0.0/24\nvms:\n  - name: client\n    kernel: {kernel}\n    \
                 address: 10.80.0.11\n"
            ),
        )
        .unwrap();
        let out = Command::new(vmrepro_bin())
            .args(["--images", &p.images.display().to_string(), "plan", &suite.display().to_string()])
            .env("VMREPRO_CACHE_DIR", self.tmp.path().join("cache"))
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{kernel}: plan passed: {err}");
        assert!(!String::from_utf8_lossy(&out.stdout).contains(SECRET), "the secret is in the plan");
        assert!(!err.contains(SECRET), "the secret is in the message");
        err.replace(&self.tmp.path().display().to_string(), "[TMP]").trim_end().to_string()
    }
}

fn symlink(target: &Path, link: &Path) {
    let _ = std::fs::remove_file(link);
    std::os::unix::fs::symlink(target, link).unwrap();
}

fn fifo(at: &Path) {
    let _ = std::fs::remove_file(at);
    nix::unistd::mkfifo(at, nix::sys::stat::Mode::from_bits_truncate(0o644)).unwrap();
}

fn hard_link(target: &Path, link: &Path) {
    let _ = std::fs::remove_file(link);
    std::fs::hard_link(target, link).unwrap();
}

const DEBIAN: &str = "{ debian: \"6.1\" }";

#[test]
fn hostile_images_folders_are_refused_and_nothing_outside_is_read() {
    let w = World::new();
    let before = fingerprint(&w.canary);
    let secret = w.canary.join("secret");
    let mut seen = BTreeMap::new();

    type Edit<'a> = Box<dyn Fn(&Path) + 'a>;
    // Each kind, planted in the images folder; every suite loads the whole catalog.
    let catalog_cases: Vec<(&str, Edit)> = vec![
        ("profile-link", Box::new(|i: &Path| symlink(&secret, &i.join("profiles/nfs-server-modern.sh")))),
        (
            "profile-folder",
            Box::new(|i: &Path| {
                std::fs::remove_file(i.join("profiles/nfs-server-modern.sh")).unwrap();
                std::fs::create_dir(i.join("profiles/nfs-server-modern.sh")).unwrap();
            }),
        ),
        ("profile-fifo", Box::new(|i: &Path| fifo(&i.join("profiles/nfs-server-modern.sh")))),
        ("profile-hard-link", Box::new(|i: &Path| hard_link(&secret, &i.join("profiles/nfs-server-modern.sh")))),
        ("profile-params-link", Box::new(|i: &Path| symlink(&secret, &i.join("profiles/nfs-server-modern.yaml")))),
        (
            "profiles-folder-link",
            Box::new(|i: &Path| {
                std::fs::remove_dir_all(i.join("profiles")).unwrap();
                symlink(&w.canary.join("profiles"), &i.join("profiles"));
            }),
        ),
        ("kernels-yaml-fifo", Box::new(|i: &Path| fifo(&i.join("kernels.yaml")))),
        ("kernels-yaml-link", Box::new(|i: &Path| symlink(&secret, &i.join("kernels.yaml")))),
        ("kernels-yaml-dev-zero", Box::new(|i: &Path| symlink(Path::new("/dev/zero"), &i.join("kernels.yaml")))),
        (
            "kernels-yaml-huge",
            Box::new(|i: &Path| {
                let f = std::fs::OpenOptions::new().append(true).open(i.join("kernels.yaml")).unwrap();
                f.set_len(2 << 20).unwrap();
            }),
        ),
        ("recipe-link", Box::new(|i: &Path| symlink(&secret, &i.join("rootfs/bookworm-nfs.yaml")))),
        (
            "overlay-link",
            Box::new(|i: &Path| {
                let o = i.join("rootfs/bookworm-nfs/overlay");
                std::fs::remove_dir_all(&o).unwrap();
                symlink(&w.canary, &o);
            }),
        ),
    ];
    for (name, edit) in &catalog_cases {
        let p = w.project(name);
        edit(&p.images);
        seen.insert(name.to_string(), w.refused(&p, DEBIAN));
    }

    // Kernel files a suite names: fragments, patches and a local image.
    let source = |what: &str, file: &str| format!("{{ source: {{ debian: \"6.1\", {what}: [{file}] }} }}");
    let kernel_cases: Vec<(&str, String, Edit)> = vec![
        (
            "fragment-dev-zero",
            source("fragments", "../images/kernels/zero.config"),
            Box::new(|p: &Path| symlink(Path::new("/dev/zero"), &p.join("images/kernels/zero.config"))),
        ),
        (
            "fragment-link-inside",
            source("fragments", "linked.config"),
            Box::new(|p: &Path| {
                symlink(&p.join("images/kernels/nfs-udp-guest.config"), &p.join("suites/linked.config"))
            }),
        ),
        (
            "fragment-folder-link",
            source("fragments", "../images/kernels/nfs-udp-guest.config"),
            Box::new(|p: &Path| {
                let k = p.join("images/kernels");
                std::fs::rename(&k, p.join("kernels.real")).unwrap();
                symlink(&p.join("kernels.real"), &k);
            }),
        ),
        ("fragment-fifo", source("fragments", "pipe.config"), Box::new(|p: &Path| fifo(&p.join("suites/pipe.config")))),
        (
            "fragment-hard-link",
            source("fragments", "hard.config"),
            Box::new(|p: &Path| {
                std::fs::write(p.join("../canary-config"), "CONFIG_NFS_FS=y\n").unwrap();
                hard_link(&p.join("../canary-config"), &p.join("suites/hard.config"));
            }),
        ),
        (
            "patch-link",
            source("patches", "fix.patch"),
            Box::new(|p: &Path| symlink(&w.canary.join("secret"), &p.join("suites/fix.patch"))),
        ),
        (
            "local-kernel-absolute",
            format!("{{ path: {} }}", w.canary.join("bzImage").display()),
            Box::new(|_: &Path| {}),
        ),
        ("local-kernel-outside", "{ path: ../../canary/bzImage }".to_string(), Box::new(|_: &Path| {})),
        (
            "local-kernel-link",
            "{ path: bzImage }".to_string(),
            Box::new(|p: &Path| symlink(&w.canary.join("bzImage"), &p.join("suites/bzImage"))),
        ),
        (
            "local-kernel-hard-link",
            "{ path: bzImage }".to_string(),
            Box::new(|p: &Path| hard_link(&w.canary.join("bzImage"), &p.join("suites/bzImage"))),
        ),
        (
            "local-kernel-fifo",
            "{ path: ../images/bzImage }".to_string(),
            Box::new(|p: &Path| fifo(&p.join("images/bzImage"))),
        ),
        (
            "local-kernel-huge",
            "{ path: bzImage }".to_string(),
            Box::new(|p: &Path| {
                let f = std::fs::File::create(p.join("suites/bzImage")).unwrap();
                f.set_len(vmrepro::suite::validate::kernel::MAX_KERNEL_IMAGE_BYTES + 1).unwrap();
            }),
        ),
    ];
    for (name, kernel, edit) in &kernel_cases {
        let p = w.project(name);
        edit(p.images.parent().unwrap());
        seen.insert(name.to_string(), w.refused(&p, kernel));
    }
    // The canary's hard-linked copy is outside the canary folder: the canary itself is
    // as it was (a hard link to it would show as the same content, read or not).
    assert_eq!(fingerprint(&w.canary), before, "the canary folder changed");
    insta::assert_yaml_snapshot!("bad_images", seen);
}

/// The rootfs's cache key is made from the overlay and `initramfs/init` read through the
/// confined layer, before the build copies the overlay: a link, pipe or hard link there
/// is refused by name; the project's own folder gives the same key as before.
#[test]
fn a_rootfs_overlay_or_init_that_is_a_link_pipe_or_hard_link_is_refused() {
    let w = World::new();
    let secret = w.canary.join("secret");
    let request = RootfsRequest::new("bookworm-nfs", &[]);
    let own = Catalog::load(&repo_root().join("images")).unwrap();
    let own_key = rootfs_key_with(&own, &request).unwrap();
    let mut seen = BTreeMap::new();
    type Edit<'a> = Box<dyn Fn(&Path) + 'a>;
    let cases: Vec<(&str, Edit)> = vec![
        ("overlay-file-link", Box::new(|i: &Path| symlink(&secret, &i.join("rootfs/bookworm-nfs/overlay/etc/motd")))),
        ("overlay-fifo", Box::new(|i: &Path| fifo(&i.join("rootfs/bookworm-nfs/overlay/etc/motd")))),
        ("overlay-hard-link", Box::new(|i: &Path| hard_link(&secret, &i.join("rootfs/bookworm-nfs/overlay/etc/motd")))),
        ("init-link", Box::new(|i: &Path| symlink(&secret, &i.join("initramfs/init")))),
        ("init-fifo", Box::new(|i: &Path| fifo(&i.join("initramfs/init")))),
    ];
    for (name, edit) in &cases {
        let p = w.project(name);
        let copy = Catalog::load(&p.images).unwrap();
        assert_eq!(rootfs_key_with(&copy, &request).unwrap(), own_key, "a copy of the folder has the same key");
        edit(&p.images);
        let err = rootfs_key_with(&copy, &request).expect_err(name).to_string();
        assert!(!err.contains(SECRET));
        seen.insert(name.to_string(), err.replace(&w.tmp.path().display().to_string(), "[TMP]"));
    }
    insta::assert_yaml_snapshot!("bad_rootfs_inputs", seen);
}
