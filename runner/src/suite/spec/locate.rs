//! Maps a key path such as `vms[1].address` to its line and column in the YAML text.
//!
//! `serde_yaml` reports positions only for the errors it finds itself; the
//! cross-field rules of [`crate::suite::validate`] run on typed values that have lost their
//! positions. This module re-reads the text with `yaml-rust2`'s event parser (which
//! carries a [`Marker`] with every event) and records where each key path starts.

use std::collections::HashMap;

use yaml_rust2::parser::{Event, MarkedEventReceiver, Parser};
use yaml_rust2::scanner::{Marker, TScalarStyle};

/// A position in a text file: 1-based line and 1-based column (in characters).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Position {
    /// 1-based line number.
    pub line: usize,
    /// 1-based column number.
    pub column: usize,
}

/// Where each key path of a YAML document is, as found by a marked event parse.
#[derive(Debug, Default)]
pub struct Locations {
    /// key path → (position of the key, position of the value).
    entries: HashMap<String, (Position, Position)>,
}

impl Locations {
    /// Parses `text` and records every key path. Returns an empty map when the text
    /// isn't valid YAML (the deserializer reports that error with its own position).
    pub fn of(text: &str) -> Self {
        let mut recv = Recorder::default();
        let mut parser = Parser::new_from_str(text);
        if parser.load(&mut recv, false).is_err() {
            return Self::default();
        }
        Self { entries: recv.entries }
    }

    /// For text that is not valid YAML: the key path the parser was inside when it
    /// stopped (e.g. `vms[0].steps[0].after` for an unclosed `[`), or `None` when the
    /// text parses or the error is at the top level.
    pub fn path_at_syntax_error(text: &str) -> Option<String> {
        let mut recv = Recorder::default();
        let mut parser = Parser::new_from_str(text);
        parser.load(&mut recv, false).err()?;
        let (path, frame) = recv.stack.last()?;
        let path = match frame {
            Frame::Map { key: Some((k, _)), .. } if path.is_empty() => k.clone(),
            Frame::Map { key: Some((k, _)), .. } => format!("{path}.{k}"),
            _ => path.clone(),
        };
        Some(path).filter(|p| !p.is_empty())
    }

    /// Position of the value at `path` (e.g. `vms[1].address`); if the exact path is
    /// absent, the value of the longest existing parent path.
    pub fn value(&self, path: &str) -> Option<Position> {
        self.lookup(path).map(|(_, v)| v)
    }

    /// Position of the key at `path` (for sequence items: the item's start).
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

enum Frame {
    /// In a mapping; `key` is the pending key once read, with its position; `first`
    /// until the mapping's first key is read.
    Map { key: Option<(String, Position)>, first: bool },
    /// In a sequence; the index of the next item.
    Seq { next: usize },
}

#[derive(Default)]
struct Recorder {
    stack: Vec<(String, Frame)>,
    entries: HashMap<String, (Position, Position)>,
}

fn pos(mark: Marker) -> Position {
    Position { line: mark.line(), column: mark.col() + 1 }
}

impl Recorder {
    /// Called when a node (scalar or container) starts; returns its path if it is a
    /// value (not a mapping key).
    ///
    /// `empty` is true for an empty plain scalar (`run:` with nothing after it): its
    /// marker is where the next token starts, often on a later line, so the value is
    /// located at its key instead.
    fn node(&mut self, mark: Marker, scalar: Option<&str>, empty: bool) -> Option<String> {
        let Some((parent, frame)) = self.stack.last_mut() else {
            return Some(String::new());
        };
        match frame {
            Frame::Map { key, first } => match key.take() {
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
                    *key = Some((k, at));
                    None
                }
                Some((k, kpos)) => {
                    let path = if parent.is_empty() { k } else { format!("{parent}.{k}") };
                    let vpos = if empty { kpos } else { pos(mark) };
                    self.entries.insert(path.clone(), (kpos, vpos));
                    Some(path)
                }
            },
            Frame::Seq { next } => {
                let path = format!("{parent}[{next}]");
                *next += 1;
                self.entries.insert(path.clone(), (pos(mark), pos(mark)));
                Some(path)
            }
        }
    }
}

impl MarkedEventReceiver for Recorder {
    fn on_event(&mut self, ev: Event, mark: Marker) {
        match ev {
            Event::Scalar(s, style, ..) => {
                let empty = s.is_empty() && style == TScalarStyle::Plain;
                self.node(mark, Some(&s), empty);
            }
            Event::Alias(_) => {
                self.node(mark, None, false);
            }
            Event::MappingStart(..) => {
                // A mapping used as a key is not supported by our schema; record it as "?".
                let path = self.node(mark, None, false).unwrap_or_default();
                self.stack.push((path, Frame::Map { key: None, first: true }));
            }
            Event::SequenceStart(..) => {
                let path = self.node(mark, None, false).unwrap_or_default();
                self.stack.push((path, Frame::Seq { next: 0 }));
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
    fn falls_back_to_parent() {
        let l = Locations::of(DOC);
        assert_eq!(l.value("vms[0].steps[2].run"), l.value("vms[0]"));
    }
}
