//! Rules for a VM's `kernel:` (Debian package, local image, or built from source).

use crate::infra::images::{Catalog, DEFAULT_FLAVOUR};
use crate::suite::spec::{KernelSpec, SuiteFile};

use super::ValidationError;

/// Checks `spec` (at key path `k`): exactly one source, pinned in the catalog, files present.
pub(super) fn check_kernel(
    errs: &mut Vec<ValidationError>,
    file: &SuiteFile,
    catalog: &Catalog,
    k: &str,
    spec: &KernelSpec,
) {
    if let Some(src) = &spec.source {
        if spec.debian.is_some() || spec.path.is_some() || spec.modules.is_some() || spec.flavour.is_some() {
            errs.push(ValidationError::Rule {
                key: k.into(),
                message: "give one of `debian`, `path` or `source`; `source` takes no `modules` or `flavour`".into(),
            });
            return;
        }
        if catalog.debian_source(&src.debian).is_none() {
            let known = catalog.sources.iter().map(|s| s.series.clone()).collect::<Vec<_>>().join(", ");
            errs.push(ValidationError::Unknown {
                key: format!("{k}.source.debian"),
                what: "Debian kernel source",
                value: src.debian.clone(),
                hint: format!(" in images/kernels.yaml (pinned sources: {known})"),
            });
        }
        for (what, files) in [("fragments", &src.fragments), ("patches", &src.patches)] {
            for (i, f) in files.iter().enumerate() {
                let full = file.resolve(f);
                if !full.is_file() {
                    errs.push(ValidationError::Rule {
                        key: format!("{k}.source.{what}[{i}]"),
                        message: format!(
                            "{} does not exist (relative paths start at the suite's folder)",
                            full.display()
                        ),
                    });
                }
            }
        }
        return;
    }
    match (&spec.debian, &spec.path) {
        (Some(series), None) => {
            let flavour = spec.flavour.as_deref().unwrap_or(DEFAULT_FLAVOUR);
            if catalog.debian_kernel(series, flavour).is_none() {
                let known = catalog.debian_series(flavour).join(", ");
                errs.push(ValidationError::Unknown {
                    key: format!("{k}.debian"),
                    what: "Debian kernel",
                    value: format!("{series} ({flavour})"),
                    hint: format!(" in images/kernels.yaml (pinned: {known})"),
                });
            }
            if spec.modules.is_some() {
                errs.push(ValidationError::Rule {
                    key: format!("{k}.modules"),
                    message: "`modules` goes with `path`; a Debian kernel brings its own".into(),
                });
            }
        }
        (None, Some(p)) => {
            let full = file.resolve(p);
            if !full.is_file() {
                errs.push(ValidationError::Rule {
                    key: format!("{k}.path"),
                    message: format!(
                        "kernel image {} does not exist (relative paths start at the suite's folder)",
                        full.display()
                    ),
                });
            }
            if let Some(m) = &spec.modules {
                let full = file.resolve(m);
                if !full.is_dir() {
                    errs.push(ValidationError::Rule {
                        key: format!("{k}.modules"),
                        message: format!("modules folder {} does not exist", full.display()),
                    });
                }
            }
            if spec.flavour.is_some() {
                errs.push(ValidationError::Rule {
                    key: format!("{k}.flavour"),
                    message: "`flavour` goes with `debian`".into(),
                });
            }
        }
        (Some(_), Some(_)) => errs
            .push(ValidationError::Rule { key: k.into(), message: "give either `debian` or `path`, not both".into() }),
        (None, None) => errs.push(ValidationError::Rule {
            key: k.into(),
            message:
                "give `debian: \"<series>\"` (e.g. \"6.1\"), `path: <bzImage>` or `source: {debian: \"<series>\"}`"
                    .into(),
        }),
    }
}
