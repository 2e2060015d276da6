//! Observers: what a measurement reads in the guest before and after every iteration,
//! and how it becomes counters and derived metrics.
//!
//! An [`Observer`] knows three things: the guest command that prints the state
//! ([`Observer::command`]), the script section its output goes to (see
//! [`super::script::Section`]), and how the text becomes an [`Observation`], a flat
//! `name → value` view with stable names:
//!
//! | observer | command | counter names | from |
//! |---|---|---|---|
//! | `netstat` | `netstat -s` (net-tools 1.60, 2.10) | `netstat.<Section>.<Field>` (`netstat.Ip.ReasmFails`) | `/proc/net/snmp`, `/proc/net/netstat` |
//! | `nfsstat` | `nfsstat` (nfs-utils 1.0.x, 2.6.x) | `nfs.client.rpc.calls`, `nfs.client.v3.read`, `nfs.server.…`, `nfs.other.…` | `/proc/net/rpc/nfs{,d}` |
//! | `mountstats` | `cat /proc/self/mountstats` (RPC iostats 1.0/1.1, Linux ≥ 2.6.17) | `mountstats.<OP>.<field>` (`mountstats.READ.transmissions`) | one mount's per-op RPC statistics |
//! | `proc_net` | `cat /proc/net/snmp /proc/net/netstat` (raw, what `nstat` reads) | the same as `netstat` | the same files |
//! | `proc_rpc_nfs` | `cat /proc/net/rpc/nfs` (raw client counts) | the client half of `nfsstat`'s | the same file |
//!
//! `netstat` and `proc_net` give the same counters, as do `nfsstat` and `proc_rpc_nfs`
//! for the client: a measurement observes one of each pair.
//!
//! Each observer kind also has a table of **derived metrics** ([`ObserverKind::derived`]):
//! named deltas a reader of a kernel report asks for first (IP reassembly failures, RPC
//! retransmissions, …), defined as data, not as struct fields.
//!
//! A [`RemoteObserver`] reads *another* VM around each iteration: the packets a netem
//! qdisc sent and dropped (and, when that netem is seeded, it reseeds it before every
//! iteration so the n-th packet of every iteration meets the same drop decision).

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::stats::Counters;
use crate::parse::{mountstats, netstat, nfsstat, NetstatS, Nfsstat, ParseError};
use crate::plan::measurement::{Observer, ObserverKind, RemoteObserver};

impl ObserverKind {
    /// Every kind, in script order.
    pub const ALL: [ObserverKind; 5] = [
        ObserverKind::Netstat,
        ObserverKind::Nfsstat,
        ObserverKind::Mountstats,
        ObserverKind::ProcNet,
        ObserverKind::ProcRpcNfs,
    ];

    /// The kind's name in suites and section names: `netstat`, `nfsstat`, `mountstats`,
    /// `proc_net`, `proc_rpc_nfs`.
    pub fn name(self) -> &'static str {
        match self {
            ObserverKind::Netstat => "netstat",
            ObserverKind::Nfsstat => "nfsstat",
            ObserverKind::Mountstats => "mountstats",
            ObserverKind::ProcNet => "proc_net",
            ObserverKind::ProcRpcNfs => "proc_rpc_nfs",
        }
    }

    /// The derived metrics this kind's observations give (see [`DerivedMetric`]).
    pub fn derived(self) -> &'static [DerivedMetric] {
        match self {
            ObserverKind::Netstat | ObserverKind::ProcNet => NETSTAT_DERIVED,
            ObserverKind::Nfsstat | ObserverKind::ProcRpcNfs => NFSSTAT_DERIVED,
            ObserverKind::Mountstats => &[],
        }
    }
}

impl Observer {
    /// The observer's kind.
    pub fn kind(&self) -> ObserverKind {
        match self {
            Observer::Netstat => ObserverKind::Netstat,
            Observer::Nfsstat => ObserverKind::Nfsstat,
            Observer::Mountstats { .. } => ObserverKind::Mountstats,
            Observer::ProcNet => ObserverKind::ProcNet,
            Observer::ProcRpcNfs => ObserverKind::ProcRpcNfs,
        }
    }

