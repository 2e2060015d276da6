//! Parser for the raw kernel files `/proc/net/snmp` and `/proc/net/netstat`,
//! which `netstat -s` (see [`super::netstat`]) and iproute2's `nstat` read.
//!
//! Both files have the same shape: every section is a **header line** of
//! field names followed by a **value line** with one value per name, each
//! line starting with the section name and a colon:
//!
//! ```text
//! Ip: Forwarding DefaultTTL InReceives InHdrErrors … ReasmFails FragOKs FragFails FragCreates OutTransmits
//! Ip: 2 64 16999 0 … 0 0 0 0 8724
//! Tcp: RtoAlgorithm RtoMin RtoMax MaxConn ActiveOpens …
//! Tcp: 1 200 120000 -1 25 …
//! TcpExt: SyncookiesSent SyncookiesRecv …
//! TcpExt: 0 0 …
//! ```
//!
//! Source: `net/ipv4/proc.c` in Linux (`snmp_seq_show_ipstats`, `icmp_put`,
//! `icmpmsg_put`, `snmp_seq_show_tcp_udp`, `netstat_seq_show`; `MPTcpExt` comes
//! from `mptcp_seq_show` in `net/mptcp/mib.c`); Linux 2.4 printed the same
//! shape with `sprintf` in `snmp_get_info`/`netstat_get_info`. What changed
//! over the years is only *which* names appear, which is why this parser takes
//! every name from its header line and has no table of its own:
//!
//! * Linux 2.6.0 era: `/proc/net/snmp` has `Ip` (19 fields, from `Forwarding`
//!   to `FragCreates`), `Icmp` (26, no `InCsumErrors`), `Tcp` (14, `RtoAlgorithm`
//!   to `OutRsts`) and `Udp` (4: `InDatagrams NoPorts InErrors OutDatagrams`);
//!   `/proc/net/netstat` has only `TcpExt` (`SyncookiesSent` …
//!   `TCPMemoryPressures`, including `TCPPrequeued`, `TCPLoss`, …).
//! * Later kernels add fields (`Udp: RcvbufErrors SndbufErrors`, `InCsumErrors`,
//!   `Ip: OutTransmits`, many `TcpExt` fields, some `TcpExt` fields dropped)
//!   and sections (`IcmpMsg`, `UdpLite`, `IpExt`, `MPTcpExt`). The development
//!   host's Linux 6.18 capture in the fixtures shows the current lists.
//! * `IcmpMsg` lists only the ICMP types seen so far (`InType3 OutType0`), in
//!   pairs of lines of at most 16 fields each (`PERLINE` in `icmpmsg_put`), so
//!   the section can appear several times; its pairs are merged.
//!
//! Input may be one file or both concatenated (`cat /proc/net/snmp
//! /proc/net/netstat`), with `\n` or `\r\n` line ends; trailing blanks are
//! ignored, and a line must start with its section name. `/proc/net/snmp6` (one `Name value` per line)
//! and `nstat`'s own output are different formats and are not parsed here.
//!
//! **Names** are the canonical `Section.Field` names that [`NetstatS::flat`]
//! produces for `netstat -s` (`Ip.ReasmFails`, `Tcp.RetransSegs`,
//! `TcpExt.TCPLossProbes`), so the `netstat` and `proc_net` observers (`crate::measure::observer`) name both sources'
//! counters `netstat.<Section>.<Field>` alike. A field name this parser has
//! never heard of is simply kept: there is no list to be unknown to.
//!
//! **Values** are the kernel's cumulative counters, printed with `%lu` (`u64`
//! here), except a few printed with `%ld`: `Tcp: MaxConn` is `-1` on every
//! Linux ("no fixed limit", RFC 2012), and `Ip: Forwarding`/`DefaultTTL` are
//! printed with `%d`. Values with a minus sign are kept in
//! [`ProcNetSnmp::negative`] as `i64`, not wrapped to a huge `u64` (which would
//! turn `-1` into 18446744073709551615 and make deltas meaningless), and not
//! dropped. Some 2.5-era kernels printed `MaxConn` with `%lu`, so there it
//! arrives as 4294967295 or 18446744073709551615 and lands in `sections`
//! unchanged.
//!
//! **Errors.** Because a value's name is only its position, a pair that does
//! not line up would silently give counters the wrong names, so these are
//! errors ([`ParseError::Malformed`], naming the line number and section):
//!
//! * a value line with more or fewer values than its header has names;
//! * a value line whose section differs from the header line just above it;
//! * a value that is not an integer (or does not fit in 64 bits).
//!
//! Everything else odd is kept in [`ProcNetSnmp::unknown`]:
//!
//! * lines that do not start with `Section:` (text output, the indented lines
//!   of `netstat -s`);
//! * a header line with no value line after it (this includes foreign lines
//!   that merely look like one, e.g. `cat: /proc/net/netstat: No such file or
//!   directory`);
//! * a value line with no header line before it;
//! * both lines of a pair that repeats a field already seen in its section
//!   (e.g. a file captured twice; the first value is kept).
//!
//! [`ParseError::Empty`] and [`ParseError::NotRecognised`] are returned when
//! there is no complete header/value pair at all.
//!
//! [`NetstatS::flat`]: super::NetstatS::flat

