//! The bundle file itself: a tar archive (gzip or Zstandard) with one top folder,
//! written with owner-less entries at a fixed time (`write_archive`), and read back
//! and checked against its `MANIFEST` ([`extract`], [`verify`]).

use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use super::bundle::{
    io, BundleError, BundleInfo, Entry, BUNDLE_FILE, BUNDLE_SCHEMA, MANIFEST_FILE, MANIFEST_SIZE, MTIME,
};
use crate::path_io::{check_relative, FileError, Folder, Kind};
use crate::run::record::{read_json_in, RunDirError};

/// How a bundle is compressed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    /// gzip (`.tar.gz`, `.tgz`).
    Gzip,
    /// Zstandard (`.tar.zst`).
    Zstd,
}

impl Compression {
    /// The compression an output name asks for.
    ///
    /// Errors: another extension.
    pub fn of(out: &Path) -> Result<Compression, BundleError> {
        let name = out.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        if name.ends_with(".tar.gz") || name.ends_with(".tgz") {
            Ok(Compression::Gzip)
        } else if name.ends_with(".tar.zst") {
            Ok(Compression::Zstd)
        } else {
            Err(BundleError::Format {
                path: out.to_path_buf(),
                message: "a bundle's name ends in .tar.gz, .tgz or .tar.zst".into(),
            })
        }
    }
}

pub(super) fn write_archive(
    out: &Path,
    top: &str,
    entries: &BTreeMap<String, Entry>,
    compression: Compression,
) -> Result<(), BundleError> {
    let tmp = out.with_extension("partial");
    let file = std::fs::File::create(&tmp).map_err(io("creating", &tmp))?;
    let writer: Box<dyn Write> = match compression {
        Compression::Gzip => Box::new(flate2::write::GzEncoder::new(file, flate2::Compression::default())),
        Compression::Zstd => {
            Box::new(zstd::stream::write::Encoder::new(file, 10).map_err(io("compressing", &tmp))?.auto_finish())
        }
    };
    let mut tar = tar::Builder::new(writer);
    let mut dirs = BTreeSet::new();
    for (path, e) in entries {
        // Folders first, so an extracting tool creates them with sane modes.
        let mut acc = String::new();
        for part in Path::new(path).parent().into_iter().flat_map(|p| p.components()) {
            acc.push_str(&part.as_os_str().to_string_lossy());
            acc.push('/');
            if dirs.insert(acc.clone()) {
                let mut h = tar::Header::new_gnu();
                h.set_entry_type(tar::EntryType::Directory);
                h.set_mode(0o755);
                h.set_mtime(MTIME);
                h.set_size(0);
                tar.append_data(&mut h, format!("{top}/{acc}"), std::io::empty()).map_err(io("writing", &tmp))?;
            }
        }
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(tar::EntryType::Regular);
        h.set_mode(e.mode);
        h.set_mtime(MTIME);
        h.set_size(e.data.len() as u64);
        tar.append_data(&mut h, format!("{top}/{path}"), &e.data[..]).map_err(io("writing", &tmp))?;
    }
    let mut w = tar.into_inner().map_err(io("writing", &tmp))?;
    w.flush().map_err(io("writing", &tmp))?;
    drop(w);
    std::fs::rename(&tmp, out).map_err(io("writing", out))
}

/// A bundle read back: its folder and description.
#[derive(Debug)]
pub struct Extracted {
    /// The bundle's top folder.
    pub top: PathBuf,
    /// `BUNDLE.json`.
    pub info: BundleInfo,
}

/// What unpacking one bundle may take. A bundle is untrusted: a small compressed file
/// can expand to gigabytes, so [`extract_with`] stops at the first limit passed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    /// All files together, bytes (default [`Budget::DEFAULT_TOTAL_BYTES`]).
    pub total_bytes: u64,
    /// One file, bytes (default [`Budget::DEFAULT_FILE_BYTES`]).
    pub file_bytes: u64,
    /// Entries, files and folders together (default [`Budget::DEFAULT_ENTRIES`]).
    pub entries: u64,
    /// Components of one entry's path, the top folder included (default
    /// [`Budget::DEFAULT_DEPTH`]).
    pub depth: usize,
    /// One entry's whole path, bytes (default [`Budget::DEFAULT_PATH_BYTES`]).
    pub path_bytes: usize,
    /// One component of an entry's path, bytes (default
    /// [`Budget::DEFAULT_COMPONENT_BYTES`], Linux's `NAME_MAX`).
    pub component_bytes: usize,
}

