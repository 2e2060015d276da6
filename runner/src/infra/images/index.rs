//! The Debian archive's package indexes and version order, for re-pinning kernels.
//!
//! An index is `<archive>/dists/<suite>/main/binary-amd64/Packages.xz` (deb822
//! stanzas: `Package:`, `Version:`, `Filename:`, `Size:`, `SHA256:`; format in Debian
//! Policy §5 and the Debian repository format). The archive of a suite is the one
//! [`super::debian::archive_url_for_suite`] names: the main archive, or the security
//! archive for `<codename>-security`. `file:` URLs (a local mirror, or a test's copy)
//! are read from disk; an uncompressed `Packages` is used when there is no `.xz`.

use std::cmp::Ordering;
use std::io::Read;
use std::path::Path;

use crate::path_io::{FileError, Folder, PathIo};

use super::pin::{pin_problem, PinField};

/// The cap on a compressed index (`Packages.xz`) as fetched, bytes (64 MiB; bookworm's
/// `main/binary-amd64/Packages.xz` is about 9 MiB).
pub const MAX_COMPRESSED_BYTES: u64 = 64 << 20;
/// The cap on an index's text (an uncompressed `Packages`, or what a `Packages.xz`
/// decompresses to), bytes (256 MiB; bookworm's is about 45 MiB).
pub const MAX_INDEX_BYTES: u64 = 256 << 20;
/// The memory the xz decoder may use, bytes (128 MiB; decoding `xz -9` output needs
/// 65 MiB, `xz -6` 9 MiB). An xz file declares its dictionary size, so without a cap
/// a few bytes could ask for gigabytes.
pub const XZ_MEMORY_LIMIT: u64 = 128 << 20;

/// One package of an index (only the fields a pin needs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexEntry {
    /// The suite whose index lists it, e.g. `bookworm-security`.
    pub suite: String,
    /// Binary package name.
    pub package: String,
    /// Version.
    pub version: String,
    /// Path in the archive (`pool/…/*.deb`).
    pub filename: String,
    /// Size in bytes.
    pub size: u64,
    /// SHA-256, lowercase hex.
    pub sha256: String,
}

/// Why an index could not be used.
#[derive(Debug, thiserror::Error)]
pub enum IndexError {
    /// It could not be fetched: not found, an HTTP or network error, a local read
    /// failure (an infrastructure failure; exit code 3).
    #[error("{0}")]
    Fetch(String),
    /// It is bad input: too large, not xz, not UTF-8, not deb822, or an entry that is
    /// not a valid pin (exit code 2). `index` is the URL of the file read; `line` the
    /// 1-based line of the text, where there is one.
    #[error("{index}{}: {message}", line.map(|l| format!(", line {l}")).unwrap_or_default())]
    Bad {
        /// The URL of the index file (`…/Packages.xz`).
        index: String,
        /// The line of its text.
        line: Option<usize>,
        /// What is wrong.
        message: String,
    },
}

/// An index as read: the URL of the file and its text.
#[derive(Debug, Clone)]
pub struct IndexText {
    /// The URL of the file read (`…/dists/<suite>/main/binary-amd64/Packages.xz`).
    pub url: String,
    /// Its text (decompressed).
    pub text: String,
}

/// One field of a stanza: name, first-line value (trimmed), line, and whether
/// continuation lines follow.
struct Field<'a> {
    name: &'a str,
    value: &'a str,
    line: usize,
    continued: bool,
}

/// The fields a kept stanza must have, besides `Package`.
const NEEDED: [PinField; 4] = [PinField::Version, PinField::Filename, PinField::Size, PinField::Sha256];

