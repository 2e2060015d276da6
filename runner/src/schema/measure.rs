//! The `measure:` block of a suite: the user-facing YAML of one measurement.
//!
//! ```yaml
//! measure:
//!   - name: nfs-write                       # [a-z][a-z0-9-]*; steps are <name>-<N>
//!     on: [client-5-10, client-6-1]         # the VMs measured, one per kernel/setting
//!     baseline: client-5-10                 # default: the first; or {axis: env.LOAD, value: idle}
//!     after: [server/profile-nfs-server-2.4.19]   # vm, vm/step, or another measurement
//!     repeat: 3                             # measured iterations per VM (default 1), or {min: 5, max: 15} / auto
//!     warmup: 0                             # unmeasured iterations first (default 0)
//!     concurrent: false                     # true: all VMs at once
//!     setup: mount -t nfs 10.0.0.1:/srv/export /mnt/nfs
//!     run: dd if=/dev/zero of=/mnt/nfs/f bs=1M count=100 conv=fsync   # timed (GNU time)
//!     teardown: rm -f /mnt/nfs/f; umount /mnt/nfs
//!     each: {before: [{on: server, run: "systemctl restart nfs-server"}], after: []}   # actions on other VMs
//!     expect_exit: 0                        # of `run` (default 0)
//!     timeout: 10m                          # per iteration (default: the suite's step_timeout)
//!     observe: [netstat, nfsstat, {mountstats: {mount: /mnt/nfs, ops: [WRITE, COMMIT]}}, {netem: server}]
//!     record: [{name: size, run: "stat -c %s /mnt/nfs/f", when: after}]
//!     bytes: 104857600                      # bytes `run` moves: gives throughput_mb_s
//!     metric: {from: stdout, json: /jobs/0/write/iops, unit: IOPS, better: higher}   # a number `run` prints
//!     compare: elapsed_s                    # the verdict's metric (default elapsed_s, or `metric`'s name)
//!     better: lower                         # lower | higher (default: lower; higher for throughput)
//!     checks: [{section: size, equals: 104857600}]
//!     table: [mountstats.COMMIT.ops]         # extra columns: medians of metrics/counters
//!     snapshot: {verdict: direction, outcome: true, signs: [rpc_retransmissions], sections: [size]}
//!     verdict: {rule: mann_whitney, alpha: 0.01, floor: 0.10}   # also at the suite's top level
//! ```

use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::parse::observe::{Settings, NAMES};
use crate::parse::ObserverKind;
use crate::schema::SnapshotVerdicts;

