//! Parser for `netstat -s` (net-tools) output.
//!
//! `netstat -s` reads `/proc/net/snmp` (sections `Ip`, `Icmp`, `IcmpMsg`, `Tcp`,
//! `Udp`, `UdpLite`) and `/proc/net/netstat` (`TcpExt`, `IpExt`, `MPTcpExt`, …),
//! where every section is a header line of field names followed by a line of
//! values, and prints one line per field (source: net-tools `statistics.c`):
//!
//! ```text
//! Ip:
//!     6235 total packets received
//!     620 packet reassembles failed
//! Icmp:
//!     0 ICMP messages received
//!     ICMP input histogram:
//!         destination unreachable: 2
//! IcmpMsg:
//!         InType3: 2
//! TcpExt:
//!     TCPPureAcks: 1
//! ```
//!
//! Each field is printed in one of three forms:
//!
//! 1. **Text form**: a sentence from net-tools' table with the value in it
//!    (`620 packet reassembles failed`, `Quick ack mode was activated 4 times`,
//!    `destination unreachable: 2` inside an ICMP histogram). Zero values of many
//!    fields ("opt_number") are not printed at all.
//! 2. **Name form** `<Field>: <value>` for fields net-tools has no text for, or
//!    whose table lookup fails (its tables are not sorted the way its `bsearch`
//!    expects, which is why net-tools 2.10 prints `Forwarding: 2` and
//!    `TCPSackRecovery: 1`). net-tools 1.60 prints these even when zero, 2.10
//!    only when non-zero. Whole sections net-tools does not know (`IcmpMsg`,
//!    `IpExt`, `UdpLite`, `MPTcpExt`) are entirely in this form.
//! 3. Two **histogram sub-headers** in `Icmp:` (`ICMP input histogram:`,
//!    `ICMP output histogram:`) that decide whether `echo replies: 3` means
//!    `InEchoReps` or `OutEchoReps`.
//!
//! Supported wordings: net-tools **1.60** (2001, `statistics.c` v1.14, the
//! version in 2002–2004 distributions: `packet reassembles failed`, `segments
//! send out`, `segments retransmited`, `active connections openings`, `bad
//! segments received.`, …) and net-tools **2.10** (Debian bookworm, same tables
//! as `statistics.c` v1.23: `packet reassemblies failed`, `segments sent out`,
//! `segments retransmitted`, …). Both map to the same **canonical names**: the
//! `/proc/net/snmp` or `/proc/net/netstat` field the line came from, written
//! `Section.Field` (`Ip.ReasmFails`, `Tcp.RetransSegs`, `Udp.InErrors`, …).
//!
//! Lines are never dropped: a numeric line whose wording is not in the table is
//! kept under a key derived from its text (see [`NetstatS::sections`]), anything
//! else goes to [`NetstatS::unknown`].

use super::{nonblank_lines, not_recognised, text_key, ParseError, Tool};
use serde::{Deserialize, Serialize};
use std::collections::btree_map::Entry as Slot;
use std::collections::BTreeMap;

/// Parsed `netstat -s` output.
///
/// Values are the cumulative kernel counters at the time `netstat` ran
/// (since boot), as unsigned 64-bit integers.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NetstatS {
    /// Section title as printed without the colon (`"Ip"`, `"TcpExt"`,
    /// `"MPTcpExt"`, …) → field key → value. A section that was printed without
    /// any line (e.g. `UdpLite:` when all its counters are zero on 2.10) is
    /// present with an empty map.
    ///
    /// Field keys are:
    /// * the canonical `/proc` field name (`"ReasmFails"`) for text-form lines
    ///   whose wording is known and for all name-form lines (`"InType3"`);
    /// * `"~<normalised text>"` for numeric text lines with unknown wording,
    ///   the number replaced by `N`: `"~N_widgets_frobnicated"`. Inside an ICMP
    ///   histogram the key is prefixed with `in:`/`out:` (`"~in:N_foo"`).
    pub sections: BTreeMap<String, BTreeMap<String, u64>>,
    /// Non-blank lines (trimmed) that could not be parsed: text before the first
    /// section header, error messages (`error parsing /proc/net/snmp: …`),
    /// lines with no or several numbers, a second line for a key already seen
    /// in the same section.
    pub unknown: Vec<String>,
}

