//! Compiling a validated suite into its [`Plan`](crate::plan::Plan): defaults applied
//! (the `DEFAULT_*` constants of [`crate::plan`]), paths resolved against the suite's
//! folder, the `nfs_read` preset and every `measure:` entry expanded into steps.
//!
//! [`compile()`] (in `imp.rs`) is the stage; `vm.rs` compiles one VM and its setup
//! steps, [`measure`] the measurements.

mod imp;
pub mod measure;
mod vm;

pub use imp::compile;
