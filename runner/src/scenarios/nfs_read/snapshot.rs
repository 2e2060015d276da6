//! The `nfs_read` preset's part of a snapshot: the server profile's settings, each
//! client's negotiated NFS version, transport and rsize/wsize, the bytes read, which
//! metrics could be computed, the signs of lost fragments over UDP and the counters that
//! must be zero over TCP (IP reassembly failures, fragments dropped after timeout, RPC
//! retransmissions).

use serde::Serialize;

use super::results::NfsResults;
use crate::measure::analysis::{IterationResult, MeasurementResult};
use crate::plan::measurement::SnapshotPolicy;
use crate::report::snapshot::verdict_for;

/// The NFS scenario, normalised.
#[derive(Debug, Serialize)]
pub struct NormNfs {
    /// Server kernel release.
    pub server_kernel: String,
    /// Server profile settings (versions, threads, block size, reassembly limits).
    pub server_profile: std::collections::BTreeMap<String, String>,
    /// File size, bytes.
    pub file_bytes: u64,
    /// Baseline client.
    pub baseline: String,
    /// Clients.
    pub clients: Vec<NormClient>,
    /// Notes.
    pub notes: Vec<String>,
    /// Problems.
    pub problems: Vec<String>,
}

/// A client, normalised.
#[derive(Debug, Serialize)]
pub struct NormClient {
    /// VM name.
    pub vm: String,
    /// Kernel release printed by the guest.
    pub kernel_release: String,
    /// `vers=`.
    pub nfs_version: Option<String>,
    /// `proto=`.
    pub transport: Option<String>,
    /// `rsize=`.
    pub rsize: Option<u64>,
    /// `wsize=`.
    pub wsize: Option<u64>,
    /// The mount's read-ahead, KiB (the suite's `read_ahead_kb`, or the kernel's default).
    pub read_ahead_kb: Option<u64>,
    /// Number of reads.
    pub reads: usize,
    /// Bytes read by every read (one value when all agree).
    pub bytes_read: Vec<u64>,
    /// Metrics that could be computed from the outputs.
    pub metrics_present: Vec<String>,
    /// Verdict against the baseline, in words, with the median ratio's class (absent
    /// for the baseline, or when the suite turns verdicts off).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub verdict: Option<String>,
    /// For UDP mounts, the signature of lost fragments without the run-to-run noise of
    /// the counts, summed over repeats: whether reassembly failures moved (`0` or `> 0`),
    /// and RPC retransmissions as a share of RPC calls ([`retransmission_class`]); for a
    /// captured client also the wire's view of both (`wire.ip.lost_fragment_replies`,
    /// `wire.rpc.retransmissions` against `wire.rpc.calls`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub udp_loss_signs: Option<std::collections::BTreeMap<String, &'static str>>,
    /// Counters that must be zero over TCP, summed over reads (only for TCP mounts).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub zero_over_tcp: Option<std::collections::BTreeMap<String, Option<i64>>>,
    /// `nfs_read.snapshot_values`: each named metric or counter in every read.
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub values: std::collections::BTreeMap<String, Vec<serde_yaml::Value>>,
}

/// The wire counters a captured UDP client's snapshot keeps as signs.
const WIRE_LOST: &str = "wire.ip.lost_fragment_replies";
const WIRE_RETRANS: &str = "wire.rpc.retransmissions";
const WIRE_CALLS: &str = "wire.rpc.calls";

