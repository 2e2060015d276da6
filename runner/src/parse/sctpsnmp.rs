//! Parser for the SCTP counters file `/proc/net/sctp/snmp` (the `sctp` module loaded),
//! and the `proc_sctp` observer that reads it.
//!
//! Source: `sctp_snmp_seq_show` in Linux `net/sctp/proc.c`, one line per counter of
//! its `sctp_snmp_list`, printed `"%-32s\t%ld\n"` (name padded to 32 columns, a tab,
//! the value), the same format from Linux 2.6.x to 6.x:
//!
//! ```text
//! (→ is the tab)
//! SctpCurrEstab                   →1
//! SctpActiveEstabs                →1
//! SctpT3Retransmits               →4
//! ```
//!
//! The list grew over the years: Linux 2.6.1x prints 17 counters (`SctpCurrEstab` …
//! `SctpInSCTPPacks`), Linux 6.1 prints 32 (the timer expiries `SctpT1InitExpireds` …
//! `SctpAutocloseExpireds`, `SctpT3Retransmits`, `SctpPmtudRetransmits`,
//! `SctpFastRetransmits`, `SctpInPktSoftirq`, `SctpInPktBacklog`, `SctpInPktDiscards`,
//! `SctpInDataChunkDiscards`). Names are kept as the kernel prints them, so a counter
//! a kernel does not have is absent, not zero.
//!
//! Lines are never dropped: a line that is not `<name> <value>` with a whole number,
//! or that repeats a name, is kept in [`SctpSnmp::unknown`].

use std::collections::btree_map::Entry;
use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::observe::{counter, DerivedMetric, Observation, Scope};
use super::{nonblank_lines, not_recognised, ParseError, Tool};

/// Parsed `/proc/net/sctp/snmp`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SctpSnmp {
    /// Counter name as the kernel prints it (`SctpT3Retransmits`) → value (cumulative
    /// since the module loaded; `SctpCurrEstab` is a current count).
    pub counters: BTreeMap<String, u64>,
    /// Lines that are not a counter, trimmed.
    pub unknown: Vec<String>,
}

/// Parses the contents of `/proc/net/sctp/snmp` (see the [module docs](self)).
///
/// Returns [`ParseError::Empty`] for blank input and [`ParseError::NotRecognised`]
/// when no line is an SCTP counter (`Sctp<Name> <value>`).
pub fn parse(input: &str) -> Result<SctpSnmp, ParseError> {
    let mut out = SctpSnmp::default();
    for line in nonblank_lines(input) {
        let line = line.trim();
        let mut tokens = line.split_whitespace();
        let counter = match (tokens.next(), tokens.next(), tokens.next()) {
            (Some(name), Some(value), None)
                if name.starts_with("Sctp") && name.chars().all(|c| c.is_ascii_alphanumeric()) =>
            {
                value.parse::<u64>().ok().map(|v| (name, v))
            }
            _ => None,
        };
        match counter.map(|(name, v)| (out.counters.entry(name.to_string()), v)) {
            Some((Entry::Vacant(slot), v)) => {
                slot.insert(v);
            }
            _ => out.unknown.push(line.to_string()),
        }
    }
    if out.counters.is_empty() {
        return Err(not_recognised(Tool::ProcSctp, input));
    }
    Ok(out)
}

/// The `proc_sctp` observer's reading: counters `sctp.<Name>` (`sctp.SctpT3Retransmits`),
/// group `sctp`.
pub(super) fn observe(text: &str, _: Option<&Scope>) -> Result<Observation, ParseError> {
    Ok(Observation::named("sctp", parse(text)?.counters))
}

/// `sctp.<Name>`: the kernel's names all start with `Sctp`.
pub(super) fn counter_name(parts: &[&str]) -> Result<(), String> {
    match parts {
        [_, name] if name.starts_with("Sctp") => Ok(()),
        _ => {
            Err("SCTP counters are sctp.<Name>, the name as /proc/net/sctp/snmp prints it (sctp.SctpT3Retransmits)"
                .into())
        }
    }
}

/// Derived metrics of `proc_sctp` observations (unknown on kernels without the counter).
pub(super) const DERIVED: &[DerivedMetric] = &[
    counter(
        "sctp_t3_retransmissions",
        "SCTP DATA chunks retransmitted after the T3-rtx timer expired",
        "sctp.SctpT3Retransmits",
        None,
    ),
    counter("sctp_fast_retransmissions", "SCTP DATA chunks fast-retransmitted", "sctp.SctpFastRetransmits", None),
    counter("sctp_checksum_errors", "SCTP packets received with a bad checksum", "sctp.SctpChecksumErrors", None),
];

#[cfg(test)]
mod tests {
    use super::*;

    const LINUX_6_1: &str = include_str!("../../tests/fixtures/parse/sctpsnmp/linux-6.1-modelled-one-association.txt");

    #[test]
    fn reads_every_counter_of_a_6_1_kernel() {
        let s = parse(LINUX_6_1).unwrap();
        assert_eq!(s.counters.len(), 32, "{:?}", s.unknown);
        assert!(s.unknown.is_empty());
        assert_eq!(s.counters["SctpCurrEstab"], 1);
        assert_eq!(s.counters["SctpT3Retransmits"], 4);
        assert_eq!(s.counters["SctpInDataChunkDiscards"], 0);
        let o = observe(LINUX_6_1, None).unwrap();
        assert_eq!(o.counters["sctp.SctpOutSCTPPacks"], s.counters["SctpOutSCTPPacks"]);
        assert!(o.groups.contains("sctp"));
    }

    #[test]
    fn keeps_odd_lines_and_refuses_other_files() {
        let s = parse("SctpCurrEstab \t-1\nSctpAborteds\t2\nSctpAborteds\t3\nnot a counter\n").unwrap();
        assert_eq!(s.counters, BTreeMap::from([("SctpAborteds".to_string(), 2)]));
        assert_eq!(s.unknown, ["SctpCurrEstab \t-1", "SctpAborteds\t3", "not a counter"]);
        assert_eq!(parse(" \n"), Err(ParseError::Empty { tool: Tool::ProcSctp }));
        assert!(matches!(parse("Ip: Forwarding DefaultTTL\nIp: 1 64\n"), Err(ParseError::NotRecognised { .. })));
    }

    #[test]
    fn derived_metrics_are_deltas_of_the_kernel_counters() {
        let before = observe(LINUX_6_1, None).unwrap();
        let text: String = LINUX_6_1
            .lines()
            .map(
                |l| if l.starts_with("SctpT3Retransmits") { "SctpT3Retransmits\t9\n".into() } else { format!("{l}\n") },
            )
            .collect();
        let after = observe(&text, None).unwrap();
        let t3 = DERIVED.iter().find(|d| d.name == "sctp_t3_retransmissions").unwrap();
        assert_eq!(t3.compute(&before, &after), Some(5));
        assert!(counter_name(&["sctp", "SctpT3Retransmits"]).is_ok());
        assert!(counter_name(&["sctp", "T3", "x"]).is_err());
    }
}
