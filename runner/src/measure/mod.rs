//! The scenario-neutral measurement layer: time any command on several VMs (one per
//! kernel or setting under test), with observers read around every iteration, and
//! compare each VM with a baseline.
//!
//! - [`observer`]: what is read around each iteration (`netstat -s`, `nfsstat`,
//!   `mountstats`, another VM's netem) and the derived metrics, as data;
//! - [`output_metric`]: a number `run` prints (JSON pointer or regex);
//! - [`script`]: the guest script of one iteration and its sections;
//! - [`expand`]: a compiled measurement ([`crate::plan::measurement`]) → its steps;
//! - [`analysis`]: a saved run folder → per-iteration numbers, summaries, verdicts;
//! - [`adaptive`]: the stopping rule of adaptive repeats and its corrected α;
//! - [`stats`]: counter deltas, summaries and the verdict rule;
//! - [`format`](mod@format): text of results shared by the tables.
//!
//! The `measure:` YAML block is [`crate::schema::measure`]; compiling it is
//! [`crate::suite::compile`](mod@crate::suite::compile). Built-in scenarios ([`crate::scenarios`]) are presets:
//! they expand into ordinary steps plus a
//! [`MeasurementPlan`](crate::plan::measurement::MeasurementPlan).

pub mod adaptive;
pub mod analysis;
pub mod expand;
pub mod format;
pub mod observer;
pub mod output_metric;
pub mod script;
pub mod stats;
pub mod verdict;
