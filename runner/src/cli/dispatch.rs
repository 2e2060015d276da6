//! From a parsed command line to the library call and the exit code (see [`exit`]):
//! `run`, `check`, `plan`, `analyse`, `report`, and the hand-off to the other
//! subcommands' modules.

use std::path::Path;

use super::args::{Cli, Command, ImagesCommand, KeepArg, StateRamArg};
use super::progress::{interrupted, progress_sink};
use super::{bench, bisect, images, interactive, publish};
use crate::analyse::{analyse_dir, Analysis};
use crate::exit;
use crate::infra::images::{Cache, Catalog};
use crate::run::{RunOptions, RunStatus};

/// Loads, validates and compiles the suite at `path`; prints the error and returns
/// [`exit::CONFIG_ERROR`] when it can't.
pub(super) fn load_or_exit(path: &Path, images: Option<&Path>) -> Result<(crate::plan::Plan, Catalog), i32> {
    crate::suite::load(path, images).map_err(|e| {
        match e {
            // A located suite error renders its own `error:` lines.
            crate::suite::LoadError::Spec(_) | crate::suite::LoadError::Trees(_) => errln!("{e}"),
            crate::suite::LoadError::Catalog(_) => errln!("error: {e}"),
        }
        exit::CONFIG_ERROR
    })
}

/// The exit code of a finished, analysed run (see [`exit`]).
pub fn exit_code(status: RunStatus, problems: usize) -> i32 {
    match status {
        RunStatus::Passed if problems == 0 => exit::SUCCESS,
        RunStatus::Passed | RunStatus::Failed => exit::TEST_FAILURE,
        // `Running` never ends a run; treat it as the failure it would be.
        RunStatus::InfrastructureError | RunStatus::Running => exit::INFRASTRUCTURE,
        RunStatus::Interrupted => exit::INTERRUPTED,
    }
}

/// The summary, the tables and the problems of an analysed run, as printed.
pub(super) fn render(a: &Analysis) -> String {
    let mut text = crate::report::summary_with_problems(&a.record, a.results.problems().len());
    text.push_str(&crate::report::tables(a));
    if let Some(e) = &a.record.error {
        text.push_str(&format!("error: {e}\n"));
    }
    text.push_str(&format!("results: {}\n", a.dir.display()));
    text
}

