//! Rules of `measure[].metric`: a number the measured command prints.

use super::{guest, ValidationError};
use crate::measure::analysis::OUTCOME_METRIC;
use crate::measure::observer::derived_metrics;
use crate::plan::measurement::ObserverKind;
use crate::plan::DEFAULT_OUTPUT_METRIC;
use crate::schema::measure::{MeasureSpec, MetricFrom};
use crate::schema::text::{non_ascii_hint, shown};

/// Most bytes of a `json` pointer or a `regex`.
const MAX_PATTERN_BYTES: usize = 512;
/// Most characters of a `unit`.
const MAX_UNIT_CHARS: usize = 24;
/// Metric names the measurement layer gives itself.
const RESERVED: &[&str] = &["elapsed_s", "user_s", "system_s", "throughput_mb_s", OUTCOME_METRIC];

/// The name `m`'s output metric takes (`None`: no `metric:`).
pub(super) fn name(m: &MeasureSpec) -> Option<&str> {
    m.metric.as_ref().map(|o| o.name.as_deref().unwrap_or(DEFAULT_OUTPUT_METRIC))
}

/// Checks `m.metric` (key path `k`) and how `better` goes with it.
pub(super) fn check(errs: &mut Vec<ValidationError>, m: &MeasureSpec, k: &str) {
    let Some(o) = &m.metric else { return };
    let key = format!("{k}.metric");
    let rule = |errs: &mut Vec<ValidationError>, key: String, message: String| {
        errs.push(ValidationError::Rule { key, message })
    };
    if let Some(n) = &o.name {
        check_name(errs, &format!("{key}.name"), n);
    }
    match (&o.json, &o.regex) {
        (Some(_), Some(_)) | (None, None) => {
            rule(errs, key.clone(), "give exactly one of `json` (a JSON pointer) or `regex` (one capture group)".into())
        }
        (Some(p), None) => check_pointer(errs, &format!("{key}.json"), p),
        (None, Some(re)) => check_regex(errs, &format!("{key}.regex"), re),
    }
    if let Some(MetricFrom::File(path)) = &o.from {
        if let Some(why) = guest::path_problem(path, guest::MAX_PATH_BYTES) {
            rule(errs, format!("{key}.from.file"), format!("{} {why}", shown(path, 80)));
        }
    }
    if let Some(u) = &o.unit {
        check_unit(errs, &format!("{key}.unit"), u);
    }
    let compared = m.compare.as_deref().is_none_or(|c| Some(c) == name(m));
    if compared && m.better.is_some() {
        rule(
            errs,
            format!("{k}.better"),
            "the verdict compares `metric`, whose direction is its own `better`: move `better` into `metric`".into(),
        );
    }
}

/// `[a-z][a-z0-9_]*`, at most 32 characters, none of the layer's own metric names.
fn check_name(errs: &mut Vec<ValidationError>, key: &str, n: &str) {
    let mut c = n.chars();
    let shaped = matches!(c.next(), Some('a'..='z'))
        && c.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        && n.len() <= 32;
    let derived = derived_metrics(ObserverKind::all());
    let message = if !shaped {
        format!(
            "{} can't name a metric: use lowercase letters, digits and '_', starting with a letter, at most 32 characters{}",
            shown(n, 80),
            non_ascii_hint(n)
        )
    } else if RESERVED.contains(&n) || derived.contains_key(n) {
        format!("{n} is a metric the measurement already has; name this one differently (e.g. iops, bits_per_second)")
    } else {
        return;
    };
    errs.push(ValidationError::Rule { key: key.into(), message });
}

/// An RFC 6901 pointer: empty (the whole document) or `/`-separated tokens, `~` only
/// as `~0` or `~1`.
fn check_pointer(errs: &mut Vec<ValidationError>, key: &str, p: &str) {
    let bad_tilde = p.match_indices('~').any(|(i, _)| !matches!(p.as_bytes().get(i + 1), Some(b'0' | b'1')));
    let why = if p.len() > MAX_PATTERN_BYTES {
        format!("is {} bytes; at most {MAX_PATTERN_BYTES}", p.len())
    } else if !p.is_empty() && !p.starts_with('/') {
        format!("{} is not a JSON pointer: it starts with '/' (e.g. /jobs/0/read/iops)", shown(p, 80))
    } else if bad_tilde {
        format!("{} is not a JSON pointer: '~' is written ~0 and '/' inside a name ~1", shown(p, 80))
    } else if p.chars().any(char::is_control) {
        "holds a control character".into()
    } else {
        return;
    };
    errs.push(ValidationError::Rule { key: key.into(), message: why });
}

