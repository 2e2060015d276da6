//! Issue 28's cross-check of a capture against the client's own counters, on every
//! counted iteration that has both a capture window (`capture_bytes`) and the
//! `nfs_read` observers (`nfsstat -rc`, `/proc/self/mountstats`, `netstat -s`). Used on
//! live runs (`tests/suites.rs`) and on the recorded run with captures
//! (`tests/analyse.rs`).
//!
//! What is exact, and why. An iteration's window holds its whole step: the mount in
//! setup, the observers' first reading, the measured `cat`, their second reading, the
//! records after it (`nfs_read`'s `wc -c` of the file: an NFS GETATTR), the unmount in
//! teardown. `cat` is the only reader of the file, and with one mount the guest's NFS
//! calls are that mount's.
//!
//! 1. **READ**: the wire's retransmissions of `NFSv3 READ` equal mountstats' READ
//!    `transmissions - ops` over `cat`: every READ of the step is `cat`'s.
//! 2. **The kernel's two counts agree**: `nfsstat -rc`'s `retrans` over `cat` (every NFS
//!    RPC client of the guest) equals the sum over every operation of the mount's
//!    mountstats `transmissions - ops` over `cat`.
//! 3. **NFS program** (100003): the wire's retransmissions equal nfsstat's over `cat`,
//!    plus the mount's before `cat` (mountstats read just after mounting a new mount:
//!    what mounting resent, e.g. a PATHCONF), plus the wire's retransmissions of NFS
//!    calls first sent after the last READ's reply (after `cat`, when no counter is read
//!    again: the records after it; the unmount sends no NFS call).
//! 4. **Other programs** (PORTMAP, MOUNT: mounting and unmounting) are counted by no
//!    counter read here: the wire's total is the NFS program's plus theirs, listed.
//!
//! What is only bounded, and why: **ReasmFails**. The kernel counts a reassembly
//! failure when a queue's timer (`net.ipv4.ipfrag_time`, read from the VM's earlier
//! steps' output, else Linux's 30 s) fires, i.e. `ipfrag_time` after its first fragment
//! arrived, or up to 1/8 later (the timer wheel's granularity for such timeouts). So of
//! the datagrams sent to the VM that the wire shows with a missing fragment, those
//! whose timer fired before `cat` ended are counted, and the others after it (or never,
//! if the step ended first). The wire brackets `cat`'s end between the last READ's
//! reply and the next call, so the check is: ReasmFails over `cat` lies between the
//! datagrams that must have timed out by that reply and those that may have by that
//! call. The same bounds hold for the lost-fragment replies (the first fragment, with
//! the RPC header, arrived) against the ICMP Time Exceeded the client sent or rate-limited
//! over `cat` (`OutTimeExcds + OutRateLimitHost`): Linux sends one when a queue times out
//! holding its first fragment (RFC 792), and only then.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;

use vmrepro::analyse::Analysis;
use vmrepro::measure::script::Section;
use vmrepro::parse::mountstats::{self, OpStats};
use vmrepro::parse::observe::ObserverKind;
use vmrepro::wire::decode::LostDatagram;
use vmrepro::wire::run_dir::Capture;
use vmrepro::wire::summary::WireSummary;

/// The NFS program's number.
const NFS_PROGRAM: u32 = 100003;

/// What one iteration showed, for the test's output and its assertions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checked {
    /// `suite VM step`.
    pub at: String,
    /// The wire's retransmissions: all, of the NFS program, of NFSv3 READ.
    pub wire: (u64, u64, u64),
    /// nfsstat's over `cat`.
    pub nfsstat: u64,
    /// mountstats' over `cat`: all operations, READ; and before `cat` (mounting).
    pub mountstats: (u64, u64, u64),
    /// The wire's NFS retransmissions after `cat` (of calls first sent after the last
    /// READ's reply), by procedure.
    pub after: BTreeMap<String, u64>,
    /// Other programs' retransmissions on the wire, by procedure.
    pub other: BTreeMap<String, u64>,
    /// ReasmFails over `cat`, and the bounds the wire gives.
    pub reasm: Option<(u64, u64, u64)>,
    /// ICMP Time Exceeded sent or rate-limited over `cat`, and the bounds the wire's
    /// lost-fragment replies give.
    pub time_exceeded: Option<(u64, u64, u64)>,
    /// Datagrams to the VM with a missing fragment in the window (of them replies).
    pub lost: (u64, u64),
}

