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
        let ok_name = is_sysctl_name(name);
        if !ok_name {
            rule(
                errs,
                key.clone(),
                format!(
                    "{} is not a sysctl name: lower case letters, digits, '_' and '-' in at least two parts separated by '.' or '/', none starting with '-' (e.g. net.ipv4.ipfrag_time); at most 128 bytes",
                    crate::schema::text::shown(name, 80)
                ),
            );
        } else if let Some(why) = crate::infra::qemu::args::RUNNER_PARAMETERS
            .iter()
            .find(|(p, _)| p.strip_prefix("sysctl.").is_some_and(|n| same_sysctl(n, name)))
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
        if let Some(why) = value_problem(&text) {
            rule(errs, key, why);
        }
    }
}

/// Why `text` is not a sysctl value as `sysctl -w` and the kernel's `sysctl.` boot
/// parameter take it, or `None`: not blank, letters, digits, spaces and `. _ : , / + -`,
/// not starting with `-` unless a negative number, at most 256 bytes.
pub(super) fn value_problem(text: &str) -> Option<String> {
    if text.trim().is_empty() {
        return Some("the value is blank; sysctl -w needs a value (a number or a short text)".into());
    }
    (text.len() > 256
        || text.starts_with('-') && text[1..].parse::<i64>().is_err()
        || !text.chars().all(|c| c.is_ascii_alphanumeric() || " ._:,/+-".contains(c)))
    .then(|| format!("{text:?} is not a sysctl value (letters, digits, spaces and . _ : , / + -; at most 256 bytes)"))
}

/// Whether `name` is a sysctl name as `sysctl -w` takes it: at least two parts of
/// `[a-z0-9_][a-z0-9_-]*` separated by `.` (or `/`, the `/proc/sys` form), at most 128
/// bytes. Nothing that passes is an option of `sysctl` (no leading `-`) or a path
/// (`..`, empty parts).
pub(super) fn is_sysctl_name(name: &str) -> bool {
    let parts: Vec<&str> = name.split(['.', '/']).collect();
    name.len() <= 128
        && parts.len() >= 2
        && parts.iter().all(|p| {
            p.chars().next().is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
                && p.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-')
        })
}

/// Whether two sysctl names are the same parameter: `/` and `.` separate parts alike,
/// and the kernel reads `-` and `_` alike in the name.
fn same_sysctl(a: &str, b: &str) -> bool {
    let norm = |s: &str| s.replace('/', ".").replace('-', "_");
    norm(a) == norm(b)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sysctl_names() {
        for ok in ["net.ipv4.ipfrag_time", "net/ipv4/ipfrag_time", "net.ipv4.conf.eth0.rp_filter", "vm.dirty_ratio"] {
            assert!(is_sysctl_name(ok), "{ok}");
        }
        for bad in [
            "-p",
            "-w.x",
            "net.-x",
            "kernel",
            "net..x",
            ".net.x",
            "net.x.",
            "Net.ipv4.x",
            "net.ipv4.x=1",
            "net ipv4",
            "../../etc",
            "net/../x",
            "net.ipv4.x;y",
        ] {
            assert!(!is_sysctl_name(bad), "{bad}");
        }
        assert!(same_sysctl("kernel/panic", "kernel.panic"));
    }
}
