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
];

/// Options the guest needs built in (`=y`) to boot and be reached: its initramfs, the
/// root disk (virtio-blk over PCI, ext4), its serial console, its NIC and the
/// virtio-serial port of the guest agent. Setting one to `m`, `n` or "is not set"
/// breaks the boot (a source-built kernel gets no modules disk).
pub const NEEDED_OPTIONS: &[&str] = &[
    "BLK_DEV_INITRD",
    "DEVTMPFS",
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

/// What is wrong with line `line` of a config fragment, or `None`. A line is blank, a
/// comment, `# CONFIG_NAME is not set`, or `CONFIG_NAME=value` with a value `y`, `m`,
/// `n`, a decimal or `0x` hexadecimal number, or a double-quoted string (Kconfig's
/// `.config` grammar); `NAME` is `[A-Z0-9_]+`, not one of [`RUNNER_OPTIONS`], and a
/// [`NEEDED_OPTIONS`] entry only as `=y`.
pub fn fragment_line_problem(line: &str) -> Option<String> {
    let l = line.trim();
    if l.is_empty() {
        return None;
    }
    let (name, value) = if let Some(c) = l.strip_prefix('#') {
        match c.trim().strip_prefix("CONFIG_").and_then(|r| r.strip_suffix(" is not set")) {
            Some(name) => (name, None),
            None if l.starts_with("#!") => return Some("is a script line (#!), not a config line".into()),
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
    match value {
        Some(v) if !is_config_value(v) => {
            Some("has no config value (y, m, n, a number, or a double-quoted string without a '\"' inside)".into())
        }
        _ => None,
    }
}

/// Whether `v` is a `.config` value: `y`, `m`, `n`, a decimal (optionally negative) or
/// `0x` hexadecimal number, or a double-quoted string without an unescaped quote inside.
fn is_config_value(v: &str) -> bool {
    if ["y", "m", "n"].contains(&v) {
        return true;
    }
    if let Some(h) = v.strip_prefix("0x").or_else(|| v.strip_prefix("0X")) {
        return !h.is_empty() && h.chars().all(|c| c.is_ascii_hexdigit());
    }
    let digits = v.strip_prefix('-').unwrap_or(v);
    if !digits.is_empty() && digits.chars().all(|c| c.is_ascii_digit()) {
        return true;
    }
    let Some(inner) = v.strip_prefix('"').and_then(|r| r.strip_suffix('"')) else { return false };
    let mut escaped = false;
    inner.chars().all(|c| {
        let ok = escaped || c != '"';
        escaped = !escaped && c == '\\';
        ok
    })
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

/// Drivers and file systems the guest boots with, as parts of module names
/// (`virtio_blk`) and initcall names (`virtio_blk_init`, `ext4_init_fs`): the virtio
/// transport, disk, NIC and console, ext4 and its journal, the serial port.
pub const BOOT_DRIVERS: &[&str] = &["virtio", "ext4", "jbd2", "mbcache", "crc32c", "8250"];

/// Why kernel parameter `name=value` (name with `-` read as `_`) can't boot a VM of
/// `memory_mib` MiB or takes what it boots with, or `None`: `mem=` below the VM's
/// memory; `memmap=exactmap` or `memmap=nn@ss` (a new memory map), or a `memmap=`
/// reservation of the whole memory; `module_blacklist=`, `modprobe.blacklist=` or
/// `initcall_blacklist=` naming one of [`BOOT_DRIVERS`].
pub fn boot_parameter_problem(name: &str, value: &str, memory_mib: u64) -> Option<String> {
    match name {
        "mem" => {
            let bytes = memparse(value)?;
            (bytes < memory_mib << 20).then(|| {
                format!("limits the guest to {} of the VM's {memory_mib} MiB; set memory: instead", size_text(bytes))
            })
        }
        "memmap" => value.split(',').find_map(|m| {
            if m == "exactmap" {
                return Some("replaces the guest's memory map, which QEMU makes from memory:".to_string());
            }
            let i = m.find(['@', '$', '!', '#'])?;
            let size = memparse(&m[..i])?;
            if m[i..].starts_with('@') {
                Some(format!("gives the guest a memory map of its own ({m}); set memory: instead"))
            } else {
                (size >= memory_mib << 20).then(|| {
                    format!(
                        "reserves {} of the VM's {memory_mib} MiB, leaving it nothing to boot with",
                        size_text(size)
                    )
                })
            }
        }),
        "module_blacklist" | "modprobe.blacklist" | "initcall_blacklist" => {
            let hit = value.split(',').find(|d| {
                let d = d.replace('-', "_");
                BOOT_DRIVERS.iter().any(|b| d.contains(b))
            })?;
            Some(format!(
                "keeps {hit} from loading, and the guest boots with it (its disk, NIC, console and file system: {})",
                BOOT_DRIVERS.join(", ")
            ))
        }
        _ => None,
    }
}

/// The kernel's `memparse`: a number (decimal, or `0x` hexadecimal) with an optional
/// K, M, G, T, P or E suffix (either case), in bytes; `None` if `s` is not one.
fn memparse(s: &str) -> Option<u64> {
    let (digits, radix) = match s.strip_prefix("0x") {
        Some(h) => (h, 16),
        None => (s, 10),
    };
    let end = digits.find(|c: char| !c.is_digit(radix)).unwrap_or(digits.len());
    let (num, suffix) = digits.split_at(end);
    let n = u64::from_str_radix(num, radix).ok()?;
    let shift = match suffix {
        "" => 0,
        "k" | "K" => 10,
        "m" | "M" => 20,
        "g" | "G" => 30,
        "t" | "T" => 40,
        "p" | "P" => 50,
        "e" | "E" => 60,
        _ => return None,
    };
    n.checked_shl(shift).filter(|v| v >> shift == n).or(Some(u64::MAX))
}

/// Bytes as the message gives them (`1 MiB`, `4096 bytes`).
fn size_text(b: u64) -> String {
    if b >= 1 << 20 && b % (1 << 20) == 0 {
        format!("{} MiB", b >> 20)
    } else {
        format!("{b} bytes")
    }
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

    #[test]
    fn boot_parameters() {
        assert_eq!(memparse("1M"), Some(1 << 20));
        assert_eq!(memparse("512m"), Some(512 << 20));
        assert_eq!(memparse("0x1000"), Some(4096));
        assert_eq!(memparse("2G"), Some(2 << 30));
        assert_eq!(memparse("x"), None);
        for (n, v) in [
            ("mem", "1M"),
            ("mem", "511M"),
            ("mem", "4096"),
            ("memmap", "exactmap"),
            ("memmap", "100M@0"),
            ("memmap", "1G$0"),
            ("module_blacklist", "virtio_blk"),
            ("module_blacklist", "snd,virtio-net"),
            ("modprobe.blacklist", "ext4"),
            ("initcall_blacklist", "virtio_pci_driver_init"),
            ("initcall_blacklist", "serial8250_init"),
        ] {
            assert!(boot_parameter_problem(n, v, 512).is_some(), "{n}={v}");
        }
        for (n, v) in
            [("mem", "512M"), ("mem", "1G"), ("memmap", "64M$1G"), ("module_blacklist", "snd,floppy"), ("quiet", "")]
        {
            assert_eq!(boot_parameter_problem(n, v, 512), None, "{n}={v}");
        }
    }
}
