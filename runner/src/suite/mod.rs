//! The suite: from a YAML file to a typed plan (**schema** → **validate** → **plan**).
//!
//! [`load`] is the whole stage: read and deserialize the file ([`crate::schema`]), find the
//! project's `images/` catalog, check the cross-field rules ([`validate`]), compile
//! ([`plan`](crate::plan)) and check what only the compiled plan shows (every wait can end). It
//! prints nothing; its errors say where and why.

pub mod compile;
pub mod validate;
pub mod variants;

use std::path::Path;

use crate::infra::images::{Catalog, ImageError};
use crate::plan::Plan;
pub use crate::schema::LoadOptions;
use crate::schema::{self, SpecError, SuiteFile};

/// Why a suite could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The suite file is unreadable or invalid (located problems).
    #[error(transparent)]
    Spec(#[from] SpecError),
    /// The project's `images/` catalog could not be found or read.
    #[error(transparent)]
    Catalog(#[from] ImageError),
    /// The tree mappings (`VMREPRO_TREES`) are malformed.
    #[error("error: {0}")]
    Trees(String),
}

/// Validates and compiles a loaded suite `file` against `catalog`.
///
/// Errors: [`SpecError::Invalid`] with every broken rule located in the file;
/// [`SpecError::Read`] when a profile script can't be read.
pub fn compile(file: &SuiteFile, catalog: &Catalog) -> Result<Plan, SpecError> {
    let valid = validate::validate(file, catalog)?;
    let plan = compile::compile(&valid, catalog)?;
    validate::validate_plan(file, &valid, &plan)?;
    Ok(plan)
}

/// Loads the suite at `path`: reads it, finds the catalog (`images` if given, else
/// `$VMREPRO_IMAGES`, else the nearest `images/` above the suite, else the one this
/// binary was built from: see [`Catalog::locate`]), validates and compiles it.
///
/// Errors: see [`LoadError`].
pub fn load(path: &Path, images: Option<&Path>) -> Result<(Plan, Catalog), LoadError> {
    let trees = crate::infra::images::tree::Trees::current().map_err(LoadError::Trees)?;
    load_with(path, images, &LoadOptions { trees, ..LoadOptions::default() })
}

/// [`load`] with `options`. For a suite taken from a bundle (`vmrepro replay`), pass
/// `LoadOptions { confine_to: Some(bundle_dir) }`: every file the suite names (kernel
/// `path` and `modules`, `source.fragments`, `source.patches`) must then resolve,
/// symbolic links followed, inside `bundle_dir`, or the suite is refused with each such
/// path located; the plan then holds the resolved paths. The repository's suites are
/// loaded without it: their paths may leave their folder.
///
/// Errors: see [`LoadError`].
pub fn load_with(path: &Path, images: Option<&Path>, options: &LoadOptions) -> Result<(Plan, Catalog), LoadError> {
    let file = schema::load_suite_with(path, options)?;
    let catalog = Catalog::load(&Catalog::locate(images, &file.dir)?)?;
    let plan = compile(&file, &catalog)?;
    Ok((plan, catalog))
}

/// The images each suite of `files` needs (against the catalog in `images`), for cache
/// housekeeping; a suite that does not load is a problem line (`file: first line of the
/// error`), not an error.
pub fn images_of(
    files: &[std::path::PathBuf],
    images: &Path,
) -> (Vec<crate::infra::images::gc::SuiteImages>, Vec<String>) {
    let mut suites = Vec::new();
    let mut problems = Vec::new();
    for f in files {
        match load(f, Some(images)) {
            Ok((plan, _)) => suites.push(crate::infra::images::gc::SuiteImages {
                suite: plan.suite.clone(),
                file: f.clone(),
                vms: plan.vm_images().collect(),
            }),
            Err(e) => {
                let first = e.to_string().lines().find(|l| !l.trim().is_empty()).unwrap_or_default().trim().to_string();
                problems.push(format!("{}: {first}", f.display()));
            }
        }
    }
    (suites, problems)
}
