//! The fuzz harness: one function per untrusted-input surface, each taking the fuzzer's
//! bytes and returning `Err(property that broke)`, or panicking where vmrepro panics.
//! The libFuzzer targets in `fuzz/fuzz_targets/` and the corpus replay in
//! `tests/fuzz_corpus.rs` both include this file, so a fuzzer finding replays as a
//! plain test (see docs/src/contributing.md, "Fuzzing").
//!
//! - [`suite`]: YAML text (and the files beside it) → `suite::load` and the confined
//!   `suite::load_with` a bundle's suite goes through (variants included);
//! - [`bundle`]: archive bytes → `publish::bundle::extract` (unpack, MANIFEST and
//!   BUNDLE.json checks) into a temp folder, then the bundled suite loaded as `replay`
//!   loads it;
//! - [`run_folder`]: a run folder (plan.json, run.json, step outputs, links, pipes) →
//!   `analyse_dir`, the published report, the snapshot value, the tables and `compare`.
//!
//! Every input lands in a fresh [`Sandbox`]: the folder under test and, beside it, a
//! canary folder whose file holds a random token. The properties checked on every
//! input: no panic; an error's message names the file or folder it is about; nothing
//! beside the folder under test is created, changed or removed (the canary's listing and
//! checksums are the same afterwards); the canary token turns up in nothing vmrepro
//! produced (plan, results, reports, messages). Time and memory are bounded by the
//! runner (libFuzzer's `-timeout`/`-rss_limit_mb`, the replay test's watchdog).
//!
//! # The folder format
//!
//! A fuzz input that describes a folder is text (bytes, really) in which each entry
//! starts with a header line; file contents follow it up to the next header:
//!
//! ```text
//! === plan.json              a regular file, the bytes until the next "=== " line
//! === vms/                   a folder
//! === results.json -> TARGET a symbolic link
//! === b => TARGET            a hard link (bundles only: a tar hard-link entry)
//! === vms/x.stdout |         a named pipe
//! ```
//!
//! A `TARGET` of `@canary/NAME` is the canary folder's file (`@canary/secret` holds the
//! token), `@zero` is `/dev/zero`; any other target is taken as written when it stays,
//! resolved from the link's place, inside the sandbox, and the entry is dropped when it
//! would leave it (the harness never aims vmrepro at a real host file). Entry paths are
//! made relative and `..`-free before the harness creates them (bundles keep their raw
//! names inside the archive: that is what the reader must refuse). Input that does not
//! start with `=== ` is one file: the suite (`suite.yaml`), or the bundle's bytes.

#![allow(dead_code)] // each includer uses a subset

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Component, Path, PathBuf};

use sha2::{Digest, Sha256};

/// The header that starts an entry of the folder format.
pub const HEADER: &[u8] = b"=== ";

/// What one entry of the folder format is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    /// A regular file with these bytes.
    File(Vec<u8>),
    /// A folder.
    Dir,
    /// A symbolic link to the target as written.
    Link(String),
    /// A hard link (a tar entry of that type; bundles only).
    Hard(String),
    /// A named pipe.
    Fifo,
}

/// One entry: its path as written and what it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The path as written (possibly absolute or with `..`).
    pub path: String,
    /// What it is.
    pub kind: Kind,
}

/// Parses the folder format; `None` when `data` doesn't start with a header (it is
/// then one file).
pub fn decode(data: &[u8]) -> Option<Vec<Entry>> {
    if !data.starts_with(HEADER) {
        return None;
    }
    let mut entries: Vec<Entry> = Vec::new();
    let mut rest = data;
    while let Some(after) = rest.strip_prefix(HEADER) {
        let end = after.iter().position(|&b| b == b'\n').unwrap_or(after.len());
        let head = String::from_utf8_lossy(&after[..end]).into_owned();
        let body_start = (end + 1).min(after.len());
        let body = &after[body_start..];
        let next = find_header(body).unwrap_or(body.len());
        let (path, kind) = if let Some((p, t)) = head.split_once(" -> ") {
            (p.to_string(), Kind::Link(t.to_string()))
        } else if let Some((p, t)) = head.split_once(" => ") {
            (p.to_string(), Kind::Hard(t.to_string()))
        } else if let Some(p) = head.strip_suffix(" |") {
            (p.to_string(), Kind::Fifo)
        } else if head.ends_with('/') {
            (head.clone(), Kind::Dir)
        } else {
            (head.clone(), Kind::File(body[..next].to_vec()))
        };
        entries.push(Entry { path, kind });
        rest = &body[next..];
    }
    Some(entries)
}

