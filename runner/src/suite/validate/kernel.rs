//! Rules for a VM's `kernel:` (Debian package, local image, or built from source).

use std::path::{Path, PathBuf};

use crate::infra::images::{Catalog, DEFAULT_FLAVOUR};
use crate::path_io::{FileError, Folder};
use crate::schema::{KernelSpec, SourceKernelSpec, SuiteFile};

use super::ValidationError;

/// Checks `spec` (at key path `k`): exactly one source, pinned in the catalog, files present.
pub(super) fn check_kernel(
    errs: &mut Vec<ValidationError>,
    file: &SuiteFile,
    catalog: &Catalog,
    k: &str,
    spec: &KernelSpec,
) {
    if spec.tree.is_some() || spec.rev.is_some() || !spec.fragments.is_empty() || !spec.patches.is_empty() {
        if spec.source.is_some()
            || spec.debian.is_some()
            || spec.path.is_some()
            || spec.modules.is_some()
            || spec.flavour.is_some()
        {
            errs.push(ValidationError::Rule {
                key: k.into(),
                message: "give one of `debian`, `path`, `source` or `tree`; `tree` takes `rev`, `fragments` and `patches` only".into(),
            });
            return;
        }
        check_tree(errs, file, catalog, k, spec);
        return;
    }
    if let Some(src) = &spec.source {
        if spec.debian.is_some() || spec.path.is_some() || spec.modules.is_some() || spec.flavour.is_some() {
            errs.push(ValidationError::Rule {
                key: k.into(),
                message: "give one of `debian`, `path` or `source`; `source` takes no `modules` or `flavour`".into(),
            });
            return;
        }
        check_source(errs, file, catalog, k, src);
        return;
    }
    match (&spec.debian, &spec.path) {
        (Some(series), None) => check_debian(errs, catalog, k, spec, series),
        (None, Some(p)) => check_local(errs, file, catalog, k, spec, p),
        (Some(_), Some(_)) => errs
            .push(ValidationError::Rule { key: k.into(), message: "give either `debian` or `path`, not both".into() }),
        (None, None) => errs.push(ValidationError::Rule {
            key: k.into(),
            message:
                "give `debian: \"<series>\"` (e.g. \"6.1\"), `path: <bzImage>`, `source: {debian: \"<series>\"}` or `tree: <name>` with `rev: <revision>`"
                    .into(),
        }),
    }
}

/// `kernel: {tree: NAME, rev: REV, …}` (at key path `k`): a tree name and a revision
/// vmrepro passes to git, the tree mapped here (or pinned by the bundle being replayed)
/// and the revision known to it, and fragments and patches as for `source:`.
fn check_tree(errs: &mut Vec<ValidationError>, file: &SuiteFile, catalog: &Catalog, k: &str, spec: &KernelSpec) {
    use crate::infra::images::tree::{check_name, check_rev};
    let (Some(tree), Some(rev)) = (&spec.tree, &spec.rev) else {
        let missing = if spec.tree.is_none() { "tree" } else { "rev" };
        errs.push(ValidationError::Rule {
            key: k.into(),
            message: format!("`{missing}` is missing: a kernel from a git tree gives `tree: NAME` and `rev: REV` (fragments and patches go with them)"),
        });
        return;
    };
    let mut ok = true;
    if let Some(message) = check_name(tree) {
        errs.push(ValidationError::Rule { key: format!("{k}.tree"), message });
        ok = false;
    }
    if let Some(message) = check_rev(rev) {
        errs.push(ValidationError::Rule { key: format!("{k}.rev"), message });
        ok = false;
    }
    if ok {
        if let Err(message) = file.trees().resolve(tree, rev) {
            let key = if file.trees().checkout(tree).is_some() { format!("{k}.rev") } else { format!("{k}.tree") };
            errs.push(ValidationError::Rule { key, message });
        }
    }
    let src =
        SourceKernelSpec { debian: String::new(), fragments: spec.fragments.clone(), patches: spec.patches.clone() };
    check_build_inputs(errs, file, catalog, k, "", &src);
}

/// `kernel: {source: …}` (at key path `k`): its Debian source is pinned, and each
/// fragment and patch is a readable build input under the suite's folders, given once.
fn check_source(errs: &mut Vec<ValidationError>, file: &SuiteFile, catalog: &Catalog, k: &str, src: &SourceKernelSpec) {
    if catalog.debian_source(&src.debian).is_none() {
        let known = catalog.sources.iter().map(|s| s.series.clone()).collect::<Vec<_>>().join(", ");
        errs.push(ValidationError::Unknown {
            key: format!("{k}.source.debian"),
            what: "Debian kernel source",
            value: src.debian.clone(),
            hint: format!(" in images/kernels.yaml (pinned sources: {known})"),
        });
    }
    check_build_inputs(errs, file, catalog, k, "source.", src);
}

