//! The report's scenario as a preset of the measurement layer: an NFS server makes a
//! file with `dd`, and clients on the kernels under test time `cat FILE > /dev/null`
//! between `netstat -s`, `nfsstat` and `/proc/self/mountstats`, on a fresh mount with
//! dropped caches each time.
//!
//! [`expand`] adds the server's steps (`nfs-file`, `nfs-server-ready`) and each
//! client's `client_setup` step, and returns one [`MeasurementPlan`] named `nfs-read`:
//!
//! | part | value |
//! |---|---|
//! | setup | `mkdir -p MP && mount -t nfs [-o OPTIONS] SERVER:EXPORT MP && sync && echo 3 > /proc/sys/vm/drop_caches` (and the read-ahead, when set) |
//! | run | `cat MP/FILE > /dev/null` |
//! | teardown | `umount MP` |
//! | observers | `netstat`, `nfsstat`, `mountstats` of MP (READ); every seeded netem of the suite (remote) |
//! | records | `mount` (its `/proc/mounts` line) and `read-ahead` (`/sys/class/bdi/<dev>/read_ahead_kb`) before; `bytes` (`wc -c < FILE`) after |
//! | checks | `bytes` equals the file's size; `read-ahead` equals `read_ahead_kb` when set |
//!
//! [`results`] adds what only this scenario knows: the server's profile, each client's
//! negotiated mount, the report-layout text files, the table and the snapshot view.

pub mod report;
pub mod results;
pub mod snapshot;

use std::net::Ipv4Addr;
use std::time::Duration;

use crate::plan::measurement::{
    Better, Bytes, Check, Commands, Expect, MeasuredVm, MeasurementPlan, Metric, Observer, ObserverKind, Record,
    RemoteObserver, Scope, SnapshotPolicy, When,
};
use crate::plan::nfs_read::NfsPlan;
use crate::plan::{names, shell_quote, StepKind, StepPlan, VmPlan};
use crate::schema::nfs_read::NfsReadSpec;
use crate::schema::SuiteSpec;

/// The scenario's name in step kinds and measurement presets.
pub const SCENARIO: &str = "nfs_read";
/// Default NFS mount point on clients.
pub const DEFAULT_MOUNT_POINT: &str = "/mnt/home";
/// Section of the `/proc/mounts` line of the client's mount.
pub const RECORD_MOUNT: &str = "mount";
/// Section of the mount's read-ahead, KiB.
pub const RECORD_READ_AHEAD: &str = "read-ahead";
/// Section of the bytes `wc -c` counted in the file.
pub const RECORD_BYTES: &str = "bytes";

/// The export the scenario needs on VM `vm`: `nfs_read.export` when `vm` is the
/// scenario's server.
pub fn export_of(suite: &SuiteSpec, vm: &str) -> Option<String> {
    suite.nfs_read.as_ref().filter(|n| n.server == vm).map(|n| clean_export(&n.export))
}

fn clean_export(export: &str) -> String {
    let e = export.trim_end_matches('/');
    if e.is_empty() {
        "/".into()
    } else {
        e.to_string()
    }
}

/// Adds the server's and clients' scenario steps to `vms` and returns the scenario's
/// facts and its measurement (iterations not yet expanded). Panics on VM names that
/// validation rejects.
pub fn expand(n: &NfsReadSpec, suite: &SuiteSpec, vms: &mut [VmPlan], timeout: Duration) -> (NfsPlan, MeasurementPlan) {
    let export = clean_export(&n.export);
    let server_addr = vms.iter().find(|v| v.name == n.server).expect("validated server").address;
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
        read_ahead_kb: n.read_ahead_kb,
        client_read_ahead_kb: n.client_read_ahead_kb.clone(),
    };
    add_server_steps(n, &export, vms, timeout);
    for (c, setup) in &n.client_setup {
        let vm = vms.iter_mut().find(|v| &v.name == c).expect("validated client");
        vm.steps.push(
            StepPlan::new(names::NFS_CLIENT_SETUP, setup.clone(), scenario_step(), timeout)
                .origin(&format!("nfs_read.client_setup.{c}")),
        );
    }
    let m = measurement(n, suite, &plan, server_addr);
    (plan, m)
}

/// The step kind of the scenario's own steps.
fn scenario_step() -> StepKind {
    StepKind::Scenario { scenario: SCENARIO.into() }
}

/// The server's steps, right after its profile: make the file exactly as the report
/// did (`nfs-file`), then record the export and the RPC services (`nfs-server-ready`);
/// clients wait for that last step.
fn add_server_steps(n: &NfsReadSpec, export: &str, vms: &mut [VmPlan], timeout: Duration) {
    // Making the file and checking the server are the runner's own steps: never less
    // than the default timeout (the reads and client_setup keep the suite's).
    let setup_timeout = timeout.max(crate::plan::DEFAULT_STEP_TIMEOUT);
    let server = vms.iter_mut().find(|v| v.name == n.server).expect("validated server");
    let path = format!("{export}/{}", n.file.name);
    let dir = path.rsplit_once('/').map(|(d, _)| d.to_string()).unwrap_or_else(|| export.to_string());
    let pos = server.steps.iter().position(|s| matches!(s.kind, StepKind::Profile { .. })).map_or(0, |p| p + 1);
    let file_step = StepPlan::new(
        names::NFS_FILE,
        format!(
            "mkdir -p {d} && cd {d} && dd if=/dev/zero of={f} bs={bs} count={c} && sync && ls -l {f}",
            d = shell_quote(&dir),
            f = shell_quote(path.rsplit('/').next().unwrap_or(&path)),
            bs = n.file.block_size,
            c = n.file.count
        ),
        scenario_step(),
        setup_timeout,
    )
    .origin("nfs_read.file");
    let ready_step = StepPlan::new(
        names::NFS_SERVER_READY,
        "exportfs -v && rpcinfo -p && cat /proc/fs/nfsd/versions && cat /proc/fs/nfsd/threads".into(),
        scenario_step(),
        setup_timeout,
    )
    .origin("nfs_read.server");
    server.steps.insert(pos, file_step);
    server.steps.insert(pos + 1, ready_step);
}

