//! The text of a source-built kernel's inputs: a config fragment's lines (their grammar,
//! and the options the runner sets or the guest needs) and a patch's hunks.

/// Options a config fragment may not set, and why: they replace what the runner gives
/// every guest (its command line, its initramfs, its init) or make the kernel build
/// read files of the host (an initramfs folder, firmware, signing keys, certificates).
pub const RUNNER_OPTIONS: &[(&str, &str)] = &[
    ("CMDLINE", "a built-in command line can replace the runner's (console, rdinit, panic)"),
    ("INITRAMFS_", "a built-in initramfs bakes a host folder into the guest kernel and replaces the runner's"),
    ("DEFAULT_INIT", "the runner's init starts the guest agent"),
    ("EXTRA_FIRMWARE", "the build would copy host firmware files into the kernel"),
    ("MODULE_SIG_KEY", "the build would read a signing key from the host"),
    ("SYSTEM_TRUSTED_KEYS", "the build would read certificates from the host"),
    ("SYSTEM_REVOCATION_KEYS", "the build would read certificates from the host"),
    ("UEVENT_HELPER_PATH", "the kernel would run that program on every device event"),
    ("STATIC_USERMODEHELPER", "the kernel would run that program instead of every user-mode helper"),
    ("MODPROBE_PATH", "the kernel loads modules with the guest's own modprobe"),
    (
        "BOOT_CONFIG_EMBED",
        "an embedded boot configuration can add kernel parameters behind the runner's back, from a host file",
    ),
    ("SYSTEM_BLACKLIST_HASH_LIST", "the build would read a hash list from the host"),
];

/// Options the guest needs built in (`=y`) to boot and be reached: its initramfs (and
/// the ELF and `#!` loaders its init needs, proc and sysfs it mounts), the root disk
/// (virtio-blk over PCI, the block layer, ext4), its serial console (and the TTY
/// layer), its NIC, the virtio-serial port of the guest agent, and tmpfs (`/tmp`). Setting one to `m`, `n` or "is not set"
/// breaks the boot (a source-built kernel gets no modules disk).
pub const NEEDED_OPTIONS: &[&str] = &[
    "BLK_DEV_INITRD",
    "BINFMT_ELF",
    "BINFMT_SCRIPT",
    "PROC_FS",
    "SYSFS",
    "DEVTMPFS",
    "TMPFS",
    "TTY",
    "PCI",
    "BLOCK",
    "SERIAL_8250",
    "SERIAL_8250_CONSOLE",
    "VIRTIO",
    "VIRTIO_PCI",
    "VIRTIO_BLK",
    "VIRTIO_NET",
    "VIRTIO_CONSOLE",
    "EXT4_FS",
    "NET",
    "INET",
    "UNIX",
];

/// Characters a fragment's string value may hold besides ASCII letters and digits: no
/// quote, no `\` escape, no `$` or backquote (the kernel's Makefiles read `.config`
/// back as make variables), no `/` (a string with one names a path, and a path in a
/// kernel build is a host file).
pub const STRING_CHARS: &str = " ._-+,:=@";

