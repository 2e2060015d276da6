//! A compiled measurement: what the plan holds of it (the measured VMs and their
//! commands, observers, records, checks, the metric, the snapshot policy, and every
//! iteration with the remote readings around it). Its behaviour is in
//! [`crate::measure`]: expansion into steps, the guest script, the observers' parsing,
//! the analysis.

use serde::{Deserialize, Serialize};

pub use crate::schema::measure::Rule;
use crate::schema::measure::VerdictSpec;
pub use crate::schema::measure::{Better, MetricFrom, When};
use crate::schema::SnapshotVerdicts;

impl MeasurementPlan {
    /// The baseline VM `vm` is compared with: its group's, else `baseline`.
    pub fn baseline_of(&self, vm: &str) -> &str {
        self.groups.iter().find(|g| g.vms.iter().any(|v| v == vm)).map_or(self.baseline.as_str(), |g| &g.baseline)
    }
}

/// A measurement, ready to expand and to analyse.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MeasurementPlan {
    /// Name (iteration steps are `<name>-<N>`).
    pub name: String,
    /// The built-in scenario that made it (`nfs_read`), if any: its results and
    /// snapshot are shaped by that scenario.
    pub preset: Option<String>,
    /// The measured VMs, in order, with their commands.
    pub vms: Vec<MeasuredVm>,
    /// The VM the others are compared with (with `groups`: the first group's).
    pub baseline: String,
    /// Groups of VMs each compared with its own baseline (`baseline: {axis, value}`);
    /// empty: every VM is compared with `baseline`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<crate::schema::measure::BaselineGroup>,
    /// Measured iterations per VM (with [`MeasurementPlan::adaptive`]: at most, its
    /// `max`).
    pub repeat: u32,
    /// Adaptive repeats (`repeat: {min, max}` or `auto`): rounds after `min` run only
    /// while a comparison is undecided (see [`crate::measure::adaptive`]); absent for a
    /// fixed count and from plans saved before it existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub adaptive: Option<Adaptive>,
    /// Unmeasured iterations per VM before the measured ones.
    pub warmup: u32,
    /// All VMs at once.
    pub concurrent: bool,
    /// `calibrate: true`: every measured round also runs the baseline VM's iteration a
    /// second time (an A/A copy, [`Iteration::copy`]), after the other VMs' ones;
    /// absent (false) from plans saved before it existed.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub calibrate: bool,
    /// Expected exit status of `run`.
    pub expect_exit: i32,
    /// Observers read in the measured VM around every iteration.
    pub observers: Vec<Observer>,
    /// Observers read in other VMs around every iteration.
    pub remote: Vec<RemoteObserver>,
    /// Named commands whose output is kept as sections.
    pub records: Vec<Record>,
    /// Actions on VMs around every iteration (`measure[].each`), `before` ones first,
    /// each list in order; absent from plans saved before they existed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub actions: Vec<Action>,
    /// Bytes `run` moves, for `throughput_mb_s`.
    pub bytes: Option<Bytes>,
    /// A number `run` prints, parsed in every iteration (`measure[].metric`); absent
    /// from plans saved before it existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_metric: Option<OutputMetric>,
    /// The metric the verdict uses.
    pub metric: Metric,
    /// Checks on every measured iteration's output.
    pub checks: Vec<Check>,
    /// Extra table columns (metric or counter names).
    #[serde(default)]
    pub table: Vec<String>,
    /// What the suite's snapshot keeps.
    pub snapshot: SnapshotPolicy,
    /// How its comparisons are decided (plans saved before it existed: the ranges
    /// rule, which made their verdicts).
    #[serde(default = "VerdictPolicy::recorded_before")]
    pub verdict: VerdictPolicy,
    /// Every iteration, in the order they run.
    pub iterations: Vec<Iteration>,
}

/// The rule of new suites.
pub const DEFAULT_RULE: Rule = Rule::MannWhitney;
/// Default significance level of [`Rule::MannWhitney`].
pub const DEFAULT_ALPHA: f64 = 0.01;
/// Default effect floor (a fraction: 0.10 is 10 %), also the ranges rule's threshold.
pub const DEFAULT_FLOOR: f64 = 0.10;

