//! The run's preset, as the report sees it ([`crate::scenarios::Preset`]).

use super::Analysis;
use crate::scenarios::Preset;

impl Analysis {
    /// The preset of the analysed run, when its suite used one: its plan facts and
    /// results, behind the interface the report renders.
    pub fn preset(&self) -> Option<Preset<'_>> {
        self.results.nfs_read.as_ref().map(|results| Preset::NfsRead { plan: self.plan.nfs_read.as_ref(), results })
    }
}