/// What is wrong with line `line` of a config fragment, or `None`. The grammar is
/// that of `scripts/kconfig/merge_config.sh` and `conf_read_simple()` in
/// scripts/kconfig/confdata.c, exactly (no white space around a line or its `=`): a
/// line is blank, a comment, `# CONFIG_NAME is not set`, or `CONFIG_NAME=value` with
/// a value `y`, `m`, `n`, a decimal or `0x` hexadecimal number, or a double-quoted
/// string of letters, digits and [`STRING_CHARS`]; `NAME` is `[A-Z0-9_]+`, not one
/// of [`RUNNER_OPTIONS`], and a [`NEEDED_OPTIONS`] entry only as `=y`. A comment that
/// reads like an "is not set" line but isn't one exactly (kconfig would skip it) is
/// refused too.
pub fn fragment_line_problem(line: &str) -> Option<String> {
    let l = line.strip_suffix('\r').unwrap_or(line);
    if l.trim().is_empty() {
        return None;
    }
    if l.starts_with(char::is_whitespace) || l.ends_with(char::is_whitespace) {
        return Some(
            "has white space around it; kconfig reads a line only from its first character and takes the rest up to the line's end as the value".into(),
        );
    }
    let (name, value) = if let Some(c) = l.strip_prefix('#') {
        match c.strip_prefix(" CONFIG_").and_then(|r| r.strip_suffix(" is not set")) {
            Some(name) => (name, None),
            None if l.starts_with("#!") => return Some("is a script line (#!), not a config line".into()),
            None if c.contains("CONFIG_") && c.contains("is not set") => {
                return Some(
                    "looks like an \"is not set\" line but kconfig reads it as a comment; write `# CONFIG_NAME is not set` exactly (one space after '#')".into(),
                )
            }
            None => return None,
        }
    } else {
        let Some((name, value)) = l.strip_prefix("CONFIG_").and_then(|r| r.split_once('=')) else {
            return Some(
                "is not a config line (`CONFIG_NAME=value`, `# CONFIG_NAME is not set`, a comment or a blank line)"
                    .into(),
            );
        };
        (name, Some(value))
    };
    if name.is_empty() || !name.chars().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_') {
        return Some("names no option (an option name is CONFIG_ and upper case letters, digits and '_')".into());
    }
    if let Some((_, why)) = RUNNER_OPTIONS.iter().find(|(p, _)| name.starts_with(p)) {
        return Some(format!("sets CONFIG_{name}, which the runner owns: {why}; remove it from the fragment"));
    }
    if NEEDED_OPTIONS.contains(&name) && value != Some("y") {
        return Some(format!(
            "turns CONFIG_{name} off or into a module; the guest needs it built in (=y) to boot and answer (no modules disk comes with a source-built kernel)"
        ));
    }
    let v = value?;
    if let Some(inner) = v.strip_prefix('"').and_then(|r| r.strip_suffix('"')).filter(|_| v.len() >= 2) {
        return match inner.chars().find(|c| !(c.is_ascii_alphanumeric() || STRING_CHARS.contains(*c))) {
            None => None,
            Some('/') => Some(format!(
                "gives CONFIG_{name} a path; a fragment can't point the kernel build at files (they would be the host's)"
            )),
            Some(c) => Some(format!(
                "has {} in the string of CONFIG_{name}; a fragment's strings hold only letters, digits, spaces and {}",
                crate::schema::text::describe(c),
                STRING_CHARS.trim().chars().map(String::from).collect::<Vec<_>>().join(" ")
            )),
        };
    }
    (!is_config_number(v)).then(|| "has no config value (y, m, n, a number, or a double-quoted string)".into())
}

/// Whether `v` is a `.config` value other than a string: `y`, `m`, `n`, a decimal
/// (optionally negative) or `0x` hexadecimal number.
fn is_config_number(v: &str) -> bool {
    if ["y", "m", "n"].contains(&v) {
        return true;
    }
    if let Some(h) = v.strip_prefix("0x").or_else(|| v.strip_prefix("0X")) {
        return !h.is_empty() && h.chars().all(|c| c.is_ascii_hexdigit());
    }
    let digits = v.strip_prefix('-').unwrap_or(v);
    !digits.is_empty() && digits.chars().all(|c| c.is_ascii_digit())
}

