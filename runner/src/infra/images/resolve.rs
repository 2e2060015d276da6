//! Resolving every image a set of VMs needs (fetching or building what the cache lacks),
//! with progress events. Shared by `vmrepro run` and `vmrepro images build`.

use std::collections::HashMap;
use std::time::Instant;

use serde::{Deserialize, Serialize};

use super::kernel::{resolve_kernel, KernelArtifact, KernelSource};
use super::rootfs::{resolve_rootfs, RootfsArtifact, RootfsRequest};
use super::{Cache, CacheOutcome, Catalog, ImageError};
use crate::events::{Event, EventSink};

/// One image as recorded in `run.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ImageRecord {
    /// What it is, e.g. `kernel 6.1 (linux-image-6.1.0-50-cloud-amd64)`, `rootfs bookworm-nfs`.
    pub what: String,
    /// Cache key (SHA-256 of every input).
    pub key: String,
    /// Found in the cache or built (fetched) now.
    pub outcome: CacheOutcome,
    /// Wall time of the resolution, seconds.
    pub seconds: f64,
}

/// Everything [`resolve_all`] produced.
#[derive(Debug, Default)]
pub struct Resolved {
    /// Kernels by [`KernelSource::label`].
    pub kernels: HashMap<String, KernelArtifact>,
    /// Root filesystems by [`RootfsRequest::id`].
    pub rootfs: HashMap<String, RootfsArtifact>,
    /// One record per image that resolved, in request order (root filesystems first).
    pub records: Vec<ImageRecord>,
    /// `(what, error)` for every image that failed.
    pub failures: Vec<(String, ImageError)>,
}

/// Resolves `rootfs` recipes and `kernels` (duplicates are resolved once) in parallel
/// on blocking threads, sending [`Event::ImageStarted`]/[`Event::ImageReady`] for each.
/// Never fails as a whole: each image's error is in [`Resolved::failures`].
pub async fn resolve_all(
    kernels: &[KernelSource],
    rootfs: &[RootfsRequest],
    cache: &Cache,
    catalog: &Catalog,
    events: &EventSink,
) -> Resolved {
    let mut unique_kernels: Vec<KernelSource> = Vec::new();
    for k in kernels {
        if !unique_kernels.contains(k) {
            unique_kernels.push(k.clone());
        }
    }
    let mut unique_rootfs: Vec<RootfsRequest> = Vec::new();
    for r in rootfs {
        if !unique_rootfs.contains(r) {
            unique_rootfs.push(r.clone());
        }
    }
    enum Artifact {
        Kernel(KernelArtifact),
        Rootfs(RootfsArtifact),
    }
    type Job = Box<dyn FnOnce() -> Result<(Artifact, String, CacheOutcome), ImageError> + Send>;
    let mut jobs: Vec<(String, String, Job)> = Vec::new();
    for r in unique_rootfs {
        let (cache, catalog) = (cache.clone(), catalog.clone());
        let id = r.id();
        jobs.push((
            format!("rootfs {id}"),
            id,
            Box::new(move || {
                let (a, o) = resolve_rootfs(&cache, &catalog, &r)?;
                let key = a.key.clone();
                Ok((Artifact::Rootfs(a), key, o))
            }),
        ));
    }
    for k in unique_kernels {
        let cache = cache.clone();
        let label = k.label();
        jobs.push((
            label.clone(),
            label,
            Box::new(move || {
                let (a, o) = resolve_kernel(&cache, &k)?;
                let key = a.key.clone();
                Ok((Artifact::Kernel(a), key, o))
            }),
        ));
    }
    let tasks = jobs.into_iter().map(|(what, id, job)| {
        let events = events.clone();
        async move {
            let w = what.clone();
            let res = tokio::task::spawn_blocking(move || {
                events(Event::ImageStarted { what: w.clone() });
                let t = Instant::now();
                let r = job();
                if let Ok((_, _, outcome)) = &r {
                    events(Event::ImageReady { what: w, cached: *outcome == CacheOutcome::Cached, took: t.elapsed() });
                }
                r.map(|x| (x, t.elapsed().as_secs_f64()))
            })
            .await;
            (what, id, res)
        }
    });
    let mut out = Resolved::default();
    for (what, id, res) in futures::future::join_all(tasks).await {
        match res {
            Ok(Ok(((artifact, key, outcome), seconds))) => {
                out.records.push(ImageRecord { what, key, outcome, seconds });
                match artifact {
                    Artifact::Kernel(a) => {
                        out.kernels.insert(id, a);
                    }
                    Artifact::Rootfs(a) => {
                        out.rootfs.insert(id, a);
                    }
                }
            }
            Ok(Err(e)) => out.failures.push((what, e)),
            Err(join) => out.failures.push((what, ImageError::Fetch(format!("image task failed: {join}")))),
        }
    }
    out
}
