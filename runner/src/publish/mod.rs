//! Publishing a run with a bug report, after the report itself
//! ([`crate::report::published`]): one file that carries it ([`bundle`], with host
//! paths and names redacted by [`redact`], written and read back by [`archive`]), and
//! its re-run and comparison ([`replay`]:
//! `vmrepro replay BUNDLE`, `vmrepro compare RUN_A RUN_B`); and its export to kernel
//! CI's database ([`kcidb`]: `vmrepro export --kcidb RUN_DIR`).

pub mod archive;
pub mod bundle;
pub mod kcidb;
pub mod redact;
pub mod replay;
