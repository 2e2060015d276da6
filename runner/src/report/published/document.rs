//! A published report as one value ([`Document`]: sections of blocks), rendered as
//! plain text for a mail or a bug tracker ([`markdown`], `report.md`) and as a
//! self-contained page ([`html`], `report.html`). Both come from the same value, so they
//! say the same; the page adds the charts.
//!
//! The text keeps every line outside fenced blocks within [`WIDTH`] columns (kernel
//! lists ask for mails that read in an 80-column terminal); tables and raw outputs are
//! fenced with ```` ``` ```` and kept as they are. The page is well-formed XHTML (no
//! script, no external asset, numeric character references only), so an XML parser can
//! check it.

use std::fmt::Write as _;

/// Widest line of the text outside fenced blocks, in columns.
pub const WIDTH: usize = 80;

/// A whole report.
#[derive(Debug, Clone, Default)]
pub struct Document {
    /// The first line: a one-line summary in the kernel's regression style.
    pub title: String,
    /// Sections in order.
    pub sections: Vec<Section>,
}

/// A titled part of the report.
#[derive(Debug, Clone, Default)]
pub struct Section {
    /// Heading.
    pub title: String,
    /// Content.
    pub blocks: Vec<Block>,
}

/// A piece of a section.
#[derive(Debug, Clone)]
pub enum Block {
    /// A paragraph, wrapped at [`WIDTH`].
    Para(String),
    /// A bulleted list; each item wrapped with a hanging indent.
    Items(Vec<String>),
    /// `key: value` facts.
    Fields(Vec<(String, String)>),
    /// Preformatted text (tables): fenced, never wrapped.
    Table(String),
    /// A raw output with a caption (collapsed on the page).
    Raw {
        /// What it is.
        caption: String,
        /// The text as the tool printed it.
        text: String,
    },
    /// An SVG chart (the page only).
    Chart(String),
}

impl Section {
    /// A section titled `title` with no blocks yet.
    pub fn new(title: &str) -> Section {
        Section { title: title.to_string(), blocks: vec![] }
    }

    /// Appends a block.
    pub fn push(&mut self, b: Block) -> &mut Self {
        self.blocks.push(b);
        self
    }
}

/// Wraps `text` into lines of at most `width` columns; the first line starts with
/// `first`, the others with `rest`. Words longer than a line are cut.
pub fn wrap(text: &str, width: usize, first: &str, rest: &str) -> Vec<String> {
    let mut lines = Vec::new();
    let mut line = first.to_string();
    let mut has_word = false;
    for w in text.split_whitespace() {
        let mut word: Vec<char> = w.chars().collect();
        loop {
            let used = line.chars().count() + usize::from(has_word);
            if used + word.len() <= width {
                if has_word {
                    line.push(' ');
                }
                line.extend(word.iter());
                has_word = true;
                break;
            }
            if has_word {
                lines.push(std::mem::replace(&mut line, rest.to_string()));
                has_word = false;
                continue;
            }
            // Longer than a whole line (a long path): cut it.
            let room = width.saturating_sub(line.chars().count()).max(1);
            line.extend(word[..room].iter());
            lines.push(std::mem::replace(&mut line, rest.to_string()));
            word.drain(..room);
            if word.is_empty() {
                break;
            }
        }
    }
    if has_word || lines.is_empty() {
        lines.push(line);
    }
    lines.into_iter().map(|l| l.trim_end().to_string()).collect()
}

/// The report as plain text (Markdown that reads as plain text).
pub fn markdown(d: &Document) -> String {
    let mut t = String::new();
    for l in wrap(&d.title, WIDTH, "", "") {
        let _ = writeln!(t, "{l}");
    }
    for s in &d.sections {
        let _ = writeln!(t, "\n## {}\n", s.title);
        let mut first = true;
        for b in &s.blocks {
            if matches!(b, Block::Chart(_)) {
                continue;
            }
            if !first {
                t.push('\n');
            }
            first = false;
            match b {
                Block::Para(p) => {
                    for l in wrap(p, WIDTH, "", "") {
                        let _ = writeln!(t, "{l}");
                    }
                }
                Block::Items(items) => {
                    for i in items {
                        for l in wrap(i, WIDTH, "- ", "  ") {
                            let _ = writeln!(t, "{l}");
                        }
                    }
                }
                Block::Fields(fields) => {
                    let kw = fields.iter().map(|(k, _)| k.chars().count()).max().unwrap_or(0).min(24);
                    for (k, v) in fields {
                        let line = format!("- {k}:{} {v}", " ".repeat(kw.saturating_sub(k.chars().count())));
                        if line.chars().count() <= WIDTH {
                            let _ = writeln!(t, "{line}");
                        } else {
                            let _ = writeln!(t, "- {k}:");
                            for l in wrap(v, WIDTH, "    ", "    ") {
                                let _ = writeln!(t, "{l}");
                            }
                        }
                    }
                }
                Block::Table(text) => {
                    let _ = write!(t, "```\n{}\n```\n", text.trim_end_matches('\n'));
                }
                Block::Raw { caption, text } => {
                    for l in wrap(caption, WIDTH, "", "") {
                        let _ = writeln!(t, "{l}");
                    }
                    let _ = write!(t, "\n```\n{}\n```\n", text.trim_end_matches('\n'));
                }
                Block::Chart(_) => {}
            }
        }
    }
    t
}

