//! Cache housekeeping: which entry is what and who uses it (`vmrepro images list`), and
//! removing what nothing needs (`vmrepro images gc`).
//!
//! An entry's *users* are the suites (in the folders given) whose VMs need it,
//! computed the way [`super::resolve_all`] names entries, without building anything:
//! kernels by [`super::kernel::cache_entries`] (the package in `debs/` and the prepared
//! `kernel/` entry), root filesystems by [`super::rootfs::rootfs_key_with`]. The pins of
//! `images/kernels.yaml` are shown too, but only suites keep an entry from `gc`.
//!
//! `gc` removes an entry only while holding its exclusive lock (non-blocking), so never
//! one that a running suite holds (a run keeps shared locks on its entries until its
//! teardown, see [`super::cache::EntryHold`]) nor one being built; those are reported
//! as busy and left.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use nix::fcntl::{Flock, FlockArg};

use super::kernel::{cache_entries, KernelSource};
use super::{Cache, Catalog, ImageError};

/// A cache entry's address: `(kind, key)`.
pub type EntryId = (String, String);

/// Who needs which cache entry.
#[derive(Debug, Default)]
pub struct Usage {
    /// Entry → what it is (e.g. `kernel 6.1 (linux-image-6.1.0-50-cloud-amd64)`).
    pub what: BTreeMap<EntryId, String>,
    /// Entry → suites that need it (suite names).
    pub suites: BTreeMap<EntryId, BTreeSet<String>>,
    /// Entry → pins of `images/kernels.yaml` that name it (`kernel 6.1`, `source 6.1`).
    pub pins: BTreeMap<EntryId, BTreeSet<String>>,
    /// Suite files found.
    pub suite_files: Vec<PathBuf>,
    /// Suites that could not be read or whose entries could not be named (file: error).
    pub problems: Vec<String>,
}

impl Usage {
    /// Whether a suite needs `id`.
    pub fn used(&self, id: &EntryId) -> bool {
        self.suites.get(id).is_some_and(|s| !s.is_empty())
    }
}

/// The `*.yaml` entries directly in each of `dirs` that are not folders, sorted: a
/// dangling link or a named pipe named `*.yaml` is listed too, so that loading it
/// reports it (gc then removes nothing) instead of skipping a suite silently.
///
/// Errors: [`ImageError::Io`] for a folder that can't be listed.
pub fn suite_files(dirs: &[PathBuf]) -> Result<Vec<PathBuf>, ImageError> {
    let mut out = Vec::new();
    for d in dirs {
        let rd = std::fs::read_dir(d).map_err(ImageError::io("listing suites", d))?;
        for e in rd.flatten() {
            let p = e.path();
            if !p.is_dir() && p.extension().is_some_and(|x| x == "yaml" || x == "yml") {
                out.push(p);
            }
        }
    }
    out.sort();
    Ok(out)
}

/// The images one suite's VMs need (see [`crate::suite::images_of`]).
#[derive(Debug, Clone)]
pub struct SuiteImages {
    /// The suite's name.
    pub suite: String,
    /// Its file.
    pub file: PathBuf,
    /// Each VM's kernel and rootfs.
    pub vms: Vec<(KernelSource, super::rootfs::RootfsRequest)>,
}