use super::{not_recognised, ParseError, Tool};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// Parsed `/proc/net/snmp` and/or `/proc/net/netstat`, see the [module docs](self).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcNetSnmp {
    /// Section name as printed without the colon (`"Ip"`, `"TcpExt"`,
    /// `"IcmpMsg"`, …) → field name from the header line → value, for every
    /// value printed without a minus sign. Every section that had a complete
    /// pair is present, even if all its values are in [`negative`](Self::negative).
    pub sections: BTreeMap<String, BTreeMap<String, u64>>,
    /// Section → field → value for the values printed with a minus sign
    /// (in practice only `Tcp` → `MaxConn` → `-1`). A field is in exactly one
    /// of `sections` and `negative`.
    pub negative: BTreeMap<String, BTreeMap<String, i64>>,
    /// Non-blank lines (trimmed) that are not part of a complete pair: lines
    /// without a `Section:` prefix at the start, header lines with no value
    /// line after them, value lines with no header line before them, and both
    /// lines of a pair that repeats an already-seen field.
    pub unknown: Vec<String>,
}

impl ProcNetSnmp {
    /// Value of the counter `key` written `Section.Field`, e.g.
    /// `get("Ip.ReasmFails")`. `None` if absent or negative (see
    /// [`get_signed`](Self::get_signed)).
    ///
    /// Used by the integration tests (not by the runner).
    #[cfg_attr(vmrepro_dead_code, allow(dead_code))]
    pub fn get(&self, key: &str) -> Option<u64> {
        let (section, field) = key.split_once('.')?;
        self.sections.get(section)?.get(field).copied()
    }

    /// Value of `key` (`Section.Field`) as a signed number, whether it was
    /// printed with a minus sign (`get_signed("Tcp.MaxConn") == Some(-1)`) or
    /// not. `None` if absent or above `i64::MAX`.
    ///
    /// Used by the integration tests (not by the runner).
    #[cfg_attr(vmrepro_dead_code, allow(dead_code))]
    pub fn get_signed(&self, key: &str) -> Option<i64> {
        let (section, field) = key.split_once('.')?;
        if let Some(v) = self.negative.get(section).and_then(|f| f.get(field)) {
            return Some(*v);
        }
        i64::try_from(self.get(key)?).ok()
    }

    /// Whether a complete pair of `section` was read.
    ///
    /// Used by the integration tests (not by the runner).
    #[cfg_attr(vmrepro_dead_code, allow(dead_code))]
    pub fn has_section(&self, section: &str) -> bool {
        self.sections.contains_key(section)
    }

    /// All non-negative counters as one map keyed `Section.Field`, the same
    /// keys as [`NetstatS::flat`](super::NetstatS::flat). Values in
    /// [`negative`](Self::negative) are not included.
    pub fn flat(&self) -> BTreeMap<String, u64> {
        self.sections.iter().flat_map(|(s, fields)| fields.iter().map(move |(f, v)| (format!("{s}.{f}"), *v))).collect()
    }
}

/// A header line waiting for its value line.
struct Header<'a> {
    line_no: usize,
    text: &'a str,
    section: &'a str,
    names: Vec<&'a str>,
}