/// Parses the text of the `Packages` index `index` (its URL, for messages) of `suite`:
/// deb822 stanzas (Debian Policy §5.1: `Name: value` fields, continuation lines
/// starting with a space or tab, stanzas separated by blank lines), keeping the entries
/// whose package name `keep` accepts.
///
/// Errors: [`IndexError::Bad`] with the line, for the first of: a line that is neither
/// a field nor a continuation, a field name outside the deb822 grammar, a field twice
/// in a stanza, a stanza without `Package`; and, in a kept stanza, a missing or
/// multi-line `Version`, `Filename`, `Size` or `SHA256`, or a value that is not a valid
/// pin ([`pin_problem`]; `SHA256` may be upper-case hex). An index is untrusted input
/// and what it says goes into `images/kernels.yaml`, so nothing of it is used unless
/// all of it passes.
pub fn parse_packages(
    text: &str,
    index: &str,
    suite: &str,
    keep: &dyn Fn(&str) -> bool,
) -> Result<Vec<IndexEntry>, IndexError> {
    let bad = |line: usize, message: String| IndexError::Bad { index: index.to_string(), line: Some(line), message };
    let mut out = Vec::new();
    let mut fields: Vec<Field> = Vec::new();
    // The text ends with a blank line, so that the last stanza is taken too.
    for (i, line) in text.split('\n').chain(std::iter::once("")).enumerate() {
        let n = i + 1;
        if line.trim().is_empty() {
            if !fields.is_empty() {
                if let Some(e) = stanza(&fields, suite, keep).map_err(|(l, m)| bad(l, m))? {
                    out.push(e);
                }
                fields.clear();
            }
            continue;
        }
        if line.starts_with([' ', '\t']) {
            match fields.last_mut() {
                Some(f) => f.continued = true,
                None => return Err(bad(n, "a continuation line (starting with a space) before any field".into())),
            }
            continue;
        }
        let Some((name, value)) = line.split_once(':') else {
            return Err(bad(n, format!("{} is neither a field (Name: value) nor a continuation line", shown(line))));
        };
        if !is_field_name(name) {
            return Err(bad(n, format!("{} is not a deb822 field name", shown(name))));
        }
        if let Some(first) = fields.iter().find(|f| f.name.eq_ignore_ascii_case(name)) {
            return Err(bad(n, format!("{name} appears twice in one stanza (first at line {})", first.line)));
        }
        fields.push(Field { name, value: value.trim(), line: n, continued: false });
    }
    Ok(out)
}

/// `s` as an error shows it (quoted, controls escaped, cut at 80 characters).
fn shown(s: &str) -> String {
    crate::schema::text::shown(s, 80)
}

/// A deb822 field name: US-ASCII without controls, space and `:`, not starting with
/// `#` or `-` (Debian Policy §5.1).
fn is_field_name(name: &str) -> bool {
    !name.is_empty() && !name.starts_with(['#', '-']) && name.bytes().all(|b| (b'!'..=b'~').contains(&b) && b != b':')
}

/// The entry of one stanza, `None` when `keep` doesn't want it; or the line and the
/// message of what is wrong.
fn stanza(fields: &[Field], suite: &str, keep: &dyn Fn(&str) -> bool) -> Result<Option<IndexEntry>, (usize, String)> {
    let get = |name: &str| fields.iter().find(|f| f.name.eq_ignore_ascii_case(name));
    let start = fields[0].line;
    let Some(package) = get("Package") else {
        return Err((start, "this stanza has no Package field".into()));
    };
    if !keep(package.value) {
        return Ok(None);
    }
    let of = format!("the stanza of {} (line {start})", shown(package.value));
    let mut values = Vec::new();
    for f in std::iter::once(PinField::Package).chain(NEEDED) {
        let name = f.index_field();
        let Some(field) = get(name) else {
            return Err((start, format!("{of} has no {name} field")));
        };
        if field.continued {
            return Err((field.line, format!("{name} of {of} spans more than one line")));
        }
        values.push(field);
    }
    let (version, filename, size, sha256) = (values[1].value, values[2].value, values[3], values[4].value);
    let line_of = |f: PinField| match f {
        PinField::Version => values[1].line,
        PinField::Filename => values[2].line,
        PinField::Size => values[3].line,
        PinField::Sha256 => values[4].line,
        PinField::Package | PinField::Suite => values[0].line,
    };
    let bytes = match size.value.parse::<u64>() {
        Ok(b) if size.value.bytes().all(|c| c.is_ascii_digit()) => b,
        _ => return Err((size.line, format!("Size of {of}: {} is not a number of bytes", shown(size.value)))),
    };
    let sha256 = sha256.to_ascii_lowercase();
    if let Some((field, why)) = pin_problem(package.value, suite, version, filename, bytes, &sha256) {
        return Err((line_of(field), format!("{} of {of}: {why}", field.index_field())));
    }
    Ok(Some(IndexEntry {
        suite: suite.to_string(),
        package: package.value.to_string(),
        version: version.to_string(),
        filename: filename.to_string(),
        size: bytes,
        sha256,
    }))
}

