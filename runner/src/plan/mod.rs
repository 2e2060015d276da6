//! What runs, as data: the typed [`Plan`] a suite compiles into (schema → validate →
//! **plan**), written to every run folder as `plan.json`: every VM with its steps,
//! every measurement with its iterations, the `nfs_read` preset's facts.
//!
//! The defaults live here (one source of truth: the `DEFAULT_*` constants), applied by
//! [`crate::suite::compile`](mod@crate::suite::compile); generated step names come from
//! [`names`]. Nothing here runs anything ([`crate::run`] does).

pub mod measurement;
pub mod names;
pub mod netem;
pub mod nfs_read;

use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::time::Duration;

use ipnet::Ipv4Net;
use serde::{Deserialize, Serialize};

use crate::infra::images::kernel::KernelSource;
use crate::schema::profile::ServerSettings;
use crate::schema::{Accel, VmNetSpec};
use measurement::{MeasurementPlan, RemoteObserver};
use nfs_read::NfsPlan;

/// Default guest memory, MiB.
pub const DEFAULT_MEMORY_MIB: u64 = 512;
/// Default vCPUs.
pub const DEFAULT_CPUS: u32 = 1;
/// Default boot timeout (QEMU start → guest agent answers). Generous: under TCG with
/// several VMs booting on two cores a guest takes 10–30 s.
pub const DEFAULT_BOOT_TIMEOUT: Duration = Duration::from_secs(180);
/// Default step timeout.
pub const DEFAULT_STEP_TIMEOUT: Duration = Duration::from_secs(300);
/// Default MTU, bytes.
pub const DEFAULT_MTU: u32 = 1500;
/// Default bytes kept of each captured frame (`network.capture_snaplen`): Ethernet,
/// IPv4, TCP with options and an RPC call header with AUTH_SYS credentials fit.
pub const DEFAULT_CAPTURE_SNAPLEN: u32 = 256;
/// Default largest size of one VM's capture file (`network.capture_max_bytes`), bytes:
/// 64 MiB, some 250 000 frames of 256 bytes.
pub const DEFAULT_CAPTURE_MAX_BYTES: u64 = 64 * 1024 * 1024;
/// Default measured iterations per VM of a measurement.
pub const DEFAULT_REPEAT: u32 = 1;
/// The metric a verdict uses by default.
pub const DEFAULT_METRIC: &str = "elapsed_s";
/// Name of a measurement's `metric:` (a number `run` prints) when the suite gives none.
pub const DEFAULT_OUTPUT_METRIC: &str = "value";

/// A whole run, ready to execute; written to every run folder as `plan.json`.
#[derive(Debug, Clone, Serialize)]
pub struct Plan {
    /// Suite name.
    pub suite: String,
    /// Suite file, as given.
    pub suite_file: PathBuf,
    /// The suite's description.
    pub description: Option<String>,
    /// Bridge subnet.
    pub subnet: Ipv4Net,
    /// MTU of bridge, taps and NICs, bytes.
    pub mtu: u32,
    /// VMs in suite order.
    pub vms: Vec<VmPlan>,
    /// Measurements (the `nfs_read` preset's first, then `measure:` in suite order).
    pub measurements: Vec<MeasurementPlan>,
    /// The `nfs_read` preset's own facts (server, export, file, mounts), if used.
    pub nfs_read: Option<NfsPlan>,
}

impl Plan {
    /// The images the plan needs: each VM's kernel and rootfs, in VM order (a kernel or
    /// rootfs two VMs share appears twice). Resolving them is
    /// [`crate::run::images::resolve`].
    pub fn vm_images(&self) -> impl Iterator<Item = (KernelSource, crate::infra::images::rootfs::RootfsRequest)> + '_ {
        self.vms.iter().map(|v| (v.kernel.clone(), v.rootfs_request()))
    }
}

