//! The bundle file itself: a tar archive (gzip or Zstandard) with one top folder,
//! written with owner-less entries at a fixed time (`write_archive`), and read back
//! and checked against its `MANIFEST` ([`extract`], [`verify`]).

use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use super::bundle::{io, BundleError, BundleInfo, Entry, BUNDLE_FILE, BUNDLE_SCHEMA, MANIFEST_FILE, MTIME};
use crate::infra::images::rootfs::walk_files;
use crate::run::environment::file_sha256;
use crate::run::record::read_json;

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

/// Unpacks `bundle` into the empty folder `into` and checks every file against its
/// `MANIFEST` (and that nothing is there that the MANIFEST doesn't list).
///
/// Errors: [`BundleError::Format`] when it is not a bundle of this format, a file is
/// missing, extra or damaged; [`BundleError::Io`].
pub fn extract(bundle: &Path, into: &Path) -> Result<Extracted, BundleError> {
    let bad = |message: String| BundleError::Format { path: bundle.to_path_buf(), message };
    let mut file = std::fs::File::open(bundle).map_err(io("reading", bundle))?;
    let mut magic = [0u8; 4];
    file.read_exact(&mut magic).map_err(|_| bad("too short to be a bundle".into()))?;
    drop(file);
    let file = std::fs::File::open(bundle).map_err(io("reading", bundle))?;
    let reader: Box<dyn Read> = match magic {
        [0x1f, 0x8b, ..] => Box::new(flate2::read::GzDecoder::new(file)),
        [0x28, 0xb5, 0x2f, 0xfd] => Box::new(zstd::stream::read::Decoder::new(file).map_err(io("reading", bundle))?),
        _ => return Err(bad("not a .tar.gz or .tar.zst file".into())),
    };
    let mut archive = tar::Archive::new(reader);
    archive.set_preserve_permissions(true);
    archive.set_overwrite(false);
    archive.unpack(into).map_err(|e| bad(format!("cannot unpack: {e}")))?;
    let tops: Vec<PathBuf> = std::fs::read_dir(into)
        .map_err(io("reading", into))?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    let [top] = tops.as_slice() else {
        return Err(bad(format!("expected one top folder, found {}", tops.len())));
    };
    let info = verify(top).map_err(|e| match e {
        BundleError::Format { message, .. } => bad(message),
        e => e,
    })?;
    Ok(Extracted { top: top.clone(), info })
}

/// Checks an unpacked bundle's folder `top` against its `MANIFEST` (every listed file
/// there with its SHA-256, nothing unlisted) and returns its `BUNDLE.json`.
///
/// Errors: [`BundleError::Format`] naming the first missing, extra or damaged file.
pub fn verify(top: &Path) -> Result<BundleInfo, BundleError> {
    let bad = |message: String| BundleError::Format { path: top.to_path_buf(), message };
    let manifest_path = top.join(MANIFEST_FILE);
    let manifest = std::fs::read_to_string(&manifest_path).map_err(|_| bad("no MANIFEST".into()))?;
    let mut listed = BTreeSet::new();
    for line in manifest.lines().filter(|l| !l.trim().is_empty()) {
        let (sum, path) = line.split_once("  ").ok_or_else(|| bad(format!("MANIFEST line {line:?}")))?;
        if path.split('/').any(|c| c == ".." || c.is_empty()) {
            return Err(bad(format!("MANIFEST names {path:?}")));
        }
        let f = top.join(path);
        let got = file_sha256(&f).map_err(|_| bad(format!("{path} is listed in MANIFEST but missing")))?;
        if got != sum {
            return Err(bad(format!("{path}: SHA-256 {got}, MANIFEST says {sum}: the bundle is damaged")));
        }
        listed.insert(f);
    }
    for f in walk_files(top)? {
        if f != manifest_path && !listed.contains(&f) {
            return Err(bad(format!("{} is not listed in MANIFEST", f.strip_prefix(top).unwrap_or(&f).display())));
        }
    }
    let info: BundleInfo = read_json(&top.join(BUNDLE_FILE)).map_err(|e| bad(e.to_string()))?;
    if info.schema != BUNDLE_SCHEMA {
        return Err(bad(format!("bundle schema {} (this vmrepro reads {BUNDLE_SCHEMA})", info.schema)));
    }
    Ok(info)
}

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
