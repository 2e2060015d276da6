//! Decoded RPC messages → what a reader of a run wants: calls, replies,
//! retransmissions (the same XID sent again by the same client to the same server)
//! with the wait before each, per-call latency (first send → first whole reply), lost
//! fragment datagrams and TCP resends; as a table per procedure and as counters.

use std::collections::{BTreeMap, HashMap};
use std::net::Ipv4Addr;

use super::decode::{Decoded, LostDatagram};

/// Nearest-rank quantiles of a set of durations, milliseconds (0 when empty).
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize)]
pub struct Quantiles {
    /// Values.
    pub count: u64,
    /// Median.
    pub p50_ms: f64,
    /// 90th percentile.
    pub p90_ms: f64,
    /// Largest.
    pub max_ms: f64,
}

impl Quantiles {
    /// The nearest-rank p50, p90 and max of `us` (microseconds).
    pub fn of(us: &[u64]) -> Quantiles {
        let mut v = us.to_vec();
        v.sort_unstable();
        let rank = |q: f64| {
            let i = ((q * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1;
            v[i] as f64 / 1000.0
        };
        if v.is_empty() {
            return Quantiles::default();
        }
        Quantiles { count: v.len() as u64, p50_ms: rank(0.5), p90_ms: rank(0.9), max_ms: rank(1.0) }
    }
}

/// One row of the RPC table: one procedure (`NFSv3 READ`).
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct ProcedureRow {
    /// Its RPC program (100003 NFS, 100005 MOUNT, 100000 PORTMAP, …).
    pub program: u32,
    /// Distinct calls (XIDs).
    pub calls: u64,
    /// Sends after a call's first.
    pub retransmissions: u64,
    /// Calls that got a reply.
    pub replies: u64,
    /// First send → first reply.
    pub latency: Quantiles,
}

/// One retransmission: the call `xid` sent again `wait_ms` after its previous send.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Wait {
    /// Transaction id.
    pub xid: u32,
    /// The call's name ([`super::rpc::RpcCall::name`]).
    pub procedure: String,
    /// Which send this is (2 = the first retransmission).
    pub attempt: u32,
    /// Time of the previous send, microseconds since the epoch.
    pub previous_us: u64,
    /// Time of this send, microseconds since the epoch.
    pub sent_us: u64,
    /// `sent_us - previous_us`, milliseconds.
    pub wait_ms: f64,
}

/// One call's story, for the timeline: every send and the first reply.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct CallTimeline {
    /// Transaction id.
    pub xid: u32,
    /// The call's name.
    pub procedure: String,
    /// Its RPC program (100003 NFS, …).
    pub program: u32,
    /// Times sent, microseconds since the epoch.
    pub sends_us: Vec<u64>,
    /// Time of the first reply, if any.
    pub reply_us: Option<u64>,
}

/// What one VM's capture shows (or the part of it in a time window).
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct WireSummary {
    /// Frames in the capture (the whole capture, whatever the window).
    pub frames: u64,
    /// Per procedure.
    pub procedures: BTreeMap<String, ProcedureRow>,
    /// Every call, in order of first send.
    pub calls: Vec<CallTimeline>,
    /// Every retransmission, in time order.
    pub waits: Vec<Wait>,
    /// Datagrams with missing fragments.
    pub lost: Vec<LostDatagram>,
    /// Waits before TCP segments sent again, microseconds.
    pub tcp_resend_waits_us: Vec<u64>,
}

/// What every wire counter's name starts with.
pub const PREFIX: &str = "wire.";

/// The names of the counters [`WireSummary::counters`] gives, for validation and docs.
pub const COUNTERS: &[&str] = &[
    "wire.rpc.calls",
    "wire.rpc.replies",
    "wire.rpc.retransmissions",
    "wire.rpc.unanswered",
    "wire.rpc.latency_p50_ms",
    "wire.rpc.latency_p90_ms",
    "wire.rpc.latency_max_ms",
    "wire.rpc.wait_p50_ms",
    "wire.rpc.wait_p90_ms",
    "wire.rpc.wait_max_ms",
    "wire.ip.lost_fragment_datagrams",
    "wire.ip.lost_fragment_replies",
    "wire.tcp.retransmitted_segments",
    "wire.tcp.wait_p90_ms",
];

