//! Analysis: a finished run folder → `results.json` (schema 3, see [`results`]), with
//! no VM. The stage between [`crate::run`] and [`crate::report`], which only renders.
//!
//! [`analyse_dir`] is a pure function of a run folder: it reads `plan.json` (the
//! compiled plan), `run.json` (what happened) and the step outputs they name, analyses
//! every measurement ([`crate::measure::analysis`]) and the `nfs_read` preset's own
//! facts ([`crate::scenarios::nfs_read::results`]), and writes `results.json` and the
//! report-layout files. `vmrepro run` calls it at the end of a run; `vmrepro analyse
//! RUN_DIR` calls it again on any finished run, with no VM.

mod preset;
pub mod results;
pub mod run_dir;
pub mod vm_facts;

pub use results::{Results, RESULTS_FILE};
pub use run_dir::{analyse_dir, analyse_read_only, AnalyseError, Analysis};
