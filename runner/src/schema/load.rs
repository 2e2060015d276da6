//! Reading a suite file: size and encoding checks, YAML deserialization, and errors
//! that point at the file, the key path and the line.
//!
//! In order, a suite file is: opened without blocking and refused unless it is a
//! regular file (symbolic links followed: a named pipe would hang, `/dev/zero` never
//! ends); read through a bounded reader (at most [`MAX_SUITE_BYTES`]);
//! decoded as UTF-8; stripped of a leading byte-order mark, its line breaks made `\n`;
//! scanned for characters YAML refuses, look-alike indentation and nesting deeper than
//! [`scan::MAX_DEPTH`] ([`scan`]); parsed once with positions to find duplicate keys,
//! a second document and odd characters in keys and values ([`Locations::analyse`]);
//! deserialized; and checked for nulls that became text (`run: ~` must not run `~`).
//! Every step reports with the file, line and column.

use std::fmt;
use std::io::Read;
use std::path::{Path, PathBuf};

use super::locate::{Analysis, Locations, Null, Position, Segment};
use super::scan;
use super::text::{escape_controls, escaped_width, non_ascii_hint};
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
    /// The folder every path must stay in (canonical), when loaded with
    /// [`LoadOptions::confine_to`].
    confine_to: Option<PathBuf>,
    /// [`LoadOptions::trees`].
    trees: crate::infra::images::tree::Trees,
}

/// An error in a suite file, located where possible.
///
/// `Display` renders the whole diagnostic: `error: FILE:LINE:COL: KEY: MESSAGE`, then the
/// offending line with a caret under the column.
#[derive(Debug, thiserror::Error)]
pub enum SpecError {
    /// The file couldn't be opened or read.
    #[error("error: cannot read suite file {}: {source}", escape_controls(&path.display().to_string()))]
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
    ///
    /// Used by the integration tests (not by the runner).
    #[cfg_attr(vmrepro_dead_code, allow(dead_code))]
    pub fn problems(&self) -> &[Located] {
        match self {
            SpecError::Read { .. } => &[],
            SpecError::Invalid(v) => v,
        }
    }
}

/// Most problems reported for one file; a suite with more has one mistake repeated (or
/// was generated), and printing tens of thousands helps no one.
pub const MAX_PROBLEMS: usize = 50;

/// The first of `total` problems cut to [`MAX_PROBLEMS`], the next one's place saying
/// how many more there are (so it has a line to show, like every problem).
/// `problems` holds at least the first `MAX_PROBLEMS + 1` of them (or all).
pub fn capped(mut problems: Vec<Located>, total: usize) -> Vec<Located> {
    if total > MAX_PROBLEMS && problems.len() > MAX_PROBLEMS {
        let more = total - MAX_PROBLEMS;
        problems.truncate(MAX_PROBLEMS + 1);
        let next = &mut problems[MAX_PROBLEMS];
        next.key = None;
        next.message = format!("… and {more} more problems from here on; the first {MAX_PROBLEMS} are shown");
    }
    problems
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
        let line_text = position.and_then(|p| line_of(text, p.line)).map(str::to_string);
        Located { file: file.to_path_buf(), key, message, position, line_text }
    }
}

/// Line `n` (1-based) of `text` (whose line breaks are `\n`); an empty text has one
/// empty line, so a problem at 1:1 of an empty file still shows a line.
fn line_of(text: &str, n: usize) -> Option<&str> {
    text.split('\n').nth(n.checked_sub(1)?)
}

/// Longest source line shown whole; a longer one is cut to a window around the column.
const MAX_SHOWN_LINE: usize = 160;

