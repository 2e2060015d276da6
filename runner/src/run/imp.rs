//! The run stage itself: [`run`] and [`run_with`] (the run folder, the record, the
//! interruption and `--keep`, teardown and the final status) over
//! `phases::execute`'s phases.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::{Instant, SystemTime};

use super::keep::{self, Keep};
use super::phases::execute;
use super::record::{write_json, Timings, RUN_SCHEMA};
use super::resources::Resources;
use super::scheduler::Recorder;
use super::{io_err, RunError, RunRecord, RunStatus, StepStatus, PLAN_FILE, RUN_FILE};
use crate::events::{Event, EventSink};
use crate::infra::images::{Cache, CancelFlag, Catalog};
use crate::path_io::PathIo;
use crate::plan::{Plan, StepKind};

/// Options for [`run`].
#[derive(Clone)]
pub struct RunOptions {
    /// Where run folders go (`<root>/<suite>/<timestamp>/`).
    pub results_root: PathBuf,
    /// Artefact cache.
    pub cache: Cache,
    /// Recipes.
    pub catalog: Catalog,
    /// Progress events.
    pub events: EventSink,
    /// Run folder to use instead of a new timestamped one.
    pub run_dir: Option<PathBuf>,
    /// Boot every VM, and save no VM state (`--fresh-boot`); otherwise a VM whose kind
    /// has a saved state starts from it (see [`crate::infra::qemu::state`]).
    pub fresh_boot: bool,
    /// Bind each QEMU process to one host CPU (`--pin`): the serving VMs to the first,
    /// the others in turn to the rest (see [`crate::infra::qemu::pin`]). With fewer than
    /// two CPUs the run goes on unpinned, with a notice.
    pub pin: bool,
    /// How saved states hold the guest's RAM: mapped (the default) unless a benchmark
    /// compares the fallback (see [`crate::infra::qemu::state`]).
    pub state_ram: crate::infra::qemu::state::StateRam,
}

impl std::fmt::Debug for RunOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunOptions").field("results_root", &self.results_root).field("cache", &self.cache).finish()
    }
}

/// A finished run.
#[derive(Debug)]
pub struct RunOutcome {
    /// The run folder.
    pub dir: PathBuf,
    /// What `run.json` holds.
    pub record: RunRecord,
}

/// Runs `plan`. Never leaves a QEMU process, namespace or temp folder behind; writes
/// `run.json` whatever happens (except when the run folder itself can't be created).
/// `interrupt` resolves when the user asks to stop (Ctrl-C/SIGTERM): the run then stops
/// at once, shuts its VMs down and records status `interrupted`.
///
/// Errors only when the run folder or the final `run.json` can't be written; every
/// other failure is an outcome with status `infrastructure_error` and its text.
pub async fn run(plan: &Plan, opts: &RunOptions, interrupt: impl Future<Output = ()>) -> Result<RunOutcome, RunError> {
    run_with(plan, opts, interrupt, Keep::Never).await
}

/// How a run was cut short.
#[derive(Debug, Clone, Copy)]
enum Stopped {
    /// SIGINT, SIGTERM or SIGHUP (`interrupt` resolved).
    Signal,
    /// `vmrepro stop` (the control socket).
    Request,
}

/// [`run`], keeping the VMs running after the steps when `keep` says so (see
/// [`keep`]): it then prints how to reach them and returns only once they were
/// stopped (`vmrepro stop`, `interrupt`, or every kept VM exited), after the usual
/// teardown. The run's status is its steps' outcome. `vmrepro stop` also ends a run
/// whose steps still run, as `interrupt` does.
///
/// Errors: as [`run`].
pub async fn run_with(
    plan: &Plan,
    opts: &RunOptions,
    interrupt: impl Future<Output = ()>,
    keep: Keep,
) -> Result<RunOutcome, RunError> {
    let started = SystemTime::now();
    let t0 = Instant::now();
    let dir = match &opts.run_dir {
        Some(d) => {
            std::fs::create_dir_all(d).map_err(io_err("creating run folder", d))?;
            d.clone()
        }
        None => new_run_dir(&opts.results_root.join(&plan.suite), started)?,
    };
    write_json(&dir.join(PLAN_FILE), plan)?;
    let record = Arc::new(Mutex::new(new_record(plan, started)));
    let mut res = Resources::default();
    // This run's own flag: an interruption stops its image builds and no one else's.
    let cancel = CancelFlag::new();
    let rec = Recorder { record: record.clone(), dir: dir.clone(), events: opts.events.clone(), t0 };
    // Set by the run's control socket (`vmrepro stop`).
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    tokio::pin!(interrupt);
    let result = {
        let cache = opts.cache.with_cancel(cancel.clone());
        let body = execute(plan, opts, &cache, &rec, &mut res, stop_tx);
        tokio::pin!(body);
        tokio::select! {
            r = &mut body => r.map(|()| None),
            () = &mut interrupt => {
                cancel.cancel();
                Ok(Some(Stopped::Signal))
            }
            () = keep::stop_requested(stop_rx.clone()) => {
                cancel.cancel();
                Ok(Some(Stopped::Request))
            }
        }
    };
    if matches!(result, Ok(None) | Err(_)) {
        let failed = result.is_err() || {
            let r = record.lock().expect("not poisoned");
            r.vms.iter().flat_map(|v| &v.steps).any(|s| s.status != StepStatus::Passed)
        };
        if keep.applies(failed) {
            keep_vms(&mut res, &record, &dir, &opts.events, interrupt.as_mut(), stop_rx).await;
        }
    }
    // Answered once run.json is final.
    let control = res.control.take();
    let mut rec = teardown(&mut res, &record, &opts.events).await;
    rec.timings.total_s = t0.elapsed().as_secs_f64();
    settle(&mut rec, &result);
    write_json(&dir.join(RUN_FILE), &rec)?;
    if let Some(c) = control {
        let status = serde_json::to_value(rec.status).ok().and_then(|v| v.as_str().map(str::to_string));
        c.finish(status.as_deref().unwrap_or("?")).await;
    }
    Ok(RunOutcome { dir, record: rec })
}

