//! Maps a key path such as `vms[1].address` to its line and column in the YAML text,
//! and finds what the deserializer would silently accept: duplicate keys, a second
//! document, nulls, and keys or values holding characters no suite needs.
//!
//! `serde_yaml` reports positions only for the errors it finds itself; the
//! cross-field rules of [`crate::suite::validate`] run on typed values that have lost their
//! positions. This module re-reads the text with `yaml-rust2`'s event parser (which
//! carries a [`Marker`] with every event) and records where each key path starts.

use std::collections::HashMap;

use yaml_rust2::parser::{Event, MarkedEventReceiver, Parser, Tag};
use yaml_rust2::scanner::{Marker, TScalarStyle};

use super::text::{char_note, describe, escape_controls, is_terminal_control};

/// A position in a text file: 1-based line and 1-based column (in characters).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Position {
    /// 1-based line number.
    pub line: usize,
    /// 1-based column number.
    pub column: usize,
}

impl std::fmt::Display for Position {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.line, self.column)
    }
}

/// Where each key path of a YAML document is, as found by a marked event parse.
#[derive(Debug, Clone, Default)]
pub struct Locations {
    /// key path → (position of the key, position of the value).
    entries: HashMap<String, (Position, Position)>,
}

/// One step of a key path: a mapping key or a sequence index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Segment {
    /// A key of a mapping.
    Key(String),
    /// An item of a sequence (0-based).
    Index(usize),
}

/// A value written as YAML's null (`~`, `null`, or nothing after the key).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Null {
    /// Where it is, step by step.
    pub segments: Vec<Segment>,
    /// Its key path, as in messages.
    pub path: String,
    /// Its position.
    pub position: Position,
    /// As written (empty when nothing was written; `*` for an alias of a null).
    pub written: String,
}

/// A structural problem: the key path it belongs to, where, and what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// Key path (empty at the top level).
    pub key: String,
    /// Where.
    pub position: Position,
    /// What is wrong.
    pub message: String,
}

/// What one pass over the text found: the locations, the problems every suite must be
/// free of, and the nulls (whether a null is allowed depends on the key; see
/// [`crate::schema::load`]).
#[derive(Debug, Default)]
pub struct Analysis {
    /// Key paths → positions.
    pub locations: Locations,
    /// Duplicate keys, a second document, odd characters in keys and values.
    pub problems: Vec<Problem>,
    /// Every null value.
    pub nulls: Vec<Null>,
    /// Where and why `yaml-rust2` could not parse the text (then the rest is empty).
    pub error: Option<(Position, String)>,
}

impl Locations {
    /// Parses `text` and records every key path. Returns an empty map when the text
    /// isn't valid YAML (the deserializer reports that error with its own position).
    #[cfg(test)]
    pub fn of(text: &str) -> Self {
        Self::analyse(text).locations
    }

    /// One marked event parse of `text`: see [`Analysis`]. When the text isn't valid
    /// YAML the analysis is empty (the deserializer reports that error).
    pub fn analyse(text: &str) -> Analysis {
        let mut recv = Recorder::default();
        let mut parser = Parser::new_from_str(text);
        if let Err(e) = parser.load(&mut recv, true) {
            return Analysis { error: Some((pos(*e.marker()), e.info().to_string())), ..Analysis::default() };
        }
        Analysis { locations: Self { entries: recv.entries }, problems: recv.problems, nulls: recv.nulls, error: None }
    }

    /// For text that is not valid YAML: the key path the parser was inside when it
    /// stopped (e.g. `vms[0].steps[0].after` for an unclosed `[`), or `None` when the
    /// text parses or the error is at the top level.
    pub fn path_at_syntax_error(text: &str) -> Option<String> {
        let mut recv = Recorder::default();
        let mut parser = Parser::new_from_str(text);
        parser.load(&mut recv, false).err()?;
        let top = recv.stack.last()?;
        let path = match &top.frame {
            Frame::Map { key: Some((k, _)), .. } => join(&top.path, k),
            _ => top.path.clone(),
        };
        Some(path).filter(|p| !p.is_empty())
    }

