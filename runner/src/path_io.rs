//! The one file layer for untrusted folders (run folders, unpacked bundles, an images
//! folder read from a bundle): [`Folder`], a folder opened as a capability, and its
//! errors ([`FileError`], with [`PathIo`], "this path could not be read or written",
//! the source of every layer's `Io` variant).
//!
//! Every path given to a [`Folder`] is relative and resolved by Linux `openat2(2)`
//! (Linux 5.6 and later) with `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS`: no symbolic link
//! is followed, on the way or at the end, and nothing resolves outside the folder.
//! Reads open the file as `O_PATH` first and refuse anything but a regular file before
//! the real open (so a named pipe or device never blocks or is read), refuse a file with
//! more than one hard link (a hard link to a host file would carry it in with no
//! symbolic link on the way), and stop at a size cap ("FILE is larger than N bytes"). Writes create a temp file exclusively
//! (`O_CREAT | O_EXCL`) inside the folder, then rename it over the name: a link at the
//! name is replaced, never followed.

use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::path::{Component, Path, PathBuf};

use nix::errno::Errno;
use nix::fcntl::{openat2, OFlag, OpenHow, ResolveFlag};
use nix::sys::stat::Mode;

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

/// What reading or writing through a [`Folder`] can meet. Every message names the file.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    /// The operating system refused or failed.
    #[error(transparent)]
    Io(#[from] PathIo),
    /// The path, or a folder on its way, is a symbolic link.
    #[error("{} is a symbolic link; links in {} are not followed", link.display(), folder.display())]
    Link {
        /// The link (the first one on the path).
        link: PathBuf,
        /// The folder.
        folder: PathBuf,
    },
    /// The path is not a regular file (a named pipe, device, socket or folder).
    #[error("{} is {kind}, not a regular file", path.display())]
    NotRegular {
        /// The path.
        path: PathBuf,
        /// What it is (`"a named pipe"`).
        kind: &'static str,
    },
    /// The regular file has more than one hard link: it may be a host file's other name.
    #[error("{} has {links} hard links; files read from {} must have one (a hard link can be another name of a host file)", path.display(), folder.display())]
    HardLink {
        /// The file.
        path: PathBuf,
        /// The folder.
        folder: PathBuf,
        /// Its link count (`st_nlink`).
        links: u64,
    },
    /// The file is over the cap of what reads it.
    #[error("{} is larger than {limit} bytes", path.display())]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// The cap, bytes.
        limit: u64,
    },
    /// The path is absolute, has `..`, or is empty: it would leave the folder.
    #[error("{path:?} is not a plain relative path inside {}", folder.display())]
    Outside {
        /// The path as given.
        path: String,
        /// The folder.
        folder: PathBuf,
    },
}

/// The cap on a JSON file of a run folder or bundle (`run.json`, `plan.json`,
/// `results.json`, `environment.json`, `BUNDLE.json`), bytes.
pub const MAX_JSON_BYTES: u64 = 64 << 20;
/// The cap on one step output or log of a run folder read back, bytes.
pub const MAX_OUTPUT_BYTES: u64 = 256 << 20;

/// What an entry of a folder is, symbolic links not followed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A regular file of this many bytes.
    File(u64),
    /// A folder.
    Folder,
    /// Anything else: a symbolic link, named pipe, socket or device (its word).
    Other(&'static str),
}

/// The word for a file type (`"a named pipe"`), as [`FileError::NotRegular`] says it.
fn kind_of(mode: u32) -> &'static str {
    match mode & libc::S_IFMT {
        libc::S_IFREG => "a file",
        libc::S_IFDIR => "a folder",
        libc::S_IFLNK => "a symbolic link",
        libc::S_IFIFO => "a named pipe",
        libc::S_IFSOCK => "a socket",
        libc::S_IFCHR => "a character device",
        libc::S_IFBLK => "a block device",
        _ => "a special file",
    }
}

/// A folder opened as a capability: every path through it is confined to it (see the
/// module docs).
#[derive(Debug)]
pub struct Folder {
    fd: OwnedFd,
    path: PathBuf,
}

