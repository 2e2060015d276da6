//! The wire decoder (runner/src/wire/) against an independent oracle, Wireshark's
//! `tshark` (Debian's, installed by .ci/install-deps): on each capture below, tshark's
//! RPC XIDs, calls, replies and retransmissions (the same XID called again by the same
//! client to the same server), counted from `tshark -T fields -e rpc.xid -e
//! rpc.msgtyp …`, equal ours ([`vmrepro::wire::summary::WireSummary`]).
//!
//! - `fixtures/wire/*.pcap`: captures recorded by real runs (see its README.md):
//!   `nfs-udp-rto-carryover-mainline.pcap`, the first 699 frames of the unpatched
//!   client's capture in a run of `suites/nfs-udp-rto-carryover.yaml` (QEMU's
//!   filter-dump, frames cut at 256 bytes: 128 calls, 64 of them sent again, 127
//!   answered; the first real capture made pcap-file 2.0.0's reader refuse every cut
//!   frame, see `runner/src/wire/pcap.rs`);
//! - a synthetic capture built here with etherparse and pcap-file: a UDP call sent
//!   three times, a reply that lost its middle fragment, a reply in three fragments
//!   that all arrived, and TCP record marks split across segments, with a segment
//!   sent again.
//!
//! Without tshark the comparison is skipped with a printed reason, and fails under
//! `CI=true` (as tests/kcidb.rs does with its validator).
//!
//! Also here: the report's "On the wire" timeline (report.html) of the synthetic capture,
//! snapshotted (`snapshots/wire__timeline.snap`).

mod support;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::process::Command;

use etherparse::{IpFragOffset, IpNumber, Ipv4Header, PacketBuilder};
use vmrepro::wire::run_dir::{run_captures, VmWire, CAPTURE_FILE};

const CLIENT: [u8; 4] = [10, 97, 0, 10];
const SERVER: [u8; 4] = [10, 97, 0, 1];

/// `tshark`, or `None` (printed) outside CI; under `CI=true` its absence fails.
fn tshark() -> Option<PathBuf> {
    let t = PathBuf::from("tshark");
    if Command::new(&t).arg("--version").output().is_ok_and(|o| o.status.success()) {
        return Some(t);
    }
    let why = "tshark is not on PATH (run .ci/install-deps: Debian's tshark)";
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("the tshark oracle is missing under CI: {why}");
    }
    eprintln!("skipped: tshark cross-check: {why}");
    None
}

/// What both sides count on one capture.
#[derive(Debug, PartialEq, Eq)]
struct Counts {
    /// Distinct (client, server, XID) calls.
    calls: usize,
    /// Calls sent again: sends after a call's first.
    retransmissions: usize,
    /// Distinct calls with a reply.
    replies: usize,
    /// Every XID seen in a call, sorted.
    xids: BTreeSet<u32>,
}

