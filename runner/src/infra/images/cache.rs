//! The content-addressed artefact cache.
//!
//! Layout: `<root>/<kind>/<key>/` where `key` is the SHA-256 of every input of the
//! recipe. Entries are built in `<root>/tmp/<kind>-<key>-<random>/`, flushed to disk
//! (`fsync` of every file, so a write error that the filesystem reports late, like a
//! full disk, fails the build) and renamed into place only when complete, under an
//! exclusive lock file `<root>/<kind>/<key>.lock`. So a failed or interrupted build (or
//! a full or read-only disk) never leaves an entry that a later run would use, two
//! concurrent runs build an entry once, and the leftovers of a build whose process was
//! killed are removed by the next build of the same entry.
//!
//! The same lock file, locked shared, marks an entry in use: a run holds it on every
//! entry it uses until its teardown ([`EntryHold`]), and `vmrepro images gc` (see
//! [`super::gc`]) removes an entry only under the exclusive lock, so never one a
//! running suite holds.
//!
//! The root is `$VMREPRO_CACHE_DIR`, else `$XDG_CACHE_HOME/vmrepro`, else
//! `~/.cache/vmrepro`.

use std::fs::File;
use std::path::{Path, PathBuf};

use nix::fcntl::{Flock, FlockArg};

use super::ImageError;

/// The artefact cache.
#[derive(Debug, Clone)]
pub struct Cache {
    root: PathBuf,
    cancel: super::CancelFlag,
}

/// Folders of the cache root that are not kinds of entries: build folders (`tmp`) and
/// ccache's compiler cache of the source-built kernels (`ccache`).
pub const NOT_ENTRIES: &[&str] = &["tmp", "ccache"];

/// A shared `flock` on a cache entry's lock file (`<kind>/<key>.lock`): while it
/// lives, `vmrepro images gc` (which needs the exclusive lock) leaves the entry alone.
/// Dropping it releases the lock.
#[derive(Debug)]
pub struct EntryHold {
    /// Held for its `Drop` (which releases the lock); `None` on a read-only cache.
    _lock: Option<Flock<File>>,
    kind: String,
    key: String,
}

impl EntryHold {
    /// The entry held, as `kind/key`.
    pub fn entry(&self) -> String {
        format!("{}/{}", self.kind, self.key)
    }

    /// Whether a lock is really held (not on a read-only cache).
    #[cfg(test)]
    pub fn is_held(&self) -> bool {
        self._lock.is_some()
    }
}

/// Whether [`Cache::get_or_build`] found the entry or built it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CacheOutcome {
    /// The entry was already there; nothing was built.
    Cached,
    /// The entry was built (or downloaded) by this call.
    Built,
}

impl Cache {
    /// A cache rooted at `root`.
    pub fn new(root: PathBuf) -> Self {
        Cache { root, cancel: super::CancelFlag::new() }
    }

    /// The same cache whose builds stop when `cancel` is set (see
    /// [`super::CancelFlag`]); a run gives its own flag to the cache it builds with.
    pub fn with_cancel(&self, cancel: super::CancelFlag) -> Self {
        Cache { root: self.root.clone(), cancel }
    }

    /// The flag that stops this cache's builds.
    pub fn cancel_flag(&self) -> &super::CancelFlag {
        &self.cancel
    }

    /// The cache chosen by the environment (see the module docs).
    pub fn from_env() -> Self {
        if let Some(p) = std::env::var_os("VMREPRO_CACHE_DIR") {
            return Cache::new(PathBuf::from(p));
        }
        let base = std::env::var_os("XDG_CACHE_HOME")
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
            .unwrap_or_else(|| PathBuf::from("/var/tmp"));
        Cache::new(base.join("vmrepro"))
    }

    /// The cache's root folder.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The path an entry has (or would have).
    pub fn entry_path(&self, kind: &str, key: &str) -> PathBuf {
        self.root.join(kind).join(key)
    }

    /// Returns the entry `kind/key`, building it with `build(tmp_dir)` if it is missing.
    /// `build` fills the empty folder it is given; on success the folder is renamed
    /// into place, on error it is removed. Like [`Cache::get_or_build_held`] without
    /// keeping the entry held.
    ///
    /// Errors: as [`Cache::get_or_build_held`].
    pub fn get_or_build(
        &self,
        kind: &str,
        key: &str,
        build: impl FnOnce(&Path) -> Result<(), ImageError>,
    ) -> Result<(PathBuf, CacheOutcome), ImageError> {
        self.get_or_build_held(kind, key, build).map(|(p, o, _)| (p, o))
    }

