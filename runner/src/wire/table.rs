//! The wire as text, for `vmrepro wire RUN [VM]`: the RPC table per procedure, lost
//! fragment datagrams and TCP resends, and the ten longest waits with their XIDs and
//! times.

use std::fmt::Write as _;

use super::summary::WireSummary;

/// How many waits [`render`] lists.
pub const LONGEST_WAITS: usize = 10;

/// One VM's wire summary as text. Times are seconds since the capture's first RPC
/// message (`t0_us`, microseconds since the epoch).
pub fn render(vm: &str, s: &WireSummary, t0_us: u64) -> String {
    let mut o = String::new();
    let secs = |us: u64| us.saturating_sub(t0_us) as f64 / 1e6;
    let _ = writeln!(o, "{vm}: {} frames, {} RPC calls", s.frames, s.calls.len());
    let _ = writeln!(
        o,
        "  {:<36} {:>7} {:>8} {:>8} {:>9} {:>9} {:>9}",
        "procedure", "calls", "retrans", "replies", "p50 ms", "p90 ms", "max ms"
    );
    for (name, r) in &s.procedures {
        let _ = writeln!(
            o,
            "  {:<36} {:>7} {:>8} {:>8} {:>9.1} {:>9.1} {:>9.1}",
            name, r.calls, r.retransmissions, r.replies, r.latency.p50_ms, r.latency.p90_ms, r.latency.max_ms
        );
    }
    let replies = s.lost.iter().filter(|l| l.reply).count();
    let _ = writeln!(o, "  datagrams with missing fragments: {} ({replies} RPC replies)", s.lost.len());
    if !s.tcp_resend_waits_us.is_empty() {
        let _ = writeln!(o, "  TCP segments sent again: {}", s.tcp_resend_waits_us.len());
    }
    let counters: Vec<String> = s.counters().iter().map(|(k, v)| format!("{k}={v}")).collect();
    let _ = writeln!(o, "  counters: {}", counters.join(" "));
    let longest = s.longest_waits(LONGEST_WAITS);
    if !longest.is_empty() {
        let _ = writeln!(o, "  longest waits before a retransmission:");
        let _ = writeln!(
            o,
            "    {:>10} {:<24} {:>7} {:>10} {:>10} {:>9}",
            "xid", "procedure", "send", "prev s", "sent s", "wait ms"
        );
        for w in longest {
            let _ = writeln!(
                o,
                "    0x{:08x} {:<24} {:>7} {:>10.3} {:>10.3} {:>9.1}",
                w.xid,
                w.procedure,
                w.attempt,
                secs(w.previous_us),
                secs(w.sent_us),
                w.wait_ms
            );
        }
    }
    o
}

#[cfg(test)]
mod tests {
    use super::super::decode::{decode, tests::*};
    use super::super::rpc::tests::{call, reply};
    use super::*;

    #[test]
    fn lists_the_procedure_and_the_wait_with_its_xid() {
        let c = call(0xabc, 100003, 3, 6, &[]);
        let frames = vec![
            frame(10_000_000, udp(CLIENT, SERVER, 800, 2049, &c)),
            frame(10_700_000, udp(CLIENT, SERVER, 800, 2049, &c)),
            frame(10_700_400, udp(SERVER, CLIENT, 2049, 800, &reply(0xabc))),
        ];
        let s = WireSummary::of(&decode(&frames), None);
        let text = render("client", &s, 10_000_000);
        assert!(text.contains("NFSv3 READ"), "{text}");
        assert!(text.contains("wire.rpc.retransmissions=1 "), "{text}");
        assert!(text.contains("0x00000abc NFSv3 READ                     2      0.000      0.700     700.0"), "{text}");
    }
}