/// Where the next line starting with [`HEADER`] begins in `body` (its "=== ").
fn find_header(body: &[u8]) -> Option<usize> {
    if body.starts_with(HEADER) {
        return Some(0);
    }
    body.windows(HEADER.len() + 1).position(|w| w[0] == b'\n' && &w[1..] == HEADER).map(|i| i + 1)
}

/// The entries of the folder `dir` (for seeding the corpus), paths relative to it, in
/// path order; a link to anything outside `dir` becomes one to `@canary/secret`.
pub fn entries_of(dir: &Path) -> Vec<Entry> {
    let mut all = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for p in std::fs::read_dir(&d).expect("seed folder").flatten().map(|e| e.path()) {
            let meta = std::fs::symlink_metadata(&p).expect("seed entry");
            if meta.is_dir() {
                stack.push(p.clone());
            }
            all.push((p, meta));
        }
    }
    all.sort_by(|a, b| a.0.cmp(&b.0));
    let mut out = Vec::new();
    for (p, meta) in all {
        let path = p.strip_prefix(dir).expect("inside").display().to_string();
        let kind = if meta.file_type().is_symlink() {
            let target = std::fs::read_link(&p).expect("link");
            let inside = std::fs::canonicalize(&p).is_ok_and(|t| t.starts_with(dir));
            Kind::Link(if inside { target.display().to_string() } else { "@canary/secret".into() })
        } else if meta.is_dir() {
            Kind::Dir
        } else {
            Kind::File(std::fs::read(&p).expect("seed file"))
        };
        out.push(Entry { path, kind });
    }
    out
}

/// `entries` in the folder format (what [`decode`] reads back; a file's contents get
/// a final newline when they lack one).
pub fn to_bytes(entries: &[Entry]) -> Vec<u8> {
    let mut out = Vec::new();
    for e in entries {
        let head = match &e.kind {
            Kind::File(_) => e.path.clone(),
            Kind::Dir => format!("{}/", e.path.trim_end_matches('/')),
            Kind::Link(t) => format!("{} -> {t}", e.path),
            Kind::Hard(t) => format!("{} => {t}", e.path),
            Kind::Fifo => format!("{} |", e.path),
        };
        out.extend_from_slice(HEADER);
        out.extend_from_slice(head.as_bytes());
        out.push(b'\n');
        if let Kind::File(data) = &e.kind {
            out.extend_from_slice(data);
            if !data.is_empty() && !data.ends_with(b"\n") {
                out.push(b'\n');
            }
        }
    }
    out
}

/// A fresh folder per input: `root/` (what vmrepro is given) and `canary/` beside it.
#[derive(Debug)]
pub struct Sandbox {
    tmp: tempfile::TempDir,
    /// The canonical path of the temp folder holding both.
    pub top: PathBuf,
    /// The random token in `canary/secret`.
    pub token: String,
    before: BTreeMap<String, String>,
}

