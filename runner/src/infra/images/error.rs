//! [`ImageError`]: what can go wrong reading the recipes or building and fetching
//! artefacts.

use std::path::{Path, PathBuf};

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
    /// A file operation failed.
    #[error("{what}: {}: {source}", path.display())]
    Io {
        /// What we were doing.
        what: &'static str,
        /// The path involved.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
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
    /// A download failed or had the wrong checksum.
    #[error("{0}")]
    Fetch(String),
    /// A kernel package or tree doesn't have what we need.
    #[error("{0}")]
    Kernel(String),
    /// A prerequisite of building as an ordinary user is missing (user namespaces,
    /// subordinate ids); the message says how to fix it.
    #[error(transparent)]
    Host(#[from] crate::infra::host::Missing),
}

impl ImageError {
    pub(crate) fn io<'a>(what: &'static str, path: &'a Path) -> impl FnOnce(std::io::Error) -> ImageError + 'a {
        move |source| ImageError::Io { what, path: path.to_path_buf(), source }
    }
}
