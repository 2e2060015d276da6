//! `vmrepro images build|list|gc|repin`: rendering and exit codes over
//! [`crate::infra::images::resolve_all`], [`crate::infra::images::gc`] and
//! [`crate::infra::images::repin`].

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::dispatch::load_or_exit;
use crate::events::EventSink;
use crate::exit;
use crate::infra::images::gc::{self, GcPolicy, Outcome, Reason, Usage};
use crate::infra::images::index::{fetch_packages, parse_packages, IndexEntry, IndexError};
use crate::infra::images::kernel::KernelSource;
use crate::infra::images::repin::{self, Decision, PinFields, MAX_MANIFEST_BYTES};
use crate::infra::images::{debian, resolve_all, Cache, Catalog, DEFAULT_ROOTFS};
use crate::path_io::Folder;

/// The catalog for `images` (or found from the current folder), or the exit code.
fn catalog(images: Option<&Path>) -> Result<Catalog, i32> {
    Catalog::locate(images, Path::new(".")).and_then(|d| Catalog::load(&d)).map_err(|e| {
        errln!("error: {e}");
        exit::CONFIG_ERROR
    })
}

/// The suite folders to consider: `given`, else `suites/` here, else the one beside
/// the images folder. Errors (exit code) when a given folder doesn't exist.
fn suite_dirs(given: &[PathBuf], catalog: &Catalog) -> Result<Vec<PathBuf>, i32> {
    if !given.is_empty() {
        if let Some(d) = given.iter().find(|d| !d.is_dir()) {
            errln!("error: {}: no such folder of suites", d.display());
            return Err(exit::CONFIG_ERROR);
        }
        return Ok(given.to_vec());
    }
    let beside = catalog.dir.join("../suites");
    Ok([PathBuf::from("suites"), beside].into_iter().filter(|d| d.is_dir()).take(1).collect())
}

fn usage_of(catalog: &Catalog, dirs: &[PathBuf]) -> Result<Usage, i32> {
    let files = gc::suite_files(dirs).map_err(|e| {
        errln!("error: {e}");
        exit::CONFIG_ERROR
    })?;
    let (suites, problems) = crate::suite::images_of(&files, &catalog.dir);
    Ok(gc::scan(catalog, &suites, problems))
}

fn users(usage: &Usage, id: &gc::EntryId) -> String {
    let mut parts = Vec::new();
    if let Some(s) = usage.suites.get(id).filter(|s| !s.is_empty()) {
        let names: Vec<&str> = s.iter().map(String::as_str).collect();
        parts.push(format!("{} {}", if names.len() == 1 { "suite" } else { "suites" }, names.join(", ")));
    }
    if let Some(p) = usage.pins.get(id).filter(|p| !p.is_empty()) {
        let names: Vec<&str> = p.iter().map(String::as_str).collect();
        parts.push(format!("{} {}", if names.len() == 1 { "pin" } else { "pins" }, names.join(", ")));
    }
    if parts.is_empty() {
        "nothing".into()
    } else {
        parts.join("; ")
    }
}

/// `vmrepro images list [FOLDER…]`.
pub(super) fn list(images: Option<&Path>, cache: &Cache, folders: &[PathBuf]) -> i32 {
    let catalog = match catalog(images) {
        Ok(c) => c,
        Err(code) => return code,
    };
    outln!("recipes in {}:", catalog.dir.display());
    for k in &catalog.kernels {
        outln!("  kernel debian {:<5} {:<12} {} {}", k.series, k.flavour, k.package, k.version);
    }
    for r in catalog.rootfs.keys() {
        outln!("  rootfs {r}");
    }
    for p in catalog.profiles.keys() {
        outln!("  profile {p}");
    }
    let dirs = match suite_dirs(folders, &catalog) {
        Ok(d) => d,
        Err(code) => return code,
    };
    let usage = match usage_of(&catalog, &dirs) {
        Ok(u) => u,
        Err(code) => return code,
    };
    let shown: Vec<String> = dirs.iter().map(|d| d.display().to_string()).collect();
    outln!(
        "cache {} (users: {} suite file(s) in {}):",
        cache.root().display(),
        usage.suite_files.len(),
        if shown.is_empty() { "no suite folder".to_string() } else { shown.join(", ") }
    );
    let entries = gc::entries(cache, &usage);
    let mut total = 0;
    for e in &entries {
        total += e.disk_bytes;
        let busy = if gc::is_busy(cache, &e.id) { "  [held by a running suite or build]" } else { "" };
        outln!(
            "  {:<6} {:<16}  {:>9}  {:>4}  {}{busy}",
            e.id.0,
            &e.id.1[..16.min(e.id.1.len())],
            gc::megabytes(e.disk_bytes),
            gc::short_age(e.age),
            e.what
        );
        outln!("  {:<6} {:<16}  used by {}", "", "", users(&usage, &e.id));
    }
    let ccache = cache.root().join("ccache");
    if ccache.is_dir() {
        let b = gc::disk_usage(&ccache);
        total += b;
        outln!(
            "  ccache (compiler cache of source-built kernels, capped at 5 GB; `gc` leaves it): {}",
            gc::megabytes(b)
        );
    }
    outln!("  total {} in {} entries", gc::megabytes(total), entries.len());
    for p in &usage.problems {
        errln!("warning: {p}");
    }
    exit::SUCCESS
}