/// The fragments and patches of a kernel build (at `{k}.{prefix}fragments[i]`, …): each
/// a readable build input under the suite's folders, given once.
fn check_build_inputs(
    errs: &mut Vec<ValidationError>,
    file: &SuiteFile,
    catalog: &Catalog,
    k: &str,
    prefix: &str,
    src: &SourceKernelSpec,
) {
    for (field, files, want) in [
        ("fragments", &src.fragments, Want::File("a config fragment file")),
        ("patches", &src.patches, Want::File("a patch file")),
    ] {
        let mut seen: Vec<(PathBuf, usize)> = Vec::new();
        for (i, f) in files.iter().enumerate() {
            let key = format!("{k}.{prefix}{field}[{i}]");
            let (_, real) = real_path(file, f);
            if let Some(message) = host_path_problem(file, f, want)
                .or_else(|| build_input_problem(file, &catalog.dir, f, field == "patches"))
            {
                errs.push(ValidationError::Rule { key, message });
                continue;
            }
            if let Some((_, first)) = seen.iter().find(|(p, _)| *p == real) {
                errs.push(ValidationError::Rule {
                    key,
                    message: format!("{} is also {field}[{first}]; give each file once", real.display()),
                });
            } else {
                seen.push((real, i));
            }
        }
    }
}

/// `kernel: {debian: series}` (at key path `k`): the series is pinned in `flavour`
/// (the error names the pinned series, or the series' pinned flavours), and no
/// `modules`.
fn check_debian(errs: &mut Vec<ValidationError>, catalog: &Catalog, k: &str, spec: &KernelSpec, series: &str) {
    let flavour = spec.flavour.as_deref().unwrap_or(DEFAULT_FLAVOUR);
    if catalog.debian_kernel(series, flavour).is_none() {
        let flavours: Vec<&str> =
            catalog.kernels.iter().filter(|p| p.series == series).map(|p| p.flavour.as_str()).collect();
        if flavours.is_empty() {
            let mut known: Vec<&str> = Vec::new();
            for p in &catalog.kernels {
                if !known.contains(&p.series.as_str()) {
                    known.push(&p.series);
                }
            }
            errs.push(ValidationError::Unknown {
                key: format!("{k}.debian"),
                what: "Debian kernel",
                value: format!("{series} ({flavour})"),
                hint: format!(" in images/kernels.yaml (pinned: {})", known.join(", ")),
            });
        } else {
            // The series is pinned, in other flavours: the flavour is what's wrong.
            errs.push(ValidationError::Unknown {
                key: format!("{k}.{}", if spec.flavour.is_some() { "flavour" } else { "debian" }),
                what: "flavour",
                value: flavour.to_string(),
                hint: format!(
                    " for Debian kernel {series} in images/kernels.yaml (pinned flavours of {series}: {})",
                    flavours.join(", ")
                ),
            });
        }
    }
    if spec.modules.is_some() {
        errs.push(ValidationError::Rule {
            key: format!("{k}.modules"),
            message: "`modules` goes with `path`; a Debian kernel brings its own".into(),
        });
    }
}

/// `kernel: {path: image}` (at key path `k`): the image is a kernel image the suite may
/// read, `modules` (when given) a modules folder, and no `flavour`.
fn check_local(
    errs: &mut Vec<ValidationError>,
    file: &SuiteFile,
    catalog: &Catalog,
    k: &str,
    spec: &KernelSpec,
    p: &Path,
) {
    if let Some(message) = host_path_problem(file, p, Want::File("a kernel image (bzImage or vmlinuz)"))
        .or_else(|| kernel_image_problem(file, &catalog.dir, p))
    {
        errs.push(ValidationError::Rule { key: format!("{k}.path"), message });
    }
    if let Some(m) = &spec.modules {
        if let Some(message) =
            host_path_problem(file, m, Want::Dir("the kernel's modules folder (…/lib/modules/<release>)"))
                .or_else(|| not_a_modules_folder(&file.resolve(m)))
        {
            errs.push(ValidationError::Rule { key: format!("{k}.modules"), message });
        }
    }
    if spec.flavour.is_some() {
        errs.push(ValidationError::Rule {
            key: format!("{k}.flavour"),
            message: "`flavour` goes with `debian`".into(),
        });
    }
}

