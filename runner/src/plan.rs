//! Compiling a validated suite into a typed [`Plan`] (spec → validate → **plan**).
//!
//! Defaults are applied here (one source of truth: the `DEFAULT_*` constants), paths
//! are resolved against the suite's folder, and the `nfs_read` scenario is expanded
//! into ordinary steps on the server and client VMs.

use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::time::Duration;

use ipnet::Ipv4Net;

use crate::images::kernel::KernelSource;
use crate::images::{Catalog, DEFAULT_FLAVOUR, DEFAULT_ROOTFS};
use crate::spec::{Accel, SpecError, SuiteFile};

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
/// Default NFS mount point on clients.
pub const DEFAULT_MOUNT_POINT: &str = "/mnt/home";
/// The server step that clients of `nfs_read` wait for.
pub const NFS_SERVER_READY_STEP: &str = "nfs-server-ready";
/// The step that applies a VM's `net` conditions before any other.
pub const NET_CONDITIONS_STEP: &str = "net-conditions";
/// The step that prints a seeded netem's counters after the last read.
pub const NET_STATS_STEP: &str = "net-stats";
/// Prefix of the steps that reseed a netem before each read, see [`reseed_step_name`].
pub const NET_RESEED_STEP_PREFIX: &str = "net-reseed-";

/// The step that reseeds a netem before `client`'s read step `read_step`, e.g.
/// `net-reseed-mainline-nfs-read-2`.
pub fn reseed_step_name(client: &str, read_step: &str) -> String {
    format!("{NET_RESEED_STEP_PREFIX}{client}-{read_step}")
}

/// Marker line the measurement script prints before each section of its output.
pub const SECTION_MARKER: &str = "### vmrepro section: ";

/// A whole run, ready to execute.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Plan {
    /// Suite name.
    pub suite: String,
    /// Suite file.
    pub suite_file: PathBuf,
    /// Description.
    pub description: Option<String>,
    /// Bridge subnet.
    pub subnet: Ipv4Net,
    /// MTU of bridge, taps and NICs.
    pub mtu: u32,
    /// VMs in suite order.
    pub vms: Vec<VmPlan>,
    /// The NFS scenario, if any.
    pub nfs_read: Option<NfsPlan>,
}

/// One VM of the plan.
#[derive(Debug, Clone, serde::Serialize)]
pub struct VmPlan {
    /// Name.
    pub name: String,
    /// Kernel source.
    #[serde(serialize_with = "ser_kernel")]
    pub kernel: KernelSource,
    /// Rootfs recipe name.
    pub rootfs: String,
    /// Address on the bridge.
    pub address: Ipv4Addr,
    /// Memory, MiB.
    pub memory_mib: u64,
    /// vCPUs.
    pub cpus: u32,
    /// Requested acceleration.
    pub accel: Accel,
    /// Boot timeout.
    #[serde(with = "humantime_serde")]
    pub boot_timeout: Duration,
    /// Extra kernel command line.
    pub cmdline: Option<String>,
    /// Steps, in order.
    pub steps: Vec<StepPlan>,
}

fn ser_kernel<S: serde::Serializer>(k: &KernelSource, s: S) -> Result<S::Ok, S::Error> {
    match k {
        KernelSource::Debian(p) => s.serialize_str(&format!("debian:{} ({} {})", p.series, p.package, p.version)),
        KernelSource::Local { image, .. } => s.serialize_str(&format!("local:{}", image.display())),
        KernelSource::Source(k) => s.serialize_str(&k.label()),
    }
}

/// What a step is for.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum StepKind {
    /// Written by the user.
    User,
    /// The VM's profile script.
    Profile {
        /// Profile name.
        name: String,
    },
    /// `net:` of the VM: tc/ethtool settings, printed back for the record.
    NetConditions,
    /// `nfs_read`: reseeds the VM's seeded netem before a read (see [`reseed_script`]).
    NetReseed,
    /// `nfs_read`: the seeded netem's statistics after the last read.
    NetStats,
    /// `nfs_read`: create the file with dd.
    NfsFile,
    /// `nfs_read`: record the server's state; clients wait for this.
    NfsReady,
    /// `nfs_read`: per-client setup (e.g. tc).
    NfsClientSetup,
    /// `nfs_read`: an unmeasured read before the measured ones (same script; its
    /// output is kept with the step but left out of the statistics).
    NfsWarmup {
        /// 1-based warm-up round.
        round: u32,
    },
    /// `nfs_read`: one measured read.
    NfsMeasure {
        /// 1-based repeat number.
        repeat: u32,
    },
}