/// The check on every counted, captured iteration of `a` (see the module docs): panics
/// on a mismatch; returns what it checked, one entry per iteration.
pub fn wire_against_counters(a: &Analysis) -> Vec<Checked> {
    let mut out = Vec::new();
    for m in &a.results.measurements {
        for v in &m.vms {
            let Some(vr) = a.record.vm(&v.vm) else { continue };
            if vr.capture.is_none() {
                continue;
            }
            let capture = Capture::read(&a.dir, &v.vm).expect("the capture reads").expect("a capture file");
            let addr = address(a, &v.vm);
            let frag_time_s = ipfrag_time_s(a, &v.vm);
            for i in v.iterations.iter().filter(|i| i.counted) {
                let Some(range) = vr.step(&i.step).and_then(|s| s.capture_bytes) else { continue };
                let at = format!("{} {} {}", a.record.suite, v.vm, i.step);
                let Some(Some(nfsstat)) = i.metrics.get("rpc_retransmissions") else { continue };
                let nfsstat = u64::try_from(*nfsstat).expect("a count");
                let w = capture.window(range);
                let c = check(&at, &w, i, nfsstat, addr, frag_time_s);
                eprintln!("wire cross-check: {c:?}");
                out.push(c);
            }
        }
    }
    out
}

fn check(
    at: &str,
    w: &WireSummary,
    i: &vmrepro::measure::analysis::IterationResult,
    nfsstat: u64,
    addr: Option<Ipv4Addr>,
    frag_time_s: f64,
) -> Checked {
    let total: u64 = w.procedures.values().map(|r| r.retransmissions).sum();
    let nfs: u64 = w.procedures.values().filter(|r| r.program == NFS_PROGRAM).map(|r| r.retransmissions).sum();
    let read = w.procedures.get("NFSv3 READ").map_or(0, |r| r.retransmissions);
    let other: BTreeMap<String, u64> = w
        .procedures
        .iter()
        .filter(|(_, r)| r.program != NFS_PROGRAM && r.retransmissions > 0)
        .map(|(n, r)| (n.clone(), r.retransmissions))
        .collect();
    let kind = ObserverKind::named("mountstats");
    let ops = |s: Section| -> BTreeMap<String, OpStats> {
        let text = i.raw.sections.text(s);
        let mount = nfs_mount(text).unwrap_or_else(|| panic!("{at}: not one NFS mount in mountstats:\n{text}"));
        mountstats::parse(text, &mount).unwrap_or_else(|e| panic!("{at}: mountstats: {e}")).ops
    };
    let (before, after) = (ops(Section::Before(kind)), ops(Section::After(kind)));
    let resent = |s: &OpStats| s.transmissions - s.ops;
    let zero = OpStats::default();
    let over_run: u64 = after.iter().map(|(op, s)| resent(s) - resent(before.get(op).unwrap_or(&zero))).sum();
    let read_ms = resent(&after["READ"]) - resent(before.get("READ").unwrap_or(&zero));
    let mounting: u64 = before.values().map(resent).sum();
    assert_eq!(read, read_ms, "{at}: NFSv3 READ retransmissions: the wire's {read}, mountstats' {read_ms}");
    assert_eq!(
        over_run, nfsstat,
        "{at}: over the read, mountstats' retransmissions (every op) {over_run}, nfsstat's {nfsstat}"
    );
    let end = last_read_reply(w);
    let mut after: BTreeMap<String, u64> = BTreeMap::new();
    for c in w.calls.iter().filter(|c| c.program == NFS_PROGRAM && c.sends_us[0] > end && c.sends_us.len() > 1) {
        *after.entry(c.procedure.clone()).or_default() += c.sends_us.len() as u64 - 1;
    }
    let after_n: u64 = after.values().sum();
    assert_eq!(
        nfs,
        nfsstat + mounting + after_n,
        "{at}: the wire's NFS-program retransmissions {nfs}; nfsstat's over the read {nfsstat} + the mount's before it {mounting} + the wire's after it {after:?}"
    );
    assert_eq!(total, nfs + other.values().sum::<u64>());
    let to_vm: Vec<&LostDatagram> = w.lost.iter().filter(|l| addr.is_none_or(|a| l.dst == a)).collect();
    let lost = (to_vm.len() as u64, to_vm.iter().filter(|l| l.reply).count() as u64);
    let reasm = i.metrics.get("ip_reassembly_failures").copied().flatten().map(|fails| {
        let fails = u64::try_from(fails).expect("a count");
        bounded(at, &format!("ReasmFails {fails}"), fails, w, &to_vm, frag_time_s)
    });
    let counter = |k: &str| {
        i.changed_counters
            .get(k)
            .map(|&v| u64::try_from(v).expect("a count"))
            .or_else(|| i.appeared_counters.get(k).copied())
    };
    let time_exceeded = reasm.and(counter("netstat.Icmp.OutTimeExcds")).map(|sent| {
        let sent = sent + counter("netstat.Icmp.OutRateLimitHost").unwrap_or(0);
        let replies: Vec<&LostDatagram> = to_vm.iter().copied().filter(|l| l.reply).collect();
        bounded(at, &format!("ICMP Time Exceeded sent or rate-limited {sent}"), sent, w, &replies, frag_time_s)
    });
    Checked {
        at: at.to_string(),
        wire: (total, nfs, read),
        nfsstat,
        mountstats: (over_run, read_ms, mounting),
        after,
        other,
        reasm,
        time_exceeded,
        lost,
    }
}

