//! Parsers for the text that the measured guest prints around the NFS read.
//!
//! The reproduction runs, inside each guest,
//!
//! ```text
//! netstat -s; nfsstat            # "before" observation
//! /usr/bin/time cat FILE > /dev/null
//! netstat -s; nfsstat            # "after" observation
//! ```
//!
//! and this module turns each of those outputs into a typed value:
//!
//! | tool | module | result type |
//! |------|--------|-------------|
//! | GNU `time` (default format, 1.7 and 1.9) | [`gnutime`] | [`GnuTime`](gnutime::GnuTime) |
//! | `netstat -s` (net-tools 1.60 and 2.10) | [`netstat`] | [`NetstatS`] |
//! | `nfsstat` (nfs-utils 1.0.x and 2.6.x) | [`nfsstat`] | [`Nfsstat`] |
//! | `/proc/self/mountstats` (RPC iostats 1.0/1.1, Linux 2.6.17 on) | [`mountstats`] | [`Mountstats`](mountstats::Mountstats) |
//! | raw `/proc/net/snmp` + `/proc/net/netstat` (Linux 2.4 on) | [`procnet`] | [`ProcNetSnmp`](procnet::ProcNetSnmp) |
//! | raw `/proc/net/rpc/nfs` (NFS client RPC counts, Linux 2.6.0 to 6.x) | [`procrpcnfs`] | [`ProcRpcNfs`](procrpcnfs::ProcRpcNfs) |
//! | `/proc/net/sctp/snmp` (SCTP counters, Linux 2.6.x to 6.x) | [`sctpsnmp`] | [`SctpSnmp`](sctpsnmp::SctpSnmp) |
//!
//! Common rules for all parsers:
//!
//! * They take the whole captured text (`&str`, `\n` or `\r\n` line ends) and
//!   return a typed struct that is `Serialize + Deserialize + Debug + Clone + PartialEq`.
//! * They **never silently drop a line**. A line whose shape is understood but whose
//!   meaning is not (e.g. a counter with unfamiliar wording) is kept under a key
//!   derived from its text; a line that cannot be parsed at all is kept, trimmed,
//!   in the result's `unknown` field. Blank lines carry no information and are
//!   skipped.
//! * They return [`ParseError`] only when the input is not that tool's output at
//!   all: it is empty, or nothing in it is recognisable as the tool's report.
//!   Partial or odd output is *not* an error; it shows up in `unknown`.
//!   One narrow exception, documented on its parsers:
//!   [`ParseError::Malformed`] when a line of a *positional* format (raw
//!   `/proc` files, where a value's name is its position) has the wrong number
//!   of values or a value that is not a number, so that keeping the line would
//!   mean guessing which value belongs to which counter.
//!
//! Turning two observations into deltas and derived metrics is the job of
//! [`crate::measure::stats`], not of this module.
//!
//! # The observer table
//!
//! [`OBSERVERS`] is the one definition of the observers a measurement can read around
//! each iteration (`observe:` in a suite): one [`ObserverDef`] row per kind, with its
//! guest command, parser, counter namespace and name rules and derived metrics (see
//! [`observe`]). A new observer is a parser file here, its row below and its fixtures.
//!
//! | observer | command | counter names | from |
//! |---|---|---|---|
//! | `netstat` | `netstat -s` (net-tools 1.60, 2.10) | `netstat.<Section>.<Field>` (`netstat.Ip.ReasmFails`) | `/proc/net/snmp`, `/proc/net/netstat` |
//! | `nfsstat` | `nfsstat` (nfs-utils 1.0.x, 2.6.x) | `nfs.client.rpc.calls`, `nfs.client.v3.read`, `nfs.server.…`, `nfs.other.…` | `/proc/net/rpc/nfs{,d}` |
//! | `mountstats` | `cat /proc/self/mountstats` (RPC iostats 1.0/1.1, Linux ≥ 2.6.17) | `mountstats.<OP>.<field>` (`mountstats.READ.transmissions`) | one mount's per-op RPC statistics |
//! | `proc_net` | `cat /proc/net/snmp /proc/net/netstat` (raw, what `nstat` reads) | the same as `netstat` | the same files |
//! | `proc_rpc_nfs` | `cat /proc/net/rpc/nfs` (raw client counts) | the client half of `nfsstat`'s | the same file |
//! | `proc_sctp` | `cat /proc/net/sctp/snmp` (Linux 2.6.x to 6.x, `sctp` module loaded) | `sctp.<Name>` (`sctp.SctpT3Retransmits`) | [`sctpsnmp`] |

