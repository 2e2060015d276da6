//! Kernels built from a git tree on the user's machine:
//! `kernel: {tree: linux, rev: v6.1.176, fragments: [...], patches: [...]}`.
//!
//! A suite names a tree only by a short name; the user maps the name to a checkout on
//! their machine, outside the suite ([`Trees`]: `--tree linux=~/src/linux` or
//! `VMREPRO_TREES=linux=~/src/linux`), so a suite stays portable and a stranger's suite
//! cannot make vmrepro read an arbitrary host folder.
//!
//! The user's working tree, index and refs are never touched. The revision is resolved
//! with `git rev-parse` (the suite's `rev` is checked against [`check_rev`] first and
//! passed after `--end-of-options`), and the commit's files are exported with
//! `git read-tree --reset -u` into vmrepro's own build folder, one per set of
//! fragments (`<cache>/trees/<name>-<checkout hash>/build-<config hash>`), with that
//! folder's own index file: between two commits only the files that differ are
//! rewritten, and the last build's objects stay beside them, so kbuild rebuilds only
//! what those files touch. The build runs in the tree as a source package's does
//! ([`super::source`]), so the compiler's command lines are the same and ccache serves
//! both (a tree made from `linux-source-6.1` builds mostly from the cache the
//! source-built 6.1 kernels filled). Every command that runs the tree's code (patch,
//! make) runs in the sandbox ([`super::sandbox`]); git itself runs on the host on the
//! user's own repository, with hooks and fsmonitor turned off. A build that was killed
//! leaves a mark, and the next build in that folder first removes the files it wrote
//! (they may be half written).
//!
//! The built kernel is cached under `kernel/<key>` by (commit id, fragments, patches,
//! compiler); run.json, the report and bundles record the commit id and
//! `git describe`, and `bundle --with-images` carries the built kernel, so a replayer
//! without the tree runs it from the cache ([`TreeKernel::checkout`] is then `None`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use super::source::{build_lock, copy_inputs, file_names, inputs_key_bytes, local_version, Kbuild};
use super::{run_tool, Cache, ImageError};
use crate::infra::hash::sha256_hex;

/// The environment variable that maps tree names to checkouts:
/// `NAME=PATH[,NAME=PATH…]` (a `--tree` option given on the command line wins).
pub const TREES_ENV: &str = "VMREPRO_TREES";

/// Bumped when the way tree kernels are built changes.
const TREE_FORMAT: &str = "vmrepro-tree-kernel-v1";

/// The mappings given with `--tree NAME=PATH` on the command line (set once, by the CLI,
/// before any suite is loaded).
static CLI_TREES: OnceLock<Vec<(String, PathBuf)>> = OnceLock::new();

/// Records the command line's `--tree` mappings for every later [`Trees::current`].
/// A second call is ignored (the CLI calls it once).
pub fn set_cli_trees(mappings: Vec<(String, PathBuf)>) {
    let _ = CLI_TREES.set(mappings);
}

/// Which tree names map to which checkouts on this machine, and (for a suite replayed
/// from a bundle) which commit each `(tree, rev)` was.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Trees {
    checkouts: BTreeMap<String, PathBuf>,
    pins: BTreeMap<(String, String), TreeCommit>,
}

/// A resolved revision of a tree.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct TreeCommit {
    /// The commit id, 40 lowercase hex digits.
    pub commit: String,
    /// `git describe --tags --always --abbrev=12` of it.
    pub describe: String,
    /// The commit's subject line.
    pub subject: String,
    /// The committer date, ISO 8601 (`%cI`).
    pub date: String,
}

impl Trees {
    /// The mappings in force: `VMREPRO_TREES`, then the command line's `--tree`s (which
    /// win for a name given in both).
    ///
    /// Errors: a malformed `VMREPRO_TREES` entry, as [`parse_mapping`] words it.
    pub fn current() -> Result<Self, String> {
        let mut t = Trees::default();
        if let Ok(env) = std::env::var(TREES_ENV) {
            for part in env.split(',').map(str::trim).filter(|p| !p.is_empty()) {
                let (name, path) = parse_mapping(part).map_err(|e| format!("{TREES_ENV}: {e}"))?;
                t.checkouts.insert(name, path);
            }
        }
        for (name, path) in CLI_TREES.get().into_iter().flatten() {
            t.checkouts.insert(name.clone(), path.clone());
        }
        Ok(t)
    }

