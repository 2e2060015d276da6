//! Every step name the runner generates, in one place. The planner names its steps with
//! these functions, the analysis finds them through the plan (never by rebuilding a
//! name), and validation reserves all of them ([`reserved`]): a user step can never
//! share a name with a generated one.

/// The step that applies a VM's `net` conditions before any other.
pub const NET_CONDITIONS: &str = "net-conditions";
/// Prefix of a VM's profile step: `profile-<profile>`.
pub const PROFILE_PREFIX: &str = "profile-";
/// `nfs_read`: the server step that makes the file with `dd`.
pub const NFS_FILE: &str = "nfs-file";
/// `nfs_read`: the server step that records the export; clients wait for it.
pub const NFS_SERVER_READY: &str = "nfs-server-ready";
/// `nfs_read`: a client's `client_setup` command.
pub const NFS_CLIENT_SETUP: &str = "nfs-client-setup";
/// The name of the measurement the `nfs_read` preset makes (its steps: `nfs-read-<N>`).
pub const NFS_READ_MEASUREMENT: &str = "nfs-read";
/// Prefix of the remote netem step before an iteration when the netem is seeded (it
/// reseeds): `net-reseed-<measured vm>-<iteration step>`.
pub const NET_RESEED_PREFIX: &str = "net-reseed-";
/// Prefix of the remote netem step before an iteration when the netem is not seeded:
/// `net-observe-<measured vm>-<iteration step>`.
pub const NET_OBSERVE_PREFIX: &str = "net-observe-";
/// Prefix of the remote netem step after a measurement's last iteration:
/// `net-stats-<measurement>`.
pub const NET_STATS_PREFIX: &str = "net-stats-";

/// Prefix of a measurement's `each:` action steps:
/// `action-<before|after>-<n>-[<measured vm>-]<iteration step>`.
pub const ACTION_PREFIX: &str = "action-";

/// The step that applies a VM's `sysctl:` and prints the values in force.
pub const SYSCTL: &str = "sysctl";
/// Prefix of the steps that copy a VM's `files:` into it: `copy-file-<n>` (1-based).
pub const COPY_FILE_PREFIX: &str = "copy-file-";

/// The exact names reserved whatever the suite holds.
pub const FIXED: &[&str] = &[NET_CONDITIONS, SYSCTL, NFS_FILE, NFS_SERVER_READY, NFS_CLIENT_SETUP];
/// The prefixes reserved whatever the suite holds.
pub const PREFIXES: &[&str] =
    &[PROFILE_PREFIX, NET_RESEED_PREFIX, NET_OBSERVE_PREFIX, NET_STATS_PREFIX, COPY_FILE_PREFIX, ACTION_PREFIX];

/// The step that copies the `n`-th (1-based) of a VM's `files:`.
pub fn copy_file(n: usize) -> String {
    format!("{COPY_FILE_PREFIX}{n}")
}

/// A VM's profile step, e.g. `profile-nfs-server-2.4.19`.
pub fn profile(profile: &str) -> String {
    format!("{PROFILE_PREFIX}{profile}")
}

/// An iteration step of `measurement`: `<measurement>-<n>` (measured, 1-based) or
/// `<measurement>-warmup-<n>`.
pub fn iteration(measurement: &str, warmup: bool, n: u32) -> String {
    if warmup {
        format!("{measurement}-warmup-{n}")
    } else {
        format!("{measurement}-{n}")
    }
}

/// The A/A copy of the baseline's measured iteration `n` (`calibrate: true`):
/// `<measurement>-aa-<n>`, a step of its own on the baseline VM.
pub fn iteration_copy(measurement: &str, n: u32) -> String {
    format!("{measurement}-aa-{n}")
}

/// The remote netem step before iteration step `step` of VM `vm`.
pub fn netem_before(seeded: bool, vm: &str, step: &str) -> String {
    let prefix = if seeded { NET_RESEED_PREFIX } else { NET_OBSERVE_PREFIX };
    format!("{prefix}{vm}-{step}")
}

/// The step of the `n`-th (1-based) `each.before` (`before`) or `each.after` action
/// around iteration step `step` of measured VM `vm` (`None`: around the round `step`
/// of a concurrent measurement).
pub fn action(before: bool, n: usize, vm: Option<&str>, step: &str) -> String {
    let when = if before { "before" } else { "after" };
    match vm {
        Some(vm) => format!("{ACTION_PREFIX}{when}-{n}-{vm}-{step}"),
        None => format!("{ACTION_PREFIX}{when}-{n}-{step}"),
    }
}

/// The remote netem step after `measurement`'s last iteration.
pub fn netem_final(measurement: &str) -> String {
    format!("{NET_STATS_PREFIX}{measurement}")
}

/// Why a user step may not be called `name` (`None`: it may), given the suite's
/// measurement names (the `nfs_read` preset's is always reserved).
pub fn reserved<'a>(name: &str, measurements: impl IntoIterator<Item = &'a str>) -> Option<String> {
    if FIXED.contains(&name) {
        return Some(format!("{name:?} is the name of a step the runner adds"));
    }
    if let Some(p) = PREFIXES.iter().find(|p| name.starts_with(*p)) {
        return Some(format!("names starting with {p:?} are reserved for steps the runner adds"));
    }
    for m in measurements.into_iter().chain([NFS_READ_MEASUREMENT]) {
        if let Some(rest) = name.strip_prefix(m).and_then(|r| r.strip_prefix('-')) {
            let n = rest.strip_prefix("warmup-").or_else(|| rest.strip_prefix("aa-")).unwrap_or(rest);
            if !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) {
                return Some(format!("{name:?} is the name of an iteration step of measurement {m:?}"));
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_generated_name_is_reserved() {
        let ms = ["write"];
        for name in [
            NET_CONDITIONS.to_string(),
            SYSCTL.into(),
            copy_file(2),
            NFS_FILE.into(),
            NFS_SERVER_READY.into(),
            NFS_CLIENT_SETUP.into(),
            profile("nfs-server-2.4.19"),
            iteration("write", false, 3),
            iteration("write", true, 1),
            iteration_copy("write", 2),
            iteration(NFS_READ_MEASUREMENT, false, 12),
            netem_before(true, "c", "write-1"),
            netem_before(false, "c", "write-1"),
            netem_final("write"),
            action(true, 1, Some("c"), "write-1"),
            action(false, 2, None, "write-warmup-1"),
        ] {
            assert!(reserved(&name, ms).is_some(), "{name} is not reserved");
        }
        for free in ["write", "write-x", "write-1a", "nfs-read", "nfs-mount", "profile", "net"] {
            assert_eq!(reserved(free, ms), None, "{free}");
        }
    }
}
