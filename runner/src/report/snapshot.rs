//! Normalising a run for snapshot tests: keep what is stable from run to run and must
//! not change silently; drop what is volatile.
//!
//! Kept exactly: suite status, every VM's kernel release, step names, statuses and
//! exit codes, the stdout of steps marked `snapshot: true`, and for `nfs_read` suites
//! the server profile's settings, each client's negotiated NFS version, transport and
//! rsize/wsize, the bytes read, which metrics could be computed, and the counters that
//! must be zero over TCP (IP reassembly failures, fragments dropped after timeout, RPC
//! retransmissions); for other measurements what their `snapshot:` policy names (the
//! verdict, `run`'s exit statuses, the signs of chosen metrics, chosen sections).
//! Dropped: timestamps, durations, PIDs, temp paths, MACs, raw counters and absolute
//! times.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::analyse::Analysis;
use crate::measure::analysis::{IterationResult, MeasurementResult, OUTCOME_METRIC};
use crate::measure::script::Section;
use crate::measure::stats::{Comparison, Verdict};
use crate::plan::measurement::{MeasurementPlan, SnapshotPolicy};
use crate::run::record::RunDirError;
use crate::scenarios::nfs_read::results::NfsResults;
use crate::schema::SnapshotVerdicts;

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
    /// Measurements of `measure:`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub measurements: Vec<NormMeasurement>,
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
    /// For UDP mounts, the signature of lost fragments without the run-to-run noise of
    /// the counts, summed over repeats: whether reassembly failures moved (`0` or `> 0`),
    /// and RPC retransmissions as a share of RPC calls ([`retransmission_class`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub udp_loss_signs: Option<std::collections::BTreeMap<String, &'static str>>,
    /// Counters that must be zero over TCP, summed over reads (only for TCP mounts).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub zero_over_tcp: Option<std::collections::BTreeMap<String, Option<i64>>>,
}

/// A measurement other than a preset's, normalised per its `snapshot:` policy.
#[derive(Debug, Serialize)]
pub struct NormMeasurement {
    /// Name.
    pub name: String,
    /// The verdict's metric.
    pub metric: String,
    /// The baseline VM.
    pub baseline: String,
    /// Measured VMs.
    pub vms: Vec<NormMeasuredVm>,
    /// Problems (failed checks, unexpected exit statuses, unreadable outputs).
    pub problems: Vec<String>,
}

/// A measured VM, normalised.
#[derive(Debug, Serialize)]
pub struct NormMeasuredVm {
    /// VM name.
    pub vm: String,
    /// Kernel release printed by the guest.
    pub kernel_release: String,
    /// Measured iterations.
    pub iterations: usize,
    /// How each iteration ended (when the policy keeps it): `exit 0`, `timed out`, …
    #[serde(skip_serializing_if = "Option::is_none")]
    pub outcomes: Option<Vec<String>>,
    /// Verdict against the baseline (absent for the baseline or with `verdict: none`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub verdict: Option<String>,
    /// The policy's metrics and counters as `0` / `> 0` (summed over the counted
    /// iterations; `unknown` when not knowable).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub signs: BTreeMap<String, &'static str>,
    /// The policy's sections, trimmed, from the first measured iteration.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub sections: BTreeMap<String, String>,
}

/// Normalises an analysed run.
///
/// Errors: the stdout of a `snapshot: true` step can't be read.
pub fn normalise(a: &Analysis) -> Result<Normalised, RunDirError> {
    let rec = &a.record;
    let mut vms = Vec::new();
    for v in &rec.vms {
        let mut steps = Vec::new();
        for s in &v.steps {
            let stdout = if s.snapshot { Some(a.stdout(s)?.trim().to_string()) } else { None };
            steps.push(NormStep { name: s.name.clone(), status: s.status, exit_code: s.exit_code, stdout });
        }
        vms.push(NormVm { name: v.name.clone(), kernel_release: v.kernel_release.clone(), steps });
    }
    let preset = a.results.measurements.iter().zip(&a.plan.measurements).find(|(_, p)| p.preset.is_some());
    let nfs_read = a.results.nfs_read.as_ref().zip(preset).map(|(r, (m, p))| norm_nfs(r, m, &p.snapshot));
    let measurements = a
        .results
        .measurements
        .iter()
        .zip(&a.plan.measurements)
        .filter(|(_, p)| p.preset.is_none())
        .map(|(m, p)| norm_measurement(m, p))
        .collect();
    Ok(Normalised { suite: rec.suite.clone(), status: rec.status, vms, nfs_read, measurements })
}

