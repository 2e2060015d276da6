//! Results of the `nfs_read` scenario: each measured read's output is split into its
//! sections, parsed ([`crate::parse`]), turned into counter deltas and derived metrics
//! ([`crate::metrics`]), summarised over repeats and compared with the baseline client.
//!
//! Writes, in the run folder:
//! - `nfs/<client>/read-<N>.txt`: the report's layout — `uname -r`, GNU time's
//!   output, `netstat -s`, `nfsstat` — one text file per client and repeat;
//! - `results.json`: the schema of [`NfsResults`] (`schema: 1`; fields are only ever
//!   added, never renamed or removed, without bumping `schema`).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use serde::Serialize;

use crate::metrics::{compare, summarize, Comparison, Measurement, Snapshot, Summary};
use crate::parse::{gnutime, mountstats, netstat, nfsstat};
use crate::plan::{NfsPlan, StepKind, SECTION_MARKER};
use crate::run::{RunRecord, StepStatus};

/// `results.json`.
#[derive(Debug, Clone, Serialize)]
pub struct NfsResults {
    /// Schema version (1).
    pub schema: u32,
    /// Suite name.
    pub suite: String,
    /// Server VM, its kernel and what its profile reported.
    pub server: ServerResult,
    /// Size of the file, bytes.
    pub file_bytes: u64,
    /// Baseline client VM name.
    pub baseline: String,
    /// Clients in suite order.
    pub clients: Vec<ClientResult>,
    /// Things a reader must know (e.g. why no client used UDP).
    pub notes: Vec<String>,
    /// Checks that failed (wrong byte count, unparsable output, …).
    pub problems: Vec<String>,
}

/// The server side.
#[derive(Debug, Clone, Serialize)]
pub struct ServerResult {
    /// VM name.
    pub vm: String,
    /// Kernel release.
    pub kernel_release: String,
    /// Profile output lines (`key: value`), e.g. `nfsd versions: -2 +3 -4`.
    pub profile: BTreeMap<String, String>,
}

/// What a client's mount negotiated, from `/proc/mounts`, and its read-ahead.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct MountInfo {
    /// `vers=` (e.g. `3`, `4.2`).
    pub nfs_version: Option<String>,
    /// `proto=` (`tcp`, `udp`).
    pub transport: Option<String>,
    /// `rsize=`, bytes.
    pub rsize: Option<u64>,
    /// `wsize=`, bytes.
    pub wsize: Option<u64>,
    /// Read-ahead of the mount in force during the read, KiB, from
    /// `/sys/class/bdi/<device>/read_ahead_kb` (the `read-ahead` section).
    pub read_ahead_kb: Option<u64>,
    /// The whole options field.
    pub options: String,
}

/// One measured read.
#[derive(Debug, Clone, Serialize)]
pub struct ReadResult {
    /// 1-based repeat.
    pub repeat: u32,
    /// The report-layout text file, relative to the run folder.
    pub raw: String,
    /// What the mount negotiated.
    pub mount: MountInfo,
    /// Derived metrics (counters are deltas over the `cat`).
    pub metrics: Measurement,
    /// Every counter that changed during the read, `name → delta`.
    pub changed_counters: BTreeMap<String, i64>,
    /// Counters absent before the read and present after it, `name → value after`
    /// (`netstat -s` leaves out some counters while they are zero, e.g. the `Ip`
    /// reassembly lines before the first fragment arrives).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub appeared_counters: BTreeMap<String, u64>,
    /// The READ operation's RPC statistics over the `cat`, from `/proc/self/mountstats`
    /// before and after it: operations, transmissions (retransmissions included), major
    /// timeouts and the summed queue, RTT and execute milliseconds. `None` when either
    /// side could not be read.
    pub rpc_read: Option<crate::parse::mountstats::OpStats>,
    /// What a seeded netem (`net.egress.seed`) did during this read, one entry per VM
    /// with one: the same seed should give the same drops read after read.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub netem: Vec<NetemReadStats>,
}

/// Packets a VM's netem passed and dropped during one read: the difference of its
/// `tc -s qdisc show` counters (the `Sent … pkt (dropped …)` line of the netem qdisc)
/// printed just before the read (by its reseed step) and just before the next read
/// (or after the last one).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NetemReadStats {
    /// VM whose egress netem this is.
    pub vm: String,
    /// Packets netem sent on (IP fragments count one each).
    pub sent_packets: u64,
    /// Packets netem dropped.
    pub dropped_packets: u64,
}

