//! `vmrepro images repin`: moving the pins of `images/kernels.yaml` to what the Debian
//! archive serves now.
//!
//! Debian drops superseded kernel packages at point releases and security updates;
//! a pinned `.deb` then answers 404 and a fresh machine can't run the suites. For each
//! pin this reads the archive's current indexes ([`super::index`]) of the pin's suite
//! (and, for a release codename, of its `-security` suite, and the other way round),
//! finds the newest package of the same *kind*, and rewrites the pin in place,
//! keeping the file's comments and layout.
//!
//! A kernel image's name carries its ABI (`linux-image-6.1.0-50-cloud-amd64`, or since
//! 6.12 its version: `linux-image-6.12.95+deb12-cloud-amd64`), so "the same kind" is
//! the same name with every all-digit part after the series replaced
//! ([`kernel_kind`]): `linux-image-6.1.0-50-cloud-amd64` and `…-6.1.0-51-…` are one
//! kind, `…-cloud-amd64-unsigned`, `…-cloud-amd64-dbg` or `linux-image-6.10…` are
//! not. A source package's name (`linux-source-6.1`) is its kind.

use std::cmp::Ordering;
use std::collections::BTreeMap;

use super::index::{compare_versions, IndexEntry};
use super::{ImageError, PinnedKernel, PinnedSource};

/// The cap on `images/kernels.yaml` when repin reads it to rewrite it, bytes (1 MiB;
/// the project's is about 4 KiB).
pub const MAX_MANIFEST_BYTES: u64 = 1 << 20;

/// Which entry of `images/kernels.yaml` a pin is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PinRef {
    /// `kernels:` entry, by series and flavour.
    Kernel {
        /// e.g. `6.1`.
        series: String,
        /// e.g. `cloud-amd64`.
        flavour: String,
    },
    /// `sources:` entry, by series.
    Source {
        /// e.g. `6.1`.
        series: String,
    },
}

impl std::fmt::Display for PinRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PinRef::Kernel { series, flavour } => write!(f, "kernel {series} {flavour}"),
            PinRef::Source { series } => write!(f, "source {series}"),
        }
    }
}

/// What a pin names now (the fields [`rewrite_manifest`] may change).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PinFields {
    /// Debian suite.
    pub suite: String,
    /// Package name.
    pub package: String,
    /// Version.
    pub version: String,
    /// Path in the archive.
    pub filename: String,
    /// Size, bytes.
    pub size: u64,
    /// SHA-256.
    pub sha256: String,
}

impl From<&IndexEntry> for PinFields {
    fn from(e: &IndexEntry) -> Self {
        PinFields {
            suite: e.suite.clone(),
            package: e.package.clone(),
            version: e.version.clone(),
            filename: e.filename.clone(),
            size: e.size,
            sha256: e.sha256.clone(),
        }
    }
}

/// What repin found for one pin.
#[derive(Debug, Clone)]
pub struct PinReport {
    /// The pin.
    pub pin: PinRef,
    /// What it names.
    pub old: PinFields,
    /// The suites whose indexes were searched.
    pub searched: Vec<String>,
    /// Whether the pinned file (path and SHA-256) is still in those indexes.
    pub present: bool,
    /// What it should name now.
    pub decision: Decision,
}

/// The outcome for one pin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Already the newest of its kind (or still there, with `stale_only`).
    Unchanged,
    /// Move to this package.
    Repin(PinFields),
    /// Nothing of its kind in the indexes searched: left as is.
    NotFound,
}

/// The suites to search for a pin of `suite`: itself, plus `<codename>-security` for
/// a release codename (`bookworm`), or the codename for a security suite. Backports
/// and other suites are searched alone.
pub fn candidate_suites(suite: &str) -> Vec<String> {
    if let Some(codename) = suite.strip_suffix("-security") {
        vec![codename.to_string(), suite.to_string()]
    } else if !suite.contains('-') {
        vec![suite.to_string(), format!("{suite}-security")]
    } else {
        vec![suite.to_string()]
    }
}