/// `vmrepro images gc [FOLDER…] [--older-than AGE] [--dry-run]`.
pub(super) fn gc(images: Option<&Path>, cache: &Cache, folders: &[PathBuf], policy: &GcPolicy) -> i32 {
    let catalog = match catalog(images) {
        Ok(c) => c,
        Err(code) => return code,
    };
    let dirs = match suite_dirs(folders, &catalog) {
        Ok(d) => d,
        Err(code) => return code,
    };
    if dirs.is_empty() {
        errln!(
            "error: no suite folder here (suites/) nor beside {}: name the folders whose suites' images to keep",
            catalog.dir.display()
        );
        return exit::CONFIG_ERROR;
    }
    let usage = match usage_of(&catalog, &dirs) {
        Ok(u) => u,
        Err(code) => return code,
    };
    if !usage.problems.is_empty() {
        errln!("error: cannot tell what every suite needs, so nothing was removed:");
        for p in &usage.problems {
            errln!("  {p}");
        }
        return exit::CONFIG_ERROR;
    }
    let items = gc::gc(cache, &usage, policy);
    let (mut freed, mut busy, mut failed) = (0u64, 0, 0);
    let verb = if policy.dry_run { "would remove" } else { "removed" };
    for i in &items {
        let why = match i.reason {
            Reason::Unused => "no suite uses it".to_string(),
            Reason::Old => format!("built {} ago, used by {}", gc::short_age(i.entry.age), users(&usage, &i.entry.id)),
        };
        let id = format!("{}/{}", i.entry.id.0, &i.entry.id.1[..16.min(i.entry.id.1.len())]);
        match &i.outcome {
            Outcome::Removed => {
                freed += i.entry.disk_bytes;
                outln!("{verb} {id} ({}, {}): {why}", i.entry.what, gc::megabytes(i.entry.disk_bytes));
            }
            Outcome::Busy => {
                busy += 1;
                outln!("kept {id} ({}): {why}, but a running suite holds it (or it is being built)", i.entry.what);
            }
            Outcome::Failed(e) => {
                failed += 1;
                errln!("error: {id} ({}): {e}", i.entry.what);
            }
        }
    }
    outln!(
        "{}: {verb} {}, {busy} held and kept{}",
        if policy.dry_run { "dry run" } else { "done" },
        gc::megabytes(freed),
        if failed > 0 { format!(", {failed} failed") } else { String::new() }
    );
    if failed > 0 {
        exit::INFRASTRUCTURE
    } else {
        exit::SUCCESS
    }
}

/// `vmrepro images repin [--dry-run] [--stale-only]`.
pub(super) fn repin(images: Option<&Path>, dry_run: bool, stale_only: bool) -> i32 {
    let catalog = match catalog(images) {
        Ok(c) => c,
        Err(code) => return code,
    };
    let manifest = catalog.dir.join("kernels.yaml");
    let indexes = match read_indexes(&catalog) {
        Ok(i) => i,
        Err(code) => return code,
    };
    let reports = repin::plan(&catalog.kernels, &catalog.sources, &indexes, stale_only);
    let (changes, missing) = print_decisions(&reports);
    if changes.is_empty() {
        outln!("{} is up to date", manifest.display());
    } else if dry_run {
        outln!("dry run: {} not written", manifest.display());
    } else if let Err(code) = write_manifest(&catalog, &manifest, &changes) {
        return code;
    }
    if missing > 0 {
        exit::INFRASTRUCTURE
    } else {
        exit::SUCCESS
    }
}