    /// Maps `name` to the checkout at `path` (the CLI maps through [`set_cli_trees`];
    /// tests and library users through this).
    #[cfg_attr(vmrepro_dead_code, allow(dead_code))]
    pub fn map(&mut self, name: &str, path: PathBuf) {
        self.checkouts.insert(name.to_string(), path);
    }

    /// Records that `rev` of `tree` is `commit` (from a bundle), for use when the tree is
    /// not mapped here.
    pub fn pin(&mut self, tree: &str, rev: &str, commit: TreeCommit) {
        self.pins.insert((tree.to_string(), rev.to_string()), commit);
    }

    /// The checkout `name` maps to.
    pub fn checkout(&self, name: &str) -> Option<&Path> {
        self.checkouts.get(name).map(PathBuf::as_path)
    }

    /// The names mapped, for messages.
    pub fn names(&self) -> Vec<&str> {
        self.checkouts.keys().map(String::as_str).collect()
    }

    /// `rev` of `tree` and the checkout to build it from: a pinned commit (a replayed
    /// bundle's: what the run was, even where a branch has moved since) with the mapped
    /// checkout if any, else `rev` resolved in the mapped checkout.
    ///
    /// Errors: the tree is neither mapped nor pinned (the message says how to map it),
    /// or git cannot resolve `rev` there (git's own message).
    pub fn resolve(&self, tree: &str, rev: &str) -> Result<(TreeCommit, Option<PathBuf>), String> {
        let checkout = self.checkout(tree);
        if let Some(pin) = self.pins.get(&(tree.to_string(), rev.to_string())) {
            return Ok((pin.clone(), checkout.map(Path::to_path_buf)));
        }
        if let Some(checkout) = checkout {
            return resolve_rev(checkout, rev).map(|c| (c, Some(checkout.to_path_buf())));
        }
        let mapped = self.names();
        Err(format!(
            "tree `{tree}` is not mapped to a checkout on this machine: give `--tree {tree}=PATH` or set {TREES_ENV}={tree}=PATH{}",
            if mapped.is_empty() { String::new() } else { format!(" (mapped: {})", mapped.join(", ")) }
        ))
    }
}

/// `NAME=PATH` → the name (checked with [`check_name`]) and the path (`~/` expanded to
/// `$HOME`).
///
/// Errors: no `=`, a bad name, or an empty path.
pub fn parse_mapping(s: &str) -> Result<(String, PathBuf), String> {
    let (name, path) = s.split_once('=').ok_or_else(|| format!("`{s}`: give NAME=PATH"))?;
    if let Some(problem) = check_name(name) {
        return Err(format!("`{s}`: {problem}"));
    }
    if path.is_empty() {
        return Err(format!("`{s}`: the path is empty"));
    }
    let path = match path.strip_prefix("~/") {
        Some(rest) => std::env::var_os("HOME").map_or_else(|| PathBuf::from(path), |h| PathBuf::from(h).join(rest)),
        None => PathBuf::from(path),
    };
    Ok((name.to_string(), path))
}

/// Why `name` is not a tree name (`[a-z0-9][a-z0-9_-]*`, at most 32 characters), or
/// `None`.
pub fn check_name(name: &str) -> Option<String> {
    let ok = !name.is_empty()
        && name.len() <= 32
        && name.starts_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
        && name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_');
    (!ok).then(|| format!("tree name `{name}` must match [a-z0-9][a-z0-9_-]* (at most 32 characters)"))
}