/// Asserts that `n` (`what` the kernel counted over the read) lies within the bounds
/// [`reasm_bounds`] gives for `lost`; returns `(n, low, high)`.
fn bounded(at: &str, what: &str, n: u64, w: &WireSummary, lost: &[&LostDatagram], frag_time_s: f64) -> (u64, u64, u64) {
    let (lo, hi) = reasm_bounds(w, lost, frag_time_s);
    assert!(
        (lo..=hi).contains(&n),
        "{at}: {what} over the read; the wire says between {lo} and {hi} of its {} datagrams with a missing fragment timed out during it (ipfrag_time {frag_time_s} s)",
        lost.len()
    );
    (n, lo, hi)
}

/// When the last NFSv3 READ's reply came, microseconds (0 when none did): `cat` ended
/// after it, and before the next call.
fn last_read_reply(w: &WireSummary) -> u64 {
    w.calls.iter().filter(|c| c.procedure == "NFSv3 READ").filter_map(|c| c.reply_us).max().unwrap_or(0)
}

/// The bounds on ReasmFails over `cat` that the wire gives (module docs): datagrams whose
/// reassembly timer must have fired by the last READ's reply, and those whose timer may
/// have fired by the next call's first send.
fn reasm_bounds(w: &WireSummary, lost: &[&LostDatagram], frag_time_s: f64) -> (u64, u64) {
    let end = last_read_reply(w);
    let next = w.calls.iter().map(|c| c.sends_us[0]).filter(|&t| t > end).min().unwrap_or(u64::MAX);
    let timeout_us = (frag_time_s * 1e6) as u64;
    let late_us = timeout_us / 8 + 20_000;
    let lo = lost.iter().filter(|l| l.time_us + timeout_us + late_us <= end).count() as u64;
    let hi = lost.iter().filter(|l| l.time_us + timeout_us < next).count() as u64;
    (lo, hi)
}

/// The mount point of the one NFS mount in mountstats' `text`.
fn nfs_mount(text: &str) -> Option<String> {
    let mounts: Vec<&str> = text
        .lines()
        .filter_map(|l| {
            let (mount, rest) = l.strip_prefix("device ")?.split_once(" mounted on ")?.1.split_once(" with fstype ")?;
            (rest == "nfs" || rest.starts_with("nfs ")).then_some(mount)
        })
        .collect();
    match mounts.as_slice() {
        [m] => Some(m.to_string()),
        _ => None,
    }
}

/// VM `vm`'s address from `plan.json`.
fn address(a: &Analysis, vm: &str) -> Option<Ipv4Addr> {
    let plan = super::read_json(&a.dir.join("plan.json"));
    plan["vms"].as_array()?.iter().find(|v| v["name"] == vm)?["address"].as_str()?.parse().ok()
}

/// `net.ipv4.ipfrag_time` as VM `vm`'s steps printed it (`sysctl -w` echoes it), else
/// Linux's default, 30 s.
fn ipfrag_time_s(a: &Analysis, vm: &str) -> f64 {
    let Some(vr) = a.record.vm(vm) else { return 30.0 };
    vr.steps
        .iter()
        .filter_map(|s| a.stdout(s).ok())
        .flat_map(|t| {
            t.lines()
                .filter_map(|l| l.strip_prefix("net.ipv4.ipfrag_time = ")?.trim().parse().ok())
                .collect::<Vec<f64>>()
        })
        .last()
        .unwrap_or(30.0)
}