impl NetstatS {
    /// Value of the counter `key` written `Section.Field`, e.g.
    /// `get("Ip.ReasmFails")`. `None` when the section or field was not printed
    /// — which for many fields means "zero" (see the [module docs](self)).
    ///
    /// Used by the integration tests (not by the runner).
    #[cfg_attr(vmrepro_dead_code, allow(dead_code))]
    pub fn get(&self, key: &str) -> Option<u64> {
        let (section, field) = key.split_once('.')?;
        self.sections.get(section)?.get(field).copied()
    }

    /// Whether a section header `section:` was printed.
    ///
    /// Used by the integration tests (not by the runner).
    #[cfg_attr(vmrepro_dead_code, allow(dead_code))]
    pub fn has_section(&self, section: &str) -> bool {
        self.sections.contains_key(section)
    }

    /// All counters as one map keyed `Section.Field`.
    pub fn flat(&self) -> BTreeMap<String, u64> {
        self.sections.iter().flat_map(|(s, fields)| fields.iter().map(move |(f, v)| (format!("{s}.{f}"), *v))).collect()
    }
}

/// Which ICMP histogram sub-block a line is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Hist {
    None,
    In,
    Out,
}

/// `(section, histogram, field, wordings)`; `%u` marks the value. Wordings of
/// net-tools 1.60 (`statistics.c` v1.14) and 2.10 (v1.23 tables).
type Entry = (&'static str, Hist, &'static str, &'static [&'static str]);

