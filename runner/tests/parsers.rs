//! Data-driven snapshot tests for `vmrepro::parse` and `vmrepro::measure::stats`.
//!
//! Every `*.txt` under `tests/fixtures/parse/{gnutime,netstat,nfsstat,procnet,
//! procrpcnfs}/` is parsed and its result (`Ok: …` or `Err: "<message>"`) compared with
//! `snapshots/parse__<tool>__<file stem>.snap` at the repository root; every
//! directory under `tests/fixtures/parse/measurement/` is one measured read
//! whose GNU time numbers, derived metrics and counter deltas are compared with
//! `snapshots/parse__measurement__<dir>.snap`. New fixture files are picked up
//! automatically (see `tests/fixtures/parse/README.md`). Besides the
//! snapshots, the tests check invariants and the key counters of the fixtures
//! that model the bug report, and cross-check the raw `/proc` parsers against
//! the tools that read the same files (`netstat -s`, `nfsstat`): captures of
//! the tool's output over the same `/proc` contents are in each tool folder's
//! `paired/` subfolder.

use serde::Serialize;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use vmrepro::measure::observer::{derived_metrics, Observation};
use vmrepro::measure::stats::delta;
use vmrepro::parse::{gnutime, netstat, nfsstat, procnet, procrpcnfs, ParseError};
use vmrepro::plan::measurement::ObserverKind;

/// Bytes read by the measured command in the bug report (`cat` of the test file).
const BYTES_READ: u64 = 100_000_000;

fn fixture_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/parse")
}

fn fixture_files(tool: &str) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(fixture_root().join(tool))
        .unwrap_or_else(|e| panic!("fixture dir {tool}: {e}"))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "txt"))
        .collect();
    files.sort();
    files
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// File name without the `.txt` extension (directory names are kept whole:
/// `linux-6.x-bookworm` has no extension to strip).
fn stem(path: &Path) -> String {
    let name = path.file_name().unwrap().to_string_lossy();
    name.strip_suffix(".txt").unwrap_or(&name).to_string()
}

fn settings() -> insta::Settings {
    let mut s = insta::Settings::clone_current();
    s.set_snapshot_path("../../snapshots");
    s.set_prepend_module_to_snapshot(false);
    s.set_omit_expression(true);
    s
}

/// Asserts one YAML snapshot per item, reporting all mismatches at the end
/// instead of stopping at the first.
fn check_snapshots<T: Serialize>(items: Vec<(String, PathBuf, T)>) {
    let mut failed = Vec::new();
    for (name, input, value) in items {
        let mut s = settings();
        s.set_input_file(&input);
        let ok = catch_unwind(AssertUnwindSafe(|| {
            s.bind(|| insta::assert_yaml_snapshot!(name.as_str(), &value));
        }));
        if ok.is_err() {
            failed.push(name);
        }
    }
    assert!(failed.is_empty(), "snapshot mismatches: {failed:#?}");
}

/// Parses every fixture of `tool` and snapshots the results; returns them for
/// further assertions.
fn snapshot_tool<T: Serialize + Clone>(
    tool: &str,
    parse: fn(&str) -> Result<T, ParseError>,
) -> Vec<(String, Result<T, ParseError>)> {
    let files = fixture_files(tool);
    assert!(files.len() >= 4, "expected fixtures for {tool}, found {files:?}");
    let mut results = Vec::new();
    let mut items = Vec::new();
    for path in files {
        let result = parse(&read(&path));
        let shown: Result<T, String> = result.clone().map_err(|e| e.to_string());
        items.push((format!("parse__{tool}__{}", stem(&path)), path.clone(), shown));
        results.push((stem(&path), result));
    }
    check_snapshots(items);
    results
}

fn ok<'a, T>(results: &'a [(String, Result<T, ParseError>)], name: &str) -> &'a T {
    let (_, r) = results.iter().find(|(n, _)| n == name).unwrap_or_else(|| panic!("no fixture {name}"));
    r.as_ref().unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn err<T: std::fmt::Debug>(results: &[(String, Result<T, ParseError>)], name: &str) -> ParseError {
    let (_, r) = results.iter().find(|(n, _)| n == name).unwrap();
    r.as_ref().expect_err(name).clone()
}