impl Sandbox {
    /// A sandbox whose top folder holds the canary and the folders in `names` (empty).
    pub fn new(names: &[&str]) -> Sandbox {
        let tmp = tempfile::Builder::new().prefix("vmrepro-fuzz-").tempdir().expect("temp folder");
        let top = std::fs::canonicalize(tmp.path()).expect("temp folder");
        let token = format!(
            "CANARY-{}",
            hex::encode(Sha256::digest(format!("{:?}{}", std::time::SystemTime::now(), top.display())))
        );
        let canary = top.join("canary");
        std::fs::create_dir(&canary).expect("canary");
        std::fs::write(canary.join("secret"), format!("{token}\n")).expect("canary");
        std::fs::write(canary.join("victim"), "a file outside the folder under test\n").expect("canary");
        for n in names {
            std::fs::create_dir(top.join(n)).expect("sandbox folder");
        }
        let mut s = Sandbox { tmp, top, token, before: BTreeMap::new() };
        s.before = s.outside();
        s
    }

    /// Everything in the top folder but the folders under test: path → what it is
    /// (a file's SHA-256, a link's target, "folder"), links not followed.
    fn outside(&self) -> BTreeMap<String, String> {
        let mut out = BTreeMap::new();
        let mut stack = vec![self.top.clone()];
        while let Some(d) = stack.pop() {
            let Ok(items) = std::fs::read_dir(&d) else { continue };
            for e in items.flatten() {
                let p = e.path();
                let rel = p.strip_prefix(&self.top).unwrap_or(&p).display().to_string();
                let Ok(meta) = std::fs::symlink_metadata(&p) else { continue };
                if d == self.top && meta.is_dir() && rel != "canary" {
                    out.insert(rel, "folder under test".into());
                    continue;
                }
                let what = if meta.file_type().is_symlink() {
                    format!("link to {}", std::fs::read_link(&p).map(|t| t.display().to_string()).unwrap_or_default())
                } else if meta.is_dir() {
                    stack.push(p.clone());
                    "folder".into()
                } else if meta.is_file() {
                    hex::encode(Sha256::digest(std::fs::read(&p).unwrap_or_default()))
                } else {
                    format!("{:?}", meta.file_type())
                };
                out.insert(rel, what);
            }
        }
        out
    }

    /// `Err` naming what changed beside the folders under test since [`Sandbox::new`].
    pub fn check_outside(&self) -> Result<(), String> {
        let now = self.outside();
        if now == self.before {
            return Ok(());
        }
        let mut diffs = Vec::new();
        for (k, v) in &now {
            match self.before.get(k) {
                None => diffs.push(format!("{k} was created ({v})")),
                Some(b) if b != v => diffs.push(format!("{k} was changed ({b} -> {v})")),
                _ => {}
            }
        }
        for k in self.before.keys().filter(|k| !now.contains_key(*k)) {
            diffs.push(format!("{k} was removed"));
        }
        Err(format!("written outside the folder under test: {}", diffs.join("; ")))
    }

    /// `Err` when `text` (something vmrepro produced) holds the canary token.
    pub fn check_no_token(&self, what: &str, text: &str) -> Result<(), String> {
        if text.contains(&self.token) {
            return Err(format!(
                "{what} holds the canary token: a file outside the folder under test was read into it"
            ));
        }
        Ok(())
    }

    /// `Err` when a regular file under `dir` (links not followed) holds the token.
    pub fn check_tree_no_token(&self, dir: &Path) -> Result<(), String> {
        let mut stack = vec![dir.to_path_buf()];
        while let Some(d) = stack.pop() {
            let Ok(items) = std::fs::read_dir(&d) else { continue };
            for e in items.flatten() {
                let Ok(ft) = e.file_type() else { continue };
                if ft.is_dir() {
                    stack.push(e.path());
                } else if ft.is_file() {
                    let data = std::fs::read(e.path()).unwrap_or_default();
                    self.check_no_token(&e.path().display().to_string(), &String::from_utf8_lossy(&data))?;
                }
            }
        }
        Ok(())
    }