/// Most bytes of a local kernel image (`kernel: {path: …}`).
pub const MAX_KERNEL_IMAGE_BYTES: u64 = 256 << 20;

/// Why the local kernel image `p` (from the suite) can't be booted, or `None`: it must
/// be a relative path that lies, once `..` is folded, inside the suite's folder or the
/// images folder `images`, reached with no symbolic link below that folder
/// ([`confined_file`]), a regular file with one hard link, at most
/// [`MAX_KERNEL_IMAGE_BYTES`], and an x86 boot image: a bzImage carries the boot
/// protocol's `HdrS` magic at offset 0x202 (Documentation/arch/x86/boot.rst). Checked so
/// that a suite can't name some other host file (its bytes would reach the guest's
/// memory and console).
fn kernel_image_problem(file: &SuiteFile, images: &Path, p: &Path) -> Option<String> {
    use std::io::Read;
    if p.is_absolute() {
        return Some(format!(
            "{} is an absolute path; a local kernel is named relative to the suite's folder and lies inside it or the images folder",
            p.display()
        ));
    }
    let (folder, rel) = match confined_file(file, images, p) {
        Ok(x) => x,
        Err(why) => return Some(why),
    };
    let (mut f, len) = match folder.open_file(&rel) {
        Ok(x) => x,
        Err(e) => return Some(e.to_string()),
    };
    let shown = folder.display(&rel);
    if len > MAX_KERNEL_IMAGE_BYTES {
        return Some(format!(
            "{} is {len} bytes; a kernel image is at most {MAX_KERNEL_IMAGE_BYTES} bytes",
            shown.display()
        ));
    }
    let mut head = [0u8; 0x206];
    let ok = f.read_exact(&mut head).is_ok() && &head[0x202..] == b"HdrS";
    (!ok).then(|| {
        format!(
            "{} is not a bzImage (no `HdrS` boot header at 0x202); give the `arch/x86/boot/bzImage` of a kernel build",
            shown.display()
        )
    })
}

/// Suite path `p`, confined: the folder that holds it once `..` is folded (the suite's
/// folder, else the images folder `images`, each with the links in its own path
/// resolved, as the kernel would resolve `..`), opened as a [`Folder`], and the path
/// inside it. Reads through that folder follow no symbolic link below it.
///
/// Errors: the message when `p` lies in neither folder, or the folder can't be opened.
pub(super) fn confined_file(file: &SuiteFile, images: &Path, p: &Path) -> Result<(Folder, String), String> {
    let roots = [real_dir(&file.dir), real_dir(images)];
    let given = lexically_normal(&if p.is_absolute() { p.to_path_buf() } else { roots[0].join(p) });
    for root in &roots {
        if let Ok(rel) = given.strip_prefix(root) {
            let folder = Folder::open(root).map_err(|e| e.to_string())?;
            return Ok((folder, rel.to_string_lossy().into_owned()));
        }
    }
    Err(format!(
        "{} is outside the suite's folder and the images folder ({}); vmrepro only takes kernel files that travel with the suite",
        given.display(),
        roots.iter().map(|r| r.display().to_string()).collect::<Vec<_>>().join(", ")
    ))
}

/// Why `p` (an existing folder) is not a kernel's modules folder, or `None`: `make
/// modules_install` and Debian's packages leave `modules.order` and `modules.builtin`
/// in it. Checked so that a suite can't have some other host folder copied into a
/// guest's modules disk.
fn not_a_modules_folder(p: &Path) -> Option<String> {
    let ok = ["modules.order", "modules.builtin"].iter().any(|f| p.join(f).is_file());
    (!ok).then(|| format!("{} has no modules.order or modules.builtin, so it is not a kernel's modules folder (…/lib/modules/<release> after `make modules_install`)", p.display()))
}

/// Most bytes of a config fragment.
pub const MAX_FRAGMENT_BYTES: u64 = 1024 * 1024;
/// Most bytes of a patch.
pub const MAX_PATCH_BYTES: u64 = 16 * 1024 * 1024;