/// One command in one VM.
#[derive(Debug, Clone, serde::Serialize)]
pub struct StepPlan {
    /// Step name (unique in its VM).
    pub name: String,
    /// Shell script run with `/bin/sh -c`.
    pub script: String,
    /// Bytes fed to its stdin.
    pub stdin: Option<String>,
    /// What it waits for.
    pub after: Vec<Dependency>,
    /// Limit.
    #[serde(with = "humantime_serde")]
    pub timeout: Duration,
    /// Expected exit status.
    pub expect_exit: i32,
    /// Purpose.
    #[serde(flatten)]
    pub kind: StepKind,
    /// Whether its stdout goes into the suite's snapshot.
    pub snapshot: bool,
}

/// Something a step waits for.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
pub struct Dependency {
    /// VM name.
    pub vm: String,
    /// Step name; `None` = the VM's guest agent answers.
    pub step: Option<String>,
}

impl std::fmt::Display for Dependency {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.step {
            Some(s) => write!(f, "{}/{s}", self.vm),
            None => write!(f, "{}", self.vm),
        }
    }
}

/// The NFS scenario after expansion.
#[derive(Debug, Clone, serde::Serialize)]
pub struct NfsPlan {
    /// Server VM.
    pub server: String,
    /// Export path.
    pub export: String,
    /// Full path of the file on the server and (under the mount point) on clients.
    pub file_name: String,
    /// Expected size, bytes.
    pub file_bytes: u64,
    /// Clients in order.
    pub clients: Vec<String>,
    /// Baseline client.
    pub baseline: String,
    /// Mount point.
    pub mount_point: String,
    /// Mount options.
    pub mount_options: String,
    /// Per-client mount options (override `mount_options`).
    pub client_mount_options: std::collections::BTreeMap<String, String>,
    /// Repeats per client.
    pub repeat: u32,
    /// Unmeasured warm-up reads per client, before the repeats.
    pub warmup: u32,
    /// All clients at once.
    pub concurrent: bool,
    /// Verdicts go into the snapshot.
    pub snapshot_verdicts: crate::spec::SnapshotVerdicts,
    /// Read-ahead set on each mount, KiB (`None`: the kernel's default).
    pub read_ahead_kb: Option<u32>,
}

impl NfsPlan {
    /// The `mount -o` options of `client`.
    pub fn mount_options_of(&self, client: &str) -> &str {
        self.client_mount_options.get(client).unwrap_or(&self.mount_options)
    }
}