#[rustfmt::skip]
const TABLE: &[Entry] = &[
    // ---- /proc/net/snmp "Ip:" ----
    ("Ip", Hist::None, "DefaultTTL", &["Default TTL is %u"]),
    ("Ip", Hist::None, "InReceives", &["%u total packets received"]),
    ("Ip", Hist::None, "InHdrErrors", &["%u with invalid headers"]),
    ("Ip", Hist::None, "InAddrErrors", &["%u with invalid addresses"]),
    ("Ip", Hist::None, "ForwDatagrams", &["%u forwarded"]),
    ("Ip", Hist::None, "InUnknownProtos", &["%u with unknown protocol"]),
    ("Ip", Hist::None, "InDiscards", &["%u incoming packets discarded"]),
    ("Ip", Hist::None, "InDelivers", &["%u incoming packets delivered"]),
    ("Ip", Hist::None, "OutRequests", &["%u requests sent out"]),
    ("Ip", Hist::None, "OutDiscards", &["%u outgoing packets dropped"]),
    ("Ip", Hist::None, "OutNoRoutes", &["%u dropped because of missing route"]),
    ("Ip", Hist::None, "ReasmTimeout", &["%u fragments dropped after timeout"]),
    ("Ip", Hist::None, "ReasmReqds", &["%u reassemblies required"]),
    ("Ip", Hist::None, "ReasmOKs", &["%u packets reassembled ok"]),
    ("Ip", Hist::None, "ReasmFails", &["%u packet reassembles failed", "%u packet reassemblies failed"]),
    // 1.60 calls the *outgoing* fragmentation counters "fragments received ok"/"fragments failed".
    ("Ip", Hist::None, "FragOKs", &["%u fragments received ok", "%u outgoing packets fragmented ok"]),
    ("Ip", Hist::None, "FragFails", &["%u fragments failed", "%u outgoing packets failed fragmentation"]),
    ("Ip", Hist::None, "FragCreates", &["%u fragments created"]),
    // ---- "Icmp:" ----
    ("Icmp", Hist::None, "InMsgs", &["%u ICMP messages received"]),
    ("Icmp", Hist::None, "InErrors", &["%u input ICMP message failed.", "%u input ICMP message failed"]),
    ("Icmp", Hist::None, "OutMsgs", &["%u ICMP messages sent"]),
    ("Icmp", Hist::None, "OutErrors", &["%u ICMP messages failed"]),
    ("Icmp", Hist::In, "InDestUnreachs", &["destination unreachable: %u"]),
    ("Icmp", Hist::In, "InTimeExcds", &["timeout in transit: %u"]),
    ("Icmp", Hist::In, "InParmProbs", &["wrong parameters: %u"]),
    ("Icmp", Hist::In, "InSrcQuenchs", &["source quenches: %u"]),
    ("Icmp", Hist::In, "InRedirects", &["redirects: %u"]),
    ("Icmp", Hist::In, "InEchos", &["echo requests: %u"]),
    ("Icmp", Hist::In, "InEchoReps", &["echo replies: %u"]),
    ("Icmp", Hist::In, "InTimestamps", &["timestamp request: %u"]),
    ("Icmp", Hist::In, "InTimestampReps", &["timestamp reply: %u"]),
    ("Icmp", Hist::In, "InAddrMasks", &["address mask request: %u"]),
    ("Icmp", Hist::In, "InAddrMaskReps", &["address mask replies: %u"]),
    ("Icmp", Hist::Out, "OutDestUnreachs", &["destination unreachable: %u"]),
    ("Icmp", Hist::Out, "OutTimeExcds", &["time exceeded: %u"]),
    ("Icmp", Hist::Out, "OutParmProbs", &["wrong parameters: %u"]),
    ("Icmp", Hist::Out, "OutSrcQuenchs", &["source quench: %u"]),
    ("Icmp", Hist::Out, "OutRedirects", &["redirect: %u"]),
    ("Icmp", Hist::Out, "OutEchos", &["echo request: %u", "echo requests: %u"]),
    ("Icmp", Hist::Out, "OutEchoReps", &["echo replies: %u"]),
    ("Icmp", Hist::Out, "OutTimestamps", &["timestamp requests: %u"]),
    ("Icmp", Hist::Out, "OutTimestampReps", &["timestamp replies: %u"]),
    ("Icmp", Hist::Out, "OutAddrMasks", &["address mask requests: %u"]),
    ("Icmp", Hist::Out, "OutAddrMaskReps", &["address mask replies: %u"]),
    // ---- "Tcp:" ----
    ("Tcp", Hist::None, "ActiveOpens", &["%u active connections openings", "%u active connection openings"]),
    ("Tcp", Hist::None, "PassiveOpens", &["%u passive connection openings"]),
    ("Tcp", Hist::None, "AttemptFails", &["%u failed connection attempts"]),
    ("Tcp", Hist::None, "EstabResets", &["%u connection resets received"]),
    ("Tcp", Hist::None, "CurrEstab", &["%u connections established"]),
    ("Tcp", Hist::None, "InSegs", &["%u segments received"]),
    ("Tcp", Hist::None, "OutSegs", &["%u segments send out", "%u segments sent out"]),
    ("Tcp", Hist::None, "RetransSegs", &["%u segments retransmited", "%u segments retransmitted"]),
    ("Tcp", Hist::None, "InErrs", &["%u bad segments received.", "%u bad segments received"]),
    ("Tcp", Hist::None, "OutRsts", &["%u resets sent"]),
    // ---- "Udp:" ----
    ("Udp", Hist::None, "InDatagrams", &["%u packets received"]),
    ("Udp", Hist::None, "NoPorts", &["%u packets to unknown port received.", "%u packets to unknown port received"]),
    ("Udp", Hist::None, "InErrors", &["%u packet receive errors"]),
    ("Udp", Hist::None, "OutDatagrams", &["%u packets sent"]),
    ("Udp", Hist::None, "RcvbufErrors", &["%u receive buffer errors"]),
    ("Udp", Hist::None, "SndbufErrors", &["%u send buffer errors"]),
    // ---- /proc/net/netstat "TcpExt:" ----
    ("TcpExt", Hist::None, "SyncookiesSent", &["%u SYN cookies sent"]),
    ("TcpExt", Hist::None, "SyncookiesRecv", &["%u SYN cookies received"]),
    ("TcpExt", Hist::None, "SyncookiesFailed", &["%u invalid SYN cookies received"]),
    ("TcpExt", Hist::None, "EmbryonicRsts", &["%u resets received for embryonic SYN_RECV sockets"]),
    ("TcpExt", Hist::None, "PruneCalled", &["%u packets pruned from receive queue because of socket buffer overrun"]),
    ("TcpExt", Hist::None, "RcvPruned", &["%u packets pruned from receive queue"]),
    ("TcpExt", Hist::None, "OfoPruned", &["%u packets dropped from out-of-order queue because of socket buffer overrun"]),
    ("TcpExt", Hist::None, "OutOfWindowIcmps", &["%u ICMP packets dropped because they were out-of-window"]),
    ("TcpExt", Hist::None, "LockDroppedIcmps", &["%u ICMP packets dropped because socket was locked"]),
    ("TcpExt", Hist::None, "TW", &["%u TCP sockets finished time wait in fast timer"]),
    ("TcpExt", Hist::None, "TWRecycled", &["%u time wait sockets recycled by time stamp"]),
    ("TcpExt", Hist::None, "TWKilled", &["%u TCP sockets finished time wait in slow timer"]),
    ("TcpExt", Hist::None, "PAWSPassive", &["%u passive connections rejected because of time stamp"]),
    ("TcpExt", Hist::None, "PAWSActive", &["%u active connections rejected because of time stamp"]),
    ("TcpExt", Hist::None, "PAWSEstab", &[
        "%u packets rejects in established connections because of timestamp",
        "%u packetes rejected in established connections because of timestamp",
        "%u packets rejected in established connections because of timestamp",
    ]),
    ("TcpExt", Hist::None, "DelayedACKs", &["%u delayed acks sent"]),
    ("TcpExt", Hist::None, "DelayedACKLocked", &["%u delayed acks further delayed because of locked socket"]),
    ("TcpExt", Hist::None, "DelayedACKLost", &["Quick ack mode was activated %u times"]),
    ("TcpExt", Hist::None, "ListenOverflows", &["%u times the listen queue of a socket overflowed"]),
    ("TcpExt", Hist::None, "ListenDrops", &["%u SYNs to LISTEN sockets ignored", "%u SYNs to LISTEN sockets dropped"]),
    ("TcpExt", Hist::None, "TCPPrequeued", &["%u packets directly queued to recvmsg prequeue.", "%u packets directly queued to recvmsg prequeue"]),
    ("TcpExt", Hist::None, "TCPDirectCopyFromBacklog", &["%u packets directly received from backlog", "%u bytes directly in process context from backlog"]),
    ("TcpExt", Hist::None, "TCPDirectCopyFromPrequeue", &["%u packets directly received from prequeue", "%u bytes directly received in process context from prequeue"]),
    ("TcpExt", Hist::None, "TCPPrequeueDropped", &["%u packets dropped from prequeue"]),
    ("TcpExt", Hist::None, "TCPHPHits", &["%u packets header predicted", "%u packet headers predicted"]),
    ("TcpExt", Hist::None, "TCPHPHitsToUser", &["%u packets header predicted and directly queued to user", "%u packet headers predicted and directly queued to user"]),
    ("TcpExt", Hist::None, "SockMallocOOM", &["Ran %u times out of system memory during packet sending"]),
    ("TcpExt", Hist::None, "TCPPureAcks", &["%u acknowledgments not containing data payload received"]),
    ("TcpExt", Hist::None, "TCPHPAcks", &["%u predicted acknowledgments"]),
    ("TcpExt", Hist::None, "TCPRenoRecovery", &["%u times recovered from packet loss due to fast retransmit"]),
    ("TcpExt", Hist::None, "TCPSackRecovery", &["%u times recovered from packet loss by selective acknowledgements"]),
    ("TcpExt", Hist::None, "TCPSACKReneging", &["%u bad SACK blocks received"]),
    ("TcpExt", Hist::None, "TCPFACKReorder", &["Detected reordering %u times using FACK"]),
    ("TcpExt", Hist::None, "TCPSACKReorder", &["Detected reordering %u times using SACK"]),
    ("TcpExt", Hist::None, "TCPRenoReorder", &["Detected reordering %u times using reno fast retransmit"]),
    ("TcpExt", Hist::None, "TCPTSReorder", &["Detected reordering %u times using time stamp"]),
    ("TcpExt", Hist::None, "TCPFullUndo", &["%u congestion windows fully recovered without slow start"]),
    ("TcpExt", Hist::None, "TCPPartialUndo", &["%u congestion windows partially recovered using Hoe heuristic"]),
    ("TcpExt", Hist::None, "TCPDSACKUndo", &["%u congestion windows recovered without slow start by DSACK"]),
    ("TcpExt", Hist::None, "TCPLossUndo", &["%u congestion windows recovered without slow start after partial ack"]),
    ("TcpExt", Hist::None, "TCPLoss", &["%u TCP data loss events"]),
    ("TcpExt", Hist::None, "TCPRenoFailures", &["%u timeouts after reno fast retransmit"]),
    ("TcpExt", Hist::None, "TCPSackFailures", &["%u timeouts after SACK recovery"]),
    ("TcpExt", Hist::None, "TCPLossFailures", &["%u timeouts in loss state"]),
    ("TcpExt", Hist::None, "TCPFastRetrans", &["%u fast retransmits"]),
    ("TcpExt", Hist::None, "TCPForwardRetrans", &["%u forward retransmits"]),
    ("TcpExt", Hist::None, "TCPSlowStartRetrans", &["%u retransmits in slow start"]),
    ("TcpExt", Hist::None, "TCPTimeouts", &["%u other TCP timeouts"]),
    ("TcpExt", Hist::None, "TCPRenoRecoveryFail", &["%u classic Reno fast retransmits failed"]),
    ("TcpExt", Hist::None, "TCPSackRecoveryFail", &["%u SACK retransmits failed"]),
    ("TcpExt", Hist::None, "TCPSchedulerFailed", &["%u times receiver scheduled too late for direct processing"]),
    ("TcpExt", Hist::None, "TCPRcvCollapsed", &["%u packets collapsed in receive queue due to low socket buffer"]),
    ("TcpExt", Hist::None, "TCPDSACKOldSent", &["%u DSACKs sent for old packets"]),
    ("TcpExt", Hist::None, "TCPDSACKOfoSent", &["%u DSACKs sent for out of order packets"]),
    ("TcpExt", Hist::None, "TCPDSACKRecv", &["%u DSACKs received"]),
    ("TcpExt", Hist::None, "TCPDSACKOfoRecv", &["%u DSACKs for out of order packets received"]),
    ("TcpExt", Hist::None, "TCPAbortOnSyn", &["%u connections reset due to unexpected SYN"]),
    ("TcpExt", Hist::None, "TCPAbortOnData", &["%u connections reset due to unexpected data"]),
    ("TcpExt", Hist::None, "TCPAbortOnClose", &["%u connections reset due to early user close"]),
    ("TcpExt", Hist::None, "TCPAbortOnMemory", &["%u connections aborted due to memory pressure"]),
    ("TcpExt", Hist::None, "TCPAbortOnTimeout", &["%u connections aborted due to timeout"]),
    ("TcpExt", Hist::None, "TCPAbortOnLinger", &["%u connections aborted after user close in linger timeout"]),
    ("TcpExt", Hist::None, "TCPAbortFailed", &["%u times unable to send RST due to no memory"]),
    ("TcpExt", Hist::None, "TCPMemoryPressures", &["TCP ran low on memory %u times"]),
];