    /// Returns the entry `kind/key`, building it with `build(tmp_dir)` if it is missing,
    /// and an [`EntryHold`]: a shared lock on the entry's lock file that keeps
    /// `vmrepro images gc` from removing it for as long as the hold lives (a run keeps
    /// the holds of every entry it uses until its teardown).
    ///
    /// The entry is only looked at under the lock: shared to find it, exclusive to
    /// build it (then shared again, and looked at again, since gc may take its
    /// exclusive lock in between). A cache on a read-only disk that already holds the
    /// entry gives it without a hold (no one can remove it there either).
    ///
    /// Errors ([`ImageError::Io`] naming the path): the cache folder can't be created or
    /// locked (e.g. read-only), the build folder can't be created or flushed (e.g. disk
    /// full); or whatever `build` returned. On error nothing is left in the cache but
    /// the (empty) lock file.
    pub fn get_or_build_held(
        &self,
        kind: &str,
        key: &str,
        build: impl FnOnce(&Path) -> Result<(), ImageError>,
    ) -> Result<(PathBuf, CacheOutcome, EntryHold), ImageError> {
        let final_path = self.entry_path(kind, key);
        let kind_dir = self.root.join(kind);
        let lock_path = self.lock_path(kind, key);
        let unheld = || EntryHold { _lock: None, kind: kind.to_string(), key: key.to_string() };
        if let Err(e) = std::fs::create_dir_all(&kind_dir) {
            if final_path.is_dir() {
                return Ok((final_path, CacheOutcome::Cached, unheld()));
            }
            return Err(ImageError::Io(crate::path_io::PathIo {
                what: "creating cache folder",
                path: kind_dir,
                source: e,
            }));
        }
        let lock_file = match File::options().create(true).append(true).open(&lock_path) {
            Ok(f) => f,
            Err(_) if final_path.is_dir() => return Ok((final_path, CacheOutcome::Cached, unheld())),
            Err(e) => {
                return Err(ImageError::Io(crate::path_io::PathIo {
                    what: "creating cache lock",
                    path: lock_path,
                    source: e,
                }))
            }
        };
        let lock_err = |e: nix::errno::Errno| {
            ImageError::Io(crate::path_io::PathIo {
                what: "locking cache entry",
                path: lock_path.clone(),
                source: e.into(),
            })
        };
        let lock = Flock::lock(lock_file, FlockArg::LockShared).map_err(|(_, e)| lock_err(e))?;
        let mut build = Some(build);
        let mut outcome = CacheOutcome::Cached;
        loop {
            if final_path.is_dir() {
                let hold = EntryHold { _lock: Some(lock), kind: kind.to_string(), key: key.to_string() };
                return Ok((final_path, outcome, hold));
            }
            // Not atomic (flock(2) drops the shared lock first): another run may build
            // it meanwhile, and gc may remove it after we go back to shared; both are
            // seen by looking again under each lock.
            lock.relock(FlockArg::LockExclusive).map_err(lock_err)?;
            if !final_path.is_dir() {
                let Some(build) = build.take() else {
                    return Err(ImageError::Io(crate::path_io::PathIo {
                        what: "keeping the entry just built (it was removed at once: is `vmrepro images gc` running in a loop?)",
                        path: final_path,
                        source: std::io::Error::from(std::io::ErrorKind::NotFound),
                    }));
                };
                self.build_locked(kind, key, &final_path, build)?;
                outcome = CacheOutcome::Built;
            }
            lock.relock(FlockArg::LockShared).map_err(lock_err)?;
        }
    }

    /// Builds `kind/key` into a temp folder and renames it to `final_path`; the caller
    /// holds the entry's exclusive lock.
    fn build_locked(
        &self,
        kind: &str,
        key: &str,
        final_path: &Path,
        build: impl FnOnce(&Path) -> Result<(), ImageError>,
    ) -> Result<(), ImageError> {
        let tmp = self.build_folder(kind, key)?;
        build(tmp.path())?;
        commit(tmp, final_path)
    }

    /// A fresh build folder for `kind/key` under `<root>/tmp/`, after removing that
    /// entry's earlier build folders; the caller holds the entry's exclusive lock.
    fn build_folder(&self, kind: &str, key: &str) -> Result<tempfile::TempDir, ImageError> {
        let tmp_root = self.root.join("tmp");
        std::fs::create_dir_all(&tmp_root).map_err(ImageError::io("creating cache folder", &tmp_root))?;
        // We hold the lock: any build folder of this entry is a killed build's leftover.
        let prefix = format!("{kind}-{key}-");
        if let Ok(rd) = std::fs::read_dir(&tmp_root) {
            for e in rd.flatten() {
                if e.file_name().to_string_lossy().starts_with(&prefix) {
                    let _ = std::fs::remove_dir_all(e.path());
                }
            }
        }
        tempfile::Builder::new()
            .prefix(&prefix)
            .tempdir_in(&tmp_root)
            .map_err(ImageError::io("creating build folder", &tmp_root))
    }

