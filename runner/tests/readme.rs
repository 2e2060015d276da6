//! The docs are kept honest here, as just's `tests/readme.rs` keeps its README: no VM,
//! a second or two.
//!
//! - README.md is a front page: at most [`README_MAX_LINES`] lines, opening with the
//!   two commands CI runs on a fresh machine;
//! - every Markdown file of the project (README, the book under `docs/src/`,
//!   ARCHITECTURE.md, BENCHMARKS.md, SECURITY.md, the fixtures' READMEs) skips no
//!   heading level, and each of its relative links (and `#anchor`) resolves;
//! - every page of the book is in `docs/src/SUMMARY.md`;
//! - every `vmrepro` subcommand of `--help` is named in the README or the book, and
//!   every `vmrepro` command in the README's code blocks names a real subcommand, real
//!   options and real files;
//! - every key any suite in `suites/` uses is in a key table of the suite reference
//!   (a failure names the file, the line and the key), and every suite's
//!   header links its section of the findings;
//! - the README's first suite passes `vmrepro check`.
//!
//! Markdown is read with pulldown-cmark, the parser mdBook uses, and anchors are
//! derived from headings as mdBook (and GitHub) derive them.

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use pulldown_cmark::{CodeBlockKind, Event, HeadingLevel, Options, Parser, Tag, TagEnd};
use support::{repo_root, test_tmpdir, vmrepro_bin};
use vmrepro::schema::locate::Locations;

/// The README's line budget: a front page, not a notebook.
const README_MAX_LINES: usize = 250;

/// The two commands the README opens with; CI runs them on a fresh machine.
const README_COMMANDS: [&str; 2] = [
    ".ci/install-deps && cargo run --release -- run suites/nfs-read-100mb.yaml",
    ".ci/install-deps && cargo test --workspace",
];

/// The pages that document the suite format's keys (in the first column of their
/// tables): the suite reference, and the server profiles for `vms[].profile.*`.
const REFERENCE_PAGES: [&str; 2] = ["docs/src/suite-reference.md", "docs/src/server-profiles.md"];

/// Folders never searched for Markdown: build output, run results, git.
const SKIPPED_DIRS: [&str; 4] = ["target", "results", ".git", "docs/book"];

/// What the tests need of one Markdown file.
#[derive(Debug, Default)]
struct Doc {
    /// The file, relative to the repository root.
    path: PathBuf,
    /// The source text.
    text: String,
    /// Headings: level (1–6), the text mdBook derives an id from, and its line.
    headings: Vec<(usize, String, usize)>,
    /// Link and image destinations with their lines.
    links: Vec<(String, usize)>,
    /// Fenced code blocks: info string and content.
    code: Vec<(String, String)>,
    /// The inline code of the first cell of every row of a key table (a table whose
    /// first column is headed `key`, e.g. `key (axis)`): the keys it documents. The
    /// other tables (kernel command line parameters, mount options) name no keys.
    first_cells: Vec<String>,
}

impl Doc {
    fn read(root: &Path, rel: &Path) -> Doc {
        let text = fs::read_to_string(root.join(rel)).unwrap_or_else(|e| panic!("reading {}: {e}", rel.display()));
        let mut doc = Doc { path: rel.to_path_buf(), ..Doc::default() };
        let line_of = |offset: usize| text[..offset].matches('\n').count() + 1;
        let mut heading: Option<(usize, String, usize)> = None;
        let mut block: Option<(String, String)> = None;
        let (mut cell, mut in_row, mut in_head, mut key_table) = (0usize, false, false, false);
        let options = Options::ENABLE_TABLES | Options::ENABLE_FOOTNOTES | Options::ENABLE_STRIKETHROUGH;
        for (event, range) in Parser::new_ext(&text, options).into_offset_iter() {
            match event {
                Event::Start(Tag::Heading { level, .. }) => {
                    heading = Some((level_number(level), String::new(), line_of(range.start)))
                }
                Event::End(TagEnd::Heading(_)) => doc.headings.extend(heading.take()),
                Event::Start(Tag::Link { dest_url, .. }) | Event::Start(Tag::Image { dest_url, .. }) => {
                    doc.links.push((dest_url.to_string(), line_of(range.start)))
                }
                Event::Start(Tag::CodeBlock(kind)) => {
                    let info = match kind {
                        CodeBlockKind::Fenced(info) => info.to_string(),
                        CodeBlockKind::Indented => String::new(),
                    };
                    block = Some((info, String::new()));
                }
                Event::End(TagEnd::CodeBlock) => doc.code.extend(block.take()),
                Event::Start(Tag::Table(_)) => key_table = false,
                Event::Start(Tag::TableHead) => (cell, in_head) = (0, true),
                Event::End(TagEnd::TableHead) => in_head = false,
                Event::Start(Tag::TableRow) => (cell, in_row) = (0, true),
                Event::End(TagEnd::TableRow) => in_row = false,
                Event::Start(Tag::TableCell) => cell += 1,
                Event::Text(t) if in_head && cell == 1 => key_table = t.trim_start().starts_with("key"),
                Event::Text(t) | Event::Code(t) if heading.is_some() => heading.as_mut().unwrap().1.push_str(&t),
                Event::Text(t) if block.is_some() => block.as_mut().unwrap().1.push_str(&t),
                Event::Code(t) if in_row && key_table && cell == 1 => doc.first_cells.push(t.to_string()),
                _ => {}
            }
        }
        doc.text = text;
        doc
    }