pub mod gnutime;
pub mod mountstats;
pub mod netstat;
pub mod nfsstat;
pub mod observe;
pub mod procmounts;
pub mod procnet;
pub mod procrpcnfs;
pub mod sctpsnmp;
pub mod tc;

pub use netstat::NetstatS;
pub use nfsstat::Nfsstat;
pub use observe::{ObserverDef, ObserverKind};

use observe::Settings;

/// Every observer kind, in the order suites, hints and the script list them.
/// `netstat` and `proc_net` give the same counters, as do `nfsstat` and `proc_rpc_nfs`
/// for the client (they share a namespace).
pub const OBSERVERS: &[ObserverDef] = &[
    ObserverDef {
        name: "netstat",
        command: "netstat -s",
        settings: Settings::None,
        read: observe::read_netstat,
        namespace: "netstat",
        counter_name: observe::netstat_counter,
        derived: observe::NETSTAT_DERIVED,
    },
    ObserverDef {
        name: "nfsstat",
        command: "nfsstat",
        settings: Settings::None,
        read: observe::read_nfsstat,
        namespace: "nfs",
        counter_name: observe::nfs_counter,
        derived: observe::NFSSTAT_DERIVED,
    },
    ObserverDef {
        name: "mountstats",
        command: "cat /proc/self/mountstats",
        settings: Settings::Mount,
        read: observe::read_mountstats,
        namespace: "mountstats",
        counter_name: observe::mountstats_counter,
        derived: &[],
    },
    ObserverDef {
        name: "proc_net",
        command: "cat /proc/net/snmp /proc/net/netstat",
        settings: Settings::None,
        read: observe::read_procnet,
        namespace: "netstat",
        counter_name: observe::netstat_counter,
        derived: observe::NETSTAT_DERIVED,
    },
    ObserverDef {
        name: "proc_rpc_nfs",
        command: "cat /proc/net/rpc/nfs",
        settings: Settings::None,
        read: observe::read_procrpcnfs,
        namespace: "nfs",
        counter_name: observe::nfs_counter,
        derived: observe::NFSSTAT_DERIVED,
    },
    ObserverDef {
        name: "proc_sctp",
        command: "cat /proc/net/sctp/snmp",
        settings: Settings::None,
        read: sctpsnmp::observe,
        namespace: "sctp",
        counter_name: sctpsnmp::counter_name,
        derived: sctpsnmp::DERIVED,
    },
];

use serde::{Deserialize, Serialize};
use std::fmt;

/// The tool whose output a parser expected; carried by [`ParseError`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Tool {
    /// GNU `time` (`/usr/bin/time`), see [`gnutime`].
    GnuTime,
    /// `netstat -s` from net-tools, see [`netstat`].
    Netstat,
    /// `nfsstat` from nfs-utils, see [`nfsstat`].
    Nfsstat,
    /// `/proc/self/mountstats`, see [`mountstats`].
    Mountstats,
    /// Raw `/proc/net/snmp` and `/proc/net/netstat`, see [`procnet`].
    ProcNet,
    /// Raw `/proc/net/rpc/nfs`, see [`procrpcnfs`].
    ProcRpcNfs,
    /// `/proc/net/sctp/snmp`, see [`sctpsnmp`].
    ProcSctp,
}

impl fmt::Display for Tool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Tool::GnuTime => "GNU time",
            Tool::Netstat => "netstat -s",
            Tool::Nfsstat => "nfsstat",
            Tool::Mountstats => "/proc/self/mountstats",
            Tool::ProcNet => "/proc/net/snmp or /proc/net/netstat",
            Tool::ProcRpcNfs => "/proc/net/rpc/nfs",
            Tool::ProcSctp => "/proc/net/sctp/snmp",
        })
    }
}