/// Checks that `rel` is a plain relative path (no root, no `..`, not empty).
fn plain(rel: &str, folder: &Path) -> Result<(), FileError> {
    let p = Path::new(rel);
    let ok = !rel.is_empty()
        && !rel.contains('\0')
        && p.components().all(|c| matches!(c, Component::Normal(_) | Component::CurDir));
    if ok {
        Ok(())
    } else {
        Err(FileError::Outside { path: rel.to_string(), folder: folder.to_path_buf() })
    }
}

/// Checks that `rel` is a plain relative path (no root, no `..`, not empty, not
/// starting with `~`, which a shell or another tool would expand to a home folder), as
/// every path a bundle's `MANIFEST` and `BUNDLE.json` or a run folder's `run.json`
/// names must be; `folder` is for the message.
///
/// Errors: [`FileError::Outside`].
pub fn check_relative(rel: &str, folder: &Path) -> Result<(), FileError> {
    if rel.starts_with('~') {
        return Err(FileError::Outside { path: rel.to_string(), folder: folder.to_path_buf() });
    }
    plain(rel, folder)
}

/// Reads the regular file `path` named by a suite or the user, at most `limit` bytes:
/// its folder is opened as given, the file itself through that [`Folder`] (not a link,
/// not a pipe or device, bounded).
///
/// Errors: as [`Folder::read`].
pub fn read_named(path: &Path, limit: u64) -> Result<Vec<u8>, FileError> {
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    Folder::open(dir)?.read(&name, limit)
}

impl Folder {
    /// Opens the folder at `path` (named by the user: a link there is followed).
    ///
    /// Errors: [`FileError::Io`] when it can't be opened or is not a folder.
    pub fn open(path: &Path) -> Result<Folder, FileError> {
        let f = File::open(path).map_err(PathIo::on("opening", path))?;
        let meta = f.metadata().map_err(PathIo::on("opening", path))?;
        if !meta.is_dir() {
            let source = std::io::Error::new(
                std::io::ErrorKind::NotADirectory,
                format!("{}, not a folder", kind_of(meta.mode())),
            );
            return Err(PathIo { what: "opening", path: path.to_path_buf(), source }.into());
        }
        Ok(Folder { fd: f.into(), path: path.to_path_buf() })
    }

    /// The folder's path, as it was opened (for messages).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// `rel` under the folder's path, for messages.
    pub fn display(&self, rel: &str) -> PathBuf {
        self.path.join(rel)
    }

    fn open_at(&self, rel: &str, flags: OFlag, mode: Mode) -> Result<OwnedFd, FileError> {
        plain(rel, &self.path)?;
        // openat2 refuses O_PATH with other flags than these, and a mode without O_CREAT.
        let extra = if flags.contains(OFlag::O_PATH) { OFlag::empty() } else { OFlag::O_NOCTTY };
        let how = OpenHow::new()
            .flags(flags | OFlag::O_CLOEXEC | OFlag::O_NOFOLLOW | extra)
            .mode(mode)
            .resolve(ResolveFlag::RESOLVE_BENEATH | ResolveFlag::RESOLVE_NO_SYMLINKS);
        match openat2(self.fd.as_raw_fd(), rel, how) {
            // SAFETY: openat2 returned a new descriptor that nothing else owns.
            Ok(fd) => Ok(unsafe { OwnedFd::from_raw_fd(fd) }),
            Err(Errno::ELOOP) => Err(FileError::Link {
                link: self.first_link(rel).unwrap_or_else(|| self.display(rel)),
                folder: self.path.clone(),
            }),
            // O_DIRECTORY | O_NOFOLLOW on a link says "not a folder".
            Err(Errno::ENOTDIR) if self.first_link(rel).is_some() => {
                Err(FileError::Link { link: self.first_link(rel).unwrap_or_default(), folder: self.path.clone() })
            }
            Err(Errno::EXDEV) => Err(FileError::Outside { path: rel.to_string(), folder: self.path.clone() }),
            Err(Errno::ENOSYS) => Err(FileError::Io(PathIo {
                what: "opening",
                path: self.display(rel),
                source: std::io::Error::other("this host's kernel lacks openat2 (Linux 5.6 or later is needed)"),
            })),
            Err(e) => Err(FileError::Io(PathIo { what: "opening", path: self.display(rel), source: e.into() })),
        }
    }