/// One measurement.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MeasureSpec {
    /// Name: `[a-z][a-z0-9-]*`, unique among the suite's measurements and VM names.
    pub name: String,
    /// The VMs measured.
    pub on: Vec<String>,
    /// The VM every other one is compared with (default: the first of `on`), or, with
    /// variants, the axis value that is each group's baseline
    /// (`{axis: env.LOAD, value: idle}`): see [`BaselineSpec`].
    #[serde(default)]
    pub baseline: Option<BaselineSpec>,
    /// What every iteration waits for: `vm` (its guest agent), `vm/step`, or the name
    /// of another measurement (all its iterations).
    #[serde(default)]
    pub after: Vec<String>,
    /// Measured iterations per VM (default 1): a number, or adaptive bounds
    /// (`{min: 5, max: 15}`, `auto`): rounds go on until every comparison is decided.
    #[serde(default)]
    pub repeat: Option<crate::schema::repeat::RepeatSpec>,
    /// Unmeasured iterations per VM before the measured ones (default 0).
    #[serde(default)]
    pub warmup: Option<u32>,
    /// All VMs at once instead of one after another (default false).
    #[serde(default)]
    pub concurrent: Option<bool>,
    /// Run the baseline VM's measured iterations twice (default false): an A/A pair,
    /// the second copy interleaved with the VMs like another candidate, whose verdict
    /// against the baseline should be `same` and whose spread gives the smallest change
    /// the run could have seen. Not with `concurrent: true` (the copy runs on the
    /// baseline's own VM, so it could not run at the same time as it).
    #[serde(default)]
    pub calibrate: Option<bool>,
    /// Shell command run before each iteration.
    #[serde(default)]
    pub setup: Option<String>,
    /// The timed shell command.
    pub run: String,
    /// Shell command run after each iteration.
    #[serde(default)]
    pub teardown: Option<String>,
    /// Actions on other VMs around every iteration (with `concurrent: true`: around
    /// every round).
    #[serde(default)]
    pub each: Option<EachSpec>,
    /// Expected exit status of `run` (default 0).
    #[serde(default)]
    pub expect_exit: Option<i32>,
    /// Limit of one iteration (default: the suite's `step_timeout`).
    #[serde(default, with = "humantime_serde")]
    #[schemars(schema_with = "crate::schema::json::duration")]
    pub timeout: Option<Duration>,
    /// Observers read before and after every iteration (`netstat`, `{netem: vm}`, …).
    #[serde(default, with = "serde_yaml::with::singleton_map_recursive")]
    #[schemars(with = "Vec<ObserverSpec>")]
    pub observe: Vec<ObserverSpec>,
    /// Named commands whose output is kept with every iteration.
    #[serde(default)]
    pub record: Vec<RecordSpec>,
    /// Bytes `run` moves (gives the metric `throughput_mb_s`, MB = 10^6 bytes).
    #[serde(default)]
    pub bytes: Option<u64>,
    /// A number `run` prints (on stdout, or into a file): parsed in every iteration, it
    /// is the verdict's metric unless `compare` names another.
    #[serde(default, with = "serde_yaml::with::singleton_map_recursive")]
    #[schemars(with = "Option<OutputMetricSpec>")]
    pub metric: Option<OutputMetricSpec>,
    /// The metric the verdict uses (default `elapsed_s`, or `metric`'s name when there
    /// is a `metric`), or `outcome`: compare how the iterations ended (exit status,
    /// timeout, crash) instead of a number.
    #[serde(default)]
    pub compare: Option<String>,
    /// Which direction of `compare` is better.
    #[serde(default)]
    pub better: Option<Better>,
    /// Checks on every measured iteration's output.
    #[serde(default)]
    pub checks: Vec<CheckSpec>,
    /// Extra table columns: metrics or counters shown per VM as their median over the
    /// iterations (e.g. `[mountstats.COMMIT.ops, nfs.client.v3.write]`).
    #[serde(default)]
    pub table: Vec<String>,
    /// What the suite's snapshot keeps of this measurement.
    #[serde(default)]
    pub snapshot: Option<MeasureSnapshotSpec>,
    /// How its comparisons are decided (overrides the suite's `verdict:`, key by key).
    #[serde(default)]
    pub verdict: Option<VerdictSpec>,
}

/// `each:`: commands run on other VMs of the suite before and after every iteration
/// (with `concurrent: true`, before and after every round), in order with it.
///
/// ```yaml
/// each:
///   before: [{on: server, run: "systemctl restart nfs-server"}]
///   after: [{on: server, run: "cat /proc/fs/nfsd/versions"}]
/// ```
///
/// An action's output is kept with the iteration; an action that exits other than 0
/// (or hangs past the measurement's `timeout`) makes the iteration fail, and a failed
/// `before` action keeps the iteration from running.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EachSpec {
    /// Run, in order, before every iteration (after the previous one's `after` actions).
    #[serde(default)]
    pub before: Vec<ActionSpec>,
    /// Run, in order, after every iteration ended (however it ended).
    #[serde(default)]
    pub after: Vec<ActionSpec>,
}

/// One action of `each.before` / `each.after`.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ActionSpec {
    /// The VM it runs on: any VM of the suite (for the measured VM itself, `setup` and
    /// `teardown` are the usual place).
    pub on: String,
    /// Shell command (run with `sh -c`; stdout and stderr kept, exit 0 expected).
    pub run: String,
}

/// `baseline:` of a measurement: a measured VM's name, or an axis of the measured VMs'
/// variants and the value of it that is the baseline.
///
/// ```yaml
/// baseline: client-6-1                      # one baseline for every VM of `on`
/// baseline: {axis: env.LOAD, value: idle}   # one per group of the other axes' values
/// ```
///
/// With an axis, the variants of each VM of `on` fall into groups that agree on every
/// other axis (`kernel × env.LOAD` gives one group per kernel); in each group the variant
/// with `axis` = `value` (its label, or the value as written) is the baseline of the
/// others. Every VM of `on` must vary `axis` and have `value` in every group.
#[derive(Debug, Clone, Serialize, PartialEq, JsonSchema)]
#[serde(untagged)]
pub enum BaselineSpec {
    /// A measured VM (a VM with variants: its first variant).
    Vm(String),
    /// An axis and its baseline value.
    Axis(AxisBaselineSpec),
    /// What variant expansion makes of [`BaselineSpec::Axis`]: the groups, in the order
    /// of `on` (never written in a suite).
    #[schemars(skip)]
    Groups(Vec<BaselineGroup>),
}