/// Why `rev` is not a revision vmrepro passes to git, or `None`. Allowed: a tag, branch
/// or commit id with `~N`/`^N` suffixes (`v6.1.176`, `linux-6.1.y`, `abc123~2`), at
/// most 128 characters of `[A-Za-z0-9._/~^+-]`, not starting with `-`, without `..`
/// (a range), `@{` (the reflog, which differs between machines) or `:` (a path).
pub fn check_rev(rev: &str) -> Option<String> {
    let chars_ok = rev.chars().all(|c| c.is_ascii_alphanumeric() || "._/~^+-".contains(c));
    let ok = !rev.is_empty() && rev.len() <= 128 && chars_ok && !rev.starts_with('-') && !rev.contains("..");
    (!ok).then(|| {
        format!(
            "revision `{}` is not one vmrepro passes to git: give a tag, a branch or a commit id (with ~N or ^N), at most 128 characters of [A-Za-z0-9._/~^+-], not starting with `-`, without `..`",
            crate::schema::text::escape_controls(rev)
        )
    })
}

/// A `git` command on the user's checkout: no hooks, no fsmonitor, no pager, no prompt.
pub(crate) fn git(checkout: &Path) -> Command {
    let mut c = Command::new("git");
    c.arg("-C")
        .arg(checkout)
        .args(["-c", "core.fsmonitor=false", "-c", "core.hooksPath=/dev/null", "--no-pager"])
        .env("GIT_TERMINAL_PROMPT", "0")
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .env_remove("GIT_INDEX_FILE");
    c
}

/// Runs `cmd` and returns its stdout (trimmed), or git's stderr as the error (`what: …`).
pub(crate) fn output(mut cmd: Command, what: &str) -> Result<String, String> {
    let out = cmd.output().map_err(|e| format!("{what}: cannot run git: {e}"))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        return Err(format!("{what}: {}", err.trim()));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// Resolves `rev` (checked with [`check_rev`]) to a commit of the checkout at `checkout`.
///
/// Errors: a bad revision, a folder that is not a git checkout, or a revision git does
/// not know (its message).
pub fn resolve_rev(checkout: &Path, rev: &str) -> Result<TreeCommit, String> {
    if let Some(p) = check_rev(rev) {
        return Err(p);
    }
    let mut c = git(checkout);
    c.args(["rev-parse", "--verify", "--quiet", "--end-of-options"]).arg(format!("{rev}^{{commit}}"));
    let commit = output(c, &format!("{}: git rev-parse {rev}", checkout.display())).and_then(|c| {
        if c.is_empty() {
            Err(format!("{}: no commit `{rev}`", checkout.display()))
        } else {
            Ok(c)
        }
    })?;
    let mut d = git(checkout);
    d.args(["describe", "--tags", "--always", "--abbrev=12", &commit]);
    let describe = output(d, "git describe")?;
    let mut l = git(checkout);
    l.args(["log", "-1", "--format=%s%n%cI", &commit]);
    let log = output(l, "git log")?;
    let (subject, date) = log.rsplit_once('\n').unwrap_or((&log, ""));
    Ok(TreeCommit { commit, describe, subject: subject.to_string(), date: date.to_string() })
}

/// A kernel to build from a commit of a mapped git tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TreeKernel {
    /// The tree's short name, as the suite gives it.
    pub tree: String,
    /// The revision, as the suite gives it.
    pub rev: String,
    /// What `rev` resolved to.
    pub resolved: TreeCommit,
    /// The mapped checkout; `None` when replaying without it (the kernel must then be in
    /// the cache, e.g. from a bundle made with `--with-images`).
    pub checkout: Option<PathBuf>,
    /// Config fragments merged over `defconfig` + `kvm_guest.config`, in order.
    pub fragments: Vec<PathBuf>,
    /// Patches applied with `patch -p1`, in order.
    pub patches: Vec<PathBuf>,
}

impl TreeKernel {
    /// The cache key: the commit id, the fragments' and patches' bytes, the compiler's
    /// version (not the checkout's path: the same commit built anywhere is the same).
    ///
    /// Errors: a fragment or patch that can't be read.
    pub fn key(&self) -> Result<String, ImageError> {
        let mut m = format!("{TREE_FORMAT}\n{}\n", self.resolved.commit).into_bytes();
        m.extend(inputs_key_bytes(&self.fragments, &self.patches)?);
        Ok(sha256_hex(&m))
    }