#[test]
fn gnutime_fixtures() {
    let r = snapshot_tool("gnutime", gnutime::parse);

    let t = ok(&r, "time-1.9-bookworm");
    assert_eq!((t.exit_status, t.signal), (Some(0), None));
    assert!(t.unknown.is_empty());

    let t = ok(&r, "time-1.7-linux-2.6.0-nfs-read");
    assert_eq!((t.elapsed_s, t.system_s, t.cpu_percent), (41.87, 1.64, Some(4)));
    assert_eq!(t.max_rss_kb, 0);

    assert_eq!(ok(&r, "time-1.7-hours-elapsed").elapsed_s, 3723.0);
    assert_eq!(ok(&r, "time-1.7-zero-elapsed-unknown-cpu").cpu_percent, None);

    let t = ok(&r, "time-1.9-bookworm-nonzero-exit");
    assert_eq!(t.exit_status, Some(1));
    assert_eq!(t.unknown.len(), 1, "cat's own error message is kept");

    let t = ok(&r, "time-1.9-bookworm-killed-by-signal");
    assert_eq!((t.exit_status, t.signal), (None, Some(9)));

    let t = ok(&r, "time-1.9-foreign-stderr-lines");
    assert_eq!((t.elapsed_s, t.exit_status), (123.15, Some(1)));
    assert_eq!(t.unknown.len(), 3);

    let t = ok(&r, "time-1.9-glued-to-partial-line");
    assert_eq!(t.unknown, vec!["read 99999744 bytes".to_string()]);
    assert_eq!(t.elapsed_s, 12.4);

    assert!(matches!(err(&r, "empty"), ParseError::Empty { .. }));
    assert!(matches!(err(&r, "not-gnu-time-bash-keyword"), ParseError::NotRecognised { lines: 3, .. }));
}

#[test]
fn netstat_fixtures() {
    let r = snapshot_tool("netstat", netstat::parse);

    // Every non-blank line is accounted for: a section header, a histogram
    // header, exactly one counter, or an `unknown` entry.
    for path in fixture_files("netstat") {
        let text = read(&path);
        let Ok(n) = netstat::parse(&text) else { continue };
        let lines = text.lines().filter(|l| !l.trim().is_empty()).count();
        let headers = text.lines().filter(|l| l.trim().ends_with("histogram:")).count();
        let counters: usize = n.sections.values().map(|s| s.len()).sum();
        assert_eq!(
            n.sections.len() + headers + counters + n.unknown.len(),
            lines,
            "{}: a line was dropped or counted twice",
            path.display()
        );
    }

    // The old and the new wording of the same counters land on the same names.
    let old = ok(&r, "net-tools-1.60-linux-2.6.0-nfs-udp-read");
    let new = ok(&r, "net-tools-2.10-bookworm-nfs-udp-read");
    for (n, reasm_fails, timeout, retrans) in [(old, 2113, 1873, 2), (new, 1318, 412, 3)] {
        assert_eq!(n.get("Ip.ReasmFails"), Some(reasm_fails));
        assert_eq!(n.get("Ip.ReasmTimeout"), Some(timeout));
        assert_eq!(n.get("Tcp.RetransSegs"), Some(retrans));
        assert!(n.get("Ip.ReasmReqds").is_some() && n.get("Ip.ReasmOKs").is_some());
        assert!(n.get("Tcp.OutSegs").is_some() && n.get("Tcp.ActiveOpens").is_some());
        assert!(n.get("Udp.NoPorts").is_some() && n.get("Udp.InErrors").is_some());
        assert!(n.get("Icmp.OutTimeExcds").is_some() && n.get("TcpExt.TCPHPHits").is_some());
        assert!(n.unknown.is_empty(), "{:?}", n.unknown);
        assert!(
            n.sections.values().flat_map(|s| s.keys()).all(|k| !k.starts_with('~')),
            "every real net-tools line has a known wording or a /proc name"
        );
    }
    assert_eq!(new.get("Udp.RcvbufErrors"), Some(0));
    assert_eq!(new.get("IcmpMsg.OutType11"), Some(402));
    assert_eq!(old.get("TcpExt.ArpFilter"), Some(0));

    let host = ok(&r, "net-tools-2.10-bookworm-host-capture");
    assert!(host.get("Ip.InReceives").is_some() && host.unknown.is_empty());

    let edge = ok(&r, "edge-unknown-counters-and-foreign-lines");
    assert_eq!(edge.get("Ip.~N_datagrams_frobnicated_by_the_gremlin"), Some(7));
    assert_eq!(edge.get("Icmp.InEchoReps"), Some(3));
    assert_eq!(edge.get("Icmp.~in:mystery_replies_N"), Some(2));
    assert_eq!(edge.get("TcpExt.InOctets"), Some(3_000_000_000));
    assert_eq!(edge.get("TcpExt.TCPLossProbes"), Some(3));
    assert_eq!(edge.get("Ip6.Ip6InReceives"), Some(17));
    assert_eq!(edge.unknown.len(), 5, "{:?}", edge.unknown);

    assert!(matches!(err(&r, "not-netstat-output"), ParseError::NotRecognised { .. }));
}