    /// The first component of `rel` that is a symbolic link (for the message).
    fn first_link(&self, rel: &str) -> Option<PathBuf> {
        let mut acc = PathBuf::new();
        for c in Path::new(rel).components() {
            acc.push(c);
            let full = self.path.join(&acc);
            if std::fs::symlink_metadata(&full).is_ok_and(|m| m.file_type().is_symlink()) {
                return Some(full);
            }
        }
        None
    }

    /// What `rel` is, links not followed; `None` when nothing is there.
    ///
    /// Errors: a link on the way, a path outside.
    pub fn kind(&self, rel: &str) -> Result<Option<Kind>, FileError> {
        let fd = match self.open_at(rel, OFlag::O_PATH, Mode::empty()) {
            Ok(fd) => fd,
            Err(FileError::Io(PathIo { source, .. })) if source.kind() == std::io::ErrorKind::NotFound => {
                return Ok(None)
            }
            Err(FileError::Link { link, .. }) if link == self.display(rel) => {
                return Ok(Some(Kind::Other("a symbolic link")))
            }
            Err(e) => return Err(e),
        };
        let st = nix::sys::stat::fstat(fd.as_raw_fd()).map_err(|e| PathIo {
            what: "reading",
            path: self.display(rel),
            source: e.into(),
        })?;
        Ok(Some(match st.st_mode & libc::S_IFMT {
            libc::S_IFREG => Kind::File(st.st_size as u64),
            libc::S_IFDIR => Kind::Folder,
            m => Kind::Other(kind_of(m)),
        }))
    }

    /// Whether `rel` is a regular file (links not followed; anything wrong is `false`).
    pub fn is_file(&self, rel: &str) -> bool {
        matches!(self.kind(rel), Ok(Some(Kind::File(_))))
    }

    /// Opens the regular file `rel` for reading, checked before the open that could
    /// block; with its size. A file with more than one hard link is refused.
    ///
    /// Errors: [`FileError::Link`], [`FileError::NotRegular`], [`FileError::HardLink`],
    /// [`FileError::Outside`], [`FileError::Io`].
    pub fn open_file(&self, rel: &str) -> Result<(File, u64), FileError> {
        match self.kind(rel)? {
            Some(Kind::File(_)) => {}
            Some(Kind::Folder) => return Err(FileError::NotRegular { path: self.display(rel), kind: "a folder" }),
            Some(Kind::Other("a symbolic link")) => {
                return Err(FileError::Link { link: self.display(rel), folder: self.path.clone() })
            }
            Some(Kind::Other(kind)) => return Err(FileError::NotRegular { path: self.display(rel), kind }),
            None => {
                return Err(FileError::Io(PathIo {
                    what: "reading",
                    path: self.display(rel),
                    source: std::io::ErrorKind::NotFound.into(),
                }))
            }
        }
        let fd = self.open_at(rel, OFlag::O_RDONLY | OFlag::O_NONBLOCK, Mode::empty())?;
        let file = File::from(fd);
        let meta = file.metadata().map_err(PathIo::on("reading", &self.display(rel)))?;
        if !meta.is_file() {
            return Err(FileError::NotRegular { path: self.display(rel), kind: kind_of(meta.mode()) });
        }
        if meta.nlink() > 1 {
            return Err(FileError::HardLink {
                path: self.display(rel),
                folder: self.path.clone(),
                links: meta.nlink(),
            });
        }
        Ok((file, meta.len()))
    }

