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

/// A value below 0.1 (not 0) with three significant digits (`0.00325`, `0.0412`), so
/// that a few milliseconds do not print as `0.00`; `None` for 0 and from 0.1 up (the
/// tables' own formats).
pub fn fmt_small(v: f64) -> Option<String> {
    if v == 0.0 || v.abs() >= 0.1 || !v.is_finite() {
        return None;
    }
    let decimals = (2 - v.abs().log10().floor() as i32).max(0) as usize;
    Some(format!("{v:.decimals$}"))
}

/// Seconds with the unit that keeps three significant digits: `812 µs`, `4.10 ms`,
/// `37.5 ms`, `1.23 s`, `123.4 s`.
pub fn seconds_precise(s: f64) -> String {
    let a = s.abs();
    if a == 0.0 {
        "0 ms".into()
    } else if a < 1e-3 {
        format!("{:.0} µs", s * 1e6)
    } else if a < 1e-2 {
        format!("{:.2} ms", s * 1e3)
    } else if a < 1.0 {
        format!("{:.1} ms", s * 1e3)
    } else if a < 100.0 {
        format!("{s:.2} s")
    } else {
        format!("{s:.1} s")
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn seconds_keep_three_digits_in_their_unit() {
        let shown: Vec<String> =
            [0.0, 0.000812, 0.0041, 0.0375, 0.5, 1.234, 123.44].iter().map(|s| super::seconds_precise(*s)).collect();
        assert_eq!(shown, ["0 ms", "812 µs", "4.10 ms", "37.5 ms", "500.0 ms", "1.23 s", "123.4 s"]);
    }

    #[test]
    fn small_values_keep_three_significant_digits() {
        let shown: Vec<Option<String>> =
            [0.0, 0.00325, 0.0412, 0.099, 0.1, 2.5].iter().map(|v| super::fmt_small(*v)).collect();
        assert_eq!(shown, [None, Some("0.00325".into()), Some("0.0412".into()), Some("0.0990".into()), None, None]);
    }
}
