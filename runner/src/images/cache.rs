//! The content-addressed artefact cache.
//!
//! Layout: `<root>/<kind>/<key>/` where `key` is the SHA-256 of every input of the
//! recipe. Entries are built in `<root>/tmp/<random>/` and renamed into place only when
//! complete, under an exclusive lock file `<root>/<kind>/<key>.lock`, so a failed or
//! interrupted build (or a full disk) never leaves an entry that a later run would use,
//! and two concurrent runs build an entry once.
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
}

/// Whether [`Cache::get_or_build`] found the entry or built it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
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
        Cache { root }
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
    /// into place, on error it is removed.
    ///
    /// Errors: the cache folder can't be created or locked (e.g. read-only), or `build`
    /// failed.
    pub fn get_or_build(
        &self,
        kind: &str,
        key: &str,
        build: impl FnOnce(&Path) -> Result<(), ImageError>,
    ) -> Result<(PathBuf, CacheOutcome), ImageError> {
        let final_path = self.entry_path(kind, key);
        if final_path.is_dir() {
            return Ok((final_path, CacheOutcome::Cached));
        }
        let kind_dir = self.root.join(kind);
        std::fs::create_dir_all(&kind_dir).map_err(ImageError::io("creating cache folder", &kind_dir))?;
        let lock_path = kind_dir.join(format!("{key}.lock"));
        let lock_file = File::create(&lock_path).map_err(ImageError::io("creating cache lock", &lock_path))?;
        let _lock = Flock::lock(lock_file, FlockArg::LockExclusive).map_err(|(_, e)| ImageError::Io {
            what: "locking cache entry",
            path: lock_path.clone(),
            source: e.into(),
        })?;
        // Another run may have built it while we waited for the lock.
        if final_path.is_dir() {
            return Ok((final_path, CacheOutcome::Cached));
        }
        let tmp_root = self.root.join("tmp");
        std::fs::create_dir_all(&tmp_root).map_err(ImageError::io("creating cache folder", &tmp_root))?;
        let tmp = tempfile::Builder::new()
            .prefix(&format!("{kind}-"))
            .tempdir_in(&tmp_root)
            .map_err(ImageError::io("creating build folder", &tmp_root))?;
        build(tmp.path())?;
        let built = tmp.keep();
        if let Err(e) = std::fs::rename(&built, &final_path) {
            let _ = std::fs::remove_dir_all(&built);
            return Err(ImageError::Io { what: "moving built entry into the cache", path: final_path, source: e });
        }
        Ok((final_path, CacheOutcome::Built))
    }

    /// Lists complete entries as `(kind, key, path)`.
    pub fn list(&self) -> Vec<(String, String, PathBuf)> {
        let mut out = Vec::new();
        let Ok(kinds) = std::fs::read_dir(&self.root) else { return out };
        for k in kinds.flatten() {
            let kind = k.file_name().to_string_lossy().into_owned();
            if kind == "tmp" || !k.path().is_dir() {
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
}