/// The kind of kernel image package `package` of `series`: the name after
/// `linux-image-<series>` with every all-digit part (between `.`, `-` and `+`) replaced
/// by `#`; `None` if the name isn't `linux-image-<series>…`.
pub fn kernel_kind(package: &str, series: &str) -> Option<String> {
    let rest = package.strip_prefix(&format!("linux-image-{series}"))?;
    let mut out = String::new();
    let mut token = String::new();
    let flush = |token: &mut String, out: &mut String| {
        if !token.is_empty() && token.chars().all(|c| c.is_ascii_digit()) {
            out.push('#');
        } else {
            out.push_str(token);
        }
        token.clear();
    };
    for c in rest.chars() {
        if matches!(c, '.' | '-' | '+') {
            flush(&mut token, &mut out);
            out.push(c);
        } else {
            token.push(c);
        }
    }
    flush(&mut token, &mut out);
    Some(out)
}

/// Decides every pin against `indexes` (suite → its entries). With `stale_only`, a pin
/// whose file is still listed stays as it is; otherwise every pin moves to the newest
/// package of its kind.
pub fn plan(
    kernels: &[PinnedKernel],
    sources: &[PinnedSource],
    indexes: &BTreeMap<String, Vec<IndexEntry>>,
    stale_only: bool,
) -> Vec<PinReport> {
    let mut out = Vec::new();
    let decide = |pin: PinRef, old: PinFields, matches: &dyn Fn(&IndexEntry) -> bool| {
        let searched: Vec<String> =
            candidate_suites(&old.suite).into_iter().filter(|s| indexes.contains_key(s)).collect();
        let found: Vec<&IndexEntry> = searched.iter().flat_map(|s| &indexes[s]).filter(|e| matches(e)).collect();
        let present = found.iter().any(|e| e.filename == old.filename && e.sha256 == old.sha256);
        let newest = found.iter().copied().max_by(|a, b| {
            compare_versions(&a.version, &b.version)
                // The same version in two suites: prefer the pin's own suite.
                .then_with(|| (a.suite == old.suite).cmp(&(b.suite == old.suite)))
        });
        let decision = match newest {
            None => Decision::NotFound,
            Some(_) if present && stale_only => Decision::Unchanged,
            Some(n) if n.filename == old.filename && n.sha256 == old.sha256 => Decision::Unchanged,
            Some(n) if present && compare_versions(&n.version, &old.version) != Ordering::Greater => {
                Decision::Unchanged
            }
            Some(n) => Decision::Repin(PinFields::from(n)),
        };
        PinReport { pin, old, searched, present, decision }
    };
    for k in kernels {
        let kind = kernel_kind(&k.package, &k.series);
        let old = PinFields {
            suite: k.suite.clone(),
            package: k.package.clone(),
            version: k.version.clone(),
            filename: k.filename.clone(),
            size: k.size,
            sha256: k.sha256.clone(),
        };
        let pin = PinRef::Kernel { series: k.series.clone(), flavour: k.flavour.clone() };
        out.push(decide(pin, old, &|e| kind.is_some() && kernel_kind(&e.package, &k.series) == kind));
    }
    for s in sources {
        let old = PinFields {
            suite: s.suite.clone(),
            package: s.package.clone(),
            version: s.version.clone(),
            filename: s.filename.clone(),
            size: s.size,
            sha256: s.sha256.clone(),
        };
        out.push(decide(PinRef::Source { series: s.series.clone() }, old, &|e| e.package == s.package));
    }
    out
}