    /// Short description for progress, results and reports:
    /// `kernel linux@v6.1.176 (0123456789ab) + fix.patch`.
    pub fn label(&self) -> String {
        let short: String = self.resolved.commit.chars().take(12).collect();
        let mut s = if self.resolved.describe.starts_with(&short) || self.resolved.describe == self.rev {
            format!("kernel {}@{} ({short})", self.tree, self.rev)
        } else {
            format!("kernel {}@{} ({}, {short})", self.tree, self.rev, self.resolved.describe)
        };
        if !self.patches.is_empty() {
            s.push_str(&format!(" + {}", file_names(&self.patches)));
        }
        s
    }

    /// vmrepro's state for this tree: `<cache>/trees/<name>-<hash of the checkout path>`.
    fn state_dir(&self, cache: &Cache, checkout: &Path) -> PathBuf {
        let canon = std::fs::canonicalize(checkout).unwrap_or_else(|_| checkout.to_path_buf());
        let h = sha256_hex(canon.as_os_str().as_encoded_bytes());
        cache.root().join("trees").join(format!("{}-{}", self.tree, &h[..16]))
    }

    /// Builds the kernel into `out` (an empty folder): exports the commit into vmrepro's
    /// copy of the tree, then builds as a source-package build does (`Kbuild::build`),
    /// in the object folder of this set of fragments. Holds the kernel build lock throughout (the copy and object folders
    /// are shared by every build of the tree).
    ///
    /// Errors: [`ImageError::Kernel`] when no checkout is mapped (replaying without the
    /// tree and without the built kernel) or git fails; as `Kbuild::build`.
    pub fn build(&self, cache: &Cache, out: &Path) -> Result<(), ImageError> {
        let Some(checkout) = self.checkout.as_deref() else {
            return Err(ImageError::Kernel(format!(
                "{}: tree `{}` is not mapped on this machine and the built kernel is not in the cache (a bundle made with `vmrepro bundle --with-images` carries it); give `--tree {}=PATH`",
                self.label(),
                self.tree,
                self.tree
            )));
        };
        let log = out.join("build.log");
        let _lock = build_lock(cache, &log)?;
        let state = self.state_dir(cache, checkout);
        // One build folder per set of fragments: the commit's files and, beside them,
        // the objects of the last build in it (kbuild in the tree, as a source
        // package's build runs: the same compiler command lines, so ccache serves both).
        let mut cfg = b"fragments\n".to_vec();
        cfg.extend(inputs_key_bytes(&self.fragments, &[])?);
        let name = format!("build-{}", &sha256_hex(&cfg)[..16]);
        let build = state.join(&name);
        std::fs::create_dir_all(&build).map_err(ImageError::io("creating", &build))?;
        let patched = state.join(format!("{name}.patched"));
        let t0 = std::time::Instant::now();
        self.export(checkout, &state.join(format!("{name}.index")), &patched, &build, cache)?;
        super::source::log_note(
            &log,
            &format!(
                "{} exported from {} into {} in {:.1}s",
                self.resolved.commit,
                checkout.display(),
                build.display(),
                t0.elapsed().as_secs_f64()
            ),
        );
        let inputs = out.join("inputs");
        let fragments = copy_inputs(&inputs, "fragment", &self.fragments)?;
        let patches = copy_inputs(&inputs, "patch", &self.patches)?;
        // What the patches will touch, for the next export to put back.
        let mut touched = String::new();
        for p in &patches {
            let text = std::fs::read(p).map_err(ImageError::io("reading", p))?;
            for path in patched_paths(&String::from_utf8_lossy(&text)) {
                touched.push_str(&path);
                touched.push('\n');
            }
        }
        std::fs::write(&patched, touched).map_err(ImageError::io("writing", &patched))?;
        let ccache = super::source::ccache_dir(cache);
        let writable: Vec<&Path> = [out, state.as_path()].into_iter().chain(ccache.as_deref()).collect();
        let origin = format!("{}@{}", self.tree, self.resolved.commit);
        let marker = InProgress::begin(&build, &log)?;
        let built = Kbuild {
            cache,
            src: &build,
            obj: None,
            writable: &writable,
            log: &log,
            label: self.label(),
            origin: &origin,
            local_version: local_version(&self.patches),
        }
        .build(&patches, &self.patches, &fragments, &self.fragments, out);
        // A build that failed on its own left make's consistent state; one that was
        // killed (interrupted) may have left files half written.
        if built.is_ok() || !cache.cancel_flag().is_cancelled() {
            marker.end();
        }
        built?;
        std::fs::write(out.join("commit"), format!("{}\n", self.resolved.commit))
            .map_err(ImageError::io("writing", out))?;
        std::fs::remove_dir_all(&inputs).map_err(ImageError::io("removing", &inputs))?;
        Ok(())
    }