/// Escapes text for XML (and HTML): `&`, `<`, `>`, `"`, `'`; drops control characters
/// XML 1.0 forbids (a serial console can hold them).
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            '\t' | '\n' | '\r' => out.push(c),
            c if (c as u32) < 0x20 || c == '\u{FFFE}' || c == '\u{FFFF}' => {}
            c => out.push(c),
        }
    }
    out
}

const STYLE: &str = "body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;max-width:1040px;margin:1.5em auto;padding:0 1em;color:#1b1f24;line-height:1.45}\
h1{font-size:1.35em;border-bottom:1px solid #d0d7de;padding-bottom:.3em}\
h2{font-size:1.1em;margin-top:1.6em;border-bottom:1px solid #eaeef2;padding-bottom:.2em}\
pre{font:12px/1.35 ui-monospace,'DejaVu Sans Mono',monospace;background:#f6f8fa;border:1px solid #eaeef2;padding:.6em .8em;overflow-x:auto}\
table.fields{border-collapse:collapse;font-size:.95em}\
table.fields th{text-align:left;font-weight:600;padding:.1em 1em .1em 0;vertical-align:top;white-space:nowrap}\
table.fields td{font-family:ui-monospace,'DejaVu Sans Mono',monospace;font-size:.9em;word-break:break-all}\
figure{margin:1em 0}details summary{cursor:pointer;font-weight:600}";

/// The report as a self-contained XHTML page.
pub fn html(d: &Document) -> String {
    let mut h = String::new();
    h.push_str("<!DOCTYPE html>\n<html xmlns=\"http://www.w3.org/1999/xhtml\" lang=\"en\">\n<head>\n<meta charset=\"utf-8\"/>\n");
    let _ = writeln!(h, "<title>{}</title>", escape(&d.title));
    let _ = writeln!(h, "<style>{STYLE}</style>\n</head>\n<body>");
    let _ = writeln!(h, "<h1>{}</h1>", escape(&d.title));
    for s in &d.sections {
        let _ = writeln!(h, "<section>\n<h2>{}</h2>", escape(&s.title));
        for b in &s.blocks {
            match b {
                Block::Para(p) => {
                    let _ = writeln!(h, "<p>{}</p>", escape(p));
                }
                Block::Items(items) => {
                    h.push_str("<ul>\n");
                    for i in items {
                        let _ = writeln!(h, "<li>{}</li>", escape(i));
                    }
                    h.push_str("</ul>\n");
                }
                Block::Fields(fields) => {
                    h.push_str("<table class=\"fields\">\n");
                    for (k, v) in fields {
                        let _ = writeln!(h, "<tr><th>{}</th><td>{}</td></tr>", escape(k), escape(v));
                    }
                    h.push_str("</table>\n");
                }
                Block::Table(text) => {
                    let _ = writeln!(h, "<pre>{}</pre>", escape(text.trim_end_matches('\n')));
                }
                Block::Raw { caption, text } => {
                    let _ = writeln!(
                        h,
                        "<details><summary>{}</summary>\n<pre>{}</pre></details>",
                        escape(caption),
                        escape(text.trim_end_matches('\n'))
                    );
                }
                Block::Chart(svg) => {
                    let _ = writeln!(h, "<figure>\n{svg}\n</figure>");
                }
            }
        }
        h.push_str("</section>\n");
    }
    h.push_str("</body>\n</html>\n");
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrap_keeps_width_and_cuts_long_tokens() {
        let lines = wrap("aaa bbb ccc ddd", 7, "", "");
        assert_eq!(lines, vec!["aaa bbb", "ccc ddd"]);
        let long = "x".repeat(30);
        let lines = wrap(&format!("see {long}"), 10, "- ", "  ");
        assert!(lines.iter().all(|l| l.chars().count() <= 10), "{lines:?}");
        assert_eq!(lines.concat().matches('x').count(), 30);
        assert_eq!(wrap("", 10, "", ""), vec![String::new()]);
    }

    #[test]
    fn markdown_lines_fit_outside_fences() {
        let d = Document {
            title: "t".into(),
            sections: vec![Section {
                title: "s".into(),
                blocks: vec![
                    Block::Para("word ".repeat(60)),
                    Block::Fields(vec![("k".into(), "v ".repeat(60))]),
                    Block::Table("x".repeat(120)),
                ],
            }],
        };
        let text = markdown(&d);
        let mut fenced = false;
        for l in text.lines() {
            if l.starts_with("```") {
                fenced = !fenced;
                continue;
            }
            assert!(fenced || l.chars().count() <= WIDTH, "{l}");
        }
        assert!(text.contains(&"x".repeat(120)), "tables are not wrapped");
    }

    #[test]
    fn escape_makes_text_xml_safe() {
        assert_eq!(escape("a<b>&\"'\u{1b}[0m"), "a&lt;b&gt;&amp;&quot;&#39;[0m");
    }
}