/// The netem qdisc's `(packets sent, packets dropped)` from `tc -s qdisc show` output
/// (iproute2 4.x–6.x: `qdisc netem …` then ` Sent B bytes P pkt (dropped D, …`).
/// `None` when there is no netem qdisc or its counters line is missing.
pub fn netem_counters(tc_stats: &str) -> Option<(u64, u64)> {
    let mut lines = tc_stats.lines().skip_while(|l| !l.trim_start().starts_with("qdisc netem"));
    lines.next()?;
    let sent = lines.next()?.trim();
    let words: Vec<&str> = sent.split_whitespace().collect();
    let pkts = words.iter().position(|w| *w == "pkt").and_then(|i| i.checked_sub(1)).map(|i| words[i])?;
    let dropped = words.iter().position(|w| *w == "(dropped").map(|i| words.get(i + 1))??;
    Some((pkts.parse().ok()?, dropped.trim_end_matches(',').parse().ok()?))
}

/// For `client`'s read step `read_step`, each seeded VM's netem counters over the read.
fn netem_over_read(rec: &RunRecord, client: &str, read_step: &str) -> Vec<NetemReadStats> {
    let reseed = crate::plan::reseed_step_name(client, read_step);
    let mut out = Vec::new();
    for vm in &rec.vms {
        let Some(i) = vm.steps.iter().position(|s| s.name == reseed) else { continue };
        let next = vm.steps[i + 1..].iter().find(|s| matches!(s.kind, StepKind::NetReseed | StepKind::NetStats));
        let (Some(a), Some(b)) =
            (netem_counters(&vm.steps[i].stdout_text), next.and_then(|n| netem_counters(&n.stdout_text)))
        else {
            continue;
        };
        out.push(NetemReadStats {
            vm: vm.name.clone(),
            sent_packets: b.0.saturating_sub(a.0),
            dropped_packets: b.1.saturating_sub(a.1),
        });
    }
    out
}

/// One client across its repeats.
#[derive(Debug, Clone, Serialize)]
pub struct ClientResult {
    /// VM name.
    pub vm: String,
    /// `uname -r` printed in the guest.
    pub kernel_release: String,
    /// Negotiated mount (of the first read).
    pub mount: MountInfo,
    /// Reads.
    pub reads: Vec<ReadResult>,
    /// Elapsed seconds over the repeats.
    pub elapsed_s: Option<Summary>,
    /// Median throughput, MB/s (10^6 bytes/s).
    pub median_mb_s: Option<f64>,
    /// Median elapsed ÷ baseline median elapsed.
    pub ratio_to_baseline: Option<f64>,
    /// Comparison with the baseline (absent for the baseline itself).
    pub comparison: Option<Comparison>,
    /// Sum over repeats of IP reassembly failures.
    pub ip_reassembly_failures: Option<i64>,
    /// Sum over repeats of fragments dropped after timeout.
    pub ip_fragments_dropped_after_timeout: Option<i64>,
    /// Sum over repeats of RPC calls.
    pub rpc_calls: Option<i64>,
    /// Sum over repeats of RPC retransmissions.
    pub rpc_retransmissions: Option<i64>,
    /// Sum over repeats of TCP segments retransmitted.
    pub tcp_segments_retransmitted: Option<i64>,
}

/// Splits the measurement script's stdout into `section name → text`.
pub fn sections(stdout: &str) -> BTreeMap<String, String> {
    let mut out: BTreeMap<String, String> = BTreeMap::new();
    let mut current: Option<String> = None;
    for line in stdout.lines() {
        if let Some(name) = line.strip_prefix(SECTION_MARKER) {
            current = Some(name.trim().to_string());
            out.entry(name.trim().to_string()).or_default();
        } else if let Some(c) = &current {
            let s = out.get_mut(c).expect("inserted");
            s.push_str(line);
            s.push('\n');
        }
    }
    out
}

/// Parses the options field of a `/proc/mounts` line.
///
/// `line` is the mount's `/proc/mounts` line; `read_ahead` the content of its
/// `read_ahead_kb` file (`None` or unparsable: not recorded).
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

/// Whether the read-ahead in force (`mount.read_ahead_kb`) differs from what the suite
/// set (`wanted`, KiB): a message for the results' problems, or `None` when the suite
/// set nothing or the kernel took the value.
fn read_ahead_problem(wanted: Option<u32>, mount: &MountInfo) -> Option<String> {
    let kb = wanted?;
    (mount.read_ahead_kb != Some(u64::from(kb))).then(|| match mount.read_ahead_kb {
        Some(got) => format!("read-ahead is {got} KiB, the suite set {kb}"),
        None => format!("read-ahead was not recorded, the suite set {kb} KiB"),
    })
}