/// Parses `/proc/net/snmp`, `/proc/net/netstat` or both concatenated (see the
/// [module docs](self)).
///
/// Returns [`ParseError::Malformed`] for a value line that cannot be matched
/// to its header, [`ParseError::Empty`] for blank input and
/// [`ParseError::NotRecognised`] when there is no complete header/value pair.
pub fn parse(input: &str) -> Result<ProcNetSnmp, ParseError> {
    let mut out = ProcNetSnmp::default();
    let mut pending: Option<Header> = None;

    for (index, raw) in input.lines().enumerate() {
        let line_no = index + 1;
        let line = raw.trim();
        if line.is_empty() {
            continue;
        }
        // The kernel starts every line with its section name; an indented
        // `Name: value` line is `netstat -s` layout, not part of a pair.
        let section_line = if raw.starts_with(char::is_whitespace) { None } else { split_section(line) };
        let Some((section, rest)) = section_line else {
            if let Some(h) = pending.take() {
                out.unknown.push(h.text.to_string());
            }
            out.unknown.push(line.to_string());
            continue;
        };
        let tokens: Vec<&str> = rest.split_whitespace().collect();
        let is_value_line = tokens.first().is_some_and(|t| t.starts_with(|c: char| c.is_ascii_digit() || c == '-'));
        if !is_value_line {
            let header = Header { line_no, text: line, section, names: tokens };
            if let Some(h) = pending.replace(header) {
                out.unknown.push(h.text.to_string());
            }
            continue;
        }

        let malformed = |reason: String| ParseError::Malformed { tool: Tool::ProcNet, line: line_no, reason };
        let Some(header) = pending.take() else {
            // No header, so no names to misattribute: kept as text.
            out.unknown.push(line.to_string());
            continue;
        };
        if header.section != section {
            return Err(malformed(format!(
                "value line of section `{section}` follows the header of section `{}` (line {})",
                header.section, header.line_no
            )));
        }
        if header.names.len() != tokens.len() {
            return Err(malformed(format!(
                "section `{section}`: the header on line {} has {} names but this value line has {} values",
                header.line_no,
                header.names.len(),
                tokens.len()
            )));
        }
        let mut values = Vec::with_capacity(tokens.len());
        for (name, token) in header.names.iter().zip(&tokens) {
            let value = parse_value(token).ok_or_else(|| {
                malformed(format!("section `{section}`: value {token:?} of field `{name}` is not a 64-bit integer"))
            })?;
            values.push(value);
        }
        store(&mut out, &header, line, values);
    }
    if let Some(h) = pending.take() {
        out.unknown.push(h.text.to_string());
    }
    if out.sections.is_empty() {
        return Err(not_recognised(Tool::ProcNet, input));
    }
    Ok(out)
}

/// A parsed value: non-negative, or printed with a minus sign.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Value {
    Unsigned(u64),
    Negative(i64),
}

fn parse_value(token: &str) -> Option<Value> {
    let digits = token.strip_prefix('-').unwrap_or(token);
    if digits.is_empty() || !digits.chars().all(|c| c.is_ascii_digit()) {
        return None;
    }
    if token.starts_with('-') {
        let v: i64 = token.parse().ok()?;
        Some(if v < 0 { Value::Negative(v) } else { Value::Unsigned(0) })
    } else {
        token.parse().ok().map(Value::Unsigned)
    }
}

/// Files one complete pair, or keeps both its lines in `unknown` if it
/// repeats a field (within itself or already stored for its section).
fn store(out: &mut ProcNetSnmp, header: &Header, value_line: &str, values: Vec<Value>) {
    let section = header.section;
    let seen = |name: &str| {
        out.sections.get(section).is_some_and(|f| f.contains_key(name))
            || out.negative.get(section).is_some_and(|f| f.contains_key(name))
    };
    let mut names = BTreeSet::new();
    let repeats = header.names.iter().any(|n| !names.insert(*n) || seen(n));
    if repeats {
        out.unknown.push(header.text.to_string());
        out.unknown.push(value_line.to_string());
        return;
    }
    let fields = out.sections.entry(section.to_string()).or_default();
    let mut negative = BTreeMap::new();
    for (name, value) in header.names.iter().zip(values) {
        match value {
            Value::Unsigned(v) => {
                fields.insert(name.to_string(), v);
            }
            Value::Negative(v) => {
                negative.insert(name.to_string(), v);
            }
        }
    }
    if !negative.is_empty() {
        out.negative.entry(section.to_string()).or_default().extend(negative);
    }
}

/// Splits `Section: rest` where `Section` is a letter followed by letters,
/// digits or `_`, and the colon is followed by a blank or the end of line.
fn split_section(line: &str) -> Option<(&str, &str)> {
    let (section, rest) = line.split_once(':')?;
    let ok = section.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
        && section.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        && (rest.is_empty() || rest.starts_with(char::is_whitespace));
    ok.then_some((section, rest))
}

#[cfg(test)]
mod tests {
    use super::*;

    const IP: &str = "Ip: Forwarding DefaultTTL InReceives ReasmTimeout ReasmReqds ReasmOKs ReasmFails\n\
                      Ip: 2 64 9000 12 300 40 25\n";

    #[test]
    fn header_value_pair() {
        let p = parse(IP).unwrap();
        assert_eq!(p.get("Ip.ReasmFails"), Some(25));
        assert_eq!(p.get("Ip.ReasmReqds"), Some(300));
        assert_eq!(p.get("Ip.ReasmOKs"), Some(40));
        assert_eq!(p.get("Ip.Forwarding"), Some(2));
        assert_eq!(p.sections["Ip"].len(), 7);
        assert!(p.unknown.is_empty() && p.negative.is_empty());
        assert_eq!(p.flat().get("Ip.ReasmTimeout"), Some(&12));
    }

