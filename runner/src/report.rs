//! After a run: the human summary printed by `vmrepro run`, and (for suites with an
//! `nfs_read` scenario) the parsed, compared results.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use crate::events::EventSink;
use crate::images::kernel::{resolve_kernel, KernelSource};
use crate::images::rootfs::resolve_rootfs;
use crate::images::{Cache, CacheOutcome, Catalog, DEFAULT_ROOTFS};
use crate::plan::Plan;
use crate::run::{run, RunError, RunOptions, RunOutcome, RunStatus, StepStatus};

/// What `vmrepro run` prints and how it ends.
#[derive(Debug)]
pub struct Report {
    /// The run.
    pub outcome: RunOutcome,
    /// Overall status.
    pub status: RunStatus,
    /// Result checks that failed (e.g. wrong byte count).
    pub checks_failed: usize,
    /// The text to print.
    pub text: String,
    /// NFS results, for suites with `nfs_read`.
    pub nfs: Option<crate::analysis::NfsResults>,
}

/// Runs `plan` and renders its summary.
pub async fn run_and_report(
    plan: &Plan,
    opts: &RunOptions,
    interrupt: impl std::future::Future<Output = ()>,
) -> Result<Report, RunError> {
    let outcome = run(plan, opts, interrupt).await?;
    let rec = &outcome.record;
    let mut text = String::new();
    let _ = writeln!(
        text,
        "suite {}: {:?} in {:.1}s (images {:.1}s, boot {:.1}s, steps {:.1}s, teardown {:.1}s)",
        rec.suite,
        rec.status,
        rec.timings.total_s,
        rec.timings.images_s,
        rec.timings.boot_s,
        rec.timings.steps_s,
        rec.timings.teardown_s
    );
    for v in &rec.vms {
        let _ = writeln!(
            text,
            "  vm {:<14} {:<28} boot {}",
            v.name,
            v.kernel_release,
            v.boot_s.map_or("-".into(), |b| format!("{b:.1}s"))
        );
        for s in &v.steps {
            if s.status != StepStatus::Passed {
                let _ = writeln!(
                    text,
                    "    step {} {:?}{}",
                    s.name,
                    s.status,
                    s.error.as_ref().map(|e| format!(": {e}")).unwrap_or_default()
                );
            }
        }
    }
    let mut checks_failed = 0;
    let mut nfs = None;
    if let Some(p) = &plan.nfs_read {
        if rec.status != RunStatus::InfrastructureError {
            match crate::analysis::analyse(p, rec, &outcome.dir) {
                Ok(r) => {
                    let _ = writeln!(text, "\n{}", crate::analysis::table(&r));
                    checks_failed += r.problems.len();
                    nfs = Some(r);
                }
                Err(e) => {
                    let _ = writeln!(text, "error: writing NFS results: {e}");
                    checks_failed += 1;
                }
            }
        }
    }
    if let Some(e) = &rec.error {
        let _ = writeln!(text, "error: {e}");
    }
    let _ = writeln!(text, "results: {}", outcome.dir.display());
    Ok(Report { status: rec.status, checks_failed, text, outcome, nfs })
}

/// `vmrepro images build`: resolves every image the suites need (or every pinned
/// kernel and the default rootfs). Returns an exit code.
pub async fn build_images(suites: &[PathBuf], images: Option<&Path>, cache: &Cache, events: EventSink) -> i32 {
    use crate::cli::exit;
    let mut kernels: Vec<KernelSource> = Vec::new();
    let mut rootfs: Vec<String> = Vec::new();
    let catalog = if suites.is_empty() {
        match Catalog::locate(images, Path::new(".")).and_then(|d| Catalog::load(&d)) {
            Ok(c) => {
                kernels = c.kernels.iter().cloned().map(KernelSource::Debian).collect();
                rootfs.push(DEFAULT_ROOTFS.into());
                c
            }
            Err(e) => {
                eprintln!("error: {e}");
                return exit::CONFIG_ERROR;
            }
        }
    } else {
        let mut cat = None;
        for s in suites {
            let (p, c) = match crate::cli::load_plan(s, images) {
                Ok(pc) => pc,
                Err(code) => return code,
            };
            for v in p.vms {
                if !kernels.contains(&v.kernel) {
                    kernels.push(v.kernel);
                }
                if !rootfs.contains(&v.rootfs) {
                    rootfs.push(v.rootfs);
                }
            }
            cat = Some(c);
        }
        cat.expect("at least one suite")
    };
    let mut code = exit::SUCCESS;
    let say = |what: String, r: Result<CacheOutcome, crate::images::ImageError>, took: std::time::Duration| match r {
        Ok(o) => {
            events(crate::events::Event::ImageReady { what, cached: o == CacheOutcome::Cached, took });
            true
        }
        Err(e) => {
            eprintln!("error: {what}: {e}");
            false
        }
    };
    for r in &rootfs {
        events(crate::events::Event::ImageStarted { what: format!("rootfs {r}") });
        let t = std::time::Instant::now();
        let res = resolve_rootfs(cache, &catalog, r).map(|(_, o)| o);
        if !say(format!("rootfs {r}"), res, t.elapsed()) {
            code = exit::INFRASTRUCTURE;
        }
    }
    for k in &kernels {
        events(crate::events::Event::ImageStarted { what: k.label() });
        let t = std::time::Instant::now();
        let res = resolve_kernel(cache, k).map(|(_, o)| o);
        let label = k.label();
        if !say(label, res, t.elapsed()) {
            code = exit::INFRASTRUCTURE;
        }
    }
    code
}