    /// The ids mdBook gives this file's headings (`-1`, `-2`, … for repeats).
    fn anchors(&self) -> BTreeSet<String> {
        let mut used = BTreeSet::new();
        for (_, text, _) in &self.headings {
            let id = heading_id(text);
            let mut candidate = id.clone();
            let mut n = 0;
            while !used.insert(candidate.clone()) {
                n += 1;
                candidate = format!("{id}-{n}");
            }
        }
        used
    }
}

fn level_number(level: HeadingLevel) -> usize {
    match level {
        HeadingLevel::H1 => 1,
        HeadingLevel::H2 => 2,
        HeadingLevel::H3 => 3,
        HeadingLevel::H4 => 4,
        HeadingLevel::H5 => 5,
        HeadingLevel::H6 => 6,
    }
}

/// A heading's id as mdBook 0.5 derives it (`id_from_content`), which is GitHub's rule
/// for the characters these docs use: lowercase; letters, digits, `_` and `-` kept;
/// whitespace to `-`; everything else dropped.
fn heading_id(text: &str) -> String {
    text.trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            c if c.is_alphanumeric() || c == '_' || c == '-' => Some(c),
            c if c.is_whitespace() => Some('-'),
            _ => None,
        })
        .collect()
}

/// Every Markdown file of the project, relative to the root, sorted.
fn markdown_files(root: &Path) -> Vec<PathBuf> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<PathBuf>) {
        let mut entries: Vec<_> = fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
        entries.sort();
        for path in entries {
            let rel = path.strip_prefix(root).unwrap().to_path_buf();
            if SKIPPED_DIRS.iter().any(|s| rel == Path::new(s)) {
                continue;
            }
            if path.is_dir() {
                walk(root, &path, out);
            } else if path.extension().is_some_and(|e| e == "md") {
                out.push(rel);
            }
        }
    }
    let mut out = Vec::new();
    walk(root, root, &mut out);
    out
}

fn all_docs(root: &Path) -> BTreeMap<PathBuf, Doc> {
    markdown_files(root).into_iter().map(|rel| (rel.clone(), Doc::read(root, &rel))).collect()
}

/// README.md and every page of the book: where a user looks for a command.
fn user_docs(docs: &BTreeMap<PathBuf, Doc>) -> Vec<&Doc> {
    docs.values().filter(|d| d.path == Path::new("README.md") || d.path.starts_with("docs/src")).collect()
}

#[test]
fn readme_is_a_front_page_that_opens_with_the_two_commands() {
    let root = repo_root();
    let readme = Doc::read(&root, Path::new("README.md"));
    let lines = readme.text.lines().count();
    assert!(
        lines <= README_MAX_LINES,
        "README.md has {lines} lines, over its budget of {README_MAX_LINES}: move the detail into docs/src/"
    );
    let (_, first_block) = readme.code.first().expect("README.md has a code block");
    let commands: Vec<&str> = first_block.lines().map(|l| l.split(" #").next().unwrap().trim_end()).collect();
    assert_eq!(commands, README_COMMANDS, "README.md must open with the two commands CI runs");
    let before = &readme.text[..readme.text.find("```").unwrap()];
    assert_eq!(before.trim(), "# vmrepro", "nothing but the title may come before the two commands");
}

