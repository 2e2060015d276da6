//! Cross-field rules of a suite (spec → **validate** → plan).
//!
//! Deserialization already rejected unknown keys and wrong types; here we check what
//! the types can't express. Every rule yields a [`ValidationError`] naming the key path
//! it is about, so the error can show the line.

pub mod cmdline;
mod env;
mod error;
pub mod files;
mod graph;
pub mod guest;
pub mod kconfig;
pub mod kernel;
pub mod limits;
mod measure;
mod netem;
pub mod nfs_mount;
pub mod nfs_read;
mod output_metric;
pub mod packages;
mod profile;
mod rules;
mod suite;
mod sysctl;
mod validated;

pub use error::ValidationError;
pub use files::parse_mode;
pub use graph::check_graph;
pub(crate) use rules::{duration, exit_status, is_name, range, verdict_overrides};
pub use suite::check;
pub use validated::{validate, validate_plan, Validated};