/// Rewrites the text of `images/kernels.yaml`: for each `(pin, fields)` the entry's
/// `suite`, `package`, `version`, `filename`, `size` and `sha256` values (nothing
/// else: comments, order, quoting of other keys and blank lines stay), and `pinned_on`.
/// The result is parsed back and checked to hold exactly the expected pins.
///
/// Errors: [`ImageError::Recipe`] (with `path` for the message) when a pin's entry
/// can't be found in the text or the result doesn't read back as expected.
pub fn rewrite_manifest(
    path: &std::path::Path,
    text: &str,
    changes: &[(PinRef, PinFields)],
    pinned_on: &str,
) -> Result<String, ImageError> {
    let fail = |message: String| ImageError::Recipe { path: path.to_path_buf(), message };
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    // Items: (section, first line, end line).
    let mut items: Vec<(String, usize, usize)> = Vec::new();
    let mut section = String::new();
    for (i, line) in lines.iter().enumerate() {
        let trimmed = line.trim_start();
        let top_level = !line.starts_with(' ') && !trimmed.starts_with('#') && !trimmed.starts_with('-');
        if top_level && !trimmed.trim().is_empty() {
            section = trimmed.split(':').next().unwrap_or_default().trim().to_string();
            if let Some(last) = items.last_mut().filter(|l| l.2 == usize::MAX) {
                last.2 = i;
            }
        } else if trimmed.starts_with("- ") {
            if let Some(last) = items.last_mut().filter(|l| l.2 == usize::MAX) {
                last.2 = i;
            }
            items.push((section.clone(), i, usize::MAX));
        }
    }
    if let Some(last) = items.last_mut().filter(|l| l.2 == usize::MAX) {
        last.2 = lines.len();
    }
    let field = |line: &str| -> Option<(String, usize)> {
        let body = line.trim_start();
        let body_at = line.len() - body.len();
        let (body, at) = match body.strip_prefix("- ") {
            Some(b) => (b, body_at + 2),
            None => (body, body_at),
        };
        let (key, _) = body.split_once(':')?;
        let value_at = at + key.len() + 1 + (body[key.len() + 1..].len() - body[key.len() + 1..].trim_start().len());
        Some((key.trim().to_string(), value_at))
    };
    let unquote = |v: &str| v.trim().trim_matches('"').trim_matches('\'').to_string();
    let value_of = |range: (usize, usize), key: &str| {
        lines[range.0..range.1].iter().find_map(|l| {
            let (k, at) = field(l)?;
            (k == key).then(|| unquote(l[at..].split(" #").next().unwrap_or_default()))
        })
    };
    let mut out: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
    let replace = |out: &mut Vec<String>, i: usize, value: &str| {
        let line = lines[i];
        let Some((_, at)) = field(line) else { return };
        let rest = &line[at..];
        let comment = rest.find(" #").map(|c| rest[c..].trim_end_matches('\n').to_string()).unwrap_or_default();
        let eol = if line.ends_with('\n') { "\n" } else { "" };
        out[i] = format!("{}{}{comment}{eol}", &line[..at], yaml_scalar(value));
    };
    for (pin, new) in changes {
        let (section, want) = match pin {
            PinRef::Kernel { series, flavour } => ("kernels", vec![("series", series), ("flavour", flavour)]),
            PinRef::Source { series } => ("sources", vec![("series", series)]),
        };
        let item = items
            .iter()
            .find(|(s, a, b)| {
                s == section && want.iter().all(|(k, v)| value_of((*a, *b), k).as_deref() == Some(v.as_str()))
            })
            .ok_or_else(|| fail(format!("cannot find the entry of {pin} to rewrite")))?;
        let values = [
            ("suite", new.suite.clone()),
            ("package", new.package.clone()),
            ("version", new.version.clone()),
            ("filename", new.filename.clone()),
            ("size", new.size.to_string()),
            ("sha256", new.sha256.clone()),
        ];
        for (i, line) in lines.iter().enumerate().take(item.2).skip(item.1) {
            if let Some((k, _)) = field(line) {
                if let Some((_, v)) = values.iter().find(|(name, _)| *name == k) {
                    replace(&mut out, i, v);
                }
            }
        }
    }
    if let Some(i) = lines.iter().position(|l| l.starts_with("pinned_on:")) {
        replace(&mut out, i, pinned_on);
    }
    let new_text: String = out.concat();
    check_rewrite(text, &new_text, changes, pinned_on).map_err(fail)?;
    Ok(new_text)
}