/// The canonical field name for a text-form line of `section` (e.g. `"Ip"`,
/// `"Icmp"`), given its wording with the number replaced by `%u` and
/// whitespace collapsed to single spaces. `histogram` is `Some(true)` inside
/// `ICMP input histogram:`, `Some(false)` inside `ICMP output histogram:`.
///
/// ```
/// use vmrepro::parse::netstat::canonical_field;
/// assert_eq!(canonical_field("Ip", "%u packet reassembles failed", None), Some("ReasmFails"));
/// assert_eq!(canonical_field("Ip", "%u packet reassemblies failed", None), Some("ReasmFails"));
/// assert_eq!(canonical_field("Icmp", "echo replies: %u", Some(false)), Some("OutEchoReps"));
/// assert_eq!(canonical_field("Tcp", "%u widgets", None), None);
/// ```
///
/// Used by the doctest above and the integration tests (not by the runner).
#[cfg_attr(vmrepro_dead_code, allow(dead_code))]
pub fn canonical_field(section: &str, wording: &str, histogram: Option<bool>) -> Option<&'static str> {
    let hist = match histogram {
        None => Hist::None,
        Some(true) => Hist::In,
        Some(false) => Hist::Out,
    };
    lookup(section, hist, wording).or_else(|| lookup(section, Hist::None, wording))
}