#[test]
fn nfsstat_fixtures() {
    let r = snapshot_tool("nfsstat", nfsstat::parse);

    let old = ok(&r, "nfs-utils-1.0.x-linux-2.6.0-client-v3-udp");
    let rpc = old.client_rpc.expect("client rpc");
    assert_eq!((rpc.calls, rpc.retrans), (12226, 1530));
    assert_eq!(old.client_op("v3", "read"), Some(12207));
    assert_eq!(old.client["v2"].len(), 18);
    assert_eq!(old.client["v3"].len(), 22);
    assert_eq!(old.server_rpc.as_ref().unwrap()["xdrcall"], 0);
    assert_eq!(old.unknown, vec!["Warning: /proc/net/rpc/nfsd: No such file or directory"]);

    let new = ok(&r, "nfs-utils-2.6.2-bookworm-client-v3-udp");
    let rpc = new.client_rpc.expect("client rpc");
    assert_eq!((rpc.calls, rpc.retrans), (3190, 138));
    assert_eq!(new.client_op("v3", "read"), Some(3058));
    assert!(new.server_rpc.is_none() && new.unknown.is_empty());

    let v4 = ok(&r, "nfs-utils-2.6.2-bookworm-client-v4");
    assert_eq!(v4.client["v4"].len(), 59);
    assert_eq!(v4.client_op("v4", "read"), Some(96));
    assert_eq!(v4.client_op("v4", "bind_conn_to_ses"), Some(0));

    let srv = ok(&r, "nfs-utils-2.6.2-bookworm-server-all");
    assert_eq!(srv.server["v4"]["compound"], 12_345_678, "count glued to 100%");
    assert_eq!(srv.server["v4ops"]["putfh"], 6_010_877);
    assert_eq!(srv.server_rpc.as_ref().unwrap()["badfmt"], 0);
    assert_eq!(srv.other["Server io stats"]["read"], 100_000_000);
    assert_eq!(srv.other["Server read ahead cache"]["90-100%"], 0);
    assert!(srv.unknown.is_empty());

    let old_srv = ok(&r, "nfs-utils-1.0.x-linux-2.4-server-all");
    assert_eq!(old_srv.other["Server reply cache"]["misses"], 12230);
    assert_eq!(old_srv.other["Client packet stats"]["packets"], 0);
    assert_eq!(old_srv.server["v3"]["read"], 12207);

    let edge = ok(&r, "edge-foreign-lines-and-mismatched-rows");
    assert_eq!(edge.client_op("v3", "getattr"), Some(14));
    assert_eq!(edge.client_op("v3", "read"), None, "short row is not guessed at");
    assert_eq!(edge.client_op("v3", "rename"), Some(0));
    assert_eq!(edge.other["Server future stats"]["gadgets"], 2);
    assert_eq!(edge.unknown.len(), 6, "{:#?}", edge.unknown);

    assert!(matches!(err(&r, "nfs-utils-2.6.2-no-stats-error"), ParseError::NotRecognised { .. }));
}

