//! The step scheduler: once a VM's guest agent answers, its steps run in plan order,
//! each after its `after` dependencies passed. Every step's outcome is published (a
//! [`Progress`] map keyed by the typed [`Dependency`]) for the steps of other VMs that
//! wait for it, and recorded ([`Recorder`]: `run.json`, the step's output files, events).
//!
//! No wait is unbounded: a step waits for its dependencies at most its own `timeout`,
//! and the step then runs for at most that `timeout` again.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::watch;

use crate::events::{Event, EventSink};
use crate::infra::qemu::vm::{Vm, VmError};
use crate::suite::plan::{Dependency, StepPlan, VmPlan};

use super::record::{write_json, ClockCheck, RunRecord, StepRecord, StepStatus, VmRecord};
use super::{io_err, RunError};

/// Which VMs are up (`step: None`) and which steps ended, and whether they passed.
pub(super) type Progress = watch::Sender<BTreeMap<Dependency, bool>>;

/// Keeps the run's record: updates `run.json` (rewritten at every milestone, so a killed
/// runner leaves what it saw) and sends the matching progress events.
#[derive(Clone)]
pub(super) struct Recorder {
    pub record: Arc<Mutex<RunRecord>>,
    pub dir: PathBuf,
    pub events: EventSink,
}

impl Recorder {
    /// Applies `f` to VM `vm`'s record.
    pub fn set_vm(&self, vm: &str, f: impl FnOnce(&mut VmRecord)) {
        let mut r = self.record.lock().expect("not poisoned");
        if let Some(v) = r.vms.iter_mut().find(|v| v.name == vm) {
            f(v);
        }
    }

    /// Applies `f` to step number `idx` of VM `vm`.
    pub fn set_step(&self, vm: &str, idx: usize, f: impl FnOnce(&mut StepRecord)) {
        self.set_vm(vm, |v| {
            if let Some(s) = v.steps.get_mut(idx) {
                f(s);
            }
        });
    }

    /// Writes `run.json` as it is now.
    ///
    /// Errors: [`RunError::Io`] when it can't be written.
    pub fn save(&self) -> Result<(), RunError> {
        let r = self.record.lock().expect("not poisoned");
        write_json(&self.dir.join("run.json"), &*r)
    }

    fn event(&self, e: Event) {
        (self.events)(e);
    }
}

/// How waiting for a step's dependencies ended.
enum Wait {
    /// All passed.
    Ready,
    /// One ended without passing: the step is skipped.
    Failed(String),
    /// One had not ended within the step's timeout.
    TimedOut(Dependency),
}

/// Waits (at most `limit`) until every dependency of `st` has ended and passed.
async fn wait_deps(rx: &mut watch::Receiver<BTreeMap<Dependency, bool>>, st: &StepPlan, limit: Duration) -> Wait {
    let deadline = tokio::time::Instant::now() + limit;
    for d in &st.after {
        let ok = match tokio::time::timeout_at(deadline, rx.wait_for(|m| m.contains_key(d))).await {
            Err(_) => return Wait::TimedOut(d.clone()),
            Ok(Ok(m)) => m[d],
            Ok(Err(_)) => false,
        };
        if !ok {
            return Wait::Failed(format!("dependency {d} did not pass"));
        }
    }
    Wait::Ready
}

