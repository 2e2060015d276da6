//! Normalising a run for snapshot tests: keep what is stable from run to run and must
//! not change silently; drop what is volatile.
//!
//! Kept exactly: suite status, every VM's kernel release, step names, statuses and
//! exit codes, the stdout of steps marked `snapshot: true`, and for `nfs_read` suites
//! the server profile's settings, each client's negotiated NFS version, transport and
//! rsize/wsize, the bytes read, which metrics could be computed, and the counters that
//! must be zero over TCP (IP reassembly failures, fragments dropped after timeout, RPC
//! retransmissions). Dropped: timestamps, durations, PIDs, temp paths, MACs, raw
//! counters and absolute times.

use serde::Serialize;

use crate::analysis::NfsResults;
use crate::run::RunRecord;

/// The normalised view of a run.
#[derive(Debug, Serialize)]
pub struct Normalised {
    /// Suite name.
    pub suite: String,
    /// Status.
    pub status: crate::run::RunStatus,
    /// VMs.
    pub vms: Vec<NormVm>,
    /// NFS scenario.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nfs_read: Option<NormNfs>,
}

/// A VM, normalised.
#[derive(Debug, Serialize)]
pub struct NormVm {
    /// Name.
    pub name: String,
    /// Kernel release.
    pub kernel_release: String,
    /// Steps.
    pub steps: Vec<NormStep>,
}

/// A step, normalised.
#[derive(Debug, Serialize)]
pub struct NormStep {
    /// Name.
    pub name: String,
    /// Status.
    pub status: crate::run::StepStatus,
    /// Exit code.
    pub exit_code: Option<i64>,
    /// Trimmed stdout, for steps marked `snapshot: true`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stdout: Option<String>,
}

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
    /// For UDP mounts: whether the loss counters moved during the reads (`0` or
    /// `> 0`, summed over repeats): the signature of lost fragments — reassembly
    /// failures and RPC retransmissions — without the run-to-run noise of the counts.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub udp_loss_signs: Option<std::collections::BTreeMap<String, &'static str>>,
    /// Counters that must be zero over TCP, summed over reads (only for TCP mounts).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub zero_over_tcp: Option<std::collections::BTreeMap<String, Option<i64>>>,
}

/// Normalises a run (and its NFS results).
pub fn normalise(rec: &RunRecord, nfs: Option<&NfsResults>, verdicts: crate::spec::SnapshotVerdicts) -> Normalised {
    let vms = rec
        .vms
        .iter()
        .map(|v| NormVm {
            name: v.name.clone(),
            kernel_release: v.kernel_release.clone(),
            steps: v
                .steps
                .iter()
                .map(|s| NormStep {
                    name: s.name.clone(),
                    status: s.status,
                    exit_code: s.exit_code,
                    stdout: s.snapshot.then(|| s.stdout_text.trim().to_string()),
                })
                .collect(),
        })
        .collect();
    let nfs_read = nfs.map(|r| NormNfs {
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
            .map(|c| {
                let mut bytes: Vec<u64> = c.reads.iter().map(|x| x.metrics.bytes_read).collect();
                bytes.dedup();
                let mut present = Vec::new();
                if let Some(first) = c.reads.first() {
                    if let Ok(serde_json::Value::Object(m)) = serde_json::to_value(&first.metrics) {
                        present = m.into_iter().filter(|(_, v)| !v.is_null()).map(|(k, _)| k).collect();
                    }
                }
                let tcp = c.mount.transport.as_deref() == Some("tcp");
                NormClient {
                    vm: c.vm.clone(),
                    kernel_release: c.kernel_release.clone(),
                    nfs_version: c.mount.nfs_version.clone(),
                    transport: c.mount.transport.clone(),
                    rsize: c.mount.rsize,
                    wsize: c.mount.wsize,
                    read_ahead_kb: c.mount.read_ahead_kb,
                    reads: c.reads.len(),
                    bytes_read: bytes,
                    metrics_present: present,
                    verdict: c.comparison.as_ref().and_then(|x| match verdicts {
                        crate::spec::SnapshotVerdicts::RatioClass => Some(verdict_words(&x.verdict, x.median_ratio)),
                        crate::spec::SnapshotVerdicts::Direction => Some(verdict_direction(&x.verdict).into()),
                        crate::spec::SnapshotVerdicts::None => None,
                    }),
                    udp_loss_signs: (c.mount.transport.as_deref() == Some("udp")).then(|| {
                        [
                            ("ip_reassembly_failures", c.ip_reassembly_failures),
                            ("rpc_retransmissions", c.rpc_retransmissions),
                        ]
                        .into_iter()
                        .map(|(k, v)| (k.to_string(), if v.unwrap_or(0) > 0 { "> 0" } else { "0" }))
                        .collect()
                    }),
                    zero_over_tcp: tcp.then(|| {
                        [
                            ("ip_reassembly_failures", c.ip_reassembly_failures),
                            ("ip_fragments_dropped_after_timeout", c.ip_fragments_dropped_after_timeout),
                            ("rpc_retransmissions", c.rpc_retransmissions),
                        ]
                        .into_iter()
                        .map(|(k, v)| (k.to_string(), v))
                        .collect()
                    }),
                }
            })
            .collect(),
        notes: r.notes.clone(),
        problems: r.problems.clone(),
    });
    Normalised { suite: rec.suite.clone(), status: rec.status, vms, nfs_read }
}

/// `same`, `slower` or `faster`: the verdict without its ratio.
pub fn verdict_direction(v: &crate::metrics::Verdict) -> &'static str {
    use crate::metrics::Verdict;
    match v {
        Verdict::Same => "same",
        Verdict::Slower { .. } => "slower",
        Verdict::Faster { .. } => "faster",
    }
}

/// `same`, or e.g. `slower: median ratio in 2x–10x` — the verdict's word and the class
/// of the median ratio (1.1–1.5, 1.5–2, 2–10, 10–100, over 100). The classes are wide on
/// purpose: a client behind a fixed rate limit reads in the same time whether the
/// machine is busy or not, but the baseline's time moves by up to 2× with the host's
/// load, so a narrower class would flip between a quiet CI machine and a busy laptop.
pub fn verdict_words(v: &crate::metrics::Verdict, median_ratio: f64) -> String {
    use crate::metrics::Verdict;
    let (word, r) = match v {
        Verdict::Same => return "same".into(),
        Verdict::Slower { .. } => ("slower", median_ratio),
        Verdict::Faster { .. } => ("faster", 1.0 / median_ratio),
    };
    let class = match r {
        r if r < 1.5 => "1.1x–1.5x",
        r if r < 2.0 => "1.5x–2x",
        r if r < 10.0 => "2x–10x",
        r if r < 100.0 => "10x–100x",
        _ => "over 100x",
    };
    format!("{word}: median ratio in {class}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::Verdict;

    #[test]
    fn verdict_classes_double() {
        assert_eq!(verdict_words(&Verdict::Same, 3.0), "same");
        assert_eq!(verdict_words(&Verdict::Slower { low: 2.5, high: 3.5 }, 3.0), "slower: median ratio in 2x–10x");
        assert_eq!(verdict_words(&Verdict::Slower { low: 4.5, high: 5.5 }, 5.0), "slower: median ratio in 2x–10x");
        assert_eq!(verdict_words(&Verdict::Slower { low: 1.1, high: 1.3 }, 1.2), "slower: median ratio in 1.1x–1.5x");
        assert_eq!(
            verdict_words(&Verdict::Faster { low: 5.0, high: 6.0 }, 1.0 / 5.5),
            "faster: median ratio in 2x–10x"
        );
    }
}
