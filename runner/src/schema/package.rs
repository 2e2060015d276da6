//! [`DebianPackage`]: a Debian binary package name as a suite, a rootfs recipe or a
//! plan names it (`fio`, `libstdc++6`, `fio/bookworm-backports`), parsed once.
//!
//! The name reaches mmdebstrap on the host, which hands it to `apt-get install`; both
//! read more into a word than a name: mmdebstrap splits `--include` at commas and
//! whitespace and installs a word starting with `/`, `./` or `../` as a local `.deb`,
//! or one starting with `?`, `~`, `!` or `(` as an apt pattern; apt-get removes a
//! package whose word ends in `-`, installs on a trailing `+`, reads `=…` as a version,
//! and falls back to a regular expression or glob when no package has the literal name
//! (`fio.+x`). A [`DebianPackage`] is none of these: Debian Policy §5.6.1's grammar
//! (`[a-z0-9][a-z0-9+.-]+`), ending in a letter or a digit, at most
//! [`MAX_NAME_BYTES`] bytes, with an optional `/suite` from [`DEBIAN_SUITES`]. The
//! rootfs builder passes one `--include=` per package and sets apt's
//! `APT::Cmd::Pattern-Only`, so that apt takes names literally (measured with apt 2.6:
//! `apt-get -s install 'fio.+'` selects 200+ packages by regex without it, and fails
//! with "Unable to locate package" with it).

use std::fmt;

use serde::{Deserialize, Serialize};

/// Longest package name accepted, bytes (Debian's longest names are about 60).
pub const MAX_NAME_BYTES: usize = 64;

/// Debian's release code names, `hamm` (2.0) to `duke` (15), `sid` and the aliases
/// (`stable`, …, `experimental`). A suite is one of these, or a code name with one of
/// [`SUITE_SUFFIXES`] (`bookworm-backports`).
pub const DEBIAN_SUITES: &[&str] = &[
    "hamm",
    "slink",
    "potato",
    "woody",
    "sarge",
    "etch",
    "lenny",
    "squeeze",
    "wheezy",
    "jessie",
    "stretch",
    "buster",
    "bullseye",
    "bookworm",
    "trixie",
    "forky",
    "duke",
    "sid",
    "oldoldstable",
    "oldstable",
    "stable",
    "testing",
    "unstable",
    "experimental",
];

/// Suffixes of the archive's further suites of a release (`bookworm-updates`).
pub const SUITE_SUFFIXES: &[&str] = &["-updates", "-backports", "-backports-sloppy", "-proposed-updates", "-security"];

/// A Debian package name with an optional `/suite` (see the module docs for the
/// grammar). Serialized as the text it was written as.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct DebianPackage(String);

/// Why a text is not a [`DebianPackage`]; the message quotes the text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{} is not a Debian package name: {why}", crate::schema::text::shown(.text, 80))]
pub struct PackageNameError {
    /// The text as written.
    pub text: String,
    /// What is wrong, in words.
    pub why: String,
}

impl DebianPackage {
    /// Parses `text`: `name` or `name/suite`.
    ///
    /// Errors: [`PackageNameError`] saying which rule the text breaks.
    pub fn parse(text: &str) -> Result<DebianPackage, PackageNameError> {
        let err = |why: &str| PackageNameError { text: text.to_string(), why: why.to_string() };
        if text.starts_with(['/', '.']) || text.ends_with(".deb") {
            return Err(err(
                "it reads as a path to a .deb; a package comes from the Debian archive by name, never from a file",
            ));
        }
        let (name, suite) = match text.split_once('/') {
            Some((n, s)) => (n, Some(s)),
            None => (text, None),
        };
        if let Some(why) = name_problem(name) {
            return Err(err(&why));
        }
        if let Some(s) = suite {
            if !is_debian_suite(s) {
                return Err(err(&format!(
                    "after '/' comes a Debian suite (a release such as bookworm or stable, optionally with {}), not {}",
                    SUITE_SUFFIXES.join(", "),
                    crate::schema::text::shown(s, 40)
                )));
            }
        }
        Ok(DebianPackage(text.to_string()))
    }

    /// The package name, without the suite (`fio` of `fio/bookworm-backports`).
    pub fn name(&self) -> &str {
        self.0.split_once('/').map_or(&self.0, |(n, _)| n)
    }

    /// The suite it is taken from, if one is named.
    pub fn suite(&self) -> Option<&str> {
        self.0.split_once('/').map(|(_, s)| s)
    }