    /// The entry `kind/key` if it exists, held (see [`EntryHold`]) so that
    /// `vmrepro images gc` leaves it alone while the hold lives. `None` when it is
    /// missing, or being written or removed right now (its exclusive lock is taken:
    /// this does not wait). A cache whose lock file can't be opened (a read-only disk,
    /// another user's cache) gives the entry without a hold, as
    /// [`Cache::get_or_build_held`] does: entries appear only by rename, whole, and no
    /// one can remove them there either.
    pub fn hold_existing(&self, kind: &str, key: &str) -> Option<(PathBuf, EntryHold)> {
        let final_path = self.entry_path(kind, key);
        if !final_path.is_dir() {
            return None;
        }
        let lock_file = match File::options().create(true).append(true).open(self.lock_path(kind, key)) {
            Ok(f) => f,
            Err(_) => {
                return Some((final_path, EntryHold { _lock: None, kind: kind.to_string(), key: key.to_string() }))
            }
        };
        let lock = Flock::lock(lock_file, FlockArg::LockSharedNonblock).ok()?;
        final_path
            .is_dir()
            .then(|| (final_path, EntryHold { _lock: Some(lock), kind: kind.to_string(), key: key.to_string() }))
    }

    /// Starts writing the missing entry `kind/key` from work that fills it over time (a
    /// saved VM state): takes the entry's exclusive lock without waiting and gives an
    /// empty build folder. `Ok(None)` when the entry exists, or someone else is writing
    /// it (or gc is removing it). Dropping the [`EntryWriter`] without
    /// [`EntryWriter::commit`] removes the folder and leaves no entry.
    ///
    /// Errors ([`ImageError::Io`] naming the path): the cache folder or lock can't be
    /// created, or the build folder can't be made.
    pub fn begin_entry(&self, kind: &str, key: &str) -> Result<Option<EntryWriter>, ImageError> {
        let kind_dir = self.root.join(kind);
        std::fs::create_dir_all(&kind_dir).map_err(ImageError::io("creating cache folder", &kind_dir))?;
        let lock_path = self.lock_path(kind, key);
        let lock_file = File::options()
            .create(true)
            .append(true)
            .open(&lock_path)
            .map_err(ImageError::io("creating cache lock", &lock_path))?;
        let Ok(lock) = Flock::lock(lock_file, FlockArg::LockExclusiveNonblock) else { return Ok(None) };
        let final_path = self.entry_path(kind, key);
        if final_path.is_dir() {
            return Ok(None);
        }
        let tmp = self.build_folder(kind, key)?;
        Ok(Some(EntryWriter { tmp, final_path, _lock: lock }))
    }

    /// The lock file of entry `kind/key` (`<root>/<kind>/<key>.lock`, see the module
    /// docs).
    pub(crate) fn lock_path(&self, kind: &str, key: &str) -> PathBuf {
        self.root.join(kind).join(format!("{key}.lock"))
    }

    /// Lists complete entries as `(kind, key, path)`.
    pub fn list(&self) -> Vec<(String, String, PathBuf)> {
        let mut out = Vec::new();
        let Ok(kinds) = std::fs::read_dir(&self.root) else { return out };
        for k in kinds.flatten() {
            let kind = k.file_name().to_string_lossy().into_owned();
            if NOT_ENTRIES.contains(&kind.as_str()) || !k.path().is_dir() {
                continue;
            }
            if let Ok(entries) = std::fs::read_dir(k.path()) {
                for e in entries.flatten() {
                    if e.path().is_dir() {
                        out.push((kind.clone(), e.file_name().to_string_lossy().into_owned(), e.path()));
                    }
                }
            }
        }
        out.sort();
        out
    }
}

/// An entry being written ([`Cache::begin_entry`]): its build folder, under the entry's
/// exclusive lock.
#[derive(Debug)]
pub struct EntryWriter {
    tmp: tempfile::TempDir,
    final_path: PathBuf,
    _lock: Flock<File>,
}

impl EntryWriter {
    /// The build folder to fill.
    pub fn path(&self) -> &Path {
        self.tmp.path()
    }

    /// Flushes the folder to disk and renames it into place; returns the entry's path.
    ///
    /// Errors: [`ImageError::Io`] naming the file that can't be flushed or moved; the
    /// folder is then removed.
    pub fn commit(self) -> Result<PathBuf, ImageError> {
        commit(self.tmp, &self.final_path)?;
        Ok(self.final_path)
    }
}