/// What the `suites` (and the pins of `catalog`) need; `problems` are the suites that
/// could not be loaded, carried into [`Usage::problems`].
pub fn scan(catalog: &Catalog, suites: &[SuiteImages], problems: Vec<String>) -> Usage {
    let mut u = Usage { suite_files: suites.iter().map(|s| s.file.clone()).collect(), problems, ..Usage::default() };
    let add_kernel =
        |u: &mut Usage, src: &KernelSource, user: Option<&str>, pin: Option<String>| match cache_entries(src) {
            Ok(entries) => {
                for (kind, key) in entries {
                    let id = (kind.to_string(), key);
                    let what = match (kind, src) {
                        ("debs", KernelSource::Debian(k)) => format!("package {} {}", k.package, k.version),
                        ("debs", KernelSource::Source(s)) => {
                            format!("package {} {}", s.source.package, s.source.version)
                        }
                        _ => src.label(),
                    };
                    u.what.entry(id.clone()).or_insert(what);
                    if let Some(s) = user {
                        u.suites.entry(id.clone()).or_default().insert(s.to_string());
                    }
                    if let Some(p) = &pin {
                        u.pins.entry(id).or_default().insert(p.clone());
                    }
                }
            }
            Err(e) => u.problems.push(format!("{}: {e}", src.label())),
        };
    for k in &catalog.kernels {
        add_kernel(&mut u, &KernelSource::Debian(k.clone()), None, Some(format!("kernel {}", k.series)));
    }
    for s in &catalog.sources {
        let id = ("debs".to_string(), s.sha256.clone());
        u.what.entry(id.clone()).or_insert_with(|| format!("package {} {}", s.package, s.version));
        u.pins.entry(id).or_default().insert(format!("source {}", s.series));
    }
    for s in suites {
        for (kernel, rootfs) in &s.vms {
            add_kernel(&mut u, kernel, Some(&s.suite), None);
            match super::rootfs::rootfs_key_with(catalog, rootfs) {
                Ok(key) => {
                    let id = ("rootfs".to_string(), key);
                    u.what.entry(id.clone()).or_insert_with(|| format!("rootfs {}", rootfs.id()));
                    u.suites.entry(id).or_default().insert(s.suite.clone());
                }
                Err(e) => u.problems.push(format!("{}: rootfs {}: {e}", s.file.display(), rootfs.id())),
            }
        }
    }
    u
}

/// One cache entry as `vmrepro images list` shows it.
#[derive(Debug, Clone)]
pub struct Entry {
    /// `(kind, key)`.
    pub id: EntryId,
    /// Space it takes on disk, bytes (allocated blocks: the sparse rootfs image counts
    /// for what it holds, not for its apparent 1 GiB).
    pub disk_bytes: u64,
    /// Time since it was built (its folder's modification time).
    pub age: Duration,
    /// What it is: from the suites and pins that name it, else from its contents.
    pub what: String,
}

/// Every complete entry of `cache`, with its size, age and description (from `usage`,
/// else read from the entry: a package's file name, a kernel's release).
pub fn entries(cache: &Cache, usage: &Usage) -> Vec<Entry> {
    let now = SystemTime::now();
    cache
        .list()
        .into_iter()
        .map(|(kind, key, path)| {
            let id = (kind.clone(), key.clone());
            let age = std::fs::metadata(&path)
                .and_then(|m| m.modified())
                .ok()
                .and_then(|t| now.duration_since(t).ok())
                .unwrap_or_default();
            let what = usage.what.get(&id).cloned().unwrap_or_else(|| describe(&kind, &path));
            Entry { disk_bytes: disk_usage(&path), age, what, id }
        })
        .collect()
}

/// What an entry no suite or pin names is, from its contents.
fn describe(kind: &str, path: &Path) -> String {
    match kind {
        "debs" => std::fs::read_dir(path)
            .ok()
            .and_then(|rd| rd.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).next())
            .map_or_else(|| "package".into(), |f| format!("package {f}")),
        "kernel" => std::fs::read_to_string(path.join("release"))
            .map_or_else(|_| "kernel".into(), |r| format!("kernel {}", r.trim())),
        "rootfs" => "rootfs (an older recipe or a removed one)".into(),
        crate::infra::qemu::state::KIND => std::fs::read(path.join(crate::infra::qemu::state::META_FILE))
            .ok()
            .and_then(|b| serde_json::from_slice::<crate::infra::qemu::state::StateMeta>(&b).ok())
            .map_or_else(
                || "saved VM state".into(),
                |m| {
                    let ram =
                        if path.join(crate::infra::qemu::state::RAM_FILE).is_file() { "mapped" } else { "copied" };
                    format!(
                        "saved VM state: kernel {}, {}, {} MiB, {ram} RAM (saved by {})",
                        m.kernel_release, m.rootfs, m.memory_mib, m.saved_from
                    )
                },
            ),
        other => other.to_string(),
    }
}

