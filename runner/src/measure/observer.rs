//! Observers: what a measurement reads in the guest before and after every iteration,
//! and how it becomes counters and derived metrics.
//!
//! The observer kinds are rows of one table, [`crate::parse::OBSERVERS`]: each row
//! gives the kind's guest command, parser, counter namespace and derived metrics
//! (see [`crate::parse::observe`]). An [`Observer`] of a plan is a kind plus its
//! settings; this module reads its output through its row. The script section of an
//! observer is named after its kind (see [`super::script::Section`]).
//!
//! A [`RemoteObserver`] reads *another* VM around each iteration: the packets a netem
//! qdisc sent and dropped (and, when that netem is seeded, it reseeds it before every
//! iteration so the n-th packet of every iteration meets the same drop decision).

use std::collections::BTreeMap;

pub use crate::parse::observe::{DerivedMetric, Observation};
use crate::parse::{mountstats, ParseError};
use crate::plan::measurement::{Observer, ObserverKind, RemoteObserver};

impl Observer {
    /// The observer's kind.
    pub fn kind(&self) -> ObserverKind {
        self.kind
    }

    /// The guest command that prints the observed state (to stdout).
    pub fn command(&self) -> &'static str {
        self.kind.def().command
    }

    /// Parses what [`Observer::command`] printed.
    ///
    /// Errors: the text is not that tool's output (see [`crate::parse`]); for
    /// `mountstats`, no NFS mount on the observer's mount point.
    pub fn observe(&self, text: &str) -> Result<Observation, ParseError> {
        (self.kind.def().read)(text, self.scope.as_ref())
    }
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
    use crate::parse::observe::{Scope, NFS_GROUP};

    fn obs(pairs: &[(&str, u64)], groups: &[&str]) -> Observation {
        Observation {
            counters: pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
            groups: groups.iter().map(|g| g.to_string()).collect(),
        }
    }

    fn metric(name: &str) -> DerivedMetric {
        derived_metrics(ObserverKind::all())[name]
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
        let o = Observer::scoped(
            ObserverKind::named("mountstats"),
            Scope { mount: "/mnt/home".into(), ops: vec!["READ".into()] },
        )
        .observe(text)
        .unwrap();
        assert_eq!(o.counters["mountstats.READ.transmissions"], 850);
        assert_eq!(o.counters["mountstats.READ.errors"], 0);
        assert!(!o.counters.contains_key("mountstats.WRITE.ops"));
        let s = op_stats(&o, "READ").unwrap();
        assert_eq!((s.ops, s.major_timeouts, s.execute_ms, s.errors), (611, 12, 19220, Some(0)));
        assert_eq!(op_stats(&o, "WRITE"), None);
    }
}
