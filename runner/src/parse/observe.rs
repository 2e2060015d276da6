//! What an observer is, as data: one [`ObserverDef`] per kind, in the table
//! [`super::OBSERVERS`], and the flat view its parser gives ([`Observation`]).
//!
//! A row says everything the rest of the tool needs of an observer kind: its name in
//! suites (which is also its script sections, `before-<name>` and `<name>`), the guest
//! command that prints what it reads, whether it takes settings, how the text becomes
//! counters, the counters' namespace and name rules (checked when a suite names a
//! counter), and the derived metrics worth naming. The suite schema, validation, the
//! plan, the guest script and the analysis all read the table; none matches on a kind.
//!
//! This file also holds the adapters of the observers that share a parser with a
//! tool (`netstat -s`, `nfsstat`, mountstats, the raw `/proc` files); a parser written
//! for one observer keeps its adapter in its own file.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde::{Deserialize, Serialize};

use super::{mountstats, netstat, nfsstat, procnet, procrpcnfs, NetstatS, Nfsstat, ParseError, OBSERVERS};

/// One observer kind: a row of [`OBSERVERS`].
#[derive(Debug, Clone, Copy)]
pub struct ObserverDef {
    /// Its name in suites and section names (`netstat`, `proc_net`).
    pub name: &'static str,
    /// The guest command that prints the observed state to stdout.
    pub command: &'static str,
    /// Whether it takes settings in a suite (`{mountstats: {mount: …}}`).
    pub settings: Settings,
    /// Parses what `command` printed into counters (`scope`: the settings, when the
    /// kind takes them). Errors: the text is not that tool's output.
    pub read: fn(text: &str, scope: Option<&Scope>) -> Result<Observation, ParseError>,
    /// The first part of every counter name it gives (`netstat` in
    /// `netstat.Ip.ReasmFails`); kinds that read the same counters share it.
    pub namespace: &'static str,
    /// Checks the parts of a counter name in its namespace (the whole name split at
    /// `.`) as far as they can be known before a run; the error says what they must be.
    pub counter_name: fn(parts: &[&str]) -> Result<(), String>,
    /// Its derived metrics (see [`DerivedMetric`]).
    pub derived: &'static [DerivedMetric],
}

/// The settings an observer kind takes in a suite.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Settings {
    /// None: written as a bare name (`netstat`).
    None,
    /// One NFS mount and the operations to keep ([`Scope`]):
    /// `{mountstats: {mount: /mnt/nfs, ops: [READ]}}`.
    Mount,
}

/// The settings of an observer of [`Settings::Mount`]: one NFS mount.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Scope {
    /// Mount point (absolute path).
    pub mount: String,
    /// Operation names as the kernel prints them (`READ`, `WRITE`, `COMMIT`, …);
    /// empty: every operation.
    pub ops: Vec<String>,
}

/// An observer kind: a handle on its row of [`OBSERVERS`] (ordered as the table;
/// serialized as its name).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ObserverKind(usize);

impl ObserverKind {
    /// Every kind, in table order.
    pub fn all() -> impl Iterator<Item = ObserverKind> {
        (0..OBSERVERS.len()).map(ObserverKind)
    }

    /// The kind named `name` in suites, if there is one.
    pub fn from_name(name: &str) -> Option<ObserverKind> {
        OBSERVERS.iter().position(|d| d.name == name).map(ObserverKind)
    }

    /// The kind named `name`, for code that names a kind it relies on; a name missing
    /// from the table fails when the constant is evaluated (at compile time in a
    /// `const`).
    pub const fn named(name: &str) -> ObserverKind {
        let mut i = 0;
        while i < OBSERVERS.len() {
            if str_eq(OBSERVERS[i].name, name) {
                return ObserverKind(i);
            }
            i += 1;
        }
        panic!("no observer of that name in parse::OBSERVERS")
    }

    /// Its row.
    pub fn def(self) -> &'static ObserverDef {
        &OBSERVERS[self.0]
    }

    /// Its name in suites and section names.
    pub fn name(self) -> &'static str {
        self.def().name
    }

    /// Its derived metrics.
    pub fn derived(self) -> &'static [DerivedMetric] {
        self.def().derived
    }
}

const fn str_eq(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

impl fmt::Debug for ObserverKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ObserverKind({})", self.name())
    }
}

impl Serialize for ObserverKind {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl<'de> Deserialize<'de> for ObserverKind {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let name = String::deserialize(d)?;
        ObserverKind::from_name(&name).ok_or_else(|| serde::de::Error::unknown_variant(&name, &NAMES))
    }
}

