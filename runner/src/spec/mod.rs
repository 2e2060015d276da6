//! Suite specification: the raw, user-facing YAML types.
//!
//! This module owns the first stage of the pipeline (**spec** → validate → plan → …).
//! Every struct rejects unknown keys (`deny_unknown_fields`), so a misspelt key is an
//! error with its line and column, never silently ignored. Cross-field rules (unique
//! names, addresses inside the subnet, references between VMs) live in
//! [`crate::validate`]; loading, size/encoding checks and error rendering live in
//! [`load`].

pub mod load;
pub mod locate;

use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::time::Duration;

use ipnet::Ipv4Net;
use serde::{Deserialize, Serialize};

pub use load::{load_suite, SpecError, SuiteFile};

/// A whole suite file (`suites/*.yaml`).
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SuiteSpec {
    /// Suite name; used in result paths and snapshot names. `[a-z0-9-]+`.
    pub name: String,
    /// Free text shown in reports.
    #[serde(default)]
    pub description: Option<String>,
    /// The one virtual bridge all VMs of this suite share.
    pub network: NetworkSpec,
    /// Defaults applied to every VM unless the VM overrides them.
    #[serde(default)]
    pub defaults: VmDefaults,
    /// The guests. At least one.
    pub vms: Vec<VmSpec>,
    /// Optional built-in scenario: the NFS file-read measurement of the report.
    #[serde(default)]
    pub nfs_read: Option<NfsReadSpec>,
}

/// The suite's private bridge.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct NetworkSpec {
    /// IPv4 subnet of the bridge, e.g. `10.77.0.0/24`. It only exists inside the run's
    /// private network namespace.
    pub subnet: Ipv4Net,
    /// MTU of the bridge, taps and guest NICs, in bytes (default 1500).
    #[serde(default)]
    pub mtu: Option<u32>,
}

/// Per-VM settings that may be given once for the whole suite.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct VmDefaults {
    /// Guest memory in MiB (default 512).
    #[serde(default)]
    pub memory: Option<u64>,
    /// Virtual CPUs (default 1).
    #[serde(default)]
    pub cpus: Option<u32>,
    /// `auto` (default), `kvm` or `tcg`.
    #[serde(default)]
    pub accel: Option<Accel>,
    /// How long the guest may take from QEMU start until its guest agent answers
    /// (default 180s). Humantime syntax: `90s`, `3m`.
    #[serde(default, with = "humantime_serde")]
    pub boot_timeout: Option<Duration>,
    /// Default limit for each step (default 300s).
    #[serde(default, with = "humantime_serde")]
    pub step_timeout: Option<Duration>,
    /// Root filesystem recipe name under `images/rootfs/` (default `bookworm-nfs`).
    #[serde(default)]
    pub rootfs: Option<String>,
}

/// Hardware acceleration for QEMU.
#[derive(Debug, Clone, Copy, Deserialize, Serialize, PartialEq, Eq, Hash)]
#[serde(rename_all = "lowercase")]
pub enum Accel {
    /// KVM where it really runs a guest (probed), TCG otherwise.
    Auto,
    /// KVM or fail.
    Kvm,
    /// Software emulation.
    Tcg,
}

/// One guest.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct VmSpec {
    /// VM name: `[a-z][a-z0-9-]*`, unique in the suite; also the guest's host name.
    pub name: String,
    /// The kernel to boot.
    pub kernel: KernelSpec,
    /// Static IPv4 address on the suite's bridge; must be inside `network.subnet`.
    pub address: Ipv4Addr,
    /// Guest memory in MiB.
    #[serde(default)]
    pub memory: Option<u64>,
    /// Virtual CPUs.
    #[serde(default)]
    pub cpus: Option<u32>,
    /// Acceleration override.
    #[serde(default)]
    pub accel: Option<Accel>,
    /// Boot timeout override.
    #[serde(default, with = "humantime_serde")]
    pub boot_timeout: Option<Duration>,
    /// Rootfs recipe override.
    #[serde(default)]
    pub rootfs: Option<String>,
    /// Extra kernel command line arguments.
    #[serde(default)]
    pub cmdline: Option<String>,
    /// A named guest profile under `images/profiles/<name>.sh`, run first once the
    /// guest agent answers (e.g. `nfs-server-2.4.19`).
    #[serde(default)]
    pub profile: Option<String>,
    /// Network conditions of this guest's NIC, applied inside the guest before any step.
    #[serde(default)]
    pub net: Option<VmNetSpec>,
    /// Commands to run in this guest, in order.
    #[serde(default)]
    pub steps: Vec<StepSpec>,
}

/// What of a verdict a suite's snapshot keeps (`nfs_read.snapshot_verdicts`).
#[derive(Debug, Clone, Copy, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum SnapshotVerdicts {
    /// `slower: median ratio in 2x–10x` (see `snapshot::verdict_words`).
    #[default]
    RatioClass,
    /// `slower`, `faster` or `same`.
    Direction,
    /// Nothing.
    None,
}

