//! Guest scripts for a VM's network conditions (`net:`): netem on its egress, offloads,
//! and the reseeding and statistics steps of a seeded netem.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;

use crate::schema::{NetemSpec, VmNetSpec};

use super::VmPlan;

/// Whether netem sits behind the `prio` qdisc and `u32` filters (with `to` or `seed`)
/// rather than as the root qdisc: [`net_script`] builds it, [`reseed_script`] changes it.
fn netem_is_filtered(e: &NetemSpec) -> bool {
    !e.to.is_empty() || e.seed.is_some()
}

/// netem's arguments for `e`, e.g. `delay 5ms 1ms loss random 1% seed 7`.
fn netem_args(e: &NetemSpec) -> String {
    let mut args = Vec::new();
    if let Some(d) = &e.delay {
        args.push(format!("delay {d}"));
        if let Some(j) = &e.jitter {
            args.push(j.clone());
        }
    }
    if let Some(l) = &e.loss {
        args.push(format!("loss random {l}"));
    }
    if let Some(r) = &e.reorder {
        args.push(format!("reorder {r}"));
    }
    if let Some(d) = &e.duplicate {
        args.push(format!("duplicate {d}"));
    }
    if let Some(r) = &e.rate {
        args.push(format!("rate {r}"));
    }
    if let Some(l) = e.limit {
        args.push(format!("limit {l}"));
    }
    if let Some(seed) = e.seed {
        args.push(format!("seed {seed}"));
    }
    args.join(" ")
}

/// Prints the VM's qdiscs with their counters (`tc -s qdisc show`); the analysis takes
/// each iteration's packets sent and dropped by netem from the outputs around it.
pub const STATS_SCRIPT: &str = "tc -s qdisc show dev eth0";

/// The guest script that reseeds a seeded netem (applied by [`net_script`]) before an
/// iteration: it prints the qdisc's statistics so far (packets sent and dropped), then
/// `tc qdisc change`s it with the same arguments, which restarts its generator
/// (netem reseeds on every change that carries a seed, Linux >= 6.6).
///
/// `vm` must have a seeded netem (validated); otherwise this is the plain statistics script.
pub fn reseed_script(vm: &VmPlan) -> String {
    let Some(e) = vm.net.as_ref().and_then(|n| n.egress.as_ref()).filter(|e| e.seed.is_some()) else {
        return STATS_SCRIPT.to_string();
    };
    let parent = if netem_is_filtered(e) { "parent 1:3 handle 30:" } else { "root" };
    format!("set -e\n{STATS_SCRIPT}\ntc qdisc change dev eth0 {parent} netem {}\n", netem_args(e))
}

/// The guest script applying `net:` (netem on egress, offloads) and printing the state
/// that resulted (`tc qdisc show`, `ethtool -k`), which is kept with the results.
///
/// With `egress.to` or `egress.seed`, netem sits under band 3 of a `prio` qdisc (all
/// traffic is mapped to band 2) and `u32` filters send IPv4 packets for those VMs'
/// addresses (or, with only a seed, every IPv4 packet) to band 3. A seed the kernel
/// ignores (Linux < 6.6) makes the script fail with exit status 3 and says so.
pub fn net_script(n: &VmNetSpec, addresses: &BTreeMap<String, Ipv4Addr>) -> String {
    let mut s = String::from("set -e\n");
    if n.offloads == Some(false) {
        s.push_str("ethtool -K eth0 tso off gso off gro off\n");
        // TCP builds GSO super-packets even with gso off (Linux >= 4.17 turns GSO on for
        // every TCP socket and segments in software after the qdisc); one segment per
        // skb is the only way netem sees, and drops, single TCP segments.
        s.push_str("ip link set dev eth0 gso_max_segs 1\n");
    }
    if let Some(e) = &n.egress {
        let args = netem_args(e);
        if !netem_is_filtered(e) {
            s.push_str(&format!("tc qdisc replace dev eth0 root netem {args}\n"));
        } else {
            s.push_str(
                "tc qdisc replace dev eth0 root handle 1: prio bands 3 priomap 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1\n",
            );
            s.push_str(&format!("tc qdisc add dev eth0 parent 1:3 handle 30: netem {args}\n"));
            let destinations: Vec<String> = if e.to.is_empty() {
                vec!["0.0.0.0/0".into()]
            } else {
                e.to.iter().filter_map(|vm| addresses.get(vm)).map(|a| format!("{a}/32")).collect()
            };
            for d in destinations {
                s.push_str(&format!(
                    "tc filter add dev eth0 parent 1: protocol ip prio 1 u32 match ip dst {d} flowid 1:3\n"
                ));
            }
        }
        if let Some(seed) = e.seed {
            s.push_str(&format!(
                "tc -d qdisc show dev eth0 | grep -q ' seed {seed}' || {{ echo \"netem on $(uname -r) ignored \
                 'seed {seed}': seeded loss needs Linux >= 6.6 (and iproute2 >= 6.6) in this VM\" >&2; exit 3; }}\n"
            ));
        }
    }
    s.push_str("tc qdisc show dev eth0 | sed 's/^/qdisc: /'\n");
    s.push_str("tc filter show dev eth0 | sed 's/^/filter: /'\n");
    s.push_str("ethtool -k eth0 | grep -E '^(tcp-segmentation-offload|generic-segmentation-offload|generic-receive-offload):' | sed 's/^/offload /'\n");
    s.push_str("ip -d link show dev eth0 | grep -o 'gso_max_segs [0-9]*' | sed 's/^/offload /'\n");
    s
}
