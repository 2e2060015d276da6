//! Reading a suite file: size and encoding checks, YAML deserialization, and errors
//! that point at the file, the key path and the line.

use std::fmt;
use std::path::{Path, PathBuf};

use super::locate::{Locations, Position};
use super::SuiteSpec;

/// Largest suite file accepted, in bytes. Suites are hand-written; anything bigger is
/// a mistake (or an attack) and is refused before parsing.
pub const MAX_SUITE_BYTES: u64 = 1024 * 1024;

/// A suite file read and deserialized (not yet validated).
#[derive(Debug)]
pub struct SuiteFile {
    /// The path as given by the user.
    pub path: PathBuf,
    /// The folder relative paths in the suite resolve against.
    pub dir: PathBuf,
    /// The file's text.
    pub text: String,
    /// The deserialized spec.
    pub spec: SuiteSpec,
    locations: Locations,
}

/// An error in a suite file, located where possible.
///
/// `Display` renders the whole diagnostic: `error: FILE:LINE:COL: KEY: MESSAGE`, then the
/// offending line with a caret under the column.
#[derive(Debug, thiserror::Error)]
pub enum SpecError {
    /// The file couldn't be opened or read.
    #[error("error: cannot read suite file {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// One or more problems inside the file.
    #[error("{}", render_all(.0))]
    Invalid(Vec<Located>),
}

impl SpecError {
    /// The located problems (empty for [`SpecError::Read`]).
    pub fn problems(&self) -> &[Located] {
        match self {
            SpecError::Read { .. } => &[],
            SpecError::Invalid(v) => v,
        }
    }
}

fn render_all(v: &[Located]) -> String {
    v.iter().map(|l| l.to_string()).collect::<Vec<_>>().join("\n")
}

/// One problem in a suite file.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Located {
    /// The suite file.
    pub file: PathBuf,
    /// Key path such as `vms[1].address`, when the problem belongs to a key.
    pub key: Option<String>,
    /// What is wrong, in words.
    pub message: String,
    /// Where, when known.
    pub position: Option<Position>,
    /// The text of the line at `position`.
    pub line_text: Option<String>,
}

impl Located {
    fn new(file: &Path, text: &str, key: Option<String>, message: String, position: Option<Position>) -> Self {
        let line_text = position.and_then(|p| text.lines().nth(p.line.saturating_sub(1))).map(str::to_string);
        Located { file: file.to_path_buf(), key, message, position, line_text }
    }
}

impl fmt::Display for Located {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "error: {}", self.file.display())?;
        if let Some(p) = self.position {
            write!(f, ":{}:{}", p.line, p.column)?;
        }
        write!(f, ": ")?;
        if let Some(k) = &self.key {
            write!(f, "{k}: ")?;
        }
        write!(f, "{}", self.message)?;
        if let (Some(p), Some(line)) = (self.position, &self.line_text) {
            let n = p.line.to_string();
            let pad = " ".repeat(n.len());
            // Columns count characters; keep tabs so the caret lines up under them.
            let lead: String =
                line.chars().take(p.column.saturating_sub(1)).map(|c| if c == '\t' { '\t' } else { ' ' }).collect();
            write!(f, "\n{pad} |\n{n} | {line}\n{pad} | {lead}^")?;
        }
        Ok(())
    }
}

/// Reads, checks and deserializes the suite at `path`.
///
/// Errors: [`SpecError::Read`] when the file can't be read; [`SpecError::Invalid`] when
/// it is larger than [`MAX_SUITE_BYTES`], not UTF-8, not YAML, or doesn't match the
/// schema (unknown key, wrong type, missing field), each with line and column.
pub fn load_suite(path: &Path) -> Result<SuiteFile, SpecError> {
    let read_err = |source| SpecError::Read { path: path.to_path_buf(), source };
    let meta = std::fs::metadata(path).map_err(read_err)?;
    if meta.len() > MAX_SUITE_BYTES {
        return Err(SpecError::Invalid(vec![Located::new(
            path,
            "",
            None,
            format!("file is {} bytes; suites are limited to {MAX_SUITE_BYTES} bytes", meta.len()),
            None,
        )]));
    }
    let bytes = std::fs::read(path).map_err(read_err)?;
    let text = match String::from_utf8(bytes) {
        Ok(t) => t,
        Err(e) => {
            let valid = e.utf8_error().valid_up_to();
            let good = String::from_utf8_lossy(&e.as_bytes()[..valid]).into_owned();
            let line = good.matches('\n').count() + 1;
            let column = good.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
            let shown = String::from_utf8_lossy(e.as_bytes()).into_owned();
            return Err(SpecError::Invalid(vec![Located::new(
                path,
                &shown,
                None,
                format!("invalid UTF-8 (byte 0x{:02x} at offset {valid}); suites must be UTF-8", e.as_bytes()[valid]),
                Some(Position { line, column }),
            )]));
        }
    };
    parse_suite(path, text)
}