    /// Whether no key path was recorded (the text has no mapping or sequence).
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Position of the value at `path` (e.g. `vms[1].address`); if the exact path is
    /// absent, the value of the longest existing parent path.
    pub fn value(&self, path: &str) -> Option<Position> {
        self.lookup(path).map(|(_, v)| v)
    }

    /// Position of the key at `path` (for sequence items: the item's start); if the
    /// exact path is absent, the key of the longest existing parent path. Used by the
    /// integration tests (`tests/readme.rs` places every key of `suites/` with it).
    #[cfg_attr(vmrepro_dead_code, allow(dead_code))]
    pub fn key(&self, path: &str) -> Option<Position> {
        self.lookup(path).map(|(k, _)| k)
    }

    fn lookup(&self, path: &str) -> Option<(Position, Position)> {
        let mut p = path;
        loop {
            if let Some(e) = self.entries.get(p) {
                return Some(*e);
            }
            let cut = p.rfind(['.', '['])?;
            p = &p[..cut];
        }
    }
}

fn join(parent: &str, key: &str) -> String {
    if parent.is_empty() {
        key.to_string()
    } else {
        format!("{parent}.{key}")
    }
}

enum Frame {
    /// In a mapping; `key` is the pending key once read, with its position; `first`
    /// until the mapping's first key is read; `seen` holds every scalar key read so far.
    Map { key: Option<(String, Position)>, first: bool, seen: HashMap<String, Position> },
    /// In a sequence; the index of the next item.
    Seq { next: usize },
}

/// A mapping or sequence being read: its key path, its segments, and its state.
struct Open {
    path: String,
    segments: Vec<Segment>,
    frame: Frame,
}

#[derive(Default)]
struct Recorder {
    stack: Vec<Open>,
    entries: HashMap<String, (Position, Position)>,
    problems: Vec<Problem>,
    nulls: Vec<Null>,
    /// Anchors whose node is a null scalar (an alias of one is a null too).
    null_anchors: std::collections::HashSet<usize>,
    documents: usize,
}

fn pos(mark: Marker) -> Position {
    Position { line: mark.line(), column: mark.col() + 1 }
}

/// Whether a scalar is YAML's null (core schema): plain `~`, `null`, `Null`, `NULL`
/// or nothing, without a tag. A tagged scalar, `!!null` included, is reported as a tag
/// ([`Recorder::check_tag`]), never as a null.
fn is_null(value: &str, style: TScalarStyle, tag: Option<&Tag>) -> bool {
    tag.is_none() && style == TScalarStyle::Plain && matches!(value, "" | "~" | "null" | "Null" | "NULL")
}

impl Recorder {
    /// Called when a node (scalar or container) starts; returns its path and segments
    /// if it is a value (not a mapping key).
    ///
    /// `empty` is true for an empty plain scalar (`run:` with nothing after it): its
    /// marker is where the next token starts, often on a later line, so the value is
    /// located at its key instead.
    fn node(&mut self, mark: Marker, scalar: Option<&str>, empty: bool) -> Option<(String, Vec<Segment>)> {
        let Some(open) = self.stack.last_mut() else {
            return Some((String::new(), Vec::new()));
        };
        let parent = &open.path;
        match &mut open.frame {
            Frame::Map { key, first, seen } => match key.take() {
                None => {
                    let k = scalar.unwrap_or("?").to_string();
                    let at = pos(mark);
                    // A block mapping's start event is marked at the ':' after its
                    // first key; locate the mapping at that key instead.
                    if std::mem::take(first) {
                        if let Some((kpos, vpos)) = self.entries.get_mut(parent.as_str()) {
                            if vpos.line == at.line && vpos.column > at.column {
                                *vpos = at;
                                if kpos.line == at.line && kpos.column > at.column {
                                    *kpos = at;
                                }
                            }
                        }
                    }
                    if scalar.is_some() {
                        if let Some(before) = seen.get(&k) {
                            self.problems.push(Problem {
                                key: join(parent, &k),
                                position: at,
                                message: format!(
                                    "key `{}` is given twice (first at {before}); YAML keeps only one of them",
                                    escape_controls(&k)
                                ),
                            });
                        } else {
                            seen.insert(k.clone(), at);
                        }
                    }
                    *key = Some((k, at));
                    None
                }
                Some((k, kpos)) => {
                    let path = join(parent, &k);
                    let mut segments = open.segments.clone();
                    segments.push(Segment::Key(k));
                    let vpos = if empty { kpos } else { pos(mark) };
                    self.entries.insert(path.clone(), (kpos, vpos));
                    Some((path, segments))
                }
            },
            Frame::Seq { next } => {
                let path = format!("{parent}[{next}]");
                let mut segments = open.segments.clone();
                segments.push(Segment::Index(*next));
                *next += 1;
                self.entries.insert(path.clone(), (pos(mark), pos(mark)));
                Some((path, segments))
            }
        }
    }

