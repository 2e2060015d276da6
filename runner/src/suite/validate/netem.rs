//! Rules for `net.egress` (tc-netem parameters).

use crate::suite::spec::NetemSpec;

use super::ValidationError;

fn is_percent(v: &str) -> bool {
    v.strip_suffix('%').and_then(|n| n.parse::<f64>().ok()).is_some_and(|n| (0.0..=100.0).contains(&n))
}

fn is_tc_time(v: &str) -> bool {
    let num = v.trim_end_matches(|c: char| c.is_ascii_alphabetic());
    let unit = &v[num.len()..];
    num.parse::<f64>().is_ok_and(|n| n >= 0.0) && matches!(unit, "us" | "ms" | "s")
}

fn is_tc_rate(v: &str) -> bool {
    let num = v.trim_end_matches(|c: char| c.is_ascii_alphabetic());
    let unit = &v[num.len()..];
    num.parse::<f64>().is_ok_and(|n| n > 0.0) && matches!(unit, "bit" | "kbit" | "mbit" | "gbit")
}

/// Checks the netem parameters `e` at key path `k`.
pub(super) fn check_netem(errs: &mut Vec<ValidationError>, k: &str, e: &NetemSpec) {
    let mut bad = |field: &str, v: &str, what: &str| {
        errs.push(ValidationError::Rule { key: format!("{k}.{field}"), message: format!("{v:?} is not {what}") })
    };
    for (field, v) in [("loss", &e.loss), ("reorder", &e.reorder), ("duplicate", &e.duplicate)] {
        if let Some(v) = v {
            if !is_percent(v) {
                bad(field, v, "a percentage between 0% and 100% (e.g. \"1%\")");
            }
        }
    }
    for (field, v) in [("delay", &e.delay), ("jitter", &e.jitter)] {
        if let Some(v) = v {
            if !is_tc_time(v) {
                bad(field, v, "a time with a unit us, ms or s (e.g. \"5ms\")");
            }
        }
    }
    if let Some(v) = &e.rate {
        if !is_tc_rate(v) {
            bad("rate", v, "a rate with a unit bit, kbit, mbit or gbit (e.g. \"100mbit\")");
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