    /// Reads the regular file `rel`, at most `limit` bytes.
    ///
    /// Errors: as [`Folder::open_file`]; [`FileError::TooLarge`] over `limit`.
    pub fn read(&self, rel: &str, limit: u64) -> Result<Vec<u8>, FileError> {
        let (file, len) = self.open_file(rel)?;
        let too_large = || FileError::TooLarge { path: self.display(rel), limit };
        if len > limit {
            return Err(too_large());
        }
        let mut data = Vec::with_capacity(len as usize);
        // The file may grow after the check: read at most one byte past the cap.
        file.take(limit.saturating_add(1)).read_to_end(&mut data).map_err(PathIo::on("reading", &self.display(rel)))?;
        if data.len() as u64 > limit {
            return Err(too_large());
        }
        Ok(data)
    }

    /// [`Folder::read`] as text (invalid UTF-8 replaced).
    ///
    /// Errors: as [`Folder::read`].
    pub fn read_text(&self, rel: &str, limit: u64) -> Result<String, FileError> {
        Ok(String::from_utf8_lossy(&self.read(rel, limit)?).into_owned())
    }

    /// The SHA-256 (lower-case hex) of the regular file `rel`, at most `limit` bytes read.
    ///
    /// Errors: as [`Folder::read`].
    pub fn sha256(&self, rel: &str, limit: u64) -> Result<String, FileError> {
        use sha2::Digest;
        let (file, len) = self.open_file(rel)?;
        let too_large = || FileError::TooLarge { path: self.display(rel), limit };
        if len > limit {
            return Err(too_large());
        }
        let mut h = sha2::Sha256::new();
        let n = std::io::copy(&mut file.take(limit.saturating_add(1)), &mut h)
            .map_err(PathIo::on("reading", &self.display(rel)))?;
        if n > limit {
            return Err(too_large());
        }
        Ok(hex::encode(h.finalize()))
    }

    /// Removes the file (or symbolic link: the link, never what it names) `rel`;
    /// whether something was there. A folder is left alone (`false`), as is a path
    /// whose folders on the way are links or missing.
    ///
    /// Errors: [`FileError::Outside`], [`FileError::Io`] when the unlink fails.
    pub fn remove(&self, rel: &str) -> Result<bool, FileError> {
        plain(rel, &self.path)?;
        let (dir, name) = match rel.rsplit_once('/') {
            Some((d, n)) => match self.sub(d) {
                Ok(f) => (f, n),
                Err(_) => return Ok(false),
            },
            None => (
                Folder { fd: self.fd.try_clone().map_err(PathIo::on("opening", &self.path))?, path: self.path.clone() },
                rel,
            ),
        };
        match nix::unistd::unlinkat(Some(dir.fd.as_raw_fd()), name, nix::unistd::UnlinkatFlags::NoRemoveDir) {
            Ok(()) => Ok(true),
            Err(Errno::ENOENT | Errno::EISDIR | Errno::EPERM) => Ok(false),
            Err(e) => Err(FileError::Io(PathIo { what: "removing", path: self.display(rel), source: e.into() })),
        }
    }

    /// The folder `rel` inside this one, opened as its own [`Folder`].
    ///
    /// Errors: a link on the way, not a folder, outside.
    pub fn sub(&self, rel: &str) -> Result<Folder, FileError> {
        let fd = self.open_at(rel, OFlag::O_RDONLY | OFlag::O_DIRECTORY, Mode::empty())?;
        Ok(Folder { fd, path: self.display(rel) })
    }

    /// Creates the folders of `rel` that are missing (mode 0755) and opens the last.
    ///
    /// Errors: a link on the way, a file in the way, outside.
    pub fn create_dirs(&self, rel: &str) -> Result<Folder, FileError> {
        plain(rel, &self.path)?;
        let mut acc = String::new();
        for c in Path::new(rel).components() {
            let Component::Normal(c) = c else { continue };
            if !acc.is_empty() {
                acc.push('/');
            }
            acc.push_str(&c.to_string_lossy());
            let parent = match acc.rfind('/') {
                Some(i) => self.sub(&acc[..i])?,
                None => Folder {
                    fd: self.fd.try_clone().map_err(PathIo::on("opening", &self.path))?,
                    path: self.path.clone(),
                },
            };
            let name = &acc[acc.rfind('/').map_or(0, |i| i + 1)..];
            match nix::sys::stat::mkdirat(Some(parent.fd.as_raw_fd()), name, Mode::from_bits_truncate(0o755)) {
                Ok(()) | Err(Errno::EEXIST) => {}
                Err(e) => {
                    return Err(FileError::Io(PathIo { what: "creating", path: self.display(&acc), source: e.into() }))
                }
            }
        }
        self.sub(rel)
    }

