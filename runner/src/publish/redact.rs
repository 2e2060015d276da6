//! Keeping the publisher's machine out of a bundle: host paths become placeholders,
//! and the host name and user name are replaced, in every text file the bundle copies.
//!
//! Rules, applied in this order (longest path first):
//!
//! | found | becomes |
//! |---|---|
//! | the run folder | `$RUN_DIR` |
//! | the run's private temp folder `…/vmrepro-run-XXXX` | `$TMP/vmrepro-run-XXXX` |
//! | the suite's folder (when outside the project) | `$SUITE_DIR` |
//! | the project folder (parent of `images/`) | `$PROJECT` |
//! | the artefact cache | `$CACHE` |
//! | the home folder | `$HOME` |
//! | the host name, as a whole word | `$HOSTNAME` |
//! | the user name, as a whole word | `$USER` |
//!
//! A path matches only where it ends (`/home/ann` in `/home/ann/x` but not in
//! `/home/anna`); a word only between characters that can't belong to a name (letters,
//! digits, `_`, `-`; so `box7` in `ann@box7.example` is replaced). The user
//! name of a system account (uid < 1000, e.g. `root`) names nobody and is not replaced:
//! replacing `root` would also rewrite `root=/dev/vda` in kernel command lines. Names
//! shorter than [`MIN_WORD`] characters are not replaced either (the bundle says so):
//! they are ordinary words. JSON files keep their keys: only string values are redacted.
//! vmrepro itself never writes the host name or the user name; they can only come
//! from a tool's output that a run recorded.

use std::path::Path;

/// Who and where the publisher is.
#[derive(Debug, Clone, Default)]
pub struct Identity {
    /// `$HOME`.
    pub home: Option<String>,
    /// The host name (`/proc/sys/kernel/hostname`).
    pub host: Option<String>,
    /// The user name, when it names a person (uid ≥ 1000).
    pub user: Option<String>,
}

impl Identity {
    /// The current process's.
    pub fn current() -> Identity {
        let uid = nix::unistd::getuid();
        let user = if uid.as_raw() >= 1000 {
            nix::unistd::User::from_uid(uid).ok().flatten().map(|u| u.name).or_else(|| std::env::var("USER").ok())
        } else {
            None
        };
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .ok()
            .map(|h| h.trim().to_string())
            .filter(|h| !h.is_empty());
        Identity { home: std::env::var("HOME").ok().filter(|h| h.len() > 1), host, user }
    }
}

#[derive(Debug, Clone)]
enum Rule {
    Path { from: Vec<u8>, to: Vec<u8> },
    Word { from: Vec<u8>, to: Vec<u8> },
}

/// A list of replacements (see the module docs).
#[derive(Debug, Clone, Default)]
pub struct Redactor {
    paths: Vec<(Vec<u8>, Vec<u8>)>,
    words: Vec<(Vec<u8>, Vec<u8>)>,
    skipped: Vec<String>,
}

/// Shortest host or user name replaced, in characters.
pub const MIN_WORD: usize = 3;

fn is_path_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.' | b'+' | b'@' | b'~')
}

fn is_word_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-')
}

impl Redactor {
    /// No replacement.
    pub fn new() -> Redactor {
        Redactor::default()
    }

    /// Replaces the path `from` (and its canonical form) with `to`. Ignores `/` and
    /// empty paths.
    pub fn path(&mut self, from: impl AsRef<Path>, to: &str) -> &mut Self {
        let p = from.as_ref();
        let mut forms = vec![p.to_path_buf()];
        if let Ok(c) = std::fs::canonicalize(p) {
            forms.push(c);
        }
        for f in forms {
            let s = f.to_string_lossy().trim_end_matches('/').to_string();
            if s.len() > 1 && s.starts_with('/') && !self.paths.iter().any(|(x, _)| x == s.as_bytes()) {
                self.paths.push((s.into_bytes(), to.as_bytes().to_vec()));
            }
        }
        self
    }

    /// Replaces the whole word `from` with `to`. A word shorter than [`MIN_WORD`]
    /// characters is not replaced but remembered ([`Redactor::skipped`]): it can't be
    /// told apart from ordinary words (a host named `vm` would turn every `"vm"` key of
    /// `results.json` and `/proc/sys/vm` into `$HOSTNAME`).
    pub fn word(&mut self, from: &str, to: &str) -> &mut Self {
        if from.chars().count() < MIN_WORD {
            if !from.is_empty() {
                self.skipped.push(from.to_string());
            }
        } else {
            self.words.push((from.as_bytes().to_vec(), to.as_bytes().to_vec()));
        }
        self
    }

    /// Words too short to replace safely (see [`Redactor::word`]).
    pub fn skipped(&self) -> &[String] {
        &self.skipped
    }

    /// `data` redacted; a JSON document (`json`) keeps its structure: only its string
    /// values are redacted, never its keys.
    pub fn apply_file(&self, data: &[u8], json: bool) -> Vec<u8> {
        if !json || !self.leaks(data) {
            return self.apply(data);
        }
        match serde_json::from_slice::<serde_json::Value>(data) {
            Ok(mut v) => {
                self.apply_json(&mut v);
                (serde_json::to_string_pretty(&v).expect("serializable") + "\n").into_bytes()
            }
            Err(_) => self.apply(data),
        }
    }

