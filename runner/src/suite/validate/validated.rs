//! The validation stage's entry points: [`validate`] (variants expanded, then every
//! rule) gives the [`Validated`] token that compile takes; [`validate_plan`] checks
//! what only the compiled plan shows; both locate what they find in the file as
//! written.

use super::{check, check_graph, guest, ValidationError};
use crate::infra::images::{Catalog, PinnedKernel, PinnedSource};
use crate::plan::Plan;
use crate::schema::{SpecError, SuiteFile};

/// A suite that passed [`validate`]: the only way to [`crate::suite::compile::compile`] one.
#[derive(Debug)]
pub struct Validated<'a> {
    /// The suite with its VMs' variants expanded (what is compiled).
    file: SuiteFile,
    /// Where the expanded suite's keys come from in the file as written.
    map: crate::suite::variants::KeyMap,
    catalog: &'a Catalog,
}

impl<'a> Validated<'a> {
    /// The suite, its VMs' variants expanded into plain VMs (see
    /// [`crate::suite::variants`]).
    pub fn file(&self) -> &SuiteFile {
        &self.file
    }

    /// The pinned Debian kernel a VM names (validated to exist).
    pub fn debian_kernel(&self, series: &str, flavour: &str) -> &'a PinnedKernel {
        self.catalog.debian_kernel(series, flavour).expect("validated: the kernel is pinned")
    }

    /// The pinned kernel source package a VM names (validated to exist).
    pub fn source_kernel(&self, series: &str) -> &'a PinnedSource {
        self.catalog.debian_source(series).expect("validated: the source is pinned")
    }
}

/// Expands the VMs' variants ([`crate::suite::variants`]) and runs [`check`] on the
/// plain suite that results; broken rules become one located [`SpecError`], pointing
/// into the file as written.
pub fn validate<'a>(file: &SuiteFile, catalog: &'a Catalog) -> Result<Validated<'a>, SpecError> {
    let (expanded, map) = match crate::suite::variants::expand(&file.spec) {
        Ok(x) => x,
        Err(errs) => {
            located(file, errs, None)?;
            unreachable!("expand returns errors only with some")
        }
    };
    let expanded = file.with_spec(expanded);
    located(file, check(&expanded, catalog), Some(&map))?;
    Ok(Validated { file: expanded, map, catalog })
}

/// Checks what only the compiled plan shows: every `after` target exists, no wait can
/// never end (see [`check_graph`]), and every generated script fits in one exec
/// argument ([`guest::check_plan_scripts`]). `file` is the suite as written.
pub fn validate_plan(file: &SuiteFile, valid: &Validated<'_>, plan: &Plan) -> Result<(), SpecError> {
    let mut errs = check_graph(&valid.file.spec, plan);
    errs.extend(guest::check_plan_scripts(plan));
    located(file, errs, Some(&valid.map))
}

/// `errs` as one located [`SpecError`] (each key remapped through `map` to the file as
/// written, each problem once), or `Ok` when there is none.
fn located(
    file: &SuiteFile,
    errs: Vec<ValidationError>,
    map: Option<&crate::suite::variants::KeyMap>,
) -> Result<(), SpecError> {
    if errs.is_empty() {
        return Ok(());
    }
    // A problem of a VM with variants is found once per variant, at the same place of
    // the file with the same words: it is shown once.
    let mut seen = std::collections::HashSet::new();
    let unique: Vec<(String, String)> = errs
        .iter()
        .map(|e| (map.map_or_else(|| e.key().to_string(), |m| m.remap(e.key())), e.to_string()))
        .filter(|p| seen.insert(p.clone()))
        .collect();
    // Only the problems shown are located (locating one reads the text up to its line).
    let shown = unique.iter().take(crate::schema::load::MAX_PROBLEMS + 1);
    let problems = shown.map(|(key, message)| file.error_at(key, message.clone())).collect();
    Err(SpecError::Invalid(crate::schema::load::capped(problems, unique.len())))
}
