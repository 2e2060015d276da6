//! The suite format's JSON Schema, `docs/src/suite.schema.json` (generated from the
//! types of `vmrepro::schema`, see `vmrepro::schema::json`):
//!
//! - it is current (`UPDATE_SCHEMA=1 cargo test --test schema` rewrites it);
//! - it accepts every suite in `suites/`;
//! - on the bad-suite corpus (`tests/fixtures/bad-suites/`) it agrees with the loader:
//!   every fixture the deserializer refuses (unknown key, wrong type, missing key,
//!   unknown choice: the structural mistakes) the schema refuses too, and every fixture
//!   the loader reads (its mistake is one of the cross-field rules of validation) the
//!   schema accepts, so an editor flags no suite `vmrepro check` would pass.
//!
//! Validated with the `jsonschema` crate (draft 7, formats checked), on the YAML read
//! as JSON by `serde_yaml`, which is what a YAML language server does.

mod support;

use std::fs;
use std::path::{Path, PathBuf};

use support::repo_root;
use vmrepro::schema::json::suite_schema_text;
use vmrepro::schema::load::parse_suite;
use vmrepro::schema::SuiteSpec;

const SCHEMA: &str = "docs/src/suite.schema.json";
const FIXTURES: &str = "runner/tests/fixtures/bad-suites";

/// Structural mistakes a JSON Schema can't see, by fixture stem, with why.
const BEYOND_A_SCHEMA: &[(&str, &str)] = &[(
    "yaml-tag-int",
    "`!!int \"256\"`: a core tag is resolved before JSON exists (the value is 256); the loader refuses every tag",
)];

fn validator() -> jsonschema::Validator {
    let schema: serde_json::Value = serde_json::from_str(&suite_schema_text()).expect("the schema is JSON");
    jsonschema::options().should_validate_formats(true).build(&schema).expect("the schema is a valid draft 7 schema")
}

fn yaml_files(dir: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("folder entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    out.sort();
    out
}

/// What the validator says about `json`: empty when it is valid.
fn errors(v: &jsonschema::Validator, json: &serde_json::Value) -> Vec<String> {
    v.iter_errors(json).map(|e| format!("{}: {e}", e.instance_path())).collect()
}

/// The YAML document `text` as JSON, as a YAML language server sees it; `None` when it
/// is not one YAML document or has a duplicate key (which YAML forbids). A tag stays
/// in the JSON as a one-key map (`{"!!int": "256"}`): the loader refuses tags too.
fn as_json(text: &str) -> Option<serde_json::Value> {
    let yaml: serde_yaml::Value = serde_yaml::from_str(text).ok()?;
    serde_json::to_value(yaml).ok()
}

#[test]
fn checked_in_schema_is_current() {
    let path = repo_root().join(SCHEMA);
    let want = suite_schema_text();
    if std::env::var_os("UPDATE_SCHEMA").is_some() {
        fs::write(&path, &want).expect("write the schema");
    }
    let got = fs::read_to_string(&path).unwrap_or_default();
    assert!(got == want, "{SCHEMA} is stale: run UPDATE_SCHEMA=1 cargo test --test schema");
}

#[test]
fn accepts_every_suite_in_suites() {
    let v = validator();
    let suites = yaml_files(&repo_root().join("suites"));
    assert!(suites.len() >= 10, "suites/ has {} suites", suites.len());
    for path in suites {
        let text = fs::read_to_string(&path).expect("suite is readable");
        let json = as_json(&text).expect("suite is one YAML document");
        let e = errors(&v, &json);
        assert!(e.is_empty(), "{} is a good suite, but the schema refuses it: {e:#?}", path.display());
    }
}

#[test]
fn agrees_with_the_loader_on_the_bad_suites() {
    let v = validator();
    let (mut refused, mut accepted, mut neither) = (0, 0, 0);
    let mut wrong = Vec::new();
    for path in yaml_files(&repo_root().join(FIXTURES)) {
        let stem = path.file_stem().expect("file name").to_string_lossy().into_owned();
        let Ok(text) = fs::read_to_string(&path) else { continue };
        // Not one YAML document (a syntax error, two documents, a duplicate key): the
        // editor's YAML parser says so before any schema.
        let Some(json) = as_json(&text) else { continue };
        let found = errors(&v, &json);
        let beyond = BEYOND_A_SCHEMA.iter().any(|(s, _)| *s == stem);
        if let Err(e) = serde_yaml::from_str::<SuiteSpec>(&text) {
            refused += 1;
            if found.is_empty() && !beyond {
                wrong.push(format!("{stem}: the deserializer refuses it ({e}), the schema accepts it"));
            } else if !found.is_empty() && beyond {
                wrong.push(format!("{stem}: listed in BEYOND_A_SCHEMA, but the schema refuses it: {found:?}"));
            }
        } else if parse_suite(&path, text).is_ok() {
            accepted += 1;
            if !found.is_empty() {
                wrong.push(format!("{stem}: the loader reads it, the schema refuses it: {found:?}"));
            }
        } else {
            // Read by serde but refused by the loader's other checks (a null that became
            // text, characters, indentation): the schema may say either.
            neither += 1;
        }
    }
    eprintln!("{refused} refused by the deserializer, {accepted} read by the loader, {neither} other");
    assert!(wrong.is_empty(), "the schema and the loader disagree:\n{}", wrong.join("\n"));
    assert!(refused >= 20 && accepted >= 100, "too few fixtures checked: {refused} structural, {accepted} read");
}
