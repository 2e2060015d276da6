//! Frames → RPC messages: Ethernet/IPv4/UDP/TCP through `etherparse` (lax, since a
//! capture keeps only each frame's first bytes), IPv4 fragment bookkeeping per
//! datagram, ONC RPC over UDP and over TCP with record marking ([`super::rpc`]), and
//! TCP segments sent again.

use std::collections::HashMap;
use std::net::Ipv4Addr;

use etherparse::{LaxNetSlice, LaxSlicedPacket, TcpHeaderSlice, UdpHeaderSlice};

use super::pcap::Frame;
use super::rpc::{self, RpcBody, RpcCall};

/// How long an incomplete datagram waits for its missing fragments before it counts as
/// lost, microseconds: Linux's default `net.ipv4.ipfrag_time` (30 s).
pub const REASSEMBLY_TIMEOUT_US: u64 = 30_000_000;

/// The transport an RPC message came over.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Transport {
    /// One message per UDP datagram.
    Udp,
    /// Record-marked messages in a TCP stream.
    Tcp,
}

/// One RPC message seen whole on the wire (for UDP: every fragment of its datagram).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RpcEvent {
    /// Time of the frame that completed it, microseconds since the epoch.
    pub time_us: u64,
    /// Sender address and port.
    pub src: (Ipv4Addr, u16),
    /// Receiver address and port.
    pub dst: (Ipv4Addr, u16),
    /// UDP or TCP.
    pub transport: Transport,
    /// Transaction id.
    pub xid: u32,
    /// `Some` for a call, `None` for a reply.
    pub call: Option<RpcCall>,
}

/// A fragmented IPv4 datagram that never arrived whole.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct LostDatagram {
    /// Time of its first fragment seen, microseconds since the epoch.
    pub time_us: u64,
    /// Source and destination address.
    pub src: Ipv4Addr,
    /// Destination address.
    pub dst: Ipv4Addr,
    /// IP identification.
    pub ip_id: u16,
    /// The RPC XID, when the first fragment (which carries it) arrived.
    pub xid: Option<u32>,
    /// `true` when the first fragment carried an RPC reply.
    pub reply: bool,
    /// Fragment count, when the last fragment arrived (it gives the total length) and
    /// another one did (it gives the fragments' size).
    pub fragments: Option<u32>,
    /// Whether the last fragment (the one with More Fragments clear) arrived.
    pub last_seen: bool,
    /// 0-based indices of the missing fragments; with `fragments` unknown and the last
    /// fragment missing, the last index listed stands for "the last fragment and any
    /// before it not seen"; empty when only the last fragment arrived (every fragment
    /// before it is missing, how many is unknown).
    pub missing: Vec<u32>,
}

/// A TCP segment whose bytes were sent before.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct TcpResend {
    /// Time sent again, microseconds since the epoch.
    pub time_us: u64,
    /// Sender address and port.
    pub src: (Ipv4Addr, u16),
    /// Sequence number.
    pub seq: u32,
    /// Microseconds since the same sequence number was last sent (or since the
    /// sender's previous segment, when that sequence number starts no segment seen).
    pub wait_us: u64,
}

/// Everything decoded from one capture.
#[derive(Debug, Clone, Default)]
pub struct Decoded {
    /// Frames read.
    pub frames: u64,
    /// RPC messages, in capture order.
    pub rpc: Vec<RpcEvent>,
    /// Datagrams with missing fragments.
    pub lost: Vec<LostDatagram>,
    /// TCP segments sent again.
    pub tcp_resends: Vec<TcpResend>,
}

type DatagramKey = (Ipv4Addr, Ipv4Addr, u8, u16);
/// One direction of a TCP connection: (sender, receiver) address and port.
type Streams = HashMap<((Ipv4Addr, u16), (Ipv4Addr, u16)), Stream>;

/// A datagram whose fragments are arriving.
struct Partial {
    first_us: u64,
    /// (offset, length) in bytes of each fragment seen.
    pieces: Vec<(u32, u32)>,
    /// Total payload length, once the last fragment (MF clear) arrived.
    total: Option<u32>,
    /// The RPC message decoded from the first fragment, with its ports.
    first: Option<(u16, u16, Transport, Result<rpc::RpcMessage, rpc::RpcError>)>,
}

impl Partial {
    fn complete(&self) -> bool {
        let Some(total) = self.total else { return false };
        let mut pieces = self.pieces.clone();
        pieces.sort_unstable();
        let mut reach = 0;
        for (off, len) in pieces {
            if off > reach {
                return false;
            }
            reach = reach.max(off + len);
        }
        reach >= total
    }