/// The record of a run of `plan` started at `started`, before anything ran.
fn new_record(plan: &Plan, started: SystemTime) -> RunRecord {
    RunRecord {
        schema: RUN_SCHEMA,
        suite: plan.suite.clone(),
        suite_file: plan.suite_file.display().to_string(),
        started: humantime::format_rfc3339_seconds(started).to_string(),
        status: RunStatus::Running,
        error: None,
        accel: None,
        accel_notice: None,
        pin_notice: None,
        subnet: plan.subnet.to_string(),
        mtu: plan.mtu,
        temp_dir: None,
        network_namespace: None,
        teardown_problems: vec![],
        images: vec![],
        timings: Timings::default(),
        vms: vec![],
        decided_after: Default::default(),
    }
}

/// `--keep`: resumes every VM that may be stopped, says how to reach the ones alive,
/// and waits until `interrupt`, `vmrepro stop` (`stop`) or until every kept VM exited.
async fn keep_vms<F: Future<Output = ()>>(
    res: &mut Resources,
    record: &Mutex<RunRecord>,
    dir: &Path,
    events: &EventSink,
    interrupt: Pin<&mut F>,
    stop: tokio::sync::watch::Receiver<bool>,
) {
    // A VM whose run was cut short while it saved its state may be stopped, or
    // its migration may still go on: a kept VM must run.
    for vm in res.vms.iter_mut() {
        if !vm.has_exited() {
            let _ = vm.resume().await;
        }
    }
    let alive = keep::alive(&mut res.vms);
    if alive.is_empty() {
        events(Event::Notice("--keep: nothing to keep, every VM has exited".into()));
    } else {
        let steps = keep::steps_summary(&record.lock().expect("not poisoned"));
        events(Event::Notice(keep::kept_notice(dir, &alive, &steps)));
        tokio::select! {
            () = interrupt => {}
            () = keep::stop_requested(stop) => {}
            () = keep::all_exited(&mut res.vms) => {
                events(Event::Notice("every kept VM has exited".into()));
            }
        }
    }
}

/// Teardown, whatever happened before: every VM, then the namespace, then temp files.
/// Returns the record with each VM's ending, the problems of the teardown and its time.
async fn teardown(res: &mut Resources, record: &Mutex<RunRecord>, events: &EventSink) -> RunRecord {
    if !res.vms.is_empty() {
        events(Event::TearingDown);
    }
    let t_down = Instant::now();
    let endings =
        futures::future::join_all(res.vms.iter_mut().map(|vm| async { (vm.name.clone(), vm.shutdown().await) })).await;
    let problems = res.release();
    for p in &problems {
        events(Event::Notice(format!("warning: {p}")));
    }
    let mut rec = record.lock().expect("not poisoned").clone();
    rec.teardown_problems = problems;
    for (name, ending) in endings {
        if let Some(v) = rec.vms.iter_mut().find(|v| v.name == name) {
            v.ending = Some(ending);
        }
    }
    rec.timings.teardown_s = t_down.elapsed().as_secs_f64();
    rec
}

/// The run's final status (and error) from how it ended: cut short (`Ok(Some)`), ran
/// through (`Ok(None)`: its steps decide) or failed (`Err`).
fn settle(rec: &mut RunRecord, result: &Result<Option<Stopped>, RunError>) {
    match result {
        Ok(Some(how)) => {
            rec.status = RunStatus::Interrupted;
            rec.error = Some(
                match how {
                    Stopped::Signal => {
                        "the run was interrupted (SIGINT/SIGTERM/SIGHUP); results collected so far are kept"
                    }
                    Stopped::Request => "the run was stopped (`vmrepro stop`); results collected so far are kept",
                }
                .into(),
            );
            mark_unfinished(
                rec,
                "the run was interrupted before this step",
                "the run was interrupted while this step ran",
            );
        }
        Ok(None) => {
            // Measured iterations are judged by the analysis (a failed, hung or crashed
            // iteration is an outcome of its VM, compared across VMs); every other step
            // must pass, except the actions of adaptive rounds that were not needed.
            let not_needed = |s: &&crate::run::record::StepRecord| match &s.kind {
                StepKind::Action { measurement, round: Some(r), .. } => {
                    rec.decided_after.get(measurement).is_some_and(|&d| *r > d)
                }
                _ => false,
            };
            let failed = rec
                .vms
                .iter()
                .flat_map(|v| &v.steps)
                .filter(|s| !not_needed(s))
                .any(|s| s.status != StepStatus::Passed && !matches!(s.kind, StepKind::Measure { .. }));
            rec.status = if failed { RunStatus::Failed } else { RunStatus::Passed };
        }
        Err(e) => {
            rec.status = RunStatus::InfrastructureError;
            rec.error = Some(e.to_string());
            let first = e.to_string().lines().next().unwrap_or_default().to_string();
            mark_unfinished(
                rec,
                "the run stopped before this step",
                &format!("the run stopped while this step ran ({first})"),
            );
        }
    }
}

