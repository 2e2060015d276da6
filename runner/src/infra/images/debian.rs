//! Fetching packages from the Debian archive.
//!
//! The archive address is never written in the project: it is `$VMREPRO_DEBIAN_MIRROR`
//! if set, else the first non-security `URIs:` of the host's deb822 apt sources
//! (`/etc/apt/sources.list.d/*.sources`), else the first `deb` line of
//! `/etc/apt/sources.list` — the same archive `apt-get` and `mmdebstrap` use.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use super::{Cache, CacheOutcome, ImageError};

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
        .ok_or_else(|| {
            ImageError::Fetch(
                "cannot find a Debian archive in the host's apt sources (/etc/apt/sources.list.d/*.sources, /etc/apt/sources.list); set VMREPRO_DEBIAN_MIRROR".into(),
            )
        })
}

/// `URIs:` of deb822 stanzas whose `Types:` include `deb` and whose suites are not
/// security suites.
pub fn deb822_uris(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for stanza in text.split("\n\n") {
        let field = |name: &str| stanza.lines().find_map(|l| l.strip_prefix(name).map(|v| v.trim().to_string()));
        let types = field("Types:").unwrap_or_default();
        let suites = field("Suites:").unwrap_or_default();
        if !types.split_whitespace().any(|t| t == "deb") || suites.contains("-security") {
            continue;
        }
        if let Some(uris) = field("URIs:") {
            out.extend(uris.split_whitespace().map(str::to_string));
        }
    }
    out
}

/// URIs of one-line `deb URI SUITE …` entries (options in `[…]` skipped).
pub fn one_line_uris(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| {
            let l = l.trim();
            let rest = l.strip_prefix("deb ")?;
            let rest = if rest.trim_start().starts_with('[') { rest.split_once(']')?.1 } else { rest };
            let mut parts = rest.split_whitespace();
            let uri = parts.next()?;
            let suite = parts.next().unwrap_or_default();
            (!suite.contains("-security")).then(|| uri.to_string())
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
    let file_name = Path::new(filename)
        .file_name()
        .map(|f| f.to_string_lossy().into_owned())
        .unwrap_or_else(|| "package.deb".into());
    let (dir, outcome) = cache.get_or_build("debs", sha256, |tmp| {
        let url = format!("{}/{filename}", archive_url()?);
        download_verified(&url, &tmp.join(&file_name), size, sha256)
    })?;
    Ok((dir.join(file_name), outcome))
}

fn download_verified(url: &str, dest: &Path, size: u64, sha256: &str) -> Result<(), ImageError> {
    let resp = ureq::get(url).timeout(std::time::Duration::from_secs(600)).call().map_err(|e| match e {
        ureq::Error::Status(404, _) => ImageError::Fetch(format!(
            "{url}: 404 Not Found — the pinned version has left the archive; fetch it from Debian's snapshot archive (set VMREPRO_DEBIAN_MIRROR) or re-pin images/kernels.yaml"
        )),
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
        return Err(ImageError::Fetch(format!(
            "{url}: expected {size} bytes with SHA-256 {sha256}, got {total} bytes with SHA-256 {got}; refusing it"
        )));
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
    fn one_line_handles_options() {
        let text = "# c\ndeb [arch=amd64 signed-by=/x] http://c.example/debian bookworm main\ndeb http://c.example/debian-security bookworm-security main\n";
        assert_eq!(one_line_uris(text), vec!["http://c.example/debian".to_string()]);
    }
}