fn lookup(section: &str, hist: Hist, wording: &str) -> Option<&'static str> {
    TABLE
        .iter()
        .find(|(s, h, _, texts)| *s == section && *h == hist && texts.contains(&wording))
        .map(|(_, _, field, _)| *field)
}

/// Parses `netstat -s` output (see the [module docs](self)).
///
/// Returns [`ParseError::Empty`] for blank input and
/// [`ParseError::NotRecognised`] when there is no section header (`Ip:`,
/// `Tcp:`, …) at all.
pub fn parse(input: &str) -> Result<NetstatS, ParseError> {
    let mut out = NetstatS::default();
    let mut section: Option<String> = None;
    let mut hist = Hist::None;

    for raw in nonblank_lines(input) {
        let line = raw.trim();
        let indent = raw.len() - raw.trim_start().len();

        // Section header: unindented single word ending in ':' (`Ip:`, `MPTcpExt:`).
        if indent == 0 && is_section_header(line) {
            let name = line.trim_end_matches(':').to_string();
            out.sections.entry(name.clone()).or_default();
            section = Some(name);
            hist = Hist::None;
            continue;
        }
        let Some(sec) = section.as_deref() else {
            out.unknown.push(line.to_string());
            continue;
        };
        match line {
            "ICMP input histogram:" => {
                hist = Hist::In;
                continue;
            }
            "ICMP output histogram:" => {
                hist = Hist::Out;
                continue;
            }
            _ => {}
        }
        // Histogram entries are indented deeper than the section's own lines.
        if hist != Hist::None && indent < 8 {
            hist = Hist::None;
        }
        match classify(sec, hist, line) {
            Some((key, value)) => match out.sections.entry(sec.to_string()).or_default().entry(key) {
                Slot::Occupied(_) => out.unknown.push(line.to_string()),
                Slot::Vacant(slot) => {
                    slot.insert(value);
                }
            },
            None => out.unknown.push(line.to_string()),
        }
    }
    if out.sections.is_empty() {
        return Err(not_recognised(Tool::Netstat, input));
    }
    Ok(out)
}