impl fmt::Display for Located {
    /// Every part that comes from the suite (file name, key path, message, line) is
    /// shown with its control characters escaped ([`escape_controls`]): a suite can't
    /// clear the screen or hide text through an error message.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "error: {}", escape_controls(&self.file.display().to_string()))?;
        if let Some(p) = self.position {
            write!(f, ":{}:{}", p.line, p.column)?;
        }
        write!(f, ": ")?;
        if let Some(k) = &self.key {
            write!(f, "{}: ", escape_controls(k))?;
        }
        write!(f, "{}", escape_controls(&self.message))?;
        if let (Some(p), Some(line)) = (self.position, &self.line_text) {
            let n = p.line.to_string();
            let pad = " ".repeat(n.len());
            let chars: Vec<char> = line.chars().collect();
            let col = p.column.saturating_sub(1).min(chars.len());
            // A long line is shown as a window around the column, marked with '…'.
            let (from, to) = if chars.len() > MAX_SHOWN_LINE {
                let from = col.saturating_sub(MAX_SHOWN_LINE / 2);
                (from, (from + MAX_SHOWN_LINE).min(chars.len()))
            } else {
                (0, chars.len())
            };
            let before = if from > 0 { "…" } else { "" };
            let after = if to < chars.len() { "…" } else { "" };
            let shown: String = chars[from..to].iter().collect();
            // Columns count characters; keep tabs so the caret lines up under them, and
            // leave room for escaped characters.
            let lead: String = before
                .chars()
                .map(|_| ' ')
                .chain(chars[from..col].iter().flat_map(|&c| {
                    let w = if c == '\t' { 1 } else { escaped_width(c) };
                    std::iter::repeat_n(if c == '\t' { '\t' } else { ' ' }, w)
                }))
                .collect();
            write!(f, "\n{pad} |\n{n} | {before}{}{after}\n{pad} | {lead}^", escape_controls(&shown))?;
        }
        Ok(())
    }
}

/// How a suite file is loaded.
#[derive(Debug, Clone, Default)]
pub struct LoadOptions {
    /// Every file the suite names (kernel `path` and `modules`, `source.fragments` and
    /// `source.patches`) must lie inside this folder once symbolic links are resolved.
    /// `None` (the default, for the repository's suites): paths may leave the suite's
    /// folder, e.g. `../images/kernels/nfs-udp-guest.config`.
    ///
    /// Set it to the bundle's folder when the suite comes from a bundle (`vmrepro
    /// replay`): a suite written by someone else may then not make the runner read,
    /// build with or copy any file outside what was handed over.
    pub confine_to: Option<PathBuf>,
    /// Which tree names map to checkouts here (and, replaying a bundle, which commit each
    /// `(tree, rev)` was): for `kernel: {tree, rev}`. [`LoadOptions::default`] has none;
    /// [`crate::suite::load`] uses [`Trees::current`](crate::infra::images::tree::Trees::current).
    pub trees: crate::infra::images::tree::Trees,
}

/// Reads, checks and deserializes the suite at `path` (a suite of the repository:
/// see [`LoadOptions`] for one taken from a bundle).
///
/// Errors: [`SpecError::Read`] when the file can't be read; [`SpecError::Invalid`] when
/// it is not a regular file (a named pipe, device or folder, symbolic links followed),
/// larger than [`MAX_SUITE_BYTES`], not UTF-8, not YAML, or doesn't match the
/// schema (unknown key, wrong type, missing field, duplicate key, null where a value is
/// required), each with line and column.
///
/// Used by the integration tests (not by the runner).
#[cfg_attr(vmrepro_dead_code, allow(dead_code))]
pub fn load_suite(path: &Path) -> Result<SuiteFile, SpecError> {
    load_suite_with(path, &LoadOptions::default())
}

/// [`load_suite`] with `options`; for a suite taken from a bundle use
/// `LoadOptions { confine_to: Some(bundle_dir) }` (see [`LoadOptions::confine_to`]):
/// validation then refuses, located at the key, every path that resolves outside it.
///
/// Errors: as [`load_suite`]; [`SpecError::Read`] also when `confine_to` can't be
/// resolved.
pub fn load_suite_with(path: &Path, options: &LoadOptions) -> Result<SuiteFile, SpecError> {
    let read_err = |source| SpecError::Read { path: path.to_path_buf(), source };
    let too_large = |what: String| {
        SpecError::Invalid(vec![Located::new(
            path,
            "",
            None,
            format!("{what}; suites are limited to {MAX_SUITE_BYTES} bytes"),
            None,
        )])
    };
    // Opened without blocking (opening a named pipe for reading otherwise waits for a
    // writer forever), then judged by what was opened, symbolic links followed: only a
    // regular file is a suite. A pipe, socket, device or folder is refused by name.
    let file = {
        use std::os::unix::fs::OpenOptionsExt;
        std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK).open(path).map_err(read_err)?
    };
    let meta = file.metadata().map_err(read_err)?;
    if !meta.is_file() {
        return Err(SpecError::Invalid(vec![Located::new(
            path,
            "",
            None,
            format!("not a regular file but {}; a suite must be a regular file", crate::schema::text::file_kind(&meta)),
            None,
        )]));
    }
    if meta.len() > MAX_SUITE_BYTES {
        return Err(too_large(format!("file is {} bytes", meta.len())));
    }
    // The file may grow between the check and the read: read at most one byte past
    // the limit.
    let mut bytes = Vec::new();
    file.take(MAX_SUITE_BYTES + 1).read_to_end(&mut bytes).map_err(read_err)?;
    if bytes.len() as u64 > MAX_SUITE_BYTES {
        return Err(too_large(format!("file yields more than {MAX_SUITE_BYTES} bytes")));
    }
    let text = match String::from_utf8(bytes) {
        Ok(t) => t,
        Err(e) => {
            let valid = e.utf8_error().valid_up_to();
            let good = scan::normalize(String::from_utf8_lossy(&e.as_bytes()[..valid]).into_owned());
            let line = good.matches('\n').count() + 1;
            let column = good.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
            let shown = scan::normalize(String::from_utf8_lossy(e.as_bytes()).into_owned());
            return Err(SpecError::Invalid(vec![Located::new(
                path,
                &shown,
                None,
                format!("invalid UTF-8 (byte 0x{:02x}); suites must be UTF-8", e.as_bytes()[valid]),
                Some(Position { line, column }),
            )]));
        }
    };
    parse_suite_with(path, text, options)
}

