//! The `nfs_read` scenario's own facts in the plan (server, export, file, clients'
//! mounts), after [`crate::scenarios::nfs_read::expand`].

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The scenario's own facts, after expansion.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct NfsPlan {
    /// Server VM.
    pub server: String,
    /// Export path.
    pub export: String,
    /// Path of the file relative to the export (and to the mount point).
    pub file_name: String,
    /// Expected size, bytes.
    pub file_bytes: u64,
    /// Clients in order.
    pub clients: Vec<String>,
    /// Baseline client.
    pub baseline: String,
    /// Mount point.
    pub mount_point: String,
    /// Mount options (`defaults`: none given).
    pub mount_options: String,
    /// Per-client mount options (override `mount_options`).
    pub client_mount_options: BTreeMap<String, String>,
    /// Read-ahead set on each mount, KiB (`None`: the kernel's default).
    pub read_ahead_kb: Option<u32>,
    /// Per-client read-ahead, KiB, overriding `read_ahead_kb`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub client_read_ahead_kb: BTreeMap<String, u32>,
}

impl NfsPlan {
    /// The read-ahead set on `client`'s mount, KiB (`None`: the kernel's).
    pub fn read_ahead_of(&self, client: &str) -> Option<u32> {
        self.client_read_ahead_kb.get(client).copied().or(self.read_ahead_kb)
    }

    /// The `mount -o` options of `client`.
    pub fn mount_options_of(&self, client: &str) -> &str {
        self.client_mount_options.get(client).unwrap_or(&self.mount_options)
    }
}