impl Budget {
    /// 4 GiB: a bundle `--with-images` carries kernel packages of some 100 MB each.
    pub const DEFAULT_TOTAL_BYTES: u64 = 4 << 30;
    /// 1 GiB.
    pub const DEFAULT_FILE_BYTES: u64 = 1 << 30;
    /// 20 000 entries.
    pub const DEFAULT_ENTRIES: u64 = 20_000;
    /// 32 components: the deepest path `vmrepro bundle` writes has 7
    /// (`<top>/project/images/rootfs/<name>/overlay/sbin/…`) plus the overlay's own.
    pub const DEFAULT_DEPTH: usize = 32;
    /// 1024 bytes per path.
    pub const DEFAULT_PATH_BYTES: usize = 1024;
    /// 255 bytes per component (`NAME_MAX`).
    pub const DEFAULT_COMPONENT_BYTES: usize = 255;
}

impl Default for Budget {
    fn default() -> Budget {
        Budget {
            total_bytes: Budget::DEFAULT_TOTAL_BYTES,
            file_bytes: Budget::DEFAULT_FILE_BYTES,
            entries: Budget::DEFAULT_ENTRIES,
            depth: Budget::DEFAULT_DEPTH,
            path_bytes: Budget::DEFAULT_PATH_BYTES,
            component_bytes: Budget::DEFAULT_COMPONENT_BYTES,
        }
    }
}

/// [`extract_with`] with the default [`Budget`].
///
/// Errors: as [`extract_with`].
///
/// Used by the integration tests (the commands pass their budget).
#[cfg_attr(vmrepro_dead_code, allow(dead_code))]
pub fn extract(bundle: &Path, into: &Path) -> Result<Extracted, BundleError> {
    extract_with(bundle, into, &Budget::default())
}

/// What a tar entry type is, in words.
fn entry_kind(t: tar::EntryType) -> String {
    match t {
        tar::EntryType::Symlink => "a symbolic link".into(),
        tar::EntryType::Link => "a hard link".into(),
        tar::EntryType::Char => "a character device".into(),
        tar::EntryType::Block => "a block device".into(),
        tar::EntryType::Fifo => "a named pipe".into(),
        tar::EntryType::GNUSparse => "a sparse file".into(),
        other => format!("an entry of type {:?}", other.as_byte() as char),
    }
}

/// An entry's path for a message: at most 120 bytes of it (a hostile path can be
/// kilobytes long), quoted.
fn shown(raw: &str) -> String {
    if raw.len() <= 120 {
        return format!("{raw:?}");
    }
    let mut end = 120;
    while !raw.is_char_boundary(end) {
        end -= 1;
    }
    format!("{:?}… ({} bytes)", &raw[..end], raw.len())
}

/// Checks an entry's path against the budget's depth and length limits.
fn check_shape(raw: &str, name: &str, budget: &Budget) -> Result<(), String> {
    if name.len() > budget.path_bytes {
        return Err(format!("entry {} has a path longer than {} bytes", shown(raw), budget.path_bytes));
    }
    let depth = name.split('/').count();
    if depth > budget.depth {
        return Err(format!(
            "entry {} is nested {depth} folders deep; a bundle's paths have at most {} components",
            shown(raw),
            budget.depth
        ));
    }
    if let Some(c) = name.split('/').find(|c| c.len() > budget.component_bytes) {
        return Err(format!(
            "entry {} has a component of {} bytes; at most {} bytes each",
            shown(raw),
            c.len(),
            budget.component_bytes
        ));
    }
    Ok(())
}

/// The cap on one PAX extended header (`x` or `g`), bytes: a path and a few times
/// take well under 4 KiB.
const MAX_PAX_BYTES: u64 = 64 << 10;

/// The GNU long-name (`L`) or PAX (`x`) path read for the next entry, so that every
/// check on a path applies to the name the entry really has.
#[derive(Default)]
struct LongNames {
    path: Option<Vec<u8>>,
}

