//! Parser for `nfsstat` (nfs-utils) output.
//!
//! `nfsstat` reads `/proc/net/rpc/nfs` (client) and `/proc/net/rpc/nfsd`
//! (server) and prints titled tables. Every table is one or more pairs of a
//! **header row** (whitespace-separated names) followed by a **value row**;
//! value rows are either plain counts (`print_numbers`) or `count pct%` pairs
//! (`print_callstats`, per-operation call counts). Source:
//! `utils/nfsstat/nfsstat.c` in nfs-utils. Two layouts are supported:
//!
//! **nfs-utils 1.0.x** (2003-era distributions, `nfsstat.c` © 1995–1999 Olaf
//! Kirch): names `%-11s`, six per row; counts `%-6d %2d%% `; no blank line after
//! plain tables; `Server nfs v2:` / `Client nfs v2:` always printed, v3 when the
//! kernel has it; server rpc header `calls badcalls badauth badclnt xdrcall`;
//! with a missing `/proc/net/rpc/nfsd` it warns `Warning: /proc/net/rpc/nfsd: …`
//! on stderr and prints zeros.
//!
//! ```text
//! Client rpc stats:
//! calls      retrans    authrefrsh
//! 959        636        0
//! Client nfs v2:
//! null       getattr    setattr    root       lookup     readlink
//! 0       0% 236    24% 0       0% 0       0% 236    24% 5       0%
//! ```
//!
//! **nfs-utils 2.6.x** (Debian bookworm 2.6.2): names `%-17s`, five per row;
//! counts `%-8u%3llu%%     `; blank line after every table; only tables with
//! non-zero calls are printed by default; server rpc header `calls badcalls
//! badfmt badauth badclnt`; also `Client nfs v4:`, `Server nfs v4:`, `Server nfs
//! v4 operations:`, and with `-o all`/`-v` `Server packet stats:`, `Server reply
//! cache:`, `Server io stats:`, `Server read ahead cache:`, `Server file handle
//! cache:`, `Client packet stats:`.
//!
//! ```text
//! Client rpc stats:
//! calls      retrans    authrefrsh
//! 3190       138        0
//!
//! Client nfs v3:
//! null             getattr          setattr          lookup           access
//! 0         0%     14        0%     0         0%     6         0%     9         0%
//! ```
//!
//! Percentages are derived values and are not kept. Counts are the kernel's
//! 32-bit (`unsigned int`) cumulative counters. A count of 8 or more digits at
//! 100 % is printed glued to its percentage in the 2.x layout
//! (`12345678100%`); that is split back correctly.

use super::{nonblank_lines, not_recognised, text_key, ParseError, Tool};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The `Client rpc stats:` table (same in all nfs-utils versions).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClientRpc {
    /// RPC calls sent by the client (all programs: NFS, MOUNT, NLM …), not
    /// counting retransmissions.
    pub calls: u64,
    /// RPC retransmissions (timeouts that caused a call to be sent again).
    pub retrans: u64,
    /// Credential refreshes.
    pub authrefrsh: u64,
}

/// Parsed `nfsstat` output, see the [module docs](self).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Nfsstat {
    /// `Client rpc stats:`, when printed with its three usual columns.
    pub client_rpc: Option<ClientRpc>,
    /// `Server rpc stats:` column name → value (`calls`, `badcalls`, and
    /// `badauth badclnt xdrcall` in 1.0.x or `badfmt badauth badclnt` in 2.x).
    pub server_rpc: Option<BTreeMap<String, u64>>,
    /// `Client nfs vN:` tables: `"v2"`, `"v3"`, `"v4"` → operation → call count.
    pub client: BTreeMap<String, BTreeMap<String, u64>>,
    /// `Server nfs vN:` tables: `"v2"`, `"v3"`, `"v4"` (null/compound), `"v4ops"`
    /// (`Server nfs v4 operations:`), `"v4cb"` (`Server nfs v4 callback
    /// operations:`) → operation → call count.
    pub server: BTreeMap<String, BTreeMap<String, u64>>,
    /// Every other table by its title without the colon (`"Server reply
    /// cache"`, `"Server packet stats"`, `"Server io stats"`, …, and `"Client
    /// rpc stats"` if it does not have the usual three columns) → column → value.
    pub other: BTreeMap<String, BTreeMap<String, u64>>,
    /// Non-blank lines (trimmed) that are not part of a table: warnings on
    /// stderr, value rows without a header, header rows without values, rows
    /// whose column counts differ.
    pub unknown: Vec<String>,
}