#[test]
fn heading_levels_are_not_skipped() {
    let root = repo_root();
    let mut problems = Vec::new();
    for doc in all_docs(&root).values() {
        let mut previous = 0;
        for (level, text, line) in &doc.headings {
            if previous == 0 && *level != 1 {
                problems
                    .push(format!("{}:{line}: the first heading `{text}` is level {level}, not 1", doc.path.display()));
            } else if *level > previous + 1 && previous != 0 {
                problems
                    .push(format!("{}:{line}: `{text}` is level {level} after level {previous}", doc.path.display()));
            }
            previous = *level;
        }
    }
    assert!(problems.is_empty(), "heading levels:\n{}", problems.join("\n"));
}

#[test]
fn every_relative_link_and_anchor_resolves() {
    let root = repo_root();
    let docs = all_docs(&root);
    let mut problems = Vec::new();
    let mut checked = 0;
    for doc in docs.values() {
        let dir = doc.path.parent().unwrap();
        for (dest, line) in &doc.links {
            if dest.contains("://") || dest.starts_with("mailto:") {
                continue;
            }
            checked += 1;
            let (file, anchor) = dest.split_once('#').map_or((dest.as_str(), None), |(f, a)| (f, Some(a)));
            let target = if file.is_empty() { doc.path.clone() } else { normalise(&dir.join(file)) };
            let at = format!("{}:{line}: `{dest}`", doc.path.display());
            if target.starts_with("..") {
                problems.push(format!("{at} leaves the repository"));
                continue;
            }
            if !root.join(&target).exists() {
                problems.push(format!("{at}: {} does not exist", target.display()));
                continue;
            }
            if let Some(anchor) = anchor {
                match docs.get(&target) {
                    Some(t) if t.anchors().contains(anchor) => {}
                    Some(t) => problems.push(format!(
                        "{at}: {} has no heading with id `{anchor}` (its ids: {})",
                        target.display(),
                        t.anchors().into_iter().collect::<Vec<_>>().join(", ")
                    )),
                    None => problems.push(format!("{at}: an anchor into a file that is not Markdown")),
                }
            }
        }
    }
    assert!(checked > 100, "only {checked} relative links found: is the parser seeing the links?");
    assert!(problems.is_empty(), "{} broken link(s):\n{}", problems.len(), problems.join("\n"));
}