/// Throughput for the table: one decimal from 1 MB/s up, two significant digits below
/// (a lossy read of a few MB runs at hundredths of a MB/s, which `{:.1}` prints as 0.0).
fn fmt_mb_s(v: f64) -> String {
    if v >= 1.0 || v == 0.0 {
        format!("{v:.1}")
    } else {
        let decimals = (1 - v.log10().floor() as i32).max(1) as usize;
        format!("{v:.decimals$}")
    }
}

fn sum(mut values: impl Iterator<Item = Option<i64>>) -> Option<i64> {
    values.try_fold(0, |acc, v| Some(acc + v?))
}

/// Analyses a finished run of an `nfs_read` suite and writes its files into `dir`.
pub fn analyse(plan: &NfsPlan, rec: &RunRecord, dir: &Path) -> std::io::Result<NfsResults> {
    let mut problems = Vec::new();
    let server_vm = rec.vms.iter().find(|v| v.name == plan.server);
    let mut profile = BTreeMap::new();
    if let Some(s) = server_vm.and_then(|v| v.steps.iter().find(|s| matches!(s.kind, StepKind::Profile { .. }))) {
        for line in s.stdout_text.lines() {
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
    for c in &plan.clients {
        let Some(vm) = rec.vms.iter().find(|v| &v.name == c) else { continue };
        let mut reads = Vec::new();
        let mut release = String::new();
        for st in &vm.steps {
            let StepKind::NfsMeasure { repeat } = st.kind else { continue };
            if st.status != StepStatus::Passed {
                problems.push(format!("{c}: read {repeat} did not pass ({:?})", st.status));
                continue;
            }
            let sec = sections(&st.stdout_text);
            let text = |k: &str| sec.get(k).map(String::as_str).unwrap_or("");
            release = text("uname").trim().to_string();
            let time = match gnutime::parse(text("time")) {
                Ok(t) => t,
                Err(e) => {
                    problems.push(format!("{c}: read {repeat}: {e}"));
                    continue;
                }
            };
            let snap = |n: &str, s: &str| Snapshot {
                netstat: netstat::parse(text(n)).ok(),
                nfsstat: nfsstat::parse(text(s)).ok(),
            };
            let before = snap("before-netstat", "before-nfsstat");
            let after = snap("netstat", "nfsstat");
            for (what, ok) in [
                ("netstat -s", after.netstat.is_some() && before.netstat.is_some()),
                ("nfsstat", after.nfsstat.is_some() && before.nfsstat.is_some()),
            ] {
                if !ok {
                    problems.push(format!("{c}: read {repeat}: could not parse {what}"));
                }
            }
            let op_read = |sec: &str| {
                mountstats::parse(text(sec), &plan.mount_point).ok().and_then(|m| m.ops.get("READ").copied())
            };
            let rpc_read = op_read("mountstats").zip(op_read("before-mountstats")).map(|(a, b)| a.since(&b));
            let bytes: u64 = text("bytes").trim().parse().unwrap_or(0);
            if bytes != plan.file_bytes {
                problems.push(format!("{c}: read {repeat}: read {bytes} bytes, expected {}", plan.file_bytes));
            }
            let mount =
                mount_info(text("mount").lines().next().unwrap_or(""), sec.get("read-ahead").map(String::as_str));
            if let Some(p) = read_ahead_problem(plan.read_ahead_kb, &mount) {
                problems.push(format!("{c}: read {repeat}: {p}"));
            }
            let metrics = Measurement::new(bytes, &time, &before, &after);
            let deltas = crate::metrics::delta(&before.counters(), &after.counters());
            let changed = deltas.changed();
            let raw_rel = format!("nfs/{c}/read-{repeat}.txt");
            let raw_path = dir.join(&raw_rel);
            std::fs::create_dir_all(raw_path.parent().expect("has parent"))?;
            std::fs::write(
                &raw_path,
                format!("{}{}{}{}", text("uname"), text("time"), text("netstat"), text("nfsstat")),
            )?;
            reads.push(ReadResult {
                repeat,
                raw: raw_rel,
                mount,
                metrics,
                changed_counters: changed,
                appeared_counters: deltas.only_after.clone(),
                rpc_read,
                netem: netem_over_read(rec, c, &st.name),
            });
        }
        let elapsed: Vec<f64> = reads.iter().map(|r| r.metrics.elapsed_s).collect();
        let mut mbs: Vec<f64> = reads.iter().filter_map(|r| r.metrics.throughput_mb_s).collect();
        mbs.sort_by(f64::total_cmp);
        clients.push(ClientResult {
            vm: c.clone(),
            kernel_release: release,
            mount: reads.first().map(|r| r.mount.clone()).unwrap_or_default(),
            elapsed_s: summarize(&elapsed),
            median_mb_s: summarize(&mbs).map(|s| s.median),
            ratio_to_baseline: None,
            comparison: None,
            ip_reassembly_failures: sum(reads.iter().map(|r| r.metrics.ip_reassembly_failures)),
            ip_fragments_dropped_after_timeout: sum(reads.iter().map(|r| r.metrics.ip_fragments_dropped_after_timeout)),
            rpc_calls: sum(reads.iter().map(|r| r.metrics.rpc_calls)),
            rpc_retransmissions: sum(reads.iter().map(|r| r.metrics.rpc_retransmissions)),
            tcp_segments_retransmitted: sum(reads.iter().map(|r| r.metrics.tcp_segments_retransmitted)),
            reads,
        });
    }
    let base: Vec<f64> = clients
        .iter()
        .find(|c| c.vm == plan.baseline)
        .map(|c| c.reads.iter().map(|r| r.metrics.elapsed_s).collect())
        .unwrap_or_default();
    for c in &mut clients {
        let mine: Vec<f64> = c.reads.iter().map(|r| r.metrics.elapsed_s).collect();
        if let Some(cmp) = compare(&mine, &base) {
            c.ratio_to_baseline = Some(cmp.median_ratio);
            if c.vm != plan.baseline {
                c.comparison = Some(cmp);
            }
        }
    }
    let mut notes = Vec::new();
    let non_udp: Vec<&str> =
        clients.iter().filter(|c| c.mount.transport.as_deref() != Some("udp")).map(|c| c.vm.as_str()).collect();
    // Only clients that left the transport to negotiation: one that asked for TCP got it.
    let chose_transport =
        |c: &str| plan.mount_options_of(c).split(',').any(|o| o.starts_with("proto=") || o == "udp" || o == "tcp");
    let non_udp: Vec<&str> = non_udp.into_iter().filter(|c| !chose_transport(c)).collect();
    if !non_udp.is_empty() {
        notes.push(format!(
            "mount options {:?}: {} negotiated NFS over {}. Debian's kernels are built with CONFIG_NFS_DISABLE_UDP_SUPPORT=y and cannot mount NFS over UDP, the transport of the report's 2003 setup; see the source-built kernel suites for UDP.",
            plan.mount_options,
            non_udp.join(", "),
            clients
                .iter()
                .filter(|c| non_udp.contains(&c.vm.as_str()))
                .filter_map(|c| c.mount.transport.clone())
                .collect::<std::collections::BTreeSet<_>>()
                .into_iter()
                .collect::<Vec<_>>()
                .join("/")
        ));
    }
    if plan.repeat < 3 {
        notes.push(format!(
            "repeat = {}: with fewer than 3 repeats per client the verdict rests on the medians alone",
            plan.repeat
        ));
    }
    let results = NfsResults {
        schema: 1,
        suite: rec.suite.clone(),
        server,
        file_bytes: plan.file_bytes,
        baseline: plan.baseline.clone(),
        clients,
        notes,
        problems,
    };
    crate::run::write_json(&dir.join("results.json"), &results).map_err(std::io::Error::other)?;
    Ok(results)
}

/// The comparison table printed at the end of `vmrepro run`.
pub fn table(r: &NfsResults) -> String {
    let mut t = String::new();
    let opt = |v: Option<i64>| v.map_or("-".to_string(), |v| v.to_string());
    let _ = writeln!(
        t,
        "{:<42} {:>9} {:>7} {:>6} {:<20} {:>11} {:>11} {:>7}",
        "kernel (client)", "median s", "MB/s", "ratio", "verdict", "reasm fail", "RPC retrans", "mount"
    );
    for c in &r.clients {
        let verdict = if c.vm == r.baseline {
            "baseline".to_string()
        } else {
            c.comparison.as_ref().map_or("-".into(), |x| x.verdict.to_string())
        };
        let mount = format!(
            "v{}/{}",
            c.mount.nfs_version.as_deref().unwrap_or("?"),
            c.mount.transport.as_deref().unwrap_or("?")
        );
        let _ = writeln!(
            t,
            "{:<42} {:>9} {:>7} {:>6} {:<20} {:>11} {:>11} {:>7}",
            format!("{} ({})", c.kernel_release, c.vm),
            c.elapsed_s.as_ref().map_or("-".into(), |s| format!("{:.2}", s.median)),
            c.median_mb_s.map_or("-".into(), fmt_mb_s),
            c.ratio_to_baseline.map_or("-".into(), |v| format!("{v:.2}")),
            verdict,
            opt(c.ip_reassembly_failures),
            opt(c.rpc_retransmissions),
            mount
        );
    }
    let n = r.clients.first().map_or(0, |c| c.reads.len());
    let _ = writeln!(
        t,
        "({} repeat(s) per client; counters are deltas over the reads, summed over repeats; MB = 10^6 bytes)",
        n
    );
    for c in &r.clients {
        let stats: Vec<_> = c.reads.iter().filter_map(|rd| rd.rpc_read).filter(|s| s.ops > 0).collect();
        if c.mount.transport.as_deref() == Some("udp") && !stats.is_empty() {
            let per = |f: &dyn Fn(&crate::parse::mountstats::OpStats) -> String| {
                stats.iter().map(f).collect::<Vec<_>>().join(" ")
            };
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
        let per_read: Vec<String> = c
            .reads
            .iter()
            .flat_map(|rd| rd.netem.iter().map(|x| format!("{}/{}", x.dropped_packets, x.sent_packets)))
            .collect();
        if !per_read.is_empty() {
            let seconds: Vec<String> = c.reads.iter().map(|rd| format!("{:.1}", rd.metrics.elapsed_s)).collect();
            let _ = writeln!(
                t,
                "seeded loss, {}: netem dropped/sent per read {}; elapsed s {}",
                c.vm,
                per_read.join(" "),
                seconds.join(" ")
            );
        }
    }
    for note in &r.notes {
        let _ = writeln!(t, "note: {note}");
    }
    for p in &r.problems {
        let _ = writeln!(t, "problem: {p}");
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_netem_counters_from_tc_stats() {
        // iproute2 6.15 on Linux 6.12, as printed in a server VM of the UDP suites.
        let out = "qdisc prio 1: root refcnt 2 bands 3 priomap 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1
 Sent 13573812 bytes 9640 pkt (dropped 0, overlimits 0 requeues 0)
 backlog 0b 0p requeues 0
qdisc netem 30: parent 1:3 limit 1000 loss 5% seed 2003
 Sent 13573812 bytes 9598 pkt (dropped 518, overlimits 0 requeues 0)
 backlog 0b 0p requeues 0
";
        assert_eq!(netem_counters(out), Some((9598, 518)));
        assert_eq!(netem_counters("qdisc pfifo_fast 0: root refcnt 2\n Sent 1 bytes 1 pkt (dropped 0)"), None);
        assert_eq!(netem_counters("qdisc netem 30: parent 1:3 limit 1000"), None);
    }

    #[test]
    fn read_ahead_other_than_the_suites_is_a_problem() {
        let mount = |ra: Option<&str>| mount_info("s:/home /mnt/home nfs rw,vers=3 0 0", ra);
        assert_eq!(read_ahead_problem(None, &mount(Some("128"))), None);
        assert_eq!(read_ahead_problem(Some(0), &mount(Some("0\n"))), None);
        assert_eq!(
            read_ahead_problem(Some(0), &mount(Some("128"))).as_deref(),
            Some("read-ahead is 128 KiB, the suite set 0")
        );
        assert_eq!(
            read_ahead_problem(Some(8), &mount(None)).as_deref(),
            Some("read-ahead was not recorded, the suite set 8 KiB")
        );
    }

    #[test]
    fn throughput_keeps_two_significant_digits_below_one_mb_s() {
        assert_eq!(fmt_mb_s(13.44), "13.4");
        assert_eq!(fmt_mb_s(0.93), "0.93");
        assert_eq!(fmt_mb_s(0.0286), "0.029");
        assert_eq!(fmt_mb_s(0.00782), "0.0078");
        assert_eq!(fmt_mb_s(0.0), "0.0");
    }

    #[test]
    fn splits_sections_and_reads_mount_options() {
        let out = format!("{m}mount\n10.0.0.1:/home /mnt/home nfs rw,vers=3,rsize=8192,wsize=8192,proto=udp 0 0\n{m}read-ahead\n0\n{m}uname\n6.1.0\n{m}bytes\n100\n", m = SECTION_MARKER);
        let s = sections(&out);
        assert_eq!(s["uname"], "6.1.0\n");
        assert_eq!(s["bytes"].trim(), "100");
        let m = mount_info(s["mount"].lines().next().unwrap(), s.get("read-ahead").map(String::as_str));
        assert_eq!(m.read_ahead_kb, Some(0));
        assert_eq!(mount_info("", None).read_ahead_kb, None);
        assert_eq!(m.nfs_version.as_deref(), Some("3"));
        assert_eq!(m.transport.as_deref(), Some("udp"));
        assert_eq!(m.rsize, Some(8192));
    }
}