    /// Makes the build folder `build` hold exactly the commit's files, its build
    /// outputs (files the commit does not track) left in place: the files the last
    /// build's patches touched (listed in `patched`) are removed, then `git read-tree
    /// --reset -u` with the folder's own index (`index`) writes every tracked file
    /// that differs from the commit (changed, patched or missing), and only those, so
    /// make rebuilds only what they touch. Without an index yet, `build` is emptied
    /// first (what it holds is unknown).
    fn export(
        &self,
        checkout: &Path,
        index: &Path,
        patched: &Path,
        build: &Path,
        cache: &Cache,
    ) -> Result<(), ImageError> {
        let mut g = git(checkout);
        g.args(["rev-parse", "--absolute-git-dir"]);
        let git_dir = output(g, &format!("{}: git rev-parse --absolute-git-dir", checkout.display()))
            .map_err(ImageError::Kernel)?;
        let with_tree = |args: &[&str]| {
            let mut c = Command::new("git");
            c.arg("--git-dir")
                .arg(&git_dir)
                .arg("--work-tree")
                .arg(build)
                .args(["-c", "core.fsmonitor=false", "-c", "core.hooksPath=/dev/null", "-c", "core.autocrlf=false"])
                .args(args)
                .env("GIT_INDEX_FILE", index)
                .env("GIT_TERMINAL_PROMPT", "0")
                .env_remove("GIT_DIR")
                .env_remove("GIT_WORK_TREE");
            c
        };
        // A git killed mid-export (a bisect interrupted while it built) leaves the
        // index's lock behind, and every later read-tree would exit 128. No git runs on
        // this index now (the caller holds the build lock), so the lock is stale; the
        // folder's state is unknown, so the index goes too and the folder is exported
        // whole.
        let mut lock = index.as_os_str().to_owned();
        lock.push(".lock");
        let lock = std::path::PathBuf::from(lock);
        if lock.symlink_metadata().is_ok() {
            std::fs::remove_file(&lock).map_err(ImageError::io("removing the stale", &lock))?;
            match std::fs::remove_file(index) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    return Err(ImageError::io("removing", index)(e));
                }
                _ => {}
            }
        }
        if index.exists() {
            if let Ok(list) = std::fs::read_to_string(patched) {
                let folder = crate::path_io::Folder::open(build).map_err(ImageError::File)?;
                for rel in list.lines().filter(|l| !l.is_empty()) {
                    // A path outside the folder or through a link is not ours to remove.
                    let _ = folder.remove(rel);
                }
            }
        } else {
            std::fs::remove_dir_all(build).map_err(ImageError::io("emptying", build))?;
            std::fs::create_dir_all(build).map_err(ImageError::io("creating", build))?;
        }
        let _ = std::fs::remove_file(patched);
        run_tool(
            &mut with_tree(&["read-tree", "--reset", "-u", &self.resolved.commit]),
            &format!("git read-tree {} (export into vmrepro's copy)", self.resolved.commit),
            None,
            cache.cancel_flag(),
        )?;
        Ok(())
    }
}

/// The files a patch touches, relative to the tree (`patch -p1`: the first component
/// of each `--- `/`+++ ` path dropped; `/dev/null` and paths with `..` left out).
fn patched_paths(patch: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for line in patch.lines() {
        let Some(rest) = line.strip_prefix("+++ ").or_else(|| line.strip_prefix("--- ")) else { continue };
        let path = rest.split('\t').next().unwrap_or_default().trim();
        let Some((_, rel)) = path.split_once('/') else { continue };
        if path == "/dev/null" || rel.is_empty() || rel.split('/').any(|c| c == ".." || c.is_empty()) {
            continue;
        }
        if !out.iter().any(|p| p == rel) {
            out.push(rel.to_string());
        }
    }
    out
}

