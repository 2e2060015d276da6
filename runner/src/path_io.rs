//! [`PathIo`]: "this path could not be read, written or created", the one I/O error
//! every layer's error type carries as its `Io` variant's source.

use std::path::{Path, PathBuf};

/// An I/O failure on one path, with what was being done: `"{what} {path}: {source}"`
/// (e.g. `writing results/smoke/20261201T101010Z/run.json: No space left on device`).
#[derive(Debug, thiserror::Error)]
#[error("{what} {}: {source}", path.display())]
pub struct PathIo {
    /// What was being done (`"reading"`, `"creating run folder"`).
    pub what: &'static str,
    /// The path involved.
    pub path: PathBuf,
    /// The I/O error.
    #[source]
    pub source: std::io::Error,
}

impl PathIo {
    /// `map_err` helper: the [`PathIo`] of `what` on `path`
    /// (`.map_err(PathIo::on("reading", &path))?`, which converts it into the caller's
    /// error type).
    pub fn on<'a>(what: &'static str, path: &'a Path) -> impl FnOnce(std::io::Error) -> PathIo + 'a {
        move |source| PathIo { what, path: path.to_path_buf(), source }
    }
}
