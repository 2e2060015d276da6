//! What only the `nfs_read` scenario adds to its measurement's results: the server's
//! profile, each client's negotiated mount and read-ahead, the READ operation's RPC
//! statistics per read, the report-layout text files, the notes, the table printed at
//! the end of a run, and the snapshot view.
//!
//! Writes `nfs/<client>/read-<N>.txt` in the run folder: the report's layout — `uname
//! -r`, GNU time's output, `netstat -s`, `nfsstat` — one file per client and read.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::{RECORD_MOUNT, RECORD_READ_AHEAD};
use crate::measure::analysis::MeasurementResult;
use crate::measure::format::{fmt_mb_s, netem_line};
use crate::measure::observer::op_stats;
use crate::measure::script::Section;
use crate::parse::mountstats::OpStats;
use crate::parse::procmounts::{mount_info, MountInfo};
use crate::plan::measurement::MeasurementPlan;
use crate::plan::measurement::ObserverKind;
use crate::plan::nfs_read::NfsPlan;
use crate::plan::StepKind;
use crate::run::record::RunDirError;
use crate::run::record::RunRecord;

/// The scenario's part of `results.json` (`nfs_read`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct NfsResults {
    /// Server VM, its kernel and what its profile reported.
    pub server: ServerResult,
    /// Size of the file, bytes.
    pub file_bytes: u64,
    /// Baseline client.
    pub baseline: String,
    /// Clients in suite order.
    pub clients: Vec<NfsClient>,
    /// Things a reader must know (e.g. why no client used UDP).
    pub notes: Vec<String>,
}

/// The server side.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ServerResult {
    /// VM name.
    pub vm: String,
    /// Kernel release (of the kernel image it booted).
    pub kernel_release: String,
    /// Profile output lines (`key: value`), e.g. `nfsd versions: -2 +3 -4`.
    pub profile: BTreeMap<String, String>,
}

/// One client's NFS facts.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct NfsClient {
    /// VM name.
    pub vm: String,
    /// Negotiated mount (of its first read).
    pub mount: MountInfo,
    /// Its measured reads.
    pub reads: Vec<NfsRead>,
    /// The options asked for that its mount (of its first read) negotiated otherwise,
    /// e.g. `rsize 1048576 asked, 65536 negotiated`
    /// ([`super::report::negotiated_otherwise`]); empty when all were granted.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub negotiated_otherwise: Vec<String>,
}

/// One read's NFS facts (its numbers are in the measurement's iteration).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct NfsRead {
    /// 1-based read (the measurement's iteration).
    pub iteration: u32,
    /// The report-layout text file, relative to the run folder.
    pub raw: String,
    /// What the mount negotiated (`/proc/mounts`) and its read-ahead.
    pub mount: MountInfo,
    /// The READ operation's RPC statistics over the `cat`, from `/proc/self/mountstats`
    /// before and after it: operations, transmissions (retransmissions included), major
    /// timeouts and the summed queue, RTT and execute milliseconds. `None` when either
    /// side could not be read.
    pub rpc_read: Option<OpStats>,
}

