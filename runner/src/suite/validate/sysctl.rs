//! Rules of a VM's `sysctl` values: dotted names the runner does not set itself, and
//! plain values (they reach `sysctl -w`, quoted).

use super::ValidationError;
use crate::schema::VmSpec;

/// Checks the `sysctl` of VM `vm` (key path `k`).
pub(super) fn check(errs: &mut Vec<ValidationError>, vm: &VmSpec, k: &str) {
    let rule = |errs: &mut Vec<ValidationError>, key: String, message: String| {
        errs.push(ValidationError::Rule { key, message })
    };
    // sysctl: dotted names and plain values (they reach `sysctl -w`, quoted).
    for (name, value) in &vm.sysctl {
        let key = format!("{k}.sysctl.{name}");
        let ok_name = name.len() <= 128
            && name.split('.').count() >= 2
            && name
                .split('.')
                .all(|c| !c.is_empty() && c.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-'));
        if !ok_name {
            rule(errs, key.clone(), format!("{name:?} is not a sysctl name (dotted, e.g. net.ipv4.ipfrag_time)"));
        } else if let Some(why) = crate::infra::qemu::args::RUNNER_PARAMETERS
            .iter()
            .find(|(p, _)| p.strip_prefix("sysctl.").is_some_and(|n| n.replace('-', "_") == name.replace('-', "_")))
            .map(|(_, w)| w)
        {
            rule(errs, key.clone(), format!("{name} is the runner's: {why}; remove it from sysctl"));
        }
        if let Some(why) = float_problem(value, "sysctl -w would be given") {
            rule(errs, key.clone(), why);
            continue;
        }
        let text = match value {
            serde_yaml::Value::String(v) => v.clone(),
            serde_yaml::Value::Number(n) => n.to_string(),
            serde_yaml::Value::Bool(b) => if *b { "1" } else { "0" }.to_string(),
            _ => {
                rule(errs, key.clone(), "a sysctl value is a number or a short text".into());
                continue;
            }
        };
        if text.is_empty()
            || text.len() > 256
            || text.starts_with('-') && text[1..].parse::<i64>().is_err()
            || !text.chars().all(|c| c.is_ascii_alphanumeric() || " ._:,/+-".contains(c))
        {
            rule(
                errs,
                key,
                format!(
                    "{text:?} is not a sysctl value (letters, digits, spaces and . _ : , / + -; at most 256 bytes)"
                ),
            );
        }
    }
}

/// Why the YAML value `v` is a number that can't stand for the text it becomes, if it
/// is: a float (`1e7`, `4.0`) becomes `10000000.0`, `4.0`; `.inf` and `.nan` are no
/// number at all. For values the runner hands on as text (`sysctl`, `checks[].equals`).
/// `then` says what the float's text would be used as (`sysctl -w would be given`).
pub(super) fn float_problem(v: &serde_yaml::Value, then: &str) -> Option<String> {
    let serde_yaml::Value::Number(n) = v else { return None };
    let f = n.as_f64().filter(|_| n.is_f64())?;
    if !f.is_finite() {
        return Some(format!("{n} is not a finite number; write a number, or quote the text (\"{n}\")"));
    }
    let fix = if f.fract() == 0.0 && f.abs() < 1e15 {
        format!("write the integer ({}) or quote the text", f as i64)
    } else {
        "quote the text as it should read".to_string()
    };
    Some(format!("{n} is a YAML float (a number with '.' or an exponent), so {then} the text {n}; {fix}"))
}
