//! vmrepro: declarative reproducibility suites on QEMU virtual machines.
//!
//! A suite flows through one pipeline; each top-level module owns one part of it:
//!
//! - [`schema`]: the suite as written: raw serde types, loading, located errors.
//! - [`suite`]: [`schema`] → [`suite::validate`] (cross-field rules) →
//!   [`suite::compile`](mod@suite::compile) → [`plan`] (the typed, expanded plan, as data).
//! - [`infra`]: what runs the plan: [`infra::images`] (kernels, rootfs, cache),
//!   [`infra::net`] (private bridge), [`infra::qemu`] (VMs over QMP and the guest agent).
//! - [`run`]: executes a plan: boots the VMs, runs the steps, records everything.
//! - [`measure`]: the scenario-neutral measurement layer: observers, the guest script
//!   of one iteration, statistics and verdicts, analysis of a saved run.
//! - [`scenarios`]: built-in scenarios as presets of the measurement layer
//!   ([`scenarios::nfs_read`]: the report's NFS read).
//! - [`parse`]: parsers for the tools' outputs (GNU time, `netstat -s`, `nfsstat`, …).
//! - [`report`]: what a finished run is turned into: the printed summary and table, the
//!   normalised snapshot value, the published report (`report.md`, `report.html`) and
//!   JUnit XML.
//! - [`publish`]: a run as one file for a bug report (`vmrepro bundle`), and its re-run
//!   and comparison (`vmrepro replay`, `vmrepro compare`).
//!
//! - [`bench`](mod@bench): `vmrepro bench`, the runner against a bare QEMU boot, and a suite's
//!   wall time split into phases.
//!
//! The `vmrepro` binary is a thin shell around [`cli`]; [`exit`] holds its exit codes.

/// `print!` to stdout that never panics. `print!`/`println!`/`eprintln!` panic when
/// their stream is closed (`vmrepro run SUITE 2>&1 | head -3` once `head` has exited:
/// EPIPE, since Rust ignores SIGPIPE), which would end a run half way with exit 101
/// and its VMs killed; a lost line of output is not worth that, so the error is dropped
/// and the command ends with its own status. The CLI writes through these only.
macro_rules! out {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = write!(std::io::stdout(), $($arg)*);
    }};
}

/// [`out!`] with a newline, for `println!`.
macro_rules! outln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout(), $($arg)*);
    }};
}

/// [`outln!`] to stderr, for `eprintln!`.
macro_rules! errln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

pub mod analyse;
pub mod bench;
pub mod bisect;
pub mod cli;
pub mod events;
pub mod exit;
pub mod infra;
pub mod measure;
pub mod parse;
pub mod path_io;
pub mod plan;
pub mod publish;
pub mod report;
pub mod run;
pub mod scenarios;
pub mod schema;
pub mod suite;
pub mod wire;
