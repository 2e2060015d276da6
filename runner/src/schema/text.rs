//! Characters as a user should see them in an error: control characters escaped (so a
//! suite can't write to the terminal through a message), and look-alike or invisible
//! characters named by code point (so `nаme` with a Cyrillic `а` is explained, not
//! just refused); and YAML scalars as the text a guest would print
//! ([`scalar_text`]).

/// Characters that change what a terminal shows: C0 and C1 controls, DEL, and the
/// bidirectional overrides and isolates ("Trojan Source").
pub fn is_terminal_control(c: char) -> bool {
    c.is_control() || matches!(c, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// Whether [`escape_controls`] escapes `c`.
fn escaped(c: char) -> bool {
    c != '\t' && (is_terminal_control(c) || is_invisible(c) || (!c.is_ascii() && c.is_whitespace()))
}

/// `s` with every [`is_terminal_control`] character except tab, every invisible one
/// ([`is_invisible`]) and every non-ASCII space (U+00A0 …) written as `\u{1b}` (Rust's
/// escape syntax), so it prints as what it is.
pub fn escape_controls(s: &str) -> String {
    if !s.chars().any(escaped) {
        return s.to_string();
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if escaped(c) {
            out.push_str(&escape(c));
        } else {
            out.push(c);
        }
    }
    out
}

/// One escaped character: `\n`, `\r`, or `\u{1b}`.
fn escape(c: char) -> String {
    match c {
        '\n' => "\\n".into(),
        '\r' => "\\r".into(),
        c => format!("\\u{{{:x}}}", c as u32),
    }
}

/// How many columns `c` takes once escaped by [`escape_controls`] (for carets).
pub fn escaped_width(c: char) -> usize {
    if escaped(c) {
        escape(c).len()
    } else {
        1
    }
}

/// Names of the characters a suite most likely holds by accident: invisible ones,
/// Unicode spaces, typographic dashes and quotes, and the Cyrillic and Greek letters
/// that look like Latin ones. `(character, name, what it looks like)`; the last is
/// empty for invisible characters.
const NAMED: &[(char, &str, &str)] = &[
    ('\u{00a0}', "NO-BREAK SPACE", " "),
    ('\u{00ad}', "SOFT HYPHEN", ""),
    ('\u{180e}', "MONGOLIAN VOWEL SEPARATOR", ""),
    ('\u{2000}', "EN QUAD", " "),
    ('\u{2001}', "EM QUAD", " "),
    ('\u{2002}', "EN SPACE", " "),
    ('\u{2003}', "EM SPACE", " "),
    ('\u{2004}', "THREE-PER-EM SPACE", " "),
    ('\u{2005}', "FOUR-PER-EM SPACE", " "),
    ('\u{2006}', "SIX-PER-EM SPACE", " "),
    ('\u{2007}', "FIGURE SPACE", " "),
    ('\u{2008}', "PUNCTUATION SPACE", " "),
    ('\u{2009}', "THIN SPACE", " "),
    ('\u{200a}', "HAIR SPACE", " "),
    ('\u{200b}', "ZERO WIDTH SPACE", ""),
    ('\u{200c}', "ZERO WIDTH NON-JOINER", ""),
    ('\u{200d}', "ZERO WIDTH JOINER", ""),
    ('\u{200e}', "LEFT-TO-RIGHT MARK", ""),
    ('\u{200f}', "RIGHT-TO-LEFT MARK", ""),
    ('\u{2010}', "HYPHEN", "-"),
    ('\u{2011}', "NON-BREAKING HYPHEN", "-"),
    ('\u{2012}', "FIGURE DASH", "-"),
    ('\u{2013}', "EN DASH", "-"),
    ('\u{2014}', "EM DASH", "-"),
    ('\u{2018}', "LEFT SINGLE QUOTATION MARK", "'"),
    ('\u{2019}', "RIGHT SINGLE QUOTATION MARK", "'"),
    ('\u{201c}', "LEFT DOUBLE QUOTATION MARK", "\""),
    ('\u{201d}', "RIGHT DOUBLE QUOTATION MARK", "\""),
    ('\u{2024}', "ONE DOT LEADER", "."),
    ('\u{202a}', "LEFT-TO-RIGHT EMBEDDING", ""),
    ('\u{202b}', "RIGHT-TO-LEFT EMBEDDING", ""),
    ('\u{202c}', "POP DIRECTIONAL FORMATTING", ""),
    ('\u{202d}', "LEFT-TO-RIGHT OVERRIDE", ""),
    ('\u{202e}', "RIGHT-TO-LEFT OVERRIDE", ""),
    ('\u{202f}', "NARROW NO-BREAK SPACE", " "),
    ('\u{205f}', "MEDIUM MATHEMATICAL SPACE", " "),
    ('\u{2060}', "WORD JOINER", ""),
    ('\u{2066}', "LEFT-TO-RIGHT ISOLATE", ""),
    ('\u{2067}', "RIGHT-TO-LEFT ISOLATE", ""),
    ('\u{2068}', "FIRST STRONG ISOLATE", ""),
    ('\u{2069}', "POP DIRECTIONAL ISOLATE", ""),
    ('\u{2212}', "MINUS SIGN", "-"),
    ('\u{3000}', "IDEOGRAPHIC SPACE", " "),
    ('\u{ff1a}', "FULLWIDTH COLON", ":"),
    ('\u{2236}', "RATIO", ":"),
    ('\u{02d0}', "MODIFIER LETTER TRIANGULAR COLON", ":"),
    ('\u{feff}', "ZERO WIDTH NO-BREAK SPACE (byte-order mark)", ""),
    ('\u{0391}', "GREEK CAPITAL LETTER ALPHA", "A"),
    ('\u{0392}', "GREEK CAPITAL LETTER BETA", "B"),
    ('\u{0395}', "GREEK CAPITAL LETTER EPSILON", "E"),
    ('\u{0396}', "GREEK CAPITAL LETTER ZETA", "Z"),
    ('\u{0397}', "GREEK CAPITAL LETTER ETA", "H"),
    ('\u{0399}', "GREEK CAPITAL LETTER IOTA", "I"),
    ('\u{039a}', "GREEK CAPITAL LETTER KAPPA", "K"),
    ('\u{039c}', "GREEK CAPITAL LETTER MU", "M"),
    ('\u{039d}', "GREEK CAPITAL LETTER NU", "N"),
    ('\u{039f}', "GREEK CAPITAL LETTER OMICRON", "O"),
    ('\u{03a1}', "GREEK CAPITAL LETTER RHO", "P"),
    ('\u{03a4}', "GREEK CAPITAL LETTER TAU", "T"),
    ('\u{03a5}', "GREEK CAPITAL LETTER UPSILON", "Y"),
    ('\u{03a7}', "GREEK CAPITAL LETTER CHI", "X"),
    ('\u{03b1}', "GREEK SMALL LETTER ALPHA", "a"),
    ('\u{03b9}', "GREEK SMALL LETTER IOTA", "i"),
    ('\u{03ba}', "GREEK SMALL LETTER KAPPA", "k"),
    ('\u{03bd}', "GREEK SMALL LETTER NU", "v"),
    ('\u{03bf}', "GREEK SMALL LETTER OMICRON", "o"),
    ('\u{03c1}', "GREEK SMALL LETTER RHO", "p"),
    ('\u{03c5}', "GREEK SMALL LETTER UPSILON", "u"),
    ('\u{0405}', "CYRILLIC CAPITAL LETTER DZE", "S"),
    ('\u{0406}', "CYRILLIC CAPITAL LETTER BYELORUSSIAN-UKRAINIAN I", "I"),
    ('\u{0408}', "CYRILLIC CAPITAL LETTER JE", "J"),
    ('\u{0410}', "CYRILLIC CAPITAL LETTER A", "A"),
    ('\u{0412}', "CYRILLIC CAPITAL LETTER VE", "B"),
    ('\u{0415}', "CYRILLIC CAPITAL LETTER IE", "E"),
    ('\u{041a}', "CYRILLIC CAPITAL LETTER KA", "K"),
    ('\u{041c}', "CYRILLIC CAPITAL LETTER EM", "M"),
    ('\u{041d}', "CYRILLIC CAPITAL LETTER EN", "H"),
    ('\u{041e}', "CYRILLIC CAPITAL LETTER O", "O"),
    ('\u{0420}', "CYRILLIC CAPITAL LETTER ER", "P"),
    ('\u{0421}', "CYRILLIC CAPITAL LETTER ES", "C"),
    ('\u{0422}', "CYRILLIC CAPITAL LETTER TE", "T"),
    ('\u{0425}', "CYRILLIC CAPITAL LETTER HA", "X"),
    ('\u{0430}', "CYRILLIC SMALL LETTER A", "a"),
    ('\u{0435}', "CYRILLIC SMALL LETTER IE", "e"),
    ('\u{043e}', "CYRILLIC SMALL LETTER O", "o"),
    ('\u{0440}', "CYRILLIC SMALL LETTER ER", "p"),
    ('\u{0441}', "CYRILLIC SMALL LETTER ES", "c"),
    ('\u{0443}', "CYRILLIC SMALL LETTER U", "y"),
    ('\u{0445}', "CYRILLIC SMALL LETTER HA", "x"),
    ('\u{0455}', "CYRILLIC SMALL LETTER DZE", "s"),
    ('\u{0456}', "CYRILLIC SMALL LETTER BYELORUSSIAN-UKRAINIAN I", "i"),
    ('\u{0458}', "CYRILLIC SMALL LETTER JE", "j"),
    ('\u{0501}', "CYRILLIC SMALL LETTER KOMI DE", "d"),
    ('\u{04cf}', "CYRILLIC SMALL LETTER PALOCHKA", "l"),
];

/// Names of the C0 control characters, by value.
const C0: [&str; 32] = [
    "NUL", "SOH", "STX", "ETX", "EOT", "ENQ", "ACK", "BEL", "BS", "TAB", "LF", "VT", "FF", "CR", "SO", "SI", "DLE",
    "DC1", "DC2", "DC3", "DC4", "NAK", "SYN", "ETB", "CAN", "EM", "SUB", "ESC", "FS", "GS", "RS", "US",
];

/// `U+0430 CYRILLIC SMALL LETTER A` (the name where known), or `U+XXXX` alone.
pub fn describe(c: char) -> String {
    let code = format!("U+{:04X}", c as u32);
    if let Some((_, name, _)) = NAMED.iter().find(|(x, _, _)| *x == c) {
        return format!("{code} {name}");
    }
    match c as u32 {
        n @ 0..=0x1f => format!("{code} ({})", C0[n as usize]),
        0x7f => format!("{code} (DEL)"),
        0x80..=0x9f => format!("{code} (a C1 control character)"),
        0xff01..=0xff5e => {
            let ascii = char::from_u32(c as u32 - 0xff01 + 0x21).unwrap_or('?');
            format!("{code} FULLWIDTH `{ascii}`")
        }
        _ => code,
    }
}

/// What `c` looks like when it is a known look-alike (`"a"` for a Cyrillic `а`, `" "`
/// for a no-break space); `None` for other characters.
pub fn looks_like(c: char) -> Option<&'static str> {
    NAMED.iter().find(|(x, _, _)| *x == c).map(|(_, _, l)| *l).filter(|l| !l.is_empty())
}

/// Whether `c` is invisible in most editors and terminals (zero-width characters,
/// bidirectional marks, the byte-order mark, soft hyphen).
pub fn is_invisible(c: char) -> bool {
    NAMED.iter().any(|(x, _, l)| *x == c && l.is_empty())
}

/// `c` named, with what it looks like: `U+0430 CYRILLIC SMALL LETTER A, which looks
/// like `a``, `U+200B ZERO WIDTH SPACE, an invisible character`, `U+001B (ESC)`.
pub fn char_note(c: char) -> String {
    let what = describe(c);
    match looks_like(c) {
        Some(" ") => format!("{what}, which looks like a space"),
        Some(l) => format!("{what}, which looks like `{l}`"),
        None if is_invisible(c) => format!("{what}, an invisible character"),
        None if !c.is_ascii() && !NAMED.iter().any(|(x, _, _)| *x == c) && !(0xff01..=0xff5e).contains(&(c as u32)) => {
            format!("{what}, which is not ASCII")
        }
        None => what,
    }
}

/// A hint for text that must be ASCII but isn't, naming its first non-ASCII (or
/// control) character: `" (it contains U+0430 CYRILLIC SMALL LETTER A, which looks
/// like `a`)"`; empty when `s` is printable ASCII.
pub fn non_ascii_hint(s: &str) -> String {
    match s.chars().find(|c| !c.is_ascii() || c.is_ascii_control()) {
        Some(c) => format!(" (it contains {})", char_note(c)),
        None => String::new(),
    }
}

/// `s` for a message: escaped by [`escape_controls`] and, when longer than `max`
/// characters, cut with the total length said (`"aaaa…" (70000 bytes)`). Quoted like
/// `{:?}` would, without Rust's escaping of quotes.
pub fn shown(s: &str, max: usize) -> String {
    let n = s.chars().count();
    if n <= max {
        return format!("\"{}\"", escape_controls(s));
    }
    let head: String = s.chars().take(max).collect();
    format!("\"{}…\" ({} bytes)", escape_controls(&head), s.len())
}

/// What kind of file `meta` describes, in words (`a file`, `a folder`, `a named pipe`,
/// `a socket`, `a character device`, `a block device`), for messages about paths.
pub fn file_kind(meta: &std::fs::Metadata) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    let t = meta.file_type();
    if t.is_file() {
        "a file"
    } else if t.is_dir() {
        "a folder"
    } else if t.is_fifo() {
        "a named pipe"
    } else if t.is_socket() {
        "a socket"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else {
        "a special file"
    }
}

/// A YAML scalar as the text a guest would print (`100000000`, `true`, `abc`); other
/// values as their YAML.
pub fn scalar_text(v: &serde_yaml::Value) -> String {
    match v {
        serde_yaml::Value::String(s) => s.clone(),
        serde_yaml::Value::Number(n) => n.to_string(),
        serde_yaml::Value::Bool(b) => b.to_string(),
        other => serde_yaml::to_string(other).unwrap_or_default().trim().to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controls_are_escaped_and_widths_match() {
        let s = "a\u{1b}[2J\u{0}b\u{202e}c\td";
        let e = escape_controls(s);
        assert_eq!(e, "a\\u{1b}[2J\\u{0}b\\u{202e}c\td");
        assert!(!e.chars().any(escaped));
        assert_eq!(escape_controls("a\u{200b}b"), "a\\u{200b}b");
        assert_eq!(s.chars().map(escaped_width).sum::<usize>(), e.chars().count());
    }

    #[test]
    fn characters_are_named() {
        assert_eq!(describe('\u{430}'), "U+0430 CYRILLIC SMALL LETTER A");
        assert_eq!(describe('\u{0}'), "U+0000 (NUL)");
        assert_eq!(describe('\u{1b}'), "U+001B (ESC)");
        assert_eq!(describe('\u{ff41}'), "U+FF41 FULLWIDTH `a`");
        assert_eq!(describe('é'), "U+00E9");
        assert_eq!(non_ascii_hint("nаme"), " (it contains U+0430 CYRILLIC SMALL LETTER A, which looks like `a`)");
        assert_eq!(non_ascii_hint("a\u{200b}b"), " (it contains U+200B ZERO WIDTH SPACE, an invisible character)");
        assert_eq!(non_ascii_hint("plain"), "");
    }

    #[test]
    fn long_values_are_cut() {
        assert_eq!(shown("abc", 10), "\"abc\"");
        assert_eq!(shown(&"x".repeat(100), 3), "\"xxx…\" (100 bytes)");
    }
}