    fn lost(&self, key: DatagramKey) -> LostDatagram {
        // Every fragment but the last has the same length (the path MTU's).
        let size = self.pieces.iter().filter(|(o, l)| Some(o + l) != self.total).map(|p| p.1).max().unwrap_or(0);
        let seen: Vec<u32> = self.pieces.iter().filter_map(|(o, _)| o.checked_div(size)).collect();
        let fragments = self.total.filter(|_| size > 0).map(|t| t.div_ceil(size));
        let upto = fragments.unwrap_or_else(|| seen.iter().max().map_or(1, |m| m + 2));
        let (xid, reply) = match &self.first {
            Some((_, _, _, Ok(m))) => (Some(m.xid), matches!(m.body, RpcBody::Reply { .. })),
            _ => (None, false),
        };
        LostDatagram {
            time_us: self.first_us,
            src: key.0,
            dst: key.1,
            ip_id: key.3,
            xid,
            reply,
            fragments,
            last_seen: self.total.is_some(),
            missing: if size == 0 { vec![] } else { (0..upto).filter(|i| !seen.contains(i)).collect() },
        }
    }
}

/// One direction of a TCP connection.
#[derive(Default)]
struct Stream {
    /// Highest sequence number sent (end of the furthest segment).
    high: Option<u32>,
    /// When each segment's start sequence number was last sent.
    sent: HashMap<u32, u64>,
    /// Last segment's time.
    last_us: u64,
    /// Sequence number where the next record mark starts, when in step.
    next_mark: Option<u32>,
    /// The record mark at `next_mark` starts a continuation fragment (no RPC header).
    continuation: bool,
}

/// `a` before `b` in sequence space.
fn seq_lt(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) < 0
}

/// Decodes every frame of a capture. Frames that are not IPv4, or not UDP or TCP, are
/// counted and skipped; UDP and TCP payloads that are not RPC are skipped.
pub fn decode(frames: &[Frame]) -> Decoded {
    let mut d = Decoded { frames: frames.len() as u64, ..Decoded::default() };
    let mut partial: HashMap<DatagramKey, Partial> = HashMap::new();
    let mut streams: Streams = HashMap::new();
    for f in frames {
        let Ok(p) = LaxSlicedPacket::from_ethernet(&f.data) else { continue };
        let Some(LaxNetSlice::Ipv4(ip)) = &p.net else { continue };
        let h = ip.header();
        let (src, dst, proto) = (h.source_addr(), h.destination_addr(), h.protocol().0);
        let payload = ip.payload().payload;
        // The IP payload's true length (the capture may hold fewer bytes).
        let len = u32::from(h.total_len()).saturating_sub(u32::from(h.ihl()) * 4);
        let offset = u32::from(h.fragments_offset().value()) * 8;
        if proto != 6 && proto != 17 {
            continue;
        }
        if proto == 6 {
            tcp_segment(&mut d, &mut streams, f.time_us, src, dst, payload, len);
            continue;
        }
        if offset == 0 && !h.more_fragments() {
            if let Some((sport, dport, Ok(m))) = udp_rpc(payload) {
                d.rpc.push(event(f.time_us, (src, sport), (dst, dport), Transport::Udp, m));
            }
            continue;
        }
        let key = (src, dst, proto, h.identification());
        if partial.get(&key).is_some_and(|q| f.time_us.saturating_sub(q.first_us) > REASSEMBLY_TIMEOUT_US) {
            let q = partial.remove(&key).expect("present");
            d.lost.push(q.lost(key));
        }
        let q = partial.entry(key).or_insert_with(|| Partial {
            first_us: f.time_us,
            pieces: Vec::new(),
            total: None,
            first: None,
        });
        q.pieces.push((offset, len));
        if !h.more_fragments() {
            q.total = Some(offset + len);
        }
        if offset == 0 {
            q.first = udp_rpc(payload).map(|(s, dp, m)| (s, dp, Transport::Udp, m));
        }
        if q.complete() {
            let q = partial.remove(&key).expect("present");
            if let Some((sport, dport, t, Ok(m))) = q.first {
                d.rpc.push(event(f.time_us, (src, sport), (dst, dport), t, m));
            }
        }
    }
    let mut rest: Vec<_> = partial.into_iter().collect();
    rest.sort_by_key(|(_, q)| q.first_us);
    d.lost.extend(rest.into_iter().map(|(k, q)| q.lost(k)));
    d.lost.sort_by_key(|l| l.time_us);
    d
}

fn event(
    time_us: u64,
    src: (Ipv4Addr, u16),
    dst: (Ipv4Addr, u16),
    transport: Transport,
    m: rpc::RpcMessage,
) -> RpcEvent {
    let call = match m.body {
        RpcBody::Call(c) => Some(c),
        RpcBody::Reply { .. } => None,
    };
    RpcEvent { time_us, src, dst, transport, xid: m.xid, call }
}

