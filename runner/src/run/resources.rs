//! What a run holds outside its results folder (VMs, the network namespace, the private
//! temp folder, its cache entries) and how it is given back, in order, on every path.

use std::path::{Path, PathBuf};

use crate::infra::net::Namespace;
use crate::infra::qemu::vm::Vm;

use super::{io_err, RunError};

/// What a run holds outside its results folder. [`Resources::release`] (after every VM
/// was shut down) ends the namespace, then removes the temp folder: QEMU never runs
/// without its sockets, overlay or network.
#[derive(Debug, Default)]
pub(super) struct Resources {
    pub(super) vms: Vec<Vm>,
    pub(super) ns: Option<Namespace>,
    pub(super) tmp: Option<tempfile::TempDir>,
    /// The lock on the temp folder (see [`create_temp_dir`]), held until it is removed.
    pub(super) tmp_lock: Option<nix::fcntl::Flock<std::fs::File>>,
    /// Shared locks on every cache entry the VMs use (kernels, rootfs), so that
    /// `vmrepro images gc` leaves them alone while the run lives; released last.
    pub(super) holds: Vec<std::sync::Arc<crate::infra::images::cache::EntryHold>>,
    /// Shared locks on the saved VM states the VMs started from (their overlays are
    /// backed by them); a VM whose state could not be loaded gives its hold up early.
    pub(super) state_holds: Vec<super::scheduler::StateHold>,
    /// The control socket (`vmrepro stop`); taken out before the teardown and closed
    /// after the final `run.json` (see [`super::keep`]).
    pub(super) control: Option<super::keep::Control>,
}

impl Resources {
    /// Drops the (already shut down) VMs, the namespace and the temp folder; returns what
    /// could not be cleaned up.
    pub(super) fn release(&mut self) -> Vec<String> {
        let mut problems = Vec::new();
        self.vms.clear();
        // Ends (and reaps) the holder; the namespace goes with the last QEMU in it.
        drop(self.ns.take());
        if let Some(tmp) = self.tmp.take() {
            let path = tmp.path().to_path_buf();
            if let Err(e) = tmp.close() {
                problems.push(format!("cannot remove the temp folder {}: {e}", path.display()));
            }
        }
        self.tmp_lock = None;
        self.holds.clear();
        self.state_holds.clear();
        problems
    }
}

/// Name of the lock file in a run's temp folder.
const TEMP_LOCK: &str = "run.lock";
/// Prefix of a run's temp folder name.
const TEMP_PREFIX: &str = "vmrepro-run-";

/// Creates the run's private temp folder in `root` (mode 0700 from the start:
/// tempfile's default would be 0777 & ~umask) holding `run.lock`, locked (`flock`) for
/// as long as the run lives. A folder whose lock nobody holds belongs to a runner that
/// died without cleaning up (SIGKILL, power loss): [`sweep_stale_temp_dirs`] removes it.
///
/// Errors: [`RunError::Io`] naming the folder or lock file.
pub(super) fn create_temp_dir(root: &Path) -> Result<(tempfile::TempDir, nix::fcntl::Flock<std::fs::File>), RunError> {
    let tmp = tempfile::Builder::new()
        .prefix(TEMP_PREFIX)
        .permissions(std::os::unix::fs::PermissionsExt::from_mode(0o700))
        .tempdir_in(root)
        .map_err(io_err("creating temp folder in", root))?;
    // Locked under another name, then renamed: a sweeper never sees an unlocked lock.
    let staging = tmp.path().join(".run.lock.new");
    let file = std::fs::File::create(&staging).map_err(io_err("creating", &staging))?;
    let lock = nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusiveNonblock).map_err(|(_, e)| {
        RunError::Io(crate::path_io::PathIo { what: "locking", path: staging.clone(), source: e.into() })
    })?;
    let path = tmp.path().join(TEMP_LOCK);
    std::fs::rename(&staging, &path).map_err(io_err("creating", &path))?;
    Ok((tmp, lock))
}

/// Removes the temp folders (`vmrepro-run-*` in `root`, ours) of runs whose runner died
/// without cleaning up: their `run.lock` is held by no one. Folders without a lock file
/// (being created, or made by an older version) are left alone. Returns the folders
/// removed; errors are ignored (the next run tries again).
pub fn sweep_stale_temp_dirs(root: &Path) -> Vec<PathBuf> {
    use std::os::unix::fs::MetadataExt;
    let uid = nix::unistd::geteuid().as_raw();
    let mut removed = Vec::new();
    let Ok(rd) = std::fs::read_dir(root) else { return removed };
    for e in rd.flatten() {
        let path = e.path();
        let ours = e.file_name().to_string_lossy().starts_with(TEMP_PREFIX)
            && std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_dir() && m.uid() == uid);
        if !ours {
            continue;
        }
        let Ok(file) = std::fs::File::open(path.join(TEMP_LOCK)) else { continue };
        if let Ok(_lock) = nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusiveNonblock) {
            if std::fs::remove_dir_all(&path).is_ok() {
                removed.push(path);
            }
        }
    }
    removed
}