/// Reads the `main/binary-amd64` index of `suite` from `archive` (an `http(s)://` or
/// `file:` URL): `Packages.xz`, else `Packages`. Every read is bounded: at most
/// [`MAX_COMPRESSED_BYTES`] fetched for the `.xz`, at most [`MAX_INDEX_BYTES`] of text
/// (fetched, or decompressed with at most [`XZ_MEMORY_LIMIT`] of decoder memory). A
/// `file:` archive (its folder named by the user) is read through a [`Folder`]: no
/// link below it is followed, only a regular file is read (a named pipe or device is
/// refused before it is opened).
///
/// Errors: [`IndexError::Fetch`] (not found, HTTP or network error), naming the URL;
/// [`IndexError::Bad`] when the file is too large, a link or not a regular file, not
/// xz, or not UTF-8.
pub fn fetch_packages(archive: &str, suite: &str) -> Result<IndexText, IndexError> {
    let rel = format!("dists/{suite}/main/binary-amd64/Packages");
    let base = format!("{}/{rel}", archive.trim_end_matches('/'));
    let xz_url = format!("{base}.xz");
    match get(archive, &format!("{rel}.xz"), MAX_COMPRESSED_BYTES) {
        Ok(bytes) => {
            let text = decompress_xz(&bytes, MAX_INDEX_BYTES, XZ_MEMORY_LIMIT).map_err(|message| IndexError::Bad {
                index: xz_url.clone(),
                line: None,
                message,
            })?;
            Ok(IndexText { text: utf8(text, &xz_url)?, url: xz_url })
        }
        Err(Get::NotFound) => match get(archive, &rel, MAX_INDEX_BYTES) {
            Ok(bytes) => Ok(IndexText { text: utf8(bytes, &base)?, url: base }),
            Err(Get::NotFound) => {
                Err(IndexError::Fetch(format!("{xz_url}: not found (nor {base}): is {suite} a suite of this archive?")))
            }
            Err(Get::Failed(e)) => Err(e),
        },
        Err(Get::Failed(e)) => Err(e),
    }
}

/// The text of `bytes`, which must be UTF-8 (as Debian's indexes are).
fn utf8(bytes: Vec<u8>, url: &str) -> Result<String, IndexError> {
    String::from_utf8(bytes).map_err(|e| {
        let at = e.utf8_error().valid_up_to();
        let line = e.as_bytes()[..at].iter().filter(|&&b| b == b'\n').count() + 1;
        IndexError::Bad { index: url.to_string(), line: Some(line), message: "the text is not UTF-8".into() }
    })
}

/// Decompresses the xz data `bytes` to at most `limit` bytes, the decoder using at
/// most `memory` bytes.
///
/// Errors: in words: over `limit`, over `memory`, or not xz.
pub fn decompress_xz(bytes: &[u8], limit: u64, memory: u64) -> Result<Vec<u8>, String> {
    let stream = xz2::stream::Stream::new_stream_decoder(memory, 0).map_err(|e| format!("xz decoder: {e}"))?;
    let mut out = Vec::new();
    let read = xz2::read::XzDecoder::new_stream(bytes, stream).take(limit.saturating_add(1)).read_to_end(&mut out);
    match read {
        Ok(_) if out.len() as u64 > limit => Err(format!("it decompresses to more than {}", in_bytes(limit))),
        Ok(_) => Ok(out),
        Err(e)
            if e.get_ref().and_then(|i| i.downcast_ref::<xz2::stream::Error>())
                == Some(&xz2::stream::Error::MemLimit) =>
        {
            Err(format!("decompressing it needs more than {} of memory", in_bytes(memory)))
        }
        Err(e) => Err(format!("not an xz-compressed index: {e}")),
    }
}

