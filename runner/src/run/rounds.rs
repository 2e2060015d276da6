//! Adaptive repeats at run time: before a VM runs iteration `r + 1` of a measurement
//! with `repeat: {min, max}`, the measurement is analysed as the run folder holds it
//! after `r` rounds, and the iteration runs only if a comparison is still undecided
//! ([`crate::measure::adaptive`]). The decision after each round is taken once, by
//! the first VM to reach the next round, and every VM follows it: rounds are
//! sequential (or, for concurrent measurements, wait for the whole previous round,
//! see [`crate::measure::expand`]), so by then every iteration of round `r` has
//! ended and its output is in the run folder.

use std::collections::BTreeMap;
use std::sync::Mutex;

use crate::events::Event;
use crate::measure::adaptive::{all_decided, another_round};
use crate::measure::analysis::analyse;
use crate::plan::measurement::MeasurementPlan;

use super::scheduler::Recorder;

/// What was decided for one measurement so far.
#[derive(Debug, Default, Clone, Copy)]
struct Decided {
    /// The last round after which it was decided whether another is needed.
    checked: u32,
    /// The round after which every comparison was decided, once it was.
    stopped: Option<u32>,
}

/// The adaptive measurements of a run and what was decided for them.
pub(super) struct Rounds<'a> {
    measurements: &'a [MeasurementPlan],
    decided: Mutex<BTreeMap<String, Decided>>,
}

impl<'a> Rounds<'a> {
    /// The rounds of `measurements` (those without adaptive repeats always run).
    pub fn new(measurements: &'a [MeasurementPlan]) -> Self {
        Rounds { measurements, decided: Mutex::new(BTreeMap::new()) }
    }

    /// Whether measured iteration `number` of measurement `name` is to run: always for
    /// a fixed count and up to `min`; after that, when the analysis of the rounds before
    /// it has a comparison undecided. Stopping is recorded in `run.json`
    /// ([`super::RunRecord::decided_after`]) with a notice. An analysis that fails (an
    /// output unreadable) counts as undecided: the rounds go on to `max`.
    pub fn needed(&self, name: &str, number: u32, rec: &Recorder) -> bool {
        let Some(m) = self.measurements.iter().find(|m| m.name == name) else { return true };
        let Some(a) = m.adaptive else { return true };
        let rounds = number.saturating_sub(1);
        if rounds < a.min {
            return true;
        }
        let mut decided = self.decided.lock().expect("not poisoned");
        let d = decided.entry(name.to_string()).or_default();
        if let Some(stopped) = d.stopped {
            return number <= stopped;
        }
        if d.checked >= rounds {
            return true;
        }
        let record = rec.record.lock().expect("not poisoned").clone();
        let all = analyse(m, &record, &rec.dir).map(|r| all_decided(&r)).unwrap_or(false);
        d.checked = rounds;
        if another_round(a, rounds, all) {
            return true;
        }
        d.stopped = Some(rounds);
        rec.record.lock().expect("not poisoned").decided_after.insert(name.to_string(), rounds);
        (rec.events)(Event::Notice(format!(
            "measurement {name}: every comparison decided after {rounds} of at most {} rounds; the rest are not needed",
            a.max
        )));
        false
    }
}