/// The ports and RPC header of a UDP datagram's first bytes.
fn udp_rpc(payload: &[u8]) -> Option<(u16, u16, Result<rpc::RpcMessage, rpc::RpcError>)> {
    let u = UdpHeaderSlice::from_slice(payload).ok()?;
    Some((u.source_port(), u.destination_port(), rpc::decode(&payload[8..])))
}

/// Bookkeeping for one TCP segment: resends, and the RPC records that start in it.
fn tcp_segment(
    d: &mut Decoded,
    streams: &mut Streams,
    time_us: u64,
    src: Ipv4Addr,
    dst: Ipv4Addr,
    payload: &[u8],
    ip_len: u32,
) {
    let Ok(t) = TcpHeaderSlice::from_slice(payload) else { return };
    let hlen = usize::from(t.data_offset()) * 4;
    let len = ip_len.saturating_sub(hlen as u32);
    let (from, to) = ((src, t.source_port()), (dst, t.destination_port()));
    let s = streams.entry((from, to)).or_default();
    let seq = t.sequence_number();
    if t.syn() {
        *s = Stream { high: Some(seq.wrapping_add(1)), next_mark: Some(seq.wrapping_add(1)), ..Stream::default() };
        return;
    }
    if len == 0 {
        return;
    }
    let end = seq.wrapping_add(len);
    let resent = s.high.is_some_and(|h| seq_lt(seq, h));
    if resent {
        let since = s.sent.get(&seq).copied().unwrap_or(s.last_us);
        d.tcp_resends.push(TcpResend { time_us, src: from, seq, wait_us: time_us.saturating_sub(since) });
    }
    s.sent.insert(seq, time_us);
    s.last_us = time_us;
    if s.high.is_none_or(|h| seq_lt(h, end)) {
        s.high = Some(end);
    }
    if resent {
        return;
    }
    let data = payload.get(hlen..).unwrap_or(&[]);
    // Not in step (capture started mid-stream, or a mark fell in bytes not captured):
    // take a mark at the segment's start if an RPC header follows it.
    if s.next_mark.is_none_or(|m| seq_lt(m, seq)) {
        s.next_mark = data.get(..4).filter(|_| data.get(4..).is_some_and(|r| rpc::decode(r).is_ok())).map(|_| seq);
        s.continuation = false;
    }
    while let Some(mark) = s.next_mark.filter(|m| !seq_lt(*m, seq) && seq_lt(*m, end)) {
        let at = mark.wrapping_sub(seq) as usize;
        let Some(b) = data.get(at..at + 4) else {
            s.next_mark = None;
            return;
        };
        let (last, frag_len) = rpc::record_mark([b[0], b[1], b[2], b[3]]);
        if !s.continuation {
            if let Ok(m) = rpc::decode(&data[at + 4..]) {
                d.rpc.push(event(time_us, from, to, Transport::Tcp, m));
            }
        }
        s.continuation = !last;
        s.next_mark = Some(mark.wrapping_add(4).wrapping_add(frag_len));
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::super::rpc::tests::{call, reply};
    use super::*;
    use etherparse::PacketBuilder;

    pub(crate) const CLIENT: [u8; 4] = [10, 0, 0, 10];
    pub(crate) const SERVER: [u8; 4] = [10, 0, 0, 1];

    /// An Ethernet frame with one UDP datagram from `src`:`sport` to `dst`:`dport`.
    pub(crate) fn udp(src: [u8; 4], dst: [u8; 4], sport: u16, dport: u16, payload: &[u8]) -> Vec<u8> {
        let b = PacketBuilder::ethernet2([2; 6], [4; 6]).ipv4(src, dst, 64).udp(sport, dport);
        let mut out = Vec::new();
        b.write(&mut out, payload).unwrap();
        out
    }

    /// The IPv4 fragments (`size` bytes of payload each but the last) of a UDP datagram
    /// with `payload`, IP id `id`, as Ethernet frames.
    pub(crate) fn fragments(src: [u8; 4], dst: [u8; 4], id: u16, payload: &[u8], size: usize) -> Vec<Vec<u8>> {
        let whole = udp(src, dst, 2049, 800, payload);
        let ip_payload = &whole[14 + 20..];
        ip_payload
            .chunks(size)
            .enumerate()
            .map(|(i, chunk)| {
                let mut h =
                    etherparse::Ipv4Header::new(chunk.len() as u16, 64, etherparse::IpNumber::UDP, src, dst).unwrap();
                h.identification = id;
                h.more_fragments = (i + 1) * size < ip_payload.len();
                h.fragment_offset = etherparse::IpFragOffset::try_new((i * size / 8) as u16).unwrap();
                h.header_checksum = h.calc_header_checksum();
                let mut f = whole[..14].to_vec();
                h.write(&mut f).unwrap();
                f.extend_from_slice(chunk);
                f
            })
            .collect()
    }

    pub(crate) fn frame(time_us: u64, data: Vec<u8>) -> Frame {
        Frame { time_us, orig_len: data.len() as u32, data, offset: 0 }
    }

    #[test]
    fn a_reply_that_lost_a_fragment_is_lost_with_its_xid() {
        let mut body = reply(42);
        body.resize(3000, 0);
        let frags = fragments(SERVER, CLIENT, 7, &body, 1480);
        assert_eq!(frags.len(), 3);
        let mut frames = vec![frame(0, udp(CLIENT, SERVER, 800, 2049, &call(42, 100003, 3, 6, &[])))];
        frames.push(frame(10, frags[0].clone()));
        frames.push(frame(12, frags[2].clone()));
        let d = decode(&frames);
        assert_eq!(d.rpc.len(), 1, "only the call arrived whole");
        assert_eq!(d.lost.len(), 1);
        let l = &d.lost[0];
        assert_eq!((l.xid, l.reply, l.fragments, l.missing.clone(), l.ip_id), (Some(42), true, Some(3), vec![1], 7));
        // The same fragments all there: the reply counts, nothing is lost.
        let whole: Vec<Frame> = frags.into_iter().enumerate().map(|(i, f)| frame(i as u64, f)).collect();
        let d = decode(&whole);
        assert_eq!((d.rpc.len(), d.lost.len()), (1, 0));
        assert_eq!((d.rpc[0].xid, d.rpc[0].call.is_none(), d.rpc[0].time_us), (42, true, 2));
    }

    #[test]
    fn a_lost_first_fragment_has_no_xid_and_a_lost_last_no_count() {
        let mut body = reply(9);
        body.resize(4000, 0);
        let frags = fragments(SERVER, CLIENT, 8, &body, 1480);
        let d = decode(&[frame(0, frags[1].clone()), frame(1, frags[2].clone())]);
        assert_eq!((d.lost[0].xid, d.lost[0].missing.clone()), (None, vec![0]));
        let d = decode(&[frame(0, frags[0].clone()), frame(1, frags[1].clone())]);
        assert_eq!((d.lost[0].xid, d.lost[0].fragments, d.lost[0].missing.clone()), (Some(9), None, vec![2]));
    }

    /// A TCP segment from `src`:`sport` with sequence number `seq` and `payload`.
    pub(crate) fn tcp(
        src: [u8; 4],
        dst: [u8; 4],
        sport: u16,
        dport: u16,
        seq: u32,
        syn: bool,
        payload: &[u8],
    ) -> Vec<u8> {
        let mut b = PacketBuilder::ethernet2([2; 6], [4; 6]).ipv4(src, dst, 64).tcp(sport, dport, seq, 65000).ack(1);
        if syn {
            b = b.syn();
        }
        let mut out = Vec::new();
        b.write(&mut out, payload).unwrap();
        out
    }

    fn marked(last: bool, body: &[u8]) -> Vec<u8> {
        let mark = (body.len() as u32) | if last { 0x8000_0000 } else { 0 };
        [mark.to_be_bytes().as_slice(), body].concat()
    }

    #[test]
    fn tcp_records_are_followed_across_segments_and_resends_counted() {
        let c1 = call(100, 100003, 3, 6, &[0; 20]);
        let c2 = call(101, 100003, 3, 1, &[]);
        let stream = [marked(true, &c1), marked(true, &c2)].concat();
        let (a, b) = stream.split_at(50);
        let frames = vec![
            frame(0, tcp(CLIENT, SERVER, 900, 2049, 999, true, &[])),
            frame(1, tcp(CLIENT, SERVER, 900, 2049, 1000, false, a)),
            frame(2, tcp(CLIENT, SERVER, 900, 2049, 1050, false, b)),
            frame(400_002, tcp(CLIENT, SERVER, 900, 2049, 1050, false, b)),
            frame(5, tcp(SERVER, CLIENT, 2049, 900, 5000, false, &marked(true, &reply(100)))),
        ];
        let d = decode(&frames);
        let seen: Vec<(u32, bool)> = d.rpc.iter().map(|e| (e.xid, e.call.is_some())).collect();
        assert_eq!(seen, [(100, true), (101, true), (100, false)], "the resent segment adds no call");
        assert_eq!(d.tcp_resends.len(), 1);
        assert_eq!((d.tcp_resends[0].seq, d.tcp_resends[0].wait_us), (1050, 400_000));
    }
}
