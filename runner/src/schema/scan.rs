//! Cheap checks of a suite's text that run before any YAML parser: characters YAML (or
//! a reader of the suite) can't take, indentation with look-alike spaces, and nesting
//! depth.
//!
//! They run first because the YAML libraries handle some such input badly: libyaml (in
//! `serde_yaml`) spends minutes on 100,000 nested `{a:` or 300,000 unclosed `[`, and
//! reports a control character at 1:1 with a byte offset. Each check here is linear in
//! the text and stops at the first problem, which it locates by line and column.

use yaml_rust2::scanner::{Scanner, TokenType};

use super::locate::Position;
use super::text::{describe, is_invisible, is_terminal_control};

/// Deepest nesting of mappings and sequences accepted (block and flow counted alike).
/// The suites in `suites/` nest 6 levels deep; a hand-written suite never needs 64, and
/// the bound keeps every later parse of the text linear.
pub const MAX_DEPTH: usize = 64;

/// A problem found by a scan: where, and what, in words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// Line and column of the offending character or token.
    pub position: Position,
    /// What is wrong.
    pub message: String,
}

/// The text a suite is parsed from: `raw` without a leading byte-order mark and with
/// every line break (`\r\n`, or a lone `\r` as old Mac editors write) turned into `\n`.
///
/// YAML itself treats all three breaks alike and turns each into `\n` inside scalars,
/// so this changes no value; it lets every line:column and every shown line agree with
/// what the parsers saw. A BOM is accepted because editors on some systems write one.
pub fn normalize(raw: String) -> String {
    let text = match raw.strip_prefix('\u{feff}') {
        Some(rest) => rest.to_string(),
        None => raw,
    };
    if text.contains('\r') {
        text.replace("\r\n", "\n").replace('\r', "\n")
    } else {
        text
    }
}

/// The first character YAML does not allow in a file (its `c-printable` set: tab, line
/// breaks and printable characters), or one that would make the suite show differently
/// from how it is read (bidirectional overrides and isolates). Located at the
/// character.
pub fn characters(text: &str) -> Option<Finding> {
    let (mut line, mut column) = (1, 1);
    for c in text.chars() {
        if c == '\n' {
            line += 1;
            column = 1;
            continue;
        }
        let printable = matches!(c as u32, 0x09 | 0x20..=0x7e | 0xa0..=0xd7ff | 0xe000..=0xfffd | 0x10000..);
        if c != '\t' && (!printable || is_terminal_control(c) || c == '\u{feff}') {
            let message = if c == '\u{feff}' {
                format!("the file contains {} after its start; remove it", describe(c))
            } else if printable && !c.is_control() {
                format!(
                    "the file contains {}, which shows the text around it in another order than it is read; remove it",
                    describe(c)
                )
            } else {
                format!(
                    "the file contains the control character {}; YAML allows only tab and line breaks (write it as an escape inside double quotes, e.g. \"\\t\", if a value needs it)",
                    describe(c)
                )
            };
            return Some(Finding { position: Position { line, column }, message });
        }
        column += 1;
    }
    None
}

/// The first line indented with something other than ASCII spaces and tabs: a no-break
/// space (U+00A0), another Unicode space, or an invisible character. YAML doesn't count
/// them as indentation, so such a line silently becomes part of the text above it.
///
/// A line of a block scalar (`run: |`) that really starts with such a character is
/// refused too: nobody means it, and it is invisible when the suite is read.
pub fn indentation(text: &str) -> Option<Finding> {
    for (i, line) in text.split('\n').enumerate() {
        for (col, c) in line.chars().enumerate() {
            if c == ' ' || c == '\t' {
                continue;
            }
            if c.is_whitespace() || is_invisible(c) {
                return Some(Finding {
                    position: Position { line: i + 1, column: col + 1 },
                    message: format!(
                        "this line is indented with {}; YAML indents with ASCII spaces only (your editor may have inserted it)",
                        describe(c)
                    ),
                });
            }
            break;
        }
        // Only a non-ASCII character can be a look-alike.
        if let Some(f) = if line.is_ascii() { None } else { structure_look_alike(line) } {
            return Some(Finding { position: Position { line: i + 1, column: f.0 }, message: f.1 });
        }
    }
    None
}