/// One VM of the plan.
#[derive(Debug, Clone, Serialize)]
pub struct VmPlan {
    /// VM name (also its host name).
    pub name: String,
    /// Kernel source.
    #[serde(serialize_with = "ser_kernel")]
    pub kernel: KernelSource,
    /// Rootfs recipe name.
    pub rootfs: String,
    /// Extra Debian packages in its rootfs (`packages:`), sorted.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub packages: Vec<crate::schema::DebianPackage>,
    /// Address on the bridge.
    pub address: Ipv4Addr,
    /// Memory, MiB.
    pub memory_mib: u64,
    /// vCPUs.
    pub cpus: u32,
    /// Requested acceleration.
    pub accel: Accel,
    /// QEMU start → guest agent answers, at most.
    #[serde(with = "humantime_serde")]
    pub boot_timeout: Duration,
    /// Extra kernel command line.
    pub cmdline: Option<String>,
    /// Network conditions of its NIC, as the suite gave them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub net: Option<VmNetSpec>,
    /// Environment of every command run in the guest (`env:`).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// `sysctl:` values applied before any step.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub sysctl: BTreeMap<String, String>,
    /// Files copied in before any step.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<FilePlan>,
    /// Its profile and the parameters in force.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub profile: Option<ProfilePlan>,
    /// Steps, in order.
    pub steps: Vec<StepPlan>,
    /// Its packet capture, if `capture:` is on for it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub capture: Option<CapturePlan>,
}

/// A VM's packet capture: QEMU's `filter-dump` on its NIC's netdev into
/// `RUN/vms/VM/capture.pcap` (see `docs/src/wire.md`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct CapturePlan {
    /// Bytes kept of each frame.
    pub snaplen: u32,
    /// Whether it records only while a measured iteration runs (`capture: measured`;
    /// otherwise the whole run).
    pub measured_only: bool,
    /// Size at which the capture is stopped, bytes (`network.capture_max_bytes`).
    pub max_bytes: u64,
}

fn ser_kernel<S: serde::Serializer>(k: &KernelSource, s: S) -> Result<S::Ok, S::Error> {
    match k {
        KernelSource::Debian(p) => s.serialize_str(&format!("debian:{} ({} {})", p.series, p.package, p.version)),
        KernelSource::Local { image, .. } => s.serialize_str(&format!("local:{}", image.display())),
        KernelSource::Source(k) => s.serialize_str(&k.label()),
        KernelSource::Tree(k) => s.serialize_str(&k.label()),
    }
}

impl VmPlan {
    /// The rootfs it boots: its recipe with its extra packages.
    pub fn rootfs_request(&self) -> crate::infra::images::rootfs::RootfsRequest {
        crate::infra::images::rootfs::RootfsRequest::new(&self.rootfs, &self.packages)
    }
}

/// A file copied into a guest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FilePlan {
    /// The file on the host (absolute).
    pub src: PathBuf,
    /// Where it goes in the guest.
    pub dest: String,
    /// Its permission bits (in JSON and YAML as octal text, `"0755"`).
    #[serde(with = "octal_mode")]
    pub mode: u32,
    /// Its size, bytes.
    pub bytes: u64,
    /// Its SHA-256 when the suite was compiled; the runner sends it only if it still
    /// has this hash, and the guest prints the hash of what it wrote.
    pub sha256: String,
}

/// A VM's profile with every parameter in force (the suite's, else the profile's
/// defaults); `params` is `None` for a profile that takes none.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProfilePlan {
    /// Profile name (`images/profiles/<name>.sh`).
    pub name: String,
    /// Its parameters.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub params: Option<ServerParams>,
}

/// An NFS server profile's parameters in force: its exports, and the declared
/// parameters ([`crate::schema::profile`]), flattened into one map in `plan.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServerParams {
    /// Exports.
    pub exports: Vec<Export>,
    /// The declared parameters' values in force.
    #[serde(flatten)]
    pub settings: ServerSettings,
}

/// One NFS export in force.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Export {
    /// The exported folder.
    pub path: String,
    /// Its exports(5) options.
    pub options: String,
}

impl ServerParams {
    /// The environment the profile's script reads (see `images/profiles/*.sh`):
    /// `VMREPRO_EXPORTS` (one `path options` line per export), then one variable per
    /// declared parameter.
    pub fn env(&self) -> Vec<(&'static str, String)> {
        let exports = self.exports.iter().map(|e| format!("{} {}", e.path, e.options)).collect::<Vec<_>>();
        let mut env = vec![("VMREPRO_EXPORTS", exports.join("\n"))];
        env.extend(self.settings.env());
        env
    }
}