/// Allocated bytes under `path` (symlinks not followed).
pub fn disk_usage(path: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    let Ok(meta) = std::fs::symlink_metadata(path) else { return 0 };
    let own = meta.blocks() * 512;
    if !meta.is_dir() {
        return own;
    }
    own + std::fs::read_dir(path).into_iter().flatten().flatten().map(|e| disk_usage(&e.path())).sum::<u64>()
}

/// What `gc` does.
#[derive(Debug, Clone, Default)]
pub struct GcPolicy {
    /// Also remove entries built longer ago than this, used or not (they are rebuilt
    /// or fetched again when next needed).
    pub older_than: Option<Duration>,
    /// Only say what would be removed.
    pub dry_run: bool,
}

/// Why `gc` removes (or would remove) an entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reason {
    /// No suite in the folders needs it.
    Unused,
    /// Built longer ago than the policy's `older_than`.
    Old,
}

/// What `gc` did with one entry it chose.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Removed (or, with `dry_run`, would be).
    Removed,
    /// Left: a running suite holds it, or it is being built.
    Busy,
    /// Left: removing it failed (the text says why).
    Failed(String),
}

/// One entry `gc` chose, and what became of it.
#[derive(Debug, Clone)]
pub struct GcItem {
    /// The entry.
    pub entry: Entry,
    /// Why it was chosen.
    pub reason: Reason,
    /// What happened.
    pub outcome: Outcome,
}

/// Removes from `cache` every entry no suite of `usage` needs, and with
/// `policy.older_than` every entry older than that; leaves (as [`Outcome::Busy`]) the
/// entries whose lock someone holds; with `policy.dry_run` removes nothing but still
/// reports busy entries as busy. Also removes build folders of killed builds (whose
/// entry lock is free). Returns the chosen entries, in list order.
pub fn gc(cache: &Cache, usage: &Usage, policy: &GcPolicy) -> Vec<GcItem> {
    let mut out = Vec::new();
    for entry in entries(cache, usage) {
        let reason = if !usage.used(&entry.id) {
            Reason::Unused
        } else if policy.older_than.is_some_and(|a| entry.age > a) {
            Reason::Old
        } else {
            continue;
        };
        let outcome = remove_entry(cache, &entry.id, policy.dry_run);
        out.push(GcItem { entry, reason, outcome });
    }
    if !policy.dry_run {
        sweep_build_folders(cache);
    }
    out
}

/// Removes entry `id` under its exclusive lock (taken without waiting): renamed into
/// the cache's `tmp/` first, so no one sees a half-removed entry, then deleted. The
/// lock file stays (removing it would let two processes lock different files).
pub(crate) fn remove_entry(cache: &Cache, id: &EntryId, dry_run: bool) -> Outcome {
    let (kind, key) = id;
    let lock_path = cache.lock_path(kind, key);
    let file = match File::options().create(true).append(true).open(&lock_path) {
        Ok(f) => f,
        Err(e) => return Outcome::Failed(format!("opening {}: {e}", lock_path.display())),
    };
    let _lock = match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
        Ok(l) => l,
        Err((_, nix::errno::Errno::EWOULDBLOCK)) => return Outcome::Busy,
        Err((_, e)) => return Outcome::Failed(format!("locking {}: {e}", lock_path.display())),
    };
    if dry_run {
        return Outcome::Removed;
    }
    let path = cache.entry_path(kind, key);
    let tmp_root = cache.root().join("tmp");
    if let Err(e) = std::fs::create_dir_all(&tmp_root) {
        return Outcome::Failed(format!("creating {}: {e}", tmp_root.display()));
    }
    let doomed = tmp_root.join(format!("gc-{kind}-{key}-{}", std::process::id()));
    if let Err(e) = std::fs::rename(&path, &doomed) {
        return Outcome::Failed(format!("moving {} aside: {e}", path.display()));
    }
    match std::fs::remove_dir_all(&doomed) {
        Ok(()) => Outcome::Removed,
        Err(e) => Outcome::Failed(format!("removing {}: {e}", doomed.display())),
    }
}

