//! A VM's `profile:` and the server profiles' parameters, **declared once**.
//!
//! A server profile is two files in the images folder: `images/profiles/<name>.sh`, run
//! in the guest, and `images/profiles/<name>.yaml`, its description and defaults. Its
//! parameters are one table, `server_params!` below: each row is a name, its type in
//! force, its documentation and the environment variable the script reads. From that
//! one table come
//!
//! - the suite side: `profile: {name: …, <parameter>: …}` (every parameter optional,
//!   unknown keys refused, the docs are the JSON Schema's descriptions) → [`ProfileSpec`]
//!   with its [`ServerOverrides`];
//! - the images side: `profiles/<name>.yaml` → [`ProfileDefaults`] (the parameters'
//!   defaults, plus `description`, `nfs_versions_allowed` and `export_options`);
//! - the plan: [`ServerSettings`], the values in force (the suite's, else the
//!   profile's), and [`ServerSettings::env`], the `VMREPRO_*` variables the script
//!   reads;
//! - validation: [`ServerOverrides::given`] (which parameters a suite set), on which
//!   `suite/validate/profile.rs` hangs the rules of the parameters that have some.
//!
//! A new parameter is one row here, its rule (if it has one) in
//! `suite/validate/profile.rs`, its line in every profile's `.yaml` and script, and its
//! row in the book's server-profile table. Exports are not a row: they merge with
//! `nfs_read.export` and take the profile's `export_options` (see
//! `suite/compile/vm.rs`).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// One NFS export of a server profile.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExportSpec {
    /// The exported directory (absolute; created if missing).
    pub path: String,
    /// exports(5) options for every client (default: the profile's `export_options`).
    #[serde(default)]
    pub options: Option<String>,
}

/// How a parameter's value in force reaches the profile's script: one environment
/// variable's text.
pub trait EnvText {
    /// The variable's value.
    fn env_text(&self) -> String;
}

impl EnvText for Vec<String> {
    /// Space-separated (`3 4.2`).
    fn env_text(&self) -> String {
        self.join(" ")
    }
}

impl EnvText for u32 {
    fn env_text(&self) -> String {
        self.to_string()
    }
}

impl EnvText for Option<u64> {
    /// The number, or empty for "the kernel's".
    fn env_text(&self) -> String {
        self.map(|v| v.to_string()).unwrap_or_default()
    }
}

impl EnvText for bool {
    /// `yes` or `no`.
    fn env_text(&self) -> String {
        if *self { "yes" } else { "no" }.to_string()
    }
}