/// Why `p` (a `source.fragments` or `source.patches` entry of the suite) can't go into
/// a kernel build, or `None`: it must lie inside the suite's folder or the images folder
/// `images` and be read through it with no symbolic link below that folder
/// ([`confined_file`]: a suite travels with a bug report and must not pull the host's
/// files into a kernel), be a regular file with one hard link, at most
/// [`MAX_FRAGMENT_BYTES`] / [`MAX_PATCH_BYTES`], and be what it is for: a fragment by
/// [`super::kconfig::fragment_line_problem`], a patch by
/// [`super::kconfig::patch_problem`].
fn build_input_problem(file: &SuiteFile, images: &Path, p: &Path, patch: bool) -> Option<String> {
    let (folder, rel) = match confined_file(file, images, p) {
        Ok(x) => x,
        Err(why) => return Some(why),
    };
    let shown = folder.display(&rel);
    let (limit, what) = if patch { (MAX_PATCH_BYTES, "a patch") } else { (MAX_FRAGMENT_BYTES, "a config fragment") };
    let text = match folder.read(&rel, limit) {
        Ok(b) => String::from_utf8_lossy(&b).into_owned(),
        Err(FileError::TooLarge { .. }) => {
            return Some(format!("{} is larger than {limit} bytes; {what} is at most {limit} bytes", shown.display()))
        }
        Err(e) => return Some(e.to_string()),
    };
    let problem = if patch {
        super::kconfig::patch_problem(&text)
    } else {
        text.lines().enumerate().find_map(|(n, line)| {
            super::kconfig::fragment_line_problem(line)
                .map(|why| format!("line {}: {} {why}", n + 1, crate::schema::text::shown(line.trim(), 60)))
        })
    };
    problem.map(|why| format!("{} {why}", shown.display()))
}

/// What a path in a suite must name: a regular file or a folder (with what it is for).
#[derive(Debug, Clone, Copy)]
pub(super) enum Want {
    /// A regular, readable file.
    File(&'static str),
    /// A folder.
    Dir(&'static str),
}

/// Where host path `p` of a suite really is: `(given, real)`, `given` taken from the
/// suite's folder when relative and made absolute, `real` with symbolic links resolved
/// when it exists, otherwise with `..` folded by hand (nothing is read from a path that
/// doesn't exist). What every "must lie inside folder X" rule compares.
pub(super) fn real_path(file: &SuiteFile, p: &Path) -> (PathBuf, PathBuf) {
    let given = if p.is_absolute() { p.to_path_buf() } else { file.dir.join(p) };
    let given = std::path::absolute(&given).unwrap_or(given);
    let real = std::fs::canonicalize(&given).unwrap_or_else(|_| lexically_normal(&given));
    (given, real)
}

/// A folder resolved as [`real_path`] resolves a path: a root to compare real paths with.
pub(super) fn real_dir(d: &Path) -> PathBuf {
    let d = std::path::absolute(d).unwrap_or_else(|_| d.to_path_buf());
    std::fs::canonicalize(&d).unwrap_or_else(|_| lexically_normal(&d))
}

/// Why the host path `p` (from the suite) can't be used as `want`, or `None`. Says what
/// the path is and what it should be; with [`SuiteFile::confine_to`] set, also refuses
/// a path that resolves (symbolic links followed) outside that folder.
pub(super) fn host_path_problem(file: &SuiteFile, p: &Path, want: Want) -> Option<String> {
    let full = file.resolve(p);
    let shown = full.display();
    let relative = if p.is_relative() { " (relative paths start at the suite's folder)" } else { "" };
    if let Some(root) = file.confine_to() {
        let (given, real) = real_path(file, p);
        if !real.starts_with(root) {
            let via = if real != lexically_normal(&given) {
                format!(" (a symbolic link to {})", real.display())
            } else {
                String::new()
            };
            let shown = given.display();
            return Some(format!(
                "{shown}{via} is outside the bundle's folder {}; a suite taken from a bundle may only name files inside it",
                root.display()
            ));
        }
    }
    let (want_file, what) = match want {
        Want::File(w) => (true, w),
        Want::Dir(w) => (false, w),
    };
    let meta = match std::fs::metadata(&full) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let dangling = std::fs::symlink_metadata(&full).is_ok();
            let why = if dangling { "is a symbolic link to nothing" } else { "does not exist" };
            return Some(format!("{shown} {why}{relative}; it should be {what}"));
        }
        Err(e) => return Some(format!("{shown} can't be read ({e}); it should be {what}")),
    };
    let ok = if want_file { meta.is_file() } else { meta.is_dir() };
    if !ok {
        return Some(format!("{shown} is {}; it should be {what}", crate::schema::text::file_kind(&meta)));
    }
    if want_file {
        if let Err(e) = std::fs::File::open(&full) {
            return Some(format!("{shown} can't be read ({e}); it should be {what}"));
        }
    }
    None
}

/// `p` with `.` and `..` components folded without touching the filesystem.
pub(super) fn lexically_normal(p: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            std::path::Component::ParentDir => {
                out.pop();
            }
            std::path::Component::CurDir => {}
            c => out.push(c),
        }
    }
    out
}