/// What a step is for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum StepKind {
    /// Written by the user (`steps:`).
    User,
    /// The VM's profile script.
    Profile {
        /// Profile name (`images/profiles/<profile>.sh`).
        profile: String,
    },
    /// `net:` of the VM: tc/ethtool settings, printed back for the record.
    NetConditions,
    /// A step a built-in scenario added (e.g. `nfs_read`'s `nfs-file`).
    Scenario {
        /// The scenario (`nfs_read`).
        scenario: String,
    },
    /// Applies the VM's `sysctl:` and prints the values in force.
    Sysctl,
    /// Copies one of the VM's `files:` into it (the file is the step's stdin).
    CopyFile {
        /// Where it goes in the guest.
        dest: String,
        /// The file's SHA-256.
        sha256: String,
    },
    /// One iteration of a measurement.
    Measure {
        /// The measurement.
        measurement: String,
        /// 1-based number among the VM's measured iterations (or its warm-ups).
        iteration: u32,
        /// A warm-up iteration (left out of the statistics).
        warmup: bool,
    },
    /// An action of a measurement's `each:` on a VM, before or after an iteration
    /// (or a round of a concurrent measurement).
    Action {
        /// The measurement.
        measurement: String,
        /// Before or after the iteration.
        when: crate::plan::measurement::When,
        /// 1-based position in its list (`each.before` or `each.after`).
        action: u32,
        /// The measured round it surrounds (1-based; absent for warm-up rounds and from
        /// plans saved before adaptive repeats took actions): with adaptive repeats it
        /// runs only when that round is needed, like the round's iterations.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        round: Option<u32>,
    },
    /// A remote observer's reading around a measurement's iterations.
    Observe {
        /// The measurement.
        measurement: String,
        /// The observer (`netem`).
        observer: String,
    },
}

impl StepKind {
    /// The kind of `r`'s steps for measurement `measurement`.
    pub fn observe(measurement: &str, r: &RemoteObserver) -> StepKind {
        StepKind::Observe { measurement: measurement.to_string(), observer: r.name().to_string() }
    }
}

/// One command in one VM.
#[derive(Debug, Clone, Serialize)]
pub struct StepPlan {
    /// Step name (unique in its VM).
    pub name: String,
    /// Shell script run with `/bin/sh -c` in the guest.
    pub script: String,
    /// Bytes fed to its stdin.
    pub stdin: Option<String>,
    /// A host file fed to its stdin instead (read when the step runs; see
    /// [`StepKind::CopyFile`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stdin_file: Option<PathBuf>,
    /// What it waits for.
    pub after: Vec<Dependency>,
    /// Limit of its run (its wait for `after` is bounded by the latest those steps can
    /// end, see `run::waits`).
    #[serde(with = "humantime_serde")]
    pub timeout: Duration,
    /// Expected exit status.
    pub expect_exit: i32,
    /// What it is for.
    #[serde(flatten)]
    pub kind: StepKind,
    /// Whether its stdout goes into the suite's snapshot.
    pub snapshot: bool,
    /// The suite key that made it (`vms[1].steps[0]`, `measure[0]`, `nfs_read`), for
    /// errors found after compiling.
    #[serde(skip)]
    pub origin: Option<String>,
}

impl StepPlan {
    /// A step with no dependencies, no stdin, exit status 0 expected and no snapshot.
    pub fn new(name: &str, script: String, kind: StepKind, timeout: Duration) -> StepPlan {
        StepPlan {
            name: name.to_string(),
            script,
            stdin: None,
            stdin_file: None,
            after: vec![],
            timeout,
            expect_exit: 0,
            kind,
            snapshot: false,
            origin: None,
        }
    }

    /// With these dependencies.
    pub fn after(mut self, deps: impl IntoIterator<Item = Dependency>) -> StepPlan {
        self.after = deps.into_iter().collect();
        self
    }

    /// With this stdin.
    pub fn stdin(mut self, stdin: String) -> StepPlan {
        self.stdin = Some(stdin);
        self
    }

    /// Made by the suite key `origin`.
    pub fn origin(mut self, origin: &str) -> StepPlan {
        self.origin = Some(origin.to_string());
        self
    }
}