/// The one declaration of the server profiles' parameters: `name: Type = "VARIABLE"`,
/// with the parameter's documentation above it.
macro_rules! server_params {
    ($( $(#[doc = $doc:literal])+ $name:ident : $ty:ty = $env:literal; )+) => {
        /// The names of the server profiles' parameters, in declaration order (the
        /// tests check each has its variable).
        #[cfg(test)]
        const SERVER_PARAMS: &[&str] = &[$(stringify!($name)),+];

        /// A server profile's parameters in force: the suite's, else the profile's
        /// defaults (recorded in `plan.json`).
        #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
        pub struct ServerSettings {
            $( $(#[doc = $doc])+ pub $name: $ty, )+
        }

        impl ServerSettings {
            /// The environment variables the profile's script reads, one per parameter
            /// (`VMREPRO_NFS_VERSIONS=3 4.2`, …), in declaration order.
            pub fn env(&self) -> Vec<(&'static str, String)> {
                vec![$( ($env, EnvText::env_text(&self.$name)) ),+]
            }
        }

        /// The parameters a suite gave (`None`: the profile's default).
        #[derive(Debug, Clone, Default, PartialEq, Serialize)]
        pub struct ServerOverrides {
            $( $(#[doc = $doc])+ pub $name: Option<$ty>, )+
        }

        impl ServerOverrides {
            /// The names of the parameters the suite gave.
            pub fn given(&self) -> Vec<&'static str> {
                let mut given = Vec::new();
                $( if self.$name.is_some() { given.push(stringify!($name)); } )+
                given
            }

            /// The values in force: these over `defaults`.
            pub fn over(&self, defaults: &ServerSettings) -> ServerSettings {
                ServerSettings { $( $name: self.$name.clone().unwrap_or_else(|| defaults.$name.clone()), )+ }
            }
        }

        /// The map form of [`ProfileSpec`] (what `deny_unknown_fields` checks); its
        /// schema is the map alternative of [`ProfileSpec`]'s, so the fields' docs are
        /// the editor's descriptions.
        #[derive(Debug, Clone, Deserialize, JsonSchema)]
        #[serde(deny_unknown_fields)]
        #[schemars(
            rename = "ProfileParameters",
            description = "A profile and its parameters; every parameter left out takes the profile's default from `images/profiles/<name>.yaml`."
        )]
        struct ProfileMap {
            /// The profile (`images/profiles/<name>.sh`).
            name: String,
            /// NFS exports (`/etc/exports` lines); a server profile needs them here or
            /// from `nfs_read.export`.
            #[serde(default)]
            exports: Option<Vec<ExportSpec>>,
            $( $(#[doc = $doc])+ #[serde(default)] $name: Option<$ty>, )+
        }

        impl From<ProfileMap> for ProfileSpec {
            fn from(m: ProfileMap) -> ProfileSpec {
                ProfileSpec { name: m.name, exports: m.exports, params: ServerOverrides { $( $name: m.$name, )+ } }
            }
        }

        /// A server profile's parameters with their defaults
        /// (`images/profiles/<name>.yaml`). The runner hands every one to the
        /// profile's script as an environment variable ([`ServerSettings::env`]); the
        /// values in force are recorded.
        #[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
        #[serde(deny_unknown_fields)]
        pub struct ProfileDefaults {
            /// What the profile sets up, in a sentence.
            pub description: String,
            /// The versions a suite may ask for (default: any of 2, 3, 4, 4.0, 4.1, 4.2).
            #[serde(default)]
            pub nfs_versions_allowed: Option<Vec<String>>,
            /// exports(5) options of an export that gives none.
            pub export_options: String,
            $( $(#[doc = $doc])+ pub $name: $ty, )+
        }

        impl ProfileDefaults {
            /// The parameters' defaults.
            pub fn settings(&self) -> ServerSettings {
                ServerSettings { $( $name: self.$name.clone(), )+ }
            }
        }
    };
}

server_params! {
    /// NFS versions the server serves, e.g. `["3", "4.2"]`.
    nfs_versions: Vec<String> = "VMREPRO_NFS_VERSIONS";
    /// nfsd threads.
    threads: u32 = "VMREPRO_NFSD_THREADS";
    /// `/proc/fs/nfsd/max_block_size`, bytes (the largest rsize/wsize clients get);
    /// `null`: the kernel's.
    block_size: Option<u64> = "VMREPRO_BLOCK_SIZE";
    /// Serve NFS over UDP as well as TCP.
    udp: bool = "VMREPRO_UDP";
}

/// A VM's `profile:`: a name (`profile: nfs-server-2.4.19`), or a name with parameters.
/// Every parameter left out takes the profile's default from
/// `images/profiles/<name>.yaml`; the values in force are recorded with the results.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct ProfileSpec {
    /// The profile (`images/profiles/<name>.sh`).
    pub name: String,
    /// NFS exports (`/etc/exports` lines). A server profile needs one: from here, or
    /// `nfs_read.export` when the VM is `nfs_read.server`.
    pub exports: Option<Vec<ExportSpec>>,
    /// The parameters the suite gave.
    #[serde(flatten)]
    pub params: ServerOverrides,
}

/// By hand, as the `Deserialize` impl: a profile name, or the map form
/// (`ProfileMap`).
impl JsonSchema for ProfileSpec {
    fn schema_name() -> String {
        "ProfileSpec".into()
    }

    fn json_schema(gen: &mut schemars::gen::SchemaGenerator) -> schemars::schema::Schema {
        use schemars::schema::{InstanceType, Schema, SchemaObject, SubschemaValidation};
        let name = SchemaObject {
            instance_type: Some(InstanceType::String.into()),
            metadata: Some(Box::new(schemars::schema::Metadata {
                description: Some(
                    "A profile name (`images/profiles/<name>.sh`), every parameter at its default.".into(),
                ),
                ..Default::default()
            })),
            ..Default::default()
        };
        Schema::Object(SchemaObject {
            subschemas: Some(Box::new(SubschemaValidation {
                any_of: Some(vec![name.into(), gen.subschema_for::<ProfileMap>()]),
                ..Default::default()
            })),
            ..Default::default()
        })
    }
}

impl<'de> Deserialize<'de> for ProfileSpec {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = ProfileSpec;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a profile name, or a map with `name` and the profile's parameters")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<ProfileSpec, E> {
                Ok(ProfileSpec { name: v.to_string(), ..ProfileSpec::default() })
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<ProfileSpec, A::Error> {
                ProfileMap::deserialize(serde::de::value::MapAccessDeserializer::new(map)).map(ProfileSpec::from)
            }
        }
        d.deserialize_any(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn defaults() -> ProfileDefaults {
        serde_yaml::from_str(
            "description: d\nnfs_versions: [\"3\", \"4.2\"]\nthreads: 8\nblock_size: null\nudp: false\nexport_options: rw\n",
        )
        .unwrap()
    }

    #[test]
    fn suite_values_win_over_defaults_and_reach_the_script() {
        let p: ProfileSpec = serde_yaml::from_str("{name: nfs-server-modern, threads: 2, block_size: 8192}").unwrap();
        assert_eq!(p.params.given(), ["threads", "block_size"]);
        let env = p.params.over(&defaults().settings()).env();
        assert_eq!(
            env,
            [
                ("VMREPRO_NFS_VERSIONS", "3 4.2".to_string()),
                ("VMREPRO_NFSD_THREADS", "2".to_string()),
                ("VMREPRO_BLOCK_SIZE", "8192".to_string()),
                ("VMREPRO_UDP", "no".to_string()),
            ]
        );
    }

    #[test]
    fn every_parameter_has_one_variable_and_unknown_keys_are_refused() {
        assert_eq!(defaults().settings().env().len(), SERVER_PARAMS.len());
        let e = serde_yaml::from_str::<ProfileSpec>("{name: x, thread: 2}").unwrap_err().to_string();
        assert!(e.contains("unknown field `thread`"), "{e}");
        let e =
            serde_yaml::from_str::<ProfileDefaults>("description: d\nexport_options: rw\n").unwrap_err().to_string();
        assert!(e.contains("missing field"), "{e}");
    }
}
