//! Hints beside numbers that do not add up: a VM's per-operation NFS counts
//! (`nfsstat`'s `Client nfs vN:` tables, from `/proc/net/rpc/nfs`) that are short of
//! the work its command did or of the RPC calls it made, so that a reader does not
//! take a plain `0` for "no READ was sent" (Debian 6.12's nfsstat prints `read 0` in
//! its v4 table while the client read 32 MiB).

use crate::measure::analysis::{IterationResult, MeasurementResult};

/// Counter of the client's RPC calls (`Client rpc stats: calls`).
const RPC_CALLS: &str = "nfs.client.rpc.calls";
/// Counter of the READ operations in `/proc/self/mountstats` (the mount's own count).
const MOUNTSTATS_READS: &str = "mountstats.READ.ops";
/// Derived metric of the client's READ calls summed over NFS versions (`nfsstat`).
const NFS_READ_CALLS: &str = "nfs_read_calls";

/// The hints of measurement `m`, one line per VM whose counts do not add up, e.g.
/// `hint: client-6-12: nfsstat counted 0 NFS READ calls in 3 of 3 iterations while
/// mountstats counted 1536 READ operations on the mount: …`.
/// Only counted iterations are looked at; none: no hint.
pub fn count_hints(m: &MeasurementResult) -> Vec<String> {
    let mut out = Vec::new();
    for v in &m.vms {
        let counted: Vec<&IterationResult> = v.iterations.iter().filter(|i| i.counted).collect();
        if let Some(h) = zero_reads(&counted) {
            out.push(format!("hint: {}: {h}", v.vm));
        }
        if let Some(h) = short_of_calls(&counted) {
            out.push(format!("hint: {}: {h}", v.vm));
        }
    }
    out
}

fn delta(i: &IterationResult, counter: &str) -> i64 {
    i.changed_counters.get(counter).copied().unwrap_or(0)
}

/// READ calls counted as 0 by nfsstat in iterations where the mount's own count
/// (mountstats' READ operations) says READs were sent. Bytes moved are no evidence:
/// a write moves bytes without a READ.
fn zero_reads(its: &[&IterationResult]) -> Option<String> {
    let zero: Vec<&&IterationResult> = its
        .iter()
        .filter(|i| i.metrics.get(NFS_READ_CALLS) == Some(&Some(0)))
        .filter(|i| delta(i, MOUNTSTATS_READS) > 0)
        .collect();
    if zero.is_empty() {
        return None;
    }
    let reads: i64 = zero.iter().map(|i| delta(i, MOUNTSTATS_READS)).sum();
    Some(format!(
        "nfsstat counted 0 NFS READ calls in {} of {} iterations while mountstats counted {reads} READ operations on the mount: this kernel's per-operation table (/proc/net/rpc/nfs) does not count these READs, so nfs_read_calls 0 does not mean no READ was sent; mountstats' READ counters do count them",
        zero.len(),
        its.len(),
    ))
}

/// Per-operation counts (`nfs.client.vN.*`) that add up to less than half of the RPC
/// calls made over the same iterations (with at least 10 calls: a few MOUNT or NULL
/// calls of a short command are no sign).
fn short_of_calls(its: &[&IterationResult]) -> Option<String> {
    let calls: i64 = its.iter().map(|i| delta(i, RPC_CALLS)).sum();
    let ops: i64 = its
        .iter()
        .flat_map(|i| i.changed_counters.iter())
        .filter(|(k, _)| k.strip_prefix("nfs.client.v").is_some_and(|r| r.contains('.')))
        .map(|(_, d)| *d)
        .sum();
    (calls >= 10 && ops * 2 < calls).then(|| {
        format!(
            "the per-operation counts of nfsstat's `Client nfs vN:` tables add up to {ops} over the iterations, against {calls} RPC calls: the tables leave out operations this kernel counts elsewhere, so a 0 there is not a 0 on the wire"
        )
    })
}
