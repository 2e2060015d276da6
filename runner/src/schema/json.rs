//! The suite format as a JSON Schema (draft 7), generated from the types of
//! [`crate::schema`] with `schemars`; checked in as `docs/src/suite.schema.json` for
//! editors (a YAML language server reads it), where `tests/schema.rs` checks it is
//! current and that it agrees with the loader on `suites/` and the bad-suite corpus.
//!
//! The schema says what deserialization accepts: keys, types, required keys, the
//! choices of an enum, the observer names of [`crate::parse::OBSERVERS`], the shape of
//! a subnet and of a duration. The cross-field rules of [`crate::suite::validate`]
//! (unique names, addresses inside the subnet, references between VMs, limits) are not
//! in it: `vmrepro check` remains the judge.

use schemars::gen::{SchemaGenerator, SchemaSettings};
use schemars::schema::{InstanceType, Metadata, Schema, SchemaObject, SingleOrVec, StringValidation};
use schemars::visit::Visitor;

use super::SuiteSpec;

/// The suite schema as JSON text (pretty, ending in a newline): what
/// `docs/src/suite.schema.json` holds.
///
/// Used by the integration tests (not by the runner).
#[cfg_attr(vmrepro_dead_code, allow(dead_code))]
pub fn suite_schema_text() -> String {
    let settings = SchemaSettings::draft07().with_visitor(PlainScalarsAreText);
    let mut root = settings.into_generator().into_root_schema_for::<SuiteSpec>();
    let meta = root.schema.metadata();
    meta.title = Some("vmrepro suite".into());
    let mut text = serde_json::to_string_pretty(&root).expect("a schema serializes");
    text.push('\n');
    text
}

/// Widens every free-text schema (type string, no choices, pattern or format) to the
/// scalars the deserializer reads as text: serde_yaml 0.9 gives a `String` field the
/// text of any plain scalar, so `env: {RETRIES: 3}` and `debian: 6.1` are text to the
/// loader, and the schema must not flag them. Also turns the descriptions' doc links
/// into plain code.
#[derive(Debug, Clone)]
struct PlainScalarsAreText;

impl Visitor for PlainScalarsAreText {
    fn visit_schema_object(&mut self, schema: &mut SchemaObject) {
        let free_text = schema.enum_values.is_none() && schema.format.is_none() && schema.string.is_none();
        if free_text {
            let text = [InstanceType::String, InstanceType::Number, InstanceType::Boolean];
            match &schema.instance_type {
                Some(SingleOrVec::Single(t)) if **t == InstanceType::String => {
                    schema.instance_type = Some(text.to_vec().into());
                }
                Some(SingleOrVec::Vec(v)) if v.contains(&InstanceType::String) => {
                    let mut all = v.clone();
                    all.extend(text.iter().filter(|t| !v.contains(t)));
                    schema.instance_type = Some(all.into());
                }
                _ => {}
            }
        }
        // Rust doc links read as plain code in an editor: "[`Foo`]" becomes "`Foo`".
        if let Some(d) = schema.metadata.as_mut().and_then(|m| m.description.as_mut()) {
            *d = d.replace("[`", "`").replace("`]", "`");
        }
        schemars::visit::visit_schema_object(self, schema);
    }
}

/// humantime's duration syntax (`humantime::parse_duration`, 2.x): numbers with units,
/// e.g. `90s`, `3m`, `1h 30m`, `1.5s`.
const DURATION_PATTERN: &str = concat!(
    r"^\s*([0-9]+(\.[0-9]+)?\s*",
    r"(nanos|nsec|ns|usec|us|µs|millis|msec|ms|seconds|second|secs|sec|s|minutes|minute|mins|min|m",
    r"|hours|hour|hrs|hr|h|days|day|d|weeks|week|wks|wk|w|months|month|M|years|year|yrs|yr|y)\s*)+$"
);

/// The schema of an optional duration field (`#[serde(with = "humantime_serde")]`): a
/// humantime string, or null (not given).
pub(crate) fn duration(_: &mut SchemaGenerator) -> Schema {
    SchemaObject {
        instance_type: Some(vec![InstanceType::String, InstanceType::Null].into()),
        string: Some(Box::new(StringValidation { pattern: Some(DURATION_PATTERN.into()), ..Default::default() })),
        metadata: Some(Box::new(Metadata {
            description: Some("A duration in humantime's syntax: `90s`, `3m`, `1h 30m`.".into()),
            ..Default::default()
        })),
        ..Default::default()
    }
    .into()
}