impl WireSummary {
    /// Derives the summary of the messages of `d` sent in `[from_us, to_us)` (`None`:
    /// all). A call belongs to the window of its first send; its resends and reply
    /// count with it wherever they fall.
    pub fn of(d: &Decoded, window: Option<(u64, u64)>) -> WireSummary {
        let inside = |t: u64| window.is_none_or(|(a, b)| t >= a && t < b);
        type Key = (Ipv4Addr, Ipv4Addr, u32);
        let mut index: HashMap<Key, usize> = HashMap::new();
        let mut calls: Vec<CallTimeline> = Vec::new();
        let mut waits = Vec::new();
        for e in &d.rpc {
            match &e.call {
                Some(c) => {
                    let key = (e.src.0, e.dst.0, e.xid);
                    match index.get(&key) {
                        Some(&i) => {
                            let t = &mut calls[i];
                            let previous_us = *t.sends_us.last().expect("one send");
                            t.sends_us.push(e.time_us);
                            waits.push(Wait {
                                xid: e.xid,
                                procedure: t.procedure.clone(),
                                attempt: t.sends_us.len() as u32,
                                previous_us,
                                sent_us: e.time_us,
                                wait_ms: e.time_us.saturating_sub(previous_us) as f64 / 1000.0,
                            });
                        }
                        None if inside(e.time_us) => {
                            index.insert(key, calls.len());
                            calls.push(CallTimeline {
                                xid: e.xid,
                                procedure: c.name(),
                                program: c.program,
                                sends_us: vec![e.time_us],
                                reply_us: None,
                            });
                        }
                        None => {}
                    }
                }
                None => {
                    if let Some(&i) = index.get(&(e.dst.0, e.src.0, e.xid)) {
                        calls[i].reply_us.get_or_insert(e.time_us);
                    }
                }
            }
        }
        WireSummary {
            frames: d.frames,
            procedures: procedures(&calls),
            calls,
            waits,
            lost: d.lost.iter().filter(|l| inside(l.time_us)).cloned().collect(),
            tcp_resend_waits_us: d.tcp_resends.iter().filter(|r| inside(r.time_us)).map(|r| r.wait_us).collect(),
        }
    }

    /// The summaries `parts` (of one VM's iterations, say) as one: their calls, waits,
    /// lost datagrams and TCP resends together, the procedure table over all of them.
    pub fn merge(parts: &[WireSummary]) -> WireSummary {
        let calls: Vec<CallTimeline> = parts.iter().flat_map(|p| p.calls.iter().cloned()).collect();
        WireSummary {
            frames: parts.iter().map(|p| p.frames).sum(),
            procedures: procedures(&calls),
            calls,
            waits: parts.iter().flat_map(|p| p.waits.iter().cloned()).collect(),
            lost: parts.iter().flat_map(|p| p.lost.iter().cloned()).collect(),
            tcp_resend_waits_us: parts.iter().flat_map(|p| p.tcp_resend_waits_us.iter().copied()).collect(),
        }
    }

    /// Every call's first-send → reply latency, microseconds.
    fn latencies_us(&self) -> Vec<u64> {
        self.calls.iter().filter_map(|c| Some(c.reply_us?.saturating_sub(c.sends_us[0]))).collect()
    }

    /// The ten (or `n`) longest waits, longest first (ties: earlier first).
    pub fn longest_waits(&self, n: usize) -> Vec<&Wait> {
        let mut w: Vec<&Wait> = self.waits.iter().collect();
        w.sort_by(|a, b| b.wait_ms.total_cmp(&a.wait_ms).then(a.sent_us.cmp(&b.sent_us)));
        w.truncate(n);
        w
    }

    /// The counters ([`COUNTERS`], in that order): counts, and durations in ms.
    pub fn counters(&self) -> Vec<(&'static str, f64)> {
        let calls = self.calls.len() as f64;
        let replies = self.calls.iter().filter(|c| c.reply_us.is_some()).count() as f64;
        let latency = Quantiles::of(&self.latencies_us());
        let wait_us: Vec<u64> = self.waits.iter().map(|w| w.sent_us - w.previous_us).collect();
        let wait = Quantiles::of(&wait_us);
        let tcp = Quantiles::of(&self.tcp_resend_waits_us);
        let values = [
            calls,
            replies,
            self.waits.len() as f64,
            calls - replies,
            latency.p50_ms,
            latency.p90_ms,
            latency.max_ms,
            wait.p50_ms,
            wait.p90_ms,
            wait.max_ms,
            self.lost.len() as f64,
            self.lost.iter().filter(|l| l.reply).count() as f64,
            self.tcp_resend_waits_us.len() as f64,
            tcp.p90_ms,
        ];
        COUNTERS.iter().copied().zip(values).collect()
    }
}