/// How a measurement's comparisons are decided (in `plan.json`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct VerdictPolicy {
    /// The rule.
    pub rule: Rule,
    /// Significance level of the test and `1 − alpha` the interval's confidence.
    pub alpha: f64,
    /// Effect floor, a fraction of the baseline (0.10: changes up to 10 % are not
    /// flagged).
    pub floor: f64,
    /// Looks at the data that `alpha` is shared among (Bonferroni): the tests run at
    /// [`VerdictPolicy::level`] = `alpha / looks`. 1 for a fixed number of repeats
    /// (absent from `plan.json` then); for adaptive repeats, the rounds at which a
    /// decision is possible ([`crate::measure::adaptive::looks`]).
    #[serde(default = "one_look", skip_serializing_if = "is_one_look")]
    pub looks: u32,
}

fn one_look() -> u32 {
    1
}

fn is_one_look(n: &u32) -> bool {
    *n == 1
}

/// Adaptive repeats of a measurement: every VM runs `min` rounds, then rounds go on
/// while a comparison is undecided, `max` at most.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Adaptive {
    /// Rounds always run.
    pub min: u32,
    /// Rounds at most.
    pub max: u32,
}

impl VerdictPolicy {
    /// The policy a suite's `verdict:` and a measurement's own (`own`, its keys
    /// winning) give, each key defaulting to [`DEFAULT_RULE`], [`DEFAULT_ALPHA`],
    /// [`DEFAULT_FLOOR`].
    pub fn from_specs(suite: Option<&VerdictSpec>, own: Option<&VerdictSpec>) -> Self {
        let pick = |f: fn(&VerdictSpec) -> Option<f64>| own.and_then(f).or_else(|| suite.and_then(f));
        VerdictPolicy {
            rule: own.and_then(|v| v.rule).or_else(|| suite.and_then(|v| v.rule)).unwrap_or(DEFAULT_RULE),
            alpha: pick(|v| v.alpha).unwrap_or(DEFAULT_ALPHA),
            floor: pick(|v| v.floor).unwrap_or(DEFAULT_FLOOR),
            looks: 1,
        }
    }

    /// The level the tests run at, and `1 − level` the intervals' confidence: `alpha`
    /// shared among the [`VerdictPolicy::looks`].
    pub fn level(&self) -> f64 {
        self.alpha / f64::from(self.looks.max(1))
    }

    /// The policy of plans saved before verdict policies existed: the ranges rule,
    /// which made their verdicts.
    pub fn recorded_before() -> Self {
        VerdictPolicy { rule: Rule::Ranges, alpha: DEFAULT_ALPHA, floor: DEFAULT_FLOOR, looks: 1 }
    }
}

impl Default for VerdictPolicy {
    fn default() -> Self {
        VerdictPolicy { rule: DEFAULT_RULE, alpha: DEFAULT_ALPHA, floor: DEFAULT_FLOOR, looks: 1 }
    }
}

impl MeasurementPlan {
    /// The guest file the output metric is read from, when it is read from a file.
    pub fn metric_file(&self) -> Option<&str> {
        match &self.output_metric {
            Some(OutputMetric { from: MetricFrom::File(path), .. }) => Some(path),
            _ => None,
        }
    }
}

/// One measured VM and the commands of its iterations.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MeasuredVm {
    /// VM name.
    pub vm: String,
    /// Setup, timed run and teardown.
    #[serde(flatten)]
    pub commands: Commands,
}

/// Where the byte count of `run` comes from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Bytes {
    /// Known in advance.
    Fixed(u64),
    /// The number a record printed in each iteration (e.g. `wc -c < FILE`).
    Record(String),
}

/// The metric a verdict uses, and which direction is better.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Metric {
    /// `elapsed_s`, `user_s`, `system_s`, `throughput_mb_s`, a derived metric name
    /// (`rpc_retransmissions`) or a counter name (`netstat.Tcp.RetransSegs`).
    pub name: String,
    /// Which direction is better.
    pub better: Better,
}

impl Metric {
    /// Whether the metric is a duration or a rate, so that its verdict words are
    /// `slower`/`faster` (otherwise `worse`/`better`; `outcome` has its own words).
    pub fn is_speed(&self) -> bool {
        matches!(self.name.as_str(), "elapsed_s" | "user_s" | "system_s" | "throughput_mb_s")
    }
}

