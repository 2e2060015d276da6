//! Parser for the raw NFS client statistics file `/proc/net/rpc/nfs`, which
//! `nfsstat -c` (see [`super::nfsstat`]) reads and prints as tables.
//!
//! Source: `rpc_proc_show` in Linux `net/sunrpc/stats.c` (the same lines in
//! 2.6.0 and 6.x, apart from `%d` versus `%u`, see below):
//!
//! ```text
//! net <packets> <udp> <tcp> <tcpconn>
//! rpc <calls> <retrans> <authrefrsh>
//! proc<version> <count> <count values, one per procedure>
//! ```
//!
//! for example (Debian bookworm, Linux 6.1, after an NFSv3 read)
//!
//! ```text
//! net 0 0 0 0
//! rpc 3190 138 0
//! proc3 22 0 14 0 6 9 0 3058 0 0 0 0 0 0 0 0 0 0 0 2 3 0 0
//! proc4 69 0 0 0 …
//! ```
//!
//! One `procN` line is printed per NFS version registered with the RPC client
//! (`nfsv2`, `nfsv3`, `nfsv4` modules loaded), in version order. The number
//! after `procN` is the count of values that follow it (`nrprocs`): 18 for v2,
//! 22 for v3, and for v4 it grows with the kernel (69 from the `READ_PLUS`
//! procedure on, e.g. Linux 6.1). Values are 32-bit counters printed with
//! `%u`; older kernels (at least up to 2.6.13) printed them with `%d` (a
//! 2005 patch against 2.6.13's `net/sunrpc/stats.c` changed this), so a
//! counter past 2^31 showed up negative there. Such a value is mapped back to the unsigned 32-bit
//! counter it was printed from (`-5` → 4294967291), which is also what
//! `nfsstat` makes of it (`strtoul` cast to `unsigned int`).
//!
//! **Names** agree with what [`super::nfsstat`] produces from `nfsstat`'s
//! printed tables, because they are the same tables: nfs-utils
//! `utils/nfsstat/nfsstat.c` (`nfsv2name`, `nfsv3name`, `nfscltproc4name`;
//! identical in 1.0.x for v2/v3 and in 2.6.x) labels value *i* after the count
//! with name *i*, see [`NFS2_PROCS`], [`NFS3_PROCS`], [`NFS4_CLIENT_PROCS`].
//!
//! * v2 and v3 procedures are in RPC procedure-number order (RFC 1094, RFC
//!   1813), which never changes.
//! * v4 values are in the order of the kernel's `NFSPROC4_CLNT_*` enum
//!   (`include/linux/nfs4.h`), which nfs-utils 2.6.x names up to `clone` (59
//!   names). Newer kernels print more values; they are kept as `op<index>`
//!   (`op59` … `op68` on Linux 6.1: copy, offload_cancel, lookupp,
//!   layouterror, copy_notify, getxattr, setxattr, listxattrs, removexattr,
//!   read_plus in the kernel's enum), never dropped. Caveats, shared with
//!   `nfsstat` because the names are its names: 2.6.0-era kernels had a
//!   different v4 procedure list (e.g. `OPEN_RECLAIM`), and a 2025 kernel
//!   change inserted `ZERO_RANGE` after `DEALLOCATE`, shifting everything
//!   from `layoutstats` on by one on such kernels.
//! * Any other version (`proc1`, `proc5`) has no name table: all its values
//!   are `op<index>`.
//!
//! Result counters ([`ProcRpcNfs::counters`]) use the names the `nfsstat`
//! observer gives the same numbers (`crate::measure::observer::Observation::from_nfsstat`):
//! `nfs.client.rpc.calls`, `nfs.client.rpc.retrans`, `nfs.client.rpc.authrefrsh`,
//! `nfs.client.v3.read`, `nfs.client.v4.op62`, … and, for the `net` line
//! (which `nfsstat` prints only with `-o net`, as `Client packet stats:`),
//! `nfs.other.client_packet_stats.packets`, `….udp`, `….tcp`, `….tcpconn`.
//!
//! **Errors.** A value's name is its position, so a line whose values cannot
//! be attributed is an error ([`ParseError::Malformed`], naming the line
//! number and its tag): a `procN` line whose count differs from the number of
//! values after it, a `net` line without exactly 4 values or an `rpc` line
//! without exactly 3 (the server's `/proc/net/rpc/nfsd` has 5 on its `rpc`
//! line, and the error says so), and a value that is not a number.
//! Everything else odd goes to [`ProcRpcNfs::unknown`]: lines with another
//! tag (the server file's `rc`, `fh`, `io`, `th`, `ra`, `proc4ops`), and a
//! second line for a tag already seen (e.g. the file captured twice; the
//! first one is kept). [`ParseError::Empty`] and [`ParseError::NotRecognised`]
//! are returned when there is no `net`, `rpc` or `procN` line at all.