    /// The whole text, `name` or `name/suite`, as apt-get reads it.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// What is wrong with a package name (no suite), or `None`.
fn name_problem(name: &str) -> Option<String> {
    let first = name.chars().next();
    let last = name.chars().last();
    if name.len() < 2 {
        return Some("a name has at least 2 characters".into());
    }
    if name.len() > MAX_NAME_BYTES {
        return Some(format!("a name has at most {MAX_NAME_BYTES} bytes"));
    }
    if let Some(c) = name.chars().find(|c| !(c.is_ascii_lowercase() || c.is_ascii_digit() || "+.-".contains(*c))) {
        let hint = if c.is_ascii_uppercase() { " (names are lower case)" } else { "" };
        return Some(format!(
            "{} is not allowed; a name has lower case letters, digits, '+', '-' and '.'{hint}",
            crate::schema::text::shown(&c.to_string(), 10)
        ));
    }
    if !first.is_some_and(|c| c.is_ascii_alphanumeric()) {
        return Some("a name starts with a letter or a digit".into());
    }
    if !last.is_some_and(|c| c.is_ascii_alphanumeric()) {
        return Some(
            "a name ends with a letter or a digit here: apt-get reads a trailing '-' as \"remove\" and a trailing '+' as \"install\" (for g++, ask for the versioned package, e.g. g++-12)"
                .into(),
        );
    }
    None
}

/// Whether `s` is a Debian suite: one of [`DEBIAN_SUITES`], or a code name with one of
/// [`SUITE_SUFFIXES`].
pub fn is_debian_suite(s: &str) -> bool {
    DEBIAN_SUITES.contains(&s)
        || SUITE_SUFFIXES.iter().any(|x| {
            s.strip_suffix(x).is_some_and(|base| {
                DEBIAN_SUITES.contains(&base) && !["sid", "unstable", "experimental"].contains(&base)
            })
        })
}

/// Deserializes a `packages` list; an entry's error starts with its key below the
/// mapping that holds the list (`packages[2]: …`), so that the suite loader points at
/// the entry, not at the list.
pub fn deserialize_list<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<DebianPackage>, D::Error> {
    let raw = Vec::<String>::deserialize(d)?;
    (raw.iter().enumerate())
        .map(|(i, s)| DebianPackage::parse(s).map_err(|e| serde::de::Error::custom(format!("packages[{i}]: {e}"))))
        .collect()
}

impl TryFrom<String> for DebianPackage {
    type Error = PackageNameError;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        DebianPackage::parse(&s)
    }
}

impl From<DebianPackage> for String {
    fn from(p: DebianPackage) -> String {
        p.0
    }
}

impl AsRef<str> for DebianPackage {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for DebianPackage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl schemars::JsonSchema for DebianPackage {
    fn schema_name() -> String {
        "DebianPackage".into()
    }

    /// A string of Debian Policy's name grammar, at most [`MAX_NAME_BYTES`] bytes, with
    /// an optional `/suite` of [`DEBIAN_SUITES`] and [`SUITE_SUFFIXES`].
    fn json_schema(_: &mut schemars::gen::SchemaGenerator) -> schemars::schema::Schema {
        use schemars::schema::{InstanceType, Metadata, SchemaObject, StringValidation};
        SchemaObject {
            instance_type: Some(InstanceType::String.into()),
            metadata: Some(Box::new(Metadata {
                description: Some(
                    "A Debian package name (lower case letters, digits, `+ - .`; starts and ends with a letter or digit), optionally `/suite` (`fio/bookworm-backports`).".into(),
                ),
                ..Default::default()
            })),
            string: Some(Box::new(StringValidation {
                pattern: Some(format!(
                    "^[a-z0-9][a-z0-9+.-]{{0,{}}}[a-z0-9](/({})({})?)?$",
                    MAX_NAME_BYTES - 2,
                    DEBIAN_SUITES.join("|"),
                    SUITE_SUFFIXES.join("|")
                )),
                ..Default::default()
            })),
            ..Default::default()
        }
        .into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_policy_names_and_known_suites() {
        for ok in [
            "fio",
            "iperf3",
            "libstdc++6",
            "python3.11",
            "g++-12",
            "libsigc++-2.0-0v5",
            "0ad",
            "fio/bookworm-backports",
            "nfs-common/bookworm-updates",
            "fio/sid",
            "fio/stable",
        ] {
            let p = DebianPackage::parse(ok).unwrap_or_else(|e| panic!("{ok}: {e}"));
            assert_eq!(p.as_str(), ok);
        }
        let p = DebianPackage::parse("fio/bookworm-backports").unwrap();
        assert_eq!((p.name(), p.suite()), ("fio", Some("bookworm-backports")));
    }

    #[test]
    fn refuses_paths_options_lists_and_apt_syntax() {
        for bad in [
            "",
            "f",
            "Fio",
            "-fio",
            "--purge",
            ".fio",
            "+fio",
            "fio-",
            "fio+",
            "g++",
            "fio.",
            "fio,gcc",
            "fio gcc",
            "fio\ngcc",
            "fio;reboot",
            "fio=3.33-3",
            "fio*",
            "fio?",
            "?essential",
            "~nfio",
            "!fio",
            "(fio)",
            "/tmp/x.deb",
            "./x.deb",
            "../x.deb",
            "x.deb/",
            "fio/",
            "fio/trixie/x",
            "fio/bookworm-foo",
            "fio/sid-backports",
            "fio/Bookworm",
            "fio/../../x",
            "fïo",
            "fio\u{0}",
        ] {
            assert!(DebianPackage::parse(bad).is_err(), "{bad:?} was accepted");
        }
        let long = "a".repeat(MAX_NAME_BYTES + 1);
        assert!(DebianPackage::parse(&long).is_err());
        assert!(DebianPackage::parse(&long[1..]).is_ok());
    }
}