    /// Writes `data` to `rel` (mode `mode`): a temp file created exclusively beside it,
    /// then renamed over it. A link at `rel` is replaced, never followed; the folders on
    /// the way must exist and are not links.
    ///
    /// Errors: [`FileError::Link`] on the way, [`FileError::Io`].
    pub fn write(&self, rel: &str, data: &[u8], mode: u32) -> Result<(), FileError> {
        plain(rel, &self.path)?;
        let (dir, name) = match rel.rsplit_once('/') {
            Some((d, n)) => (self.sub(d)?, n.to_string()),
            None => (
                Folder { fd: self.fd.try_clone().map_err(PathIo::on("opening", &self.path))?, path: self.path.clone() },
                rel.to_string(),
            ),
        };
        let target = self.display(rel);
        let mut n = 0u32;
        let (tmp, fd) = loop {
            let tmp = format!(".{name}.{}.{n}.tmp", std::process::id());
            match dir.open_at(&tmp, OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL, Mode::from_bits_truncate(mode)) {
                Ok(fd) => break (tmp, fd),
                Err(FileError::Io(PathIo { source, .. }))
                    if source.kind() == std::io::ErrorKind::AlreadyExists && n < 100 =>
                {
                    n += 1
                }
                Err(e) => return Err(e),
            }
        };
        let mut file = File::from(fd);
        let written = file.write_all(data).and_then(|()| file.flush());
        if let Err(e) = written {
            let _ =
                nix::unistd::unlinkat(Some(dir.fd.as_raw_fd()), tmp.as_str(), nix::unistd::UnlinkatFlags::NoRemoveDir);
            return Err(PathIo { what: "writing", path: target, source: e }.into());
        }
        drop(file);
        nix::fcntl::renameat(Some(dir.fd.as_raw_fd()), tmp.as_str(), Some(dir.fd.as_raw_fd()), name.as_str()).map_err(
            |e| {
                let _ = nix::unistd::unlinkat(
                    Some(dir.fd.as_raw_fd()),
                    tmp.as_str(),
                    nix::unistd::UnlinkatFlags::NoRemoveDir,
                );
                FileError::Io(PathIo { what: "writing", path: target.clone(), source: e.into() })
            },
        )
    }

    /// The names in this folder itself (not `.` and `..`), unsorted.
    fn names(&self) -> Result<Vec<String>, FileError> {
        let listing = nix::dir::Dir::from_fd(
            nix::fcntl::openat(
                Some(self.fd.as_raw_fd()),
                ".",
                OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
                Mode::empty(),
            )
            .map_err(|e| PathIo { what: "listing", path: self.path.clone(), source: e.into() })?,
        )
        .map_err(|e| PathIo { what: "listing", path: self.path.clone(), source: e.into() })?;
        let mut names = Vec::new();
        for e in listing {
            let e = e.map_err(|e| PathIo { what: "listing", path: self.path.clone(), source: e.into() })?;
            let name = e.file_name().to_string_lossy().into_owned();
            if name != "." && name != ".." {
                names.push(name);
            }
        }
        Ok(names)
    }

    /// The entries of this folder itself (not below), as names with their [`Kind`],
    /// sorted; links are listed (as [`Kind::Other`]), never followed.
    ///
    /// Errors: the folder can't be listed.
    pub fn list(&self) -> Result<Vec<(String, Kind)>, FileError> {
        let mut out = Vec::new();
        for name in self.names()? {
            let kind = self.kind(&name)?.unwrap_or(Kind::Other("gone"));
            out.push((name, kind));
        }
        out.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(out)
    }

