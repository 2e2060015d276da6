//! The comparison of two VMs in the layout of the kernel test robot's (0-day/LKP)
//! reports, which kernel developers read every day:
//!
//! ```text
//!             client-a                    client-b
//! ---------------------  ----------  ---------------------
//!          value %stddev    %change           value %stddev
//!           5.82 ±  2%      -15.6%            4.91 ±  3%  elapsed_s
//! ```
//!
//! `value` is the median of the counted repeats (the verdict rule works on medians);
//! `%stddev` is the coefficient of variation (sample standard deviation / mean, the
//! `cv` of [`Summary`]) in percent; `%change` is `(candidate − baseline) / baseline`.

use std::fmt::Write as _;

use crate::measure::stats::Summary;

/// One metric's row.
#[derive(Debug, Clone)]
pub struct Row {
    /// Metric or counter name.
    pub name: String,
    /// The baseline's repeats.
    pub base: Option<Summary>,
    /// The candidate's repeats.
    pub cand: Option<Summary>,
}

const VALUE: usize = 14;
const SD: usize = 7;
const CHANGE: usize = 10;

/// A value as LKP prints it: whole numbers from 1000 up, else two decimals.
pub fn fmt_value(v: f64) -> String {
    if let Some(small) = crate::measure::format::fmt_small(v) {
        small
    } else if v.abs() >= 1000.0 || (v.fract() == 0.0 && v.abs() >= 10.0) {
        format!("{v:.0}")
    } else {
        format!("{v:.2}")
    }
}

fn sd(s: &Summary) -> String {
    match s.cv {
        Some(cv) => format!("±{:>4}", format!("{:.0}%", cv * 100.0)),
        None => String::new(),
    }
}

fn cell(s: Option<&Summary>) -> String {
    match s {
        Some(s) => format!("{:>VALUE$} {:<SD$}", fmt_value(s.median), sd(s)),
        None => format!("{:>VALUE$} {:<SD$}", "-", ""),
    }
}

/// `%change` of the candidate's median against the baseline's: `+15.6%`, `0.0%`, or
/// `new` when the baseline's is zero and the candidate's isn't.
pub fn change(base: Option<&Summary>, cand: Option<&Summary>) -> String {
    match (base, cand) {
        (Some(b), Some(c)) if b.median != 0.0 => format!("{:+.1}%", (c.median - b.median) / b.median.abs() * 100.0),
        (Some(_), Some(c)) if c.median == 0.0 => "0.0%".into(),
        (Some(_), Some(_)) => "new".into(),
        _ => "-".into(),
    }
}

fn centre(s: &str, w: usize) -> String {
    let s: String = s.chars().take(w).collect();
    let n = s.chars().count();
    let left = (w - n) / 2;
    format!("{}{s}{}", " ".repeat(left), " ".repeat(w - n - left))
}

/// The table comparing `cand_head` with `base_head` over `rows`.
pub fn table(base_head: &str, cand_head: &str, rows: &[Row]) -> String {
    let w = VALUE + 1 + SD;
    let mut t = String::new();
    let head = format!("{}  {}  {}", centre(base_head, w), " ".repeat(CHANGE), centre(cand_head, w));
    let _ = writeln!(t, "{}", head.trim_end());
    let _ = writeln!(t, "{}  {}  {}", "-".repeat(w), "-".repeat(CHANGE), "-".repeat(w));
    let _ = writeln!(
        t,
        "{:>VALUE$} {:<SD$}  {:>CHANGE$}  {:>VALUE$} {:<SD$}",
        "value", "%stddev", "%change", "value", "%stddev"
    );
    for r in rows {
        let line = format!(
            "{}  {:>CHANGE$}  {}  {}",
            cell(r.base.as_ref()),
            change(r.base.as_ref(), r.cand.as_ref()),
            cell(r.cand.as_ref()),
            r.name
        );
        let _ = writeln!(t, "{}", line.trim_end());
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::stats::summarize;

    #[test]
    fn layout_of_a_row() {
        let b = summarize(&[5.7, 5.82, 5.9]).unwrap();
        let c = summarize(&[4.8, 4.91, 5.1]).unwrap();
        let t = table("client-a", "client-b", &[Row { name: "elapsed_s".into(), base: Some(b), cand: Some(c) }]);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), 4);
        assert!(lines[3].contains("5.82 ±  2%"), "{t}");
        assert!(lines[3].contains("-15.6%"), "{t}");
        assert!(lines[3].contains("4.91 ±  3%"), "{t}");
        assert!(lines[3].ends_with("elapsed_s"));
        assert_eq!(change(summarize(&[0.0]).as_ref(), summarize(&[3.0]).as_ref()), "new");
        assert_eq!(change(summarize(&[0.0]).as_ref(), summarize(&[0.0]).as_ref()), "0.0%");
    }
}