/// Deserializes suite `text` that was read from `path` (used by [`load_suite`]; public
/// for tests that build suites in memory).
///
/// Used by the integration tests (not by the runner).
#[cfg_attr(vmrepro_dead_code, allow(dead_code))]
pub fn parse_suite(path: &Path, text: String) -> Result<SuiteFile, SpecError> {
    parse_suite_with(path, text, &LoadOptions::default())
}

/// [`parse_suite`] with `options` (see [`load_suite_with`]).
pub fn parse_suite_with(path: &Path, text: String, options: &LoadOptions) -> Result<SuiteFile, SpecError> {
    let text = scan::normalize(text);
    let invalid = |v: Vec<Located>| SpecError::Invalid(v);
    let first = scan::characters(&text).or_else(|| scan::indentation(&text)).or_else(|| scan::depth(&text));
    if let Some(finding) = first {
        return Err(invalid(vec![Located::new(path, &text, None, finding.message, Some(finding.position))]));
    }
    if text.split('\n').all(|l| l.trim().is_empty() || l.trim_start().starts_with('#')) {
        return Err(invalid(vec![Located::new(
            path,
            &text,
            None,
            EMPTY.into(),
            Some(Position { line: 1, column: 1 }),
        )]));
    }
    let analysis = Locations::analyse(&text);
    if !analysis.problems.is_empty() {
        let mut problems = analysis.problems;
        problems.sort_by_key(|p| (p.position.line, p.position.column));
        let total = problems.len();
        problems.truncate(MAX_PROBLEMS + 1);
        return Err(invalid(capped(
            problems
                .into_iter()
                .map(|p| Located::new(path, &text, Some(p.key).filter(|k| !k.is_empty()), p.message, Some(p.position)))
                .collect(),
            total,
        )));
    }
    let spec: SuiteSpec = match serde_yaml::from_str(&text) {
        Ok(s) => s,
        Err(e) => {
            let mut located = from_yaml_error(path, &text, &e, &analysis);
            // A null where a value of another type is required ("invalid IPv4 address
            // syntax" for `address: ~`, "unknown variant `~`" for a choice): say it is a
            // null.
            if let Some(n) = analysis.nulls.iter().find(|n| Some(n.position) == located.position) {
                if located.message.contains("invalid") || located.message.starts_with("unknown variant") {
                    located.message = null_message(n);
                }
            }
            // A document with no keys at all (`---` alone) is an empty suite.
            if located.key.is_none() && located.message.starts_with("missing field") && analysis.locations.is_empty() {
                located = Located::new(path, &text, None, EMPTY.into(), Some(Position { line: 1, column: 1 }));
            }
            return Err(invalid(vec![located]));
        }
    };
    // libyaml read what yaml-rust2 could not: the checks above did not run on it, so it
    // is refused with yaml-rust2's reason (the two grammars differ only at the edges).
    // Judgement: refusing valid but unusual YAML (a tab after ':') is better than
    // checking a suite without its positions, duplicate keys and nulls.
    if let Some((position, why)) = analysis.error {
        let line = line_of(&text, position.line).unwrap_or_default();
        let message = if line.contains(":\t") {
            "a tab after ':'; write a space (YAML parsers disagree about tabs here)".to_string()
        } else if why == "invalid indentation" {
            "YAML parsers disagree about this line's indentation; indent the lines of a [ ] or { } list more than its key".to_string()
        } else {
            format!("YAML parsers disagree about this line ({why}); write it more plainly")
        };
        return Err(invalid(vec![Located::new(path, &text, None, message, Some(position))]));
    }
    let nulls = coerced_nulls(&spec, &analysis.nulls);
    if !nulls.is_empty() {
        let total = nulls.len();
        return Err(invalid(capped(
            nulls
                .into_iter()
                .take(MAX_PROBLEMS + 1)
                .map(|n| {
                    let message = null_message(n);
                    Located::new(path, &text, Some(n.path.clone()), message, Some(n.position))
                })
                .collect(),
            total,
        )));
    }
    let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
    let dir = if dir.as_os_str().is_empty() { PathBuf::from(".") } else { dir };
    let confine_to = match &options.confine_to {
        Some(root) => {
            Some(std::fs::canonicalize(root).map_err(|source| SpecError::Read { path: root.clone(), source })?)
        }
        None => None,
    };
    Ok(SuiteFile {
        path: path.to_path_buf(),
        dir,
        text,
        spec,
        locations: analysis.locations,
        confine_to,
        trees: options.trees.clone(),
    })
}