/// `baseline: {axis, value}`.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AxisBaselineSpec {
    /// An axis of the measured VMs' `variants:` (`env.LOAD`, `kernel`, …).
    pub axis: String,
    /// The baseline's value of it: its label (`idle`, `v6-1`) or the value as written.
    #[schemars(with = "serde_json::Value")]
    pub value: serde_yaml::Value,
}

/// One group of a measurement's VMs that share a baseline.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BaselineGroup {
    /// The group's name: the VM's name and the labels of the other axes (`client-6-1`).
    pub name: String,
    /// The baseline VM.
    pub baseline: String,
    /// Its VMs in the order of `on`, the baseline among them.
    pub vms: Vec<String>,
}

impl<'de> Deserialize<'de> for BaselineSpec {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = BaselineSpec;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a measured VM's name, or {axis: AXIS, value: VALUE}")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<BaselineSpec, E> {
                Ok(BaselineSpec::Vm(v.to_string()))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<BaselineSpec, A::Error> {
                AxisBaselineSpec::deserialize(serde::de::value::MapAccessDeserializer::new(map)).map(BaselineSpec::Axis)
            }
        }
        d.deserialize_any(V)
    }
}

impl BaselineSpec {
    /// The baseline VMs: the one named, or each group's (none for an unexpanded axis).
    pub fn vms(&self) -> Vec<&str> {
        match self {
            BaselineSpec::Vm(v) => vec![v.as_str()],
            BaselineSpec::Axis(_) => vec![],
            BaselineSpec::Groups(g) => g.iter().map(|g| g.baseline.as_str()).collect(),
        }
    }
}

impl MeasureSpec {
    /// The VMs compared with none: `baseline`'s, else the first of `on`.
    pub fn baselines(&self) -> Vec<&str> {
        match &self.baseline {
            Some(b) => b.vms(),
            None => self.on.first().map(String::as_str).into_iter().collect(),
        }
    }
}

/// `metric:`: a number the measured command prints, found by a JSON pointer or a
/// regular expression.
///
/// ```yaml
/// metric: {from: stdout, json: /jobs/0/read/iops, unit: IOPS, better: higher}
/// metric: {name: received, from: {file: /tmp/iperf3.json}, json: /end/sum_received/bits_per_second, unit: bit/s, better: higher}
/// metric: {from: stdout, regex: 'failures: ([0-9]+)', unit: failures}
/// ```
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct OutputMetricSpec {
    /// The metric's name in tables, `compare`, `table` and `snapshot.signs`:
    /// `[a-z][a-z0-9_]*` (default `value`).
    #[serde(default)]
    pub name: Option<String>,
    /// Where the number is: `stdout` (default; `run`'s first 64 KiB) or `{file: PATH}`
    /// (an absolute guest path `run` writes, its first 1 MiB read after `run`).
    #[serde(default)]
    pub from: Option<MetricFrom>,
    /// An RFC 6901 JSON pointer into the output, parsed as JSON (`/jobs/0/read/iops`).
    #[serde(default)]
    pub json: Option<String>,
    /// A regular expression (Rust `regex` syntax) with exactly one capture group, the
    /// number; its first match counts.
    #[serde(default)]
    pub regex: Option<String>,
    /// The number's unit, shown beside it (`IOPS`, `bit/s`, `files/s`).
    #[serde(default)]
    pub unit: Option<String>,
    /// Which direction is better (default `lower`).
    #[serde(default)]
    pub better: Option<Better>,
}

/// Where a [`OutputMetricSpec`]'s number is printed.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum MetricFrom {
    /// `run`'s stdout.
    Stdout,
    /// A file in the guest that `run` writes (absolute path).
    File(String),
}

/// One observer in `observe:`: a kind of [`crate::parse::OBSERVERS`] by name
/// (`netstat`), with its settings for a kind that takes them
/// (`{mountstats: {mount: /mnt/nfs}}`), or another VM's netem (`{netem: server}`).
#[derive(Debug, Clone, PartialEq)]
pub enum ObserverSpec {
    /// An observer of the measured VM, and its settings (for a kind of
    /// [`Settings::Mount`]).
    Local(ObserverKind, Option<MountstatsSpec>),
    /// The netem statistics of another VM (`{netem: server}`).
    Netem(String),
}

/// The name of the remote netem observer in `observe:`.
const NETEM: &str = "netem";

/// Every name `observe:` takes: the table's kinds, then `netem`.
const OBSERVE_NAMES: [&str; NAMES.len() + 1] = {
    let mut all = [NETEM; NAMES.len() + 1];
    let mut i = 0;
    while i < NAMES.len() {
        all[i] = NAMES[i];
        i += 1;
    }
    all
};