/// What is wrong with a patch's text, or `None`: a unified diff for `patch -p1` has
/// `--- ` and `+++ ` lines naming relative paths without `..`, and at least one hunk
/// (`@@ -a,b +c,d @@`).
pub fn patch_problem(text: &str) -> Option<String> {
    let headers: Vec<&str> = text.lines().filter(|l| l.starts_with("--- ") || l.starts_with("+++ ")).collect();
    if !headers.iter().any(|l| l.starts_with("--- ")) || !headers.iter().any(|l| l.starts_with("+++ ")) {
        return Some("holds no unified diff (no `--- ` and `+++ ` lines); it should be a patch for `patch -p1`".into());
    }
    for h in &headers {
        let path = h[4..].split('\t').next().unwrap_or_default().trim();
        if path != "/dev/null" && (path.starts_with('/') || path.split('/').any(|c| c == "..")) {
            return Some(format!(
                "names {} in `{}`: a patch's paths are relative to the kernel tree and stay inside it",
                crate::schema::text::shown(path, 60),
                &h[..3]
            ));
        }
    }
    let hunk = text
        .lines()
        .any(|l| l.strip_prefix("@@ -").and_then(|r| r.split_once(" +")).is_some_and(|(_, r)| r.contains(" @@")));
    (!hunk).then(|| "has `--- ` and `+++ ` lines but no hunk (`@@ -a,b +c,d @@`), so it changes nothing".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fragment_lines() {
        for ok in [
            "",
            "# a comment",
            "CONFIG_NFS_FS=y",
            "CONFIG_NR_CPUS=64",
            "CONFIG_PHYSICAL_START=0x1000000",
            "CONFIG_LOCALVERSION=\"-x\"",
            "# CONFIG_DRM is not set",
            "CONFIG_VIRTIO_BLK=y",
            "CONFIG_LOCALVERSION=\"\"",
            "CONFIG_LSM=\"landlock,lockdown,yama\"",
            "CONFIG_NFS_FS=y\r",
            "#CONFIG_X notes",
        ] {
            assert_eq!(fragment_line_problem(ok), None, "{ok}");
        }
        for bad in [
            "CONFIG_CMDLINE_OVERRIDE=y",
            "CONFIG_CMDLINE=\"init=/bin/sh\"",
            "CONFIG_CMDLINE_BOOL=y",
            "CONFIG_INITRAMFS_SOURCE=\"/etc\"",
            "CONFIG_EXTRA_FIRMWARE_DIR=\"/root\"",
            "CONFIG_MODULE_SIG_KEY=\"/root/key.pem\"",
            "CONFIG_VIRTIO_BLK=m",
            "# CONFIG_EXT4_FS is not set",
            "CONFIG_VIRTIO_NET=n",
            "CONFIG_X=yes",
            "CONFIG_X=",
            "CONFIG_X=\"a\"b\"",
            "CONFIG_x=y",
            "config_x=y",
            "make menuconfig",
            "#!/bin/sh",
            " CONFIG_NFS_FS=y",
            "CONFIG_NFS_FS=y ",
            "CONFIG_NFS_FS = y",
            "#CONFIG_VIRTIO_BLK is not set",
            "#  CONFIG_VIRTIO_BLK is not set",
            "CONFIG_LOCALVERSION=\"$(shell id)\"",
            "CONFIG_LOCALVERSION=\"`id`\"",
            "CONFIG_LOCALVERSION=\"a\\nb\"",
            "CONFIG_LOCALVERSION=\"x;y\"",
            "CONFIG_LSM_FILE=\"/etc/shadow\"",
            "CONFIG_X=\"certs/key.pem\"",
            "CONFIG_X=\"",
            "CONFIG_STATIC_USERMODEHELPER_PATH=\"/bin/sh\"",
            "CONFIG_BOOT_CONFIG_EMBED_FILE=\"/root/x\"",
            "CONFIG_PCI=n",
            "# CONFIG_TTY is not set",
            "CONFIG_BINFMT_SCRIPT=m",
        ] {
            assert!(fragment_line_problem(bad).is_some(), "{bad}");
        }
    }

    #[test]
    fn patches() {
        let good = "--- a/x.c\n+++ b/x.c\n@@ -1,1 +1,1 @@\n-a\n+b\n";
        assert_eq!(patch_problem(good), None);
        assert!(patch_problem("--- a/x.c\n+++ b/x.c\n").is_some());
        assert!(patch_problem("hello").is_some());
        assert!(patch_problem("--- a/../../x\n+++ b/../../x\n@@ -1 +1 @@\n-a\n+b\n").is_some());
        assert!(patch_problem("--- /etc/passwd\n+++ /etc/passwd\n@@ -1 +1 @@\n-a\n+b\n").is_some());
    }
}
