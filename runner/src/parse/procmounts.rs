//! Reading an NFS mount's options from its `/proc/mounts` line (the `mount` record of
//! the `nfs_read` scenario) and its read-ahead from `/sys/class/bdi/<dev>/read_ahead_kb`.
//!
//! A `/proc/mounts` line is `DEVICE MOUNTPOINT TYPE OPTIONS DUMP PASS`; for NFS the
//! options carry what the mount negotiated: `vers=3`, `proto=udp`, `rsize=8192`, …

use serde::{Deserialize, Serialize};

/// What a client's mount negotiated, and its read-ahead.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MountInfo {
    /// `vers=` (e.g. `3`, `4.2`).
    pub nfs_version: Option<String>,
    /// `proto=` (`tcp`, `udp`).
    pub transport: Option<String>,
    /// `rsize=`, bytes.
    pub rsize: Option<u64>,
    /// `wsize=`, bytes.
    pub wsize: Option<u64>,
    /// Read-ahead of the mount in force during the read, KiB (`read_ahead_kb`).
    pub read_ahead_kb: Option<u64>,
    /// The whole options field.
    pub options: String,
}

/// Parses the options field of a `/proc/mounts` line; `read_ahead` is the content of
/// the mount's `read_ahead_kb` file (`None` or unparsable: not recorded).
pub fn mount_info(line: &str, read_ahead: Option<&str>) -> MountInfo {
    let options = line.split_whitespace().nth(3).unwrap_or_default().to_string();
    let get = |k: &str| options.split(',').find_map(|o| o.strip_prefix(k).map(str::to_string));
    MountInfo {
        nfs_version: get("vers="),
        transport: get("proto="),
        rsize: get("rsize=").and_then(|v| v.parse().ok()),
        wsize: get("wsize=").and_then(|v| v.parse().ok()),
        read_ahead_kb: read_ahead.and_then(|v| v.trim().parse().ok()),
        options,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_mount_options_and_read_ahead() {
        let m = mount_info("10.0.0.1:/home /mnt/home nfs rw,vers=3,rsize=8192,wsize=8192,proto=udp 0 0", Some("0\n"));
        assert_eq!(m.read_ahead_kb, Some(0));
        assert_eq!(m.nfs_version.as_deref(), Some("3"));
        assert_eq!(m.transport.as_deref(), Some("udp"));
        assert_eq!(m.rsize, Some(8192));
        assert_eq!(mount_info("", None), MountInfo::default());
    }
}
