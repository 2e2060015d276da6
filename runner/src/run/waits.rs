//! How long a step may wait for another VM's step: not its own `timeout` (which bounds
//! only its run), but the latest its dependency can end, so that a hang is always
//! charged to the step that hung. A step ends at the latest when its VM's step before
//! it and every step it waits for ended at their latest, and it then ran for its whole
//! `timeout` plus the time a hang's diagnostics and partial output take
//! ([`STEP_ALLOWANCE`]); a VM's first step, when its VM came up at the latest (its
//! `boot_timeout` plus [`START_ALLOWANCE`]). Every wait is still bounded: a dependency
//! that has not ended by then belongs to a VM that is stuck outside any step's bound,
//! and the run ends with an error naming that VM.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::plan::{Dependency, StepPlan, VmPlan};

/// What a VM's start may take beyond its `boot_timeout`: the kernel check and identity
/// command (60 s each at most) and saving its kind's state (some seconds per 100 MB).
pub(super) const START_ALLOWANCE: Duration = Duration::from_secs(300);

/// What a step may take beyond its `timeout`: after a hang, its diagnostics (30 s at
/// most), its partial output (30 s at most), and writing the record.
pub(super) const STEP_ALLOWANCE: Duration = Duration::from_secs(90);

/// The latest each step of a plan can end, measured from the VMs' start.
#[derive(Debug, Clone, Default)]
pub(super) struct WaitBounds {
    /// Keyed by [`Dependency::key`]: every step, and every VM (`step: None`, up).
    latest: BTreeMap<Dependency, Duration>,
    /// The bound of a dependency the plan does not order (none, once validated): every
    /// VM's start and every step's run, one after another.
    total: Duration,
}

impl WaitBounds {
    /// The bounds of `vms`' steps. Steps whose waits form a cycle (refused by
    /// validation) or name a step that is not planned get the plan's total.
    pub fn new(vms: &[VmPlan]) -> WaitBounds {
        let view: Vec<VmSteps<'_>> =
            vms.iter().map(|v| VmSteps { name: &v.name, boot_timeout: v.boot_timeout, steps: &v.steps }).collect();
        WaitBounds::of(&view)
    }

    /// [`WaitBounds::new`] of the parts of a plan it reads.
    pub(super) fn of(vms: &[VmSteps<'_>]) -> WaitBounds {
        let start = |v: &VmSteps<'_>| v.boot_timeout.saturating_add(START_ALLOWANCE);
        let step = |t: Duration| t.saturating_add(STEP_ALLOWANCE);
        let total = vms
            .iter()
            .map(|v| v.steps.iter().map(|s| step(s.timeout)).fold(start(v), Duration::saturating_add))
            .fold(Duration::ZERO, Duration::saturating_add);
        let mut latest: BTreeMap<Dependency, Duration> = BTreeMap::new();
        let mut at = vec![0usize; vms.len()];
        let mut last: Vec<Duration> = vms.iter().map(start).collect();
        for (v, end) in vms.iter().zip(&last) {
            latest.insert(Dependency::parse(v.name), *end);
        }
        // Each pass takes every VM as far as its steps' dependencies are known.
        let mut moved = true;
        while moved {
            moved = false;
            for (i, v) in vms.iter().enumerate() {
                while let Some(s) = v.steps.get(at[i]) {
                    let deps: Option<Vec<Duration>> = s.after.iter().map(|d| latest.get(&d.key()).copied()).collect();
                    let Some(deps) = deps else { break };
                    let begin = deps.into_iter().fold(last[i], Duration::max);
                    last[i] = begin.saturating_add(step(s.timeout));
                    latest.insert(Dependency::step(v.name, &s.name), last[i]);
                    at[i] += 1;
                    moved = true;
                }
            }
        }
        WaitBounds { latest, total }
    }

    /// The latest `dep` can end after the VMs started (the plan's total when the plan
    /// does not order it).
    pub fn latest_end(&self, dep: &Dependency) -> Duration {
        self.latest.get(&dep.key()).copied().unwrap_or(self.total)
    }
}

/// What the bounds read of one VM's plan.
pub(super) struct VmSteps<'a> {
    /// The VM's name.
    pub name: &'a str,
    /// Its `boot_timeout`.
    pub boot_timeout: Duration,
    /// Its steps, in order.
    pub steps: &'a [StepPlan],
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::StepKind;

    const BOOT: Duration = Duration::from_secs(300);

    fn vm<'a>(name: &'a str, steps: &'a [StepPlan]) -> VmSteps<'a> {
        VmSteps { name, boot_timeout: BOOT, steps }
    }

    fn s(name: &str, secs: u64, after: Vec<Dependency>) -> StepPlan {
        StepPlan::new(name, "true".into(), StepKind::User, Duration::from_secs(secs)).after(after)
    }

    #[test]
    fn a_sequential_chain_adds_up_the_timeouts_of_everything_before() {
        let a = [s("m-1", 90, vec![]), s("m-2", 90, vec![Dependency::ended("b", "m-1")])];
        let b = [s("m-1", 90, vec![Dependency::ended("a", "m-1")])];
        let bounds = WaitBounds::of(&[vm("a", &a), vm("b", &b)]);
        let up = BOOT + START_ALLOWANCE;
        let one = Duration::from_secs(90) + STEP_ALLOWANCE;
        assert_eq!(bounds.latest_end(&Dependency::step("a", "m-1")), up + one);
        // b's iteration may wait for a's whole hang, then run its own.
        assert_eq!(bounds.latest_end(&Dependency::ended("b", "m-1")), up + one + one);
        assert_eq!(bounds.latest_end(&Dependency::step("a", "m-2")), up + one * 3);
        // Waiting for a hung a/m-1 can never give up before a/m-1's own timeout does.
        assert!(bounds.latest_end(&Dependency::step("a", "m-1")) > Duration::from_secs(90));
    }

    #[test]
    fn a_step_not_planned_is_bounded_by_the_whole_plan() {
        let a = [s("m-1", 10, vec![Dependency::step("ghost", "x")]), s("m-2", 10, vec![])];
        let bounds = WaitBounds::of(&[vm("a", &a)]);
        let total = BOOT + START_ALLOWANCE + (Duration::from_secs(10) + STEP_ALLOWANCE) * 2;
        assert_eq!(bounds.latest_end(&Dependency::step("a", "m-2")), total);
        assert_eq!(bounds.latest_end(&Dependency::step("ghost", "x")), total);
        assert_eq!(bounds.latest_end(&Dependency::parse("a")), BOOT + START_ALLOWANCE);
    }
}