/// Something a step waits for.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Dependency {
    /// VM name.
    pub vm: String,
    /// Step name; `None` = the VM's guest agent answers.
    pub step: Option<String>,
    /// What the step must have done: passed (default), or only ended.
    #[serde(default, skip_serializing_if = "Until::is_passed")]
    pub until: Until,
}

/// How far a [`Dependency`] must have got.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Until {
    /// It passed; if it did not, the waiting step is skipped (a user's `after`).
    #[default]
    Passed,
    /// It ended, however (the order of a measurement's iterations: one VM's failed or
    /// timed-out iteration does not stop the others from being measured).
    Ended,
    /// It passed; if it did not, only the waiting step is skipped and its VM's later
    /// steps still run (an iteration after a failed `each.before` action: that
    /// iteration failed, the next ones are still measured).
    PassedElseSkip,
}

impl Until {
    fn is_passed(&self) -> bool {
        *self == Until::Passed
    }
}

impl Dependency {
    /// Step `step` of VM `vm` passed.
    pub fn step(vm: &str, step: &str) -> Dependency {
        Dependency { vm: vm.to_string(), step: Some(step.to_string()), until: Until::Passed }
    }

    /// Step `step` of VM `vm` passed, else only the waiting step is skipped
    /// ([`Until::PassedElseSkip`]).
    pub fn passed_else_skip(vm: &str, step: &str) -> Dependency {
        Dependency { until: Until::PassedElseSkip, ..Dependency::step(vm, step) }
    }

    /// Step `step` of VM `vm` ended, whatever its outcome.
    pub fn ended(vm: &str, step: &str) -> Dependency {
        Dependency { until: Until::Ended, ..Dependency::step(vm, step) }
    }

    /// This dependency's key in the run's progress map (the step, whatever `until`).
    pub fn key(&self) -> Dependency {
        Dependency { until: Until::Passed, ..self.clone() }
    }

    /// Parses `vm` or `vm/step` (a user's `after`: it must pass).
    pub fn parse(s: &str) -> Dependency {
        match s.split_once('/') {
            Some((v, st)) => Dependency::step(v, st),
            None => Dependency { vm: s.into(), step: None, until: Until::Passed },
        }
    }
}

impl std::fmt::Display for Dependency {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.step {
            Some(s) => write!(f, "{}/{s}", self.vm),
            None => write!(f, "{}", self.vm),
        }
    }
}

/// Quotes `s` as one word for a POSIX shell in the guest (single quotes; a `'` inside
/// becomes `'\''`). Safe for any text without NUL bytes. The one quoting function:
/// every value the runner puts into a generated command goes through it or is checked
/// against a strict pattern in [`crate::suite::validate`] (usually both).
pub fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

#[cfg(test)]
mod tests {
    use super::shell_quote;

    /// Hostile strings come back unchanged through a real `/bin/sh`: nothing in them
    /// is expanded, split or executed.
    #[test]
    fn shell_quote_survives_a_real_shell() {
        let hostile = [
            "$(reboot)",
            "`reboot`",
            "'",
            "''",
            "\"",
            "a'b\"c'd",
            "'; reboot; '",
            "\\",
            "\\'",
            "$HOME ${PATH} $1 $@ $$",
            "* ? [a-z] ~ ~root",
            "; & | && || > < >> 2>&1",
            "line\nbreak\r\n",
            "\ttab\u{1b}[2J\u{7}",
            "!event -n --help",
            "",
            " leading and trailing ",
            "caf\u{e9} \u{430} \u{200b}",
            "/mnt/$(reboot)",
        ];
        for s in hostile {
            let out = std::process::Command::new("/bin/sh")
                .arg("-c")
                .arg(format!("printf %s {}", shell_quote(s)))
                .output()
                .expect("run /bin/sh");
            assert!(out.status.success(), "{s:?}: {}", String::from_utf8_lossy(&out.stderr));
            assert_eq!(String::from_utf8_lossy(&out.stdout), s, "{s:?} through {}", shell_quote(s));
        }
    }
}

/// Permission bits as octal text (`"0755"`) in serialized plans.
mod octal_mode {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(mode: &u32, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&format!("{mode:04o}"))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<u32, D::Error> {
        let text = String::deserialize(d)?;
        u32::from_str_radix(&text, 8).map_err(serde::de::Error::custom)
    }
}