/// Deserializes suite `text` that was read from `path` (used by [`load_suite`]; public
/// for tests that build suites in memory).
pub fn parse_suite(path: &Path, text: String) -> Result<SuiteFile, SpecError> {
    let spec: SuiteSpec = match serde_yaml::from_str(&text) {
        Ok(s) => s,
        Err(e) => return Err(SpecError::Invalid(vec![from_yaml_error(path, &text, &e)])),
    };
    let locations = Locations::of(&text);
    let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
    let dir = if dir.as_os_str().is_empty() { PathBuf::from(".") } else { dir };
    Ok(SuiteFile { path: path.to_path_buf(), dir, text, spec, locations })
}

fn from_yaml_error(path: &Path, text: &str, e: &serde_yaml::Error) -> Located {
    let mut msg = e.to_string();
    let position = e.location().map(|l| Position { line: l.line(), column: l.column() });
    // serde_yaml appends " at line L column C" (and libyaml puts it after the problem);
    // we show the position ourselves.
    if let Some(p) = position {
        msg = msg.replacen(&format!(" at line {} column {}", p.line, p.column), "", 1);
    } else if let Some(i) = msg.rfind(" at line ") {
        msg.truncate(i);
    }
    // A YAML syntax error may name a second place, where the construct it was parsing
    // began: "…, while parsing a block mapping at line 6 column 5".
    if let Some(w) = msg.find(", while ") {
        if let Some(a) = msg[w..].find(" at line ") {
            msg.replace_range(w + a..w + a + " at line ".len(), " that starts at line ");
        }
    }
    // …and prefixes the key path ("vms[0].kernel: …") for nested errors.
    let mut key = None;
    if let Some((k, rest)) = msg.split_once(": ") {
        if !k.is_empty() && k.chars().all(|c| c.is_ascii_alphanumeric() || "_-[].".contains(c)) {
            key = Some(k.to_string());
            msg = rest.to_string();
        }
    }
    // Syntax errors carry no key path; take the one the parser was inside.
    if key.is_none() {
        key = Locations::path_at_syntax_error(text);
    }
    let position = position.or_else(|| key.as_deref().and_then(|k| Locations::of(text).value(k)));
    msg = explain(&msg, key.as_deref(), position.and_then(|p| text.lines().nth(p.line.saturating_sub(1))));
    Located::new(path, text, key, msg, position)
}

/// Rewords serde's and libyaml's messages where they speak Rust or hide the cause.
fn explain(msg: &str, key: Option<&str>, line: Option<&str>) -> String {
    let mut msg = msg
        .replace("expected u64", "expected a whole number (0 or more)")
        .replace("expected u32", "expected a whole number (0 or more)")
        .replace("expected i32", "expected a whole number")
        .replace("expected a duration", "expected a duration with a unit, e.g. 90s, 5m or 2h");
    let last = key.map(|k| k.rsplit('.').next().unwrap_or(k));
    if msg == "invalid IP address syntax" {
        match last {
            Some("subnet") => msg.push_str("; expected an IPv4 subnet in CIDR notation, e.g. 10.77.0.0/24"),
            Some("address") => msg.push_str("; expected an IPv4 address, e.g. 10.77.0.11"),
            _ => {}
        }
    }
    let indent = line.map(|l| &l[..l.len() - l.trim_start().len()]);
    if indent.is_some_and(|i| i.contains('\t')) {
        msg.push_str(" (a tab: YAML indentation must use spaces)");
    } else if msg.starts_with("did not find expected key") {
        msg.push_str(" (is this line indented like the keys above it?)");
    }
    msg
}

impl SuiteFile {
    /// Resolves a path from the suite against the suite file's folder; the result is
    /// absolute (tools run in other folders, e.g. `patch` inside a kernel tree).
    pub fn resolve(&self, p: &Path) -> PathBuf {
        let joined = if p.is_absolute() { p.to_path_buf() } else { self.dir.join(p) };
        std::path::absolute(&joined).unwrap_or(joined)
    }

    /// Builds a located error for `key` (a key path), pointing at its value.
    pub fn error_at(&self, key: &str, message: impl Into<String>) -> Located {
        let pos = self.locations.value(key);
        Located::new(&self.path, &self.text, Some(key.to_string()), message.into(), pos)
    }
}