    /// Every entry below the folder, as relative paths with their [`Kind`], sorted; links
    /// are listed (as [`Kind::Other`]), never followed.
    ///
    /// Errors: a folder can't be listed.
    pub fn walk(&self) -> Result<Vec<(String, Kind)>, FileError> {
        let mut out = Vec::new();
        let mut stack = vec![String::new()];
        while let Some(d) = stack.pop() {
            let sub = if d.is_empty() {
                Folder { fd: self.fd.try_clone().map_err(PathIo::on("listing", &self.path))?, path: self.path.clone() }
            } else {
                self.sub(&d)?
            };
            for name in sub.names()? {
                let rel = if d.is_empty() { name } else { format!("{d}/{name}") };
                let kind = self.kind(&rel)?.unwrap_or(Kind::Other("gone"));
                if kind == Kind::Folder {
                    stack.push(rel.clone());
                }
                out.push((rel, kind));
            }
        }
        out.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn folder() -> (tempfile::TempDir, Folder) {
        let t = tempfile::tempdir().unwrap();
        let f = Folder::open(t.path()).unwrap();
        (t, f)
    }

    #[test]
    fn reads_and_writes_plain_files() {
        let (t, f) = folder();
        f.create_dirs("a/b").unwrap();
        f.write("a/b/c.txt", b"hello", 0o644).unwrap();
        assert_eq!(f.read("a/b/c.txt", 5).unwrap(), b"hello");
        assert_eq!(std::fs::read(t.path().join("a/b/c.txt")).unwrap(), b"hello");
        let err = f.read("a/b/c.txt", 4).unwrap_err().to_string();
        assert!(err.ends_with("c.txt is larger than 4 bytes"), "{err}");
        let names: Vec<String> = f.walk().unwrap().into_iter().map(|(n, _)| n).collect();
        assert_eq!(names, ["a", "a/b", "a/b/c.txt"]);
    }

    #[test]
    fn refuses_links_pipes_and_paths_outside() {
        let (t, f) = folder();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret"), "s").unwrap();
        std::os::unix::fs::symlink(outside.path().join("secret"), t.path().join("link")).unwrap();
        std::os::unix::fs::symlink(outside.path(), t.path().join("dir")).unwrap();
        nix::unistd::mkfifo(&t.path().join("fifo"), Mode::from_bits_truncate(0o644)).unwrap();
        assert!(matches!(f.read("link", 100), Err(FileError::Link { .. })));
        assert!(matches!(f.read("dir/secret", 100), Err(FileError::Link { .. })));
        let pipe = f.read("fifo", 100).unwrap_err().to_string();
        assert!(pipe.ends_with("fifo is a named pipe, not a regular file"), "{pipe}");
        assert!(matches!(f.read("../x", 100), Err(FileError::Outside { .. })));
        assert!(matches!(f.read("/etc/passwd", 100), Err(FileError::Outside { .. })));
        // A hard link to a file outside is refused by name (only where tmp and the
        // outside folder share a file system can one be made at all).
        if std::fs::hard_link(outside.path().join("secret"), t.path().join("hard")).is_ok() {
            let hard = f.read("hard", 100).unwrap_err().to_string();
            assert!(hard.contains("hard has 2 hard links"), "{hard}");
            assert!(matches!(f.sha256("hard", 100), Err(FileError::HardLink { links: 2, .. })));
        }
        // Writing over a link replaces the link; the target is untouched.
        f.write("link", b"mine", 0o644).unwrap();
        assert_eq!(std::fs::read(outside.path().join("secret")).unwrap(), b"s");
        let w = f.write("dir/secret", b"x", 0o644);
        assert!(matches!(w, Err(FileError::Link { .. })), "{w:?}");
        assert_eq!(std::fs::read(outside.path().join("secret")).unwrap(), b"s");
    }
}