/// Why a text could not be parsed as the expected tool's output at all.
///
/// Only raised for input that is not that tool's output: anything merely
/// unusual is reported through the result's `unknown` field instead.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    /// The input is empty or contains only whitespace.
    #[error("{tool}: input is empty")]
    Empty {
        /// The tool whose output was expected.
        tool: Tool,
    },
    /// The input has text, but nothing in it looks like the tool's report
    /// (no GNU time resource line, no `netstat -s` section header, no
    /// `nfsstat` table title).
    #[error("{tool}: no recognised report in {lines} non-blank line(s); first line: {first_line:?}")]
    NotRecognised {
        /// The tool whose output was expected.
        tool: Tool,
        /// Number of non-blank lines in the input.
        lines: usize,
        /// The first non-blank line, trimmed, to help identify what was captured instead.
        first_line: String,
    },
    /// A line of a positional format (each value named by its position) cannot
    /// be attributed safely: its number of values differs from the names or
    /// count it must match, it belongs to another section than the header
    /// above it, or a value is not a number (see [`procnet`], [`procrpcnfs`]).
    #[error("{tool}: line {line}: {reason}")]
    Malformed {
        /// The tool whose output was expected.
        tool: Tool,
        /// 1-based line number in the input (blank lines counted).
        line: usize,
        /// What is wrong, naming the section or tag of the line.
        reason: String,
    },
}

/// Non-blank lines of `input`, with any trailing `\r` removed (the text may come
/// from a serial console). Leading whitespace is preserved because the
/// indentation is meaningful for `netstat -s`.
pub(crate) fn nonblank_lines(input: &str) -> impl Iterator<Item = &str> {
    input.lines().map(|l| l.strip_suffix('\r').unwrap_or(l)).filter(|l| !l.trim().is_empty())
}

/// Builds the error for input with no recognisable report.
pub(crate) fn not_recognised(tool: Tool, input: &str) -> ParseError {
    let mut lines = nonblank_lines(input);
    match lines.next() {
        None => ParseError::Empty { tool },
        Some(first) => {
            ParseError::NotRecognised { tool, lines: 1 + lines.count(), first_line: first.trim().to_string() }
        }
    }
}

/// Normalises free text into a key fragment: lowercase ASCII words joined by `_`,
/// with every run of non-alphanumeric characters collapsed into one `_`.
/// `placeholder` (e.g. `"%u"`) is replaced by an upper-case `N` so that the
/// number's position stays visible (`"Quick ack mode was activated N times"` →
/// `quick_ack_mode_was_activated_N_times`).
pub(crate) fn text_key(text: &str, placeholder: &str) -> String {
    let mut out = String::new();
    for word in text.split_whitespace() {
        let piece = if word == placeholder { "N".to_string() } else { word.to_ascii_lowercase() };
        for ch in piece.chars() {
            if ch.is_ascii_alphanumeric() {
                out.push(ch);
            } else if !out.ends_with('_') {
                out.push('_');
            }
        }
        if !out.ends_with('_') {
            out.push('_');
        }
    }
    out.trim_matches('_').to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_key_marks_number_and_collapses_punctuation() {
        assert_eq!(text_key("Quick ack mode was activated %u times", "%u"), "quick_ack_mode_was_activated_N_times");
        assert_eq!(text_key("%u packets to unknown port received.", "%u"), "N_packets_to_unknown_port_received");
        assert_eq!(text_key("  out-of-window  ICMPs ", "%u"), "out_of_window_icmps");
    }

    #[test]
    fn not_recognised_distinguishes_empty_from_foreign_text() {
        assert_eq!(not_recognised(Tool::Netstat, " \n\r\n"), ParseError::Empty { tool: Tool::Netstat });
        assert_eq!(
            not_recognised(Tool::Nfsstat, "\nhello\r\nworld\n"),
            ParseError::NotRecognised { tool: Tool::Nfsstat, lines: 2, first_line: "hello".into() }
        );
    }
}