    /// The link target to create for `target` (as written in the input) at `at`
    /// (the link's path), or `None` when it would point outside the sandbox.
    fn link_target(&self, at: &Path, target: &str) -> Option<PathBuf> {
        if let Some(name) = target.strip_prefix("@canary/") {
            return Some(self.top.join("canary").join(clean(name)?));
        }
        if target == "@zero" {
            return Some(PathBuf::from("/dev/zero"));
        }
        let t = Path::new(target);
        let base = if t.is_absolute() { PathBuf::new() } else { at.parent()?.to_path_buf() };
        let mut resolved = base;
        for c in t.components() {
            match c {
                Component::Normal(n) => resolved.push(n),
                Component::ParentDir if !resolved.pop() => return None,
                Component::RootDir => resolved = PathBuf::from("/"),
                _ => {}
            }
        }
        resolved.starts_with(&self.top).then(|| t.to_path_buf())
    }

    /// Creates `entries` under `dir` (inside the sandbox): paths made relative and
    /// `..`-free, entries the filesystem refuses skipped (two entries of one name: the
    /// first wins).
    pub fn materialise(&self, dir: &Path, entries: &[Entry]) {
        for e in entries {
            let Some(rel) = clean(&e.path) else { continue };
            let at = dir.join(&rel);
            if let Some(parent) = at.parent() {
                if std::fs::create_dir_all(parent).is_err() {
                    continue;
                }
            }
            if std::fs::symlink_metadata(&at).is_ok() {
                continue;
            }
            let _ = match &e.kind {
                Kind::File(data) => std::fs::File::create_new(&at).and_then(|mut f| f.write_all(data)),
                Kind::Dir => std::fs::create_dir(&at),
                Kind::Link(t) | Kind::Hard(t) => match self.link_target(&at, t) {
                    Some(t) => std::os::unix::fs::symlink(t, &at),
                    None => Ok(()),
                },
                Kind::Fifo => nix::unistd::mkfifo(&at, nix::sys::stat::Mode::from_bits_truncate(0o644))
                    .map_err(std::io::Error::from),
            };
        }
    }

    /// The top folder's path.
    pub fn path(&self) -> &Path {
        self.tmp.path()
    }
}

/// `path` as a relative, `..`-free path, or `None` when nothing is left.
fn clean(path: &str) -> Option<PathBuf> {
    let p: PathBuf = Path::new(path).components().filter(|c| matches!(c, Component::Normal(_))).collect();
    (!p.as_os_str().is_empty()).then_some(p)
}

/// `Err` unless `message` is non-empty and names one of `names` (a file or folder).
fn names_a_file(what: &str, message: &str, names: &[String]) -> Result<(), String> {
    if message.trim().is_empty() {
        return Err(format!("{what}: an empty error message"));
    }
    if names.iter().any(|n| message.contains(n.as_str())) {
        return Ok(());
    }
    Err(format!("{what}: the error names none of {names:?}: {message}"))
}

/// The suite loader: `data` is the suite (`suite.yaml`) or a folder with a
/// `suite.yaml` in it, loaded against the repository's `images/` (`repo/images`) plainly
/// and confined to its folder.
pub fn suite(data: &[u8], repo: &Path) -> Result<(), String> {
    let sb = Sandbox::new(&["suite"]);
    let dir = sb.top.join("suite");
    match decode(data) {
        Some(entries) => sb.materialise(&dir, &entries),
        None => std::fs::write(dir.join("suite.yaml"), data).map_err(|e| format!("harness: {e}"))?,
    }
    let file = dir.join("suite.yaml");
    let images = repo.join("images");
    let names = ["suite.yaml".to_string(), images.display().to_string()];
    match vmrepro::suite::load(&file, Some(&images)) {
        Ok((plan, _)) => {
            serde_json::to_string(&plan).map_err(|e| format!("the plan does not serialise: {e}"))?;
        }
        Err(e) => names_a_file("suite::load", &e.to_string(), &names)?,
    }
    load_confined(&sb, "a suite loaded confined to its folder", &file, &images, &dir, &names)?;
    sb.check_outside()
}