impl LongNames {
    /// If `entry` is a long-name or PAX header, reads it (at most the budget's path
    /// length, or [`MAX_PAX_BYTES`]) and returns true. Refused: a long link name or
    /// a PAX `linkpath` (a bundle holds no links), a PAX `size` (tar readers would
    /// disagree on where the next entry starts), sparse-file records, two names for
    /// one entry, a header larger than its cap, a malformed PAX record.
    fn take_header<R: Read>(
        &mut self,
        entry: &mut tar::Entry<'_, R>,
        kind: tar::EntryType,
        last: &str,
        budget: &Budget,
    ) -> Result<bool, String> {
        let at = || format!("the header after entry {last:?}");
        let size = entry.header().entry_size().map_err(|e| format!("{}: {e}", at()))?;
        let mut read = |cap: u64, what: &str| -> Result<Vec<u8>, String> {
            if size > cap {
                return Err(format!("{} is {what} of {size} bytes; at most {cap} bytes", at()));
            }
            let mut data = Vec::with_capacity(size as usize);
            (&mut *entry).take(size).read_to_end(&mut data).map_err(|e| format!("{}: {e}", at()))?;
            if (data.len() as u64) < size {
                return Err(format!("the archive is truncated inside {}", at()));
            }
            Ok(data)
        };
        let twice = || format!("{} gives a second long name for one entry", at());
        if kind.is_gnu_longlink() {
            return Err(format!("{} is a GNU long link name; a bundle holds no links", at()));
        }
        if kind.is_gnu_longname() {
            // The name and its NUL: a path at most `path_bytes` long.
            let mut name = read(budget.path_bytes as u64 + 1, "a GNU long name (with its NUL)")?;
            while name.last() == Some(&0) {
                name.pop();
            }
            if self.path.replace(name).is_some() {
                return Err(twice());
            }
            return Ok(true);
        }
        let global = kind.is_pax_global_extensions();
        if !global && !kind.is_pax_local_extensions() {
            return Ok(false);
        }
        let data = read(MAX_PAX_BYTES, "a PAX header")?;
        for ext in tar::PaxExtensions::new(&data) {
            let ext = ext.map_err(|e| format!("{}: a malformed PAX record: {e}", at()))?;
            let key = String::from_utf8_lossy(ext.key_bytes()).into_owned();
            match key.as_str() {
                "path" if !global => self.path.replace(ext.value_bytes().to_vec()).map_or(Ok(()), |_| Err(twice()))?,
                "path" | "linkpath" | "size" => {
                    return Err(format!(
                        "{} sets PAX `{key}`{}; a bundle's entries have their own paths and sizes, and no links",
                        at(),
                        if global { " for every entry" } else { "" }
                    ))
                }
                k if k.starts_with("GNU.sparse") => {
                    return Err(format!(
                        "{} describes a sparse file (`{key}`); a bundle holds only regular files",
                        at()
                    ))
                }
                _ => {}
            }
        }
        Ok(true)
    }
}

/// Set once by [`stop_unpacking`]: every [`extract_with`] in this process stops before
/// its next entry.
static UNPACKING_STOPPED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Stops every unpacking in this process before its next entry, for good: called when
/// the process is about to exit on a signal, so that nothing more is written into a
/// temp folder that is being removed.
pub fn stop_unpacking() {
    UNPACKING_STOPPED.store(true, std::sync::atomic::Ordering::SeqCst);
}

