//! What a finished, analysed run ([`crate::analyse`]) is turned into: the text printed
//! at the end of `vmrepro run` and by `vmrepro analyse` ([`text`]), the normalised
//! value snapshot tests compare ([`snapshot`]), the published report `report.md` and
//! `report.html` ([`published`]), JUnit XML for CI ([`junit`]) and the diff of two runs
//! ([`diff`]). Nothing here runs a VM or analyses: everything is rendered from the run
//! folder's results.

pub mod diff;
pub mod hints;
pub mod junit;
pub mod published;
pub mod snapshot;
pub mod text;

/// Only tests/suites.rs uses `summary` now.
#[cfg_attr(vmrepro_dead_code, allow(unused_imports))]
pub use text::summary;
/// The tests' way to the verdict lines alone (`tables` prints them after each table).
#[cfg_attr(vmrepro_dead_code, allow(unused_imports))]
pub use text::verdict_lines;
pub use text::{summary_not_analysed, summary_with_problems, tables};