/// The kernel packages (`linux-image-*`, `linux-source-*`) of every archive suite the
/// pins of `catalog` may move to, by suite, each line of progress printed. Errors (the
/// exit code, the error printed): [`exit::CONFIG_ERROR`] for an index that is not
/// one, [`exit::INFRASTRUCTURE`] when a pin's own suite can't be fetched; an extra
/// suite that can't be fetched is skipped with a note.
fn read_indexes(catalog: &Catalog) -> Result<BTreeMap<String, Vec<IndexEntry>>, i32> {
    let mut wanted: Vec<String> = Vec::new();
    for s in catalog.kernels.iter().map(|k| &k.suite).chain(catalog.sources.iter().map(|s| &s.suite)) {
        for c in repin::candidate_suites(s) {
            if !wanted.contains(&c) {
                wanted.push(c);
            }
        }
    }
    let own: Vec<&String> =
        catalog.kernels.iter().map(|k| &k.suite).chain(catalog.sources.iter().map(|s| &s.suite)).collect();
    let mut indexes = BTreeMap::new();
    for suite in &wanted {
        let fetched = debian::archive_url_for_suite(suite)
            .map_err(|e| IndexError::Fetch(e.to_string()))
            .and_then(|archive| fetch_packages(&archive, suite))
            .and_then(|index| {
                let kept = |p: &str| p.starts_with("linux-image-") || p.starts_with("linux-source-");
                Ok((parse_packages(&index.text, &index.url, suite, &kept)?, index.url))
            });
        match fetched {
            Ok((entries, url)) => {
                errln!("read the index of {suite} from {url}: {} kernel packages", entries.len());
                indexes.insert(suite.clone(), entries);
            }
            // A bad index is refused whichever suite it is of.
            Err(e @ IndexError::Bad { .. }) => {
                errln!("error: the index of {suite}: {e}; nothing was written");
                return Err(exit::CONFIG_ERROR);
            }
            // A pin's own suite must be readable; the extra security suite may not exist.
            Err(e) if own.contains(&suite) => {
                errln!("error: {e}");
                return Err(exit::INFRASTRUCTURE);
            }
            Err(e) => errln!("note: skipping {suite}: {e}"),
        }
    }
    Ok(indexes)
}

/// Prints the decision on each pin; returns the pins to rewrite with their new fields,
/// and how many pins found nothing of their kind.
fn print_decisions(reports: &[repin::PinReport]) -> (Vec<(repin::PinRef, PinFields)>, usize) {
    let show = |f: &PinFields| format!("{} {} ({})", f.package, f.version, f.suite);
    let mut changes = Vec::new();
    let mut missing = 0;
    for r in reports {
        let gone = if r.present { "" } else { " [the pinned file is no longer in the archive]" };
        match &r.decision {
            Decision::Unchanged => outln!("{}: {}: unchanged", r.pin, show(&r.old)),
            Decision::Repin(new) => {
                outln!("{}: {} → {}{gone}", r.pin, show(&r.old), show(new));
                changes.push((r.pin.clone(), new.clone()));
            }
            Decision::NotFound => {
                missing += 1;
                outln!(
                    "{}: {}: nothing of its kind in {}; left as is{gone}",
                    r.pin,
                    show(&r.old),
                    r.searched.join(", ")
                );
            }
        }
    }
    (changes, missing)
}

/// Rewrites `kernels.yaml` of `catalog` (at `manifest`) with `changes` and today's
/// `pinned_on`, and says what to do next. Errors (the exit code, the error printed):
/// [`exit::CONFIG_ERROR`] when the file can't be read or rewritten as expected,
/// [`exit::INFRASTRUCTURE`] when it can't be written.
fn write_manifest(catalog: &Catalog, manifest: &Path, changes: &[(repin::PinRef, PinFields)]) -> Result<(), i32> {
    // The images folder is untrusted too: kernels.yaml is read and replaced through
    // a Folder (no link followed, bounded, written as a temp file then renamed).
    let read = Folder::open(&catalog.dir).and_then(|f| Ok((f.read_text("kernels.yaml", MAX_MANIFEST_BYTES)?, f)));
    let (text, folder) = match read {
        Ok(t) => t,
        Err(e) => {
            errln!("error: {e}");
            return Err(exit::CONFIG_ERROR);
        }
    };
    let today = repin::today();
    let new_text = match repin::rewrite_manifest(manifest, &text, changes, &today) {
        Ok(t) => t,
        Err(e) => {
            errln!("error: {e}");
            return Err(exit::CONFIG_ERROR);
        }
    };
    if let Err(e) = folder.write("kernels.yaml", new_text.as_bytes(), 0o644) {
        errln!("error: {e}");
        return Err(exit::INFRASTRUCTURE);
    }
    outln!("wrote {} ({} pin(s) changed, pinned_on: {today})", manifest.display(), changes.len());
    outln!(
        "next: `cargo test` shows the suites whose snapshots change with these kernels; review them with `cargo insta review`"
    );
    Ok(())
}

