//! Rules for `net.egress` (tc-netem parameters).
//!
//! The values go unquoted into `tc qdisc … netem …` in the guest, so each one is held to
//! a strict form (a plain decimal number and a unit: no exponent, sign, `inf` or `nan`)
//! and to a range netem can run with.

use crate::schema::text::shown;
use crate::schema::NetemSpec;

use super::ValidationError;

/// Longest `delay` and `jitter`, seconds. Beyond a minute every TCP handshake and RPC
/// retransmission in the guests times out; no experiment of this kind needs more.
pub const MAX_DELAY_S: f64 = 60.0;
/// Slowest `rate`, bit/s (1 kbit: a 1500-byte packet every 12 s).
pub const MIN_RATE_BIT: f64 = 1e3;
/// Fastest `rate`, bit/s (100 gbit: beyond any virtual NIC, so it would limit nothing;
/// leave `rate` out instead).
pub const MAX_RATE_BIT: f64 = 100e9;
/// netem's queue `limit`, packets. 0 makes netem drop every packet (it is not "no
/// limit"); a million packets of 1500 bytes is 1.5 GB, more than any guest's memory.
pub const LIMIT: std::ops::RangeInclusive<u32> = 1..=1_000_000;

/// A plain decimal number and the text after it: `"1.5ms"` → `(1.5, "ms")`. `None`
/// when there is no such number (a sign, `inf`, `nan`, a leading space, too many
/// digits); an exponent or a space after the digits stays in the text
/// (`"1e3ms"` → `(1, "e3ms")`), which the callers' unit match then refuses.
fn number_and_unit(v: &str) -> Option<(f64, &str)> {
    let end = v.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(v.len());
    let (num, unit) = v.split_at(end);
    let mut parts = num.split('.');
    let whole = parts.next()?;
    let frac = parts.next();
    // At most 12 digits before the point and 6 after: more is a mistake, and the text
    // goes verbatim into the tc command.
    if whole.is_empty()
        || parts.next().is_some()
        || frac.is_some_and(|f| f.is_empty() || f.len() > 6)
        || whole.len() > 12
    {
        return None;
    }
    Some((num.parse().ok()?, unit))
}

/// The percentage `v` (`"1%"`, `"0.5%"`) if well-formed and in 0–100.
fn percent(v: &str) -> Option<f64> {
    number_and_unit(v).filter(|(n, u)| *u == "%" && (0.0..=100.0).contains(n)).map(|(n, _)| n)
}

/// The time `v` in seconds (`"5ms"`) if well-formed.
fn seconds(v: &str) -> Option<f64> {
    let (n, unit) = number_and_unit(v)?;
    let scale = match unit {
        "us" => 1e-6,
        "ms" => 1e-3,
        "s" => 1.0,
        _ => return None,
    };
    Some(n * scale)
}

/// The rate `v` in bit/s (`"100mbit"`) if well-formed.
fn bits_per_second(v: &str) -> Option<f64> {
    let (n, unit) = number_and_unit(v)?;
    let scale = match unit {
        "bit" => 1.0,
        "kbit" => 1e3,
        "mbit" => 1e6,
        "gbit" => 1e9,
        _ => return None,
    };
    Some(n * scale)
}

/// Checks the netem parameters `e` at key path `k`.
pub(super) fn check_netem(errs: &mut Vec<ValidationError>, k: &str, e: &NetemSpec) {
    let mut bad = |field: &str, v: &str, what: &str| {
        errs.push(ValidationError::Rule {
            key: format!("{k}.{field}"),
            message: format!("{} is not {what}", shown(v, 40)),
        })
    };
    for (field, v) in [("loss", &e.loss), ("reorder", &e.reorder), ("duplicate", &e.duplicate)] {
        if let Some(v) = v {
            if percent(v).is_none() {
                bad(field, v, "a percentage from 0% to 100% (e.g. \"1%\")");
            }
        }
    }
    for (field, v) in [("delay", &e.delay), ("jitter", &e.jitter)] {
        if let Some(v) = v {
            match seconds(v) {
                None => bad(field, v, "a time: a number and a unit us, ms or s (e.g. \"5ms\")"),
                Some(s) if s > MAX_DELAY_S => bad(field, v, "a time netem can run with: at most 60s"),
                Some(_) => {}
            }
        }
    }
    if let Some(v) = &e.rate {
        match bits_per_second(v) {
            None => bad("rate", v, "a rate: a number and a unit bit, kbit, mbit or gbit (e.g. \"100mbit\")"),
            Some(r) if !(MIN_RATE_BIT..=MAX_RATE_BIT).contains(&r) => {
                bad("rate", v, "a rate netem can run with: from 1kbit to 100gbit (leave `rate` out for no limit)")
            }
            Some(_) => {}
        }
    }
    if let Some(l) = e.limit {
        if !LIMIT.contains(&l) {
            errs.push(ValidationError::OutOfRange {
                key: format!("{k}.limit"),
                value: format!("{l} packets"),
                range: format!(
                    "{} to {} packets; 0 makes netem drop every packet, and leaving it out keeps netem's 1000",
                    LIMIT.start(),
                    LIMIT.end()
                ),
            });
        }
    }
    if e.reorder.is_some() && e.delay.is_none() {
        errs.push(ValidationError::Rule {
            key: format!("{k}.reorder"),
            message: "netem reorders only delayed packets: give `delay` too".into(),
        });
    }
    if e.seed.is_some() && e.loss.is_none() && e.reorder.is_none() && e.duplicate.is_none() && e.jitter.is_none() {
        errs.push(ValidationError::Rule {
            key: format!("{k}.seed"),
            message: "`seed` seeds netem's random loss, reordering, duplication or jitter: give one of them".into(),
        });
    }
    if e.jitter.is_some() && e.delay.is_none() {
        errs.push(ValidationError::Rule { key: format!("{k}.jitter"), message: "`jitter` needs `delay`".into() });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strict_numbers() {
        assert_eq!(percent("1%"), Some(1.0));
        assert_eq!(percent("0.5%"), Some(0.5));
        assert_eq!(seconds("5ms"), Some(0.005));
        assert_eq!(bits_per_second("30mbit"), Some(30e6));
        for bad in ["1e400ms", "infms", "NaNms", "+5ms", "-5ms", "5 ms", ".5ms", "5.ms", "1.2.3ms", "ms", "5", "5sec"] {
            assert_eq!(seconds(bad), None, "{bad}");
        }
        assert_eq!(seconds("1.0000001ms"), None);
        for bad in ["1e999gbit", "infgbit", "0x10mbit", "9999999999999gbit"] {
            assert_eq!(bits_per_second(bad), None, "{bad}");
        }
        for bad in ["101%", "1", "nan%", "1e1%", "-1%"] {
            assert_eq!(percent(bad), None, "{bad}");
        }
    }
}