/// Runs one parsed command line; returns the exit code.
// Over 100 lines, kept whole: one `match` over the subcommands, each arm a call into
// its module (or a few lines of printing); splitting it would only move the table.
pub(super) async fn dispatch(cli: Cli) -> i32 {
    let cache = cli.cache.clone().map(Cache::new).unwrap_or_else(Cache::from_env);
    match cli.command {
        Command::Check { suites } => {
            let mut code = exit::SUCCESS;
            for s in suites {
                match load_or_exit(&s, cli.images.as_deref()) {
                    Ok((p, _)) => {
                        let steps: usize = p.vms.iter().map(|v| v.steps.len()).sum();
                        outln!("ok: {} (suite {}, {} VMs, {steps} steps)", s.display(), p.suite, p.vms.len());
                    }
                    Err(c) => code = c,
                }
            }
            code
        }
        Command::Run { suite, results, junit, keep, fresh_boot, pin, state_ram } => {
            let (plan, catalog) = match load_or_exit(&suite, cli.images.as_deref()) {
                Ok(p) => p,
                Err(c) => return c,
            };
            let opts = RunOptions {
                results_root: results,
                cache,
                catalog,
                events: progress_sink(),
                run_dir: None,
                fresh_boot,
                pin,
                state_ram: match state_ram {
                    StateRamArg::Mapped => crate::infra::qemu::state::StateRam::Mapped,
                    StateRamArg::Copied => crate::infra::qemu::state::StateRam::Copied,
                },
            };
            let keep = match keep {
                None => crate::run::Keep::Never,
                Some(KeepArg::Always) => crate::run::Keep::Always,
                Some(KeepArg::OnFailure) => crate::run::Keep::OnFailure,
            };
            let outcome = match crate::run::run_with(&plan, &opts, interrupted(), keep).await {
                Ok(o) => o,
                Err(e) => {
                    errln!("error: {e}");
                    return exit::INFRASTRUCTURE;
                }
            };
            match analyse_dir(&outcome.dir) {
                Ok(a) => {
                    out!("{}", render(&a));
                    publish_reports(&a, junit.as_deref());
                    exit_code(a.record.status, a.results.problems().len())
                }
                Err(e) => {
                    out!("{}", crate::report::summary_not_analysed(&outcome.record));
                    errln!("error: analysing {}: {e}", outcome.dir.display());
                    write_junit(junit.as_deref(), &crate::report::junit::junit(&outcome.record, None));
                    exit_code(outcome.record.status, 1)
                }
            }
        }
        Command::Shell { run_dir, vm } => interactive::shell(&run_dir, &vm).await,
        Command::Stop { run_dir } => interactive::stop(&run_dir).await,
        Command::Doctor => interactive::doctor(),
        Command::Report { run_dir } => match crate::report::published::write(&run_dir) {
            Ok(w) => {
                outln!("{}\n{}", w.markdown.display(), w.html.display());
                exit::SUCCESS
            }
            Err(e) => {
                errln!("error: {e}");
                exit::CONFIG_ERROR
            }
        },
        Command::Bundle { run_dir, output, with_images } => {
            publish::bundle(&run_dir, output, with_images, cli.images.clone(), cache)
        }
        Command::Replay { bundle, results, junit, fresh_boot, pin, budget } => {
            publish::replay(&bundle, results, junit.as_deref(), cache, fresh_boot, pin, budget.budget()).await
        }
        Command::Compare { run_a, run_b, budget } => publish::compare(&run_a, &run_b, &budget.budget()).await,
        Command::Export { kcidb: _, run_dir, output } => publish::export_kcidb(&run_dir, output.as_deref()),
        Command::Bisect { suite, vm, good, bad, measurement, verify, max_runs, dir, fresh_boot, pin } => {
            let opts = crate::bisect::BisectOptions {
                suite,
                images: cli.images.clone(),
                vm,
                good,
                bad,
                measurement,
                verify,
                max_runs,
                dir,
                cache,
                events: progress_sink(),
                fresh_boot,
                pin,
            };
            bisect::bisect(opts).await
        }
        Command::Plan { suite, cost: true } => images::cost(&suite, cli.images.as_deref(), &cache),
        Command::Plan { suite, cost: false } => match load_or_exit(&suite, cli.images.as_deref()) {
            Ok((plan, _)) => {
                outln!("{}", serde_json::to_string_pretty(&plan).expect("a plan serializes"));
                exit::SUCCESS
            }
            Err(c) => c,
        },
        Command::Analyse { run_dir, snapshot } => match analyse_dir(&run_dir) {
            Ok(a) if snapshot => match crate::report::snapshot::normalise(&a) {
                Ok(n) => {
                    out!("{}", serde_yaml::to_string(&n).expect("a snapshot serializes"));
                    exit::SUCCESS
                }
                Err(e) => {
                    errln!("error: {e}");
                    exit::CONFIG_ERROR
                }
            },
            Ok(a) => {
                out!("{}", render(&a));
                exit_code(a.record.status, a.results.problems().len())
            }
            Err(e) => {
                errln!("error: {e}");
                exit::CONFIG_ERROR
            }
        },
        Command::Wire { run_dir, vm } => super::wire::wire(&run_dir, vm.as_deref()),
        Command::Bench(args) => bench::bench(args, cli.images.as_deref(), cache).await,
        Command::Images { command: ImagesCommand::List { folders } } => {
            images::list(cli.images.as_deref(), &cache, &folders)
        }
        Command::Images { command: ImagesCommand::Gc { folders, older_than, dry_run } } => images::gc(
            cli.images.as_deref(),
            &cache,
            &folders,
            &crate::infra::images::gc::GcPolicy { older_than, dry_run },
        ),
        Command::Images { command: ImagesCommand::Repin { dry_run, stale_only } } => {
            images::repin(cli.images.as_deref(), dry_run, stale_only)
        }
        Command::Images { command: ImagesCommand::Build { suites } } => {
            images::build_images(&suites, cli.images.as_deref(), &cache, progress_sink()).await
        }
    }
}

/// Writes the reports of an analysed run (and its JUnit XML when asked); a failure to
/// write them is printed, not fatal.
fn publish_reports(a: &Analysis, junit: Option<&Path>) {
    match crate::report::published::write_analysed(a) {
        Ok(w) => outln!("report: {}", w.markdown.display()),
        Err(e) => errln!("warning: writing the reports: {e}"),
    }
    write_junit(junit, &crate::report::junit::junit(&a.record, Some(&a.results)));
}

/// Writes JUnit XML to `path` when given; a failure is printed, not fatal.
pub(super) fn write_junit(path: Option<&Path>, xml: &str) {
    if let Some(p) = path {
        match std::fs::write(p, xml) {
            Ok(()) => outln!("junit: {}", p.display()),
            Err(e) => errln!("warning: writing {}: {e}", p.display()),
        }
    }
}
