//! What a pin of `images/kernels.yaml` may hold, checked the same way whether the pin
//! is read from `kernels.yaml` ([`super::Catalog::load`]) or is about to be written
//! there from a Debian package index ([`super::index::parse_packages`]): both are
//! untrusted input.
//!
//! A pin's archive path is fetched from the Debian mirror, its SHA-256 names a cache
//! folder and its size bounds the download, so: the package is a [`DebianPackage`]
//! (no `/suite`), the suite a Debian suite name, the version a Debian version (Debian
//! Policy §5.6.12), the path a plain `pool/…/<name>.deb` (no `..`, no URL, not
//! absolute), the size 1 byte to [`MAX_DEB_BYTES`], the SHA-256 64 hex digits.

use crate::schema::package::DebianPackage;
use crate::schema::text::shown;

/// The largest package a pin may name, bytes (4 GiB; Debian's largest kernel packages,
/// the `-dbg` ones, are about 1 GiB).
pub const MAX_DEB_BYTES: u64 = 4 << 30;

/// The longest Debian version accepted, bytes (the archive's longest are about 60).
pub const MAX_VERSION_BYTES: usize = 128;

/// A field of a pin.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PinField {
    /// The binary package name.
    Package,
    /// The Debian suite.
    Suite,
    /// The Debian version.
    Version,
    /// The path in the archive.
    Filename,
    /// The size, bytes.
    Size,
    /// The SHA-256.
    Sha256,
}

impl PinField {
    /// The key of `images/kernels.yaml` (`sha256`).
    pub fn key(self) -> &'static str {
        match self {
            PinField::Package => "package",
            PinField::Suite => "suite",
            PinField::Version => "version",
            PinField::Filename => "filename",
            PinField::Size => "size",
            PinField::Sha256 => "sha256",
        }
    }

    /// The field of a Debian `Packages` index (`SHA256`; the suite is not one).
    pub fn index_field(self) -> &'static str {
        match self {
            PinField::Package => "Package",
            PinField::Suite => "Suite",
            PinField::Version => "Version",
            PinField::Filename => "Filename",
            PinField::Size => "Size",
            PinField::Sha256 => "SHA256",
        }
    }
}

/// What is wrong with a pin's fields (the first field that fails, and why in words,
/// quoting the value), or `None`. `sha256` is checked as given (a caller that accepts
/// upper-case hex lowers it first).
pub fn pin_problem(
    package: &str,
    suite: &str,
    version: &str,
    filename: &str,
    size: u64,
    sha256: &str,
) -> Option<(PinField, String)> {
    match DebianPackage::parse(package) {
        Err(e) => return Some((PinField::Package, e.to_string())),
        Ok(p) if p.suite().is_some() => {
            return Some((PinField::Package, format!("{} is a package name with a suite", shown(package, 80))))
        }
        Ok(_) => {}
    }
    if !super::catalog::is_debian_name(suite) {
        return Some((PinField::Suite, format!("{} is not a Debian suite name", shown(suite, 80))));
    }
    if let Some(why) = version_problem(version) {
        return Some((PinField::Version, format!("{} is not a Debian version: {why}", shown(version, 80))));
    }
    if let Some(why) = filename_problem(filename) {
        return Some((
            PinField::Filename,
            format!("{} is not an archive path pool/…/<name>.deb: {why}", shown(filename, 120)),
        ));
    }
    if size == 0 || size > MAX_DEB_BYTES {
        return Some((PinField::Size, format!("{size} is out of range (1 byte to 4 GiB)")));
    }
    if sha256.len() != 64 || !sha256.chars().all(|c| c.is_ascii_digit() || ('a'..='f').contains(&c)) {
        return Some((PinField::Sha256, format!("{} is not 64 lowercase hex digits", shown(sha256, 80))));
    }
    None
}

/// What is wrong with archive path `f` (a plain relative `pool/…/<name>.deb`), or `None`.
fn filename_problem(f: &str) -> Option<&'static str> {
    if f.starts_with('/') {
        Some("it is absolute")
    } else if f.contains("://") || f.split('/').next().is_some_and(|c| c.contains(':')) {
        Some("it is a URL")
    } else if !f.starts_with("pool/") {
        Some("it is not under pool/")
    } else if f.split('/').any(|c| c == "." || c == "..") {
        Some("it has a '.' or '..' component")
    } else if f.split('/').any(str::is_empty) {
        Some("it has an empty component")
    } else if !f.ends_with(".deb") || f.ends_with("/.deb") {
        Some("it does not name a .deb")
    } else if !f.chars().all(|c| c.is_ascii_alphanumeric() || "._+~/-:".contains(c)) {
        Some("it has a character other than letters, digits and . _ + ~ - : /")
    } else if f.len() > 1024 {
        Some("it is longer than 1024 bytes")
    } else {
        None
    }
}