/// What `observe:` takes, for messages: `netstat, nfsstat, …, {mountstats: {mount: …}}
/// or {netem: VM}`.
pub fn observer_hint() -> String {
    let mut shapes: Vec<String> =
        ObserverKind::all().filter(|k| k.def().settings == Settings::None).map(|k| k.name().to_string()).collect();
    shapes.extend(
        ObserverKind::all()
            .filter(|k| k.def().settings == Settings::Mount)
            .map(|k| format!("{{{}: {{mount: …}}}}", k.name())),
    );
    format!("an observer: {} or {{{NETEM}: VM}}", shapes.join(", "))
}

impl<'de> Deserialize<'de> for ObserverSpec {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::{EnumAccess, Error, VariantAccess};
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = ObserverSpec;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("enum ObserverSpec")
            }
            fn visit_enum<A: EnumAccess<'de>>(self, data: A) -> Result<ObserverSpec, A::Error> {
                let (name, v): (String, _) = data.variant()?;
                if name == NETEM {
                    return v.newtype_variant().map(ObserverSpec::Netem);
                }
                let kind =
                    ObserverKind::from_name(&name).ok_or_else(|| A::Error::unknown_variant(&name, &OBSERVE_NAMES))?;
                match kind.def().settings {
                    Settings::None => v.unit_variant().map(|()| ObserverSpec::Local(kind, None)),
                    Settings::Mount => v.newtype_variant().map(|m| ObserverSpec::Local(kind, Some(m))),
                }
            }
        }
        d.deserialize_enum("ObserverSpec", &OBSERVE_NAMES, V)
    }
}

impl Serialize for ObserverSpec {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let index = |name: &str| OBSERVE_NAMES.iter().position(|n| *n == name).unwrap_or(0) as u32;
        match self {
            ObserverSpec::Local(kind, None) => {
                s.serialize_unit_variant("ObserverSpec", index(kind.name()), kind.name())
            }
            ObserverSpec::Local(kind, Some(m)) => {
                s.serialize_newtype_variant("ObserverSpec", index(kind.name()), kind.name(), m)
            }
            ObserverSpec::Netem(vm) => s.serialize_newtype_variant("ObserverSpec", index(NETEM), NETEM, vm),
        }
    }
}

/// By hand, as the `Deserialize` impl, from the observer table: the name of a kind
/// without settings, or a map of one key, a kind with settings to its
/// [`MountstatsSpec`] or `netem` to a VM name.
impl JsonSchema for ObserverSpec {
    fn schema_name() -> String {
        "ObserverSpec".into()
    }

    fn json_schema(gen: &mut schemars::gen::SchemaGenerator) -> schemars::schema::Schema {
        use schemars::schema::{InstanceType, ObjectValidation, Schema, SchemaObject, SubschemaValidation};
        let one_key = |key: &str, value: Schema| -> Schema {
            SchemaObject {
                instance_type: Some(InstanceType::Object.into()),
                object: Some(Box::new(ObjectValidation {
                    properties: [(key.to_string(), value)].into_iter().collect(),
                    required: [key.to_string()].into_iter().collect(),
                    additional_properties: Some(Box::new(Schema::Bool(false))),
                    ..Default::default()
                })),
                ..Default::default()
            }
            .into()
        };
        let mut bare = Vec::new();
        let mut any_of = Vec::new();
        for kind in ObserverKind::all() {
            match kind.def().settings {
                Settings::None => bare.push(serde_json::Value::from(kind.name())),
                Settings::Mount => any_of.push(one_key(kind.name(), gen.subschema_for::<MountstatsSpec>())),
            }
        }
        let bare = SchemaObject {
            instance_type: Some(InstanceType::String.into()),
            enum_values: Some(bare),
            ..Default::default()
        };
        any_of.insert(0, bare.into());
        any_of.push(one_key(NETEM, gen.subschema_for::<String>()));
        Schema::Object(SchemaObject {
            metadata: Some(Box::new(schemars::schema::Metadata {
                description: Some(format!("{}.", observer_hint())),
                ..Default::default()
            })),
            subschemas: Some(Box::new(SubschemaValidation { any_of: Some(any_of), ..Default::default() })),
            ..Default::default()
        })
    }
}

/// `mountstats:` parameters.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MountstatsSpec {
    /// The NFS mount point.
    pub mount: String,
    /// Operations to keep (default: all), e.g. `[READ]`, `[WRITE, COMMIT]`.
    #[serde(default)]
    pub ops: Vec<String>,
}

