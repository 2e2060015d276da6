//! Reading netem's counters from `tc -s qdisc show` (iproute2 4.x–6.x).
//!
//! ```text
//! qdisc netem 30: parent 1:3 limit 1000 loss 5% seed 2003
//!  Sent 13573812 bytes 9598 pkt (dropped 518, overlimits 0 requeues 0)
//! ```
//!
//! "Sent" counts the packets netem passed on; dropped packets are left out of it.

/// The first netem qdisc's `(packets sent, packets dropped)` in `tc -s qdisc show`
/// output; `None` when there is no netem qdisc or its counters line is missing.
pub fn netem_counters(tc_stats: &str) -> Option<(u64, u64)> {
    let mut lines = tc_stats.lines().skip_while(|l| !l.trim_start().starts_with("qdisc netem"));
    lines.next()?;
    let sent = lines.next()?.trim();
    let words: Vec<&str> = sent.split_whitespace().collect();
    let pkts = words.iter().position(|w| *w == "pkt").and_then(|i| i.checked_sub(1)).map(|i| words[i])?;
    let dropped = words.iter().position(|w| *w == "(dropped").map(|i| words.get(i + 1))??;
    Some((pkts.parse().ok()?, dropped.trim_end_matches(',').parse().ok()?))
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
}