/// `suite::load_with(file, images)` confined to `confine_to` (as `replay` loads a
/// bundle's suite): its plan and its error hold no canary token, its error names one of
/// `names`.
fn load_confined(
    sb: &Sandbox,
    what: &str,
    file: &Path,
    images: &Path,
    confine_to: &Path,
    names: &[String],
) -> Result<(), String> {
    let options = vmrepro::suite::LoadOptions { confine_to: Some(confine_to.to_path_buf()), ..Default::default() };
    match vmrepro::suite::load_with(file, Some(images), &options) {
        Ok((plan, _)) => {
            let json = serde_json::to_string(&plan).map_err(|e| format!("the plan does not serialise: {e}"))?;
            sb.check_no_token(&format!("the plan of {what}"), &json)
        }
        Err(e) => {
            let text = e.to_string();
            names_a_file(what, &text, names)?;
            sb.check_no_token("the error", &text)
        }
    }
}

/// The tar archive of `entries` with their raw names (absolute, `..` kept), gzip'd.
/// Without a `MANIFEST` entry one is added, listing every regular file under the first
/// entry's top folder, so that mutations reach past the checksum check.
pub fn tar_gz(sb: &Sandbox, out_dir: &Path, entries: &[Entry]) -> Vec<u8> {
    let mut tar = tar::Builder::new(Vec::new());
    let top = entries.first().and_then(|e| e.path.split('/').next()).unwrap_or("b").to_string();
    let mut manifest = String::new();
    let mut has_manifest = false;
    for e in entries {
        let mut h = tar::Header::new_gnu();
        h.set_mode(0o644);
        h.set_mtime(0);
        let name = e.path.as_bytes();
        if name.is_empty() {
            continue;
        }
        let data: &[u8] = match &e.kind {
            Kind::File(d) => {
                h.set_entry_type(tar::EntryType::Regular);
                if let Some(rel) = e.path.strip_prefix(&format!("{top}/")) {
                    if rel == "MANIFEST" {
                        has_manifest = true;
                    } else {
                        manifest.push_str(&format!("{}  {rel}\n", hex::encode(Sha256::digest(d))));
                    }
                }
                d
            }
            Kind::Dir => {
                h.set_entry_type(tar::EntryType::Directory);
                h.set_mode(0o755);
                &[]
            }
            Kind::Link(t) | Kind::Hard(t) => {
                let Some(target) = sb.link_target(&out_dir.join(clean(&e.path).unwrap_or_default()), t) else {
                    continue;
                };
                let target = target.display().to_string();
                if target.len() > 99 {
                    continue;
                }
                h.set_entry_type(if matches!(e.kind, Kind::Link(_)) {
                    tar::EntryType::Symlink
                } else {
                    tar::EntryType::Link
                });
                h.as_old_mut().linkname[..target.len()].copy_from_slice(target.as_bytes());
                &[]
            }
            Kind::Fifo => {
                h.set_entry_type(tar::EntryType::Fifo);
                &[]
            }
        };
        h.set_size(data.len() as u64);
        if name.len() > 99 {
            // A GNU long name (tar::Builder refuses `..` in those: the entry is dropped).
            let _ = tar.append_data(&mut h, &e.path, data);
            continue;
        }
        h.as_old_mut().name[..name.len()].copy_from_slice(name);
        h.set_cksum();
        let _ = tar.append(&h, data);
    }
    if !has_manifest {
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(tar::EntryType::Regular);
        h.set_mode(0o644);
        h.set_size(manifest.len() as u64);
        let _ = h.set_path(format!("{top}/MANIFEST"));
        h.set_cksum();
        let _ = tar.append(&h, manifest.as_bytes());
    }
    let raw = tar.into_inner().unwrap_or_default();
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    let _ = gz.write_all(&raw);
    gz.finish().unwrap_or_default()
}

