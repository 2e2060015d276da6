//! Suite specification: the raw, user-facing YAML types.
//!
//! This module owns the first stage of the pipeline (**schema** → validate → plan → …).
//! Every struct rejects unknown keys (`deny_unknown_fields`), so a misspelt key is an
//! error with its line and column, never silently ignored. Cross-field rules (unique
//! names, addresses inside the subnet, references between VMs) live in
//! [`crate::suite::validate`]; loading, size/encoding checks and error rendering live in
//! [`load`].

pub mod capture;
pub mod json;
pub mod load;
pub mod locate;
pub mod measure;
pub mod nfs_read;
pub mod package;
pub mod profile;
pub mod repeat;
pub mod scan;
pub mod text;

use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::time::Duration;

use ipnet::Ipv4Net;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The tests' front door (the runner loads through [`crate::suite::load`]).
#[cfg_attr(vmrepro_dead_code, allow(unused_imports))]
pub use load::load_suite;
pub use load::{load_suite_with, LoadOptions, SpecError, SuiteFile};
pub use measure::MeasureSpec;
pub use nfs_read::NfsReadSpec;
pub use package::DebianPackage;
pub use profile::ProfileSpec;

/// A whole suite file (`suites/*.yaml`).
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, JsonSchema)]
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
    /// Measurements: any command timed on several VMs (see [`crate::schema::measure`]).
    #[serde(default)]
    pub measure: Vec<MeasureSpec>,
    /// How every measurement's comparisons are decided (a measurement's own
    /// `verdict:` overrides it, key by key).
    #[serde(default)]
    pub verdict: Option<measure::VerdictSpec>,
}

impl SuiteSpec {
    /// Whether VM `vm` has a seeded netem on its egress.
    pub fn seeded_netem(&self, vm: &str) -> bool {
        self.vms
            .iter()
            .find(|v| v.name == vm)
            .and_then(|v| v.net.as_ref()?.egress.as_ref())
            .is_some_and(|e| e.seed.is_some())
    }
}

/// The suite's private bridge.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NetworkSpec {
    /// IPv4 subnet of the bridge, e.g. `10.77.0.0/24`. It only exists inside the run's
    /// private network namespace.
    #[schemars(with = "String", regex(pattern = r"^[0-9]{1,3}(\.[0-9]{1,3}){3}/[0-9]{1,2}$"))]
    pub subnet: Ipv4Net,
    /// MTU of the bridge, taps and guest NICs, in bytes (default 1500).
    #[serde(default)]
    pub mtu: Option<u32>,
    /// Record every VM's traffic into `RUN/vms/VM/capture.pcap`: `true` (the whole
    /// run), `measured` (only while a measured iteration runs on it) or `false` (the
    /// default); a VM's own `capture:` wins.
    #[serde(default)]
    pub capture: Option<capture::CaptureSpec>,
    /// Bytes kept of each captured frame (default 256: the headers of an RPC over
    /// UDP or TCP; 64 to 65535).
    #[serde(default)]
    pub capture_snaplen: Option<u32>,
    /// Largest size of one VM's capture file, bytes (default 64 MiB): a capture that
    /// reaches it is stopped (the run goes on) with a note in run.json and the report.
    #[serde(default)]
    pub capture_max_bytes: Option<u64>,
}

/// Per-VM settings that may be given once for the whole suite.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq, JsonSchema)]
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
    #[schemars(schema_with = "crate::schema::json::duration")]
    pub boot_timeout: Option<Duration>,
    /// Default limit for each step (default 300s).
    #[serde(default, with = "humantime_serde")]
    #[schemars(schema_with = "crate::schema::json::duration")]
    pub step_timeout: Option<Duration>,
    /// Root filesystem recipe name under `images/rootfs/` (default `bookworm-nfs`).
    #[serde(default)]
    pub rootfs: Option<String>,
    /// Extra Debian packages in every VM's rootfs (added to each VM's own `packages`).
    #[serde(default, deserialize_with = "package::deserialize_list")]
    pub packages: Vec<DebianPackage>,
}