/// The `/sys` file of the read-ahead (KiB) of the mount at `mp`, as a shell word.
fn read_ahead_file(mp: &str) -> String {
    format!("/sys/class/bdi/$(mountpoint -d {})/read_ahead_kb", shell_quote(mp))
}

/// Each client's commands: mount the export from `server_addr` with its options on
/// fresh caches (and set its read-ahead), `cat` the file, unmount.
fn measured_vms(plan: &NfsPlan, server_addr: Ipv4Addr) -> Vec<MeasuredVm> {
    let mp = &plan.mount_point;
    let file = format!("{}/{}", mp.trim_end_matches('/'), plan.file_name);
    let bdi = read_ahead_file(mp);
    plan.clients
        .iter()
        .map(|c| {
            let options = plan.mount_options_of(c);
            let opts = if options == "defaults" { String::new() } else { format!("-o {options} ") };
            let mut setup = format!(
                "mkdir -p {m} && mount -t nfs {opts}{server_addr}:{e} {m} && sync && echo 3 > /proc/sys/vm/drop_caches",
                m = shell_quote(mp),
                e = shell_quote(&plan.export),
            );
            if let Some(kb) = plan.read_ahead_of(c) {
                setup.push_str(&format!(" && echo {kb} > {bdi}"));
            }
            MeasuredVm {
                vm: c.clone(),
                commands: Commands {
                    setup: Some(setup),
                    run: format!("cat {} > /dev/null", shell_quote(&file)),
                    teardown: Some(format!("umount {}", shell_quote(mp))),
                },
            }
        })
        .collect()
}

/// The checks: `bytes` equals the file's size; `read-ahead` equals a client's
/// read-ahead when it has one.
fn checks(plan: &NfsPlan) -> Vec<Check> {
    let mut checks =
        vec![Check { section: RECORD_BYTES.into(), only: None, expect: Expect::Equals(plan.file_bytes.to_string()) }];
    for c in &plan.clients {
        if let Some(kb) = plan.read_ahead_of(c) {
            checks.push(Check {
                section: RECORD_READ_AHEAD.into(),
                only: Some(c.clone()),
                expect: Expect::Equals(kb.to_string()),
            });
        }
    }
    checks
}

/// The `nfs-read` measurement of `plan` (see the module's table).
fn measurement(n: &NfsReadSpec, suite: &SuiteSpec, plan: &NfsPlan, server_addr: Ipv4Addr) -> MeasurementPlan {
    let mp = plan.mount_point.clone();
    let file = format!("{}/{}", mp.trim_end_matches('/'), plan.file_name);
    MeasurementPlan {
        name: names::NFS_READ_MEASUREMENT.into(),
        preset: Some(SCENARIO.into()),
        vms: measured_vms(plan, server_addr),
        baseline: plan.baseline.clone(),
        groups: vec![],
        repeat: n.repeat.unwrap_or(crate::plan::DEFAULT_REPEAT),
        adaptive: None,
        warmup: n.warmup.unwrap_or(0),
        concurrent: n.concurrent.unwrap_or(false),
        calibrate: false,
        expect_exit: 0,
        observers: vec![
            Observer::new(ObserverKind::named("netstat")),
            Observer::new(ObserverKind::named("nfsstat")),
            Observer::scoped(ObserverKind::named("mountstats"), Scope { mount: mp.clone(), ops: vec!["READ".into()] }),
        ],
        remote: suite
            .vms
            .iter()
            .filter(|v| suite.seeded_netem(&v.name))
            .map(|v| RemoteObserver::Netem { vm: v.name.clone(), seeded: true })
            .collect(),
        actions: vec![],
        records: vec![
            Record {
                name: RECORD_MOUNT.into(),
                command: format!("grep {} /proc/mounts", shell_quote(&format!(" {mp} "))),
                when: When::Before,
            },
            Record {
                name: RECORD_READ_AHEAD.into(),
                command: format!("cat {}", read_ahead_file(&mp)),
                when: When::Before,
            },
            Record { name: RECORD_BYTES.into(), command: format!("wc -c < {}", shell_quote(&file)), when: When::After },
        ],
        bytes: Some(Bytes::Record(RECORD_BYTES.into())),
        output_metric: None,
        metric: Metric { name: crate::plan::DEFAULT_METRIC.into(), better: Better::Lower },
        checks: checks(plan),
        table: vec![],
        snapshot: SnapshotPolicy {
            verdict: n.snapshot_verdicts.unwrap_or_default(),
            verdict_by_vm: n.client_snapshot_verdicts.clone(),
            outcome: true,
            signs: vec![],
            values: n.snapshot_values.clone(),
            sections: vec![],
        },
        verdict: crate::plan::measurement::VerdictPolicy::from_specs(suite.verdict.as_ref(), None),
        iterations: vec![],
    }
}
