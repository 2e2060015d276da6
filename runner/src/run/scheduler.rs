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
use crate::plan::{Dependency, StepKind, StepPlan, Until, VmPlan};

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
    /// When the run started (step start times are recorded relative to it).
    pub t0: Instant,
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

/// Waits (at most `limit`) until every dependency of `st` has ended, and passed where
/// it must ([`Until`]).
async fn wait_deps(rx: &mut watch::Receiver<BTreeMap<Dependency, bool>>, st: &StepPlan, limit: Duration) -> Wait {
    let deadline = tokio::time::Instant::now() + limit;
    for d in &st.after {
        let key = d.key();
        let ok = match tokio::time::timeout_at(deadline, rx.wait_for(|m| m.contains_key(&key))).await {
            Err(_) => return Wait::TimedOut(d.clone()),
            Ok(Ok(m)) => m[&key] || d.until == Until::Ended,
            Ok(Err(_)) => false,
        };
        if !ok {
            return Wait::Failed(format!("dependency {d} did not pass"));
        }
    }
    Wait::Ready
}

/// The bytes a step reads on stdin: its text, or a host file (`files:`), which must
/// still be what the suite was compiled with.
///
/// Errors: [`RunError::Io`] when the file can't be read, [`RunError::FileChanged`]
/// when its SHA-256 is not the plan's.
fn stdin_of(st: &StepPlan) -> Result<Option<Vec<u8>>, RunError> {
    let Some(path) = &st.stdin_file else { return Ok(st.stdin.clone().map(String::into_bytes)) };
    let bytes = std::fs::read(path).map_err(io_err("reading the file to copy", path))?;
    if let StepKind::CopyFile { sha256, .. } = &st.kind {
        let now = crate::infra::sha256_hex(&bytes);
        if &now != sha256 {
            return Err(RunError::FileChanged { path: path.clone(), planned: sha256.clone(), now });
        }
    }
    Ok(Some(bytes))
}

/// What a kernel developer asks for first when a command hangs: the kernel log, and
/// the stacks of the blocked (D-state) tasks (`sysrq-w`, which the kernel prints into
/// that log). Run through the guest agent, which answers as long as the guest is
/// scheduling at all.
pub const HANG_DIAGNOSTICS_SCRIPT: &str = "echo '== dmesg (last 100 lines)'; dmesg | tail -n 100
echo w > /proc/sysrq-trigger; sleep 1
echo '== blocked tasks (echo w > /proc/sysrq-trigger)'; dmesg | sed -n '/sysrq: Show Blocked State/,$p' | tail -n 400
";

/// How long [`HANG_DIAGNOSTICS_SCRIPT`] may take.
const DIAGNOSTICS_TIMEOUT: Duration = Duration::from_secs(30);

/// Lines of the serial console kept when the guest died or its agent is gone.
const CONSOLE_TAIL_LINES: usize = 60;

/// Writes `vms/<vm>/NN-<step>.diagnostics` after step `idx` hung or its VM died: the
/// hang diagnostics through the agent, or the console's last lines when the agent
/// does not answer. Returns the file's path relative to the run folder.
async fn diagnose(vm: &mut Vm, vp: &VmPlan, idx: usize, rec: &Recorder) -> Result<String, RunError> {
    let st = &vp.steps[idx];
    let text =
        match vm.exec(&format!("{}-diagnostics", st.name), HANG_DIAGNOSTICS_SCRIPT, None, DIAGNOSTICS_TIMEOUT).await {
            Ok(r) => String::from_utf8_lossy(&r.stdout).into_owned(),
            Err(e) => format!(
                "the guest agent gave no diagnostics ({e})\n== serial console (last {CONSOLE_TAIL_LINES} lines)\n{}\n",
                vm.console_tail(CONSOLE_TAIL_LINES)
            ),
        };
    let name = format!("{:02}-{}.diagnostics", idx + 1, st.name);
    let path = rec.dir.join("vms").join(&vp.name).join(&name);
    std::fs::write(&path, text).map_err(io_err("writing", &path))?;
    Ok(format!("vms/{}/{name}", vp.name))
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
    let up = Dependency { vm: vp.name.clone(), step: None, until: Until::Passed };
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
        let key = Dependency::step(&vp.name, &st.name);
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
        let started = rec.t0.elapsed().as_secs_f64();
        rec.set_step(&vp.name, idx, |s| {
            s.status = StepStatus::Running;
            s.started_s = Some(started);
        });
        rec.save()?;
        let stdin = match stdin_of(st) {
            Ok(s) => s,
            Err(e) => {
                rec.set_step(&vp.name, idx, |s| {
                    s.status = StepStatus::Error;
                    s.error = Some(e.to_string());
                });
                return Err(e);
            }
        };
        let t = Instant::now();
        let result = vm.exec(&st.name, &st.script, stdin, st.timeout).await;
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
        // A measured iteration that hangs or kills its guest is an outcome of that VM,
        // not the end of the run: it is recorded (with what a kernel developer asks for
        // first) and the other VMs go on; this VM's later steps are skipped.
        let measured = matches!(st.kind, StepKind::Measure { .. });
        let diagnostics = match &result {
            Err(VmError::StepTimeout { .. }) | Err(VmError::Exited(_)) | Err(VmError::Agent { .. }) if measured => {
                Some(diagnose(vm, vp, idx, rec).await?)
            }
            _ => None,
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
            s.diagnostics = diagnostics.clone();
        });
        rec.save()?;
        rec.event(Event::StepFinished { vm: vp.name.clone(), step: st.name.clone(), status, took });
        progress.send_modify(|m| {
            m.insert(key, status == StepStatus::Passed);
        });
        match result {
            Err(e) if measured => {
                blocked = Some(match e {
                    VmError::StepTimeout { .. } => format!("iteration {} hung; the guest may be wedged", st.name),
                    _ => format!("the guest died or lost its agent during {}", st.name),
                });
            }
            Err(e) => return Err(RunError::Vm(e)),
            // A measured iteration that failed is an outcome; the next ones still run.
            Ok(_) if status != StepStatus::Passed && !measured => {
                blocked = Some(format!("step {} did not pass", st.name))
            }
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

    fn step(after: Vec<Dependency>) -> StepPlan {
        StepPlan::new("s", "true".into(), StepKind::User, Duration::from_secs(1)).after(after)
    }

    #[tokio::test(start_paused = true)]
    async fn an_ended_dependency_needs_no_pass() {
        let (tx, mut rx) = watch::channel(BTreeMap::new());
        tx.send_modify(|m| {
            m.insert(Dependency::step("a", "m-1"), false);
        });
        let waited = wait_deps(&mut rx, &step(vec![Dependency::ended("a", "m-1")]), Duration::from_secs(1)).await;
        assert!(matches!(waited, Wait::Ready));
        let waited = wait_deps(&mut rx, &step(vec![Dependency::step("a", "m-1")]), Duration::from_secs(1)).await;
        assert!(matches!(waited, Wait::Failed(_)));
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
