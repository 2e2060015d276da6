//! The real [`Judge`]: one bisect run is the suite's own run with the bisected VM's
//! kernel built from the commit (its `kernel: {tree, rev}` resolved to the commit, its
//! fragments and patches as the suite gives them). The kernel is built first, alone,
//! so that a build failure is told apart (`git bisect skip`); then the suite runs into
//! the step's run folder and is analysed as `vmrepro run` analyses it, and the
//! bisected VM's values of the verdict metric and its baseline's are the judgement.

use std::path::{Path, PathBuf};

use super::engine::Judge;
use super::state::Judgement;
use super::BisectError;
use crate::events::EventSink;
use crate::infra::images::kernel::KernelSource;
use crate::infra::images::tree::{TreeCommit, TreeKernel};
use crate::infra::images::{resolve_all, Cache, CancelFlag, Catalog};
use crate::measure::analysis::{metric_value, VmResult, OUTCOME_METRIC};
use crate::plan::Plan;
use crate::run::{RunOptions, RunStatus};

/// Runs the suite of `plan` with VM `vm`'s kernel at each commit asked.
pub struct SuiteJudge {
    /// The suite's plan, as loaded.
    pub plan: Plan,
    /// The bisected VM's index in `plan.vms`.
    pub vm: usize,
    /// The measurement whose verdict decides.
    pub measurement: String,
    /// The artefact cache.
    pub cache: Cache,
    /// The images folder's recipes.
    pub catalog: Catalog,
    /// Progress events of the builds and runs.
    pub events: EventSink,
    /// `--fresh-boot`.
    pub fresh_boot: bool,
    /// `--pin`.
    pub pin: bool,
    /// Becomes `true` on SIGINT, SIGTERM or SIGHUP.
    pub stop: tokio::sync::watch::Receiver<bool>,
}

impl std::fmt::Debug for SuiteJudge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SuiteJudge").field("suite", &self.plan.suite).field("vm", &self.vm).finish()
    }
}

impl SuiteJudge {
    /// The plan with the bisected VM's kernel at `commit`: the suite's `rev` stays, what
    /// it resolves to is the commit (so the run's records, and a bundle of the run,
    /// say `rev` was that commit in this run, as a moved branch would be).
    fn plan_at(&self, commit: &TreeCommit) -> Result<Plan, BisectError> {
        let mut plan = self.plan.clone();
        let v = &mut plan.vms[self.vm];
        let KernelSource::Tree(k) = &v.kernel else {
            return Err(BisectError::Config(format!("VM {}'s kernel is not from a git tree", v.name)));
        };
        v.kernel = KernelSource::Tree(TreeKernel { resolved: commit.clone(), ..k.clone() });
        Ok(plan)
    }

    /// A future that ends once a signal arrived.
    fn stopped(&self) -> impl std::future::Future<Output = ()> {
        let mut rx = self.stop.clone();
        async move {
            let _ = rx.wait_for(|s| *s).await;
        }
    }

    /// Builds (or finds) the kernel of `plan`'s bisected VM; its error, if it does not
    /// build.
    async fn build(&self, plan: &Plan) -> Result<Option<String>, BisectError> {
        let cancel = CancelFlag::new();
        let cache = self.cache.with_cancel(cancel.clone());
        let kernel = [plan.vms[self.vm].kernel.clone()];
        let resolving = resolve_all(&kernel, &[], &cache, &self.catalog, &self.events);
        tokio::pin!(resolving);
        let resolved = tokio::select! {
            r = &mut resolving => r,
            () = self.stopped() => {
                cancel.cancel();
                let _ = resolving.await;
                return Err(BisectError::Interrupted);
            }
        };
        Ok(resolved.failures.into_iter().next().map(|(_, e)| e.to_string()))
    }
}

impl Judge for SuiteJudge {
    async fn judge(&mut self, commit: &TreeCommit, run_dir: &Path) -> Result<Judgement, BisectError> {
        let plan = self.plan_at(commit)?;
        if let Some(error) = self.build(&plan).await? {
            return Ok(Judgement::BuildFailed { error });
        }
        let opts = RunOptions {
            results_root: run_dir.parent().map_or_else(|| PathBuf::from("."), Path::to_path_buf),
            cache: self.cache.clone(),
            catalog: self.catalog.clone(),
            events: self.events.clone(),
            run_dir: Some(run_dir.to_path_buf()),
            fresh_boot: self.fresh_boot,
            pin: self.pin,
            state_ram: Default::default(),
        };
        let outcome = crate::run::run(&plan, &opts, self.stopped()).await.map_err(BisectError::Run)?;
        let vm = &plan.vms[self.vm].name;
        match outcome.record.status {
            RunStatus::Interrupted => return Err(BisectError::Interrupted),
            RunStatus::InfrastructureError | RunStatus::Running => {
                let error = outcome.record.error.clone().unwrap_or_else(|| "the run failed".into());
                let booted = |name: &str| outcome.record.vms.iter().any(|v| v.name == name && v.boot_s.is_some());
                let others_booted = outcome.record.vms.iter().filter(|v| v.name != *vm).all(|v| v.boot_s.is_some());
                if !booted(vm) && others_booted && !outcome.record.vms.is_empty() {
                    return Ok(Judgement::BootFailed { error });
                }
                return Err(BisectError::Infrastructure(format!("{}: {error}", run_dir.display())));
            }
            RunStatus::Passed | RunStatus::Failed => {}
        }
        let a = crate::analyse::analyse_dir(run_dir)
            .map_err(|e| BisectError::Infrastructure(format!("analysing {}: {e}", run_dir.display())))?;
        let m = a.results.measurements.iter().find(|m| m.name == self.measurement).ok_or_else(|| {
            BisectError::Infrastructure(format!("{}: no measurement {}", run_dir.display(), self.measurement))
        })?;
        let base = m.baseline_of(vm).to_string();
        let (Some(own), Some(baseline)) = (m.vm(vm), m.vm(&base)) else {
            return Err(BisectError::Infrastructure(format!(
                "{}: measurement {} has no results of {vm} or of its baseline {base}",
                run_dir.display(),
                m.name
            )));
        };
        if m.metric == OUTCOME_METRIC {
            let differs = own.verdict.as_deref() == Some("different outcome");
            return Ok(Judgement::Outcome { differs, words: own.outcome_words() });
        }
        let values = |v: &VmResult| -> Vec<f64> {
            v.iterations.iter().filter(|i| i.counted).filter_map(|i| metric_value(&m.metric, i)).collect()
        };
        let (candidate, base_values) = (values(own), values(baseline));
        if base_values.is_empty() {
            return Err(BisectError::Infrastructure(format!(
                "{}: baseline {base} gave no value of {} ({}); the bisect can't go on without it",
                run_dir.display(),
                m.metric,
                baseline.outcome_words()
            )));
        }
        if candidate.is_empty() {
            let n = own.iterations.len();
            return Ok(Judgement::NoValues {
                why: format!("{n} of {n} iterations gave no value ({})", own.outcome_words()),
            });
        }
        Ok(Judgement::Measured { candidate, baseline: base_values })
    }
}