/// Network conditions of one guest, applied with `tc` and `ethtool` on its `eth0`.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct VmNetSpec {
    /// `netem` on the guest's egress (packets *leaving* this VM), as the root qdisc.
    #[serde(default)]
    pub egress: Option<NetemSpec>,
    /// `false` turns TSO, GSO and GRO off on `eth0` (ethtool) and sets the device's
    /// `gso_max_segs` to 1 (`ip link`; Linux >= 4.17 builds TCP super-packets even with
    /// GSO off). With them on, netem drops whole TCP super-packets but single UDP
    /// fragments, so "1 % loss" means different things for TCP and UDP. Default: the
    /// kernel's defaults (on).
    #[serde(default)]
    pub offloads: Option<bool>,
}

/// `tc qdisc … netem` parameters (see tc-netem(8)).
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct NetemSpec {
    /// Random loss, percent, e.g. `"1%"`.
    #[serde(default)]
    pub loss: Option<String>,
    /// Delay, e.g. `"5ms"`.
    #[serde(default)]
    pub delay: Option<String>,
    /// Jitter added to `delay`, e.g. `"1ms"`.
    #[serde(default)]
    pub jitter: Option<String>,
    /// Rate limit, e.g. `"100mbit"` (netem's `rate`).
    #[serde(default)]
    pub rate: Option<String>,
    /// Reordering, percent (needs `delay`).
    #[serde(default)]
    pub reorder: Option<String>,
    /// Duplication, percent.
    #[serde(default)]
    pub duplicate: Option<String>,
    /// Queue limit, packets (netem's default is 1000).
    #[serde(default)]
    pub limit: Option<u32>,
    /// Seed of netem's pseudo-random generator (`tc … netem … seed N`, Linux >= 6.6 and
    /// iproute2 >= 6.6; older kernels ignore it, which the runner detects and reports).
    /// With a seed, netem sees only IPv4 packets (ARP and IPv6 bypass it, so background
    /// traffic neither gets lost nor shifts the sequence), and it is reseeded before
    /// every sequential `nfs_read` read, so the n-th packet of each read meets the same
    /// drop decision (with `concurrent: true` a seed is refused).
    #[serde(default)]
    pub seed: Option<u64>,
    /// Apply only to packets addressed to these VMs (a `prio` qdisc with `u32` filters
    /// on the destination address; every IP fragment carries it). Default: all packets.
    #[serde(default)]
    pub to: Vec<String>,
}

/// Which kernel a VM boots. Exactly one of `debian`, `path` or `source` must be given.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct KernelSpec {
    /// A Debian kernel series pinned in `images/kernels.yaml`, e.g. `"5.10"`, `"6.1"`,
    /// `"6.12"`.
    #[serde(default)]
    pub debian: Option<String>,
    /// Debian kernel flavour (default `cloud-amd64`).
    #[serde(default)]
    pub flavour: Option<String>,
    /// A local `bzImage`/`vmlinuz`, relative to the suite file's folder.
    #[serde(default)]
    pub path: Option<PathBuf>,
    /// With `path`: the kernel's modules directory (`…/lib/modules/<release>`).
    #[serde(default)]
    pub modules: Option<PathBuf>,
    /// Build the kernel from a Debian source package.
    #[serde(default)]
    pub source: Option<SourceKernelSpec>,
}

/// A kernel built from source: `linux-source-<debian>` + `defconfig` +
/// `kvm_guest.config` + `fragments`, with `patches` applied. Everything the guest needs
/// must be built in (a source-built kernel gets no modules disk).
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SourceKernelSpec {
    /// Kernel series of a `linux-source-<series>` package pinned in
    /// `images/kernels.yaml` (`sources:`), e.g. `"6.1"`.
    pub debian: String,
    /// Config fragment files, relative to the suite file's folder.
    #[serde(default)]
    pub fragments: Vec<PathBuf>,
    /// Patch files (`patch -p1`), relative to the suite file's folder.
    #[serde(default)]
    pub patches: Vec<PathBuf>,
}

/// One command run in a guest through the guest agent.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct StepSpec {
    /// Step name, unique within its VM: `[a-z0-9][a-z0-9_-]*`.
    pub name: String,
    /// A shell command run in the guest with `/bin/sh -c` (never on the host).
    pub run: String,
    /// Steps or VMs this step waits for: `vm` (that VM's guest agent answers) or
    /// `vm/step` (that step finished with its expected exit status).
    #[serde(default)]
    pub after: Vec<String>,
    /// Limit for this step (default: the suite's `step_timeout`).
    #[serde(default, with = "humantime_serde")]
    pub timeout: Option<Duration>,
    /// Expected exit status (default 0). A different status fails the suite.
    #[serde(default)]
    pub expect_exit: Option<i32>,
    /// Put this step's stdout (trimmed) into the suite's snapshot; only for output
    /// that is stable from run to run (e.g. `uname -r`).
    #[serde(default)]
    pub snapshot: bool,
}

/// The report's scenario: one NFS server VM exports a directory holding a file made
/// with `dd`; each client VM mounts it and times `cat FILE > /dev/null`.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
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
}

/// The measured file: `dd if=/dev/zero of=<export>/<name> bs=<block_size> count=<count>`.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct NfsFileSpec {
    /// Path relative to the export, e.g. `user/100000000.bytes`.
    pub name: String,
    /// `dd bs=` in bytes.
    pub block_size: u64,
    /// `dd count=`.
    pub count: u64,
}