/// Flushes build folder `tmp` and renames it to `final_path`; on error it is removed.
fn commit(tmp: tempfile::TempDir, final_path: &Path) -> Result<(), ImageError> {
    sync_tree(tmp.path())?;
    let built = tmp.keep();
    if let Err(e) = std::fs::rename(&built, final_path) {
        let _ = std::fs::remove_dir_all(&built);
        return Err(ImageError::Io(crate::path_io::PathIo {
            what: "moving built entry into the cache",
            path: final_path.to_path_buf(),
            source: e,
        }));
    }
    // Make the rename itself durable; a failure here only risks a rebuild.
    if let Some(d) = final_path.parent().and_then(|p| File::open(p).ok()) {
        let _ = d.sync_all();
    }
    Ok(())
}

/// `fsync`s every file and folder under `dir` (symlinks are not followed).
///
/// Errors: [`ImageError::Io`] naming the file that can't be flushed (e.g. disk full).
fn sync_tree(dir: &Path) -> Result<(), ImageError> {
    let rd = std::fs::read_dir(dir).map_err(ImageError::io("listing build folder", dir))?;
    for e in rd {
        let e = e.map_err(ImageError::io("listing build folder", dir))?;
        let path = e.path();
        let ft = e.file_type().map_err(ImageError::io("reading", &path))?;
        if ft.is_dir() {
            sync_tree(&path)?;
        } else if ft.is_file() {
            File::open(&path).and_then(|f| f.sync_all()).map_err(ImageError::io("writing to disk", &path))?;
        }
    }
    File::open(dir).and_then(|f| f.sync_all()).map_err(ImageError::io("writing to disk", dir))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failed_build_leaves_no_entry_and_second_call_is_cached() {
        let dir = tempfile::tempdir().unwrap();
        let cache = Cache::new(dir.path().to_path_buf());
        let err = cache.get_or_build("k", "abc", |p| {
            std::fs::write(p.join("half"), b"x").unwrap();
            Err(ImageError::Kernel("boom".into()))
        });
        assert!(err.is_err());
        assert!(!cache.entry_path("k", "abc").exists());
        assert_eq!(std::fs::read_dir(dir.path().join("tmp")).unwrap().count(), 0);

        let (p, o) = cache
            .get_or_build("k", "abc", |p| std::fs::write(p.join("f"), b"y").map_err(ImageError::io("w", p)))
            .unwrap();
        assert_eq!(o, CacheOutcome::Built);
        assert_eq!(std::fs::read(p.join("f")).unwrap(), b"y");
        let (_, o) = cache.get_or_build("k", "abc", |_| panic!("must not rebuild")).unwrap();
        assert_eq!(o, CacheOutcome::Cached);
    }

    #[test]
    fn a_killed_builds_leftovers_are_removed_by_the_next_build() {
        let dir = tempfile::tempdir().unwrap();
        let cache = Cache::new(dir.path().to_path_buf());
        let stale = dir.path().join("tmp/k-abc-dead01");
        std::fs::create_dir_all(&stale).unwrap();
        std::fs::write(stale.join("half"), b"x").unwrap();
        let other = dir.path().join("tmp/k-other-dead02");
        std::fs::create_dir_all(&other).unwrap();
        cache.get_or_build("k", "abc", |p| std::fs::write(p.join("f"), b"y").map_err(ImageError::io("w", p))).unwrap();
        assert!(!stale.exists(), "the leftover of the same entry is removed");
        assert!(other.exists(), "another entry's build folder is left alone (its build may be running)");
        assert_eq!(cache.list().len(), 1);
    }

    /// An entry whose lock file can't be opened (as on a read-only disk: here a folder
    /// stands where the lock file goes, since root may write anywhere) is still given,
    /// without a hold; a missing entry is not.
    #[test]
    fn an_entry_whose_lock_cannot_be_opened_is_given_unheld() {
        let dir = tempfile::tempdir().unwrap();
        let cache = Cache::new(dir.path().to_path_buf());
        cache.get_or_build("k", "abc", |p| std::fs::write(p.join("f"), b"y").map_err(ImageError::io("w", p))).unwrap();
        let lock = cache.lock_path("k", "abc");
        std::fs::remove_file(&lock).unwrap();
        std::fs::create_dir(&lock).unwrap();
        let (path, hold) = cache.hold_existing("k", "abc").expect("the entry is given");
        assert_eq!(path, cache.entry_path("k", "abc"));
        assert!(!hold.is_held());
        assert!(cache.hold_existing("k", "missing").is_none());
        let (_, hold) = cache.hold_existing("k", "abc").unwrap();
        assert_eq!(hold.entry(), "k/abc");
    }
}
