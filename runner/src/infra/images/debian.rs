//! Fetching packages from the Debian archive.
//!
//! The archive address is never written in the project: it is `$VMREPRO_DEBIAN_MIRROR`
//! if set, else the first non-security `URIs:` of the host's deb822 apt sources
//! (`/etc/apt/sources.list.d/*.sources`), else the first `deb` line of
//! `/etc/apt/sources.list` — the same archive `apt-get` and `mmdebstrap` use. Packages
//! of the security archive (`pool/updates/…`, suites `<codename>-security`) come from
//! [`security_archive_url`], found the same way.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use super::{Cache, CacheOutcome, CancelFlag, ImageError};

/// The Debian archive base URL (e.g. `http://<mirror>/debian`), without a trailing `/`.
pub fn archive_url() -> Result<String, ImageError> {
    if let Ok(m) = std::env::var("VMREPRO_DEBIAN_MIRROR") {
        if !m.is_empty() {
            return Ok(m.trim_end_matches('/').to_string());
        }
    }
    let mut candidates = Vec::new();
    if let Ok(rd) = std::fs::read_dir("/etc/apt/sources.list.d") {
        let mut files: Vec<PathBuf> =
            rd.flatten().map(|e| e.path()).filter(|p| p.extension().is_some_and(|e| e == "sources")).collect();
        files.sort();
        for f in files {
            if let Ok(text) = std::fs::read_to_string(&f) {
                candidates.extend(deb822_uris(&text));
            }
        }
    }
    if let Ok(text) = std::fs::read_to_string("/etc/apt/sources.list") {
        candidates.extend(one_line_uris(&text));
    }
    candidates
        .into_iter()
        .find(|u| u.trim_end_matches('/').ends_with("/debian"))
        .map(|u| u.trim_end_matches('/').to_string())
        .ok_or(ImageError::NoArchive {
            what: "a Debian archive",
            where_: " (/etc/apt/sources.list.d/*.sources, /etc/apt/sources.list)",
            variable: "VMREPRO_DEBIAN_MIRROR",
        })
}

/// The Debian security archive's base URL (where `<codename>-security` suites live),
/// without a trailing `/`: `$VMREPRO_DEBIAN_SECURITY_MIRROR` if set, else the host's
/// apt sources' security stanza (deb822 or one-line), else the main archive's URL
/// with `-security` appended when it ends with `/debian` (the layout of Debian's own
/// mirrors: `…/debian` and `…/debian-security`).
///
/// Errors: [`ImageError::Fetch`] when none of these gives one.
pub fn security_archive_url() -> Result<String, ImageError> {
    if let Ok(m) = std::env::var("VMREPRO_DEBIAN_SECURITY_MIRROR") {
        if !m.is_empty() {
            return Ok(m.trim_end_matches('/').to_string());
        }
    }
    // With the main archive overridden, derive from it rather than mix in the host's.
    if std::env::var("VMREPRO_DEBIAN_MIRROR").is_ok_and(|m| !m.is_empty()) {
        let main = archive_url()?;
        if main.ends_with("/debian") {
            return Ok(format!("{main}-security"));
        }
    }
    let mut candidates = Vec::new();
    if let Ok(rd) = std::fs::read_dir("/etc/apt/sources.list.d") {
        let mut files: Vec<PathBuf> =
            rd.flatten().map(|e| e.path()).filter(|p| p.extension().is_some_and(|e| e == "sources")).collect();
        files.sort();
        for f in files {
            if let Ok(text) = std::fs::read_to_string(&f) {
                candidates.extend(deb822_uris_where(&text, true));
            }
        }
    }
    if let Ok(text) = std::fs::read_to_string("/etc/apt/sources.list") {
        candidates.extend(one_line_uris_where(&text, true));
    }
    if let Some(u) = candidates.into_iter().next() {
        return Ok(u.trim_end_matches('/').to_string());
    }
    let main = archive_url()?;
    if main.ends_with("/debian") {
        return Ok(format!("{main}-security"));
    }
    Err(ImageError::NoArchive {
        what: "the Debian security archive",
        where_: "",
        variable: "VMREPRO_DEBIAN_SECURITY_MIRROR",
    })
}

/// The archive that serves `suite`: the security archive for `*-security` suites,
/// the main archive otherwise.
///
/// Errors: as [`archive_url`] and [`security_archive_url`].
pub fn archive_url_for_suite(suite: &str) -> Result<String, ImageError> {
    if suite.ends_with("-security") {
        security_archive_url()
    } else {
        archive_url()
    }
}

/// The archive that serves the pool path `filename`: the security archive keeps its
/// packages under `pool/updates/`, the main archive under `pool/main/` (etc.).
///
/// Errors: as [`archive_url_for_suite`].
pub fn archive_url_for_file(filename: &str) -> Result<String, ImageError> {
    if filename.starts_with("pool/updates/") {
        security_archive_url()
    } else {
        archive_url()
    }
}

/// `URIs:` of deb822 stanzas whose `Types:` include `deb` and whose suites are not
/// security suites.
pub fn deb822_uris(text: &str) -> Vec<String> {
    deb822_uris_where(text, false)
}

/// `URIs:` of `deb` stanzas whose suites are (`security`) or are not security suites.
fn deb822_uris_where(text: &str, security: bool) -> Vec<String> {
    let mut out = Vec::new();
    for stanza in text.split("\n\n") {
        let field = |name: &str| stanza.lines().find_map(|l| l.strip_prefix(name).map(|v| v.trim().to_string()));
        let types = field("Types:").unwrap_or_default();
        let suites = field("Suites:").unwrap_or_default();
        if !types.split_whitespace().any(|t| t == "deb") || suites.contains("-security") != security {
            continue;
        }
        if let Some(uris) = field("URIs:") {
            out.extend(uris.split_whitespace().map(str::to_string));
        }
    }
    out
}