/// Boots nothing: waits for `vm`'s guest agent, then runs `vp`'s steps in order,
/// publishing each outcome to `progress` and recording it with `rec`.
///
/// Errors: the VM failed (didn't boot, QEMU exited, agent lost, a step timed out), a
/// dependency did not end within a step's timeout, or the results couldn't be written.
pub(super) async fn run_vm(
    vm: &mut Vm,
    vp: &VmPlan,
    progress: &Progress,
    rec: &Recorder,
    booted_at: &Mutex<Option<Instant>>,
) -> Result<(), RunError> {
    let vdir = rec.dir.join("vms").join(&vp.name);
    let up = Dependency { vm: vp.name.clone(), step: None };
    let took = match vm.wait_ready(vp.boot_timeout).await {
        Ok(t) => t,
        Err(e) => {
            progress.send_modify(|m| {
                m.insert(up, false);
            });
            return Err(RunError::Vm(e));
        }
    };
    *booted_at.lock().expect("not poisoned") = Some(Instant::now());
    rec.event(Event::VmReady { vm: vp.name.clone(), took });
    rec.set_vm(&vp.name, |v| v.boot_s = Some(took.as_secs_f64()));
    let clock_start = vm.clock_sample().await;
    rec.save()?;
    progress.send_modify(|m| {
        m.insert(up, true);
    });
    let mut rx = progress.subscribe();
    let mut blocked: Option<String> = None;
    for (idx, st) in vp.steps.iter().enumerate() {
        let key = Dependency { vm: vp.name.clone(), step: Some(st.name.clone()) };
        if blocked.is_none() {
            match wait_deps(&mut rx, st, st.timeout).await {
                Wait::Ready => {}
                Wait::Failed(why) => blocked = Some(why),
                Wait::TimedOut(dep) => {
                    let err = RunError::DependencyTimeout {
                        vm: vp.name.clone(),
                        step: st.name.clone(),
                        dependency: dep.to_string(),
                        timeout: st.timeout,
                    };
                    rec.set_step(&vp.name, idx, |s| {
                        s.status = StepStatus::TimedOut;
                        s.error = Some(err.to_string());
                    });
                    progress.send_modify(|m| {
                        m.insert(key, false);
                    });
                    return Err(err);
                }
            }
        }
        if let Some(why) = &blocked {
            rec.set_step(&vp.name, idx, |s| s.error = Some(why.clone()));
            progress.send_modify(|m| {
                m.insert(key, false);
            });
            rec.event(Event::StepFinished {
                vm: vp.name.clone(),
                step: st.name.clone(),
                status: StepStatus::Skipped,
                took: Duration::ZERO,
            });
            continue;
        }
        rec.event(Event::StepStarted { vm: vp.name.clone(), step: st.name.clone() });
        rec.set_step(&vp.name, idx, |s| s.status = StepStatus::Running);
        rec.save()?;
        let t = Instant::now();
        let result = vm.exec(&st.name, &st.script, st.stdin.clone().map(String::into_bytes), st.timeout).await;
        let took = t.elapsed();
        let status = match &result {
            Ok(r) if r.exit_code == Some(i64::from(st.expect_exit)) => StepStatus::Passed,
            Ok(_) => StepStatus::Failed,
            Err(VmError::StepTimeout { .. }) => StepStatus::TimedOut,
            Err(_) => StepStatus::Error,
        };
        let files = match &result {
            Ok(r) => Some(write_outputs(&vdir, &vp.name, idx, &st.name, &r.stdout, &r.stderr)?),
            Err(_) => None,
        };
        let error = result.as_ref().err().map(ToString::to_string);
        rec.set_step(&vp.name, idx, |s| {
            s.status = status;
            s.duration_s = took.as_secs_f64();
            s.error = error;
            if let (Ok(r), Some((out, err))) = (&result, files) {
                s.exit_code = r.exit_code;
                s.signal = r.signal;
                s.stdout = Some(out);
                s.stderr = Some(err);
            }
        });
        rec.save()?;
        rec.event(Event::StepFinished { vm: vp.name.clone(), step: st.name.clone(), status, took });
        progress.send_modify(|m| {
            m.insert(key, status == StepStatus::Passed);
        });
        match result {
            Err(e) => return Err(RunError::Vm(e)),
            Ok(_) if status != StepStatus::Passed => blocked = Some(format!("step {} did not pass", st.name)),
            Ok(_) => {}
        }
    }
    if let (Some(a), Some(b)) = (clock_start, vm.clock_sample().await) {
        let host = (b.host_ns - a.host_ns) as f64;
        if host > 0.0 {
            let check = ClockCheck {
                interval_s: host / 1e9,
                offset_s: (a.guest_ns - a.host_ns) as f64 / 1e9,
                drift_ppm: ((b.guest_ns - a.guest_ns) as f64 - host) / host * 1e6,
            };
            rec.set_vm(&vp.name, |v| v.clock = Some(check));
        }
    }
    Ok(())
}

/// Writes a step's stdout and stderr as `vms/<vm>/NN-<step>.stdout|.stderr`; returns
/// their paths relative to the run folder.
fn write_outputs(
    vdir: &Path,
    vm: &str,
    idx: usize,
    step: &str,
    stdout: &[u8],
    stderr: &[u8],
) -> Result<(String, String), RunError> {
    let base = format!("{:02}-{step}", idx + 1);
    let o = vdir.join(format!("{base}.stdout"));
    let e = vdir.join(format!("{base}.stderr"));
    std::fs::write(&o, stdout).map_err(io_err("writing", &o))?;
    std::fs::write(&e, stderr).map_err(io_err("writing", &e))?;
    Ok((format!("vms/{vm}/{base}.stdout"), format!("vms/{vm}/{base}.stderr")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::suite::plan::StepKind;

    fn step(after: Vec<Dependency>) -> StepPlan {
        StepPlan::new("s", "true".into(), StepKind::User, Duration::from_secs(1)).after(after)
    }

    #[tokio::test(start_paused = true)]
    async fn a_dependency_that_never_ends_ends_the_wait_at_the_steps_timeout() {
        let (tx, mut rx) = watch::channel(BTreeMap::new());
        let dep = Dependency::step("bravo", "t1");
        let waited = wait_deps(&mut rx, &step(vec![dep.clone()]), Duration::from_secs(60)).await;
        assert!(matches!(waited, Wait::TimedOut(d) if d == dep));
        // One that passes, and one that failed.
        tx.send_modify(|m| {
            m.insert(dep.clone(), true);
            m.insert(Dependency::step("bravo", "t2"), false);
        });
        assert!(matches!(wait_deps(&mut rx, &step(vec![dep.clone()]), Duration::from_secs(1)).await, Wait::Ready));
        let failed =
            wait_deps(&mut rx, &step(vec![dep, Dependency::step("bravo", "t2")]), Duration::from_secs(1)).await;
        assert!(matches!(failed, Wait::Failed(why) if why.contains("bravo/t2")));
    }
}