/// Snapshot of one measured read: GNU time's numbers, the observers' derived metrics
/// and every counter that moved.
#[derive(Serialize)]
struct MeasurementSnapshot {
    measurement: Measured,
    changed: std::collections::BTreeMap<String, i64>,
    only_before: std::collections::BTreeMap<String, u64>,
    only_after: std::collections::BTreeMap<String, u64>,
}

/// What the measurement layer computes for one read.
#[derive(Serialize, Clone)]
struct Measured {
    bytes_read: u64,
    elapsed_s: f64,
    user_s: f64,
    system_s: f64,
    exit_status: Option<i32>,
    throughput_mb_s: Option<f64>,
    /// The derived metrics of `netstat -s` and `nfsstat` (`None`: not knowable).
    metrics: std::collections::BTreeMap<String, Option<i64>>,
}

fn observation(dir: &Path, when: &str) -> Observation {
    let mut o = Observation::from_netstat(&netstat::parse(&read(&dir.join(format!("netstat-{when}.txt")))).unwrap());
    o.extend(Observation::from_nfsstat(&nfsstat::parse(&read(&dir.join(format!("nfsstat-{when}.txt")))).unwrap()));
    o
}

#[test]
fn measurement_scenarios() {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(fixture_root().join("measurement"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    assert!(dirs.len() >= 2);
    let mut items = Vec::new();
    let mut by_name = std::collections::BTreeMap::new();
    let derived = derived_metrics([ObserverKind::named("netstat"), ObserverKind::named("nfsstat")]);
    for dir in dirs {
        let time = gnutime::parse(&read(&dir.join("time.txt"))).unwrap();
        let (before, after) = (observation(&dir, "before"), observation(&dir, "after"));
        let m = Measured {
            bytes_read: BYTES_READ,
            elapsed_s: time.elapsed_s,
            user_s: time.user_s,
            system_s: time.system_s,
            exit_status: time.exit_status,
            throughput_mb_s: (time.elapsed_s > 0.0).then(|| BYTES_READ as f64 / 1e6 / time.elapsed_s),
            metrics: derived.iter().map(|(k, d)| (k.to_string(), d.compute(&before, &after))).collect(),
        };
        let d = delta(&before.counters, &after.counters);
        by_name.insert(stem(&dir), m.clone());
        let snap = MeasurementSnapshot {
            measurement: m,
            changed: d.changed(),
            only_before: d.only_before,
            only_after: d.only_after,
        };
        items.push((format!("parse__measurement__{}", stem(&dir)), dir.join("time.txt"), snap));
    }
    check_snapshots(items);

    let old = &by_name["linux-2.6.0-net-tools-1.60-nfs-utils-1.0.x"].metrics;
    assert_eq!(old["ip_reassembly_failures"], Some(2113));
    assert_eq!(old["ip_fragments_dropped_after_timeout"], Some(1873));
    assert_eq!(old["rpc_calls"], Some(12226 - 19));
    assert_eq!(old["rpc_retransmissions"], Some(1530));
    assert_eq!(old["nfs_read_calls"], Some(12207));
    assert_eq!(old["udp_receive_buffer_errors"], None, "2.6.0 has no Udp.RcvbufErrors");

    let new = &by_name["linux-6.x-bookworm"];
    // The "before" netstat has no reassembly lines (zero values are not printed).
    assert_eq!(new.metrics["ip_reassembly_failures"], Some(1318));
    assert_eq!(new.metrics["ip_reassemblies_required"], Some(90380));
    assert_eq!(new.metrics["rpc_retransmissions"], Some(138));
    assert_eq!(new.metrics["udp_receive_buffer_errors"], Some(0));
    let tput = new.throughput_mb_s.unwrap();
    assert!((tput - 100.0 / 127.09).abs() < 1e-9, "{tput}");
}

#[test]
fn procnet_fixtures() {
    let r = snapshot_tool("procnet", procnet::parse);

    let host = ok(&r, "linux-6.18-host-snmp-netstat");
    let sections: Vec<&str> = host.sections.keys().map(String::as_str).collect();
    assert_eq!(sections, ["Icmp", "IcmpMsg", "Ip", "IpExt", "MPTcpExt", "Tcp", "TcpExt", "Udp", "UdpLite"]);
    assert_eq!(host.get("Ip.Forwarding"), Some(2));
    assert_eq!(host.get("Ip.DefaultTTL"), Some(64));
    assert_eq!(host.get("Ip.InReceives"), Some(17040));
    assert_eq!(host.get("Ip.OutTransmits"), Some(8767));
    assert_eq!(host.sections["Ip"].len(), 20);
    assert_eq!(host.get("IcmpMsg.InType3"), Some(1));
    assert_eq!(host.get_signed("Tcp.MaxConn"), Some(-1));
    assert_eq!(host.get("Tcp.MaxConn"), None);
    assert_eq!(host.get("Tcp.InSegs"), Some(16984));
    assert_eq!(host.get("Udp.OutDatagrams"), Some(56));
    assert!(host.unknown.is_empty(), "{:?}", host.unknown);

    let old = ok(&r, "linux-2.6.0-era-client-after-nfs-udp-read");
    let sections: Vec<&str> = old.sections.keys().map(String::as_str).collect();
    assert_eq!(sections, ["Icmp", "Ip", "Tcp", "TcpExt", "Udp"]);
    assert_eq!((old.get("Ip.ReasmFails"), old.get("Ip.ReasmTimeout")), (Some(2113), Some(1873)));
    assert_eq!((old.get("Ip.ReasmReqds"), old.get("Ip.ReasmOKs")), (Some(82310), Some(12207)));
    assert_eq!(old.get("Tcp.RetransSegs"), Some(2));
    assert_eq!(old.sections["Udp"].len(), 4, "no RcvbufErrors before 2.6.x");
    assert_eq!(old.sections["TcpExt"].len(), 65);
    assert_eq!(old.get("TcpExt.TCPPrequeued"), Some(812));
    assert_eq!(old.get_signed("Tcp.MaxConn"), Some(-1));

    let unsigned = ok(&r, "edge-linux-2.5-maxconn-printed-unsigned");
    assert_eq!(unsigned.get("Tcp.MaxConn"), Some(4_294_967_295));
    assert!(unsigned.negative.is_empty());

    let edge = ok(&r, "edge-unknown-fields-split-icmpmsg-foreign-lines");
    assert_eq!(edge.get("Ip.ReasmFails"), Some(25), "the first of two captures is kept");
    assert_eq!(edge.get("Ip.ReasmReqds"), Some(300));
    assert_eq!(edge.sections["IcmpMsg"].len(), 18, "two IcmpMsg pairs merged");
    assert_eq!(edge.get("IcmpMsg.InType3"), Some(101));
    assert_eq!(edge.get("IcmpMsg.InType22"), Some(115));
    assert_eq!(edge.get("IcmpMsg.OutType3"), Some(9));
    assert_eq!(edge.get("FutureExt.TCPQuantumEntanglementDrops"), Some(3));
    assert_eq!(edge.get("FutureExt.NewCounter_2"), Some(u64::MAX));
    assert_eq!(edge.get_signed("Tcp.MaxConn"), Some(-1));
    assert!(!edge.has_section("TcpExt") && !edge.has_section("XfrmStat") && !edge.has_section("Udp"));
    assert_eq!(edge.unknown.len(), 7, "{:#?}", edge.unknown);

    let malformed = |name: &str| match err(&r, name) {
        ParseError::Malformed { line, reason, .. } => (line, reason),
        e => panic!("{name}: {e:?}"),
    };
    assert_eq!(
        malformed("error-header-has-more-names-than-values"),
        (4, "section `Udp`: the header on line 3 has 5 names but this value line has 4 values".to_string())
    );
    assert_eq!(
        malformed("error-value-line-of-other-section"),
        (4, "value line of section `Udp` follows the header of section `Tcp` (line 3)".to_string())
    );
    assert_eq!(
        malformed("error-value-not-an-integer"),
        (2, "section `Udp`: value \"n/a\" of field `InErrors` is not a 64-bit integer".to_string())
    );
    assert!(matches!(err(&r, "not-procnet-netstat-s-output"), ParseError::NotRecognised { .. }));
    assert!(matches!(err(&r, "not-procnet-snmp6"), ParseError::NotRecognised { lines: 3, .. }));
    assert!(matches!(err(&r, "empty"), ParseError::Empty { .. }));
}

/// `netstat -s` and the raw files it reads must give every counter that
/// `netstat -s` printed the same value under the same `netstat.*` name.
///
/// The host pair was captured back to back on an idle machine:
/// `cat /proc/net/snmp /proc/net/netstat`, `netstat -s`, the same `cat` again;
/// the two raw captures are identical (asserted below), so no counter moved
/// while `netstat -s` ran and an exact comparison is valid. `netstat -s` does
/// not print every field (net-tools 2.10 leaves out most zeros), so the check
/// is one-way: everything it printed, not everything the kernel has.
#[test]
fn procnet_agrees_with_netstat_s_on_the_host_capture() {
    let dir = fixture_root().join("procnet");
    let before = procnet::parse(&read(&dir.join("linux-6.18-host-snmp-netstat.txt"))).unwrap();
    let after = procnet::parse(&read(&dir.join("paired/linux-6.18-host-snmp-netstat-after.txt"))).unwrap();
    assert_eq!(before, after, "counters moved during the capture; the exact comparison below would not hold");
    let text = read(&dir.join("paired/linux-6.18-host-netstat-s.txt"));
    let printed = netstat::parse(&text).unwrap();
    assert!(printed.unknown.is_empty());

    let compared = assert_netstat_counters_in_raw(&printed, &before);
    assert_eq!(compared, counter_lines(&text, &printed), "every counter line of netstat -s was compared");
    assert_eq!(compared, 53);
    // Sections net-tools printed with no lines still exist raw.
    for section in printed.sections.keys() {
        assert!(before.has_section(section), "{section}");
    }
}

/// The 2.6.0-era raw files model the same client state as the reconstructed
/// net-tools 1.60 output in `netstat/`; both are hand-made, so this checks the
/// mapping of the old wordings to raw field names, not a kernel.
#[test]
fn procnet_agrees_with_net_tools_1_60_on_the_2_6_0_model() {
    let raw =
        procnet::parse(&read(&fixture_root().join("procnet/linux-2.6.0-era-client-after-nfs-udp-read.txt"))).unwrap();
    let text = read(&fixture_root().join("netstat/net-tools-1.60-linux-2.6.0-nfs-udp-read.txt"));
    let printed = netstat::parse(&text).unwrap();
    let compared = assert_netstat_counters_in_raw(&printed, &raw);
    assert_eq!(compared, counter_lines(&text, &printed), "every counter line of netstat -s was compared");
}

/// Lines of a `netstat -s` text that carry one counter: the non-blank lines
/// minus section headers and ICMP histogram headers (when nothing went to
/// `unknown`, as asserted in `netstat_fixtures`).
fn counter_lines(text: &str, printed: &netstat::NetstatS) -> usize {
    assert!(printed.unknown.is_empty());
    let lines = text.lines().filter(|l| !l.trim().is_empty()).count();
    let histogram_headers = text.lines().filter(|l| l.trim().ends_with("histogram:")).count();
    lines - printed.sections.len() - histogram_headers
}

/// Asserts that every `netstat -s` counter, named as `metrics` names it, has
/// the same value in the raw parse; returns how many were compared.
fn assert_netstat_counters_in_raw(printed: &netstat::NetstatS, raw: &procnet::ProcNetSnmp) -> usize {
    let raw_counters: std::collections::BTreeMap<String, u64> =
        raw.flat().into_iter().map(|(k, v)| (format!("netstat.{k}"), v)).collect();
    let printed_counters = Observation::from_netstat(printed).counters;
    let mut mismatches = Vec::new();
    for (name, value) in &printed_counters {
        if raw_counters.get(name) != Some(value) {
            mismatches.push(format!("{name}: netstat -s {value}, raw {:?}", raw_counters.get(name)));
        }
    }
    assert!(mismatches.is_empty(), "{mismatches:#?}");
    printed_counters.len()
}

#[test]
fn procrpcnfs_fixtures() {
    let r = snapshot_tool("procrpcnfs", procrpcnfs::parse);
    let rpc = |name: &str| {
        let c = ok(&r, name).rpc.expect("rpc line");
        (c.calls, c.retrans, c.authrefrsh)
    };

    let v3 = ok(&r, "linux-6.1-bookworm-client-v3-udp");
    assert_eq!(rpc("linux-6.1-bookworm-client-v3-udp"), (3190, 138, 0));
    assert_eq!(v3.op("v3", "read"), Some(3058));
    assert_eq!(v3.op("v3", "getattr"), Some(14));
    assert_eq!(v3.op("v3", "fsinfo"), Some(3));
    assert_eq!(v3.procs.keys().collect::<Vec<_>>(), ["v3"]);
    assert_eq!(v3.procs["v3"].len(), 22);
    assert_eq!(v3.net, Some(procrpcnfs::RpcNet::default()));
    assert_eq!(v3.counters()["nfs.client.v3.read"], 3058);
    assert_eq!(v3.counters()["nfs.other.client_packet_stats.packets"], 0);

    let v4 = ok(&r, "linux-6.1-bookworm-client-v4");
    assert_eq!(rpc("linux-6.1-bookworm-client-v4"), (136, 0, 0));
    assert_eq!(v4.procs["v4"].len(), 69);
    assert_eq!((v4.op("v4", "read"), v4.op("v4", "sequence")), (Some(96), Some(14)));
    assert_eq!((v4.op("v4", "clone"), v4.op("v4", "op59"), v4.op("v4", "op68")), (Some(0), Some(0), Some(0)));

    let old = ok(&r, "linux-2.6.0-era-client-v3-udp");
    assert_eq!(rpc("linux-2.6.0-era-client-v3-udp"), (12226, 1530, 0));
    assert_eq!(old.op("v3", "read"), Some(12207));
    assert_eq!(old.procs["v2"].len(), 18);
    assert!(old.procs["v2"].values().all(|&n| n == 0));

    let extra = ok(&r, "edge-v4-more-values-than-nfs-utils-names");
    assert_eq!(extra.op("v4", "read"), Some(500));
    assert_eq!(extra.op("v4", "getattr"), Some(7));
    assert_eq!(extra.op("v4", "sequence"), Some(40));
    assert_eq!((extra.op("v4", "op59"), extra.op("v4", "op61"), extra.op("v4", "op68")), (Some(2), Some(5), Some(9)));
    assert_eq!(extra.counters()["nfs.client.v4.op64"], 11);

    let signed = ok(&r, "edge-linux-2.6.13-signed-printing");
    assert_eq!(rpc("edge-linux-2.6.13-signed-printing"), (3_000_000_000, 1530, 0));
    assert_eq!(signed.op("v3", "read"), Some(2_999_987_774));

    let foreign = ok(&r, "edge-foreign-and-repeated-lines");
    assert_eq!(rpc("edge-foreign-and-repeated-lines"), (1200, 37, 1200));
    assert_eq!(foreign.op("v3", "read"), Some(1100));
    assert_eq!(foreign.unknown.len(), 4, "{:#?}", foreign.unknown);

    assert_eq!(
        err(&r, "error-proc3-count-does-not-match-values").to_string(),
        "/proc/net/rpc/nfs: line 3: `proc3` announces 22 values but 21 follow"
    );
    assert!(matches!(err(&r, "error-server-file-proc-net-rpc-nfsd"), ParseError::Malformed { line: 7, .. }));
    assert!(matches!(err(&r, "not-procrpcnfs-nfsstat-output"), ParseError::NotRecognised { .. }));
    assert!(matches!(err(&r, "empty"), ParseError::Empty { .. }));
}

/// `nfsstat` reads `/proc/net/rpc/nfs`; every counter it printed, named by
/// `Observation::from_nfsstat`, must have the same value and name in the raw
/// parse. The `paired/` outputs are the real nfs-utils 2.6.2 `nfsstat -c -o
/// net -o rpc -o nfs` run over each raw file (a tmpfs over `/proc` in a
/// private mount namespace), so this checks names *and* positions against the
/// tool itself; the `net` line is nfsstat's `Client packet stats:` table,
/// `nfs.other.client_packet_stats.*` in both.
#[test]
fn procrpcnfs_agrees_with_nfsstat() {
    let dir = fixture_root().join("procrpcnfs");
    // Expected comparisons: 4 packet stats + 3 rpc stats + the call table
    // nfsstat printed (22 v3 names, or 59 v4 names; all-zero tables are not
    // printed by default, so the 2.6.0 model's v2 and the edge file's v3 are not).
    let stems = [
        ("linux-6.1-bookworm-client-v3-udp", 4 + 3 + 22),
        ("linux-6.1-bookworm-client-v4", 4 + 3 + 59),
        ("linux-2.6.0-era-client-v3-udp", 4 + 3 + 22),
        ("edge-v4-more-values-than-nfs-utils-names", 4 + 3 + 59),
    ];
    for (stem, expected) in stems {
        let raw = procrpcnfs::parse(&read(&dir.join(format!("{stem}.txt")))).unwrap().counters();
        let printed = nfsstat::parse(&read(&dir.join(format!("paired/{stem}.nfsstat-c-o-net-rpc-nfs.txt")))).unwrap();
        assert!(printed.unknown.is_empty(), "{stem}: {:?}", printed.unknown);
        let compared = assert_nfsstat_counters_in_raw(stem, &Observation::from_nfsstat(&printed).counters, &raw);
        assert_eq!(compared, expected, "{stem}");
    }

    // The existing nfsstat fixtures were printed from the same /proc contents
    // (real 2.6.2 tool) or model the same 2.6.0 client (reconstructed 1.0.x
    // tool; its server tables come from the missing nfsd file and are skipped).
    for (stem, nfsstat_fixture) in [
        ("linux-6.1-bookworm-client-v3-udp", "nfs-utils-2.6.2-bookworm-client-v3-udp"),
        ("linux-6.1-bookworm-client-v4", "nfs-utils-2.6.2-bookworm-client-v4"),
        ("linux-2.6.0-era-client-v3-udp", "nfs-utils-1.0.x-linux-2.6.0-client-v3-udp"),
    ] {
        let raw = procrpcnfs::parse(&read(&dir.join(format!("{stem}.txt")))).unwrap().counters();
        let printed = nfsstat::parse(&read(&fixture_root().join(format!("nfsstat/{nfsstat_fixture}.txt")))).unwrap();
        let client: std::collections::BTreeMap<String, u64> = Observation::from_nfsstat(&printed)
            .counters
            .into_iter()
            .filter(|(k, _)| k.starts_with("nfs.client."))
            .collect();
        assert_nfsstat_counters_in_raw(stem, &client, &raw);
    }
}

fn assert_nfsstat_counters_in_raw(
    stem: &str,
    printed: &std::collections::BTreeMap<String, u64>,
    raw: &std::collections::BTreeMap<String, u64>,
) -> usize {
    let mut mismatches = Vec::new();
    for (name, value) in printed {
        if raw.get(name) != Some(value) {
            mismatches.push(format!("{name}: nfsstat {value}, raw {:?}", raw.get(name)));
        }
    }
    assert!(mismatches.is_empty(), "{stem}: {mismatches:#?}");
    printed.len()
}