impl Nfsstat {
    /// Call count of `op` in the client table of `version` (`"v3"`), e.g.
    /// `client_op("v3", "read")`.
    ///
    /// Used by the integration tests (not by the runner).
    #[cfg_attr(vmrepro_dead_code, allow(dead_code))]
    pub fn client_op(&self, version: &str, op: &str) -> Option<u64> {
        self.client.get(version)?.get(op).copied()
    }
}

/// Where a table's values go.
enum Target {
    ClientRpc,
    ServerRpc,
    Client(String),
    Server(String),
    Other(String),
}

fn target_for(title: &str) -> Target {
    match title {
        "Client rpc stats" => Target::ClientRpc,
        "Server rpc stats" => Target::ServerRpc,
        "Server nfs v4 operations" => Target::Server("v4ops".into()),
        "Server nfs v4 callback operations" => Target::Server("v4cb".into()),
        _ => {
            if let Some(v) = title.strip_prefix("Client nfs ").filter(|v| is_version(v)) {
                Target::Client(v.into())
            } else if let Some(v) = title.strip_prefix("Server nfs ").filter(|v| is_version(v)) {
                Target::Server(v.into())
            } else {
                Target::Other(title.into())
            }
        }
    }
}

fn is_version(v: &str) -> bool {
    v.strip_prefix('v').is_some_and(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()))
}

/// A table title: unindented, ends with `:`, starts with a letter, and is not a
/// value row. Examples: `Client rpc stats:`, `Server nfs v4 operations:`.
fn is_title(raw: &str) -> bool {
    let line = raw.trim_end();
    !raw.starts_with(char::is_whitespace)
        && line.ends_with(':')
        && line.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
        && !line[..line.len() - 1].contains(':')
}

/// Parses a value row into counts; `None` if the row is not a value row.
/// Accepts plain counts (`12   0   3`), `count pct%` pairs (`0   0% 236  24%`)
/// and a count glued to a 100 % (`12345678100%`).
fn value_row(line: &str) -> Option<Vec<u64>> {
    let mut counts = Vec::new();
    let mut pct_pending = false; // the last count still lacks its percentage
    for tok in line.split_whitespace() {
        if let Some(num) = tok.strip_suffix('%') {
            if num.is_empty() || !num.chars().all(|c| c.is_ascii_digit()) {
                return None;
            }
            if pct_pending && num.len() <= 3 {
                pct_pending = false;
            } else if num.len() > 3 && num.ends_with("100") {
                counts.push(num[..num.len() - 3].parse().ok()?);
                pct_pending = false;
            } else {
                return None;
            }
        } else if !tok.is_empty() && tok.chars().all(|c| c.is_ascii_digit()) {
            counts.push(tok.parse().ok()?);
            pct_pending = true;
        } else {
            return None;
        }
    }
    (!counts.is_empty()).then_some(counts)
}

/// Parses `nfsstat` output (see the [module docs](self)).
///
/// Returns [`ParseError::Empty`] for blank input and
/// [`ParseError::NotRecognised`] when there is no table title at all (e.g. only
/// `Error: No Client Stats (/proc/net/rpc/nfs: No such file or directory).`).
pub fn parse(input: &str) -> Result<Nfsstat, ParseError> {
    let mut out = Nfsstat::default();
    // (title, accumulated columns) of the table being read
    let mut current: Option<(String, Vec<(String, u64)>)> = None;
    let mut header: Option<(&str, Vec<&str>)> = None;
    let mut saw_title = false;

    for raw in nonblank_lines(input) {
        let line = raw.trim();
        if is_title(raw) {
            if let Some((h, _)) = header.take() {
                out.unknown.push(h.to_string());
            }
            if let Some((title, cols)) = current.take() {
                store(&mut out, &title, cols);
            }
            current = Some((line.trim_end_matches(':').to_string(), Vec::new()));
            saw_title = true;
            continue;
        }
        match (value_row(line), current.as_mut()) {
            (Some(values), Some((_, cols))) => match header.take() {
                Some((_, names)) if names.len() == values.len() => {
                    cols.extend(names.into_iter().map(String::from).zip(values));
                }
                Some((h, _)) => {
                    out.unknown.push(h.to_string());
                    out.unknown.push(line.to_string());
                }
                None => out.unknown.push(line.to_string()),
            },
            (Some(_), None) => out.unknown.push(line.to_string()),
            (None, Some(_)) => {
                if let Some((h, _)) = header.replace((line, line.split_whitespace().collect())) {
                    out.unknown.push(h.to_string());
                }
            }
            (None, None) => out.unknown.push(line.to_string()),
        }
    }
    if let Some((h, _)) = header.take() {
        out.unknown.push(h.to_string());
    }
    if let Some((title, cols)) = current.take() {
        store(&mut out, &title, cols);
    }
    if !saw_title {
        return Err(not_recognised(Tool::Nfsstat, input));
    }
    Ok(out)
}

