//! vmrepro: declarative reproducibility suites on QEMU virtual machines.
//!
//! A suite flows through one pipeline, one module per stage:
//! [`spec`] → [`validate`] → [`plan`] → [`images`] → [`net`] → [`qemu`] (VMs) →
//! [`run`] (steps, results) → [`report`] (NFS analysis, comparison).
//! The `vmrepro` binary is a thin shell around [`cli`].

pub mod analysis;
pub mod cli;
pub mod events;
pub mod images;
pub mod metrics;
pub mod net;
pub mod parse;
pub mod plan;
pub mod qemu;
pub mod report;
pub mod run;
pub mod snapshot;
pub mod spec;
pub mod validate;
