//! The run's first phase: every image its plan needs, found in the cache or built or
//! fetched now.

use crate::events::EventSink;
use crate::infra::images::{resolve_all, Cache, Catalog, Resolved};
use crate::plan::Plan;

/// Resolves every VM's kernel and rootfs ([`Plan::vm_images`]) with [`resolve_all`]
/// (each image once, in parallel; found in `cache` or built or fetched now). Never
/// fails as a whole: each image's error is in the result's `failures`.
pub async fn resolve(plan: &Plan, cache: &Cache, catalog: &Catalog, events: &EventSink) -> Resolved {
    let (kernels, rootfs): (Vec<_>, Vec<_>) = plan.vm_images().unzip();
    resolve_all(&kernels, &rootfs, cache, catalog, events).await
}