/// Counts from tshark's dissection of `pcap`: one line per frame with its addresses
/// and, for each RPC message the frame completes (a TCP frame can complete several),
/// its XID and message type (0 call, 1 reply).
fn tshark_counts(tshark: &Path, pcap: &Path) -> Counts {
    let out = Command::new(tshark)
        .args(["-n", "-r"])
        .arg(pcap)
        .args(["-Y", "rpc", "-T", "fields", "-E", "separator=\t", "-E", "occurrence=a", "-E", "aggregator=,"])
        .args(["-e", "ip.src", "-e", "ip.dst", "-e", "rpc.xid", "-e", "rpc.msgtyp"])
        .output()
        .expect("tshark runs");
    assert!(out.status.success(), "tshark failed: {}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).expect("tshark prints UTF-8");
    let mut sends: HashMap<(String, String, u32), usize> = HashMap::new();
    let mut replied: BTreeSet<(String, String, u32)> = BTreeSet::new();
    for line in text.lines() {
        let f: Vec<&str> = line.split('\t').collect();
        assert_eq!(f.len(), 4, "tshark line {line:?}");
        // A fragmented datagram's reassembled IP header repeats the addresses.
        let (src, dst) = (f[0].split(',').next().unwrap().to_string(), f[1].split(',').next().unwrap().to_string());
        let xids = f[2].split(',').filter(|x| !x.is_empty());
        let types = f[3].split(',').filter(|x| !x.is_empty());
        for (x, t) in xids.zip(types) {
            let xid = u32::from_str_radix(x.trim_start_matches("0x"), 16).expect("hex XID");
            match t {
                "0" => *sends.entry((src.clone(), dst.clone(), xid)).or_default() += 1,
                "1" => {
                    replied.insert((dst.clone(), src.clone(), xid));
                }
                other => panic!("message type {other} in {line:?}"),
            }
        }
    }
    Counts {
        calls: sends.len(),
        retransmissions: sends.values().map(|n| n - 1).sum(),
        replies: sends.keys().filter(|k| replied.contains(*k)).count(),
        xids: sends.keys().map(|k| k.2).collect(),
    }
}

fn our_counts(v: &VmWire) -> Counts {
    let s = &v.summary;
    Counts {
        calls: s.calls.len(),
        retransmissions: s.waits.len(),
        replies: s.calls.iter().filter(|c| c.reply_us.is_some()).count(),
        xids: s.calls.iter().map(|c| c.xid).collect(),
    }
}

/// A run folder holding `pcap` as VM `client`'s capture, read back as the report and
/// `vmrepro wire` read it.
fn read_as_run(pcap: &[u8]) -> (tempfile::TempDir, VmWire) {
    let run = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(run.path().join("vms/client")).unwrap();
    std::fs::write(run.path().join("vms/client").join(CAPTURE_FILE), pcap).unwrap();
    let mut v = run_captures(run.path(), Some("client")).expect("the capture reads");
    (run, v.remove(0))
}

/// An AUTH_NULL call header (RFC 5531) for `prog`/`vers`/`proc_`, then `args`.
fn call(xid: u32, prog: u32, vers: u32, proc_: u32, args: &[u32]) -> Vec<u8> {
    let mut w = vec![xid, 0, 2, prog, vers, proc_, 0, 0, 0, 0];
    w.extend_from_slice(args);
    w.iter().flat_map(|v| v.to_be_bytes()).collect()
}

/// An accepted, successful reply header, then `len` bytes of zeros.
fn reply(xid: u32, len: usize) -> Vec<u8> {
    let mut r: Vec<u8> = [xid, 1, 0, 0, 0, 0, 0].iter().flat_map(|v| v.to_be_bytes()).collect();
    r.resize(r.len() + len, 0);
    r
}

fn udp(src: [u8; 4], dst: [u8; 4], sport: u16, dport: u16, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    PacketBuilder::ethernet2([2; 6], [4; 6]).ipv4(src, dst, 64).udp(sport, dport).write(&mut out, payload).unwrap();
    out
}

/// A UDP datagram as IPv4 fragments of `size` payload bytes (a multiple of 8), IP id `id`.
fn fragments(src: [u8; 4], dst: [u8; 4], sport: u16, dport: u16, id: u16, payload: &[u8], size: usize) -> Vec<Vec<u8>> {
    let whole = udp(src, dst, sport, dport, payload);
    let ip_payload = &whole[14 + 20..];
    ip_payload
        .chunks(size)
        .enumerate()
        .map(|(i, chunk)| {
            let mut h = Ipv4Header::new(chunk.len() as u16, 64, IpNumber::UDP, src, dst).unwrap();
            h.identification = id;
            h.more_fragments = (i + 1) * size < ip_payload.len();
            h.fragment_offset = IpFragOffset::try_new((i * size / 8) as u16).unwrap();
            h.header_checksum = h.calc_header_checksum();
            let mut f = whole[..14].to_vec();
            h.write(&mut f).unwrap();
            f.extend_from_slice(chunk);
            f
        })
        .collect()
}

#[allow(clippy::too_many_arguments)]
fn tcp(src: [u8; 4], dst: [u8; 4], sport: u16, dport: u16, seq: u32, ack: u32, syn: bool, payload: &[u8]) -> Vec<u8> {
    let mut b = PacketBuilder::ethernet2([2; 6], [4; 6]).ipv4(src, dst, 64).tcp(sport, dport, seq, 65000);
    b = if syn { b.syn() } else { b.ack(ack) };
    if syn && ack != 0 {
        b = b.ack(ack);
    }
    let mut out = Vec::new();
    b.write(&mut out, payload).unwrap();
    out
}

/// A last-fragment record mark (RFC 5531 section 11) before `body`.
fn marked(body: &[u8]) -> Vec<u8> {
    [((body.len() as u32) | 0x8000_0000).to_be_bytes().as_slice(), body].concat()
}

/// The synthetic capture (see the module's docs), as pcap bytes.
fn synthetic() -> Vec<u8> {
    const NFS: u32 = 100003;
    let mut frames: Vec<(u64, Vec<u8>)> = Vec::new();
    let t = |ms: u64| 1_764_700_000_000_000 + ms * 1000;
    // UDP: READ 0x101 sent three times; its first reply lost fragment 1 of 3, the second
    // arrived whole (new IP id).
    let read = call(0x101, NFS, 3, 6, &[0; 10]);
    let big = reply(0x101, 3000);
    let lost = fragments(SERVER, CLIENT, 2049, 800, 20, &big, 1480);
    let whole = fragments(SERVER, CLIENT, 2049, 800, 21, &big, 1480);
    frames.push((t(0), udp(CLIENT, SERVER, 800, 2049, &read)));
    frames.push((t(2), lost[0].clone()));
    frames.push((t(3), lost[2].clone()));
    frames.push((t(1100), udp(CLIENT, SERVER, 800, 2049, &read)));
    frames.push((t(3300), udp(CLIENT, SERVER, 800, 2049, &read)));
    for (i, f) in whole.iter().enumerate() {
        frames.push((t(3302 + i as u64), f.clone()));
    }
    // UDP: GETATTR 0x102 answered at once; NULL 0x103 never answered.
    frames.push((t(3400), udp(CLIENT, SERVER, 800, 2049, &call(0x102, NFS, 3, 1, &[0; 8]))));
    frames.push((t(3401), udp(SERVER, CLIENT, 2049, 800, &reply(0x102, 84))));
    frames.push((t(3500), udp(CLIENT, SERVER, 800, 2049, &call(0x103, NFS, 3, 0, &[]))));
    // TCP: a handshake, then two calls whose records are split across three segments,
    // the last segment sent again 200 ms later, and both replies in one segment.
    let (c0, s0) = (1000u32, 5000u32);
    frames.push((t(4000), tcp(CLIENT, SERVER, 900, 2049, c0, 0, true, &[])));
    frames.push((t(4001), tcp(SERVER, CLIENT, 2049, 900, s0, c0 + 1, true, &[])));
    frames.push((t(4002), tcp(CLIENT, SERVER, 900, 2049, c0 + 1, s0 + 1, false, &[])));
    let stream = [marked(&call(0x201, NFS, 3, 6, &[0; 10])), marked(&call(0x202, NFS, 3, 1, &[0; 8]))].concat();
    let (a, rest) = stream.split_at(30);
    let (b, c) = rest.split_at(40);
    let mut seq = c0 + 1;
    for (ms, part) in [(4010, a), (4011, b), (4012, c)] {
        frames.push((t(ms), tcp(CLIENT, SERVER, 900, 2049, seq, s0 + 1, false, part)));
        seq += part.len() as u32;
    }
    frames.push((t(4212), tcp(CLIENT, SERVER, 900, 2049, seq - c.len() as u32, s0 + 1, false, c)));
    let replies = [marked(&reply(0x201, 40)), marked(&reply(0x202, 84))].concat();
    frames.push((t(4213), tcp(SERVER, CLIENT, 2049, 900, s0 + 1, seq, false, &replies)));
    let mut w = pcap_file::pcap::PcapWriter::new(Vec::new()).unwrap();
    for (us, data) in &frames {
        let p = pcap_file::pcap::PcapPacket::new(std::time::Duration::from_micros(*us), data.len() as u32, data);
        w.write_packet(&p).unwrap();
    }
    w.into_writer()
}

fn fixtures() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/wire");
    let mut v: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map(|r| r.flatten().map(|e| e.path()).filter(|p| p.extension().is_some_and(|e| e == "pcap")).collect())
        .unwrap_or_default();
    v.sort();
    v
}

