//! Rules of a VM's `env`: plain names, not the ones the runner sets or the shell, GNU
//! time or the C library act on, and plain text values.

use super::ValidationError;
use crate::schema::VmSpec;

/// Environment variables a VM's `env:` may not set, and why: the runner sets them, or
/// the shell, GNU time or the C library acts on them in every command the runner runs
/// (a measurement's script is `/bin/sh`, its timer GNU `time`, whose output the runner
/// parses).
const RESERVED_ENV: &[(&str, &str)] = &[
    ("PATH", "the runner sets it"),
    ("LC_ALL", "the runner sets it (C, so that the tools it parses print in one format)"),
    ("HOME", "the shell acts on it"),
    ("SHELL", "the shell acts on it"),
    ("IFS", "the shell splits words by it"),
    ("ENV", "the shell runs the file it names"),
    ("BASH_ENV", "bash runs the file it names before every script"),
    ("SHELLOPTS", "bash takes its options from it"),
    ("BASHOPTS", "bash takes its options from it"),
    ("GLOBIGNORE", "bash's globbing acts on it"),
    ("PROMPT_COMMAND", "bash runs it"),
    ("PS1", "the shell acts on it"),
    ("PS4", "the shell acts on it"),
    ("CDPATH", "the shell's cd acts on it"),
    ("TERM", "the runner's terminal sets it"),
    ("TIME", "GNU time takes its output format from it, and the runner parses that output"),
    ("POSIXLY_CORRECT", "GNU time then prints another format, and the runner parses that output"),
    ("GLIBC_TUNABLES", "the C library acts on it in every program"),
    ("GCONV_PATH", "the C library loads code from it"),
    ("TMPDIR", "the runner's measurement script makes its scratch folder with mktemp, which creates it under TMPDIR"),
];
/// Prefixes of reserved environment variable names, and why.
const RESERVED_ENV_PREFIXES: &[(&str, &str)] = &[
    ("LD_", "the dynamic loader acts on it in every program"),
    ("MALLOC_", "the C library's allocator acts on it in every program (MALLOC_PERTURB_, MALLOC_CHECK_, …)"),
    ("BASH_", "bash acts on it"),
    ("VMREPRO_", "the runner's own names"),
];
/// Most bytes of a VM's whole `env:` in an exec's environment (each entry `NAME=value`
/// plus its NUL and its 8-byte pointer), counted after YAML aliases are expanded.
/// Linux refuses an exec whose arguments and environment together pass `ARG_MAX`
/// (a quarter of the stack limit: 2 MiB with the default 8 MiB stack); the guest
/// script takes up to [`super::guest::MAX_EXEC_ARG_BYTES`] of it, the runner's own
/// variables a few more, so the suite's share is 1 MiB.
pub const MAX_ENV_BYTES: usize = 1024 * 1024;

/// Checks the `env` of VM `vm` (key path `k`).
pub(super) fn check(errs: &mut Vec<ValidationError>, vm: &VmSpec, k: &str) {
    let total: usize = vm.env.iter().map(|(n, v)| n.len() + 1 + v.len() + 1 + 8).sum();
    if total > MAX_ENV_BYTES {
        errs.push(ValidationError::Rule {
            key: format!("{k}.env"),
            message: format!(
                "the environment is {total} bytes ({} variables, YAML aliases expanded); every command of the VM gets it, and an exec's environment here is at most {MAX_ENV_BYTES} bytes (Linux refuses an exec past ARG_MAX)",
                vm.env.len()
            ),
        });
    }
    let rule = |errs: &mut Vec<ValidationError>, key: String, message: String| {
        errs.push(ValidationError::Rule { key, message })
    };
    // Environment: plain names (not the ones the shell or the loader act on), plain text.
    for (name, value) in &vm.env {
        let key = format!("{k}.env.{name}");
        let mut c = name.chars();
        let ok = name.len() <= 64
            && c.next().is_some_and(|c| c.is_ascii_uppercase() || c == '_')
            && c.all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_');
        if !ok {
            rule(errs, key.clone(), format!("{name:?} is not an environment variable name (uppercase letters, digits and '_', not starting with a digit)"));
        } else if let Some(why) = reserved_env(name) {
            rule(errs, key.clone(), format!("{name} is reserved: {why}; choose another name"));
        }
        if value.len() > 4096 || value.chars().any(|c| c.is_control() && c != '\t') {
            rule(errs, key, "an environment value is at most 4096 bytes of text without control characters".into());
        }
    }
}

/// Why environment variable `name` is reserved, if it is.
fn reserved_env(name: &str) -> Option<&'static str> {
    RESERVED_ENV
        .iter()
        .find(|(n, _)| *n == name)
        .or_else(|| RESERVED_ENV_PREFIXES.iter().find(|(p, _)| name.starts_with(p)))
        .map(|(_, why)| *why)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reserved_environment_names() {
        for name in [
            "PATH",
            "TIME",
            "POSIXLY_CORRECT",
            "BASH_ENV",
            "SHELLOPTS",
            "LD_PRELOAD",
            "BASH_XTRACEFD",
            "VMREPRO_X",
            "TMPDIR",
            "MALLOC_PERTURB_",
            "MALLOC_ARENA_MAX",
        ] {
            assert!(reserved_env(name).is_some(), "{name}");
        }
        for name in ["VERS", "TIMEOUT", "NFS_VERS", "LDX", "BASHFUL", "TMP", "MALLOC"] {
            assert_eq!(reserved_env(name), None, "{name}");
        }
    }
}