/// URIs of one-line `deb URI SUITE …` entries (options in `[…]` skipped) of
/// non-security suites.
pub fn one_line_uris(text: &str) -> Vec<String> {
    one_line_uris_where(text, false)
}

fn one_line_uris_where(text: &str, security: bool) -> Vec<String> {
    text.lines()
        .filter_map(|l| {
            let l = l.trim();
            let rest = l.strip_prefix("deb ")?;
            let rest = if rest.trim_start().starts_with('[') { rest.split_once(']')?.1 } else { rest };
            let mut parts = rest.split_whitespace();
            let uri = parts.next()?;
            let suite = parts.next().unwrap_or_default();
            (suite.contains("-security") == security).then(|| uri.to_string())
        })
        .collect()
}

/// Returns the pinned .deb (`filename` in the archive, `size` bytes, `sha256`) from the cache (`debs/<sha256>/<file>`), downloading and
/// verifying it first if needed.
///
/// Errors: no archive configured, HTTP failure (with the URL; a 404 means the pinned
/// version left the archive), or size/SHA-256 mismatch.
pub fn fetch_deb(
    cache: &Cache,
    filename: &str,
    size: u64,
    sha256: &str,
) -> Result<(PathBuf, CacheOutcome), ImageError> {
    fetch_deb_held(cache, filename, size, sha256).map(|(p, o, _)| (p, o))
}

/// [`fetch_deb`], keeping the entry held (see [`super::cache::EntryHold`]) while the
/// caller unpacks it.
///
/// Errors: as [`fetch_deb`].
pub fn fetch_deb_held(
    cache: &Cache,
    filename: &str,
    size: u64,
    sha256: &str,
) -> Result<(PathBuf, CacheOutcome, super::cache::EntryHold), ImageError> {
    let file_name = Path::new(filename)
        .file_name()
        .map(|f| f.to_string_lossy().into_owned())
        .unwrap_or_else(|| "package.deb".into());
    let (dir, outcome, hold) = cache.get_or_build_held("debs", sha256, |tmp| {
        let url = format!("{}/{filename}", archive_url_for_file(filename)?);
        download_verified(&url, &tmp.join(&file_name), size, sha256, cache.cancel_flag())
    })?;
    Ok((dir.join(file_name), outcome, hold))
}

/// Downloads `url` to `dest`, checking its size and SHA-256; tried again when the
/// network failed ([`super::tool::NETWORK_RETRY_WAITS`]), unless `cancel` is set.
fn download_verified(url: &str, dest: &Path, size: u64, sha256: &str, cancel: &CancelFlag) -> Result<(), ImageError> {
    super::tool::retry_on_network(
        &format!("fetching {url}"),
        &super::tool::NETWORK_RETRY_WAITS,
        Some(cancel),
        ImageError::network_failure,
        || download_verified_once(url, dest, size, sha256),
    )
}

fn download_verified_once(url: &str, dest: &Path, size: u64, sha256: &str) -> Result<(), ImageError> {
    let resp = ureq::get(url).timeout(std::time::Duration::from_secs(600)).call().map_err(|e| match e {
        ureq::Error::Status(404, _) => ImageError::PinGone { url: url.to_string() },
        e => ImageError::Fetch(format!("{url}: {e}")),
    })?;
    let mut reader = resp.into_reader();
    let mut file = std::fs::File::create(dest).map_err(ImageError::io("creating download", dest))?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 16];
    let mut total = 0u64;
    loop {
        let n = reader.read(&mut buf).map_err(|e| ImageError::Fetch(format!("{url}: {e}")))?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
        file.write_all(&buf[..n]).map_err(ImageError::io("writing download", dest))?;
        total += n as u64;
    }
    file.sync_all().map_err(ImageError::io("writing download", dest))?;
    let got = hex::encode(hasher.finalize());
    if total != size || got != sha256 {
        return Err(ImageError::Checksum {
            url: url.to_string(),
            size,
            sha256: sha256.to_string(),
            got_size: total,
            got_sha256: got,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deb822_skips_security_and_other_types() {
        let text = "Types: deb\nURIs: http://a.example/debian\nSuites: bookworm bookworm-updates\n\nTypes: deb\nURIs: http://a.example/debian-security\nSuites: bookworm-security\n\nTypes: deb-src\nURIs: http://b.example/debian\nSuites: bookworm\n";
        assert_eq!(deb822_uris(text), vec!["http://a.example/debian".to_string()]);
    }

    #[test]
    fn security_stanzas_are_found_apart() {
        let text = "Types: deb\nURIs: http://a.example/debian\nSuites: bookworm\n\nTypes: deb\nURIs: http://a.example/debian-security\nSuites: bookworm-security\n";
        assert_eq!(deb822_uris_where(text, true), vec!["http://a.example/debian-security".to_string()]);
        let one =
            "deb http://c.example/debian bookworm main\ndeb http://c.example/debian-security bookworm-security main\n";
        assert_eq!(one_line_uris_where(one, true), vec!["http://c.example/debian-security".to_string()]);
    }

    #[test]
    fn one_line_handles_options() {
        let text = "# c\ndeb [arch=amd64 signed-by=/x] http://c.example/debian bookworm main\ndeb http://c.example/debian-security bookworm-security main\n";
        assert_eq!(one_line_uris(text), vec!["http://c.example/debian".to_string()]);
    }
}