    /// The guest command that prints the observed state (to stdout).
    pub fn command(&self) -> &'static str {
        match self {
            Observer::Netstat => "netstat -s",
            Observer::Nfsstat => "nfsstat",
            Observer::Mountstats { .. } => "cat /proc/self/mountstats",
            Observer::ProcNet => "cat /proc/net/snmp /proc/net/netstat",
            Observer::ProcRpcNfs => "cat /proc/net/rpc/nfs",
        }
    }

    /// Parses what [`Observer::command`] printed.
    ///
    /// Errors: the text is not that tool's output (see [`crate::parse`]); for
    /// `mountstats`, no NFS mount on the observer's mount point.
    pub fn observe(&self, text: &str) -> Result<Observation, ParseError> {
        Ok(match self {
            Observer::Netstat => Observation::from_netstat(&netstat::parse(text)?),
            Observer::Nfsstat => Observation::from_nfsstat(&nfsstat::parse(text)?),
            Observer::Mountstats { mount, ops } => {
                let m = mountstats::parse(text, mount)?;
                let mut counters = Counters::new();
                for (op, s) in m.ops.iter().filter(|(op, _)| ops.is_empty() || ops.contains(op)) {
                    for (field, v) in op_fields(s) {
                        counters.insert(format!("mountstats.{op}.{field}"), v);
                    }
                }
                Observation { counters, groups: BTreeSet::from(["mountstats".to_string()]) }
            }
            Observer::ProcNet => {
                let p = crate::parse::procnet::parse(text)?;
                let counters = p.flat().into_iter().map(|(k, v)| (format!("netstat.{k}"), v)).collect();
                let mut groups: BTreeSet<String> = p.sections.keys().map(|s| format!("netstat.{s}")).collect();
                groups.insert("netstat".into());
                Observation { counters, groups }
            }
            Observer::ProcRpcNfs => Observation {
                counters: crate::parse::procrpcnfs::parse(text)?.counters(),
                groups: BTreeSet::from([NFS_GROUP.to_string()]),
            },
        })
    }
}

