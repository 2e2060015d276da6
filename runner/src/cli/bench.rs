//! `vmrepro bench`: options → [`crate::bench::bench`] → Markdown or JSON on stdout.

use std::path::Path;

use super::args::BenchArgs;
use crate::exit;
use crate::infra::images::{Cache, Catalog};

/// Runs the bench; returns the exit code: 0 when every measurement succeeded, 3
/// (infrastructure) when one failed or nothing could be measured, 2 for bad options.
pub(super) async fn bench(args: BenchArgs, images: Option<&Path>, cache: Cache) -> i32 {
    let mut scale = Vec::new();
    for s in args.scale.iter().map(|s| s.trim()).filter(|s| !s.is_empty()) {
        match s.parse::<usize>() {
            Ok(n) if (1..=50).contains(&n) => scale.push(n),
            _ => {
                errln!("error: --scale {s:?}: a client count is 1 to 50");
                return exit::CONFIG_ERROR;
            }
        }
    }
    let start = args.suite.parent().unwrap_or(Path::new("."));
    let images = match Catalog::locate(images, start) {
        Ok(d) => d,
        Err(e) => {
            errln!("error: {e}");
            return exit::CONFIG_ERROR;
        }
    };
    let opts = crate::bench::BenchOptions {
        reps: usize::from(args.reps),
        suite: args.suite,
        suite_reps: usize::from(args.suite_reps),
        scale,
        kernel: args.kernel,
        memory_mib: args.memory,
        cold: args.cold,
        results_root: args.results,
        images,
        cache,
        fresh_boot: args.fresh_boot,
        pin: args.pin,
    };
    let (tx, rx) = tokio::sync::watch::channel(false);
    let signals = tokio::spawn(async move {
        super::progress::interrupted().await;
        let _ = tx.send(true);
    });
    let result = crate::bench::bench(&opts, &|line| errln!("{line}"), rx).await;
    signals.abort();
    match result {
        Ok(r) => {
            if args.json {
                outln!("{}", serde_json::to_string_pretty(&r).expect("a report serializes"));
            } else {
                out!("{}", crate::bench::report::markdown(&r));
            }
            if r.errors.is_empty() {
                exit::SUCCESS
            } else {
                exit::INFRASTRUCTURE
            }
        }
        Err(e @ crate::bench::BenchError::Suite(_)) => {
            errln!("error: {e}");
            exit::CONFIG_ERROR
        }
        Err(e) => {
            errln!("error: {e}");
            exit::INFRASTRUCTURE
        }
    }
}