/// `n` bytes in words: `1048576 bytes (1 MiB)`, or `100 bytes` below a MiB.
fn in_bytes(n: u64) -> String {
    if n >= 1 << 20 {
        format!("{n} bytes ({} MiB)", n >> 20)
    } else {
        format!("{n} bytes")
    }
}

enum Get {
    NotFound,
    Failed(IndexError),
}

/// At most `limit` bytes of `rel` below `archive` (an `http(s)://` or `file:` URL).
fn get(archive: &str, rel: &str, limit: u64) -> Result<Vec<u8>, Get> {
    let url = format!("{}/{rel}", archive.trim_end_matches('/'));
    let bad = |message: String| Get::Failed(IndexError::Bad { index: url.clone(), line: None, message });
    if let Some(root) = archive.strip_prefix("file://").or_else(|| archive.strip_prefix("file:")) {
        let folder = match Folder::open(Path::new(root)) {
            Ok(f) => f,
            Err(FileError::Io(PathIo { source, .. })) if source.kind() == std::io::ErrorKind::NotFound => {
                return Err(Get::NotFound)
            }
            Err(e) => return Err(Get::Failed(IndexError::Fetch(e.to_string()))),
        };
        return match folder.read(rel, limit) {
            Ok(b) => Ok(b),
            Err(FileError::Io(PathIo { source, .. })) if source.kind() == std::io::ErrorKind::NotFound => {
                Err(Get::NotFound)
            }
            Err(e @ FileError::Io(_)) => Err(Get::Failed(IndexError::Fetch(e.to_string()))),
            Err(FileError::TooLarge { limit, .. }) => Err(bad(format!("it is larger than {}", in_bytes(limit)))),
            Err(FileError::NotRegular { kind, .. }) => Err(bad(format!("it is {kind}, not a regular file"))),
            Err(e) => Err(bad(e.to_string())),
        };
    }
    // The request and the body, tried again together when the network failed (no run's
    // cancel flag reaches an index read: at most the waits of NETWORK_RETRY_WAITS).
    // Ok(Err(_)): the index is refused; Err(None): 404; Err(Some(words)): failed.
    let too_large = || bad(format!("it is larger than {}", in_bytes(limit)));
    let call = || -> Result<Result<Vec<u8>, Get>, Option<String>> {
        let resp = match ureq::get(&url).timeout(std::time::Duration::from_secs(300)).call() {
            Ok(resp) => resp,
            Err(ureq::Error::Status(404, _)) => return Err(None),
            Err(e) => return Err(Some(e.to_string())),
        };
        if resp.header("Content-Length").and_then(|l| l.parse::<u64>().ok()).is_some_and(|l| l > limit) {
            return Ok(Err(too_large()));
        }
        let mut bytes = Vec::new();
        resp.into_reader().take(limit.saturating_add(1)).read_to_end(&mut bytes).map_err(|e| Some(e.to_string()))?;
        if bytes.len() as u64 > limit {
            return Ok(Err(too_large()));
        }
        Ok(Ok(bytes))
    };
    let transport = |e: &Option<String>| e.clone().filter(|w| super::tool::network_failure(w));
    let waits = &super::tool::NETWORK_RETRY_WAITS;
    match super::tool::retry_on_network(&format!("fetching {url}"), waits, None, transport, call) {
        Ok(read) => read,
        Err(None) => Err(Get::NotFound),
        Err(Some(e)) => Err(Get::Failed(IndexError::Fetch(format!("{url}: {e}")))),
    }
}

/// Compares two Debian versions as `dpkg --compare-versions` does: epoch numerically,
/// then upstream version and revision with dpkg's rules (`~` sorts before everything,
/// even the end of the string; letters before other characters; digit runs
/// numerically), e.g. `6.12.95-1~bpo12+1 < 6.12.95-1`.
pub fn compare_versions(a: &str, b: &str) -> Ordering {
    let (ea, ua, ra) = split_version(a);
    let (eb, ub, rb) = split_version(b);
    ea.cmp(&eb).then_with(|| verrevcmp(ua, ub)).then_with(|| verrevcmp(ra, rb))
}