/// A number the measured command prints: where it is and how to find it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutputMetric {
    /// Its name (`value` unless the suite names it), a metric like `elapsed_s`.
    pub name: String,
    /// Where it is printed.
    pub from: MetricFrom,
    /// How it is found there.
    pub extract: Extract,
    /// Its unit, for tables and reports (`IOPS`, `bit/s`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unit: Option<String>,
    /// Which direction is better.
    pub better: Better,
}

/// How an [`OutputMetric`] is found in its text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Extract {
    /// The text is JSON; the number is at this RFC 6901 pointer.
    Json(String),
    /// The first match of this regular expression; its one capture group is the number.
    Regex(String),
}

/// A check on an iteration's output.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Check {
    /// Section name (`stdout`, `stderr`, or a record).
    pub section: String,
    /// Only for this measured VM (`None`: every VM).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub only: Option<String>,
    /// What must hold.
    pub expect: Expect,
}

/// What a [`Check`] requires of the section's text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Expect {
    /// The text, trimmed, equals this.
    Equals(String),
    /// The text contains this.
    Contains(String),
}

/// What a suite's snapshot keeps of a measurement.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapshotPolicy {
    /// How much of each verdict.
    pub verdict: SnapshotVerdicts,
    /// Per-VM overrides of `verdict`, by VM name (`nfs_read.client_snapshot_verdicts`,
    /// `measure[].snapshot.verdict_by_vm`); absent from plans saved before they existed.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub verdict_by_vm: std::collections::BTreeMap<String, SnapshotVerdicts>,
    /// How each iteration ended.
    pub outcome: bool,
    /// Metrics or counters kept as `0` / `> 0`.
    pub signs: Vec<String>,
    /// Metrics or counters kept with their value in every counted iteration, for the
    /// ones a suite makes deterministic (seeded loss, one request in flight:
    /// `wire.rpc.retransmissions`); absent from plans saved before it existed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<String>,
    /// Sections kept verbatim.
    pub sections: Vec<String>,
}

impl SnapshotPolicy {
    /// How much of `vm`'s verdict the snapshot keeps: its override, else `verdict`.
    pub fn verdict_of(&self, vm: &str) -> SnapshotVerdicts {
        self.verdict_by_vm.get(vm).copied().unwrap_or(self.verdict)
    }
}

/// One iteration of one VM.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Iteration {
    /// The measured VM.
    pub vm: String,
    /// Its step.
    pub step: String,
    /// 1-based number among the VM's measured iterations (or among its warm-ups).
    pub number: u32,
    /// A warm-up (its output is kept, its numbers are left out).
    pub warmup: bool,
    /// The A/A copy of the baseline's iteration (`calibrate: true`): the same VM and
    /// commands run again as a separate step, analysed as the calibration pair, never
    /// as the baseline's own values.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub copy: bool,
    /// The remote observations around it.
    pub remote: Vec<RemoteReading>,
    /// The steps of the actions around it (with `concurrent: true`, around its round),
    /// in the order they run.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub actions: Vec<ActionStep>,
}

/// An action of `measure[].each`: a command on a VM before or after every iteration.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Action {
    /// The VM it runs on.
    pub vm: String,
    /// Shell command (run with `sh -c`, stderr into stdout; exit 0 expected).
    pub command: String,
    /// Before or after the iteration.
    pub when: When,
    /// 1-based position in its list (`each.before` or `each.after`), for messages.
    pub number: u32,
}

impl Action {
    /// Its suite key relative to the measurement: `each.before[0]`.
    pub fn key(&self) -> String {
        let list = match self.when {
            When::Before => "before",
            When::After => "after",
        };
        format!("each.{list}[{}]", self.number.saturating_sub(1))
    }
}

/// Which step ran an action around one iteration.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ActionStep {
    /// Index into [`MeasurementPlan::actions`].
    pub action: usize,
    /// The VM it runs on.
    pub vm: String,
    /// Its step there.
    pub step: String,
}

/// Which steps of a remote observer's VM read it just before and just after an iteration.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RemoteReading {
    /// Index into [`MeasurementPlan::remote`].
    pub observer: usize,
    /// The remote VM.
    pub vm: String,
    /// Its step before the iteration.
    pub before: String,
    /// Its step after the iteration (before the next one, or after the last).
    pub after: String,
}

