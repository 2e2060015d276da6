//! The suite format's JSON Schema, `docs/src/suite.schema.json` (generated from the
//! types of `vmrepro::schema`, see `vmrepro::schema::json`):
//!
//! - it is current (`UPDATE_SCHEMA=1 cargo test --test schema` rewrites it);
//! - it accepts every suite in `suites/`;
//! - on the bad-suite corpus (`tests/fixtures/bad-suites/`) it agrees with the loader:
//!   every fixture the deserializer refuses (unknown key, wrong type, missing key,
//!   unknown choice: the structural mistakes) the schema refuses too, and every fixture
//!   the loader reads (its mistake is one of the cross-field rules of validation) the
//!   schema accepts, so an editor flags no suite `vmrepro check` would pass;
//! - fresh structural mistakes made in a good suite, at levels the corpus doesn't
//!   reach, are refused by both.
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

/// Fresh structural mistakes, made in a good suite at every level the corpus reaches
/// and a few it doesn't (a profile's map, an observer, a record, a measurement's
/// snapshot): the deserializer and the schema both refuse each, and both read the
/// suite unchanged.
#[test]
fn refuses_structural_mistakes_made_in_a_good_suite() {
    let v = validator();
    let text = fs::read_to_string(repo_root().join("suites/nfs-write.yaml")).expect("suite is readable");
    let good = as_json(&text).expect("suite is YAML");
    let reads = |json: &serde_json::Value| serde_yaml::from_str::<SuiteSpec>(&json.to_string()).is_ok();
    assert!(reads(&good) && errors(&v, &good).is_empty(), "nfs-write.yaml is read by both");
    let mistakes: [(&str, serde_json::Value); 10] = [
        ("/vms/0/kernel/debain", "6.1".into()),
        ("/vms/0/profile/thread", 8.into()),
        ("/vms/0/profile/threads", "eight".into()),
        ("/vms/0/memory", serde_json::json!([512])),
        ("/vms/0/accel", "fast".into()),
        ("/measure/0/observe/0", "netstats".into()),
        ("/measure/0/observe/0", serde_json::json!({"mountstats": {"mount": "/mnt", "op": ["READ"]}})),
        ("/measure/0/record", serde_json::json!([{"name": "size"}])),
        ("/measure/0/snapshot", serde_json::json!({"verdict": "ratio"})),
        ("/measure/0/timeout", "10 minuets".into()),
    ];
    for (pointer, value) in mistakes {
        let mut bad = good.clone();
        let (parent, key) = pointer.rsplit_once('/').expect("a pointer");
        match bad.pointer_mut(parent).expect("the parent exists") {
            serde_json::Value::Object(m) => {
                m.insert(key.to_string(), value.clone());
            }
            serde_json::Value::Array(a) => a[key.parse::<usize>().expect("an index")] = value.clone(),
            other => panic!("{parent} is {other}"),
        }
        assert!(!reads(&bad), "{pointer} = {value}: the deserializer reads it");
        assert!(!errors(&v, &bad).is_empty(), "{pointer} = {value}: the schema accepts it");
    }
}
