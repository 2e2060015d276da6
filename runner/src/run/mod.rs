//! Executing a [`Plan`](crate::plan::Plan): images → network → VMs → steps → results.
//!
//! Everything the run sees is written under its results folder as soon as it is known
//! (step outputs when the step ends, console logs live there while QEMU writes them,
//! `run.json` with status `running` at every milestone), so a failure or an
//! interruption loses nothing. Temp files (sockets, overlays, initrds) live in a
//! private 0700 temp folder. Teardown runs on every path (success, error, Ctrl-C,
//! SIGTERM) in this order: every QEMU is stopped and reaped, then the network
//! namespace's holder ends, then the temp folder is removed, then the final `run.json`
//! is written.

pub mod attach;
mod capture;
pub mod environment;
mod error;
pub mod images;
mod imp;
pub mod keep;
mod phases;
mod prepare;
pub mod record;
mod resources;
mod rounds;
mod scheduler;
mod waits;

pub(crate) use error::io_err;
pub use error::RunError;
pub use imp::{run, run_with, RunOptions, RunOutcome};
pub use keep::Keep;
pub use record::{RunRecord, RunStatus, StepStatus, VmStart};

/// Name of the compiled plan in a run folder.
pub const PLAN_FILE: &str = "plan.json";
/// Name of the run record in a run folder.
pub const RUN_FILE: &str = "run.json";
/// Name of a VM's serial shell socket in its folder of the run's temp folder
/// (`<temp_dir>/<vm>/shell.sock`, see `vmrepro shell`).
pub const SHELL_SOCKET: &str = "shell.sock";