/// A look-alike where YAML needs an ASCII character for the structure of a line: a
/// Unicode space after a list's `-` or after a key's `:`, or a colon look-alike
/// (`：`) after a key. `key: value` with a no-break space reads as one text
/// `"key:\u{a0}value"`, and the error that follows names nothing useful. Only the
/// line's start is looked at (indentation, `- `, a plain key), so prose in values may
/// hold any of them. Returns the 1-based column and the message.
fn structure_look_alike(line: &str) -> Option<(usize, String)> {
    let chars: Vec<char> = line.chars().collect();
    let mut i = chars.iter().take_while(|c| **c == ' ').count();
    let odd_space = |c: char| c != ' ' && c != '\t' && (c.is_whitespace() || is_invisible(c));
    let at = |i: usize, what: &str, c: char| {
        Some((
            i + 1,
            format!(
                "{} {what}; YAML needs an ASCII {}",
                describe(c),
                if what.contains("colon") { "':'" } else { "space" }
            ),
        ))
    };
    // List entries: `- `, possibly several on one line.
    while chars.get(i) == Some(&'-') {
        match chars.get(i + 1) {
            Some(&c) if odd_space(c) => return at(i + 1, "after '-'", c),
            Some(' ') => i += 2 + chars[i + 2..].iter().take_while(|c| **c == ' ').count(),
            _ => break,
        }
    }
    // A plain key: ASCII name characters, then ':' and a space (or a look-alike).
    let key = chars[i..].iter().take_while(|c| c.is_ascii_alphanumeric() || **c == '_' || **c == '-').count();
    if key == 0 {
        return None;
    }
    let j = i + key;
    match (chars.get(j), chars.get(j + 1)) {
        (Some(':'), Some(&c)) if odd_space(c) => at(j + 1, "after the key's ':'", c),
        (Some(&c), _) if c != ':' && super::text::looks_like(c) == Some(":") => {
            at(j, "where the key's colon belongs", c)
        }
        _ => None,
    }
}

/// Refuses nesting deeper than [`MAX_DEPTH`], located at the token that goes deeper.
///
/// Runs `yaml-rust2`'s scanner (tokens only, no tree) and stops at the first token past
/// the limit, so its cost is bounded by the limit, not by the input. The scanner holds
/// back tokens of a flow collection until it knows it is not a key, and gives up by
/// itself at 256 flow levels ("recursion limit exceeded"); that error is reported the
/// same way. Other scanner errors are left to the parsers, which report them with
/// their context.
pub fn depth(text: &str) -> Option<Finding> {
    let mut scanner = Scanner::new(text.chars());
    let mut depth = 0usize;
    let too_deep = |line: usize, col: usize| {
        Finding {
        position: Position { line, column: col + 1 },
        message: format!(
            "the YAML is nested more than {MAX_DEPTH} levels deep here; a suite needs fewer than 10 (unclosed '[' or '{{'?)"
        ),
    }
    };
    loop {
        match scanner.next_token() {
            Ok(Some(token)) => match token.1 {
                TokenType::BlockSequenceStart
                | TokenType::BlockMappingStart
                | TokenType::FlowSequenceStart
                | TokenType::FlowMappingStart => {
                    depth += 1;
                    if depth > MAX_DEPTH {
                        return Some(too_deep(token.0.line(), token.0.col()));
                    }
                }
                TokenType::BlockEnd | TokenType::FlowSequenceEnd | TokenType::FlowMappingEnd => {
                    depth = depth.saturating_sub(1);
                }
                TokenType::StreamEnd => return None,
                _ => {}
            },
            Ok(None) => return None,
            Err(e) if e.info().contains("recursion limit") => {
                return Some(too_deep(e.marker().line(), e.marker().col()));
            }
            // The text is not YAML to this scanner; libyaml may still read further
            // (their grammars differ at the edges) and spend minutes on what follows.
            // Bound it with a cruder count: brackets, wherever they are.
            Err(_) => return brackets(text).map(|p| too_deep(p.line, p.column - 1)),
        }
    }
}