/// Explains steps that did not run (`skipped`: `before`) or were cut short (`running`
/// → `cancelled`: `during`).
fn mark_unfinished(rec: &mut RunRecord, before: &str, during: &str) {
    for v in &mut rec.vms {
        for s in &mut v.steps {
            if s.status == StepStatus::Skipped && s.error.is_none() {
                s.error = Some(before.to_string());
            }
            if s.status == StepStatus::Running {
                s.status = StepStatus::Cancelled;
                s.error = Some(during.to_string());
            }
        }
    }
}

fn new_run_dir(base: &Path, started: SystemTime) -> Result<PathBuf, RunError> {
    std::fs::create_dir_all(base).map_err(io_err("creating results folder", base))?;
    let stamp: String =
        humantime::format_rfc3339_seconds(started).to_string().chars().filter(|c| *c != ':' && *c != '-').collect();
    for n in 0..1000 {
        let name = if n == 0 { stamp.clone() } else { format!("{stamp}-{n}") };
        let d = base.join(name);
        match std::fs::create_dir(&d) {
            Ok(()) => return Ok(d),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(RunError::Io(PathIo { what: "creating run folder", path: d, source: e })),
        }
    }
    Err(RunError::RunDirTaken { base: base.to_path_buf() })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A record of a run whose steps all ran: the server's `each:` action before the
    /// client's first iteration ended as `action`, that iteration as `iteration`
    /// (`run.json`'s status words).
    fn ran_through(action: &str, iteration: &str) -> RunRecord {
        let step = |name: &str, kind: serde_json::Value, status: &str| {
            let mut s = serde_json::json!({
                "name": name, "status": status, "exit_code": 1, "signal": null, "expect_exit": 0,
                "duration_s": 1.0, "stdout": null, "stderr": null, "error": null
            });
            for (k, v) in kind.as_object().expect("kind fields") {
                s[k] = v.clone();
            }
            s
        };
        let vm = |name: &str, step: serde_json::Value| {
            serde_json::json!({
                "name": name, "kernel": "k", "kernel_release": "r", "address": "", "mac": "", "tap": "",
                "accel": "tcg", "pid": null, "boot_s": 1.0, "ending": "quit", "console_log": "", "qemu_cmdline": "",
                "steps": [step]
            })
        };
        let action_kind =
            serde_json::json!({"kind": "action", "measurement": "create", "when": "before", "action": 1, "round": 1});
        let measure_kind =
            serde_json::json!({"kind": "measure", "measurement": "create", "iteration": 1, "warmup": false});
        serde_json::from_value(serde_json::json!({
            "schema": 2, "suite": "s", "suite_file": "s.yaml", "started": "", "status": "running", "error": null,
            "accel": "tcg", "accel_notice": null, "subnet": "10.90.0.0/24", "mtu": 1500, "temp_dir": null,
            "network_namespace": null, "images": [],
            "timings": { "images_s": 0.0, "boot_s": 0.0, "steps_s": 0.0, "teardown_s": 0.0, "total_s": 0.0 },
            "vms": [
                vm("server", step("action-before-1-client-create-1", action_kind, action)),
                vm("client", step("create-1", measure_kind, iteration)),
            ]
        }))
        .expect("a run record")
    }

    /// A failed measured iteration is an outcome the analysis judges; a failed `each:`
    /// action, like any other step that is not an iteration, fails the run (exit 1).
    #[test]
    fn a_failed_action_fails_the_run_and_a_failed_iteration_is_left_to_the_analysis() {
        for (action, iteration, want) in [
            ("passed", "passed", RunStatus::Passed),
            ("passed", "failed", RunStatus::Passed),
            ("failed", "skipped", RunStatus::Failed),
            ("timed_out", "skipped", RunStatus::Failed),
        ] {
            let mut rec = ran_through(action, iteration);
            settle(&mut rec, &Ok(None));
            assert_eq!(rec.status, want, "action {action}, iteration {iteration}");
            let exit = crate::cli::exit_code(rec.status, 0);
            assert_eq!(exit == crate::exit::SUCCESS, want == RunStatus::Passed, "exit {exit}");
        }
    }
}