/// One entry of `record:`.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RecordSpec {
    /// Section name: `[a-z][a-z0-9-]*`, not a built-in section.
    pub name: String,
    /// Shell command.
    pub run: String,
    /// `before` (after setup) or `after` (after `run`; default).
    #[serde(default)]
    pub when: Option<When>,
}

/// Which direction of a metric is better.
#[derive(Debug, Clone, Copy, Deserialize, Serialize, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Better {
    /// Smaller values are better (times, error counters).
    Lower,
    /// Larger values are better (throughput).
    Higher,
}

/// Which rule decides a comparison (`verdict.rule` of the suite or a measurement).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Rule {
    /// Medians more than the floor apart and separated ranges (0-day/LKP, mmtests).
    Ranges,
    /// Exact Mann–Whitney U at `alpha` and the effect floor; may be `undecided`.
    MannWhitney,
}

/// `verdict:` of the suite (every measurement) or of one measurement (overriding the
/// suite's for it).
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct VerdictSpec {
    /// `mann_whitney` (default) or `ranges`.
    #[serde(default)]
    pub rule: Option<Rule>,
    /// Significance level of `mann_whitney` (default 0.01; 0.0001 to 0.2).
    #[serde(default)]
    pub alpha: Option<f64>,
    /// Effect floor, a fraction (default 0.10: 10 %; 0 to 1): smaller changes are
    /// never flagged.
    #[serde(default)]
    pub floor: Option<f64>,
}

/// One entry of `checks:`.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CheckSpec {
    /// The section checked: `stdout`, `stderr`, or a record's name.
    pub section: String,
    /// The section's text, trimmed, must equal this (a string or a number).
    #[serde(default)]
    #[schemars(with = "Option<serde_json::Value>")]
    pub equals: Option<serde_yaml::Value>,
    /// The section's text must contain this.
    #[serde(default)]
    pub contains: Option<String>,
}

/// `snapshot:` of a measurement.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MeasureSnapshotSpec {
    /// How much of each verdict to keep (default `ratio_class`).
    #[serde(default)]
    pub verdict: Option<SnapshotVerdicts>,
    /// Per-VM overrides of `verdict`, e.g. `{control: none}` for a control VM whose
    /// ratio to the baseline is not the point of the suite and not steady from run to
    /// run. Keys are measured VMs other than the baseline.
    #[serde(default)]
    pub verdict_by_vm: std::collections::BTreeMap<String, SnapshotVerdicts>,
    /// Keep how each iteration ended (`exit 0`, `timed out`, …; default true).
    #[serde(default)]
    pub outcome: Option<bool>,
    /// Metrics or counters kept as `0` or `> 0` (summed over the measured iterations).
    #[serde(default)]
    pub signs: Vec<String>,
    /// Metrics or counters kept with their value in every measured iteration (a list,
    /// one value per iteration): only for what the suite makes deterministic, e.g.
    /// `wire.rpc.retransmissions` under seeded loss with one request in flight.
    #[serde(default)]
    pub values: Vec<String>,
    /// Sections kept verbatim (trimmed, from the first measured iteration).
    #[serde(default)]
    pub sections: Vec<String>,
}

/// When a record's command runs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum When {
    /// After `setup`, before the observers and `run`.
    Before,
    /// After `run` and the observers.
    #[default]
    After,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Deserialize, Serialize)]
    struct Observe {
        #[serde(with = "serde_yaml::with::singleton_map_recursive")]
        observe: Vec<ObserverSpec>,
    }

    #[test]
    fn observe_reads_and_writes_the_table_names_netem_and_settings() {
        let yaml = "observe:\n- netstat\n- proc_net\n- mountstats:\n    mount: /mnt/nfs\n    ops:\n    - READ\n- netem: server\n";
        let o: Observe = serde_yaml::from_str(yaml).unwrap();
        assert_eq!(o.observe[1], ObserverSpec::Local(ObserverKind::named("proc_net"), None));
        assert_eq!(o.observe[3], ObserverSpec::Netem("server".into()));
        assert_eq!(serde_yaml::to_string(&o).unwrap(), yaml);
        let bare = serde_yaml::from_str::<Observe>("observe: [mountstats]").unwrap_err().to_string();
        assert!(bare.contains("expected newtype variant"), "{bare}");
        assert!(
            observer_hint().starts_with("an observer: netstat, nfsstat, proc_net, proc_rpc_nfs"),
            "{}",
            observer_hint()
        );
        assert!(observer_hint().ends_with("{mountstats: {mount: …}} or {netem: VM}"));
    }
}