/// Unpacks `bundle` into the empty folder `into` within `budget` and checks every
/// file against its `MANIFEST` ([`verify`]). Only regular files and folders under one
/// top folder are unpacked; every other entry is refused by name, never dropped: an
/// absolute path, a `..` component, a `~`-prefixed component, a control character,
/// a file whose name ends in `/`, a path deeper or
/// longer than the budget allows, a symbolic or hard link, a device or pipe, a
/// second copy of a path, an entry outside the top folder. Every file is written
/// through [`Folder`] (no link followed).
///
/// Errors: [`BundleError::Format`] naming the entry or file and what is wrong (also a
/// budget passed, unpacking stopped by [`stop_unpacking`], a truncated or damaged archive, a missing, extra or damaged file);
/// [`BundleError::Io`].
pub fn extract_with(bundle: &Path, into: &Path, budget: &Budget) -> Result<Extracted, BundleError> {
    let bad = |message: String| BundleError::Format { path: bundle.to_path_buf(), message };
    let file = {
        use std::os::unix::fs::OpenOptionsExt;
        std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(bundle)
            .map_err(io("reading", bundle))?
    };
    let meta = file.metadata().map_err(io("reading", bundle))?;
    if !meta.is_file() {
        return Err(bad(format!("{}, not a regular file", crate::schema::text::file_kind(&meta))));
    }
    let mut file = std::io::BufReader::new(file);
    let mut magic = [0u8; 4];
    file.read_exact(&mut magic).map_err(|_| bad("too short to be a bundle".into()))?;
    let file = std::io::Read::chain(std::io::Cursor::new(magic), file);
    let reader: Box<dyn Read> = match magic {
        [0x1f, 0x8b, ..] => Box::new(flate2::read::GzDecoder::new(file)),
        [0x28, 0xb5, 0x2f, 0xfd] => Box::new(zstd::stream::read::Decoder::new(file).map_err(io("reading", bundle))?),
        _ => return Err(bad("not a .tar.gz or .tar.zst file".into())),
    };
    let root = Folder::open(into).map_err(|e| bad(e.to_string()))?;
    let mut archive = tar::Archive::new(reader);
    // Raw entries: the GNU long-name and PAX headers are read here, within the
    // budget, and applied before any check (the tar crate would read them whole,
    // however large they say they are).
    let entries = archive.entries().map_err(|e| bad(format!("not a tar archive: {e}")))?.raw(true);
    let mut top: Option<String> = None;
    let mut seen = BTreeSet::new();
    let (mut count, mut total) = (0u64, 0u64);
    let mut last = String::from("(the first entry)");
    let mut long = LongNames::default();
    for entry in entries {
        if UNPACKING_STOPPED.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(bad("unpacking stopped: the process is being interrupted".into()));
        }
        let mut entry =
            entry.map_err(|e| bad(format!("the archive is truncated or damaged after entry {last:?}: {e}")))?;
        let kind = entry.header().entry_type();
        count += 1;
        if count > budget.entries {
            return Err(bad(format!(
                "more than {} entries (raise with --max-entries if the bundle is trusted)",
                budget.entries
            )));
        }
        if long.take_header(&mut entry, kind, &last, budget).map_err(bad)? {
            continue;
        }
        let raw = match long.path.take() {
            Some(p) => String::from_utf8_lossy(&p).into_owned(),
            None => String::from_utf8_lossy(&entry.path_bytes()).into_owned(),
        };
        let name = raw.trim_end_matches('/').to_string();
        if raw.starts_with('/') {
            return Err(bad(format!("entry {} has an absolute path; a bundle holds relative paths only", shown(&raw))));
        }
        if name.split('/').any(|c| c == "..") {
            return Err(bad(format!("entry {} has a `..` component; a bundle's paths stay inside it", shown(&raw))));
        }
        if name.is_empty() || name.split('/').any(|c| c.is_empty() || c == ".") {
            return Err(bad(format!("entry {} is not a plain path", shown(&raw))));
        }
        if name.chars().any(char::is_control) {
            return Err(bad(format!(
                "entry {} has a control character (a newline, tab, escape…) in its path; a bundle's paths are plain text",
                shown(&raw)
            )));
        }
        if name.split('/').any(|c| c.starts_with('~')) {
            return Err(bad(format!(
                "entry {} has a component starting with `~`; a bundle's paths are never home folders",
                shown(&raw)
            )));
        }
        check_shape(&raw, &name, budget).map_err(bad)?;
        let is_dir = match kind {
            tar::EntryType::Regular | tar::EntryType::Continuous => false,
            tar::EntryType::Directory => true,
            other => {
                let to = entry.link_name_bytes().map(|l| format!(" (to {:?})", String::from_utf8_lossy(&l)));
                return Err(bad(format!(
                    "entry {raw:?} is {}{}; a bundle holds only regular files and folders",
                    entry_kind(other),
                    to.unwrap_or_default()
                )));
            }
        };
        if raw.ends_with('/') && !is_dir {
            return Err(bad(format!("entry {} is a file named as a folder (ending in `/`)", shown(&raw))));
        }
        let first = name.split('/').next().unwrap_or_default().to_string();
        match &top {
            None => top = Some(first),
            Some(t) if *t != first => {
                return Err(bad(format!("entry {raw:?} is outside the top folder {t:?}; a bundle has one top folder")))
            }
            Some(_) => {}
        }
        if !name.contains('/') && !is_dir {
            return Err(bad(format!("entry {raw:?} is a file at the top; a bundle has one top folder")));
        }
        if !seen.insert(name.clone()) {
            return Err(bad(format!("entry {raw:?} appears twice")));
        }
        last = name.clone();
        if is_dir {
            if entry.header().entry_size().unwrap_or(0) != 0 {
                return Err(bad(format!("entry {} is a folder with data; a folder entry has none", shown(&raw))));
            }
            root.create_dirs(&name).map_err(|e| bad(e.to_string()))?;
            continue;
        }
        let size = entry.header().size().map_err(|e| bad(format!("entry {raw:?}: {e}")))?;
        if size > budget.file_bytes {
            return Err(bad(format!(
                "entry {raw:?} is larger than {} bytes (raise with --max-file-bytes if the bundle is trusted)",
                budget.file_bytes
            )));
        }
        total += size;
        if total > budget.total_bytes {
            return Err(bad(format!(
                "unpacks to more than {} bytes (at entry {raw:?}; raise with --max-unpacked-bytes if the bundle is trusted)",
                budget.total_bytes
            )));
        }
        let mut data = Vec::with_capacity(size.min(1 << 20) as usize);
        (&mut entry).take(size).read_to_end(&mut data).map_err(|e| {
            bad(format!("the archive is truncated or damaged inside entry {raw:?} ({size} bytes announced): {e}"))
        })?;
        if (data.len() as u64) < size {
            return Err(bad(format!("the archive is truncated inside entry {raw:?}: {} of {size} bytes", data.len())));
        }
        let mode = if entry.header().mode().unwrap_or(0o644) & 0o111 != 0 { 0o755 } else { 0o644 };
        if let Some((parent, _)) = name.rsplit_once('/') {
            root.create_dirs(parent).map_err(|e| bad(e.to_string()))?;
        }
        root.write(&name, &data, mode).map_err(|e| bad(e.to_string()))?;
    }
    if long.path.is_some() {
        return Err(bad(format!("the archive ends in a long-name header after entry {last:?}, with no entry for it")));
    }
    let Some(top) = top else { return Err(bad("the archive is empty".into())) };
    let info = verify(&into.join(&top)).map_err(|e| match e {
        BundleError::Format { message, .. } => bad(message),
        e => e,
    })?;
    Ok(Extracted { top: into.join(&top), info })
}