/// Validates `file` and compiles it.
pub fn compile(file: &SuiteFile, catalog: &Catalog) -> Result<Plan, SpecError> {
    crate::validate::validate(file, catalog)?;
    let s = &file.spec;
    let d = &s.defaults;
    let step_timeout = d.step_timeout.unwrap_or(DEFAULT_STEP_TIMEOUT);
    let addresses: std::collections::BTreeMap<String, Ipv4Addr> =
        s.vms.iter().map(|v| (v.name.clone(), v.address)).collect();
    let mut vms: Vec<VmPlan> = Vec::new();
    for vm in &s.vms {
        let kernel = match (&vm.kernel.debian, &vm.kernel.path) {
            _ if vm.kernel.source.is_some() => {
                let src = vm.kernel.source.as_ref().expect("checked");
                KernelSource::Source(crate::images::source::SourceKernel {
                    source: catalog.debian_source(&src.debian).expect("validated").clone(),
                    fragments: src.fragments.iter().map(|f| file.resolve(f)).collect(),
                    patches: src.patches.iter().map(|f| file.resolve(f)).collect(),
                })
            }
            (Some(series), _) => {
                let flavour = vm.kernel.flavour.as_deref().unwrap_or(DEFAULT_FLAVOUR);
                KernelSource::Debian(catalog.debian_kernel(series, flavour).expect("validated").clone())
            }
            (None, Some(p)) => KernelSource::Local {
                image: file.resolve(p),
                modules: vm.kernel.modules.as_ref().map(|m| file.resolve(m)),
            },
            (None, None) => unreachable!("validated"),
        };
        let mut steps = Vec::new();
        if let Some(net) = &vm.net {
            steps.push(StepPlan {
                name: NET_CONDITIONS_STEP.into(),
                script: net_script(net, &addresses),
                stdin: None,
                after: vec![],
                timeout: step_timeout,
                expect_exit: 0,
                kind: StepKind::NetConditions,
                snapshot: false,
            });
        }
        if let Some(p) = &vm.profile {
            let script_path = &catalog.profiles[p];
            let text = std::fs::read_to_string(script_path)
                .map_err(|e| SpecError::Read { path: script_path.clone(), source: e })?;
            let export = s
                .nfs_read
                .as_ref()
                .filter(|n| n.server == vm.name)
                .map(|n| n.export.clone())
                .unwrap_or_else(|| "/srv/export".into());
            steps.push(StepPlan {
                name: format!("profile-{p}"),
                script: format!("exec /bin/sh -s -- {}", shell_quote(&export)),
                stdin: Some(text),
                after: vec![],
                timeout: step_timeout,
                expect_exit: 0,
                kind: StepKind::Profile { name: p.clone() },
                snapshot: false,
            });
        }
        for st in &vm.steps {
            steps.push(StepPlan {
                name: st.name.clone(),
                script: st.run.clone(),
                stdin: None,
                after: st.after.iter().map(|a| parse_dep(a)).collect(),
                timeout: st.timeout.unwrap_or(step_timeout),
                expect_exit: st.expect_exit.unwrap_or(0),
                kind: StepKind::User,
                snapshot: st.snapshot,
            });
        }
        vms.push(VmPlan {
            name: vm.name.clone(),
            kernel,
            rootfs: vm.rootfs.clone().or_else(|| d.rootfs.clone()).unwrap_or_else(|| DEFAULT_ROOTFS.into()),
            address: vm.address,
            memory_mib: vm.memory.or(d.memory).unwrap_or(DEFAULT_MEMORY_MIB),
            cpus: vm.cpus.or(d.cpus).unwrap_or(DEFAULT_CPUS),
            accel: vm.accel.or(d.accel).unwrap_or(Accel::Auto),
            boot_timeout: vm.boot_timeout.or(d.boot_timeout).unwrap_or(DEFAULT_BOOT_TIMEOUT),
            cmdline: vm.cmdline.clone(),
            steps,
        });
    }
    let seeded_netems: Vec<(String, crate::spec::NetemSpec)> = s
        .vms
        .iter()
        .filter_map(|v| {
            v.net.as_ref()?.egress.as_ref().filter(|e| e.seed.is_some()).map(|e| (v.name.clone(), e.clone()))
        })
        .collect();
    let nfs_read = s.nfs_read.as_ref().map(|n| expand_nfs(n, &mut vms, step_timeout, &seeded_netems));
    Ok(Plan {
        suite: s.name.clone(),
        suite_file: file.path.clone(),
        description: s.description.clone(),
        subnet: s.network.subnet,
        mtu: s.network.mtu.unwrap_or(DEFAULT_MTU),
        vms,
        nfs_read,
    })
}

fn parse_dep(s: &str) -> Dependency {
    match s.split_once('/') {
        Some((v, st)) => Dependency { vm: v.into(), step: Some(st.into()) },
        None => Dependency { vm: s.into(), step: None },
    }
}

/// Quotes `s` for a POSIX shell in the guest.
pub fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