/// What is wrong with Debian version `v`, in words, or `None`. The grammar is Debian
/// Policy §5.6.12: `[epoch:]upstream_version[-debian_revision]`; the epoch is an
/// unsigned number; the upstream version starts with a digit and has letters, digits
/// and `. + ~`, and `-` only when there is a revision (the last `-` starts it); the
/// revision is not empty and has letters, digits and `. + ~`. At most
/// [`MAX_VERSION_BYTES`] bytes.
pub fn version_problem(v: &str) -> Option<String> {
    if v.is_empty() {
        return Some("it is empty".into());
    }
    if v.len() > MAX_VERSION_BYTES {
        return Some(format!("it is longer than {MAX_VERSION_BYTES} bytes"));
    }
    if let Some(c) = v.chars().find(|c| !(c.is_ascii_alphanumeric() || ".+~-:".contains(*c))) {
        return Some(format!("{} is not allowed (letters, digits and . + ~ - :)", shown(&c.to_string(), 10)));
    }
    let rest = match v.split_once(':') {
        Some((epoch, rest)) => {
            if epoch.is_empty() || !epoch.chars().all(|c| c.is_ascii_digit()) || epoch.parse::<u32>().is_err() {
                return Some(format!("the epoch {} (before ':') is not a number", shown(epoch, 40)));
            }
            rest
        }
        None => v,
    };
    let (upstream, revision) = match rest.rsplit_once('-') {
        Some((u, r)) => (u, Some(r)),
        None => (rest, None),
    };
    let odd = |s: &str, extra: &str| s.chars().find(|c| !(c.is_ascii_alphanumeric() || extra.contains(*c)));
    if !upstream.starts_with(|c: char| c.is_ascii_digit()) {
        return Some("the upstream version does not start with a digit".into());
    }
    let upstream_extra = if revision.is_some() { ".+~-" } else { ".+~" };
    if let Some(c) = odd(upstream, upstream_extra) {
        return Some(format!(
            "{} is not allowed in the upstream version (letters, digits and . + ~, and - before a revision)",
            shown(&c.to_string(), 10)
        ));
    }
    if let Some(r) = revision {
        if r.is_empty() {
            return Some("the revision after the last '-' is empty".into());
        }
        if let Some(c) = odd(r, ".+~") {
            return Some(format!(
                "{} is not allowed in the revision (letters, digits and . + ~)",
                shown(&c.to_string(), 10)
            ));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debian_versions_follow_policy_5_6_12() {
        for ok in ["6.1.176-1", "1:2.30-21+deb12u1", "6.12.95-1~bpo12+1", "1.0", "1.0~rc1", "2.0-1-2", "0", "10:1a"] {
            assert_eq!(version_problem(ok), None, "{ok}");
        }
        let why = |v: &str| version_problem(v).unwrap_or_default();
        assert!(why("latest").contains("start with a digit"), "{}", why("latest"));
        assert!(why("a:1.0").contains("epoch"));
        assert!(why(":1.0").contains("epoch"));
        assert!(why("99999999999:1").contains("epoch"), "an epoch past u32");
        assert!(why("1.0-").contains("revision"));
        assert!(why("1:2.0-1:3").contains("revision"), "a colon in the revision");
        assert!(why("1.0-1_2").starts_with("\"_\" is not allowed"));
        assert!(why("1:2:3").contains("upstream"), "a colon after the epoch's");
        assert!(why("1.0 #x").starts_with("\" \" is not allowed"), "{}", why("1.0 #x"));
        assert!(why("").contains("empty"));
        assert!(why(&"1".repeat(200)).contains("longer"));
    }

    #[test]
    fn archive_paths_are_plain_pool_paths_to_a_deb() {
        assert_eq!(
            filename_problem("pool/main/l/linux-signed-amd64/linux-image-6.1.0-50-cloud-amd64_6.1.176-1_amd64.deb"),
            None
        );
        assert_eq!(filename_problem("pool/main/e/epoch/x_1:2.0_amd64.deb"), None);
        assert_eq!(filename_problem("/pool/x.deb"), Some("it is absolute"));
        assert_eq!(filename_problem("https://evil.example/pool/x.deb"), Some("it is a URL"));
        assert_eq!(filename_problem("file:pool/x.deb"), Some("it is a URL"));
        assert_eq!(filename_problem("dists/x.deb"), Some("it is not under pool/"));
        assert_eq!(filename_problem("pool/../etc/x.deb"), Some("it has a '.' or '..' component"));
        assert_eq!(filename_problem("pool//x.deb"), Some("it has an empty component"));
        assert_eq!(filename_problem("pool/x.tar"), Some("it does not name a .deb"));
        assert_eq!(
            filename_problem("pool/x y.deb"),
            Some("it has a character other than letters, digits and . _ + ~ - : /")
        );
    }

    #[test]
    fn the_first_bad_field_is_named() {
        let sha = "a".repeat(64);
        let ok = ("linux-image-6.1.0-50-cloud-amd64", "bookworm", "6.1.176-1", "pool/main/l/x_1_amd64.deb");
        assert_eq!(pin_problem(ok.0, ok.1, ok.2, ok.3, 1, &sha), None);
        let field = |p: Option<(PinField, String)>| p.map(|(f, _)| f);
        assert_eq!(field(pin_problem("fio/bookworm", ok.1, ok.2, ok.3, 1, &sha)), Some(PinField::Package));
        assert_eq!(field(pin_problem(ok.0, "Bookworm", ok.2, ok.3, 1, &sha)), Some(PinField::Suite));
        assert_eq!(field(pin_problem(ok.0, ok.1, "v1", ok.3, 1, &sha)), Some(PinField::Version));
        assert_eq!(field(pin_problem(ok.0, ok.1, ok.2, ok.3, 0, &sha)), Some(PinField::Size));
        assert_eq!(field(pin_problem(ok.0, ok.1, ok.2, ok.3, MAX_DEB_BYTES + 1, &sha)), Some(PinField::Size));
        assert_eq!(field(pin_problem(ok.0, ok.1, ok.2, ok.3, 1, &sha.to_uppercase())), Some(PinField::Sha256));
    }
}