    /// The pending key of the innermost mapping and its position, if a key was just
    /// read (the next node is its value).
    fn pending_key(&self) -> Option<&(String, Position)> {
        match &self.stack.last()?.frame {
            Frame::Map { key, .. } => key.as_ref(),
            Frame::Seq { .. } => None,
        }
    }

    /// Checks a scalar: a key must be printable ASCII; a value may hold no control
    /// character besides tab and newline.
    fn check_scalar(&mut self, value: &str, path: Option<&str>, at: Position) {
        match path {
            None => {
                if let Some(c) = value.chars().find(|c| !c.is_ascii() || c.is_ascii_control()) {
                    let parent = self.stack.last().map_or("", |o| o.path.as_str());
                    self.problems.push(Problem {
                        key: parent.to_string(),
                        position: at,
                        message: format!(
                            "key `{}` contains {}; keys are plain ASCII names",
                            escape_controls(value),
                            char_note(c)
                        ),
                    });
                }
            }
            Some(path) => {
                if let Some(c) = value.chars().find(|&c| is_terminal_control(c) && c != '\t' && c != '\n') {
                    let message = if c == '\0' {
                        format!("the value contains {}, which no guest command, path or name can hold", describe(c))
                    } else if !c.is_control() {
                        format!(
                            "the value contains {}, which shows the text around it in another order than it is read; remove it",
                            describe(c)
                        )
                    } else {
                        format!(
                            "the value contains the control character {}; a suite holds none besides tab and newline (write it the way the command expects it, e.g. printf '\\033' for ESC)",
                            describe(c)
                        )
                    };
                    self.problems.push(Problem { key: path.to_string(), position: at, message });
                }
            }
        }
    }
}

impl Recorder {
    /// A YAML tag (`!!int "256"`, `!!binary …`, `!!null`, `!foo`) on a node at `path` (a
    /// value) or on a key of the current mapping (`path` `None`): suites use none. A tag
    /// does not convert what it tags (`!!int "256"` stays the text "256" to the loader,
    /// `!!binary` stays base64 text, `!!null 512` is not a null), so a tagged value
    /// would be misread or refused with a puzzling message.
    fn check_tag(&mut self, tag: Option<&Tag>, path: Option<&str>, at: Position) {
        let Some(t) = tag else { return };
        // The parser resolves `!!` to YAML's own prefix: show it as written.
        let core = t.handle == "tag:yaml.org,2002:";
        let tag = escape_controls(&format!("{}{}", if core { "!!" } else { &t.handle }, t.suffix));
        let (key, what) = match path {
            Some(p) => (p.to_string(), "value"),
            None => (self.stack.last().map_or("", |o| &o.path).to_string(), "key"),
        };
        let why = match t.suffix.as_str() {
            _ if !core => String::new(),
            "int" | "float" | "bool" | "str" | "null" => {
                " (a tag converts nothing: `!!int \"256\"` stays the text \"256\")".to_string()
            }
            _ => String::new(),
        };
        self.problems.push(Problem {
            key,
            position: at,
            message: format!(
                "the {what} is tagged `{tag}`; suites use no YAML tags: remove `{tag}` and write the {what} itself{why}"
            ),
        });
    }
}