/// Adds the scenario's facts to the analysed measurement `m` (the preset's, planned as
/// `mp`), writing the report-layout files under `dir` when `write` (through
/// [`crate::path_io::Folder`]: a VM name can't lead outside).
///
/// Errors: a file can't be read or written.
pub fn analyse(
    plan: &NfsPlan,
    mp: &MeasurementPlan,
    m: &MeasurementResult,
    rec: &RunRecord,
    dir: &Path,
    write: bool,
) -> Result<NfsResults, RunDirError> {
    let folder = crate::path_io::Folder::open(dir)?;
    let server_vm = rec.vm(&plan.server);
    let mut profile = BTreeMap::new();
    if let Some(s) = server_vm.and_then(|v| v.steps.iter().find(|s| matches!(s.kind, StepKind::Profile { .. }))) {
        for line in s.stdout_text(dir)?.lines() {
            if let Some((k, v)) = line.split_once(": ") {
                profile.insert(k.trim().to_string(), v.trim().to_string());
            }
        }
    }
    let server = ServerResult {
        vm: plan.server.clone(),
        kernel_release: server_vm.map(|v| v.kernel_release.clone()).unwrap_or_default(),
        profile,
    };
    let mut clients = Vec::new();
    for v in &m.vms {
        let mut reads = Vec::new();
        for it in v.iterations.iter().filter(|i| i.elapsed_s.is_some()) {
            let s = &it.raw.sections;
            let mount = mount_info(
                s.text(Section::Record(RECORD_MOUNT)).lines().next().unwrap_or(""),
                s.get(Section::Record(RECORD_READ_AHEAD)),
            );
            let rel = format!("nfs/{}/read-{}.txt", v.vm, it.iteration);
            let layout = [
                Section::Uname,
                Section::Time,
                Section::After(ObserverKind::named("netstat")),
                Section::After(ObserverKind::named("nfsstat")),
            ];
            if write {
                folder.create_dirs(&format!("nfs/{}", v.vm))?;
                folder.write(&rel, layout.iter().map(|x| s.text(*x)).collect::<String>().as_bytes(), 0o644)?;
            }
            let rpc_read =
                op_stats(&it.raw.after, "READ").zip(op_stats(&it.raw.before, "READ")).map(|(a, b)| a.since(&b));
            reads.push(NfsRead { iteration: it.iteration, raw: rel, mount, rpc_read });
        }
        let mount = reads.first().map(|r| r.mount.clone()).unwrap_or_default();
        let negotiated_otherwise = super::report::negotiated_otherwise(plan.mount_options_of(&v.vm), &mount);
        clients.push(NfsClient { vm: v.vm.clone(), mount, reads, negotiated_otherwise });
    }
    let mut notes = Vec::new();
    let non_udp: Vec<&NfsClient> = clients.iter().filter(|c| udp_note_applies(plan, rec, c)).collect();
    if !non_udp.is_empty() {
        notes.push(format!(
            "mount options {:?}: {} negotiated NFS over {}. Debian's kernels are built with CONFIG_NFS_DISABLE_UDP_SUPPORT=y and cannot mount NFS over UDP, the transport of the report's 2003 setup; see the source-built kernel suites for UDP.",
            plan.mount_options,
            non_udp.iter().map(|c| c.vm.as_str()).collect::<Vec<_>>().join(", "),
            non_udp
                .iter()
                .filter_map(|c| c.mount.transport.clone())
                .collect::<std::collections::BTreeSet<_>>()
                .into_iter()
                .collect::<Vec<_>>()
                .join("/")
        ));
    }
    if mp.repeat < 3 {
        notes.push(format!(
            "repeat = {}: with fewer than 3 repeats per client the verdict rests on the medians alone",
            mp.repeat
        ));
    }
    Ok(NfsResults { server, file_bytes: plan.file_bytes, baseline: plan.baseline.clone(), clients, notes })
}

/// Whether the note on Debian kernels and UDP applies to client `c`: it booted a Debian
/// kernel (`run.json`'s label of it), its mount is not over UDP although its options asked for UDP (`proto=udp`,
/// `udp`) or left the transport to negotiation on NFSv2/v3 (where UDP is a transport the
/// kernel could have chosen, the default of the 2.4/2.6 era). Not for NFSv4 mounts
/// (never over UDP), nor for clients that asked for TCP.
fn udp_note_applies(plan: &NfsPlan, rec: &RunRecord, c: &NfsClient) -> bool {
    // `run.json` names a Debian kernel `kernel 6.1 (linux-image-…)` (its label), a
    // source-built one `kernel linux-source-6.1 from source`.
    let debian = rec.vm(&c.vm).is_some_and(|v| v.kernel.contains("(linux-image-"));
    let Some(transport) = c.mount.transport.as_deref() else { return false };
    let proto = plan.mount_options_of(&c.vm).split(',').rev().find_map(|o| match o.trim() {
        "udp" | "tcp" => Some(o.trim()),
        o => o.strip_prefix("proto="),
    });
    let v2_or_v3 = matches!(c.mount.nfs_version.as_deref(), Some("2" | "3"));
    debian && transport != "udp" && (proto == Some("udp") || (proto.is_none() && v2_or_v3))
}