fn is_section_header(line: &str) -> bool {
    match line.strip_suffix(':') {
        Some(name) => {
            !name.is_empty()
                && name.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        }
        None => false,
    }
}

/// Maps one trimmed line to `(key, value)`, or `None` if it is not a counter line.
fn classify(section: &str, hist: Hist, line: &str) -> Option<(String, u64)> {
    let tokens: Vec<&str> = line.split_whitespace().collect();
    let numeric: Vec<usize> = (0..tokens.len()).filter(|&i| is_number(tokens[i])).collect();
    if numeric.len() != 1 {
        return classify_static(section, line);
    }
    let at = numeric[0];
    let wording = tokens.iter().enumerate().map(|(i, t)| if i == at { "%u" } else { t }).collect::<Vec<_>>().join(" ");
    let value = parse_value(tokens[at])?;

    if let Some(field) = lookup(section, hist, &wording).or_else(|| lookup(section, Hist::None, &wording)) {
        return Some((field.to_string(), value));
    }
    // Name form: `<Field>: <value>`.
    if tokens.len() == 2 && at == 1 {
        if let Some(name) = tokens[0].strip_suffix(':') {
            if !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                return Some((name.to_string(), value));
            }
        }
    }
    // Numeric line with unfamiliar wording: key derived from the text.
    let prefix = match hist {
        Hist::None => "",
        Hist::In => "in:",
        Hist::Out => "out:",
    };
    Some((format!("~{prefix}{}", text_key(&wording, "%u")), value))
}

/// Static lines without a number that still carry a value: `Forwarding is enabled`.
fn classify_static(section: &str, line: &str) -> Option<(String, u64)> {
    // net-tools prints "enabled" when the raw /proc value is 2 (which RFC 1213
    // defines as "not forwarding"); map back to the raw value it was printed from.
    match (section, line) {
        ("Ip", "Forwarding is enabled") => Some(("Forwarding".into(), 2)),
        ("Ip", "Forwarding is disabled") => Some(("Forwarding".into(), 1)),
        _ => None,
    }
}

fn is_number(token: &str) -> bool {
    let digits = token.strip_prefix('-').unwrap_or(token);
    !digits.is_empty() && digits.chars().all(|c| c.is_ascii_digit())
}