/// `vmrepro images build`: resolves every image the suites need (or every pinned
/// kernel and the default rootfs); returns the exit code.
pub(super) async fn build_images(suites: &[PathBuf], images: Option<&Path>, cache: &Cache, events: EventSink) -> i32 {
    let mut kernels: Vec<KernelSource> = Vec::new();
    let mut rootfs = Vec::new();
    let mut catalog = None;
    for s in suites {
        let (p, c) = match load_or_exit(s, images) {
            Ok(pc) => pc,
            Err(code) => return code,
        };
        for (k, r) in p.vm_images() {
            kernels.push(k);
            rootfs.push(r);
        }
        catalog = Some(c);
    }
    let catalog = match catalog {
        Some(c) => c,
        None => match Catalog::locate(images, Path::new(".")).and_then(|d| Catalog::load(&d)) {
            Ok(c) => {
                kernels = c.kernels.iter().cloned().map(KernelSource::Debian).collect();
                rootfs.push(crate::infra::images::rootfs::RootfsRequest::new(DEFAULT_ROOTFS, &[]));
                c
            }
            Err(e) => {
                errln!("error: {e}");
                return exit::CONFIG_ERROR;
            }
        },
    };
    let resolved = resolve_all(&kernels, &rootfs, cache, &catalog, &events).await;
    for (what, e) in &resolved.failures {
        errln!("error: {what}: {e}");
    }
    if resolved.failures.is_empty() {
        exit::SUCCESS
    } else {
        exit::INFRASTRUCTURE
    }
}

/// `vmrepro plan --cost SUITE`: what the suite will fetch, build or save before and
/// while its VMs boot, and what the cache already has (see
/// [`crate::infra::images::cost`]); fetches, builds and locks nothing.
pub(super) fn cost(suite: &Path, images: Option<&Path>, cache: &Cache) -> i32 {
    use crate::infra::images::cost::{suite_cost, Work};
    let (plan, catalog) = match load_or_exit(suite, images) {
        Ok(pc) => pc,
        Err(code) => return code,
    };
    let vms: Vec<_> =
        plan.vms.iter().map(|v| (v.name.clone(), v.kernel.clone(), v.rootfs_request(), v.memory_mib)).collect();
    let items = suite_cost(&catalog, cache, &vms);
    let cached = items.iter().filter(|i| i.cached).count();
    outln!(
        "suite {}: {} image(s), {cached} cached, {} to fetch, build or save (cache {}; nothing is fetched or built by `plan --cost`)",
        plan.suite,
        items.len(),
        items.len() - cached,
        cache.root().display()
    );
    let width = items.iter().map(|i| i.what.chars().count()).max().unwrap_or(0);
    for i in &items {
        let state = match (i.cached, i.work) {
            (true, _) => "cached",
            (false, Work::Fetch) => "fetch",
            (false, Work::Build) => "build",
            (false, Work::Save) => "save",
        };
        let size = match (i.disk_bytes, i.download_bytes) {
            (Some(b), _) => gc::megabytes(b),
            (None, Some(b)) => format!("{} to download", gc::megabytes(b)),
            (None, None) => "size unknown".into(),
        };
        let mut when = i.age.map_or(String::new(), |a| format!(", built {} ago", gc::short_age(a)));
        if let Some(s) = i.took_s {
            when.push_str(&format!(" in {s:.1}s"));
        }
        outln!("  {state:<6}  {:<width$}  {size}{when}", i.what);
        let key = i.entry.as_ref().map_or(String::new(), |(k, key)| format!("{k}/{}, ", &key[..16.min(key.len())]));
        let how = if i.cached { String::new() } else { format!("; {}", i.how) };
        outln!("  {:<6}  {key}for {}{how}", "", i.vms.join(", "));
        if let Some(p) = &i.problem {
            outln!("  {:<6}  problem: {p}", "");
        }
    }
    let download: u64 = items.iter().filter_map(|i| i.download_bytes).sum();
    let builds: Vec<&str> =
        items.iter().filter(|i| !i.cached && i.work == Work::Build).map(|i| i.what.as_str()).collect();
    outln!(
        "to download: {}; to build: {}",
        gc::megabytes(download),
        if builds.is_empty() { "nothing".to_string() } else { builds.join(", ") }
    );
    exit::SUCCESS
}