/// Removes `tmp/<kind>-<key>-*` build folders whose entry lock is free (their build was
/// killed) and `tmp/gc-*` folders a killed gc left.
fn sweep_build_folders(cache: &Cache) {
    let tmp_root = cache.root().join("tmp");
    let Ok(rd) = std::fs::read_dir(&tmp_root) else { return };
    for e in rd.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if name.starts_with("gc-") {
            let _ = std::fs::remove_dir_all(e.path());
            continue;
        }
        let mut parts = name.splitn(3, '-');
        let (Some(kind), Some(key), Some(_)) = (parts.next(), parts.next(), parts.next()) else { continue };
        let lock_path = cache.lock_path(kind, key);
        // A build creates the lock file before its folder: no lock file, no build.
        match File::open(&lock_path) {
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
                let _ = std::fs::remove_dir_all(e.path());
            }
            Err(_) => {}
            Ok(file) => {
                if let Ok(_lock) = Flock::lock(file, FlockArg::LockExclusiveNonblock) {
                    let _ = std::fs::remove_dir_all(e.path());
                }
            }
        }
    }
}

/// Whether someone (a running suite, or a build) holds entry `id`'s lock now.
pub fn is_busy(cache: &Cache, id: &EntryId) -> bool {
    let lock_path = cache.root().join(&id.0).join(format!("{}.lock", id.1));
    let Ok(file) = File::open(lock_path) else { return false };
    matches!(Flock::lock(file, FlockArg::LockExclusiveNonblock), Err((_, nix::errno::Errno::EWOULDBLOCK)))
}

/// `bytes` as `12.3 MB` (MB = 10^6 bytes).
pub fn megabytes(bytes: u64) -> String {
    format!("{:.1} MB", bytes as f64 / 1e6)
}