/// Checks an unpacked bundle's folder `top` against its `MANIFEST`: every listed file
/// is there with its SHA-256, and nothing else is (no unlisted file, no link, pipe or
/// device, followed or not); every path in `BUNDLE.json` is a plain relative path.
/// Returns the `BUNDLE.json`.
///
/// Errors: [`BundleError::Format`] naming the first missing, extra or damaged file.
pub fn verify(top: &Path) -> Result<BundleInfo, BundleError> {
    let bad = |message: String| BundleError::Format { path: top.to_path_buf(), message };
    let folder = Folder::open(top).map_err(|e| bad(e.to_string()))?;
    let manifest = match folder.read(MANIFEST_FILE, MAX_MANIFEST_BYTES) {
        Ok(m) => String::from_utf8_lossy(&m).into_owned(),
        Err(FileError::Io(_)) => return Err(bad("no MANIFEST".into())),
        Err(e) => return Err(bad(format!("MANIFEST: {e}"))),
    };
    let mut listed = BTreeMap::new();
    // `# bytes SIZE PATH` lines (packet captures): checked once every file is listed.
    let mut sizes: BTreeMap<String, (usize, u64)> = BTreeMap::new();
    for (n, line) in manifest.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        if line.starts_with('#') {
            let (size, path) = line
                .strip_prefix(MANIFEST_SIZE)
                .and_then(|r| r.strip_prefix(' '))
                .and_then(|r| r.split_once(' '))
                .and_then(|(size, path)| Some((size.parse::<u64>().ok()?, path)))
                .ok_or_else(|| {
                    bad(format!("MANIFEST line {}: {line:?} is not \"{MANIFEST_SIZE} SIZE PATH\"", n + 1))
                })?;
            if let Some((first, _)) = sizes.insert(path.to_string(), (n + 1, size)) {
                return Err(bad(format!(
                    "MANIFEST line {} gives the size of {path} again (first on line {first})",
                    n + 1
                )));
            }
            continue;
        }
        let (sum, path) = line
            .split_once("  ")
            .ok_or_else(|| bad(format!("MANIFEST line {}: {line:?} is not \"SHA256  PATH\"", n + 1)))?;
        check_relative(path, top)
            .map_err(|_| bad(format!("MANIFEST line {} names {path:?}, not a plain relative path", n + 1)))?;
        if let Some(first) = listed.get(path) {
            return Err(bad(format!("MANIFEST line {} lists {path} again (first on line {first})", n + 1)));
        }
        let got = match folder.sha256(path, u64::MAX) {
            Ok(g) => g,
            Err(FileError::Io(_)) => return Err(bad(format!("{path} is listed in MANIFEST but missing"))),
            Err(e) => return Err(bad(format!("MANIFEST line {}: {e}", n + 1))),
        };
        if got != sum {
            return Err(bad(format!("{path}: SHA-256 {got}, MANIFEST says {sum}: the bundle is damaged")));
        }
        listed.insert(path.to_string(), n + 1);
    }
    for (path, (line, size)) in &sizes {
        if !listed.contains_key(path) {
            return Err(bad(format!("MANIFEST line {line} gives the size of {path}, which it does not list")));
        }
        // (Its SHA-256 was read above: it is a regular file.)
        if let Ok(Some(Kind::File(got))) = folder.kind(path) {
            if got != *size {
                return Err(bad(format!(
                    "{path}: {got} bytes, MANIFEST line {line} says {size}: the bundle is damaged"
                )));
            }
        }
    }
    for (rel, kind) in folder.walk().map_err(|e| bad(e.to_string()))? {
        match kind {
            Kind::Folder => {}
            Kind::File(_) if rel == MANIFEST_FILE || listed.contains_key(&rel) => {}
            Kind::File(_) => return Err(bad(format!("{rel} is not listed in MANIFEST"))),
            Kind::Other(what) => {
                return Err(bad(format!("{rel} is {what}; a bundle holds only regular files and folders")))
            }
        }
    }
    // Named relative to the bundle (the temp folder it is unpacked in says nothing);
    // an unknown key is an error naming it (`deny_unknown_fields`).
    let info: BundleInfo = read_json_in(&folder, BUNDLE_FILE).map_err(|e| match e {
        RunDirError::Json { message, .. } => bad(format!("{BUNDLE_FILE}: {message}")),
        e => bad(e.to_string()),
    })?;
    if info.schema != BUNDLE_SCHEMA {
        return Err(bad(format!("bundle schema {} (this vmrepro reads {BUNDLE_SCHEMA})", info.schema)));
    }
    let paths = [("suite_file", &info.suite_file), ("images_dir", &info.images_dir), ("run", &info.run)]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .chain(info.packages.iter().enumerate().map(|(i, p)| (format!("packages[{i}].path"), p.path.clone())))
        .chain(info.kernels.iter().enumerate().map(|(i, k)| (format!("kernels[{i}].path"), k.path.clone())));
    for (key, value) in paths {
        if check_relative(&value, top).is_err() {
            return Err(bad(format!(
                "BUNDLE.json: {key} is {value:?}; every path in a bundle is relative and stays inside it"
            )));
        }
    }
    Ok(info)
}

// A packet capture is read up to the same size everywhere: by `bundle`, by `vmrepro
// wire` and `analyse`, as the largest `network.capture_max_bytes`, and as one file of a
// bundle `replay` and `compare` unpack by default.
const _: () = assert!(Budget::DEFAULT_FILE_BYTES == crate::wire::pcap::MAX_CAPTURE_BYTES);
const _: () = assert!(*crate::suite::validate::limits::CAPTURE_MAX_BYTES.end() == crate::wire::pcap::MAX_CAPTURE_BYTES);

/// The cap on a bundle's `MANIFEST`, bytes.
pub const MAX_MANIFEST_BYTES: u64 = 16 << 20;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compression_from_name() {
        assert_eq!(Compression::of(Path::new("a.tar.gz")).unwrap(), Compression::Gzip);
        assert_eq!(Compression::of(Path::new("a.tar.zst")).unwrap(), Compression::Zstd);
        assert!(Compression::of(Path::new("a.zip")).is_err());
    }
}