/// The mark of a build in progress in an object folder shared between builds
/// (`.vmrepro-build-in-progress`): a build that is killed (an interruption kills make
/// and the compilers at once) can leave object files half written with a new time,
/// which the next make would take as up to date. The next build finds the mark and
/// first removes every file written since it was made, so make writes them again.
struct InProgress {
    /// The mark's path.
    path: PathBuf,
}

impl InProgress {
    /// The mark's file name in the object folder.
    const NAME: &'static str = ".vmrepro-build-in-progress";

    /// Removes what a killed build left (noted in `log`), then marks a new build.
    ///
    /// Errors: the folder can't be read or the mark written.
    fn begin(obj: &Path, log: &Path) -> Result<InProgress, ImageError> {
        let path = obj.join(Self::NAME);
        if let Ok(since) = std::fs::symlink_metadata(&path).and_then(|m| m.modified()) {
            let removed = remove_written_since(obj, since)?;
            super::source::log_note(
                log,
                &format!("the last build in {} was killed: {removed} file(s) it wrote are removed", obj.display()),
            );
        }
        std::fs::write(&path, b"").map_err(ImageError::io("writing", &path))?;
        Ok(InProgress { path })
    }

    /// The build ended (built, or failed by itself): the mark goes.
    fn end(self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Removes every regular file under `dir` (links not followed) modified at or after
/// `since`, the mark itself excepted; how many.
///
/// Errors: a folder can't be listed or a file removed.
fn remove_written_since(dir: &Path, since: std::time::SystemTime) -> Result<usize, ImageError> {
    let mut removed = 0;
    let entries = std::fs::read_dir(dir).map_err(ImageError::io("listing", dir))?;
    for e in entries {
        let e = e.map_err(ImageError::io("listing", dir))?;
        let (path, meta) = (e.path(), e.metadata().map_err(ImageError::io("reading", dir))?);
        if meta.is_dir() {
            removed += remove_written_since(&path, since)?;
        } else if meta.is_file() && e.file_name() != InProgress::NAME && meta.modified().is_ok_and(|m| m >= since) {
            std::fs::remove_file(&path).map_err(ImageError::io("removing", &path))?;
            removed += 1;
        }
    }
    Ok(removed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(dir: &Path, script: &str) {
        let st = Command::new("sh").arg("-ec").arg(script).current_dir(dir).status().unwrap();
        assert!(st.success(), "{script}");
    }

    /// A repository with two commits (`v1` tagged, then a second that changes `a`).
    fn repo() -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        sh(
            d.path(),
            "git init -q -b main . && git config user.email t@example.org && git config user.name t \
             && echo one > a && echo keep > b && git add a b && git commit -qm first && git tag v1 \
             && echo two > a && git rm -q b && echo new > c && git add a c && git commit -qm 'second change'",
        );
        d
    }

    #[test]
    fn a_revision_resolves_to_its_commit_describe_subject_and_date() {
        let r = repo();
        let c = resolve_rev(r.path(), "v1").unwrap();
        assert_eq!(c.commit.len(), 40);
        assert_eq!(c.describe, "v1");
        assert_eq!(c.subject, "first");
        assert!(c.date.starts_with("20"), "{}", c.date);
        let head = resolve_rev(r.path(), "main").unwrap();
        assert!(head.describe.starts_with("v1-1-g"), "{}", head.describe);
        assert_eq!(head.subject, "second change");
        assert_eq!(resolve_rev(r.path(), "main~1").unwrap().commit, c.commit);
    }

    #[test]
    fn revisions_that_are_options_ranges_reflogs_or_paths_are_refused_before_git_runs() {
        for bad in ["--output=/tmp/x", "-n", "v1..main", "main@{1}", "main:a", "", "a b", "x\ny", &"a".repeat(129)] {
            assert!(check_rev(bad).is_some(), "{bad:?} accepted");
            let r = repo();
            assert!(resolve_rev(r.path(), bad).is_err());
        }
        for good in ["v6.1.176", "linux-6.1.y", "0123abc~2", "HEAD^2", "origin/master", "v6.1-rc1+"] {
            assert_eq!(check_rev(good), None, "{good}");
        }
    }

    #[test]
    fn an_unknown_revision_is_gits_own_error_naming_the_checkout() {
        let r = repo();
        let e = resolve_rev(r.path(), "v9").unwrap_err();
        assert!(e.contains("no commit `v9`") || e.contains("v9"), "{e}");
        assert!(e.contains(&r.path().display().to_string()), "{e}");
    }

    #[test]
    fn an_unmapped_tree_says_how_to_map_it_and_a_pin_stands_in_for_it() {
        let mut t = Trees::default();
        let e = t.resolve("linux", "v1").unwrap_err();
        assert!(e.contains("--tree linux=PATH") && e.contains(TREES_ENV), "{e}");
        let pin = TreeCommit { commit: "a".repeat(40), describe: "v1".into(), subject: "s".into(), date: "d".into() };
        t.pin("linux", "v1", pin.clone());
        assert_eq!(t.resolve("linux", "v1").unwrap(), (pin, None));
        assert!(t.resolve("linux", "v2").is_err());
        let r = repo();
        t.map("linux", r.path().to_path_buf());
        let (c, checkout) = t.resolve("linux", "main").unwrap();
        assert_eq!(c.describe, "v1-1-g".to_string() + &c.commit[..12]);
        assert_eq!(checkout.as_deref(), Some(r.path()));
        // The pin wins over the checkout's idea of `v1`: the run's commit is rebuilt.
        let (c, checkout) = t.resolve("linux", "v1").unwrap();
        assert_eq!((c.commit, checkout.as_deref()), ("a".repeat(40), Some(r.path())));
    }

    #[test]
    fn mappings_parse_with_their_errors_worded() {
        assert_eq!(parse_mapping("linux=/src/linux").unwrap(), ("linux".into(), PathBuf::from("/src/linux")));
        assert!(parse_mapping("linux").unwrap_err().contains("NAME=PATH"));
        assert!(parse_mapping("Linux=/x").unwrap_err().contains("must match"));
        assert!(parse_mapping("linux=").unwrap_err().contains("empty"));
        assert!(parse_mapping("../x=/y").is_err());
    }

    #[test]
    fn the_export_holds_exactly_the_commits_files_and_leaves_the_users_checkout_alone() {
        let r = repo();
        let before = output(
            {
                let mut c = git(r.path());
                c.args(["status", "--porcelain=v1", "--ignored"]);
                c
            },
            "status",
        )
        .unwrap();
        let cache_dir = tempfile::tempdir().unwrap();
        let cache = Cache::new(cache_dir.path().to_path_buf());
        let mut trees = Trees::default();
        trees.map("t", r.path().to_path_buf());
        let state = cache_dir.path().join("state");
        let src = state.join("build");
        let (index, patched) = (state.join("build.index"), state.join("build.patched"));
        std::fs::create_dir_all(&src).unwrap();
        for (rev, a, has_b, has_c) in
            [("v1", "one\n", true, false), ("main", "two\n", false, true), ("v1", "one\n", true, false)]
        {
            let (resolved, checkout) = trees.resolve("t", rev).unwrap();
            let k = TreeKernel {
                tree: "t".into(),
                rev: rev.into(),
                resolved,
                checkout,
                fragments: vec![],
                patches: vec![],
            };
            // What the last build's patches touched is put back (a tracked file changed,
            // a new file removed); its outputs (untracked, not patched) stay.
            let first = !index.exists();
            if first {
                // The first export empties the folder: what it holds is unknown.
                std::fs::write(src.join("stray"), "x").unwrap();
            } else {
                std::fs::write(src.join("a"), "patched\n").unwrap();
                std::fs::write(src.join("new-from-patch"), "x").unwrap();
                std::fs::write(&patched, "a\nnew-from-patch\n../outside\n").unwrap();
            }
            k.export(r.path(), &index, &patched, &src, &cache).unwrap();
            assert!(!src.join("stray").exists());
            assert_eq!(std::fs::read_to_string(src.join("a")).unwrap(), a, "{rev}");
            assert_eq!(src.join("b").exists(), has_b, "{rev}");
            assert_eq!(src.join("c").exists(), has_c, "{rev}");
            assert!(!src.join("new-from-patch").exists(), "{rev}");
            if !first {
                assert!(src.join("a.o").exists(), "{rev}: a build output was removed");
            }
            assert!(!patched.exists());
            std::fs::write(src.join("a.o"), "object").unwrap();
        }
        let after = output(
            {
                let mut c = git(r.path());
                c.args(["status", "--porcelain=v1", "--ignored"]);
                c
            },
            "status",
        )
        .unwrap();
        assert_eq!(before, after);
        assert_eq!(std::fs::read_to_string(r.path().join("a")).unwrap(), "two\n");

        // A git killed mid-export (CI: a bisect interrupted during a build) left the
        // index's lock: the next export still works, exporting the folder whole.
        let lock = state.join("build.index.lock");
        std::fs::write(&lock, "").unwrap();
        std::fs::write(src.join("a"), "half-written\n").unwrap();
        let (resolved, checkout) = trees.resolve("t", "main").unwrap();
        let k =
            TreeKernel { tree: "t".into(), rev: "main".into(), resolved, checkout, fragments: vec![], patches: vec![] };
        k.export(r.path(), &index, &patched, &src, &cache).unwrap();
        assert!(!lock.exists());
        assert_eq!(std::fs::read_to_string(src.join("a")).unwrap(), "two\n");
        assert!(src.join("c").exists() && !src.join("b").exists());
    }

    #[test]
    fn the_files_a_patch_touches_are_its_paths_less_one_component() {
        let patch = "Subject: x\n\n--- a/net/sunrpc/xprt.c\n+++ b/net/sunrpc/xprt.c\n@@ -1 +1 @@\n-x\n+y\n\
                     --- /dev/null\n+++ b/fs/new.c\t2026-01-01\n--- a/../../etc/passwd\n+++ b/x//y\n";
        assert_eq!(patched_paths(patch), ["net/sunrpc/xprt.c", "fs/new.c"]);
    }

    #[test]
    fn a_killed_build_leaves_its_mark_and_the_next_one_removes_what_it_wrote() {
        let obj = tempfile::tempdir().unwrap();
        let log = obj.path().join("build.log");
        std::fs::create_dir_all(obj.path().join("fs/nfs")).unwrap();
        std::fs::write(obj.path().join("fs/nfs/old.o"), "built before").unwrap();
        // File times are taken from a coarse clock (a few ms): the mark must be later.
        std::thread::sleep(std::time::Duration::from_millis(20));
        // A finished build removes its mark, and the next one removes nothing.
        InProgress::begin(obj.path(), &log).unwrap().end();
        assert!(!obj.path().join(InProgress::NAME).exists());
        let killed = InProgress::begin(obj.path(), &log).unwrap();
        std::mem::forget(killed);
        std::thread::sleep(std::time::Duration::from_millis(20));
        std::fs::write(obj.path().join("fs/nfs/half.o"), "half writ").unwrap();
        let next = InProgress::begin(obj.path(), &log).unwrap();
        assert!(!obj.path().join("fs/nfs/half.o").exists(), "a file the killed build wrote is kept");
        assert!(obj.path().join("fs/nfs/old.o").exists(), "a file from before it is removed");
        assert!(std::fs::read_to_string(&log).unwrap().contains("1 file(s) it wrote are removed"));
        next.end();
    }

    #[test]
    fn the_key_follows_the_commit_not_the_checkout_and_the_label_names_both_rev_and_commit() {
        let r = repo();
        let (resolved, checkout) = {
            let mut t = Trees::default();
            t.map("t", r.path().to_path_buf());
            t.resolve("t", "main").unwrap()
        };
        let k =
            TreeKernel { tree: "t".into(), rev: "main".into(), resolved, checkout, fragments: vec![], patches: vec![] };
        let moved = TreeKernel { checkout: Some("/elsewhere".into()), ..k.clone() };
        assert_eq!(k.key().unwrap(), moved.key().unwrap());
        let other = TreeKernel { resolved: TreeCommit { commit: "b".repeat(40), ..k.resolved.clone() }, ..k.clone() };
        assert_ne!(k.key().unwrap(), other.key().unwrap());
        let l = k.label();
        assert!(l.starts_with("kernel t@main (v1-1-g"), "{l}");
        assert!(l.contains(&k.resolved.commit[..12]), "{l}");
    }
}