fn expand_nfs(
    n: &crate::spec::NfsReadSpec,
    vms: &mut [VmPlan],
    step_timeout: Duration,
    seeded_netems: &[(String, crate::spec::NetemSpec)],
) -> NfsPlan {
    let export = n.export.trim_end_matches('/').to_string();
    let export = if export.is_empty() { "/".to_string() } else { export };
    let server_addr = vms.iter().find(|v| v.name == n.server).expect("validated").address;
    let plan = NfsPlan {
        server: n.server.clone(),
        export: export.clone(),
        file_name: n.file.name.clone(),
        file_bytes: n.file.block_size * n.file.count,
        clients: n.clients.clone(),
        baseline: n.baseline.clone().unwrap_or_else(|| n.clients[0].clone()),
        mount_point: n.mount_point.clone().unwrap_or_else(|| DEFAULT_MOUNT_POINT.into()),
        mount_options: n.mount_options.clone().unwrap_or_else(|| "defaults".into()),
        client_mount_options: n.client_mount_options.clone(),
        repeat: n.repeat.unwrap_or(1),
        warmup: n.warmup.unwrap_or(0),
        concurrent: n.concurrent.unwrap_or(false),
        snapshot_verdicts: n.snapshot_verdicts.unwrap_or_default(),
        read_ahead_kb: n.read_ahead_kb,
    };

    // Server: after its profile, make the file exactly as the report did, then record
    // the export and the RPC services; clients wait for that last step.
    let server = vms.iter_mut().find(|v| v.name == n.server).expect("validated");
    let path = format!("{export}/{}", n.file.name);
    let dir = path.rsplit_once('/').map(|(d, _)| d.to_string()).unwrap_or_else(|| export.clone());
    let pos = server.steps.iter().position(|s| matches!(s.kind, StepKind::Profile { .. })).map_or(0, |p| p + 1);
    let file_step = StepPlan {
        name: "nfs-file".into(),
        script: format!(
            "mkdir -p {d} && cd {d} && dd if=/dev/zero of={f} bs={bs} count={c} && sync && ls -l {f}",
            d = shell_quote(&dir),
            f = shell_quote(path.rsplit('/').next().unwrap_or(&path)),
            bs = n.file.block_size,
            c = n.file.count
        ),
        stdin: None,
        after: vec![],
        timeout: step_timeout,
        expect_exit: 0,
        kind: StepKind::NfsFile,
        snapshot: false,
    };
    let ready_step = StepPlan {
        name: NFS_SERVER_READY_STEP.into(),
        script: "exportfs -v && rpcinfo -p && cat /proc/fs/nfsd/versions && cat /proc/fs/nfsd/threads".into(),
        stdin: None,
        after: vec![],
        timeout: step_timeout,
        expect_exit: 0,
        kind: StepKind::NfsReady,
        snapshot: false,
    };
    server.steps.insert(pos, file_step);
    server.steps.insert(pos + 1, ready_step);

    let ready = Dependency { vm: n.server.clone(), step: Some(NFS_SERVER_READY_STEP.into()) };
    // VMs whose netem is seeded: reseeded before every read (sequential reads only).
    let seeded: Vec<(String, String)> = if plan.concurrent {
        vec![]
    } else {
        seeded_netems.iter().map(|(vm, e)| (vm.clone(), reseed_script(e))).collect()
    };
    let mut previous: Option<Dependency> = None;
    for round in 1..=plan.warmup + plan.repeat {
        let warmup = round <= plan.warmup;
        let r = if warmup { round } else { round - plan.warmup };
        for c in &plan.clients {
            let vm = vms.iter_mut().find(|v| &v.name == c).expect("validated");
            if round == 1 {
                if let Some(setup) = n.client_setup.get(c) {
                    vm.steps.push(StepPlan {
                        name: "nfs-client-setup".into(),
                        script: setup.clone(),
                        stdin: None,
                        after: vec![],
                        timeout: step_timeout,
                        expect_exit: 0,
                        kind: StepKind::NfsClientSetup,
                        snapshot: false,
                    });
                }
            }
            let mut after = vec![ready.clone()];
            if !plan.concurrent {
                after.extend(previous.clone());
            }
            let name = if warmup { format!("nfs-warmup-{r}") } else { format!("nfs-read-{r}") };
            for (seeded_vm, script) in &seeded {
                let reseed = reseed_step_name(c, &name);
                let v = vms.iter_mut().find(|v| &v.name == seeded_vm).expect("validated");
                v.steps.push(StepPlan {
                    name: reseed.clone(),
                    script: script.clone(),
                    stdin: None,
                    after: previous.clone().into_iter().collect(),
                    timeout: step_timeout,
                    expect_exit: 0,
                    kind: StepKind::NetReseed,
                    snapshot: false,
                });
                if seeded_vm != c {
                    after.push(Dependency { vm: seeded_vm.clone(), step: Some(reseed) });
                }
            }
            let vm = vms.iter_mut().find(|v| &v.name == c).expect("validated");
            vm.steps.push(StepPlan {
                name: name.clone(),
                script: measure_script(&plan, c, server_addr),
                stdin: None,
                after,
                timeout: step_timeout,
                expect_exit: 0,
                kind: if warmup { StepKind::NfsWarmup { round: r } } else { StepKind::NfsMeasure { repeat: r } },
                snapshot: false,
            });
            previous = Some(Dependency { vm: c.clone(), step: Some(name) });
        }
    }
    for (seeded_vm, _) in &seeded {
        let v = vms.iter_mut().find(|v| &v.name == seeded_vm).expect("validated");
        v.steps.push(StepPlan {
            name: NET_STATS_STEP.into(),
            script: NETEM_STATS_SCRIPT.into(),
            stdin: None,
            after: previous.clone().into_iter().collect(),
            timeout: step_timeout,
            expect_exit: 0,
            kind: StepKind::NetStats,
            snapshot: false,
        });
    }
    plan
}