/// What an empty suite lacks.
const EMPTY: &str = "the file is empty; a suite needs at least `name`, `network` and `vms`";

/// The message for a null where a value is required.
fn null_message(n: &Null) -> String {
    match n.written.as_str() {
        "" => "no value is given (YAML reads an empty value as null), but one is required here".to_string(),
        "*" => "this alias stands for a null (no value), but a value is required here".to_string(),
        w => format!("`{w}` is YAML's null (no value), but a value is required here"),
    }
}

/// The nulls in the text that the deserializer turned into a value: a required text
/// field given `~` deserializes as the text "~", a map value as "null". A null that
/// became "not given" (an optional field) or an empty list is fine.
///
/// Found by serializing the spec back and looking at each null's path: generic over
/// every field, present and future.
fn coerced_nulls<'a>(spec: &SuiteSpec, nulls: &'a [Null]) -> Vec<&'a Null> {
    if nulls.is_empty() {
        return Vec::new();
    }
    let Ok(value) = serde_yaml::to_value(spec) else { return Vec::new() };
    nulls
        .iter()
        .filter(|n| {
            let mut v = &value;
            for s in &n.segments {
                let next = match s {
                    Segment::Key(k) => v.get(k.as_str()),
                    Segment::Index(i) => v.get(*i),
                };
                match next {
                    Some(x) => v = x,
                    None => return false,
                }
            }
            matches!(v, serde_yaml::Value::String(_) | serde_yaml::Value::Number(_) | serde_yaml::Value::Bool(_))
        })
        .collect()
}

/// `analysis` is the marked parse of the same text: when it succeeded the error is not
/// a syntax error, and its locations are reused.
fn from_yaml_error(path: &Path, text: &str, e: &serde_yaml::Error, analysis: &Analysis) -> Located {
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
    // An entry of a list checked as a whole (`packages`) says which one, below the
    // mapping serde names: `packages[2]: …`.
    let mut entry = false;
    if let (Some(k), Some((sub, rest))) = (&key, msg.split_once("]: ")) {
        let ok = sub.split_once('[').is_some_and(|(f, i)| {
            !f.is_empty() && f.chars().all(|c| c.is_ascii_lowercase() || c == '_') && i.parse::<usize>().is_ok()
        });
        if ok {
            key = Some(format!("{k}.{sub}]"));
            msg = rest.to_string();
            entry = true;
        }
    }
    let position = if entry { key.as_deref().and_then(|k| analysis.locations.value(k)).or(position) } else { position };
    // Syntax errors carry no key path; take the one the parser was inside.
    if key.is_none() && analysis.error.is_some() {
        key = Locations::path_at_syntax_error(text);
    }
    let position = position.or_else(|| key.as_deref().and_then(|k| analysis.locations.value(k)));
    msg = explain(&msg, key.as_deref(), position.and_then(|p| line_of(text, p.line).map(|l| (l, p.column))));
    Located::new(path, text, key, msg, position)
}