/// The scenario's snapshot view of `r`, with the verdicts of its measurement `m` as
/// `policy` keeps them.
pub(crate) fn normalise(r: &NfsResults, m: &MeasurementResult, policy: &SnapshotPolicy) -> NormNfs {
    NormNfs {
        server_kernel: r.server.kernel_release.clone(),
        server_profile: r
            .server
            .profile
            .iter()
            .filter(|(k, _)| !k.contains("ports"))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
        file_bytes: r.file_bytes,
        baseline: r.baseline.clone(),
        clients: r
            .clients
            .iter()
            .filter_map(|c| Some((c, m.vm(&c.vm)?)))
            .map(|(c, v)| {
                let reads: Vec<_> = v.iterations.iter().filter(|i| i.elapsed_s.is_some()).collect();
                let mut bytes: Vec<u64> = reads.iter().map(|x| x.bytes.unwrap_or(0)).collect();
                bytes.dedup();
                let tcp = c.mount.transport.as_deref() == Some("tcp");
                let total = |k: &str| v.totals.get(k).copied().flatten();
                NormClient {
                    vm: c.vm.clone(),
                    kernel_release: v.kernel_release.clone(),
                    nfs_version: c.mount.nfs_version.clone(),
                    transport: c.mount.transport.clone(),
                    rsize: c.mount.rsize,
                    wsize: c.mount.wsize,
                    read_ahead_kb: c.mount.read_ahead_kb,
                    reads: reads.len(),
                    bytes_read: bytes,
                    metrics_present: reads.first().map(|i| metrics_present(i)).unwrap_or_default(),
                    verdict: v.comparison.as_ref().and_then(|x| verdict_for(policy.verdict_of(&c.vm), x, true)),
                    udp_loss_signs: (c.mount.transport.as_deref() == Some("udp")).then(|| {
                        let failures = if total("ip_reassembly_failures").unwrap_or(0) > 0 { "> 0" } else { "0" };
                        let retransmissions = retransmission_class(total("rpc_retransmissions"), total("rpc_calls"));
                        let mut signs = std::collections::BTreeMap::from([
                            ("ip_reassembly_failures".to_string(), failures),
                            ("rpc_retransmissions".to_string(), retransmissions),
                        ]);
                        // A captured client: the same two signs as the wire shows them.
                        if reads.iter().all(|i| !i.wire.is_empty()) && !reads.is_empty() {
                            let wire = |k: &str| {
                                reads.iter().map(|i| i.wire.get(k).copied()).try_fold(0i64, |a, x| Some(a + x? as i64))
                            };
                            let lost = if wire(WIRE_LOST).unwrap_or(0) > 0 { "> 0" } else { "0" };
                            signs.insert(WIRE_LOST.to_string(), lost);
                            signs.insert(
                                WIRE_RETRANS.to_string(),
                                retransmission_class(wire(WIRE_RETRANS), wire(WIRE_CALLS)),
                            );
                        }
                        signs
                    }),
                    zero_over_tcp: tcp.then(|| {
                        ["ip_reassembly_failures", "ip_fragments_dropped_after_timeout", "rpc_retransmissions"]
                            .into_iter()
                            .map(|k| (k.to_string(), total(k)))
                            .collect()
                    }),
                    values: crate::report::snapshot::kept_values(&policy.values, &v.iterations),
                }
            })
            .collect(),
        notes: r.notes.clone(),
        problems: m.problems.clone(),
    }
}

/// The snapshot class of a UDP mount's RPC retransmissions, summed over its reads, against
/// its RPC calls (both from `nfsstat -rc`): `< 1 % of calls` (none included) or
/// `≥ 1 % of calls`; `> 0` when the calls are unknown.
///
/// Not `0` against `> 0`: over a clean path a few READs are retransmitted when the host is
/// busy (the client's retransmit timer, fitted to the round-trip times it saw, fires while
/// the server's guest waits for a CPU): 3 of 7,341 calls in `nfs-read-udp-loss`'s clean
/// client with one of two host cores taken by a busy loop, 0 on a quiet host. Lost
/// fragments retransmit far more: 6.9 % of its lossy client's calls, 53 % in
/// `nfs-udp-rto-carryover`.
pub fn retransmission_class(retransmissions: Option<i64>, calls: Option<i64>) -> &'static str {
    match (retransmissions.unwrap_or(0), calls) {
        (0, _) => "< 1 % of calls",
        (r, Some(c)) if c > 0 && r * 100 < c => "< 1 % of calls",
        (_, Some(c)) if c > 0 => "≥ 1 % of calls",
        _ => "> 0",
    }
}

/// The metrics one read could compute, by name, sorted: the time and byte fields
/// (`bytes_read`, `elapsed_s`, `user_s`, `system_s`, and `exit_status` and
/// `throughput_mb_s` when known) and every derived metric that was not `None`.
fn metrics_present(i: &IterationResult) -> Vec<String> {
    let mut present: Vec<String> = ["bytes_read", "elapsed_s", "user_s", "system_s"].map(String::from).to_vec();
    if i.exit_status.is_some() {
        present.push("exit_status".into());
    }
    if i.throughput_mb_s.is_some() {
        present.push("throughput_mb_s".into());
    }
    present.extend(i.metrics.iter().filter(|(_, v)| v.is_some()).map(|(k, _)| k.clone()));
    present.sort();
    present
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retransmissions_are_classed_against_the_calls() {
        // Counts seen: a clean UDP client on a busy host, the UDP-loss suite's lossy
        // client, the RTO suite's clients.
        assert_eq!(retransmission_class(Some(0), Some(7341)), "< 1 % of calls");
        assert_eq!(retransmission_class(Some(3), Some(7341)), "< 1 % of calls");
        assert_eq!(retransmission_class(Some(504), Some(7344)), "≥ 1 % of calls");
        assert_eq!(retransmission_class(Some(262), Some(494)), "≥ 1 % of calls");
        // The edges: 1 in 100 is 1 %; a read that made no calls, or unknown counters.
        assert_eq!(retransmission_class(Some(99), Some(10_000)), "< 1 % of calls");
        assert_eq!(retransmission_class(Some(100), Some(10_000)), "≥ 1 % of calls");
        assert_eq!(retransmission_class(None, None), "< 1 % of calls");
        assert_eq!(retransmission_class(Some(3), None), "> 0");
        assert_eq!(retransmission_class(Some(3), Some(0)), "> 0");
    }
}