/// The comparison table printed at the end of a run of an `nfs_read` suite.
pub fn table(r: &NfsResults, m: &MeasurementResult) -> String {
    let mut t = String::new();
    let opt = |v: Option<&Option<i64>>| v.copied().flatten().map_or("-".to_string(), |v| v.to_string());
    let verdict_of = |v: &crate::measure::analysis::VmResult| {
        if v.vm == r.baseline {
            "baseline".to_string()
        } else {
            v.verdict.clone().unwrap_or("-".into())
        }
    };
    let nw =
        m.vms.iter().map(|v| format!("{} ({})", v.kernel_release, v.vm).chars().count()).max().unwrap_or(0).max(42);
    let vw = m.vms.iter().map(|v| verdict_of(v).chars().count()).max().unwrap_or(0).max(20);
    let _ = writeln!(
        t,
        "{:<nw$} {:>9} {:>7} {:>6} {:<vw$} {:>11} {:>11} {:>7}",
        "kernel (client)", "median s", "MB/s", "ratio", "verdict", "reasm fail", "RPC retrans", "mount"
    );
    let client = |vm: &str| r.clients.iter().find(|c| c.vm == vm);
    for v in &m.vms {
        let verdict = verdict_of(v);
        let c = client(&v.vm);
        let info = c.map_or(MountInfo::default(), |c| c.mount.clone());
        let mut mount =
            format!("v{}/{}", info.nfs_version.as_deref().unwrap_or("?"), info.transport.as_deref().unwrap_or("?"));
        if c.is_some_and(|c| !c.negotiated_otherwise.is_empty()) {
            // Which options: the line `negotiated otherwise than asked` below the table.
            let size = |x: Option<u64>| x.map_or("?".into(), |x| x.to_string());
            mount.push_str(&format!(" rsize={} wsize={} (not as asked)", size(info.rsize), size(info.wsize)));
        }
        let _ = writeln!(
            t,
            "{:<nw$} {:>9} {:>7} {:>6} {:<vw$} {:>11} {:>11} {:>7}",
            format!("{} ({})", v.kernel_release, v.vm),
            v.elapsed_s.as_ref().map_or("-".into(), |s| format!("{:.2}", s.median)),
            v.median_mb_s.map_or("-".into(), fmt_mb_s),
            v.ratio_to_baseline.map_or("-".into(), |x| format!("{x:.2}")),
            verdict,
            opt(v.totals.get("ip_reassembly_failures")),
            opt(v.totals.get("rpc_retransmissions")),
            mount
        );
    }
    let n = r.clients.first().map_or(0, |c| c.reads.len());
    let _ = writeln!(
        t,
        "({n} repeat(s) per client; counters are deltas over the reads, summed over repeats; MB = 10^6 bytes)"
    );
    for v in &m.vms {
        let Some(c) = client(&v.vm) else { continue };
        let stats: Vec<_> = c.reads.iter().filter_map(|rd| rd.rpc_read).filter(|s| s.ops > 0).collect();
        if c.mount.transport.as_deref() == Some("udp") && !stats.is_empty() {
            let per = |f: &dyn Fn(&OpStats) -> String| stats.iter().map(f).collect::<Vec<_>>().join(" ");
            let _ = writeln!(
                t,
                "RPC READ (mountstats), {}: retransmissions {}; major timeouts {}; mean RTT ms {}; mean execute ms {}",
                c.vm,
                per(&|s| (s.transmissions.saturating_sub(s.ops)).to_string()),
                per(&|s| s.major_timeouts.to_string()),
                per(&|s| format!("{:.1}", s.rtt_ms as f64 / s.ops as f64)),
                per(&|s| format!("{:.1}", s.execute_ms as f64 / s.ops as f64)),
            );
        }
        netem_line(&mut t, v);
    }
    for c in r.clients.iter().filter(|c| !c.negotiated_otherwise.is_empty()) {
        let _ = writeln!(t, "negotiated otherwise than asked, {}: {}", c.vm, c.negotiated_otherwise.join("; "));
    }
    for h in crate::report::hints::count_hints(m) {
        let _ = writeln!(t, "{h}");
    }
    for note in &r.notes {
        let _ = writeln!(t, "note: {note}");
    }
    for p in &m.problems {
        let _ = writeln!(t, "problem: {p}");
    }
    t
}
