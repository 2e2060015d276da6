//! What a bisect asks of the user's git checkout, read-only: whether one commit is an
//! ancestor of another, the commits left to test between the good ones and the bad
//! one (git's own midpoint order, `git rev-list --bisect-all`), a commit's first
//! parent. Every command goes through `infra::images::tree`'s `git` helper (no hooks,
//! no fsmonitor, no pager, no prompt) and is given full commit ids only, which vmrepro
//! resolved itself: nothing here moves `HEAD`, a ref, the index or the working tree
//! (`git bisect` itself would).

use std::path::Path;

use crate::infra::images::tree::{git, output, resolve_rev, TreeCommit};

/// Whether `id` is a full commit id (40 lowercase hex digits): the only revisions this
/// module passes to git.
fn is_commit_id(id: &str) -> bool {
    id.len() == 40 && id.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// Refuses anything but full commit ids (a programming error, not user input: the
/// ids come from [`resolve_rev`]).
fn ids<'a>(list: impl IntoIterator<Item = &'a str>) -> Result<Vec<&'a str>, String> {
    list.into_iter()
        .map(|id| if is_commit_id(id) { Ok(id) } else { Err(format!("`{id}` is not a full commit id")) })
        .collect()
}

/// Whether commit `ancestor` is `descendant` or one of its ancestors
/// (`git merge-base --is-ancestor`).
///
/// Errors: git fails otherwise than answering no (its stderr).
pub fn is_ancestor(checkout: &Path, ancestor: &str, descendant: &str) -> Result<bool, String> {
    let ids = ids([ancestor, descendant])?;
    let mut c = git(checkout);
    c.args(["merge-base", "--is-ancestor", ids[0], ids[1]]);
    let out = c.output().map_err(|e| format!("{}: cannot run git: {e}", checkout.display()))?;
    match out.status.code() {
        Some(0) => Ok(true),
        Some(1) => Ok(false),
        _ => Err(format!(
            "{}: git merge-base --is-ancestor: {}",
            checkout.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        )),
    }
}

/// The commits reachable from `bad` and from none of `goods`, best bisection point
/// first (`git rev-list --bisect-all`: ordered by how evenly each splits the rest).
/// `bad` itself is among them.
///
/// Errors: git's.
pub fn candidates(checkout: &Path, bad: &str, goods: &[String]) -> Result<Vec<String>, String> {
    let mut c = git(checkout);
    c.args(["rev-list", "--bisect-all"]).arg(ids([bad])?[0]).arg("--not");
    c.args(ids(goods.iter().map(String::as_str))?);
    let out = output(c, &format!("{}: git rev-list --bisect-all", checkout.display()))?;
    Ok(out
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|id| is_commit_id(id))
        .map(String::from)
        .collect())
}

/// The first parent of `commit`, described; `None` for a root commit.
///
/// Errors: git's.
pub fn first_parent(checkout: &Path, commit: &str) -> Result<Option<TreeCommit>, String> {
    let mut c = git(checkout);
    c.args(["rev-list", "--parents", "-n", "1"]).arg(ids([commit])?[0]);
    let out = output(c, &format!("{}: git rev-list --parents", checkout.display()))?;
    match out.split_whitespace().nth(1) {
        Some(parent) => resolve_rev(checkout, parent).map(Some),
        None => Ok(None),
    }
}

/// How many bisection steps are left, roughly, with `n` candidates (as `git bisect`
/// says it: the base-2 logarithm).
pub fn steps_left(n: usize) -> u32 {
    if n <= 1 {
        0
    } else {
        usize::BITS - (n - 1).leading_zeros()
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A linear history of `n` commits (`change 1` … `change n`, each rewriting `f`);
    /// returns the repository and the ids, oldest first.
    pub(crate) fn linear(n: usize) -> (tempfile::TempDir, Vec<String>) {
        let d = tempfile::tempdir().unwrap();
        let sh = |script: &str| {
            let st = std::process::Command::new("sh").arg("-ec").arg(script).current_dir(d.path()).status().unwrap();
            assert!(st.success(), "{script}");
        };
        sh("git init -q -b main . && git config user.email t@example.org && git config user.name t");
        let mut ids = Vec::new();
        for i in 1..=n {
            sh(&format!("echo {i} > f && git add f && git commit -qm 'change {i}'"));
            ids.push(resolve_rev(d.path(), "HEAD").unwrap().commit);
        }
        (d, ids)
    }

    #[test]
    fn candidates_are_the_range_with_the_midpoint_first() {
        let (r, ids) = linear(9);
        let c = candidates(r.path(), &ids[8], std::slice::from_ref(&ids[0])).unwrap();
        assert_eq!(c.len(), 8, "{c:?}");
        assert!(c.contains(&ids[8]) && !c.contains(&ids[0]));
        // 8 commits after the good one: the best split is the 4th or 5th.
        assert!(c[0] == ids[4] || c[0] == ids[5], "{} is not a midpoint", c[0]);
        let none = candidates(r.path(), &ids[1], std::slice::from_ref(&ids[0])).unwrap();
        assert_eq!(none, vec![ids[1].clone()]);
    }

    #[test]
    fn ancestry_parents_and_refusals() {
        let (r, ids) = linear(3);
        assert!(is_ancestor(r.path(), &ids[0], &ids[2]).unwrap());
        assert!(!is_ancestor(r.path(), &ids[2], &ids[0]).unwrap());
        assert_eq!(first_parent(r.path(), &ids[2]).unwrap().unwrap().commit, ids[1]);
        assert_eq!(first_parent(r.path(), &ids[0]).unwrap(), None);
        assert!(is_ancestor(r.path(), "HEAD", &ids[0]).unwrap_err().contains("not a full commit id"));
        assert!(candidates(r.path(), "--all", &[]).is_err());
    }

    #[test]
    fn steps_left_is_gits_estimate() {
        assert_eq!([0, 1, 2, 3, 4, 5, 8, 9].map(steps_left), [0, 0, 1, 2, 2, 3, 3, 4]);
    }
}