/// The observers' names, in table order.
pub const NAMES: [&str; OBSERVERS.len()] = {
    let mut names = [""; OBSERVERS.len()];
    let mut i = 0;
    while i < OBSERVERS.len() {
        names[i] = OBSERVERS[i].name;
        i += 1;
    }
    names
};

/// One observation: cumulative counters at one moment, plus the counter **groups** the
/// output showed (a `netstat -s` section such as `netstat.Ip`, printed even when all
/// its lines were left out for being zero; or the observer kind, e.g. `nfsstat`). A
/// group tells "absent because zero" from "absent because not observed".
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Observation {
    /// Counter name → value.
    pub counters: BTreeMap<String, u64>,
    /// Groups present in the output.
    pub groups: BTreeSet<String>,
}

impl Observation {
    /// `counters` with every name prefixed `<namespace>.`, group `namespace`.
    pub fn named(namespace: &str, counters: BTreeMap<String, u64>) -> Observation {
        Observation {
            counters: counters.into_iter().map(|(k, v)| (format!("{namespace}.{k}"), v)).collect(),
            groups: BTreeSet::from([namespace.to_string()]),
        }
    }

    /// `netstat -s` counters, named `netstat.<Section>.<Field>`; groups `netstat` and
    /// `netstat.<Section>` for every section printed.
    pub fn from_netstat(n: &NetstatS) -> Observation {
        let mut o = Observation::named("netstat", n.flat());
        o.groups.extend(n.sections.keys().map(|s| format!("netstat.{s}")));
        o
    }

    /// `nfsstat` counters (`nfs.client.rpc.calls`, `nfs.client.v3.read`,
    /// `nfs.server.…`, `nfs.other.<table>.<column>`); group [`NFS_GROUP`].
    pub fn from_nfsstat(n: &Nfsstat) -> Observation {
        let mut out = BTreeMap::new();
        if let Some(rpc) = &n.client_rpc {
            out.insert("nfs.client.rpc.calls".into(), rpc.calls);
            out.insert("nfs.client.rpc.retrans".into(), rpc.retrans);
            out.insert("nfs.client.rpc.authrefrsh".into(), rpc.authrefrsh);
        }
        for (k, v) in n.server_rpc.iter().flatten() {
            out.insert(format!("nfs.server.rpc.{k}"), *v);
        }
        for (side, tables) in [("client", &n.client), ("server", &n.server)] {
            for (table, ops) in tables {
                for (op, v) in ops {
                    out.insert(format!("nfs.{side}.{table}.{op}"), *v);
                }
            }
        }
        for (title, cols) in &n.other {
            let t = nfsstat::title_key(title);
            for (col, v) in cols {
                out.insert(format!("nfs.other.{t}.{col}"), *v);
            }
        }
        Observation { counters: out, groups: BTreeSet::from([NFS_GROUP.to_string()]) }
    }

    /// Merges `other` into `self` (counters of different observers never share names).
    pub fn extend(&mut self, other: Observation) {
        self.counters.extend(other.counters);
        self.groups.extend(other.groups);
    }
}

/// The group of an observation of the NFS client's counters (`nfsstat` or
/// `/proc/net/rpc/nfs`).
pub const NFS_GROUP: &str = "nfs";

/// A metric derived from two observations (before and after an iteration).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DerivedMetric {
    /// Its name in results, tables and suites (`ip_reassembly_failures`).
    pub name: &'static str,
    /// What it counts, in a reader's words.
    pub doc: &'static str,
    /// How it is computed.
    pub rule: Rule,
}

/// How a [`DerivedMetric`] is computed from two observations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rule {
    /// The change of one counter. A counter missing on a side counts as 0 there when
    /// the group `zero_if` is present on that side (net-tools leaves out the `Ip`
    /// reassembly lines while they are zero, in 1.60 and 2.10 alike); otherwise the
    /// metric is unknown (`None`).
    Counter {
        /// Counter name.
        counter: &'static str,
        /// Group whose presence makes a missing counter 0.
        zero_if: Option<&'static str>,
    },
    /// The change of the sum of every counter named `prefix…suffix` (absent counters
    /// count as 0), known when `group` is present on both sides. `nfsstat` (nfs-utils
    /// 2.x) leaves out a version's table while all its counts are zero.
    Sum {
        /// Name prefix.
        prefix: &'static str,
        /// Name suffix.
        suffix: &'static str,
        /// Group that must be present on both sides.
        group: &'static str,
    },
}

