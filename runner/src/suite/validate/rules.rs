//! Rules shared by the checks of several keys: names, ranges, timeouts, exit statuses,
//! per-VM verdict overrides.

use std::time::Duration;

use super::{limits, ValidationError};

/// Whether `s` is a suite or VM name: `[a-z][a-z0-9-]*`, at most 32 characters.
pub(crate) fn is_name(s: &str) -> bool {
    let mut c = s.chars();
    matches!(c.next(), Some('a'..='z'))
        && c.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && s.len() <= 32
}

/// Whether `s` is a step name: `[a-z0-9][a-z0-9_-]*`, at most 48 characters.
pub(super) fn is_step_name(s: &str) -> bool {
    let mut c = s.chars();
    matches!(c.next(), Some('a'..='z' | '0'..='9'))
        && c.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_')
        && s.len() <= 48
}

/// Checks `v` against `r`; `unit` (e.g. `" MiB"`) follows the numbers in the message.
pub(crate) fn range<T: PartialOrd + std::fmt::Display>(
    errs: &mut Vec<ValidationError>,
    key: &str,
    v: T,
    r: &std::ops::RangeInclusive<T>,
    unit: &str,
) {
    if !r.contains(&v) {
        errs.push(ValidationError::OutOfRange {
            key: key.into(),
            value: format!("{v}{unit}"),
            range: format!("{} to {}{unit}", r.start(), r.end()),
        });
    }
}

/// Checks a `verdict:` block at `key`: `alpha` and `floor` within their limits (a NaN
/// or an infinity is out of every range).
pub(crate) fn verdict_spec(errs: &mut Vec<ValidationError>, key: &str, v: &crate::schema::measure::VerdictSpec) {
    if let Some(a) = v.alpha {
        range(errs, &format!("{key}.alpha"), a, &limits::ALPHA, "");
    }
    if let Some(f) = v.floor {
        range(errs, &format!("{key}.floor"), f, &limits::FLOOR, "");
    }
}

/// Checks a per-VM map of snapshot verdict overrides at `key` (`key.<vm>` per entry):
/// every VM must be one of `compared` (the measured VMs, in order) and not the
/// baselines (`baselines`, else the first of `compared`), which have no verdict.
pub(crate) fn verdict_overrides<V>(
    errs: &mut Vec<ValidationError>,
    key: &str,
    overrides: &std::collections::BTreeMap<String, V>,
    compared: &[String],
    baselines: &[&str],
) {
    let first: Vec<&str> = compared.first().map(String::as_str).into_iter().collect();
    let baselines = if baselines.is_empty() { &first } else { baselines };
    for vm in overrides.keys() {
        let key = format!("{key}.{vm}");
        if !compared.contains(vm) {
            errs.push(ValidationError::Rule {
                key,
                message: format!(
                    "{} is not one of the compared VMs ({}){}",
                    crate::schema::text::shown(vm, 80),
                    compared.join(", "),
                    crate::schema::text::non_ascii_hint(vm)
                ),
            });
        } else if baselines.contains(&vm.as_str()) {
            errs.push(ValidationError::Rule {
                key,
                message: format!(
                    "{} is the baseline, which has no verdict of its own; name a VM compared with it",
                    crate::schema::text::shown(vm, 80)
                ),
            });
        }
    }
}

/// Checks an expected exit status: a process's status is one byte.
pub(crate) fn exit_status(errs: &mut Vec<ValidationError>, key: &str, e: i32) {
    if !limits::EXIT_STATUS.contains(&e) {
        errs.push(ValidationError::OutOfRange {
            key: key.into(),
            value: e.to_string(),
            range: "0 to 255; an exit status is one byte, and a command killed by signal N exits 128+N".into(),
        });
    }
}

/// Checks a timeout against [`limits::TIMEOUT`].
pub(crate) fn duration(errs: &mut Vec<ValidationError>, key: &str, t: Duration) {
    if !limits::TIMEOUT.contains(&t) {
        errs.push(ValidationError::OutOfRange {
            key: key.into(),
            value: format_duration(t),
            range: "1s to 24h".into(),
        });
    }
}

/// A duration as a user would write it: whole days, hours or minutes when exact
/// (`1000d`, not humantime's `2years 8months 25days 23h 31m 12s`).
fn format_duration(t: Duration) -> String {
    let s = t.as_secs();
    if t.subsec_nanos() != 0 || s == 0 {
        return humantime::format_duration(t).to_string();
    }
    for (unit, secs) in [("d", 86400), ("h", 3600), ("m", 60)] {
        if s % secs == 0 {
            return format!("{}{unit}", s / secs);
        }
    }
    format!("{s}s")
}
