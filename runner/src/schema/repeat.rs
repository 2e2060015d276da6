//! `repeat:` of a measurement: a fixed number of measured iterations per VM, or
//! adaptive bounds.
//!
//! ```yaml
//! repeat: 5                  # 5 measured iterations per VM
//! repeat: {min: 5, max: 15}  # rounds until every comparison is decided, 5 to 15
//! repeat: auto               # the same with min 5, max 15 (REPEAT_AUTO)
//! ```
//!
//! Written by hand (like [`super::measure::ObserverSpec`]) rather than as an untagged
//! enum, so that a wrong shape gets a message that lists the three forms.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// `[min, max]` of `repeat: auto`: 5 is the fewest repeats per side at which the exact
/// Mann–Whitney test can reach p < 0.01 at all (2 / C(10, 5) = 0.0079); 15 bounds a
/// TCG run's cost at three times the default fixed count of older suites' 5.
pub const REPEAT_AUTO: (u32, u32) = (5, 15);

/// The `repeat:` key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RepeatSpec {
    /// `repeat: N`.
    Count(u32),
    /// `repeat: {min: A, max: B}`.
    Range {
        /// Rounds always run.
        min: u32,
        /// Rounds at most.
        max: u32,
    },
    /// `repeat: auto`: [`REPEAT_AUTO`].
    Auto,
}

impl RepeatSpec {
    /// `(min, max)` of an adaptive `repeat:`, `None` for a count.
    pub fn bounds(&self) -> Option<(u32, u32)> {
        match *self {
            RepeatSpec::Count(_) => None,
            RepeatSpec::Range { min, max } => Some((min, max)),
            RepeatSpec::Auto => Some(REPEAT_AUTO),
        }
    }
}

const SHAPES: &str = "a number of repeats, `auto`, or {min: N, max: N}";

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RangeSpec {
    min: u32,
    max: u32,
}

impl<'de> Deserialize<'de> for RepeatSpec {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::{Error, Unexpected};
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = RepeatSpec;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(SHAPES)
            }
            fn visit_u64<E: Error>(self, v: u64) -> Result<RepeatSpec, E> {
                u32::try_from(v).map(RepeatSpec::Count).map_err(|_| E::invalid_value(Unexpected::Unsigned(v), &self))
            }
            fn visit_i64<E: Error>(self, v: i64) -> Result<RepeatSpec, E> {
                u64::try_from(v)
                    .map_err(|_| E::invalid_value(Unexpected::Signed(v), &self))
                    .and_then(|v| self.visit_u64(v))
            }
            fn visit_str<E: Error>(self, v: &str) -> Result<RepeatSpec, E> {
                match v {
                    "auto" => Ok(RepeatSpec::Auto),
                    _ => Err(E::invalid_value(Unexpected::Str(v), &self)),
                }
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<RepeatSpec, A::Error> {
                let r = RangeSpec::deserialize(serde::de::value::MapAccessDeserializer::new(map))?;
                Ok(RepeatSpec::Range { min: r.min, max: r.max })
            }
        }
        d.deserialize_any(V)
    }
}

impl Serialize for RepeatSpec {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        match *self {
            RepeatSpec::Count(n) => s.serialize_u32(n),
            RepeatSpec::Auto => s.serialize_str("auto"),
            RepeatSpec::Range { min, max } => {
                let mut m = s.serialize_map(Some(2))?;
                m.serialize_entry("min", &min)?;
                m.serialize_entry("max", &max)?;
                m.end()
            }
        }
    }
}

/// By hand, as the `Deserialize` impl: an integer, the string `auto`, or `{min, max}`.
impl JsonSchema for RepeatSpec {
    fn schema_name() -> String {
        "RepeatSpec".into()
    }

    fn json_schema(_: &mut schemars::gen::SchemaGenerator) -> schemars::schema::Schema {
        let schema = serde_json::json!({
            "description": format!(
                "Measured iterations per VM: {SHAPES} (adaptive: rounds continue until every comparison is decided; `auto` is min {}, max {}).",
                REPEAT_AUTO.0, REPEAT_AUTO.1
            ),
            "anyOf": [
                {"type": "integer", "format": "uint32", "minimum": 0.0},
                {"type": "string", "enum": ["auto"]},
                {
                    "type": "object",
                    "properties": {
                        "min": {"type": "integer", "format": "uint32", "minimum": 0.0},
                        "max": {"type": "integer", "format": "uint32", "minimum": 0.0}
                    },
                    "required": ["max", "min"],
                    "additionalProperties": false
                }
            ]
        });
        serde_json::from_value(schema).expect("a valid schema")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_three_shapes_and_a_wrong_one() {
        let parse = |s: &str| serde_yaml::from_str::<RepeatSpec>(s);
        assert_eq!(parse("3").unwrap(), RepeatSpec::Count(3));
        assert_eq!(parse("auto").unwrap(), RepeatSpec::Auto);
        assert_eq!(parse("{min: 3, max: 15}").unwrap(), RepeatSpec::Range { min: 3, max: 15 });
        assert_eq!(RepeatSpec::Auto.bounds(), Some(REPEAT_AUTO));
        for bad in ["often", "-1", "{min: 3}", "{min: 3, max: 9, step: 1}", "[3, 15]"] {
            assert!(parse(bad).is_err(), "{bad} is not a repeat");
        }
        assert!(parse("often").unwrap_err().to_string().contains(SHAPES));
        for r in [RepeatSpec::Count(4), RepeatSpec::Auto, RepeatSpec::Range { min: 2, max: 9 }] {
            assert_eq!(parse(&serde_yaml::to_string(&r).unwrap()).unwrap(), r);
        }
    }
}
