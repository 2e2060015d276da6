//! The `nfs_read:` block of a suite (user-facing YAML).

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::schema::SnapshotVerdicts;

/// The report's scenario: one NFS server VM exports a directory holding a file made
/// with `dd`; each client VM mounts it and times `cat FILE > /dev/null`.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NfsReadSpec {
    /// Name of the server VM (must have an NFS server profile).
    pub server: String,
    /// Exported directory on the server, e.g. `/home`.
    pub export: String,
    /// The file the setup step creates inside the export, with `dd if=/dev/zero`.
    pub file: NfsFileSpec,
    /// Client VM names, one per kernel under test.
    pub clients: Vec<String>,
    /// The client every other client is compared with (default: the first).
    #[serde(default)]
    pub baseline: Option<String>,
    /// Mount point on the clients (default `/mnt/home`).
    #[serde(default)]
    pub mount_point: Option<String>,
    /// `mount -o` options (default `defaults`, as the report's fstab).
    #[serde(default)]
    pub mount_options: Option<String>,
    /// Per-client `mount -o` options overriding `mount_options`, e.g.
    /// `{client-udp: "vers=3,proto=udp,rsize=8192,wsize=8192"}`.
    #[serde(default)]
    pub client_mount_options: BTreeMap<String, String>,
    /// How many times each client measures the read (default 1); every repeat is a
    /// fresh mount with dropped caches.
    #[serde(default)]
    pub repeat: Option<u32>,
    /// Unmeasured warm-up reads per client before the measured ones (default 0), run
    /// the same way (fresh mount, dropped caches); their output is kept but left out of
    /// the statistics.
    #[serde(default)]
    pub warmup: Option<u32>,
    /// Measure all clients at the same time instead of one after the other.
    #[serde(default)]
    pub concurrent: Option<bool>,
    /// How much of each client's verdict against the baseline goes into the suite's
    /// snapshot (default `ratio_class`). `direction` keeps only same/slower/faster, for
    /// suites whose ratio is known to straddle a class boundary from run to run; `none`
    /// keeps no verdict, where the clients differ by less than the noise.
    #[serde(default)]
    pub snapshot_verdicts: Option<SnapshotVerdicts>,
    /// Per-client overrides of `snapshot_verdicts`, e.g. `{tcp-control: none}` for a
    /// control client whose ratio to the baseline is not the point of the suite and not
    /// steady from run to run. Keys are clients other than the baseline.
    #[serde(default)]
    pub client_snapshot_verdicts: BTreeMap<String, SnapshotVerdicts>,
    /// Metrics or counters every client's snapshot keeps with their value in every
    /// read (one value per read), for what the suite makes deterministic: e.g.
    /// `[wire.rpc.retransmissions, wire.ip.lost_fragment_replies]` under seeded loss
    /// with read-ahead off (one READ in flight). Wire counters need `capture:` on the
    /// clients.
    #[serde(default)]
    pub snapshot_values: Vec<String>,
    /// Extra per-client settings, e.g. `tc` commands run before measuring.
    #[serde(default)]
    pub client_setup: BTreeMap<String, String>,
    /// Read-ahead of every client's mount, KiB, written to
    /// `/sys/class/bdi/<mount's device>/read_ahead_kb` after each mount (default: the
    /// kernel's, 128 KiB on Linux 6.1). `0` turns read-ahead off: `cat` then
    /// reads one page (4 KiB) per READ call with a single READ in flight, whatever
    /// `rsize` says. The value in force is recorded with every read either way.
    #[serde(default)]
    pub read_ahead_kb: Option<u32>,
    /// Per-client read-ahead, KiB, overriding `read_ahead_kb` (what a
    /// `nfs_read.read_ahead_kb` variant axis sets).
    #[serde(default)]
    pub client_read_ahead_kb: BTreeMap<String, u32>,
}

/// The measured file: `dd if=/dev/zero of=<export>/<name> bs=<block_size> count=<count>`.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NfsFileSpec {
    /// Path relative to the export, e.g. `user/100000000.bytes`.
    pub name: String,
    /// `dd bs=` in bytes.
    pub block_size: u64,
    /// `dd count=`.
    pub count: u64,
}