/// Hardware acceleration for QEMU.
#[derive(Debug, Clone, Copy, Deserialize, Serialize, PartialEq, Eq, Hash, JsonSchema)]
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
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, JsonSchema)]
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
    #[schemars(schema_with = "crate::schema::json::duration")]
    pub boot_timeout: Option<Duration>,
    /// Rootfs recipe override.
    #[serde(default)]
    pub rootfs: Option<String>,
    /// Extra kernel command line arguments.
    #[serde(default)]
    pub cmdline: Option<String>,
    /// A named guest profile under `images/profiles/<name>.sh`, run first once the
    /// guest agent answers: `nfs-server-2.4.19`, or with parameters
    /// `{name: nfs-server-modern, exports: [{path: /srv/export}], nfs_versions: ["3", "4.2"]}`.
    #[serde(default)]
    pub profile: Option<ProfileSpec>,
    /// Network conditions of this guest's NIC, applied inside the guest before any step.
    #[serde(default)]
    pub net: Option<VmNetSpec>,
    /// Extra Debian packages in this VM's rootfs (`fio`, `iperf3`, `gcc`, …; `name/suite`
    /// for one from another suite of the recipe, e.g. `fio/bookworm-backports`). The
    /// recipe with these packages is its own cache entry; the versions installed are
    /// recorded (`environment.json`).
    #[serde(default, deserialize_with = "package::deserialize_list")]
    pub packages: Vec<DebianPackage>,
    /// Kernel parameters (`sysctl -w`) applied before any step, e.g.
    /// `{net.ipv4.ipfrag_time: 5}`; the values in force are printed back and recorded.
    #[serde(default)]
    #[schemars(with = "std::collections::BTreeMap<String, serde_json::Value>")]
    pub sysctl: std::collections::BTreeMap<String, serde_yaml::Value>,
    /// Files copied from the suite's folder into the guest (through the guest agent)
    /// before any step.
    #[serde(default)]
    pub files: Vec<FileSpec>,
    /// Environment variables of every command run in this guest (steps, measurements),
    /// e.g. `{MOUNT_OPTIONS: "vers=4.2"}`: a measurement's commands read `$MOUNT_OPTIONS`.
    #[serde(default)]
    pub env: std::collections::BTreeMap<String, String>,
    /// Variants: this VM is expanded into one VM per combination of the axes' values
    /// (their product, first axis slowest), named `<name>-<label>[-<label>…]` and given
    /// the addresses after `address`. Axes: `kernel`, `cmdline`, `memory`, `cpus`,
    /// `sysctl.<name>`, `net.egress.<field>`, `net.offloads`, `env.<NAME>`,
    /// `nfs_read.mount_options`, `nfs_read.read_ahead_kb`. Values are a list (labels
    /// derived from them) or a map `label: value`. `exclude:` / `include:` (lists of
    /// maps axis → value) remove and add or extend combinations, as a CI matrix's do.
    /// See `crate::suite::variants`.
    #[serde(default)]
    #[schemars(with = "std::collections::BTreeMap<String, serde_json::Value>")]
    pub variants: serde_yaml::Mapping,
    /// Commands to run in this guest, in order.
    #[serde(default)]
    pub steps: Vec<StepSpec>,
    /// Record this VM's traffic, both directions, into `RUN/vms/VM/capture.pcap`: `true`
    /// (the whole run), `measured` (only while a measured iteration runs on it) or
    /// `false` (default: `network.capture`).
    #[serde(default)]
    pub capture: Option<capture::CaptureSpec>,
}

