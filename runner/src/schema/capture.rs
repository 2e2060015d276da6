//! `capture:` of a VM (and `network.capture` for every VM): whether its traffic is
//! recorded into `RUN/vms/VM/capture.pcap`, for the whole run or only around its
//! measured iterations.
//!
//! ```yaml
//! capture: true        # the whole run
//! capture: measured    # only while a measured iteration runs on the VM
//! capture: false       # none (the default)
//! ```
//!
//! Written by hand (like [`super::repeat::RepeatSpec`]) rather than as an untagged
//! enum, so that a wrong value gets a message that lists the three.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The `capture:` key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CaptureSpec {
    /// `capture: false`.
    Off,
    /// `capture: true`: the whole run.
    Run,
    /// `capture: measured`: only while a measured (not warm-up) iteration runs.
    Measured,
}

const SHAPES: &str = "true, false or measured";

impl<'de> Deserialize<'de> for CaptureSpec {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::{Error, Unexpected};
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = CaptureSpec;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(SHAPES)
            }
            fn visit_bool<E: Error>(self, v: bool) -> Result<CaptureSpec, E> {
                Ok(if v { CaptureSpec::Run } else { CaptureSpec::Off })
            }
            fn visit_str<E: Error>(self, v: &str) -> Result<CaptureSpec, E> {
                match v {
                    "measured" => Ok(CaptureSpec::Measured),
                    _ => Err(E::invalid_value(Unexpected::Str(v), &self)),
                }
            }
        }
        d.deserialize_any(V)
    }
}

impl Serialize for CaptureSpec {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            CaptureSpec::Off => s.serialize_bool(false),
            CaptureSpec::Run => s.serialize_bool(true),
            CaptureSpec::Measured => s.serialize_str("measured"),
        }
    }
}

/// By hand, as the `Deserialize` impl: a boolean or the string `measured`.
impl JsonSchema for CaptureSpec {
    fn schema_name() -> String {
        "CaptureSpec".into()
    }

    fn json_schema(_: &mut schemars::gen::SchemaGenerator) -> schemars::schema::Schema {
        let schema = serde_json::json!({
            "description": format!("Packet capture into RUN/vms/VM/capture.pcap: {SHAPES} (true: the whole run; measured: only while a measured iteration runs)."),
            "anyOf": [
                {"type": "boolean"},
                {"type": "string", "enum": ["measured"]}
            ]
        });
        serde_json::from_value(schema).expect("a valid schema")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_three_values_and_a_wrong_one() {
        let parse = |s: &str| serde_yaml::from_str::<CaptureSpec>(s);
        assert_eq!(parse("true").unwrap(), CaptureSpec::Run);
        assert_eq!(parse("false").unwrap(), CaptureSpec::Off);
        assert_eq!(parse("measured").unwrap(), CaptureSpec::Measured);
        for bad in ["always", "1", "{measured: true}"] {
            let e = parse(bad).unwrap_err().to_string();
            assert!(e.contains(SHAPES), "{bad}: {e}");
        }
        for c in [CaptureSpec::Off, CaptureSpec::Run, CaptureSpec::Measured] {
            assert_eq!(parse(&serde_yaml::to_string(&c).unwrap()).unwrap(), c);
        }
    }
}