/// Files one finished table into `out`. Repeated column names within a table
/// (1.0.x prints `ncachedir` twice in `Server file handle cache:`) get a `#2`,
/// `#3`, … suffix; a table title seen twice is merged the same way.
fn store(out: &mut Nfsstat, title: &str, cols: Vec<(String, u64)>) {
    let map = match target_for(title) {
        Target::ClientRpc => {
            let get = |n: &str| cols.iter().find(|(k, _)| k == n).map(|(_, v)| *v);
            let names: Vec<&str> = cols.iter().map(|(k, _)| k.as_str()).collect();
            if out.client_rpc.is_none() && names == ["calls", "retrans", "authrefrsh"] {
                out.client_rpc = Some(ClientRpc {
                    calls: get("calls").unwrap_or_default(),
                    retrans: get("retrans").unwrap_or_default(),
                    authrefrsh: get("authrefrsh").unwrap_or_default(),
                });
                return;
            }
            out.other.entry(title.to_string()).or_default()
        }
        Target::ServerRpc => out.server_rpc.get_or_insert_with(BTreeMap::new),
        Target::Client(v) => out.client.entry(v).or_default(),
        Target::Server(v) => out.server.entry(v).or_default(),
        Target::Other(t) => out.other.entry(t).or_default(),
    };
    for (name, value) in cols {
        let mut key = name.clone();
        let mut n = 1;
        while map.contains_key(&key) {
            n += 1;
            key = format!("{name}#{n}");
        }
        map.insert(key, value);
    }
}

/// Key fragment for a table title in [`crate::measure::stats`] counter names:
/// `"Server reply cache"` → `server_reply_cache`.
pub fn title_key(title: &str) -> String {
    text_key(title, "\u{0}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn value_rows() {
        assert_eq!(value_row("3190       138        0       "), Some(vec![3190, 138, 0]));
        assert_eq!(value_row("0       0% 236    24% 1      100% "), Some(vec![0, 236, 1]));
        assert_eq!(value_row("0         0%     12345678100%     "), Some(vec![0, 12345678]));
        assert_eq!(value_row("1234567 100%"), Some(vec![1234567]));
        assert_eq!(value_row("null getattr"), None);
        assert_eq!(value_row("size       0-10%"), None);
        assert_eq!(value_row("12% 3"), None, "a percentage needs a count before it");
    }

    #[test]
    fn pairs_rows_and_keeps_mismatches() {
        let text = "Warning: /proc/net/rpc/nfsd: No such file or directory\n\
                    Client rpc stats:\ncalls      retrans    authrefrsh\n12 3 0\n\
                    Client nfs v3:\nnull getattr read\n0 0% 1 10% 9 90%\nwrite commit\n1 0% \n\
                    Server file handle cache:\nlookup anon ncachedir ncachedir stale\n0 0 1 2 0\n";
        let n = parse(text).unwrap();
        assert_eq!(n.client_rpc, Some(ClientRpc { calls: 12, retrans: 3, authrefrsh: 0 }));
        assert_eq!(n.client_op("v3", "read"), Some(9));
        assert_eq!(n.client_op("v3", "write"), None);
        assert_eq!(n.other["Server file handle cache"]["ncachedir#2"], 2);
        assert_eq!(n.unknown, vec!["Warning: /proc/net/rpc/nfsd: No such file or directory", "write commit", "1 0%"]);
    }

    #[test]
    fn unusual_client_rpc_goes_to_other() {
        let n = parse("Client rpc stats:\ncalls retrans\n5 1\n").unwrap();
        assert_eq!(n.client_rpc, None);
        assert_eq!(n.other["Client rpc stats"]["retrans"], 1);
    }

    #[test]
    fn errors() {
        assert_eq!(parse(""), Err(ParseError::Empty { tool: Tool::Nfsstat }));
        assert!(matches!(
            parse("Error: No Client Stats (/proc/net/rpc/nfs: No such file or directory). \n"),
            Err(ParseError::NotRecognised { .. })
        ));
    }

    #[test]
    fn title_keys() {
        assert_eq!(title_key("Server read ahead cache"), "server_read_ahead_cache");
    }
}
