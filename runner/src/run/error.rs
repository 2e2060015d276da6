//! [`RunError`]: what stops a run (infrastructure failures).

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::infra::images::ImageError;
use crate::infra::net::NetError;
use crate::infra::qemu::vm::VmError;
use crate::path_io::PathIo;
use crate::run::record::RunDirError;

/// Errors that stop a run before or while VMs run (infrastructure failures).
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// Image build or fetch failed.
    #[error("preparing images: {0}")]
    Image(#[from] ImageError),
    /// Network namespace or device setup failed.
    #[error(transparent)]
    Net(#[from] NetError),
    /// A VM failed (didn't boot, QEMU exited, step timeout, agent lost).
    #[error(transparent)]
    Vm(#[from] VmError),
    /// KVM was required but doesn't work here.
    #[error("accel: kvm was requested but {0}")]
    Kvm(String),
    /// The VMs' memory together is more than the host's RAM: they could never all run.
    #[error("the suite's {vms} VMs have {needed_mib} MiB of memory together (vms[].memory), more than this host's {host_mib} MiB of RAM (MemTotal in /proc/meminfo); give the VMs less memory or run the suite on a larger host")]
    HostMemory {
        /// VMs in the suite.
        vms: usize,
        /// Sum of their `memory:`, MiB.
        needed_mib: u64,
        /// The host's RAM, MiB.
        host_mib: u64,
    },
    /// A step's dependency had not ended by the latest it could (every step before it
    /// at its full timeout): its VM is stuck outside any step's bound.
    #[error("VM {stuck} is stuck: its step {dependency} had not ended {} after VM {vm}'s step {step} began waiting for it, the latest it could end with every step before it at its full timeout", humantime::format_duration(*waited))]
    DependencyTimeout {
        /// The VM of the dependency: the one that is stuck.
        stuck: String,
        /// What was waited for (`vm/step`).
        dependency: String,
        /// VM of the waiting step.
        vm: String,
        /// The waiting step (it did not run).
        step: String,
        /// How long it waited.
        waited: Duration,
    },
    /// A file to copy into a guest changed after the suite was checked.
    #[error("{} changed since the suite was checked (SHA-256 {planned}, now {now}); run the suite again", path.display())]
    FileChanged {
        /// The file.
        path: PathBuf,
        /// Its hash when the suite was compiled.
        planned: String,
        /// Its hash now.
        now: String,
    },
    /// The run folder could not be written (or read back).
    #[error(transparent)]
    RunDir(#[from] RunDirError),
    /// Writing temp files or talking to a tool failed.
    #[error(transparent)]
    Io(#[from] PathIo),
    /// Every run folder name of this second is taken (`<stamp>`, `<stamp>-1` … `-999`).
    #[error("creating run folder {}: too many runs in the same second", base.display())]
    RunDirTaken {
        /// The suite's results folder.
        base: PathBuf,
    },
    /// A VM's kernel lacks a feature the VM's role needs (the NFS server, the NFS
    /// client, netem); the message names the kernel and the options.
    #[error("VM {vm}: {message}")]
    KernelLacks {
        /// The VM.
        vm: String,
        /// What is missing (from [`crate::infra::images::modules::missing_message`]).
        message: String,
    },
    /// `qemu-img create` refused to make a VM's overlay.
    #[error("creating overlay {}: {stderr}", path.display())]
    Overlay {
        /// The overlay.
        path: PathBuf,
        /// What qemu-img printed.
        stderr: String,
    },
}

/// `map_err` helper: [`RunError::Io`] of `what` on `path`.
pub(crate) fn io_err<'a>(what: &'static str, path: &'a Path) -> impl FnOnce(std::io::Error) -> RunError + 'a {
    move |source| RunError::Io(PathIo { what, path: path.to_path_buf(), source })
}