/// `(field, value)` of one operation's mountstats line, in the kernel's order
/// (`errors` only where the kernel prints it, Linux ≥ 5.3).
pub(crate) fn op_fields(s: &mountstats::OpStats) -> Vec<(&'static str, u64)> {
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

/// The statistics of operation `op` from a mountstats [`Observation`]'s counters
/// (`None` when the observation has no line for it).
pub fn op_stats(obs: &Observation, op: &str) -> Option<mountstats::OpStats> {
    let get = |f: &str| obs.counters.get(&format!("mountstats.{op}.{f}")).copied();
    Some(mountstats::OpStats {
        ops: get("ops")?,
        transmissions: get("transmissions")?,
        major_timeouts: get("major_timeouts")?,
        bytes_sent: get("bytes_sent")?,
        bytes_received: get("bytes_received")?,
        queue_ms: get("queue_ms")?,
        rtt_ms: get("rtt_ms")?,
        execute_ms: get("execute_ms")?,
        errors: get("errors"),
    })
}

/// The group of an observation of the NFS client's counters (`nfsstat` or
/// `/proc/net/rpc/nfs`).
pub const NFS_GROUP: &str = "nfs";

/// One observation: cumulative counters at one moment, plus the counter **groups** the
/// output showed (a `netstat -s` section such as `netstat.Ip`, printed even when all
/// its lines were left out for being zero; or the observer kind, e.g. `nfsstat`). A
/// group tells "absent because zero" from "absent because not observed".
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Observation {
    /// Counter name → value.
    pub counters: Counters,
    /// Groups present in the output.
    pub groups: BTreeSet<String>,
}

impl Observation {
    /// `netstat -s` counters, named `netstat.<Section>.<Field>`; groups `netstat` and
    /// `netstat.<Section>` for every section printed.
    pub fn from_netstat(n: &NetstatS) -> Observation {
        let counters = n.flat().into_iter().map(|(k, v)| (format!("netstat.{k}"), v)).collect();
        let mut groups: BTreeSet<String> = n.sections.keys().map(|s| format!("netstat.{s}")).collect();
        groups.insert("netstat".into());
        Observation { counters, groups }
    }

    /// `nfsstat` counters named as documented in the module table; group [`NFS_GROUP`].
    pub fn from_nfsstat(n: &Nfsstat) -> Observation {
        let mut out = Counters::new();
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
            let t = crate::parse::nfsstat::title_key(title);
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

/// Derived metrics of `netstat -s` observations.
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

/// Derived metrics of `nfsstat` observations.
pub const NFSSTAT_DERIVED: &[DerivedMetric] = &[
    counter("rpc_calls", "NFS client RPC calls", "nfs.client.rpc.calls", None),
    counter("rpc_retransmissions", "NFS client RPC retransmissions", "nfs.client.rpc.retrans", None),
    DerivedMetric {
        name: "nfs_read_calls",
        doc: "NFS client READ calls, summed over NFS versions",
        rule: Rule::Sum { prefix: "nfs.client.v", suffix: ".read", group: NFS_GROUP },
    },
];

const fn counter(
    name: &'static str,
    doc: &'static str,
    counter: &'static str,
    zero_if: Option<&'static str>,
) -> DerivedMetric {
    DerivedMetric { name, doc, rule: Rule::Counter { counter, zero_if } }
}

/// net-tools prints the `Ip:` section but leaves out its zero lines.
const IP: Option<&str> = Some("netstat.Ip");

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

/// Every derived metric name of `kinds`, with its definition.
pub fn derived_metrics(kinds: impl IntoIterator<Item = ObserverKind>) -> BTreeMap<&'static str, DerivedMetric> {
    kinds.into_iter().flat_map(|k| k.derived().iter().map(|d| (d.name, *d))).collect()
}

impl RemoteObserver {
    /// The VM it reads.
    pub fn vm(&self) -> &str {
        match self {
            RemoteObserver::Netem { vm, .. } => vm,
        }
    }

    /// Its name in results (`netem`).
    pub fn name(&self) -> &'static str {
        match self {
            RemoteObserver::Netem { .. } => "netem",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obs(pairs: &[(&str, u64)], groups: &[&str]) -> Observation {
        Observation {
            counters: pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
            groups: groups.iter().map(|g| g.to_string()).collect(),
        }
    }

    fn metric(name: &str) -> DerivedMetric {
        derived_metrics(ObserverKind::ALL)[name]
    }

    #[test]
    fn absent_reassembly_lines_count_as_zero_only_in_a_printed_ip_section() {
        let m = metric("ip_reassembly_failures");
        let before = obs(&[], &["netstat", "netstat.Ip"]);
        let after = obs(&[("netstat.Ip.ReasmFails", 25)], &["netstat", "netstat.Ip"]);
        assert_eq!(m.compute(&before, &after), Some(25));
        let no_ip = obs(&[], &["netstat"]);
        assert_eq!(m.compute(&no_ip, &after), None);
    }

    #[test]
    fn udp_counters_are_unknown_when_absent() {
        let m = metric("udp_receive_buffer_errors");
        let b = obs(&[], &["netstat", "netstat.Udp"]);
        assert_eq!(m.compute(&b, &b), None);
        let a = obs(&[("netstat.Udp.RcvbufErrors", 3)], &["netstat.Udp"]);
        let b = obs(&[("netstat.Udp.RcvbufErrors", 1)], &["netstat.Udp"]);
        assert_eq!(m.compute(&b, &a), Some(2));
    }

    #[test]
    fn nfs_reads_sum_over_versions_and_need_nfsstat_on_both_sides() {
        let m = metric("nfs_read_calls");
        let b = obs(&[("nfs.client.v3.read", 10)], &[NFS_GROUP]);
        let a = obs(&[("nfs.client.v3.read", 30), ("nfs.client.v4.read", 5), ("nfs.server.v3.read", 99)], &[NFS_GROUP]);
        assert_eq!(m.compute(&b, &a), Some(25));
        assert_eq!(m.compute(&Observation::default(), &a), None);
        // nfs-utils 2.x leaves out tables whose counts are all zero.
        assert_eq!(m.compute(&obs(&[], &[NFS_GROUP]), &obs(&[], &[NFS_GROUP])), Some(0));
    }

    #[test]
    fn mountstats_keeps_the_listed_operations() {
        let text = "device 10.0.0.1:/home mounted on /mnt/home with fstype nfs statvers=1.1\n\tper-op statistics\n\t        READ: 611 850 12 79432 5031024 12 2480 19220 0\n\t       WRITE: 1 1 0 10 20 0 1 2 0\n";
        let o = Observer::Mountstats { mount: "/mnt/home".into(), ops: vec!["READ".into()] }.observe(text).unwrap();
        assert_eq!(o.counters["mountstats.READ.transmissions"], 850);
        assert_eq!(o.counters["mountstats.READ.errors"], 0);
        assert!(!o.counters.contains_key("mountstats.WRITE.ops"));
        let s = op_stats(&o, "READ").unwrap();
        assert_eq!((s.ops, s.major_timeouts, s.execute_ms, s.errors), (611, 12, 19220, Some(0)));
        assert_eq!(op_stats(&o, "WRITE"), None);
    }
}