/// What we read from the synthetic capture, checked by hand first (so a tshark that
/// agrees with a wrong decoder can't pass it): 5 calls, 2 resends of one XID over UDP
/// and none over TCP (a segment sent again is not a call sent again), 4 replies, one
/// lost-fragment reply, one TCP segment sent again.
#[test]
fn the_synthetic_capture_reads_as_built() {
    let (_run, v) = read_as_run(&synthetic());
    let c = our_counts(&v);
    assert_eq!((c.calls, c.retransmissions, c.replies), (5, 2, 4), "{c:?}");
    assert_eq!(c.xids, BTreeSet::from([0x101, 0x102, 0x103, 0x201, 0x202]));
    let s = &v.summary;
    assert_eq!(s.lost.len(), 1);
    assert_eq!((s.lost[0].xid, s.lost[0].missing.clone()), (Some(0x101), vec![1]));
    assert_eq!(s.tcp_resend_waits_us, [200_000]);
    let waits: Vec<f64> = s.waits.iter().map(|w| w.wait_ms).collect();
    assert_eq!(waits, [1100.0, 2200.0]);
}

/// tshark's counts equal ours on the synthetic capture and on every recorded fixture.
#[test]
fn tshark_counts_the_same_calls_replies_and_retransmissions() {
    let Some(tshark) = tshark() else { return };
    let dir = tempfile::tempdir().unwrap();
    let synthetic_path = dir.path().join("synthetic.pcap");
    std::fs::write(&synthetic_path, synthetic()).unwrap();
    let mut checked = BTreeMap::new();
    for pcap in std::iter::once(synthetic_path).chain(fixtures()) {
        let bytes = std::fs::read(&pcap).unwrap();
        let (_run, v) = read_as_run(&bytes);
        let ours = our_counts(&v);
        let theirs = tshark_counts(&tshark, &pcap);
        assert_eq!(ours, theirs, "{}: ours (left) and tshark's (right) differ", pcap.display());
        assert!(ours.calls > 0, "{}: no RPC call at all", pcap.display());
        checked.insert(pcap.file_name().unwrap().to_string_lossy().into_owned(), ours);
    }
    eprintln!("tshark agrees on: {checked:?}");
}

/// The report's timeline of the synthetic capture: its structure (rows, marks, waits,
/// labels) as the page has it.
#[test]
fn the_timeline_of_the_synthetic_capture() {
    let (_run, v) = read_as_run(&synthetic());
    let panel = vmrepro::report::published::wire::Panel { vm: &v.vm, summary: &v.summary };
    let svg = vmrepro::report::published::wire::timeline_svg("synthetic, iteration 1", &[panel]);
    assert!(roxmltree_ok(&svg), "the timeline is well-formed XML");
    support::snapshot_settings().bind(|| insta::assert_snapshot!("wire__timeline", svg));
}

/// `svg` parses as XML (the page is XHTML).
fn roxmltree_ok(svg: &str) -> bool {
    roxmltree::Document::parse(svg).is_ok()
}