/// What of a verdict a suite's snapshot keeps (`nfs_read.snapshot_verdicts`,
/// `measure[].snapshot.verdict`).
#[derive(Debug, Clone, Copy, Default, Deserialize, Serialize, PartialEq, Eq, JsonSchema)]
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
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct VmNetSpec {
    /// `netem` on the guest's egress (packets *leaving* this VM), as the root qdisc.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub egress: Option<NetemSpec>,
    /// `false` turns TSO, GSO and GRO off on `eth0` (ethtool) and sets the device's
    /// `gso_max_segs` to 1 (`ip link`; Linux >= 4.17 builds TCP super-packets even with
    /// GSO off). With them on, netem drops whole TCP super-packets but single UDP
    /// fragments, so "1 % loss" means different things for TCP and UDP. Default: the
    /// kernel's defaults (on).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offloads: Option<bool>,
}

/// `tc qdisc … netem` parameters (see tc-netem(8)).
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NetemSpec {
    /// Random loss, percent, e.g. `"1%"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loss: Option<String>,
    /// Delay, e.g. `"5ms"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delay: Option<String>,
    /// Jitter added to `delay`, e.g. `"1ms"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jitter: Option<String>,
    /// Rate limit, e.g. `"100mbit"` (netem's `rate`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate: Option<String>,
    /// Reordering, percent (needs `delay`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reorder: Option<String>,
    /// Duplication, percent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duplicate: Option<String>,
    /// Queue limit, packets (netem's default is 1000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
    /// Seed of netem's pseudo-random generator (`tc … netem … seed N`, Linux >= 6.6 and
    /// iproute2 >= 6.6; older kernels ignore it, which the runner detects and reports).
    /// With a seed, netem sees only IPv4 packets (ARP and IPv6 bypass it, so background
    /// traffic neither gets lost nor shifts the sequence), and it is reseeded before
    /// every iteration of a sequential measurement that observes it (`nfs_read` reads
    /// always do; a `measure:` entry with `observe: [{netem: <this VM>}]`), so the n-th
    /// packet of each iteration meets the same drop decision.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    /// Apply only to packets addressed to these VMs (a `prio` qdisc with `u32` filters
    /// on the destination address; every IP fragment carries it). Default: all packets.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub to: Vec<String>,
}

/// Which kernel a VM boots. Exactly one of `debian`, `path`, `source` or `tree` must be
/// given.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq, JsonSchema)]
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
    /// Build the kernel from a git tree the user maps to a checkout on their machine
    /// (`--tree NAME=PATH` or `VMREPRO_TREES`), by this short name: `[a-z0-9][a-z0-9_-]*`.
    /// Needs `rev`.
    #[serde(default)]
    pub tree: Option<String>,
    /// With `tree`: the revision to build (a tag, branch or commit id, with `~N`/`^N`).
    #[serde(default)]
    pub rev: Option<String>,
    /// With `tree`: config fragment files merged over `defconfig` + `kvm_guest.config`,
    /// relative to the suite file's folder.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fragments: Vec<PathBuf>,
    /// With `tree`: patch files (`patch -p1`), relative to the suite file's folder.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub patches: Vec<PathBuf>,
}

/// A kernel built from source: `linux-source-<debian>` + `defconfig` +
/// `kvm_guest.config` + `fragments`, with `patches` applied. Everything the guest needs
/// must be built in (a source-built kernel gets no modules disk).
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq, JsonSchema)]
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
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, JsonSchema)]
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
    #[schemars(schema_with = "crate::schema::json::duration")]
    pub timeout: Option<Duration>,
    /// Expected exit status (default 0). A different status fails the suite.
    #[serde(default)]
    pub expect_exit: Option<i32>,
    /// Put this step's stdout (trimmed) into the suite's snapshot; only for output
    /// that is stable from run to run (e.g. `uname -r`).
    #[serde(default)]
    pub snapshot: bool,
}

/// A file copied into a guest (`files:`).
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FileSpec {
    /// The file on the host, relative to the suite's folder (at most 1 MiB).
    pub src: PathBuf,
    /// Where it goes in the guest (absolute; its folder is created).
    pub dest: String,
    /// Its permission bits in octal, e.g. `"0755"` (default `"0644"`).
    #[serde(default)]
    pub mode: Option<String>,
}
