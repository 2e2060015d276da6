//! The host-wide kernel build lock: one source kernel builds at a time per cache.
//!
//! Two source kernels resolved at once (two suites' tests in parallel, or two kernels
//! of one suite) would otherwise compile side by side on the same cores, and the
//! second could not reuse the first one's ccache objects (`<cache>/ccache`), which is
//! what makes a kernel one patch away cheap. With the lock the second build waits,
//! then finds most of its objects in ccache.
//!
//! The lock is an exclusive `flock(2)` on `<cache>/kernel-build.lock`, taken by
//! [`acquire`] around the compile of a source kernel (not around cache lookups or
//! Debian kernels); it is released when the returned [`BuildLock`] is dropped, or when
//! the process dies.

use std::fs::File;
use std::path::Path;
use std::time::Duration;

use nix::fcntl::{Flock, FlockArg};

use super::{CancelFlag, ImageError};

/// The lock file's name in the cache's root.
pub const BUILD_LOCK_FILE: &str = "kernel-build.lock";

/// How often a waiting build looks at the lock and at its cancel flag.
const RETRY: Duration = Duration::from_millis(200);

/// A held build lock; dropping it releases the lock.
#[derive(Debug)]
pub struct BuildLock {
    _lock: Flock<File>,
}

/// Takes the build lock of the cache at `root`, waiting as long as another build
/// holds it. `waiting` is called once, before the first wait (not at all when the
/// lock is free), e.g. to say what the build waits for.
///
/// Errors: [`ImageError::Io`] when the lock file can't be created or locked;
/// [`ImageError::BuildWaitInterrupted`] when `cancel` is set while waiting.
pub fn acquire(root: &Path, cancel: &CancelFlag, waiting: impl FnOnce()) -> Result<BuildLock, ImageError> {
    std::fs::create_dir_all(root).map_err(ImageError::io("creating the cache folder", root))?;
    let path = root.join(BUILD_LOCK_FILE);
    let mut file = File::options()
        .create(true)
        .append(true)
        .open(&path)
        .map_err(ImageError::io("creating the build lock", &path))?;
    let mut waiting = Some(waiting);
    loop {
        match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
            Ok(lock) => return Ok(BuildLock { _lock: lock }),
            Err((f, nix::errno::Errno::EWOULDBLOCK)) => {
                file = f;
                if let Some(w) = waiting.take() {
                    w();
                }
                if cancel.is_cancelled() {
                    return Err(ImageError::BuildWaitInterrupted { lock: path });
                }
                std::thread::sleep(RETRY);
            }
            Err((_, e)) => {
                return Err(ImageError::Io(crate::path_io::PathIo {
                    what: "locking",
                    path,
                    source: std::io::Error::from(e),
                }));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    /// A second build waits while the first holds the lock and goes on once it is
    /// released; ordering is checked through channels, not timings.
    #[test]
    fn a_second_build_waits_for_the_first() {
        let d = tempfile::tempdir().unwrap();
        let first = acquire(d.path(), &CancelFlag::new(), || panic!("the lock was free")).unwrap();
        let (waiting_tx, waiting_rx) = mpsc::channel();
        let (got_tx, got_rx) = mpsc::channel();
        let root = d.path().to_path_buf();
        let second = std::thread::spawn(move || {
            let lock = acquire(&root, &CancelFlag::new(), move || waiting_tx.send(()).unwrap()).unwrap();
            got_tx.send(()).unwrap();
            drop(lock);
        });
        // The second build says it waits, and does not get the lock while the first holds it.
        waiting_rx.recv().unwrap();
        assert!(got_rx.try_recv().is_err(), "the second build got the lock while the first held it");
        drop(first);
        got_rx.recv().unwrap();
        second.join().unwrap();
        assert!(d.path().join(BUILD_LOCK_FILE).is_file());
    }

    #[test]
    fn a_cancelled_wait_ends_with_an_error_naming_the_lock() {
        let d = tempfile::tempdir().unwrap();
        let _first = acquire(d.path(), &CancelFlag::new(), || {}).unwrap();
        let cancel = CancelFlag::new();
        cancel.cancel();
        let e = acquire(d.path(), &cancel, || {}).unwrap_err();
        assert!(e.to_string().contains("waiting for another kernel build"), "{e}");
        assert!(e.to_string().contains(BUILD_LOCK_FILE), "{e}");
    }
}