impl DerivedMetric {
    /// The metric over an iteration, or `None` when it can't be known (see [`Rule`]).
    pub fn compute(&self, before: &Observation, after: &Observation) -> Option<i64> {
        match self.rule {
            Rule::Counter { counter, zero_if } => {
                let value = |o: &Observation| match o.counters.get(counter) {
                    Some(v) => Some(*v as i64),
                    None if zero_if.is_some_and(|g| o.groups.contains(g)) => Some(0),
                    None => None,
                };
                Some(value(after)? - value(before)?)
            }
            Rule::Sum { prefix, suffix, group } => {
                if !(before.groups.contains(group) && after.groups.contains(group)) {
                    return None;
                }
                let sum = |o: &Observation| -> i64 {
                    o.counters
                        .iter()
                        .filter(|(k, _)| k.starts_with(prefix) && k.ends_with(suffix))
                        .map(|(_, v)| *v as i64)
                        .sum()
                };
                Some(sum(after) - sum(before))
            }
        }
    }
}

/// A [`Rule::Counter`] metric.
pub const fn counter(
    name: &'static str,
    doc: &'static str,
    counter: &'static str,
    zero_if: Option<&'static str>,
) -> DerivedMetric {
    DerivedMetric { name, doc, rule: Rule::Counter { counter, zero_if } }
}

/// net-tools prints the `Ip:` section but leaves out its zero lines.
const IP: Option<&str> = Some("netstat.Ip");

/// Derived metrics of `netstat -s` (and raw `/proc/net/snmp`) observations.
pub const NETSTAT_DERIVED: &[DerivedMetric] = &[
    counter("ip_reassemblies_required", "IP fragments received that needed reassembly", "netstat.Ip.ReasmReqds", IP),
    counter("ip_reassembled_ok", "IP datagrams reassembled", "netstat.Ip.ReasmOKs", IP),
    counter("ip_reassembly_failures", "IP reassembly failures (fragments discarded)", "netstat.Ip.ReasmFails", IP),
    counter(
        "ip_fragments_dropped_after_timeout",
        "IP fragment queues dropped after the reassembly timeout",
        "netstat.Ip.ReasmTimeout",
        IP,
    ),
    counter("udp_datagrams_received", "UDP datagrams received", "netstat.Udp.InDatagrams", None),
    counter("udp_receive_errors", "UDP packet receive errors", "netstat.Udp.InErrors", None),
    counter(
        "udp_receive_buffer_errors",
        "UDP receive buffer errors (absent before Linux 2.6.x)",
        "netstat.Udp.RcvbufErrors",
        None,
    ),
    counter("tcp_segments_retransmitted", "TCP segments retransmitted", "netstat.Tcp.RetransSegs", None),
];

/// Derived metrics of `nfsstat` (and raw `/proc/net/rpc/nfs`) observations.
pub const NFSSTAT_DERIVED: &[DerivedMetric] = &[
    counter("rpc_calls", "NFS client RPC calls", "nfs.client.rpc.calls", None),
    counter("rpc_retransmissions", "NFS client RPC retransmissions", "nfs.client.rpc.retrans", None),
    DerivedMetric {
        name: "nfs_read_calls",
        doc: "NFS client READ calls, summed over NFS versions",
        rule: Rule::Sum { prefix: "nfs.client.v", suffix: ".read", group: NFS_GROUP },
    },
];

/// `netstat -s` → [`Observation::from_netstat`].
pub(super) fn read_netstat(text: &str, _: Option<&Scope>) -> Result<Observation, ParseError> {
    Ok(Observation::from_netstat(&netstat::parse(text)?))
}

/// `nfsstat` → [`Observation::from_nfsstat`].
pub(super) fn read_nfsstat(text: &str, _: Option<&Scope>) -> Result<Observation, ParseError> {
    Ok(Observation::from_nfsstat(&nfsstat::parse(text)?))
}

/// Raw `/proc/net/snmp` + `/proc/net/netstat`: the same names and groups as `netstat -s`.
pub(super) fn read_procnet(text: &str, _: Option<&Scope>) -> Result<Observation, ParseError> {
    let p = procnet::parse(text)?;
    let mut o = Observation::named("netstat", p.flat());
    o.groups.extend(p.sections.keys().map(|s| format!("netstat.{s}")));
    Ok(o)
}

/// Raw `/proc/net/rpc/nfs`: the client half of `nfsstat`'s names.
pub(super) fn read_procrpcnfs(text: &str, _: Option<&Scope>) -> Result<Observation, ParseError> {
    Ok(Observation { counters: procrpcnfs::parse(text)?.counters(), groups: BTreeSet::from([NFS_GROUP.to_string()]) })
}

