//! Text of measurement results shared by every table (the generic one in
//! [`crate::report::text`] and a preset's own, e.g. `nfs_read`'s).

use std::fmt::Write as _;

use super::analysis::VmResult;

/// Throughput for the table: one decimal from 1 MB/s up, two significant digits below
/// (a lossy read of a few MB runs at hundredths of a MB/s, which `{:.1}` prints as 0.0).
pub fn fmt_mb_s(v: f64) -> String {
    if v >= 1.0 || v == 0.0 {
        format!("{v:.1}")
    } else {
        let decimals = (1 - v.log10().floor() as i32).max(1) as usize;
        format!("{v:.decimals$}")
    }
}

/// `seeded loss, <vm>: netem dropped/sent per read …; elapsed s …` when the VM's
/// iterations have remote netem readings.
pub fn netem_line(t: &mut String, v: &VmResult) {
    let counted: Vec<_> = v.iterations.iter().filter(|i| i.elapsed_s.is_some()).collect();
    let per_read: Vec<String> = counted
        .iter()
        .flat_map(|i| i.remote.iter().map(|x| format!("{}/{}", x.dropped_packets, x.sent_packets)))
        .collect();
    if !per_read.is_empty() {
        let seconds: Vec<String> = counted.iter().filter_map(|i| i.elapsed_s).map(|e| format!("{e:.1}")).collect();
        let _ = writeln!(
            t,
            "seeded loss, {}: netem dropped/sent per read {}; elapsed s {}",
            v.vm,
            per_read.join(" "),
            seconds.join(" ")
        );
    }
}
