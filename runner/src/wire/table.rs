//! The wire as text, for `vmrepro wire RUN [VM]`: the RPC table per procedure, lost
//! fragment datagrams and TCP resends, and the ten longest waits with their XIDs and
//! times.

use std::fmt::Write as _;

use super::decode::LostDatagram;
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
    write_lost(&mut o, &s.lost, &secs);
    if !s.tcp_resend_waits_us.is_empty() {
        let _ = writeln!(o, "  TCP segments sent again: {}", s.tcp_resend_waits_us.len());
    }
    // Several lines, so that a page's box need not scroll.
    let counters: Vec<String> = s.counters().iter().map(|(k, v)| format!("{k}={v}")).collect();
    for (n, line) in counters.chunks(4).enumerate() {
        let _ = writeln!(o, "  {:<10}{}", if n == 0 { "counters:" } else { "" }, line.join(" "));
    }
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

/// How many datagrams with missing fragments [`render`] lists one by one.
pub const LOST_LISTED: usize = 10;

/// Which fragments of `l` are missing: `1 of 3`, `0,2 of 3`; `2+` when its last
/// fragment never came (its length, hence its fragment count, is unknown): fragment 2
/// and every one after it; `all but the last` when only the last one came.
pub fn missing_text(l: &LostDatagram) -> String {
    let list = missing_labels(l).join(",");
    match l.fragments {
        Some(n) => format!("{list} of {n}"),
        None => list,
    }
}

/// One label per missing fragment of `l`: its 0-based index, `N+` for "index N and
/// every one after it" when the last fragment never came, `all but the last` when only
/// the last came (see [`LostDatagram::missing`]).
fn missing_labels(l: &LostDatagram) -> Vec<String> {
    if l.missing.is_empty() {
        return vec!["all but the last".into()];
    }
    let open = l.fragments.is_none() && !l.last_seen;
    let n = l.missing.len();
    l.missing
        .iter()
        .enumerate()
        .map(|(k, i)| if open && k + 1 == n { format!("{i}+") } else { i.to_string() })
        .collect()
}

/// The datagrams with missing fragments: how many miss each fragment, then the first
/// [`LOST_LISTED`] with their time, addresses, IP id, XID and missing fragments.
fn write_lost(o: &mut String, lost: &[LostDatagram], secs: &dyn Fn(u64) -> f64) {
    if lost.is_empty() {
        return;
    }
    let mut by: Vec<(String, u64)> = Vec::new();
    for label in lost.iter().flat_map(missing_labels) {
        match by.iter_mut().find(|(l, _)| *l == label) {
            Some((_, n)) => *n += 1,
            None => by.push((label, 1)),
        }
    }
    by.sort();
    let by: Vec<String> = by.iter().map(|(label, n)| format!("{label}: {n}")).collect();
    let _ = writeln!(
        o,
        "    missing fragment (0-based index; N+: N and every one after it, the last never came): {}",
        by.join(", ")
    );
    let _ = writeln!(
        o,
        "    {:>10} {:<15} {:<15} {:>6} {:>10} {:<5} {:>16}",
        "s", "from", "to", "ip id", "xid", "reply", "missing"
    );
    for l in lost.iter().take(LOST_LISTED) {
        let _ = writeln!(
            o,
            "    {:>10.3} {:<15} {:<15} {:>6} {:>10} {:<5} {:>16}",
            secs(l.time_us),
            l.src.to_string(),
            l.dst.to_string(),
            l.ip_id,
            l.xid.map_or("-".to_string(), |x| format!("0x{x:08x}")),
            if l.reply { "yes" } else { "-" },
            missing_text(l)
        );
    }
    if lost.len() > LOST_LISTED {
        let _ = writeln!(o, "    … and {} more", lost.len() - LOST_LISTED);
    }
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
        assert!(
            text.contains(
                "  counters: wire.rpc.calls=1 wire.rpc.replies=1 wire.rpc.retransmissions=1 wire.rpc.unanswered=0\n"
            ),
            "{text}"
        );
        assert!(text.contains("0x00000abc NFSv3 READ                     2      0.000      0.700     700.0"), "{text}");
    }

    /// Three replies of three fragments: one lost its middle fragment, one its last
    /// (so its length, hence its fragment count, is unknown), one all but its last (so
    /// the fragments' size is unknown).
    #[test]
    fn says_which_fragment_went_missing() {
        let mut big = reply(0x11);
        big.resize(3000, 0);
        let a = fragments(SERVER, CLIENT, 7, &big, 1480);
        let mut big = reply(0x12);
        big.resize(3000, 0);
        let b = fragments(SERVER, CLIENT, 8, &big, 1480);
        let mut big = reply(0x13);
        big.resize(3000, 0);
        let c = fragments(SERVER, CLIENT, 9, &big, 1480);
        let frames = vec![
            frame(1_000_000, a[0].clone()),
            frame(1_000_100, a[2].clone()),
            frame(2_000_000, b[0].clone()),
            frame(2_000_100, b[1].clone()),
            frame(3_000_000, c[2].clone()),
        ];
        let s = WireSummary::of(&decode(&frames), None);
        assert_eq!(s.lost.iter().map(missing_text).collect::<Vec<_>>(), ["1 of 3", "2+", "all but the last"]);
        let text = render("client", &s, 1_000_000);
        assert!(text.contains("datagrams with missing fragments: 3 (2 RPC replies)"), "{text}");
        assert!(text.contains("the last never came): 1: 1, 2+: 1, all but the last: 1\n"), "{text}");
        for row in [
            "     0.000 10.0.0.1        10.0.0.10            7 0x00000011 yes             1 of 3\n",
            "     1.000 10.0.0.1        10.0.0.10            8 0x00000012 yes                 2+\n",
            "     2.000 10.0.0.1        10.0.0.10            9          - -     all but the last\n",
        ] {
            assert!(text.contains(row), "{text}");
        }
    }
}