use super::nfsstat::ClientRpc;
use super::{not_recognised, ParseError, Tool};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// NFSv2 procedure names in RPC procedure order (nfs-utils `nfsv2name`).
pub const NFS2_PROCS: [&str; 18] = [
    "null", "getattr", "setattr", "root", "lookup", "readlink", "read", "wrcache", "write", "create", "remove",
    "rename", "link", "symlink", "mkdir", "rmdir", "readdir", "fsstat",
];

/// NFSv3 procedure names in RPC procedure order (nfs-utils `nfsv3name`).
#[rustfmt::skip]
pub const NFS3_PROCS: [&str; 22] = [
    "null", "getattr", "setattr", "lookup", "access", "readlink", "read", "write", "create",
    "mkdir", "symlink", "mknod", "remove", "rmdir", "rename", "link", "readdir", "readdirplus",
    "fsstat", "fsinfo", "pathconf", "commit",
];

/// NFSv4 client procedure names in the kernel's `NFSPROC4_CLNT_*` order, as
/// far as nfs-utils 2.6.x names them (`nfscltproc4name`, `CLTPROC4_SZ` = 59).
#[rustfmt::skip]
pub const NFS4_CLIENT_PROCS: [&str; 59] = [
    "null", "read", "write", "commit", "open", "open_conf", "open_noat", "open_dgrd", "close",
    "setattr", "fsinfo", "renew", "setclntid", "confirm", "lock", "lockt", "locku", "access",
    "getattr", "lookup", "lookup_root", "remove", "rename", "link", "symlink", "create", "pathconf",
    "statfs", "readlink", "readdir", "server_caps", "delegreturn", "getacl", "setacl",
    "fs_locations", "rel_lkowner", "secinfo", "fsid_present", "exchange_id", "create_session",
    "destroy_session", "sequence", "get_lease_time", "reclaim_comp", "layoutget", "getdevinfo",
    "layoutcommit", "layoutreturn", "secinfo_no", "test_stateid", "free_stateid", "getdevicelist",
    "bind_conn_to_ses", "destroy_clientid", "seek", "allocate", "deallocate", "layoutstats",
    "clone",
];

/// The procedure names `nfsstat` uses for `proc<version>` values, in order;
/// empty for versions it has no table for.
pub fn proc_names(version: u32) -> &'static [&'static str] {
    match version {
        2 => &NFS2_PROCS,
        3 => &NFS3_PROCS,
        4 => &NFS4_CLIENT_PROCS,
        _ => &[],
    }
}

/// The `net` line. Mainline kernels update these only in the RPC *server*
/// code (`net/sunrpc/svcsock.c`), so on an NFS client they normally stay 0.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RpcNet {
    /// All packets (`netcnt`).
    pub packets: u64,
    /// UDP packets (`netudpcnt`).
    pub udp: u64,
    /// TCP packets (`nettcpcnt`).
    pub tcp: u64,
    /// TCP connections (`nettcpconn`).
    pub tcpconn: u64,
}