/// `/proc/self/mountstats`: `mountstats.<OP>.<field>` of the scope's mount, for its
/// operations (all when `ops` is empty). Errors: no NFS mount there.
pub(super) fn read_mountstats(text: &str, scope: Option<&Scope>) -> Result<Observation, ParseError> {
    let (mount, ops) = scope.map_or(("", &[][..]), |s| (s.mount.as_str(), s.ops.as_slice()));
    let m = mountstats::parse(text, mount)?;
    let mut counters = BTreeMap::new();
    for (op, s) in m.ops.iter().filter(|(op, _)| ops.is_empty() || ops.contains(op)) {
        for (field, v) in op_fields(s) {
            counters.insert(format!("mountstats.{op}.{field}"), v);
        }
    }
    Ok(Observation { counters, groups: BTreeSet::from(["mountstats".to_string()]) })
}

/// `(field, value)` of one operation's mountstats line, in the kernel's order
/// (`errors` only where the kernel prints it, Linux ≥ 5.3).
pub fn op_fields(s: &mountstats::OpStats) -> Vec<(&'static str, u64)> {
    let mut v = vec![
        ("ops", s.ops),
        ("transmissions", s.transmissions),
        ("major_timeouts", s.major_timeouts),
        ("bytes_sent", s.bytes_sent),
        ("bytes_received", s.bytes_received),
        ("queue_ms", s.queue_ms),
        ("rtt_ms", s.rtt_ms),
        ("execute_ms", s.execute_ms),
    ];
    if let Some(e) = s.errors {
        v.push(("errors", e));
    }
    v
}

/// `mountstats.<OP>.<field>`, the field one of [`op_fields`]'.
pub(super) fn mountstats_counter(parts: &[&str]) -> Result<(), String> {
    let mut fields: Vec<&str> =
        op_fields(&mountstats::OpStats { errors: Some(0), ..Default::default() }).into_iter().map(|(f, _)| f).collect();
    fields.sort_unstable();
    if parts.len() != 3 || !fields.contains(&parts[2]) {
        Err(format!("mountstats counters are mountstats.<OP>.<field>, the field one of {}", fields.join(", ")))
    } else {
        Ok(())
    }
}

/// `nfs.<side>.<table>` tables the nfsstat and /proc/net/rpc/nfs parsers produce:
/// `rpc` and one per version, plus the server's v4 operation tables;
/// `nfs.other.<table>` is any other table.
const NFS_CLIENT_TABLES: &[&str] = &["rpc", "v2", "v3", "v4"];
const NFS_SERVER_TABLES: &[&str] = &["rpc", "v2", "v3", "v4", "v4ops", "v4cb"];
/// The three counters of `Client rpc stats` (the same in nfsstat and /proc/net/rpc/nfs).
const NFS_CLIENT_RPC: &[&str] = &["calls", "retrans", "authrefrsh"];

/// `nfs.<client|server|other>.<table>.<name>`, with the tables the parsers produce.
pub(super) fn nfs_counter(parts: &[&str]) -> Result<(), String> {
    let tables = match parts.get(1) {
        Some(&"client") => Some(NFS_CLIENT_TABLES),
        Some(&"server") => Some(NFS_SERVER_TABLES),
        Some(&"other") => None,
        _ => {
            return Err(
                "nfs counters are nfs.client.<table>.<name>, nfs.server.<table>.<name> or nfs.other.<table>.<name>"
                    .into(),
            )
        }
    };
    if parts.len() != 4 {
        Err("nfs counters have four parts: nfs.<client|server|other>.<table>.<name>".into())
    } else if let Some(t) = tables.filter(|t| !t.contains(&parts[2])) {
        Err(format!("the {} tables are {}", parts[1], t.join(", ")))
    } else if parts[1] == "client" && parts[2] == "rpc" && !NFS_CLIENT_RPC.contains(&parts[3]) {
        Err(format!("the client rpc counters are {}", NFS_CLIENT_RPC.join(", ")))
    } else {
        Ok(())
    }
}

/// Sections of /proc/net/snmp and /proc/net/netstat, as `netstat -s` and the proc_net
/// observer name them. The counter names within a section vary by kernel and are not
/// checked.
const NETSTAT_GROUPS: &[&str] = &["Ip", "Icmp", "IcmpMsg", "Tcp", "Udp", "UdpLite", "TcpExt", "IpExt", "MPTcpExt"];

/// `netstat.<Section>.<Name>`, the section one of [`NETSTAT_GROUPS`].
pub(super) fn netstat_counter(parts: &[&str]) -> Result<(), String> {
    if parts.len() != 3 || !NETSTAT_GROUPS.contains(&parts[1]) {
        Err(format!("netstat counters are netstat.<Section>.<Name>, the section one of {}", NETSTAT_GROUPS.join(", ")))
    } else {
        Ok(())
    }
}
