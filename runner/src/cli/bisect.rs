//! `vmrepro bisect`: progress lines, the end summary and the exit code over
//! [`crate::bisect`].

use super::progress::interrupted;
use crate::bisect::{engine::short, report::verified, BisectError, BisectOptions};
use crate::exit;

/// Runs the bisect; exit 0 when it named a culprit that verified, 1 when it ended
/// without one (not verified, or only skipped commits left), 2 for a suite, VM,
/// revision or folder that does not fit (or endpoints that do not differ), 3 when a
/// run failed otherwise than by the bisected VM, 130 when interrupted (the same
/// command resumes it).
pub(super) async fn bisect(opts: BisectOptions) -> i32 {
    let (tx, rx) = tokio::sync::watch::channel(false);
    let signal = interrupted();
    tokio::spawn(async move {
        signal.await;
        let _ = tx.send(true);
    });
    let dir_hint = opts.dir.clone();
    match crate::bisect::bisect(opts, rx).await {
        Ok(f) => {
            let report = f.dir.join("bisect-report.md");
            let o = &f.outcome;
            match &o.culprit {
                Some(c) => {
                    let v = o.verification.as_ref();
                    outln!(
                        "first bad commit: {} ({}) {:?}{}",
                        short(&c.commit),
                        c.describe,
                        c.subject,
                        if verified(o) { "" } else { " — NOT VERIFIED" }
                    );
                    if let Some(v) = v {
                        outln!(
                            "verification: culprit {} in {} of {} runs, parent {} unchanged in {} of {}",
                            o.direction.words(),
                            v.culprit_as_expected,
                            v.runs,
                            short(&v.parent.commit),
                            v.parent_as_expected,
                            v.runs
                        );
                    }
                    outln!(
                        "confidence: {}",
                        match o.confidence {
                            Some(crate::bisect::engine::Confidence::High) => "high",
                            Some(crate::bisect::engine::Confidence::Medium) => "medium",
                            _ => "low",
                        }
                    );
                }
                None => {
                    outln!("no culprit: only skipped commits were left; the first bad commit is one of:");
                    for c in &o.possible {
                        outln!("  {} {:?}", short(&c.commit), c.subject);
                    }
                }
            }
            if f.resumed_runs > 0 {
                outln!("resumed: {} run(s) were taken from {}", f.resumed_runs, f.dir.join("bisect.json").display());
            }
            outln!("report: {}", report.display());
            if verified(o) {
                exit::SUCCESS
            } else {
                exit::TEST_FAILURE
            }
        }
        Err(BisectError::Interrupted) => {
            let at = dir_hint.map_or_else(|| "its bisect folder".to_string(), |d| d.display().to_string());
            errln!("interrupted: the runs so far are recorded in {at}; the same command resumes the bisect");
            exit::INTERRUPTED
        }
        Err(e @ (BisectError::Run(_) | BisectError::Infrastructure(_) | BisectError::Io(_))) => {
            errln!("error: {e}");
            exit::INFRASTRUCTURE
        }
        Err(BisectError::Load(e)) => {
            match e {
                crate::suite::LoadError::Spec(_) | crate::suite::LoadError::Trees(_) => errln!("{e}"),
                crate::suite::LoadError::Catalog(_) => errln!("error: {e}"),
            }
            exit::CONFIG_ERROR
        }
        Err(e) => {
            errln!("error: {e}");
            exit::CONFIG_ERROR
        }
    }
}