/// Parses a printed value. net-tools 1.60 prints name-form values with `%d` of a
/// 32-bit `int`, so counters above 2^31 appear negative; they are mapped back to
/// the unsigned 32-bit value that was read from `/proc`.
fn parse_value(token: &str) -> Option<u64> {
    match token.strip_prefix('-') {
        None => token.parse().ok(),
        Some(_) => {
            let v: i64 = token.parse().ok()?;
            (v >= -(1i64 << 31)).then(|| (v + (1i64 << 32)) as u64)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn old_and_new_wordings_share_canonical_names() {
        let old = "Ip:\n    620 packet reassembles failed\nTcp:\n    6 segments send out\n    0 segments retransmited\n    0 bad segments received.\nUdp:\n    0 packets to unknown port received.\n";
        let new = "Ip:\n    620 packet reassemblies failed\nTcp:\n    6 segments sent out\n    0 segments retransmitted\n    0 bad segments received\nUdp:\n    0 packets to unknown port received\n";
        let (a, b) = (parse(old).unwrap(), parse(new).unwrap());
        assert_eq!(a, b);
        assert_eq!(a.get("Ip.ReasmFails"), Some(620));
        assert_eq!(a.get("Tcp.OutSegs"), Some(6));
        assert_eq!(a.get("Tcp.InErrs"), Some(0));
        assert_eq!(a.get("Udp.NoPorts"), Some(0));
        assert!(a.unknown.is_empty());
    }

    #[test]
    fn icmp_histograms_disambiguate_and_end_on_dedent() {
        let text = "Icmp:\n    3 ICMP messages received\n    ICMP input histogram:\n        echo replies: 1\n        redirects: 2\n    5 ICMP messages sent\n    ICMP output histogram:\n        echo replies: 4\nIcmpMsg:\n        InType0: 1\n";
        let n = parse(text).unwrap();
        assert_eq!(n.get("Icmp.InEchoReps"), Some(1));
        assert_eq!(n.get("Icmp.InRedirects"), Some(2));
        assert_eq!(n.get("Icmp.OutMsgs"), Some(5));
        assert_eq!(n.get("Icmp.OutEchoReps"), Some(4));
        assert_eq!(n.get("IcmpMsg.InType0"), Some(1));
    }

    #[test]
    fn name_form_unknown_wording_and_garbage() {
        let text = "junk before\nTcpExt:\n    TCPLossProbes: 3\n    12 widgets frobnicated\n    ArpFilter: -1294967296\n    a 1 b 2\n    no number here\n    TCPLossProbes: 4\nUdpLite:\n";
        let n = parse(text).unwrap();
        assert_eq!(n.get("TcpExt.TCPLossProbes"), Some(3));
        assert_eq!(n.get("TcpExt.~N_widgets_frobnicated"), Some(12));
        assert_eq!(n.get("TcpExt.ArpFilter"), Some(3_000_000_000));
        assert!(n.has_section("UdpLite") && n.sections["UdpLite"].is_empty());
        assert_eq!(n.unknown, vec!["junk before", "a 1 b 2", "no number here", "TCPLossProbes: 4"]);
    }

    #[test]
    fn static_lines_and_flat_view() {
        let n = parse("Ip:\n    Forwarding is disabled\n    Default TTL is 64\n").unwrap();
        assert_eq!(n.get("Ip.Forwarding"), Some(1));
        assert_eq!(n.flat().get("Ip.DefaultTTL"), Some(&64));
    }

    #[test]
    fn errors() {
        assert_eq!(parse("\n\n"), Err(ParseError::Empty { tool: Tool::Netstat }));
        assert!(matches!(
            parse("netstat: no support for `AF INET (tcp)' on this system.\n"),
            Err(ParseError::NotRecognised { lines: 1, .. })
        ));
    }

    #[test]
    fn table_has_no_ambiguous_wording() {
        for (i, a) in TABLE.iter().enumerate() {
            for b in &TABLE[i + 1..] {
                if a.0 == b.0 && a.1 == b.1 {
                    for t in a.3 {
                        assert!(!b.3.contains(t), "{t:?} maps to both {} and {}", a.2, b.2);
                    }
                }
                assert!(!(a.0 == b.0 && a.2 == b.2), "duplicate entry {}.{}", a.0, a.2);
            }
        }
    }
}