/// Rewords serde's and libyaml's messages where they speak Rust or hide the cause:
/// "invalid type: unit value, expected struct KernelSpec" becomes "expected a kernel
/// (a mapping with `debian`, `path` or `source`), found null (no value)".
fn explain(msg: &str, key: Option<&str>, at: Option<(&str, usize)>) -> String {
    let line = at.map(|(l, _)| l);
    let mut msg = reword_type_error(msg).unwrap_or_else(|| msg.to_string());
    let last = key.map(|k| k.rsplit('.').next().unwrap_or(k));
    if msg == "invalid IP address syntax" || msg == "invalid IPv4 address syntax" {
        match last {
            Some("subnet") => msg.push_str("; expected an IPv4 subnet in CIDR notation, e.g. 10.77.0.0/24"),
            Some("address") => msg.push_str("; expected an IPv4 address, e.g. 10.77.0.11"),
            _ => {}
        }
    }
    // A value that names nothing known may hold a look-alike character.
    if let Some(name) = msg.strip_prefix("unknown variant `").and_then(|r| r.split_once('`')).map(|(n, _)| n) {
        msg.push_str(&non_ascii_hint(name));
    }
    let indent = line.map(|l| &l[..l.len() - l.trim_start().len()]);
    let at_tab = at.is_some_and(|(l, col)| l.chars().nth(col.saturating_sub(1)) == Some('\t'));
    if indent.is_some_and(|i| i.contains('\t')) {
        msg.push_str(" (a tab: YAML indentation must use spaces)");
    } else if at_tab {
        msg.push_str(" (a tab: YAML needs a space here)");
    } else if msg.starts_with("did not find expected key") {
        msg.push_str(" (is this line indented like the keys above it?)");
    }
    msg
}

/// serde's "invalid type: FOUND, expected WANTED" (and "invalid value: …") in the
/// suite's words: "expected WANTED, found FOUND". `None` for other messages.
fn reword_type_error(msg: &str) -> Option<String> {
    let (kind, rest) = msg
        .strip_prefix("invalid type: ")
        .map(|r| ("type", r))
        .or_else(|| msg.strip_prefix("invalid value: ").map(|r| ("value", r)))?;
    let (found, wanted) = rest.rsplit_once(", expected ")?;
    // A number too large for the field: serde says "integer `N` as u128" (the type it
    // parsed N as), or "invalid value: integer `N`" for a value out of the type's range.
    let number = found.strip_prefix("integer `").and_then(|r| r.split_once('`')).map(|(n, _)| n);
    if let Some(n) = number {
        if found.ends_with(" as u128") || found.ends_with(" as i128") || kind == "value" {
            return Some(format!("{n} is out of range: expected {}", wanted_words(wanted, true)));
        }
    }
    Some(format!("expected {}, found {}", wanted_words(wanted, false), found_words(found)))
}

/// What serde expected, in the suite's words (`bounds`: with the type's range).
fn wanted_words(wanted: &str, bounds: bool) -> String {
    let whole = |lo: &str, hi: &str| {
        if bounds {
            format!("a whole number from {lo} to {hi}")
        } else if lo == "0" {
            "a whole number (0 or more)".to_string()
        } else {
            "a whole number".to_string()
        }
    };
    match wanted {
        "u8" => whole("0", "255"),
        "u16" => whole("0", "65535"),
        "u32" => whole("0", "4294967295"),
        "u64" | "usize" => whole("0", "18446744073709551615"),
        "i32" => whole("-2147483648", "2147483647"),
        "i64" => whole("-9223372036854775808", "9223372036854775807"),
        "a boolean" => "true or false".into(),
        "a sequence" => "a list ([a, b], or one `- item` per line)".into(),
        "a string" | "a borrowed string" => "a text value".into(),
        "a duration" => "a duration with a unit (e.g. 90s, 5m or 2h)".into(),
        "IPv4 address" => "an IPv4 address (e.g. 10.77.0.11)".into(),
        "IPv4 network address" => "an IPv4 subnet in CIDR notation (e.g. 10.77.0.0/24)".into(),
        "a map" => "a mapping (`key: value`)".into(),
        "field identifier" => "a key (a plain name)".into(),
        "variant identifier" => "a name".into(),
        "a YAML tag starting with '!'" => "one of its names (a plain word)".into(),
        "newtype variant" => "a name with settings, e.g. {mountstats: {mount: /mnt/nfs}}".into(),
        "unit variant" => "a bare name, e.g. netstat".into(),
        "map with a single key" => "a mapping with a single key, e.g. {netem: server}".into(),
        w => match w.strip_prefix("struct ").or_else(|| w.strip_prefix("enum ")) {
            Some("ObserverSpec") => super::measure::observer_hint(),
            Some(name) => type_words(name).to_string(),
            None => w.to_string(),
        },
    }
}