    #[test]
    fn negative_values_are_kept_signed() {
        let p = parse("Tcp: RtoAlgorithm RtoMin RtoMax MaxConn ActiveOpens\r\nTcp: 1 200 120000 -1 25\r\n").unwrap();
        assert_eq!(p.get("Tcp.MaxConn"), None);
        assert_eq!(p.get_signed("Tcp.MaxConn"), Some(-1));
        assert_eq!(p.get_signed("Tcp.ActiveOpens"), Some(25));
        assert_eq!(p.negative["Tcp"]["MaxConn"], -1);
        assert!(!p.flat().contains_key("Tcp.MaxConn"));
        assert_eq!(p.flat().len(), 4);
    }

    #[test]
    fn u64_range_and_bad_values() {
        assert_eq!(parse_value("18446744073709551615"), Some(Value::Unsigned(u64::MAX)));
        assert_eq!(parse_value("18446744073709551616"), None);
        assert_eq!(parse_value("-9223372036854775808"), Some(Value::Negative(i64::MIN)));
        assert_eq!(parse_value("-0"), Some(Value::Unsigned(0)));
        for bad in ["", "-", "1.5", "12a", "+3", "0x10"] {
            assert_eq!(parse_value(bad), None, "{bad:?}");
        }
        let err = parse("Udp: InDatagrams NoPorts\nUdp: 5 7x\n").unwrap_err();
        assert_eq!(
            err.to_string(),
            "/proc/net/snmp or /proc/net/netstat: line 2: section `Udp`: value \"7x\" of field `NoPorts` is not a 64-bit integer"
        );
    }

    #[test]
    fn count_mismatch_names_line_and_section() {
        let more_names = "\nIp: Forwarding DefaultTTL InReceives\nIp: 2 64\n";
        assert_eq!(
            parse(more_names),
            Err(ParseError::Malformed {
                tool: Tool::ProcNet,
                line: 3,
                reason: "section `Ip`: the header on line 2 has 3 names but this value line has 2 values".into(),
            })
        );
        let more_values = format!("{IP}Udp: InDatagrams\nUdp: 1 2\n");
        assert!(matches!(parse(&more_values), Err(ParseError::Malformed { line: 4, .. })));
    }

    #[test]
    fn section_mismatch_is_an_error_orphan_values_are_kept() {
        let err = parse("Ip: Forwarding\nTcp: 1\n").unwrap_err();
        assert_eq!(
            err.to_string(),
            "/proc/net/snmp or /proc/net/netstat: line 2: value line of section `Tcp` follows the header of section `Ip` (line 1)"
        );
        let p = parse(&format!("{IP}Ip: 2 64\n  Udp: InDatagrams\n  Udp: 3\n")).unwrap();
        assert_eq!(p.unknown, vec!["Ip: 2 64", "Udp: InDatagrams", "Udp: 3"]);
        assert_eq!(p.get("Ip.DefaultTTL"), Some(64));
        assert!(!p.has_section("Udp"), "indented lines are not /proc lines");
    }

    #[test]
    fn unknown_fields_repeated_sections_and_foreign_lines() {
        let text = "cat: /proc/net/netstat: No such file or directory\n\
                    IcmpMsg: InType3 OutType3\nIcmpMsg: 4 5\nIcmpMsg: InType8\nIcmpMsg: 6\n\
                    FutureExt: BrandNewCounter\nFutureExt: 77\n\
                    TcpExt: SyncookiesSent\n\
                    IcmpMsg: InType3\nIcmpMsg: 9\n";
        let p = parse(text).unwrap();
        assert_eq!(p.get("IcmpMsg.InType3"), Some(4), "first value of a repeated field is kept");
        assert_eq!(p.get("IcmpMsg.OutType3"), Some(5));
        assert_eq!(p.get("IcmpMsg.InType8"), Some(6));
        assert_eq!(p.get("FutureExt.BrandNewCounter"), Some(77));
        assert!(!p.has_section("TcpExt"));
        assert_eq!(
            p.unknown,
            vec![
                "cat: /proc/net/netstat: No such file or directory",
                "TcpExt: SyncookiesSent",
                "IcmpMsg: InType3",
                "IcmpMsg: 9",
            ]
        );
    }

    #[test]
    fn rejects_foreign_input() {
        assert_eq!(parse("\n \n"), Err(ParseError::Empty { tool: Tool::ProcNet }));
        let snmp6 = "Ip6InReceives                   \t17\nIp6InHdrErrors                  \t0\n";
        assert!(matches!(parse(snmp6), Err(ParseError::NotRecognised { lines: 2, .. })));
        assert!(matches!(parse("Ip: Forwarding DefaultTTL\n"), Err(ParseError::NotRecognised { .. })));
        let netstat_s = "Ip:\n    Forwarding: 2\n    16999 total packets received\n";
        assert!(matches!(parse(netstat_s), Err(ParseError::NotRecognised { .. })));
    }
}