/// `a/b/../c` → `a/c` (the path need not exist); a leading `..` stays.
fn normalise(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            std::path::Component::ParentDir if out.file_name().is_some_and(|n| n != "..") => {
                out.pop();
            }
            std::path::Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

#[test]
fn every_book_page_is_in_the_summary() {
    let root = repo_root();
    let summary = Doc::read(&root, Path::new("docs/src/SUMMARY.md"));
    let listed: BTreeSet<PathBuf> =
        summary.links.iter().map(|(d, _)| normalise(&Path::new("docs/src").join(d))).collect();
    let pages: BTreeSet<PathBuf> = markdown_files(&root)
        .into_iter()
        .filter(|p| p.starts_with("docs/src") && p != Path::new("docs/src/SUMMARY.md"))
        .collect();
    let missing: Vec<_> = pages.difference(&listed).collect();
    assert!(missing.is_empty(), "pages under docs/src/ not in SUMMARY.md (mdBook would leave them out): {missing:?}");
    assert!(pages.len() >= 10, "only {} book pages found", pages.len());
}

/// `vmrepro ARGS --help`: its output, which must succeed.
fn help(args: &[&str]) -> String {
    let out = Command::new(vmrepro_bin()).args(args).arg("--help").output().expect("running vmrepro --help");
    assert!(out.status.success(), "vmrepro {} --help failed: {}", args.join(" "), String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

/// The subcommands a `--help` lists under `Commands:` (without `help`).
fn subcommands(help: &str) -> Vec<String> {
    help.lines()
        .skip_while(|l| l.trim() != "Commands:")
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .map(str::to_string)
        .collect()
}

/// Every command path (`run`, `images gc`, …) of the CLI, with its `--help`.
fn command_tree() -> BTreeMap<Vec<String>, String> {
    let mut tree = BTreeMap::new();
    let mut todo = vec![Vec::<String>::new()];
    while let Some(path) = todo.pop() {
        let args: Vec<&str> = path.iter().map(String::as_str).collect();
        let text = help(&args);
        for sub in subcommands(&text) {
            let mut next = path.clone();
            next.push(sub);
            todo.push(next);
        }
        tree.insert(path, text);
    }
    tree
}

#[test]
fn every_subcommand_is_named_in_the_readme_or_the_book() {
    let root = repo_root();
    let docs = all_docs(&root);
    let text: String = user_docs(&docs).iter().map(|d| d.text.as_str()).collect::<Vec<_>>().join("\n");
    let tree = command_tree();
    assert!(tree.len() > 10, "only {} commands in vmrepro --help", tree.len());
    let missing: Vec<String> = tree
        .keys()
        .filter(|p| !p.is_empty())
        .map(|p| format!("vmrepro {}", p.join(" ")))
        .filter(|c| !text.contains(c.as_str()))
        .collect();
    assert!(missing.is_empty(), "subcommands nowhere in README.md or docs/src/: {missing:?}");
}

/// The `vmrepro` invocations of a shell code block: each line split at `&&` and `|`,
/// comments dropped, `cargo run --release --` read as `vmrepro`.
fn vmrepro_invocations(block: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    for line in block.lines() {
        let line = line.split(" #").next().unwrap();
        for part in line.split("&&").flat_map(|p| p.split('|')) {
            let words: Vec<&str> = part.split_whitespace().collect();
            let args = match words.as_slice() {
                ["vmrepro", rest @ ..] => rest,
                ["cargo", "run", "--release", "--", rest @ ..] | ["cargo", "run", "--", rest @ ..] => rest,
                _ => continue,
            };
            out.push(args.iter().map(|s| s.to_string()).collect());
        }
    }
    out
}

#[test]
fn the_readmes_commands_name_real_subcommands_options_and_files() {
    let root = repo_root();
    let readme = Doc::read(&root, Path::new("README.md"));
    let tree = command_tree();
    let mut problems = Vec::new();
    let mut seen = 0;
    for (info, block) in &readme.code {
        if info != "sh" {
            continue;
        }
        for line in block.lines() {
            let line = line.split(" #").next().unwrap().trim();
            for word in line.split_whitespace().filter(|w| w.starts_with(".ci/") || w.starts_with("suites/")) {
                if !root.join(word).exists() {
                    problems.push(format!("`{line}`: {word} does not exist"));
                }
            }
        }
        for args in vmrepro_invocations(block) {
            seen += 1;
            let mut path = Vec::new();
            for a in args.iter().take_while(|a| !a.starts_with('-')) {
                let mut next = path.clone();
                next.push(a.clone());
                if tree.contains_key(&next) {
                    path = next;
                } else {
                    break;
                }
            }
            let shown = format!("vmrepro {}", args.join(" "));
            if path.is_empty() || !subcommands(&tree[&path]).is_empty() {
                problems.push(format!("`{shown}`: not a subcommand of vmrepro"));
                continue;
            }
            let help_text = &tree[&path];
            for flag in args.iter().filter(|a| a.starts_with("--")) {
                let flag = flag.split('=').next().unwrap();
                if !has_option(help_text, flag) {
                    problems.push(format!("`{shown}`: vmrepro {} has no option {flag}", path.join(" ")));
                }
            }
        }
    }
    assert!(seen >= 8, "only {seen} vmrepro commands found in README.md's sh blocks");
    assert!(problems.is_empty(), "README.md's commands:\n{}", problems.join("\n"));
}

/// Whether a `--help` text lists the option `flag` (as `--flag`, `--flag <X>`,
/// `--flag[=<X>]`), not merely an option that starts with it.
fn has_option(help: &str, flag: &str) -> bool {
    help.match_indices(flag).any(|(i, _)| {
        let next = help[i + flag.len()..].chars().next();
        let before = help[..i].chars().next_back();
        before.is_none_or(|c| c.is_whitespace() || c == ',') && next.is_none_or(|c| !(c.is_alphanumeric() || c == '-'))
    })
}

/// The key paths the reference pages document (`vms[].kernel.debian`,
/// `vms[].sysctl.<name>`, …). A row for `a.b.<x>` documents the map `a.b` too.
fn documented_keys(root: &Path) -> BTreeSet<String> {
    let mut keys: BTreeSet<String> =
        REFERENCE_PAGES.iter().flat_map(|p| Doc::read(root, Path::new(p)).first_cells).collect();
    let maps: Vec<String> = keys.iter().filter_map(|k| k.find(".<").map(|i| k[..i].to_string())).collect();
    keys.extend(maps);
    keys
}

/// Whether `key` matches the documented `pattern`, where `<…>` stands for any
/// non-empty text (a VM name, a sysctl name with its dots, an axis label).
fn matches(pattern: &str, key: &str) -> bool {
    match pattern.find('<') {
        None => pattern == key,
        Some(open) => {
            let Some(close) = pattern[open..].find('>').map(|c| open + c) else { return pattern == key };
            let (literal, rest) = (&pattern[..open], &pattern[close + 1..]);
            let Some(tail) = key.strip_prefix(literal) else { return false };
            (1..=tail.len()).filter(|&n| tail.is_char_boundary(n)).any(|n| matches(rest, &tail[n..]))
        }
    }
}

fn is_documented(documented: &BTreeSet<String>, key: &str) -> bool {
    documented.contains(key) || documented.iter().any(|p| p.contains('<') && matches(p, key))
}

/// One use of a key in a suite: the key path generalised as the reference writes it
/// (`vms[].net.egress.seed`), the file, and the line of the key.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct KeyUse {
    key: String,
    file: String,
    line: usize,
}

/// Every key path of a suite's YAML text, generalised: list indexes become `[]`, and a
/// variant axis's values are values of the key it varies, so their keys are checked as
/// that key's (`variants: {kernel: [{debian: …}]}` → `vms[].kernel.debian`; the map
/// form's labels are `vms[].variants.kernel.<label>`). Each use keeps the line of its
/// key, found by the runner's own locator ([`Locations`]).
fn key_uses(text: &str, file: &str) -> Vec<KeyUse> {
    let value: serde_yaml::Value = serde_yaml::from_str(text).unwrap_or_else(|e| panic!("{file}: {e}"));
    let locations = Locations::analyse(text).locations;
    let mut out = Vec::new();
    let mut walk = Walk { file, locations: &locations, out: &mut out };
    walk.value(&value, "", "");
    out.sort();
    out.dedup();
    out
}

/// The state of [`key_uses`]'s walk.
struct Walk<'a> {
    file: &'a str,
    locations: &'a Locations,
    out: &'a mut Vec<KeyUse>,
}

impl Walk<'_> {
    fn push(&mut self, general: &str, concrete: &str) {
        let line = self.locations.key(concrete).map_or(0, |p| p.line);
        self.out.push(KeyUse { key: general.to_string(), file: self.file.to_string(), line });
    }

    /// `general` is the generalised path of `value`, `concrete` its path with indexes
    /// as [`Locations`] spells it (`vms[1].variants.env.LOAD`).
    fn value(&mut self, value: &serde_yaml::Value, general: &str, concrete: &str) {
        let join = |path: &str, key: &str| if path.is_empty() { key.to_string() } else { format!("{path}.{key}") };
        match value {
            serde_yaml::Value::Mapping(map) => {
                for (k, v) in map {
                    let key = match k {
                        serde_yaml::Value::String(s) => s.clone(),
                        other => serde_yaml::to_string(other).unwrap().trim().to_string(),
                    };
                    let (full, at) = (join(general, &key), join(concrete, &key));
                    self.push(&full, &at);
                    if general == "vms[].variants" && !matches!(key.as_str(), "exclude" | "include") {
                        let varied = format!("vms[].{key}");
                        match v {
                            serde_yaml::Value::Sequence(values) => {
                                for (i, x) in values.iter().enumerate() {
                                    self.value(x, &varied, &format!("{at}[{i}]"));
                                }
                            }
                            serde_yaml::Value::Mapping(labels) => {
                                for (label, x) in labels {
                                    let label = label.as_str().map_or_else(|| format!("{label:?}"), str::to_string);
                                    self.push(&format!("{full}.{label}"), &format!("{at}.{label}"));
                                    self.value(x, &varied, &format!("{at}.{label}"));
                                }
                            }
                            _ => {}
                        }
                    } else {
                        self.value(v, &full, &at);
                    }
                }
            }
            serde_yaml::Value::Sequence(items) => {
                for (i, x) in items.iter().enumerate() {
                    self.value(x, &format!("{general}[]"), &format!("{concrete}[{i}]"));
                }
            }
            serde_yaml::Value::Tagged(t) => self.value(&t.value, general, concrete),
            _ => {}
        }
    }
}