fn norm_measurement(m: &MeasurementResult, p: &MeasurementPlan) -> NormMeasurement {
    let policy = &p.snapshot;
    NormMeasurement {
        name: m.name.clone(),
        metric: m.metric.clone(),
        baseline: m.baseline.clone(),
        vms: m
            .vms
            .iter()
            .map(|v| NormMeasuredVm {
                vm: v.vm.clone(),
                kernel_release: v.kernel_release.clone(),
                iterations: v.iterations.len(),
                outcomes: policy.outcome.then(|| v.outcomes.iter().map(ToString::to_string).collect()),
                verdict: if p.metric.name == OUTCOME_METRIC {
                    (policy.verdict_of(&v.vm) != SnapshotVerdicts::None)
                        .then(|| v.verdict.as_ref().map(|w| w.split(':').next().unwrap_or(w).to_string()))
                        .flatten()
                } else {
                    v.comparison.as_ref().and_then(|c| verdict_for(policy.verdict_of(&v.vm), c, p.metric.is_speed()))
                },
                signs: policy
                    .signs
                    .iter()
                    .map(|name| {
                        let counted = v.iterations.iter().filter(|i| i.counted);
                        let sum: Option<f64> = counted
                            .map(|i| crate::measure::analysis::metric_value(name, i))
                            .try_fold(0.0, |acc, x| Some(acc + x?));
                        let sign = match sum {
                            None => "unknown",
                            Some(s) if s > 0.0 => "> 0",
                            Some(s) if s < 0.0 => "< 0",
                            Some(_) => "0",
                        };
                        (name.clone(), sign)
                    })
                    .collect(),
                sections: policy
                    .sections
                    .iter()
                    .filter_map(|s| {
                        let text = v.iterations.first()?.raw.sections.get(Section::Record(s))?;
                        Some((s.clone(), text.trim().to_string()))
                    })
                    .collect(),
            })
            .collect(),
        problems: m.problems.clone(),
    }
}

/// A verdict as the policy keeps it.
fn verdict_for(policy: SnapshotVerdicts, c: &Comparison, speed: bool) -> Option<String> {
    let (worse, better) = if speed { ("slower", "faster") } else { ("worse", "better") };
    match policy {
        SnapshotVerdicts::RatioClass => Some(verdict_words(&c.verdict, c.median_ratio, worse, better)),
        SnapshotVerdicts::Direction => Some(verdict_direction(&c.verdict, worse, better).into()),
        SnapshotVerdicts::None => None,
    }
}

fn norm_nfs(r: &NfsResults, m: &MeasurementResult, policy: &SnapshotPolicy) -> NormNfs {
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
                        std::collections::BTreeMap::from([
                            ("ip_reassembly_failures".to_string(), failures),
                            ("rpc_retransmissions".to_string(), retransmissions),
                        ])
                    }),
                    zero_over_tcp: tcp.then(|| {
                        ["ip_reassembly_failures", "ip_fragments_dropped_after_timeout", "rpc_retransmissions"]
                            .into_iter()
                            .map(|k| (k.to_string(), total(k)))
                            .collect()
                    }),
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

/// `same`, `undecided`, `worse` or `better` (`slower`/`faster` for times): the verdict
/// without its ratio.
pub fn verdict_direction(v: &Verdict, worse: &'static str, better: &'static str) -> &'static str {
    match v {
        Verdict::Same => "same",
        Verdict::Undecided => "undecided",
        Verdict::Slower { .. } => worse,
        Verdict::Faster { .. } => better,
    }
}

/// `same`, or e.g. `slower: median ratio in 2x–10x` — the verdict's word and the class
/// of the median ratio (1.1–1.5, 1.5–2, 2–10, 10–100, over 100). The classes are wide on
/// purpose: a client behind a fixed rate limit reads in the same time whether the
/// machine is busy or not, but the baseline's time moves by up to 2× with the host's
/// load, so a narrower class would flip between a quiet CI machine and a busy laptop.
///
/// `worse`/`better` are the words for the two directions (`slower`/`faster` for times).
pub fn verdict_words(v: &Verdict, median_ratio: f64, worse: &str, better: &str) -> String {
    let (word, r) = match v {
        Verdict::Same => return "same".into(),
        Verdict::Undecided => return "undecided".into(),
        Verdict::Slower { .. } => (worse, median_ratio),
        Verdict::Faster { .. } => (better, 1.0 / median_ratio),
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

    #[test]
    fn verdict_classes_double() {
        let verdict_words = |v: &Verdict, r: f64| verdict_words(v, r, "slower", "faster");
        assert_eq!(verdict_words(&Verdict::Same, 3.0), "same");
        assert_eq!(verdict_words(&Verdict::Slower { low: 2.5, high: 3.5 }, 3.0), "slower: median ratio in 2x–10x");
        assert_eq!(verdict_words(&Verdict::Slower { low: 4.5, high: 5.5 }, 5.0), "slower: median ratio in 2x–10x");
        assert_eq!(verdict_words(&Verdict::Slower { low: 1.1, high: 1.3 }, 1.2), "slower: median ratio in 1.1x–1.5x");
        assert_eq!(
            verdict_words(&Verdict::Faster { low: 5.0, high: 6.0 }, 1.0 / 5.5),
            "faster: median ratio in 2x–10x"
        );
    }

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
