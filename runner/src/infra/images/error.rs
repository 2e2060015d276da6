//! [`ImageError`]: what can go wrong reading the recipes or building and fetching
//! artefacts.

use std::path::{Path, PathBuf};

use crate::path_io::PathIo;

/// Errors while reading recipes or building/fetching artefacts.
#[derive(Debug, thiserror::Error)]
pub enum ImageError {
    /// No `images/` folder was found.
    #[error("cannot find the images folder (looked for images/kernels.yaml above {start} and at {builtin}); pass --images DIR or set VMREPRO_IMAGES")]
    NoImagesDir {
        /// Where the search started.
        start: PathBuf,
        /// The compiled-in fallback.
        builtin: PathBuf,
    },
    /// A recipe file couldn't be read or parsed.
    #[error("{}: {message}", path.display())]
    Recipe {
        /// The recipe file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// A file of the images folder is not what it must be (a link, a pipe, a hard
    /// link, too large, outside), read through [`crate::path_io::Folder`].
    #[error(transparent)]
    File(#[from] crate::path_io::FileError),
    /// A file operation failed (worded `what: path: error`, as image errors always were).
    #[error("{}: {}: {}", .0.what, .0.path.display(), .0.source)]
    Io(#[source] PathIo),
    /// An external tool failed.
    #[error("{tool} failed ({status}); last output:\n{tail}")]
    Tool {
        /// The command (program name and key arguments).
        tool: String,
        /// Exit status text.
        status: String,
        /// Last lines of its output.
        tail: String,
    },
    /// A download failed (other than [`ImageError::PinGone`] and
    /// [`ImageError::Checksum`]).
    #[error("{0}")]
    Fetch(String),
    /// The archive answered 404 for a pinned package: that version has left it.
    #[error("{url}: 404 Not Found — the pinned version has left the archive; fetch it from Debian's snapshot archive (set VMREPRO_DEBIAN_MIRROR) or re-pin images/kernels.yaml")]
    PinGone {
        /// The package's URL.
        url: String,
    },
    /// A download's size or SHA-256 differs from its pin: it is refused.
    #[error("{url}: expected {size} bytes with SHA-256 {sha256}, got {got_size} bytes with SHA-256 {got_sha256}; refusing it")]
    Checksum {
        /// The package's URL.
        url: String,
        /// The pinned size, bytes.
        size: u64,
        /// The pinned SHA-256.
        sha256: String,
        /// The size downloaded, bytes.
        got_size: u64,
        /// The SHA-256 of what was downloaded.
        got_sha256: String,
    },
    /// The host's apt sources name no Debian archive of this kind, and its variable is
    /// unset.
    #[error("cannot find {what} in the host's apt sources{where_}; set {variable}")]
    NoArchive {
        /// Which archive (`a Debian archive`, `the Debian security archive`).
        what: &'static str,
        /// Where it looked (` (/etc/apt/sources.list.d/*.sources, …)` or nothing).
        where_: &'static str,
        /// The environment variable that names it.
        variable: &'static str,
    },
    /// The run was interrupted while its build waited for another build's lock.
    #[error("interrupted while waiting for another kernel build ({})", lock.display())]
    BuildWaitInterrupted {
        /// The build lock.
        lock: PathBuf,
    },
    /// A kernel package or tree doesn't have what we need.
    #[error("{0}")]
    Kernel(String),
    /// A prerequisite of building as an ordinary user is missing (user namespaces,
    /// subordinate ids); the message says how to fix it.
    #[error(transparent)]
    Host(#[from] crate::infra::host::Missing),
}

impl ImageError {
    /// The error's words if it is a download or an mmdebstrap run that failed because
    /// the network did (apt's and ureq's words for a name that would not resolve, a
    /// connection refused or timed out): worth another attempt. `None` otherwise.
    pub fn network_failure(&self) -> Option<String> {
        let network = match self {
            ImageError::Tool { tool, tail, .. } => tool == "mmdebstrap" && super::tool::network_failure(tail),
            ImageError::Fetch(words) => super::tool::network_failure(words),
            _ => false,
        };
        network.then(|| self.to_string())
    }

    pub(crate) fn io<'a>(what: &'static str, path: &'a Path) -> impl FnOnce(std::io::Error) -> ImageError + 'a {
        move |source| ImageError::Io(PathIo { what, path: path.to_path_buf(), source })
    }
}