/// The bundle reader: `data` is the bundle's bytes (gzip or Zstandard, as written) or a
/// folder that [`tar_gz`] packs; it is unpacked into `out/` by
/// `publish::bundle::extract`, and a bundle that passes has its suite loaded as
/// `replay` loads it (confined to the bundle).
pub fn bundle(data: &[u8], repo: &Path) -> Result<(), String> {
    let _ = repo;
    let sb = Sandbox::new(&["in", "out"]);
    let out = sb.top.join("out");
    let bytes = match decode(data) {
        Some(entries) => tar_gz(&sb, &out, &entries),
        None => data.to_vec(),
    };
    let name = if bytes.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) { "bundle.tar.zst" } else { "bundle.tar.gz" };
    let file = sb.top.join("in").join(name);
    std::fs::write(&file, &bytes).map_err(|e| format!("harness: {e}"))?;
    match vmrepro::publish::bundle::extract(&file, &out) {
        Ok(ex) => {
            let suite = ex.top.join(&ex.info.suite_file);
            let images = ex.top.join(&ex.info.images_dir);
            let names = [ex.info.suite_file.clone(), images.display().to_string(), ex.top.display().to_string()];
            load_confined(&sb, "the bundled suite", &suite, &images, &ex.top, &names)?;
        }
        Err(e) => {
            let text = e.to_string();
            names_a_file("extract", &text, &[file.display().to_string(), out.display().to_string()])?;
            sb.check_no_token("the error", &text)?;
        }
    }
    sb.check_outside()
}

/// The run-folder reader: `data` is a run folder (the folder format), made in `run/`;
/// `analyse`, the published report (`report.md`, `report.html`), the snapshot value,
/// the printed tables and `compare` of the folder with itself.
pub fn run_folder(data: &[u8], repo: &Path) -> Result<(), String> {
    let _ = repo;
    let sb = Sandbox::new(&["run"]);
    let dir = sb.top.join("run");
    match decode(data) {
        Some(entries) => sb.materialise(&dir, &entries),
        None => std::fs::write(dir.join("run.json"), data).map_err(|e| format!("harness: {e}"))?,
    }
    let names = [dir.display().to_string()];
    match vmrepro::analyse::analyse_dir(&dir) {
        Ok(a) => {
            match vmrepro::report::published::write_analysed(&a) {
                Ok(_) => {}
                Err(e) => names_a_file("report", &e.to_string(), &names)?,
            }
            match vmrepro::report::snapshot::normalise(&a) {
                Ok(n) => sb.check_no_token("the snapshot value", &format!("{n:?}"))?,
                Err(e) => names_a_file("snapshot", &e.to_string(), &names)?,
            }
            sb.check_no_token("the tables", &vmrepro::report::tables(&a))?;
        }
        Err(e) => {
            let text = e.to_string();
            names_a_file("analyse", &text, &names)?;
            sb.check_no_token("the error", &text)?;
        }
    }
    match vmrepro::publish::replay::open(&dir, &vmrepro::publish::archive::Budget::default()) {
        Ok(o) => {
            let (d, notes) = vmrepro::publish::replay::compare(&o, &o);
            sb.check_no_token("compare", &format!("{}{notes:?}", d.text))?;
        }
        Err(e) => names_a_file("compare", &e.to_string(), &names)?,
    }
    sb.check_tree_no_token(&dir)?;
    sb.check_outside()
}

/// The libFuzzer target `name` (of [`TARGETS`]) on `data`: a broken property panics,
/// which libFuzzer reports as a crash and saves the input of.
pub fn fuzz_one(name: &str, data: &[u8]) {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let (_, target) = TARGETS.iter().find(|(n, _)| *n == name).expect("a target of TARGETS");
    if let Err(property) = target(data, &repo) {
        panic!("{name}: {property}");
    }
}

/// One target: the input's bytes and the repository's root → `Err(broken property)`.
pub type Target = fn(&[u8], &Path) -> Result<(), String>;

/// The three targets by name, as `fuzz/fuzz_targets/` and `fuzz/corpus/` name them.
pub const TARGETS: [(&str, Target); 3] = [("suite", suite), ("bundle", bundle), ("run_folder", run_folder)];