/// Where unclosed `[` and `{` first go deeper than [`MAX_DEPTH`], counting every
/// bracket of the text (in quotes and comments too): an over-count, used only for text
/// the scanner could not read.
fn brackets(text: &str) -> Option<Position> {
    let (mut line, mut column, mut depth) = (1, 1, 0usize);
    for c in text.chars() {
        match c {
            '\n' => {
                line += 1;
                column = 0;
            }
            '[' | '{' => {
                depth += 1;
                if depth > MAX_DEPTH {
                    return Some(Position { line, column });
                }
            }
            ']' | '}' => depth = depth.saturating_sub(1),
            _ => {}
        }
        column += 1;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    #[test]
    fn normalizes_bom_and_line_breaks() {
        assert_eq!(normalize("\u{feff}a: 1\r\nb: 2\rc: 3\n".into()), "a: 1\nb: 2\nc: 3\n");
        assert_eq!(normalize("a: \u{feff}".into()), "a: \u{feff}");
    }

    #[test]
    fn finds_control_characters_by_line_and_column() {
        let f = characters("name: x\nnetwork: a\u{1b}[2J\n").unwrap();
        assert_eq!(f.position, Position { line: 2, column: 11 });
        assert!(f.message.contains("U+001B (ESC)"), "{}", f.message);
        assert_eq!(characters("a: \"tab\there\"\n"), None);
        assert!(characters("a: b\u{202e}c").unwrap().message.contains("RIGHT-TO-LEFT OVERRIDE"));
    }

    #[test]
    fn finds_look_alike_indentation() {
        let f = indentation("a:\n\u{a0}\u{a0}b: 1\n").unwrap();
        assert_eq!(f.position, Position { line: 2, column: 1 });
        assert!(f.message.contains("U+00A0 NO-BREAK SPACE"));
        assert_eq!(indentation("a:\n  b: \u{a0}x\n\tc\n"), None);
    }

    #[test]
    fn finds_look_alikes_in_a_lines_structure() {
        let f = indentation("name:\u{a0}demo\n").unwrap();
        assert_eq!(f.position, Position { line: 1, column: 6 });
        assert!(f.message.contains("U+00A0 NO-BREAK SPACE after the key's ':'"), "{}", f.message);
        assert_eq!(indentation("  -\u{a0}a\n").unwrap().position.column, 4);
        assert_eq!(indentation("  - - \u{3000}x: 1\n"), None);
        assert!(indentation("description\u{ff1a} x\n").unwrap().message.contains("FULLWIDTH COLON"));
        assert_eq!(indentation("description: Note:\u{a0}prose, \u{2014} fine\n"), None);
        assert_eq!(indentation("run: |\n  echo a:b\n"), None);
    }

    #[test]
    fn deep_nesting_is_refused_fast() {
        let shallow = "a:\n  b: [1, {c: [2]}]\n  d:\n    - - x\n";
        assert_eq!(depth(shallow), None);
        let mut block = String::new();
        for i in 0..1400 {
            block.push_str(&" ".repeat(i));
            block.push_str("k:\n");
        }
        // The last one starts with a line yaml-rust2's scanner refuses (a tab before a
        // sequence entry), so the bracket count bounds it.
        for text in [
            "{a: ".repeat(100_000),
            "[".repeat(300_000),
            "- ".repeat(300_000),
            "? ".repeat(300_000),
            block,
            format!("a:\n\t- b\nc: {}", "{a: ".repeat(100_000)),
        ] {
            let started = Instant::now();
            let f = depth(&text).expect("too deep");
            assert!(started.elapsed() < Duration::from_secs(1), "{:?}", started.elapsed());
            assert!(f.message.contains("nested more than 64 levels"), "{}", f.message);
        }
    }
}