impl MarkedEventReceiver for Recorder {
    fn on_event(&mut self, ev: Event, mark: Marker) {
        match ev {
            Event::DocumentStart => {
                self.documents += 1;
                if self.documents == 2 {
                    self.problems.push(Problem {
                        key: String::new(),
                        position: pos(mark),
                        message: "a second YAML document starts here; a suite file holds one (remove this `---` and what follows it, or merge the two)".into(),
                    });
                }
            }
            Event::Scalar(s, style, anchor, tag) => {
                let empty = s.is_empty() && style == TScalarStyle::Plain;
                let null = is_null(&s, style, tag.as_ref());
                if null && anchor > 0 {
                    self.null_anchors.insert(anchor);
                }
                // An empty value is located at its key (see `node`).
                let at = if empty { self.pending_key().map_or(pos(mark), |(_, p)| *p) } else { pos(mark) };
                let value = self.node(mark, Some(&s), empty);
                if value.is_none() && null {
                    let parent = self.stack.last().map_or("", |o| o.path.as_str());
                    self.problems.push(Problem {
                        key: parent.to_string(),
                        position: at,
                        message: format!(
                            "a key is written as `{}`, which is YAML's null; keys are names",
                            if s.is_empty() { "?" } else { &s }
                        ),
                    });
                }
                if value.is_none() && s == "<<" && style == TScalarStyle::Plain {
                    let parent = self.stack.last().map_or("", |o| o.path.as_str());
                    self.problems.push(Problem {
                        key: parent.to_string(),
                        position: at,
                        message: "`<<` is a YAML merge key, which suites do not support (it would be read as a key named `<<`); write the keys out, or alias the whole value (`key: *anchor`)".into(),
                    });
                }
                self.check_scalar(&s, value.as_ref().map(|(p, _)| p.as_str()), at);
                self.check_tag(tag.as_ref(), value.as_ref().map(|(p, _)| p.as_str()), at);
                if let (Some((path, segments)), true) = (value, null) {
                    self.nulls.push(Null { segments, path, position: at, written: s });
                }
            }
            Event::Alias(anchor) => {
                let at = pos(mark);
                if let Some((path, segments)) = self.node(mark, None, false) {
                    if self.null_anchors.contains(&anchor) {
                        self.nulls.push(Null { segments, path, position: at, written: "*".into() });
                    }
                }
            }
            Event::MappingStart(_, tag) => {
                // A mapping used as a key is not supported by our schema; record it as "?".
                let (path, segments) = self.node(mark, None, false).unwrap_or_default();
                self.check_tag(tag.as_ref(), Some(&path), pos(mark));
                self.stack.push(Open {
                    path,
                    segments,
                    frame: Frame::Map { key: None, first: true, seen: HashMap::new() },
                });
            }
            Event::SequenceStart(_, tag) => {
                let (path, segments) = self.node(mark, None, false).unwrap_or_default();
                self.check_tag(tag.as_ref(), Some(&path), pos(mark));
                self.stack.push(Open { path, segments, frame: Frame::Seq { next: 0 } });
            }
            Event::MappingEnd | Event::SequenceEnd => {
                self.stack.pop();
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DOC: &str = "name: x\nnetwork:\n  subnet: 10.0.0.0/24\nvms:\n  - name: a\n    address: 10.0.0.2\n  - name: b\n    address: 10.1.0.3\n";

    #[test]
    fn finds_nested_values() {
        let l = Locations::of(DOC);
        assert_eq!(l.value("network.subnet"), Some(Position { line: 3, column: 11 }));
        assert_eq!(l.value("vms[1].address"), Some(Position { line: 8, column: 14 }));
        assert_eq!(l.key("vms[1].address"), Some(Position { line: 8, column: 5 }));
        assert_eq!(l.key("vms[1]"), Some(Position { line: 7, column: 5 }));
    }

    #[test]
    fn block_mapping_value_is_its_first_key() {
        let l = Locations::of("vms:\n  - name: a\n    kernel:\n      debian: \"6.1\"\n    k2: { x: 1 }\n");
        assert_eq!(l.value("vms[0].kernel"), Some(Position { line: 4, column: 7 }));
        assert_eq!(l.key("vms[0].kernel"), Some(Position { line: 3, column: 5 }));
        assert_eq!(l.value("vms[0].k2"), Some(Position { line: 5, column: 9 }));
        assert_eq!(l.value("vms[0]"), Some(Position { line: 2, column: 5 }));
    }

    #[test]
    fn empty_value_is_at_its_key() {
        let l = Locations::of("steps:\n  - name: a\n    run:\n  - name: b\n    run: \"\"\n");
        assert_eq!(l.value("steps[0].run"), Some(Position { line: 3, column: 5 }));
        assert_eq!(l.value("steps[1].run"), Some(Position { line: 5, column: 10 }));
    }

    #[test]
    fn path_at_syntax_error() {
        assert_eq!(Locations::path_at_syntax_error(DOC), None);
        let unclosed = "vms:\n  - name: a\n    after: [b\n    run: x\n";
        assert_eq!(Locations::path_at_syntax_error(unclosed).as_deref(), Some("vms[0].after"));
        assert_eq!(Locations::path_at_syntax_error("name: x\nnetwork:\n\tsubnet: y\n").as_deref(), Some("network"));
    }

    #[test]
    fn duplicate_keys_are_found_in_every_mapping_with_both_positions() {
        let a = Locations::analyse("a: 1\nb:\n  c: 1\n  c: 2\nd: {e: 1, e: 2}\na: 3\nf: [{g: 1}, {g: 2}]\n");
        let found: Vec<(String, String)> =
            a.problems.iter().map(|p| (p.key.clone(), format!("{} {}", p.position, p.message))).collect();
        assert_eq!(found.len(), 3, "{found:?}");
        assert_eq!(found[0].0, "b.c");
        assert!(found[0].1.starts_with("4:3 key `c` is given twice (first at 3:3)"), "{found:?}");
        assert_eq!(found[1].0, "d.e");
        assert_eq!(found[2].0, "a");
        assert!(found[2].1.starts_with("6:1 key `a` is given twice (first at 1:1)"), "{found:?}");
    }

    #[test]
    fn nulls_second_documents_and_odd_characters() {
        let a = Locations::analyse("a: ~\nb:\nc: [null, x]\nd: &n ~\ne: *n\nf: \"~\"\ng: !!str ~\n");
        let paths: Vec<&str> = a.nulls.iter().map(|n| n.path.as_str()).collect();
        assert_eq!(paths, ["a", "b", "c[0]", "d", "e"]);
        assert_eq!(a.nulls[2].segments, [Segment::Key("c".into()), Segment::Index(0)]);
        // `!!str ~` is text, not a null, but suites use no tags: it is refused as one.
        assert_eq!(a.problems.len(), 1, "{:?}", a.problems);
        assert_eq!((a.problems[0].key.as_str(), a.problems[0].position), ("g", Position { line: 7, column: 10 }));
        assert!(a.problems[0].message.starts_with("the value is tagged `!!str`"), "{:?}", a.problems);

        let a = Locations::analyse("a: 1\n---\nb: 2\n");
        assert_eq!(a.problems.len(), 1);
        assert_eq!(a.problems[0].position, Position { line: 2, column: 1 });

        let a = Locations::analyse("\"k\\e\": \"v\\0\"\n");
        let messages: Vec<&str> = a.problems.iter().map(|p| p.message.as_str()).collect();
        assert!(messages[0].contains("U+001B (ESC)") && messages[1].contains("U+0000 (NUL)"), "{messages:?}");
    }

    #[test]
    fn falls_back_to_parent() {
        let l = Locations::of(DOC);
        assert_eq!(l.value("vms[0].steps[2].run"), l.value("vms[0]"));
    }
}