/// Parsed `/proc/net/rpc/nfs`, see the [module docs](self).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcRpcNfs {
    /// The `net` line, if present.
    pub net: Option<RpcNet>,
    /// The `rpc` line, if present: the same three counters as `nfsstat`'s
    /// `Client rpc stats:` table.
    pub rpc: Option<ClientRpc>,
    /// `"v2"`, `"v3"`, `"v4"` (from `proc2`, …) → procedure name → call count.
    /// Names as in [`proc_names`]; values beyond the name table are keyed
    /// `op<index>`, the index counting from 0 like the names.
    pub procs: BTreeMap<String, BTreeMap<String, u64>>,
    /// Non-blank lines (trimmed) with another tag, and repeated lines.
    pub unknown: Vec<String>,
}

impl ProcRpcNfs {
    /// Call count of procedure `op` of `version` (`"v3"`), e.g. `op("v3", "read")`.
    ///
    /// Used by the integration tests (not by the runner).
    #[cfg_attr(vmrepro_dead_code, allow(dead_code))]
    pub fn op(&self, version: &str, op: &str) -> Option<u64> {
        self.procs.get(version)?.get(op).copied()
    }

    /// All counters, named as the `nfsstat` observer names the same values from
    /// `nfsstat` (`crate::measure::observer::Observation::from_nfsstat`; see the
    /// [module docs](self)).
    pub fn counters(&self) -> BTreeMap<String, u64> {
        let mut out = BTreeMap::new();
        if let Some(net) = &self.net {
            for (name, v) in [("packets", net.packets), ("udp", net.udp), ("tcp", net.tcp), ("tcpconn", net.tcpconn)] {
                out.insert(format!("nfs.other.client_packet_stats.{name}"), v);
            }
        }
        if let Some(rpc) = &self.rpc {
            out.insert("nfs.client.rpc.calls".into(), rpc.calls);
            out.insert("nfs.client.rpc.retrans".into(), rpc.retrans);
            out.insert("nfs.client.rpc.authrefrsh".into(), rpc.authrefrsh);
        }
        for (version, ops) in &self.procs {
            for (op, v) in ops {
                out.insert(format!("nfs.client.{version}.{op}"), *v);
            }
        }
        out
    }
}

/// Parses the contents of `/proc/net/rpc/nfs` (see the [module docs](self)).
///
/// Returns [`ParseError::Malformed`] for a `net`, `rpc` or `procN` line whose
/// values cannot be attributed, [`ParseError::Empty`] for blank input and
/// [`ParseError::NotRecognised`] when there is none of those lines.
pub fn parse(input: &str) -> Result<ProcRpcNfs, ParseError> {
    let mut out = ProcRpcNfs::default();
    let mut recognised = false;

    for (index, raw) in input.lines().enumerate() {
        let line_no = index + 1;
        let line = raw.trim();
        let mut tokens = line.split_whitespace();
        let Some(tag) = tokens.next() else { continue };
        let rest: Vec<&str> = tokens.collect();
        let malformed = |reason: String| ParseError::Malformed { tool: Tool::ProcRpcNfs, line: line_no, reason };
        let values = |from: usize| -> Result<Vec<u64>, ParseError> {
            rest[from..]
                .iter()
                .map(|t| parse_value(t).ok_or_else(|| malformed(format!("`{tag}`: value {t:?} is not a counter"))))
                .collect()
        };

        match tag {
            "net" => {
                recognised = true;
                let v = values(0)?;
                let [packets, udp, tcp, tcpconn] = v[..] else {
                    return Err(malformed(format!(
                        "`net` has {} values, expected 4 (packets udp tcp tcpconn)",
                        v.len()
                    )));
                };
                if out.net.is_some() {
                    out.unknown.push(line.to_string());
                } else {
                    out.net = Some(RpcNet { packets, udp, tcp, tcpconn });
                }
            }
            "rpc" => {
                recognised = true;
                let v = values(0)?;
                let [calls, retrans, authrefrsh] = v[..] else {
                    let hint = if v.len() == 5 { "; 5 is the server's /proc/net/rpc/nfsd" } else { "" };
                    return Err(malformed(format!(
                        "`rpc` has {} values, expected 3 (calls retrans authrefrsh){hint}",
                        v.len()
                    )));
                };
                if out.rpc.is_some() {
                    out.unknown.push(line.to_string());
                } else {
                    out.rpc = Some(ClientRpc { calls, retrans, authrefrsh });
                }
            }
            _ => {
                let Some(version) = proc_version(tag) else {
                    out.unknown.push(line.to_string());
                    continue;
                };
                recognised = true;
                let Some(count) = rest.first() else {
                    return Err(malformed(format!("`{tag}` has no count of values")));
                };
                let count: usize =
                    count.parse().map_err(|_| malformed(format!("`{tag}`: count {count:?} is not a number")))?;
                let v = values(1)?;
                if v.len() != count {
                    return Err(malformed(format!("`{tag}` announces {count} values but {} follow", v.len())));
                }
                let key = format!("v{version}");
                if out.procs.contains_key(&key) {
                    out.unknown.push(line.to_string());
                    continue;
                }
                let names = proc_names(version);
                let ops = v
                    .into_iter()
                    .enumerate()
                    .map(|(i, n)| (names.get(i).map_or_else(|| format!("op{i}"), |s| s.to_string()), n))
                    .collect();
                out.procs.insert(key, ops);
            }
        }
    }
    if !recognised {
        return Err(not_recognised(Tool::ProcRpcNfs, input));
    }
    Ok(out)
}