/// `age` rounded to its largest unit: `45s`, `12m`, `3h`, `5d`.
pub fn short_age(age: Duration) -> String {
    let s = age.as_secs();
    match s {
        0..=119 => format!("{s}s"),
        120..=7199 => format!("{}m", s / 60),
        7200..=172_799 => format!("{}h", s / 3600),
        _ => format!("{}d", s / 86400),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::infra::images::CacheOutcome;

    fn entry(cache: &Cache, kind: &str, key: &str) -> crate::infra::images::cache::EntryHold {
        let (_, o, hold) = cache
            .get_or_build_held(kind, key, |p| std::fs::write(p.join("f"), b"data").map_err(ImageError::io("w", p)))
            .unwrap();
        assert_eq!(o, CacheOutcome::Built);
        hold
    }

    fn ids(items: &[GcItem]) -> Vec<(String, Outcome)> {
        items.iter().map(|i| (format!("{}/{}", i.entry.id.0, i.entry.id.1), i.outcome.clone())).collect()
    }

    #[test]
    fn gc_never_removes_a_held_entry_and_removes_it_once_released() {
        let dir = tempfile::tempdir().unwrap();
        let cache = Cache::new(dir.path().to_path_buf());
        let held = entry(&cache, "kernel", "aaa");
        drop(entry(&cache, "kernel", "bbb"));
        let usage = Usage::default(); // no suite uses anything

        let dry = gc(&cache, &usage, &GcPolicy { older_than: None, dry_run: true });
        assert_eq!(
            ids(&dry),
            vec![("kernel/aaa".into(), Outcome::Busy), ("kernel/bbb".into(), Outcome::Removed)],
            "a dry run says what would go, and what is held"
        );
        assert!(cache.entry_path("kernel", "bbb").is_dir(), "a dry run removes nothing");

        let done = gc(&cache, &usage, &GcPolicy::default());
        assert_eq!(ids(&done), vec![("kernel/aaa".into(), Outcome::Busy), ("kernel/bbb".into(), Outcome::Removed)]);
        assert!(cache.entry_path("kernel", "aaa").is_dir(), "the held entry stays");
        assert!(!cache.entry_path("kernel", "bbb").exists());
        assert_eq!(std::fs::read(cache.entry_path("kernel", "aaa").join("f")).unwrap(), b"data");

        drop(held);
        let done = gc(&cache, &usage, &GcPolicy::default());
        assert_eq!(ids(&done), vec![("kernel/aaa".into(), Outcome::Removed)]);
        assert_eq!(cache.list(), vec![]);
        let tmp: Vec<_> = std::fs::read_dir(dir.path().join("tmp")).unwrap().collect();
        assert!(tmp.is_empty(), "nothing left in tmp: {tmp:?}");
    }

    #[test]
    fn gc_keeps_used_entries_unless_older_than_asked() {
        let dir = tempfile::tempdir().unwrap();
        let cache = Cache::new(dir.path().to_path_buf());
        drop(entry(&cache, "rootfs", "used"));
        drop(entry(&cache, "rootfs", "unused"));
        let mut usage = Usage::default();
        usage.suites.insert(("rootfs".into(), "used".into()), BTreeSet::from(["smoke".to_string()]));
        let items = gc(&cache, &usage, &GcPolicy { older_than: Some(Duration::from_secs(3600)), dry_run: false });
        assert_eq!(ids(&items), vec![("rootfs/unused".into(), Outcome::Removed)]);
        assert!(cache.entry_path("rootfs", "used").is_dir());
        std::thread::sleep(Duration::from_millis(20));
        let items = gc(&cache, &usage, &GcPolicy { older_than: Some(Duration::from_millis(1)), dry_run: false });
        assert_eq!(items.len(), 1);
        assert_eq!(items[0].reason, Reason::Old);
        assert_eq!(items[0].outcome, Outcome::Removed);
    }

    #[test]
    fn an_entry_gc_removed_is_built_again_when_next_needed() {
        // gc removes under the exclusive lock; the next run to ask for the entry looks
        // under its own lock, finds it gone, and builds it again.
        let dir = tempfile::tempdir().unwrap();
        let cache = Cache::new(dir.path().to_path_buf());
        drop(entry(&cache, "debs", "k"));
        let items = gc(&cache, &Usage::default(), &GcPolicy::default());
        assert_eq!(items[0].outcome, Outcome::Removed);
        let (_, o, hold) = cache
            .get_or_build_held("debs", "k", |p| std::fs::write(p.join("f"), b"again").map_err(ImageError::io("w", p)))
            .unwrap();
        assert_eq!(o, CacheOutcome::Built);
        assert!(hold.is_held());
    }

    #[test]
    fn a_killed_builds_folder_is_swept_unless_its_build_runs() {
        let dir = tempfile::tempdir().unwrap();
        let cache = Cache::new(dir.path().to_path_buf());
        let stale = dir.path().join("tmp/kernel-dead-x1");
        std::fs::create_dir_all(&stale).unwrap();
        let running = dir.path().join("tmp/kernel-live-x2");
        std::fs::create_dir_all(&running).unwrap();
        std::fs::create_dir_all(dir.path().join("kernel")).unwrap();
        let f = File::create(dir.path().join("kernel/live.lock")).unwrap();
        let _building = Flock::lock(f, FlockArg::LockExclusive).unwrap();
        gc(&cache, &Usage::default(), &GcPolicy::default());
        assert!(!stale.exists());
        assert!(running.exists(), "a build in progress keeps its folder");
    }

    #[test]
    fn a_dangling_link_or_pipe_among_the_suites_is_listed_and_fails_to_load() {
        let t = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(t.path().join("gone.yaml"), t.path().join("dangling.yaml")).unwrap();
        nix::unistd::mkfifo(&t.path().join("pipe.yaml"), nix::sys::stat::Mode::from_bits_truncate(0o644)).unwrap();
        std::fs::create_dir(t.path().join("folder.yaml")).unwrap();
        let files = suite_files(&[t.path().to_path_buf()]).unwrap();
        assert_eq!(files, [t.path().join("dangling.yaml"), t.path().join("pipe.yaml")]);
        let (_, problems) = crate::suite::images_of(&files, t.path());
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert!(problems.iter().any(|p| p.contains("named pipe")), "{problems:?}");
    }

    #[test]
    fn ages_and_sizes_read_as_people_say_them() {
        assert_eq!(short_age(Duration::from_secs(45)), "45s");
        assert_eq!(short_age(Duration::from_secs(600)), "10m");
        assert_eq!(short_age(Duration::from_secs(3 * 3600)), "3h");
        assert_eq!(short_age(Duration::from_secs(5 * 86400)), "5d");
        assert_eq!(megabytes(26_484_304), "26.5 MB");
    }
}