/// A schema type by what it is in a suite.
fn type_words(name: &str) -> &'static str {
    match name {
        "SuiteSpec" => "a suite: a mapping with `name`, `network` and `vms`",
        "NetworkSpec" => "a mapping with `subnet` (and `mtu`)",
        "VmDefaults" => "a mapping of VM settings (memory, cpus, accel, boot_timeout, step_timeout, rootfs)",
        "VmSpec" => "a VM: a mapping with `name`, `kernel` and `address`",
        "KernelSpec" => "a kernel: a mapping with `debian`, `path` or `source`",
        "SourceKernelSpec" => "a mapping with `debian` (and `fragments`, `patches`)",
        "VmNetSpec" => "a mapping with `egress` or `offloads`",
        "NetemSpec" => "netem settings: a mapping such as {loss: 1%, delay: 5ms}",
        "StepSpec" => "a step: a mapping with `name` and `run`",
        "NfsReadSpec" => "a mapping with `server`, `export`, `file` and `clients`",
        "NfsFileSpec" => "a mapping with `name`, `block_size` and `count`",
        "MeasureSpec" => "a measurement: a mapping with `name`, `on` and `run`",
        "MountstatsSpec" => "a mapping with `mount` (and `ops`)",
        "RecordSpec" => "a record: a mapping with `name` and `run`",
        "CheckSpec" => "a check: a mapping with `section` and `equals` or `contains`",
        "MeasureSnapshotSpec" => "a mapping with `verdict`, `exit_status`, `signs` or `sections`",
        "Accel" => "one of auto, kvm, tcg",
        "When" => "one of before, after",
        "Better" => "one of lower, higher",
        "SnapshotVerdicts" => "one of ratio_class, direction, none",
        _ => "a mapping of settings",
    }
}

/// What serde found, in the suite's words.
fn found_words(found: &str) -> String {
    match found {
        "unit value" => "null (no value)".into(),
        "sequence" => "a list".into(),
        "map" => "a mapping".into(),
        "unit variant" => "a bare name".into(),
        "newtype variant" => "a name with settings".into(),
        "enum" => "a tagged value (!tag)".into(),
        f => {
            if let Some(s) = f.strip_prefix("string ") {
                format!("the text {s}")
            } else if let Some(n) = f.strip_prefix("integer ").or_else(|| f.strip_prefix("floating point ")) {
                format!("the number {}", n.trim_matches('`'))
            } else if let Some(b) = f.strip_prefix("boolean ") {
                b.trim_matches('`').to_string()
            } else {
                f.to_string()
            }
        }
    }
}

impl SuiteFile {
    /// Resolves a path from the suite against the suite file's folder; the result is
    /// absolute (tools run in other folders, e.g. `patch` inside a kernel tree). For a
    /// suite loaded with [`LoadOptions::confine_to`], symbolic links are resolved too,
    /// so what is built with is the file validation checked.
    pub fn resolve(&self, p: &Path) -> PathBuf {
        let joined = if p.is_absolute() { p.to_path_buf() } else { self.dir.join(p) };
        let absolute = std::path::absolute(&joined).unwrap_or(joined);
        match &self.confine_to {
            Some(_) => std::fs::canonicalize(&absolute).unwrap_or(absolute),
            None => absolute,
        }
    }

    /// The folder every path of the suite must stay in, when it was loaded with
    /// [`LoadOptions::confine_to`] (canonical).
    pub fn confine_to(&self) -> Option<&Path> {
        self.confine_to.as_deref()
    }

    /// The tree mappings the suite was loaded with ([`LoadOptions::trees`]).
    pub fn trees(&self) -> &crate::infra::images::tree::Trees {
        &self.trees
    }

    /// The same file with `spec` in place of its own (what validation checks after the
    /// VMs' variants are expanded); locations still point into this file's text.
    pub fn with_spec(&self, spec: SuiteSpec) -> SuiteFile {
        SuiteFile {
            path: self.path.clone(),
            dir: self.dir.clone(),
            text: self.text.clone(),
            spec,
            locations: self.locations.clone(),
            confine_to: self.confine_to.clone(),
            trees: self.trees.clone(),
        }
    }

    /// Builds a located error for `key` (a key path), pointing at its value.
    pub fn error_at(&self, key: &str, message: impl Into<String>) -> Located {
        let pos = self.locations.value(key);
        Located::new(&self.path, &self.text, Some(key.to_string()), message.into(), pos)
    }
}
