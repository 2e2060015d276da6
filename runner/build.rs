//! Records the git commit vmrepro is built from, for the environment of a run
//! (`environment.json`, the report): `VMREPRO_GIT_COMMIT` at build time if set (the Nix
//! flake sets it from the flake's revision), else `git rev-parse HEAD` in the source
//! tree (with `-dirty` when tracked files differ from it), else `unknown` (a tarball).
//!
//! Rebuilds only when HEAD or the branch it points to moves, not on every edit: the
//! `-dirty` mark is the state at the last such rebuild. Cargo shares a build script's
//! output between checkouts of the same package in one `CARGO_TARGET_DIR` (git
//! worktrees sharing a target folder), so there it may name another checkout's commit;
//! `environment.json` also records the project's commit at run time
//! (`suite.project_commit`), which reports prefer.

use std::path::Path;
use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).current_dir(env!("CARGO_MANIFEST_DIR")).output().ok()?;
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn main() {
    println!("cargo:rerun-if-env-changed=VMREPRO_GIT_COMMIT");
    let commit = match std::env::var("VMREPRO_GIT_COMMIT") {
        Ok(c) if !c.is_empty() => c,
        _ => match git(&["rev-parse", "HEAD"]) {
            Some(head) => {
                if let Some(dir) = git(&["rev-parse", "--absolute-git-dir"]) {
                    println!("cargo:rerun-if-changed={dir}/HEAD");
                    if let Some(common) = git(&["rev-parse", "--git-common-dir"]) {
                        let common = Path::new(env!("CARGO_MANIFEST_DIR")).join(common);
                        // Only paths that exist: cargo reruns a build script whose
                        // watched path is missing on every build (and so rebuilt vmrepro
                        // each time in a repository without `packed-refs`). A branch
                        // only in `packed-refs` is watched through its folder, where a
                        // commit creates its loose ref.
                        let packed = common.join("packed-refs");
                        if packed.exists() {
                            println!("cargo:rerun-if-changed={}", packed.display());
                        }
                        if let Some(r) = git(&["symbolic-ref", "-q", "HEAD"]) {
                            let loose = common.join(r);
                            match loose.parent() {
                                Some(folder) if !loose.exists() && folder.exists() => {
                                    println!("cargo:rerun-if-changed={}", folder.display())
                                }
                                _ => println!("cargo:rerun-if-changed={}", loose.display()),
                            }
                        }
                    }
                }
                let dirty = git(&["status", "--porcelain", "--untracked-files=no"]).is_some_and(|s| !s.is_empty());
                if dirty {
                    format!("{head}-dirty")
                } else {
                    head
                }
            }
            None => "unknown".to_string(),
        },
    };
    println!("cargo:rustc-env=VMREPRO_GIT_COMMIT={commit}");
}
