//! What each VM was given besides its kernel (profile, packages, sysctl, files), as
//! planned and as the guest printed it back.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;

use super::results::{FileFact, SysctlFact, VmFacts};
use crate::plan::{names, FilePlan, ProfilePlan};
use crate::run::record::RunDirError;
use crate::run::record::RunRecord;

/// What `analyse` needs of a VM in `plan.json`.
#[derive(Debug, Clone, Deserialize)]
pub struct PlanVmView {
    /// Name.
    pub name: String,
    /// Profile.
    #[serde(default)]
    pub profile: Option<ProfilePlan>,
    /// Extra packages.
    #[serde(default)]
    pub packages: Vec<String>,
    /// `sysctl:` values.
    #[serde(default)]
    pub sysctl: BTreeMap<String, String>,
    /// Files copied in.
    #[serde(default)]
    pub files: Vec<FilePlan>,
}

/// The facts of VM `v`: planned, and read back from its `sysctl` and `copy-file-*`
/// steps' outputs.
pub(super) fn vm_facts(v: &PlanVmView, rec: &RunRecord, dir: &Path) -> Result<VmFacts, RunDirError> {
    let mut problems = Vec::new();
    let vr = rec.vm(&v.name);
    let step_out = |name: &str| -> Result<Option<String>, RunDirError> {
        match vr.and_then(|r| r.step(name)) {
            Some(s) if s.status == crate::run::StepStatus::Passed => Ok(Some(s.stdout_text(dir)?)),
            _ => Ok(None),
        }
    };
    let mut sysctl = BTreeMap::new();
    if !v.sysctl.is_empty() {
        let printed: BTreeMap<String, String> = step_out(names::SYSCTL)?
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.split_once(" = ").map(|(k, v)| (k.trim().to_string(), v.trim().to_string())))
            .collect();
        let words = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
        for (k, set) in &v.sysctl {
            let in_force = printed.get(k).cloned();
            match &in_force {
                None => problems.push(format!("sysctl {k}: not printed back (did the sysctl step run?)")),
                Some(now) if words(now) != words(set) => {
                    problems.push(format!("sysctl {k} is {now:?} in the guest; the suite set {set:?}"))
                }
                Some(_) => {}
            }
            sysctl.insert(k.clone(), SysctlFact { set: set.clone(), in_force });
        }
    }
    let mut files = Vec::new();
    for (n, f) in v.files.iter().enumerate() {
        let guest_sha256 =
            step_out(&names::copy_file(n + 1))?.and_then(|o| o.split_whitespace().next().map(str::to_string));
        match &guest_sha256 {
            None => problems.push(format!("{}: not copied", f.dest)),
            Some(g) if g != &f.sha256 => {
                problems.push(format!("{}: the guest's copy has SHA-256 {g}, the file {}", f.dest, f.sha256))
            }
            Some(_) => {}
        }
        files.push(FileFact {
            dest: f.dest.clone(),
            bytes: f.bytes,
            mode: format!("{:04o}", f.mode),
            sha256: f.sha256.clone(),
            guest_sha256,
        });
    }
    Ok(VmFacts {
        vm: v.name.clone(),
        profile: v.profile.clone(),
        packages: v.packages.clone(),
        sysctl,
        files,
        problems,
    })
}