    fn apply_json(&self, v: &mut serde_json::Value) {
        match v {
            serde_json::Value::String(s) => *s = String::from_utf8_lossy(&self.apply(s.as_bytes())).into_owned(),
            serde_json::Value::Array(a) => a.iter_mut().for_each(|x| self.apply_json(x)),
            serde_json::Value::Object(o) => o.values_mut().for_each(|x| self.apply_json(x)),
            _ => {}
        }
    }

    fn rules(&self) -> Vec<Rule> {
        let mut paths = self.paths.clone();
        paths.sort_by_key(|p| std::cmp::Reverse(p.0.len()));
        let mut out: Vec<Rule> = paths.into_iter().map(|(from, to)| Rule::Path { from, to }).collect();
        out.extend(self.words.iter().cloned().map(|(from, to)| Rule::Word { from, to }));
        out
    }

    /// `data` with every rule applied.
    pub fn apply(&self, data: &[u8]) -> Vec<u8> {
        let mut cur = data.to_vec();
        for r in self.rules() {
            let (from, to, word) = r.parts();
            cur = replace(&cur, from, to, |b, a| accepts(word, b, a));
        }
        cur
    }

    /// Whether `data` still holds anything this redactor replaces.
    pub fn leaks(&self, data: &[u8]) -> bool {
        self.apply(data) != data
    }

    /// The first place in `data` that a rule would replace: its byte offset and the
    /// placeholder it would become (`$HOME`). For binary files, which are carried byte
    /// for byte or not at all.
    pub fn first_leak(&self, data: &[u8]) -> Option<(usize, String)> {
        self.rules()
            .iter()
            .filter_map(|r| {
                let (from, to, word) = r.parts();
                let at = next_match(data, 0, from, &|b, a| accepts(word, b, a))?;
                Some((at, String::from_utf8_lossy(to).into_owned()))
            })
            .min_by_key(|(at, _)| *at)
    }
}

impl Rule {
    /// What it replaces, with what, and whether it is a word (else a path).
    fn parts(&self) -> (&[u8], &[u8], bool) {
        match self {
            Rule::Path { from, to } => (from, to, false),
            Rule::Word { from, to } => (from, to, true),
        }
    }
}

/// Whether a match between the bytes `before` and `after` counts: a word's between
/// characters that can't belong to a name, a path's where the path ends.
fn accepts(word: bool, before: Option<u8>, after: Option<u8>) -> bool {
    if word {
        !before.is_some_and(is_word_char) && !after.is_some_and(is_word_char)
    } else {
        !after.is_some_and(is_path_char)
    }
}

/// The first occurrence of `from` in `data` at or after `i` that `ok(byte before, byte
/// after)` accepts.
fn next_match(data: &[u8], mut i: usize, from: &[u8], ok: &impl Fn(Option<u8>, Option<u8>) -> bool) -> Option<usize> {
    if from.is_empty() {
        return None;
    }
    while i + from.len() <= data.len() {
        if data[i..].starts_with(from) && ok(i.checked_sub(1).map(|j| data[j]), data.get(i + from.len()).copied()) {
            return Some(i);
        }
        i += 1;
    }
    None
}

/// `data` with each occurrence of `from` that `ok(byte before, byte after)` accepts
/// replaced by `to`.
fn replace(data: &[u8], from: &[u8], to: &[u8], ok: impl Fn(Option<u8>, Option<u8>) -> bool) -> Vec<u8> {
    let mut out = Vec::with_capacity(data.len());
    let mut i = 0;
    while let Some(at) = next_match(data, i, from, &ok) {
        out.extend_from_slice(&data[i..at]);
        out.extend_from_slice(to);
        i = at + from.len();
    }
    out.extend_from_slice(&data[i..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_end_where_they_end_and_words_are_whole() {
        let mut r = Redactor::new();
        r.path("/home/ann", "$HOME")
            .path("/home/ann/.cache/vmrepro", "$CACHE")
            .word("ann", "$USER")
            .word("box7", "$HOSTNAME");
        let got = r.apply(b"/home/ann/.cache/vmrepro/kernel/x /home/anna/y ann@box7: joanne annex box7.local");
        assert_eq!(
            String::from_utf8(got).unwrap(),
            "$CACHE/kernel/x /home/anna/y $USER@$HOSTNAME: joanne annex $HOSTNAME.local"
        );
        assert!(r.leaks(b"see /home/ann"));
        assert!(!r.leaks(b"nothing here"));
        assert_eq!(r.first_leak(b"\x00\x01box7\x00 /home/ann/.cache/vmrepro"), Some((2, "$HOSTNAME".into())));
        assert_eq!(r.first_leak(b"/home/anna box77"), None);
    }

    #[test]
    fn short_names_are_skipped_and_json_keys_kept() {
        let mut r = Redactor::new();
        r.word("vm", "$HOSTNAME").word("kmaint", "$USER").path("/home/kmaint", "$HOME");
        assert_eq!(r.skipped(), ["vm"]);
        let json = br#"{"vm": "client-a", "kmaint": "/home/kmaint/x", "n": 1.5}"#;
        let out: serde_json::Value = serde_json::from_slice(&r.apply_file(json, true)).unwrap();
        assert_eq!(out, serde_json::json!({"vm": "client-a", "kmaint": "$HOME/x", "n": 1.5}));
    }
}