/// The procedure table of `calls`: per procedure name, its calls, retransmissions,
/// replies and latencies.
fn procedures(calls: &[CallTimeline]) -> BTreeMap<String, ProcedureRow> {
    let mut procedures: BTreeMap<String, ProcedureRow> = BTreeMap::new();
    let mut latencies: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    for c in calls {
        let row = procedures.entry(c.procedure.clone()).or_default();
        row.program = c.program;
        row.calls += 1;
        row.retransmissions += c.sends_us.len() as u64 - 1;
        if let Some(r) = c.reply_us {
            row.replies += 1;
            latencies.entry(c.procedure.clone()).or_default().push(r.saturating_sub(c.sends_us[0]));
        }
    }
    for (name, l) in latencies {
        procedures.get_mut(&name).expect("row").latency = Quantiles::of(&l);
    }
    procedures
}

#[cfg(test)]
mod tests {
    use super::super::decode::decode;
    use super::super::decode::tests::{fragments, frame, udp, CLIENT, SERVER};
    use super::super::rpc::tests::{call, reply};
    use super::*;

    #[test]
    fn quantiles_are_nearest_rank() {
        let q = Quantiles::of(&[5000, 1000, 3000, 2000, 4000, 6000, 7000, 8000, 9000, 10000]);
        assert_eq!((q.count, q.p50_ms, q.p90_ms, q.max_ms), (10, 5.0, 9.0, 10.0));
        assert_eq!(Quantiles::of(&[]), Quantiles::default());
    }

    /// A READ answered after one resend (its first reply lost a fragment), and a
    /// GETATTR answered at once.
    #[test]
    fn retransmissions_waits_and_latency_per_call() {
        let read = call(1, 100003, 3, 6, &[]);
        let mut big = reply(1);
        big.resize(3000, 0);
        let frags = fragments(SERVER, CLIENT, 20, &big, 1480);
        // The server's second reply is a new datagram (a new IP id).
        let again = fragments(SERVER, CLIENT, 21, &big, 1480);
        let frames = vec![
            frame(1_000_000, udp(CLIENT, SERVER, 800, 2049, &read)),
            frame(1_001_000, frags[0].clone()),
            frame(1_001_100, frags[2].clone()),
            frame(1_700_000, udp(CLIENT, SERVER, 800, 2049, &read)),
            frame(1_701_000, again[0].clone()),
            frame(1_701_050, again[1].clone()),
            frame(1_701_100, again[2].clone()),
            frame(2_000_000, udp(CLIENT, SERVER, 800, 2049, &call(2, 100003, 3, 1, &[]))),
            frame(2_000_500, udp(SERVER, CLIENT, 2049, 800, &reply(2))),
        ];
        let s = WireSummary::of(&decode(&frames), None);
        let c: BTreeMap<_, _> = s.counters().into_iter().collect();
        assert_eq!(c["wire.rpc.calls"], 2.0);
        assert_eq!(c["wire.rpc.retransmissions"], 1.0);
        assert_eq!(c["wire.rpc.wait_max_ms"], 700.0);
        assert_eq!(c["wire.rpc.latency_max_ms"], 701.1);
        assert_eq!(c["wire.rpc.latency_p50_ms"], 0.5);
        assert_eq!(c["wire.ip.lost_fragment_datagrams"], 1.0);
        assert_eq!(c["wire.ip.lost_fragment_replies"], 1.0);
        assert_eq!(s.procedures["NFSv3 READ"].retransmissions, 1);
        assert_eq!(s.longest_waits(10)[0].attempt, 2);
        // A window holding only the GETATTR.
        let w = WireSummary::of(&decode(&frames), Some((1_900_000, 3_000_000)));
        assert_eq!((w.calls.len(), w.waits.len(), w.lost.len()), (1, 0, 0));
    }
}
