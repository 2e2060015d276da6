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
//! `git read-tree --reset -u` into vmrepro's own copy under
//! `<cache>/trees/<name>-<checkout hash>/src`, with vmrepro's own index file: between
//! two commits only the files that differ are rewritten, so the object folder
//! (`obj-<config hash>`, `make O=…`, one per set of fragments) rebuilds only what they
//! touch, and ccache is shared with the source-package builds ([`super::source`]). Every
//! command that runs the tree's code (patch, make) runs in the sandbox
//! ([`super::sandbox`]); git itself runs on the host on the user's own repository, with
//! hooks and fsmonitor turned off.
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
fn git(checkout: &Path) -> Command {
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

/// Runs `cmd` and returns its stdout, or git's stderr as the error.
fn output(mut cmd: Command, what: &str) -> Result<String, String> {
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
        let src = state.join("src");
        std::fs::create_dir_all(&src).map_err(ImageError::io("creating", &src))?;
        let t0 = std::time::Instant::now();
        self.export(checkout, &state, &src, cache)?;
        super::source::log_note(
            &log,
            &format!(
                "{} exported from {} into {} in {:.1}s",
                self.resolved.commit,
                checkout.display(),
                src.display(),
                t0.elapsed().as_secs_f64()
            ),
        );
        let inputs = out.join("inputs");
        let fragments = copy_inputs(&inputs, "fragment", &self.fragments)?;
        let patches = copy_inputs(&inputs, "patch", &self.patches)?;
        let mut cfg = b"fragments\n".to_vec();
        cfg.extend(inputs_key_bytes(&self.fragments, &[])?);
        let obj = state.join(format!("obj-{}", &sha256_hex(&cfg)[..16]));
        std::fs::create_dir_all(&obj).map_err(ImageError::io("creating", &obj))?;
        let ccache = super::source::ccache_dir(cache);
        let writable: Vec<&Path> = [out, state.as_path()].into_iter().chain(ccache.as_deref()).collect();
        let origin = format!("{}@{}", self.tree, self.resolved.commit);
        Kbuild {
            cache,
            src: &src,
            obj: Some(&obj),
            writable: &writable,
            log: &log,
            label: self.label(),
            origin: &origin,
            local_version: local_version(&self.patches),
        }
        .build(&patches, &self.patches, &fragments, &self.fragments, out)?;
        std::fs::write(out.join("commit"), format!("{}\n", self.resolved.commit))
            .map_err(ImageError::io("writing", out))?;
        std::fs::remove_dir_all(&inputs).map_err(ImageError::io("removing", &inputs))?;
        Ok(())
    }

    /// Makes `src` hold exactly the commit's files: `git clean` and `git read-tree
    /// --reset -u` with vmrepro's own index (`state/index`) and `src` as the work tree,
    /// so only files that differ from the last export are rewritten (and a patch's
    /// leftovers are removed); without an index yet, `src` is emptied first.
    fn export(&self, checkout: &Path, state: &Path, src: &Path, cache: &Cache) -> Result<(), ImageError> {
        let mut g = git(checkout);
        g.args(["rev-parse", "--absolute-git-dir"]);
        let git_dir = output(g, &format!("{}: git rev-parse --absolute-git-dir", checkout.display()))
            .map_err(ImageError::Kernel)?;
        let index = state.join("index");
        let with_tree = |args: &[&str]| {
            let mut c = Command::new("git");
            c.arg("--git-dir")
                .arg(&git_dir)
                .arg("--work-tree")
                .arg(src)
                .args(["-c", "core.fsmonitor=false", "-c", "core.hooksPath=/dev/null", "-c", "core.autocrlf=false"])
                .args(args)
                .env("GIT_INDEX_FILE", &index)
                .env("GIT_TERMINAL_PROMPT", "0")
                .env_remove("GIT_DIR")
                .env_remove("GIT_WORK_TREE");
            c
        };
        if index.exists() {
            run_tool(
                &mut with_tree(&["clean", "-fdxq"]),
                "git clean (vmrepro's copy of the tree)",
                None,
                cache.cancel_flag(),
            )?;
        } else {
            // No index: what `src` holds (an interrupted first export) is unknown.
            std::fs::remove_dir_all(src).map_err(ImageError::io("emptying", src))?;
            std::fs::create_dir_all(src).map_err(ImageError::io("creating", src))?;
        }
        run_tool(
            &mut with_tree(&["read-tree", "--reset", "-u", &self.resolved.commit]),
            &format!("git read-tree {} (export into vmrepro's copy)", self.resolved.commit),
            None,
            cache.cancel_flag(),
        )?;
        Ok(())
    }
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
        let src = state.join("src");
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
            // A leftover (as a patch creating a file would leave) is removed.
            std::fs::write(src.join("leftover"), "x").unwrap();
            k.export(r.path(), &state, &src, &cache).unwrap();
            assert_eq!(std::fs::read_to_string(src.join("a")).unwrap(), a, "{rev}");
            assert_eq!(src.join("b").exists(), has_b, "{rev}");
            assert_eq!(src.join("c").exists(), has_c, "{rev}");
            assert!(!src.join("leftover").exists(), "{rev}");
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