pub use crate::parse::observe::Scope;
pub use crate::parse::ObserverKind;

/// A local observer: read in the measured VM before and after every iteration. Its
/// kind is a row of [`crate::parse::OBSERVERS`] (command, parser, derived metrics).
///
/// Serialized as the kind's name (`netstat`), or `{<name>: {mount, ops}}` for a kind
/// with settings, as plans have always been written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Observer {
    /// Its kind.
    pub kind: ObserverKind,
    /// Its settings, for a kind that takes them (`mountstats`: the NFS mount and the
    /// operations kept, every operation when `ops` is empty).
    pub scope: Option<Scope>,
}

impl Observer {
    /// An observer of `kind` without settings.
    pub fn new(kind: ObserverKind) -> Observer {
        Observer { kind, scope: None }
    }

    /// An observer of `kind` with settings `scope`.
    pub fn scoped(kind: ObserverKind, scope: Scope) -> Observer {
        Observer { kind, scope: Some(scope) }
    }
}

impl Serialize for Observer {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        match &self.scope {
            None => s.serialize_str(self.kind.name()),
            Some(scope) => {
                let mut m = s.serialize_map(Some(1))?;
                m.serialize_entry(self.kind.name(), scope)?;
                m.end()
            }
        }
    }
}

impl<'de> Deserialize<'de> for Observer {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = Observer;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("an observer's name, or a map of one observer's name to its settings")
            }
            fn visit_str<E: serde::de::Error>(self, name: &str) -> Result<Observer, E> {
                let kind = ObserverKind::from_name(name)
                    .ok_or_else(|| E::unknown_variant(name, &crate::parse::observe::NAMES))?;
                Ok(Observer::new(kind))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Observer, A::Error> {
                use serde::de::Error;
                let Some(name) = map.next_key::<String>()? else {
                    return Err(A::Error::invalid_length(0, &self));
                };
                let kind = ObserverKind::from_name(&name)
                    .ok_or_else(|| A::Error::unknown_variant(&name, &crate::parse::observe::NAMES))?;
                let scope: Scope = map.next_value()?;
                if map.next_key::<String>()?.is_some() {
                    return Err(A::Error::invalid_length(2, &self));
                }
                Ok(Observer::scoped(kind, scope))
            }
        }
        d.deserialize_any(V)
    }
}

/// A remote observer: read in *another* VM than the measured one around every iteration.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RemoteObserver {
    /// The netem qdisc on VM `vm`'s `eth0` (`net.egress` of that VM): packets sent and
    /// dropped during each iteration, from `tc -s qdisc show`. When the netem is
    /// seeded, the observation before each iteration also reseeds it.
    Netem {
        /// The VM carrying the netem.
        vm: String,
        /// Whether it is seeded (and so reseeded before every iteration).
        seeded: bool,
    },
}

/// A named command whose output is kept as a section of every iteration.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    /// Section name.
    pub name: String,
    /// Shell command (run with `sh -c`; stdout and stderr kept).
    pub command: String,
    /// When it runs.
    pub when: When,
}

/// The commands of one measured VM's iterations.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Commands {
    /// Run before each iteration (e.g. mount, drop caches).
    pub setup: Option<String>,
    /// The timed workload.
    pub run: String,
    /// Run after each iteration (e.g. unmount).
    pub teardown: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn observers_keep_the_json_shape_of_older_plans() {
        let old = r#"["netstat","proc_rpc_nfs",{"mountstats":{"mount":"/mnt/nfs","ops":["READ"]}}]"#;
        let observers: Vec<Observer> = serde_json::from_str(old).unwrap();
        assert_eq!(observers[0], Observer::new(ObserverKind::named("netstat")));
        assert_eq!(
            observers[2],
            Observer::scoped(
                ObserverKind::named("mountstats"),
                Scope { mount: "/mnt/nfs".into(), ops: vec!["READ".into()] }
            )
        );
        assert_eq!(serde_json::to_string(&observers).unwrap(), old);
        let unknown = serde_json::from_str::<Observer>(r#""iostat""#).unwrap_err().to_string();
        assert!(unknown.contains("unknown variant `iostat`, expected one of `netstat`"), "{unknown}");
    }
}