/// The client-side script of one measured read. Between fresh mount and unmount it
/// runs the report's four commands (`uname -r`, `/usr/bin/time cat FILE > /dev/null`,
/// `netstat -s`, `nfsstat`), preceded by the counters before the read (and
/// `/proc/self/mountstats` around it, for per-operation RPC statistics) and followed by
/// what the mount negotiated and its read-ahead (`/sys/class/bdi/<dev>/read_ahead_kb`,
/// `<dev>` from util-linux `mountpoint -d`; set first when the suite gives
/// `read_ahead_kb`). Each output starts with a [`SECTION_MARKER`] line. Exit codes:
/// 10 mkdir, 11 mount, 12 umount, 13 no read-ahead file, 14 read-ahead not set (the
/// last two unmount first).
pub fn measure_script(p: &NfsPlan, client: &str, server: Ipv4Addr) -> String {
    let mp = shell_quote(&p.mount_point);
    let file = shell_quote(&format!("{}/{}", p.mount_point.trim_end_matches('/'), p.file_name));
    let options = p.mount_options_of(client);
    let opts = if options == "defaults" { String::new() } else { format!("-o {options} ") };
    format!(
        r#"sec() {{ echo "{marker}$1"; }}
mkdir -p {mp} || exit 10
mount -t nfs {opts}{server}:{export} {mp} || exit 11
sync; echo 3 > /proc/sys/vm/drop_caches
sec mount; grep " {mp_raw} " /proc/mounts
sec read-ahead; bdi=/sys/class/bdi/$(mountpoint -d {mp}) && [ -e "$bdi/read_ahead_kb" ] || {{ umount {mp}; exit 13; }}
{set_ra}cat "$bdi/read_ahead_kb"
sec before-netstat; netstat -s
sec before-nfsstat; nfsstat
sec before-mountstats; cat /proc/self/mountstats
sec uname; uname -r
sec time; /usr/bin/time cat {file} 2>&1 > /dev/null
sec netstat; netstat -s
sec nfsstat; nfsstat
sec mountstats; cat /proc/self/mountstats
sec bytes; wc -c < {file}
umount {mp} || exit 12
"#,
        marker = SECTION_MARKER,
        export = shell_quote(&p.export),
        mp_raw = p.mount_point,
        set_ra = p
            .read_ahead_kb
            .map_or(String::new(), |kb| format!("echo {kb} > \"$bdi/read_ahead_kb\" || {{ umount {mp}; exit 14; }}\n")),
    )
}

/// Whether netem sits behind the `prio` qdisc and `u32` filters (with `to` or `seed`)
/// rather than as the root qdisc: [`net_script`] builds it, [`reseed_script`] changes it.
fn netem_is_filtered(e: &crate::spec::NetemSpec) -> bool {
    !e.to.is_empty() || e.seed.is_some()
}

/// netem's arguments for `e`, e.g. `delay 5ms 1ms loss random 1% seed 7`.
fn netem_args(e: &crate::spec::NetemSpec) -> String {
    let mut args = Vec::new();
    if let Some(d) = &e.delay {
        args.push(format!("delay {d}"));
        if let Some(j) = &e.jitter {
            args.push(j.clone());
        }
    }
    if let Some(l) = &e.loss {
        args.push(format!("loss random {l}"));
    }
    if let Some(r) = &e.reorder {
        args.push(format!("reorder {r}"));
    }
    if let Some(d) = &e.duplicate {
        args.push(format!("duplicate {d}"));
    }
    if let Some(r) = &e.rate {
        args.push(format!("rate {r}"));
    }
    if let Some(l) = e.limit {
        args.push(format!("limit {l}"));
    }
    if let Some(seed) = e.seed {
        args.push(format!("seed {seed}"));
    }
    args.join(" ")
}