/// A regular expression that compiles (bounded) and has exactly one capture group.
fn check_regex(errs: &mut Vec<ValidationError>, key: &str, re: &str) {
    let why = if re.len() > MAX_PATTERN_BYTES {
        format!("is {} bytes; at most {MAX_PATTERN_BYTES}", re.len())
    } else {
        match crate::measure::output_metric::compile(re) {
            Err(e) => e.to_string(),
            Ok(r) if r.captures_len() != 2 => format!(
                "{} has {} capture groups; it needs exactly one, around the number (e.g. 'failures: ([0-9]+)'; write other groups as (?:…))",
                shown(re, 80),
                r.captures_len() - 1
            ),
            Ok(_) => return,
        }
    };
    errs.push(ValidationError::Rule { key: key.into(), message: why });
}

/// A short printable unit (`IOPS`, `bit/s`, `files/s`).
fn check_unit(errs: &mut Vec<ValidationError>, key: &str, u: &str) {
    if u.trim().is_empty() || u.chars().count() > MAX_UNIT_CHARS || u.chars().any(|c| c.is_control()) {
        errs.push(ValidationError::Rule {
            key: key.into(),
            message: format!(
                "{} is not a unit: 1 to {MAX_UNIT_CHARS} printable characters (IOPS, bit/s)",
                shown(u, 80)
            ),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::measure::OutputMetricSpec;

    fn errors(o: OutputMetricSpec, better: bool) -> Vec<String> {
        let spec: MeasureSpec = serde_yaml::from_str("{name: m, on: [a], run: 'true'}").unwrap();
        let spec =
            MeasureSpec { metric: Some(o), better: better.then_some(crate::schema::measure::Better::Higher), ..spec };
        let mut errs = Vec::new();
        check(&mut errs, &spec, "measure[0]");
        errs.iter().map(|e| e.to_string()).collect()
    }

    fn spec(yaml: &str) -> OutputMetricSpec {
        serde_yaml::with::singleton_map_recursive::deserialize(serde_yaml::Deserializer::from_str(yaml)).unwrap()
    }

    #[test]
    fn a_metric_names_one_place_and_one_way_to_find_its_number() {
        assert!(errors(spec("{from: {file: /tmp/x.json}, json: /end/sum/bits_per_second}"), false).is_empty());
        assert!(errors(spec("{regex: 'files/s: ([0-9.]+)', name: files_per_s, unit: files/s}"), false).is_empty());
        let all = [
            (spec("{json: /a, regex: '(x)'}"), "exactly one of `json`"),
            (spec("{unit: IOPS}"), "exactly one of `json`"),
            (spec("{json: jobs/0}"), "starts with '/'"),
            (spec("{json: /a~2}"), "~0"),
            (spec("{regex: '([0-9]+) of ([0-9]+)'}"), "2 capture groups"),
            (spec("{regex: 'x'}"), "0 capture groups"),
            (spec("{regex: '(['}"), "invalid"),
            (spec("{regex: '(x)', name: elapsed_s}"), "already has"),
            (spec("{regex: '(x)', name: Iops}"), "can't name a metric"),
            (spec("{regex: '(x)', from: {file: tmp/x}}"), "absolute path"),
            (spec("{regex: '(x)', unit: ''}"), "not a unit"),
        ];
        for (o, want) in all {
            let errs = errors(o.clone(), false);
            assert!(errs.len() == 1 && errs[0].contains(want), "{o:?}: {errs:?}");
        }
        let errs = errors(spec("{json: /a}"), true);
        assert!(errs.len() == 1 && errs[0].contains("move `better` into `metric`"), "{errs:?}");
    }
}