/// The uses of keys the reference does not document, one line each:
/// `FILE:LINE: KEY`, in file and line order.
fn undocumented(documented: &BTreeSet<String>, uses: &[KeyUse]) -> Vec<String> {
    let mut missing: Vec<&KeyUse> = uses.iter().filter(|u| !is_documented(documented, &u.key)).collect();
    missing.sort_by(|a, b| (&a.file, a.line, &a.key).cmp(&(&b.file, b.line, &b.key)));
    missing.iter().map(|u| format!("{}:{}: {}", u.file, u.line, u.key)).collect()
}

fn suites(root: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = fs::read_dir(root.join("suites"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    out.sort();
    out
}

#[test]
fn every_key_the_suites_use_is_in_the_suite_reference() {
    let root = repo_root();
    let documented = documented_keys(&root);
    assert!(documented.len() > 100, "only {} keys in the reference tables", documented.len());
    let mut uses = Vec::new();
    for suite in suites(&root) {
        let text = fs::read_to_string(&suite).unwrap();
        let file = suite.strip_prefix(&root).unwrap().display().to_string();
        uses.extend(key_uses(&text, &file));
    }
    assert!(uses.len() > 80, "only {} key uses found in suites/", uses.len());
    let unplaced: Vec<&KeyUse> = uses.iter().filter(|u| u.line == 0).collect();
    assert!(unplaced.is_empty(), "key uses without a line: {unplaced:?}");
    let missing = undocumented(&documented, &uses);
    assert!(
        missing.is_empty(),
        "keys used in suites/ but in no key column of {}:\n{}",
        REFERENCE_PAGES.join(" or "),
        missing.join("\n")
    );
}

#[test]
fn only_key_tables_document_keys() {
    let documented = documented_keys(&repo_root());
    for key in ["nfs_read.client_mount_options.<vm>", "nfs_read.client_read_ahead_kb.<vm>", "vms[].variants.env.<NAME>"]
    {
        assert!(documented.contains(key), "{key} is in a key table of the suite reference");
    }
    // Rows of the kernel command line and mount option tables are not keys: their
    // `<module>.<param>` would otherwise match any dotted key.
    for other in ["<module>.<param>", "sysctl.<name>", "vers", "rsize"] {
        assert!(!documented.contains(other), "{other} is not a suite key");
    }
}

#[test]
fn an_undocumented_key_is_reported_with_its_file_and_line() {
    let documented: BTreeSet<String> = [
        "name",
        "vms",
        "vms[].name",
        "vms[].kernel",
        "vms[].kernel.debian",
        "vms[].variants",
        "vms[].variants.kernel",
        "vms[].variants.<axis>.<label>",
        "vms[].variants.env.<NAME>",
        "nfs_read",
        "nfs_read.client_mount_options",
        "nfs_read.client_mount_options.<vm>",
    ]
    .map(String::from)
    .into();
    let suite = "name: x\nvms:\n  - name: a\n    kernel: { debian: \"6.1\" }\n  - name: b\n    variants:\n      kernel: [{ debian: \"6.1\", flavor: amd64 }]\n      env.LOAD: { idle: \"0\" }\nnfs_read:\n  client_mount_options: { a: vers=3 }\n  client_read_ahead: { a: 0 }\n";
    let uses = key_uses(suite, "suites/x.yaml");
    assert!(uses.iter().any(|u| u.key == "vms[].kernel.debian" && u.line == 7), "{uses:#?}");
    assert!(uses.iter().any(|u| u.key == "vms[].variants.env.LOAD.idle" && u.line == 8), "{uses:#?}");
    assert_eq!(
        undocumented(&documented, &uses),
        [
            "suites/x.yaml:7: vms[].kernel.flavor",
            "suites/x.yaml:11: nfs_read.client_read_ahead",
            "suites/x.yaml:11: nfs_read.client_read_ahead.a",
        ]
    );
}

#[test]
fn the_key_matcher_tells_documented_keys_from_others() {
    let documented: BTreeSet<String> =
        ["vms[].sysctl.<name>", "vms[].variants.env.<NAME>", "vms[].variants.<axis>.<label>", "nfs_read.file.name"]
            .map(String::from)
            .into();
    assert!(is_documented(&documented, "vms[].sysctl.net.ipv4.ipfrag_time"));
    assert!(is_documented(&documented, "vms[].variants.env.NFS_VERS"));
    assert!(is_documented(&documented, "vms[].variants.env.NFS_VERS.v4-2"));
    assert!(is_documented(&documented, "nfs_read.file.name"));
    assert!(!is_documented(&documented, "nfs_read.file.size"));
    assert!(!is_documented(&documented, "vms[].sysctl"), "a placeholder stands for at least one character");
    assert!(!is_documented(&documented, "vms[].variants.envx"));
}

#[test]
fn every_suite_links_its_findings() {
    let root = repo_root();
    let docs = all_docs(&root);
    let mut problems = Vec::new();
    for suite in suites(&root) {
        let text = fs::read_to_string(&suite).unwrap();
        let name = suite.file_name().unwrap().to_string_lossy().into_owned();
        let header: Vec<&str> = text.lines().take_while(|l| l.starts_with('#')).collect();
        let links: Vec<&str> = header
            .iter()
            .flat_map(|l| l.split_whitespace())
            .filter(|w| w.starts_with("docs/"))
            .map(|w| w.trim_end_matches(['.', ',', ')', ';', ':']))
            .collect();
        if !links.iter().any(|l| l.starts_with("docs/src/findings")) {
            problems.push(format!("{name}: its header comment links no page under docs/src/findings"));
        }
        for link in links {
            let (file, anchor) = link.split_once('#').map_or((link, None), |(f, a)| (f, Some(a)));
            match (docs.get(Path::new(file)), anchor) {
                (None, _) => problems.push(format!("{name}: {file} is not a page of the docs")),
                (Some(doc), Some(a)) if !doc.anchors().contains(a) => {
                    problems.push(format!("{name}: {file} has no section #{a}"))
                }
                _ => {}
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_readmes_first_suite_passes_check_and_explains_every_key() {
    let root = repo_root();
    let readme = Doc::read(&root, Path::new("README.md"));
    let section = readme.text.find("## Your first suite").expect("README.md has a \"Your first suite\" section");
    let suite = readme
        .code
        .iter()
        .filter(|(info, _)| info == "yaml")
        .map(|(_, text)| text)
        .find(|text| readme.text[section..].contains(text.as_str()))
        .expect("a yaml block in \"Your first suite\"");
    let lines = suite.lines().count();
    assert!((10..=25).contains(&lines), "the first suite has {lines} lines; it should stay about 20");
    let uncommented: Vec<&str> = suite.lines().filter(|l| l.contains(':') && !l.contains(" # ")).collect();
    assert!(uncommented.is_empty(), "lines of the first suite without a comment: {uncommented:?}");
    let value: serde_yaml::Value = serde_yaml::from_str(suite).expect("the first suite is YAML");
    assert!(value.get("measure").is_some(), "the first suite is a measure: example");
    let documented = documented_keys(&root);
    let missing = undocumented(&documented, &key_uses(suite, "README.md's first suite"));
    assert!(missing.is_empty(), "keys of the first suite not in the suite reference: {missing:?}");

    let dir = tempfile::tempdir_in(test_tmpdir()).unwrap();
    let file = dir.path().join("first-suite.yaml");
    fs::write(&file, suite).unwrap();
    let out = Command::new(vmrepro_bin())
        .arg("--images")
        .arg(root.join("images"))
        .arg("check")
        .arg(&file)
        .output()
        .expect("running vmrepro check");
    assert!(
        out.status.success(),
        "vmrepro check on README.md's first suite failed ({}):\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