/// `proc3` → 3; `None` for other tags (`proc4ops`, `procs`, `proc`).
fn proc_version(tag: &str) -> Option<u32> {
    let digits = tag.strip_prefix("proc")?;
    if digits.is_empty() || !digits.chars().all(|c| c.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// A printed counter: a `u64`, or a negative `%d` rendering of a 32-bit
/// counter (older kernels, at least up to 2.6.13), mapped back to its
/// unsigned value.
fn parse_value(token: &str) -> Option<u64> {
    let digits = token.strip_prefix('-').unwrap_or(token);
    if digits.is_empty() || !digits.chars().all(|c| c.is_ascii_digit()) {
        return None;
    }
    match token.strip_prefix('-') {
        None => token.parse().ok(),
        Some(_) => {
            let v: i64 = token.parse().ok()?;
            (v >= -(1i64 << 31)).then(|| (v + (1i64 << 32)) as u64 & 0xffff_ffff)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 22 distinct values, so every position is checked.
    const PROC3: &str = "proc3 22 0 14 2 6 9 1 3058 5 7 8 10 11 12 13 15 16 17 18 19 20 21 22\n";

    #[test]
    fn rpc_line() {
        let p = parse("rpc 1200 37 1200\n").unwrap();
        let rpc = p.rpc.unwrap();
        assert_eq!((rpc.calls, rpc.retrans, rpc.authrefrsh), (1200, 37, 1200));
        let c = p.counters();
        assert_eq!(c["nfs.client.rpc.calls"], 1200);
        assert_eq!(c["nfs.client.rpc.retrans"], 37);
        assert_eq!(c["nfs.client.rpc.authrefrsh"], 1200);
        assert_eq!(c.len(), 3);
    }

    #[test]
    fn proc3_values_in_nfsstat_order() {
        let p = parse(PROC3).unwrap();
        let expected = [0, 14, 2, 6, 9, 1, 3058, 5, 7, 8, 10, 11, 12, 13, 15, 16, 17, 18, 19, 20, 21, 22];
        for (name, value) in NFS3_PROCS.iter().zip(expected) {
            assert_eq!(p.op("v3", name), Some(value), "{name}");
        }
        assert_eq!(p.op("v3", "read"), Some(3058));
        assert_eq!(p.op("v3", "commit"), Some(22));
        assert_eq!(p.procs["v3"].len(), 22);
        assert_eq!(p.counters()["nfs.client.v3.read"], 3058);
    }

    #[test]
    fn count_mismatch_is_an_error_naming_the_line() {
        let short = "net 0 0 0 0\nrpc 5 0 0\nproc3 22 0 1 2\n";
        assert_eq!(
            parse(short),
            Err(ParseError::Malformed {
                tool: Tool::ProcRpcNfs,
                line: 3,
                reason: "`proc3` announces 22 values but 3 follow".into(),
            })
        );
        assert_eq!(
            parse("proc2 2 0 1 2\n").unwrap_err().to_string(),
            "/proc/net/rpc/nfs: line 1: `proc2` announces 2 values but 3 follow"
        );
        assert!(matches!(parse("proc3\n"), Err(ParseError::Malformed { line: 1, .. })));
        assert!(matches!(parse("proc3 x 1\n"), Err(ParseError::Malformed { line: 1, .. })));
        assert!(matches!(parse("proc3 1 1.5\n"), Err(ParseError::Malformed { line: 1, .. })));
        assert!(matches!(parse("net 1 2 3\n"), Err(ParseError::Malformed { line: 1, .. })));
        assert_eq!(
            parse("rc 0 0 0\nnet 0 0 0 0\nrpc 0 0 0 0 0\n").unwrap_err().to_string(),
            "/proc/net/rpc/nfs: line 3: `rpc` has 5 values, expected 3 (calls retrans authrefrsh); 5 is the server's /proc/net/rpc/nfsd"
        );
    }

    #[test]
    fn net_line_extra_v4_ops_and_unknown_versions() {
        let v4: Vec<String> = (0..69).map(|i| (i * 10).to_string()).collect();
        let text = format!("net 7 6 1 1\nproc4 69 {}\nproc5 2 3 4\n", v4.join(" "));
        let p = parse(&text).unwrap();
        assert_eq!(p.net, Some(RpcNet { packets: 7, udp: 6, tcp: 1, tcpconn: 1 }));
        assert_eq!(p.op("v4", "null"), Some(0));
        assert_eq!(p.op("v4", "read"), Some(10));
        assert_eq!(p.op("v4", "clone"), Some(580));
        assert_eq!(p.op("v4", "op59"), Some(590));
        assert_eq!(p.op("v4", "op68"), Some(680));
        assert_eq!(p.procs["v4"].len(), 69);
        assert_eq!(p.op("v5", "op0"), Some(3));
        assert_eq!(p.op("v5", "op1"), Some(4));
        let c = p.counters();
        assert_eq!(c["nfs.other.client_packet_stats.packets"], 7);
        assert_eq!(c["nfs.other.client_packet_stats.tcpconn"], 1);
        assert_eq!(c["nfs.client.v4.op68"], 680);
        assert!(p.rpc.is_none());
    }

    #[test]
    fn old_negative_values_wrap_to_u32() {
        assert_eq!(parse_value("-5"), Some(4_294_967_291));
        assert_eq!(parse_value("-2147483648"), Some(2_147_483_648));
        assert_eq!(parse_value("-2147483649"), None);
        assert_eq!(parse_value("-0"), Some(0));
        let p = parse("rpc -1294967296 12 0\n").unwrap();
        assert_eq!(p.rpc.unwrap().calls, 3_000_000_000);
    }

    #[test]
    fn foreign_and_repeated_lines_are_kept() {
        let text = format!("Warning: something\nrpc 1 0 0\n{PROC3}proc4ops 3 0 0 0\nrpc 2 0 0\n{PROC3}");
        let p = parse(&text).unwrap();
        assert_eq!(p.rpc.unwrap().calls, 1, "first line wins");
        assert_eq!(p.op("v3", "getattr"), Some(14));
        assert_eq!(p.unknown, vec!["Warning: something", "proc4ops 3 0 0 0", "rpc 2 0 0", PROC3.trim()]);
    }

    #[test]
    fn rejects_foreign_input() {
        assert_eq!(parse(""), Err(ParseError::Empty { tool: Tool::ProcRpcNfs }));
        let nfsstat = "Client rpc stats:\ncalls      retrans    authrefrsh\n3190       138        0\n";
        assert!(matches!(parse(nfsstat), Err(ParseError::NotRecognised { lines: 3, .. })));
        assert_eq!(proc_version("proc"), None);
        assert_eq!(proc_version("proc4ops"), None);
        assert_eq!(proc_version("proc12"), Some(12));
    }
}
