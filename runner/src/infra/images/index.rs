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

use super::ImageError;

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

/// Parses the text of a `Packages` index of `suite`, keeping the stanzas whose package
/// name `keep` accepts and that have every field a pin needs.
///
/// Errors: an index is untrusted input (a mirror, a `file:` copy), and what it says
/// goes into `images/kernels.yaml`, so every kept entry is checked as a pin is
/// (package name, `pool/…/*.deb` path without `..` or URL, size 1 byte to 4 GiB, 64
/// hex digits, and a Debian version): the first that fails is the error, naming the
/// package, its version and the field.
pub fn parse_packages(text: &str, suite: &str, keep: &dyn Fn(&str) -> bool) -> Result<Vec<IndexEntry>, String> {
    let mut out = Vec::new();
    for stanza in text.split("\n\n") {
        let field = |name: &str| {
            stanza.lines().find_map(|l| l.strip_prefix(name).and_then(|v| v.strip_prefix(':')).map(str::trim))
        };
        let Some(package) = field("Package") else { continue };
        if !keep(package) {
            continue;
        }
        let (Some(version), Some(filename), Some(size), Some(sha256)) =
            (field("Version"), field("Filename"), field("Size").and_then(|s| s.parse().ok()), field("SHA256"))
        else {
            continue;
        };
        let e = IndexEntry {
            suite: suite.to_string(),
            package: package.to_string(),
            version: version.to_string(),
            filename: filename.to_string(),
            size,
            sha256: sha256.to_lowercase(),
        };
        let problem = super::catalog::pin_problem(&e.package, suite, &e.filename, e.size, &e.sha256)
            .or_else(|| version_problem(&e.version));
        if let Some(why) = problem {
            let shown = |s: &str| crate::schema::text::shown(s, 80);
            return Err(format!("the entry of {} {}: {why}", shown(&e.package), shown(&e.version)));
        }
        out.push(e);
    }
    Ok(out)
}

/// What is wrong with Debian version `v` (`[epoch:]upstream[-revision]`: digits first,
/// then letters, digits and `. + ~ - :`; Debian Policy §5.6.12), or `None`.
fn version_problem(v: &str) -> Option<String> {
    let ok = v.len() <= 128
        && v.starts_with(|c: char| c.is_ascii_digit())
        && v.chars().all(|c| c.is_ascii_alphanumeric() || ".+~-:".contains(c));
    (!ok).then(|| format!("version: {v:?} is not a Debian version"))
}

/// Reads the `main/binary-amd64` index of `suite` from `archive` (an `http(s)://` or
/// `file:` URL): `Packages.xz`, else `Packages`.
///
/// Errors: [`ImageError::Fetch`] naming the URL (not found, HTTP error, not xz).
pub fn fetch_packages(archive: &str, suite: &str) -> Result<String, ImageError> {
    let base = format!("{}/dists/{suite}/main/binary-amd64/Packages", archive.trim_end_matches('/'));
    let xz_url = format!("{base}.xz");
    match get(&xz_url) {
        Ok(bytes) => {
            let mut text = String::new();
            xz2::read::XzDecoder::new(&bytes[..])
                .read_to_string(&mut text)
                .map_err(|e| ImageError::Fetch(format!("{xz_url}: not an xz-compressed index: {e}")))?;
            Ok(text)
        }
        Err(Get::NotFound) => match get(&base) {
            Ok(bytes) => Ok(String::from_utf8_lossy(&bytes).into_owned()),
            Err(Get::NotFound) => {
                Err(ImageError::Fetch(format!("{xz_url}: not found (nor {base}): is {suite} a suite of this archive?")))
            }
            Err(Get::Failed(e)) => Err(ImageError::Fetch(e)),
        },
        Err(Get::Failed(e)) => Err(ImageError::Fetch(e)),
    }
}

enum Get {
    NotFound,
    Failed(String),
}

/// The bytes at `url` (`file:` URLs read from disk).
fn get(url: &str) -> Result<Vec<u8>, Get> {
    if let Some(path) = url.strip_prefix("file://").or_else(|| url.strip_prefix("file:")) {
        return match std::fs::read(path) {
            Ok(b) => Ok(b),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(Get::NotFound),
            Err(e) => Err(Get::Failed(format!("{url}: {e}"))),
        };
    }
    match ureq::get(url).timeout(std::time::Duration::from_secs(300)).call() {
        Ok(resp) => {
            let mut bytes = Vec::new();
            resp.into_reader().read_to_end(&mut bytes).map_err(|e| Get::Failed(format!("{url}: {e}")))?;
            Ok(bytes)
        }
        Err(ureq::Error::Status(404, _)) => Err(Get::NotFound),
        Err(e) => Err(Get::Failed(format!("{url}: {e}"))),
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
        let text = &format!("Package: linux-image-6.1.0-50-cloud-amd64\nSource: linux-signed-amd64 (6.1.176+1)\nVersion: 6.1.176-1\nFilename: pool/main/l/linux-signed-amd64/x.deb\nSize: 26484304\nSHA256: {sha}\nDescription: Linux 6.1\n multi-line\n\nPackage: hello\nVersion: 1\nFilename: pool/h.deb\nSize: 1\nSHA256: aa\n\nPackage: linux-image-broken\nVersion: 1\n");
        let got = parse_packages(text, "bookworm", &|p| p.starts_with("linux-image-")).unwrap();
        assert_eq!(
            got,
            vec![IndexEntry {
                suite: "bookworm".into(),
                package: "linux-image-6.1.0-50-cloud-amd64".into(),
                version: "6.1.176-1".into(),
                filename: "pool/main/l/linux-signed-amd64/x.deb".into(),
                size: 26484304,
                sha256: "efe1".repeat(16),
            }]
        );
    }
}