/// Prints the VM's qdiscs with their counters (`tc -s qdisc show`); the analysis takes
/// each read's packets sent and dropped by netem from consecutive outputs.
pub const NETEM_STATS_SCRIPT: &str = "tc -s qdisc show dev eth0";

/// The guest script that reseeds a seeded netem (applied by [`net_script`]) before a
/// read: it prints the qdisc's statistics so far (packets sent and dropped), then
/// `tc qdisc change`s it with the same arguments, which restarts its generator
/// (netem reseeds on every change that carries a seed, Linux >= 6.6).
pub fn reseed_script(e: &crate::spec::NetemSpec) -> String {
    let parent = if netem_is_filtered(e) { "parent 1:3 handle 30:" } else { "root" };
    format!("set -e\n{NETEM_STATS_SCRIPT}\ntc qdisc change dev eth0 {parent} netem {}\n", netem_args(e))
}

/// The guest script applying `net:` (netem on egress, offloads) and printing the state
/// that resulted (`tc qdisc show`, `ethtool -k`), which is kept with the results.
///
/// With `egress.to` or `egress.seed`, netem sits under band 3 of a `prio` qdisc (all
/// traffic is mapped to band 2) and `u32` filters send IPv4 packets for those VMs'
/// addresses (or, with only a seed, every IPv4 packet) to band 3. A seed the kernel
/// ignores (Linux < 6.6) makes the script fail with exit status 3 and says so.
pub fn net_script(n: &crate::spec::VmNetSpec, addresses: &std::collections::BTreeMap<String, Ipv4Addr>) -> String {
    let mut s = String::from("set -e\n");
    if n.offloads == Some(false) {
        s.push_str("ethtool -K eth0 tso off gso off gro off\n");
        // TCP builds GSO super-packets even with gso off (Linux >= 4.17 turns GSO on for
        // every TCP socket and segments in software after the qdisc); one segment per
        // skb is the only way netem sees, and drops, single TCP segments.
        s.push_str("ip link set dev eth0 gso_max_segs 1\n");
    }
    if let Some(e) = &n.egress {
        let args = netem_args(e);
        if !netem_is_filtered(e) {
            s.push_str(&format!("tc qdisc replace dev eth0 root netem {args}\n"));
        } else {
            s.push_str(
                "tc qdisc replace dev eth0 root handle 1: prio bands 3 priomap 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1\n",
            );
            s.push_str(&format!("tc qdisc add dev eth0 parent 1:3 handle 30: netem {args}\n"));
            let destinations: Vec<String> = if e.to.is_empty() {
                vec!["0.0.0.0/0".into()]
            } else {
                e.to.iter().filter_map(|vm| addresses.get(vm)).map(|a| format!("{a}/32")).collect()
            };
            for d in destinations {
                s.push_str(&format!(
                    "tc filter add dev eth0 parent 1: protocol ip prio 1 u32 match ip dst {d} flowid 1:3\n"
                ));
            }
        }
        if let Some(seed) = e.seed {
            s.push_str(&format!(
                "tc -d qdisc show dev eth0 | grep -q ' seed {seed}' || {{ echo \"netem on $(uname -r) ignored \
                 'seed {seed}': seeded loss needs Linux >= 6.6 (and iproute2 >= 6.6) in this VM\" >&2; exit 3; }}\n"
            ));
        }
    }
    s.push_str("tc qdisc show dev eth0 | sed 's/^/qdisc: /'\n");
    s.push_str("tc filter show dev eth0 | sed 's/^/filter: /'\n");
    s.push_str("ethtool -k eth0 | grep -E '^(tcp-segmentation-offload|generic-segmentation-offload|generic-receive-offload):' | sed 's/^/offload /'\n");
    s.push_str("ip -d link show dev eth0 | grep -o 'gso_max_segs [0-9]*' | sed 's/^/offload /'\n");
    s
}