/// `[epoch:]upstream[-revision]` → (epoch, upstream, revision).
fn split_version(v: &str) -> (u64, &str, &str) {
    let (epoch, rest) = match v.split_once(':') {
        Some((e, r)) if e.chars().all(|c| c.is_ascii_digit()) => (e.parse().unwrap_or(0), r),
        _ => (0, v),
    };
    match rest.rsplit_once('-') {
        Some((u, r)) => (epoch, u, r),
        None => (epoch, rest, ""),
    }
}

/// dpkg's character order: digits 0 (handled apart), end of string 0, letters their
/// code, `~` below everything, other characters after letters.
fn order(c: Option<u8>) -> i32 {
    match c {
        None => 0,
        Some(c) if c.is_ascii_digit() => 0,
        Some(c) if c.is_ascii_alphabetic() => i32::from(c),
        Some(b'~') => -1,
        Some(c) => i32::from(c) + 256,
    }
}

/// dpkg's `verrevcmp`.
fn verrevcmp(a: &str, b: &str) -> Ordering {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let (mut i, mut j) = (0, 0);
    let digit = |s: &[u8], k: usize| s.get(k).is_some_and(u8::is_ascii_digit);
    while i < a.len() || j < b.len() {
        while (i < a.len() && !digit(a, i)) || (j < b.len() && !digit(b, j)) {
            let (ac, bc) = (order(a.get(i).copied()), order(b.get(j).copied()));
            if ac != bc {
                return ac.cmp(&bc);
            }
            i += 1;
            j += 1;
        }
        while a.get(i) == Some(&b'0') {
            i += 1;
        }
        while b.get(j) == Some(&b'0') {
            j += 1;
        }
        let mut first_diff = Ordering::Equal;
        while digit(a, i) && digit(b, j) {
            if first_diff == Ordering::Equal {
                first_diff = a[i].cmp(&b[j]);
            }
            i += 1;
            j += 1;
        }
        if digit(a, i) {
            return Ordering::Greater;
        }
        if digit(b, j) {
            return Ordering::Less;
        }
        if first_diff != Ordering::Equal {
            return first_diff;
        }
    }
    Ordering::Equal
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_order_as_dpkg_orders_them() {
        use Ordering::*;
        // Each pair checked against `dpkg --compare-versions` (dpkg 1.21.23, bookworm).
        let cases = [
            ("6.1.176-1", "6.1.177-1", Less),
            ("6.1.99-1", "6.1.100-1", Less),
            ("6.12.95-1~bpo12+1", "6.12.95-1", Less),
            ("6.12.95-1~bpo12+1", "6.12.96-1~bpo12+1", Less),
            ("5.10.223-1", "5.10.223-1", Equal),
            ("1:1.0-1", "2.0-1", Greater),
            ("1.0~rc1-1", "1.0-1", Less),
            ("1.0a", "1.0+", Less),
            ("1.0", "1.0-0", Equal),
            ("2.30-21+deb12u1", "2.30-21", Greater),
        ];
        for (a, b, want) in cases {
            assert_eq!(compare_versions(a, b), want, "{a} vs {b}");
            assert_eq!(compare_versions(b, a), want.reverse(), "{b} vs {a}");
        }
    }

    #[test]
    fn index_stanzas_keep_what_a_pin_needs() {
        let sha = "EFE1".repeat(16);
        let text = &format!("Package: linux-image-6.1.0-50-cloud-amd64\nSource: linux-signed-amd64 (6.1.176+1)\nVersion: 6.1.176-1\nFilename: pool/main/l/linux-signed-amd64/x.deb\nSize: 26484304\nSHA256: {sha}\nDescription: Linux 6.1\n multi-line\n .\n\n \t\nPackage: hello\nVersion: 1\nFilename: ../h.deb\nSize: 0\nSHA256: aa\n");
        let got = parse_packages(text, "I", "bookworm", &|p| p.starts_with("linux-image-")).unwrap();
        assert_eq!(
            got,
            vec![IndexEntry {
                suite: "bookworm".into(),
                package: "linux-image-6.1.0-50-cloud-amd64".into(),
                version: "6.1.176-1".into(),
                filename: "pool/main/l/linux-signed-amd64/x.deb".into(),
                size: 26484304,
                sha256: "efe1".repeat(16),
            }],
            "a stanza not kept is not checked past its structure"
        );
    }

    #[test]
    fn a_broken_stanza_is_refused_with_its_line_and_field() {
        let sha = "a".repeat(64);
        let good = format!("Package: linux-image-1\nVersion: 1-1\nFilename: pool/x.deb\nSize: 10\nSHA256: {sha}\n");
        let err = |text: &str| match parse_packages(text, "I", "bookworm", &|p| p.starts_with("linux-")) {
            Err(IndexError::Bad { line, message, .. }) => (line.unwrap_or(0), message),
            other => panic!("{other:?}"),
        };
        let (line, m) = err(&format!("{good}\n{}", good.replace("Size: 10", "Size: 1e3")));
        assert_eq!(line, 10, "{m}");
        assert!(m.starts_with("Size of the stanza of \"linux-image-1\" (line 7): \"1e3\" is not a number"), "{m}");
        let (line, m) = err(&good.replace("Size: 10\n", ""));
        assert_eq!((line, m.as_str()), (1, "the stanza of \"linux-image-1\" (line 1) has no Size field"));
        let (line, m) = err(&format!("{good}SHA256: {sha}\n"));
        assert_eq!((line, m.as_str()), (6, "SHA256 appears twice in one stanza (first at line 5)"));
        let (line, m) = err(&good.replace("Filename: pool/x.deb\n", "Filename: pool/x.deb\n ../../y.deb\n"));
        assert_eq!(line, 3, "{m}");
        assert!(m.contains("spans more than one line"), "{m}");
        let (line, m) = err(&format!("garbage\n{good}"));
        assert_eq!(line, 1, "{m}");
        let (line, m) = err(&format!(" cont\n{good}"));
        assert_eq!(line, 1, "{m}");
        let (line, m) = err(&format!("Version: 1\n\n{good}"));
        assert_eq!((line, m.as_str()), (1, "this stanza has no Package field"));
        let (line, m) = err(&format!("{good}\n{}", good.replace("Version: 1-1", "Version: 1:")));
        assert_eq!(line, 8, "{m}");
        assert!(m.starts_with("Version of"), "{m}");
        // Field names are case-insensitive (deb822), and a hex digest may be upper case.
        let upper = good.replace("SHA256: ", "sha256: ").replace(&sha, &sha.to_uppercase());
        assert_eq!(parse_packages(&upper, "I", "bookworm", &|_| true).unwrap()[0].sha256, sha);
    }

    #[test]
    fn xz_is_decompressed_within_its_caps() {
        let text = "Package: x\n".repeat(1000);
        let mut enc = xz2::write::XzEncoder::new(Vec::new(), 6);
        std::io::Write::write_all(&mut enc, text.as_bytes()).unwrap();
        let xz = enc.finish().unwrap();
        assert_eq!(decompress_xz(&xz, 11_000, XZ_MEMORY_LIMIT).unwrap(), text.as_bytes());
        let over = decompress_xz(&xz, 10_999, XZ_MEMORY_LIMIT).unwrap_err();
        assert_eq!(over, "it decompresses to more than 10999 bytes");
        // `xz -6` declares an 8 MiB dictionary: a decoder allowed 1 MiB stops before.
        let mem = decompress_xz(&xz, 11_000, 1 << 20).unwrap_err();
        assert_eq!(mem, "decompressing it needs more than 1048576 bytes (1 MiB) of memory");
        assert!(decompress_xz(b"Package: x\n", 100, XZ_MEMORY_LIMIT)
            .unwrap_err()
            .starts_with("not an xz-compressed index"));
    }
}