/// The rewritten manifest must read back as the old one with exactly `changes` made.
fn check_rewrite(old: &str, new: &str, changes: &[(PinRef, PinFields)], pinned_on: &str) -> Result<(), String> {
    let parse = |t: &str| serde_yaml::from_str::<super::KernelManifest>(t).map_err(|e| e.to_string());
    let mut want = parse(old).map_err(|e| format!("before rewriting: {e}"))?;
    let got = parse(new).map_err(|e| format!("the rewritten file doesn't parse ({e}); left unchanged"))?;
    want.pinned_on = pinned_on.to_string();
    for (pin, f) in changes {
        match pin {
            PinRef::Kernel { series, flavour } => {
                for k in want.kernels.iter_mut().filter(|k| &k.series == series && &k.flavour == flavour) {
                    (k.suite, k.package, k.version) = (f.suite.clone(), f.package.clone(), f.version.clone());
                    (k.filename, k.size, k.sha256) = (f.filename.clone(), f.size, f.sha256.clone());
                }
            }
            PinRef::Source { series } => {
                for s in want.sources.iter_mut().filter(|s| &s.series == series) {
                    (s.suite, s.package, s.version) = (f.suite.clone(), f.package.clone(), f.version.clone());
                    (s.filename, s.size, s.sha256) = (f.filename.clone(), f.size, f.sha256.clone());
                }
            }
        }
    }
    if got.kernels != want.kernels || got.sources != want.sources || got.pinned_on != want.pinned_on {
        return Err("the rewritten file doesn't hold the expected pins; left unchanged".into());
    }
    Ok(())
}

/// `s` as a YAML scalar: plain when YAML reads it back as the same string (or it is a
/// number), else double-quoted.
fn yaml_scalar(s: &str) -> String {
    let plain_ok = match serde_yaml::from_str::<serde_yaml::Value>(s) {
        Ok(serde_yaml::Value::String(v)) => v == s,
        Ok(serde_yaml::Value::Number(_)) => s.chars().all(|c| c.is_ascii_digit()),
        _ => false,
    };
    if plain_ok && !s.contains(" #") {
        s.to_string()
    } else {
        serde_json::to_string(s).expect("a string serializes")
    }
}

/// Today's date (UTC) as `YYYY-MM-DD`, for `pinned_on`.
pub fn today() -> String {
    humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string()[..10].to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_follow_the_abi_number_but_not_the_flavour() {
        let k = |p| kernel_kind(p, "6.1");
        assert_eq!(k("linux-image-6.1.0-50-cloud-amd64").as_deref(), Some(".#-#-cloud-amd64"));
        assert_eq!(k("linux-image-6.1.0-50-cloud-amd64"), k("linux-image-6.1.0-51-cloud-amd64"));
        assert_ne!(k("linux-image-6.1.0-50-cloud-amd64"), k("linux-image-6.1.0-51-cloud-amd64-unsigned"));
        assert_ne!(k("linux-image-6.1.0-50-cloud-amd64"), k("linux-image-6.1.0-51-cloud-amd64-dbg"));
        assert_ne!(k("linux-image-6.1.0-50-cloud-amd64"), k("linux-image-6.1.0-51-amd64"));
        assert_ne!(k("linux-image-6.1.0-50-cloud-amd64"), k("linux-image-6.10.0-1-cloud-amd64"));
        assert_eq!(k("linux-image-cloud-amd64"), None, "the meta-package is not a kernel of a series");
        let k12 = |p| kernel_kind(p, "6.12");
        assert_eq!(k12("linux-image-6.12.95+deb12-cloud-amd64").as_deref(), Some(".#+deb12-cloud-amd64"));
        assert_eq!(k12("linux-image-6.12.95+deb12-cloud-amd64"), k12("linux-image-6.12.96+deb12-cloud-amd64"));
        assert_ne!(k12("linux-image-6.12.95+deb12-cloud-amd64"), k12("linux-image-6.12.96+deb13-cloud-amd64"));
    }

    #[test]
    fn suites_searched_for_a_pin() {
        assert_eq!(candidate_suites("bookworm"), ["bookworm", "bookworm-security"]);
        assert_eq!(candidate_suites("bullseye-security"), ["bullseye", "bullseye-security"]);
        assert_eq!(candidate_suites("bookworm-backports"), ["bookworm-backports"]);
    }

    #[test]
    fn scalars_stay_plain_unless_yaml_would_misread_them() {
        assert_eq!(yaml_scalar("6.12.95-1~bpo12+1"), "6.12.95-1~bpo12+1");
        assert_eq!(yaml_scalar("pool/main/l/x_1_amd64.deb"), "pool/main/l/x_1_amd64.deb");
        assert_eq!(yaml_scalar("26484304"), "26484304");
        assert_eq!(yaml_scalar("6.1"), "\"6.1\"", "a float-looking string is quoted");
        assert_eq!(yaml_scalar("true"), "\"true\"");
        assert_eq!(yaml_scalar("2026-12-01"), "2026-12-01");
    }
}
