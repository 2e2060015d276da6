//! The bare-QEMU reference boot of `vmrepro bench`: the kernel, initramfs and root
//! disk a runner VM boots, on the same virtual hardware (machine, accelerator, CPU
//! model, memory, vCPUs), but with no network, no QMP, no guest agent and no runner.
//!
//! The guest runs [`BARE_INIT`] instead of the runner's initramfs `/init`: it does what
//! that `/init` does to reach the root disk (load the boot modules, wait for
//! `/dev/vda`, mount it), then `switch_root`s into the rootfs and runs one command
//! there that prints [`MARKER`] on the serial console and powers off (`busybox
//! poweroff -f`). The time measured is QEMU's spawn → QEMU's exit; the boot only counts
//! if the console shows the marker (a panic also ends QEMU, with `-no-reboot` and
//! `panic=-1`).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::infra::images::initramfs::{concat, write_archive, Member};
use crate::infra::qemu::args::{machine_args, Accelerator};

/// What the bare guest prints on its serial console once it runs a command of the
/// rootfs.
pub const MARKER: &str = "vmrepro-bench: rootfs userspace reached";

/// Path of [`BARE_INIT`] in the bench's initrd (`rdinit=`).
pub const BARE_INIT_PATH: &str = "bench-init";

/// The bare guest's PID 1 (busybox sh), appended to the runner's initrd.
pub const BARE_INIT: &str = r#"#!/bin/busybox sh
/bin/busybox mkdir -p /bin /dev /newroot
/bin/busybox --install -s /bin
mount -t devtmpfs dev /dev
if [ -f /boot-modules ]; then
  for m in $(cat /boot-modules); do insmod "/modules/$m"; done
fi
i=0
while [ ! -b /dev/vda ] && [ "$i" -lt 200 ]; do sleep 0.05; i=$((i + 1)); done
mount -t ext4 -o ro /dev/vda /newroot || exit 1
mount --move /dev /newroot/dev
exec switch_root /newroot /bin/sh -c 'echo "vmrepro-bench: rootfs userspace reached"; exec /bin/busybox poweroff -f'
"#;

/// One bare boot's inputs.
#[derive(Debug, Clone)]
pub struct BareConfig {
    /// Memory, MiB.
    pub memory_mib: u64,
    /// vCPUs.
    pub cpus: u32,
    /// Accelerator (as the runner resolved it).
    pub accel: Accelerator,
    /// Kernel image.
    pub kernel: PathBuf,
    /// The bench initrd ([`write_initrd`]).
    pub initrd: PathBuf,
    /// The rootfs image, attached read-only as `/dev/vda`.
    pub rootfs: PathBuf,
    /// The kernel's modules disk (`/dev/vdb`), attached as the runner attaches it.
    pub modules_disk: Option<PathBuf>,
    /// Serial console log.
    pub console_log: PathBuf,
}

/// QEMU's argument vector for a bare boot (without the program name). Pure.
pub fn bare_args(c: &BareConfig) -> Vec<String> {
    let p = |p: &Path| p.display().to_string();
    let mut a: Vec<String> = ["-nodefaults", "-no-user-config", "-display", "none", "-no-reboot"]
        .iter()
        .chain(machine_args(c.accel).iter())
        .map(|s| s.to_string())
        .collect();
    a.extend(["-m".into(), c.memory_mib.to_string(), "-smp".into(), c.cpus.to_string()]);
    a.extend(["-kernel".into(), p(&c.kernel), "-initrd".into(), p(&c.initrd)]);
    a.extend(["-append".into(), format!("console=ttyS0 panic=-1 rdinit=/{BARE_INIT_PATH}")]);
    a.extend(["-drive".into(), format!("file={},if=none,id=root,format=raw,readonly=on", p(&c.rootfs))]);
    a.extend(["-device".into(), "virtio-blk-pci,drive=root".into()]);
    if let Some(m) = &c.modules_disk {
        a.extend(["-drive".into(), format!("file={},if=none,id=modules,format=raw,readonly=on", p(m))]);
        a.extend(["-device".into(), "virtio-blk-pci,drive=modules".into()]);
    }
    a.extend(["-serial".into(), format!("file:{}", p(&c.console_log))]);
    a
}

/// Writes the bench initrd to `out`: the runner's two parts (`base`: the rootfs's
/// busybox part; `modules`: the kernel's boot modules), then an archive with
/// [`BARE_INIT`]. `tmp` holds that last archive.
///
/// Errors: the I/O error of reading a part or writing `out`.
pub fn write_initrd(base: &Path, modules: &Path, tmp: &Path, out: &Path) -> std::io::Result<()> {
    let extra = tmp.join("bench-init.cpio");
    write_archive(
        &extra,
        &[Member::File { name: BARE_INIT_PATH.into(), mode: 0o755, data: BARE_INIT.as_bytes().to_vec() }],
    )?;
    concat(&[base, modules, &extra], out)
}

/// Why a bare boot did not count.
#[derive(Debug, thiserror::Error)]
pub enum BareError {
    /// QEMU couldn't be started or waited for.
    #[error("bare QEMU: {0}")]
    Io(#[from] std::io::Error),
    /// QEMU was still running after the limit (then killed).
    #[error("bare QEMU boot did not power off within {}s; console tail:\n{console}", limit.as_secs())]
    Timeout {
        /// The limit.
        limit: Duration,
        /// The console's last lines.
        console: String,
    },
    /// QEMU exited without the guest printing [`MARKER`].
    #[error("bare QEMU exited ({status}) before the guest printed the marker; console tail:\n{console}")]
    NoMarker {
        /// QEMU's exit status.
        status: String,
        /// The console's last lines.
        console: String,
    },
}

/// Boots `c` once with `qemu` (in its own process group, killed if this future is
/// dropped) and returns spawn → exit, provided the console shows [`MARKER`].
///
/// Errors: [`BareError`].
pub async fn boot(qemu: &str, c: &BareConfig, limit: Duration) -> Result<Duration, BareError> {
    let _ = std::fs::remove_file(&c.console_log);
    let mut cmd = tokio::process::Command::new(qemu);
    cmd.args(bare_args(c)).stdin(std::process::Stdio::null()).stdout(std::process::Stdio::null());
    cmd.stderr(std::process::Stdio::null()).process_group(0).kill_on_drop(true);
    let t = Instant::now();
    let mut child = cmd.spawn()?;
    let console = |path: &Path| {
        crate::infra::qemu::vm::tail(&String::from_utf8_lossy(&std::fs::read(path).unwrap_or_default()), 15)
    };
    let status = match tokio::time::timeout(limit, child.wait()).await {
        Ok(st) => st?,
        Err(_) => {
            let _ = child.kill().await;
            return Err(BareError::Timeout { limit, console: console(&c.console_log) });
        }
    };
    let took = t.elapsed();
    let log = String::from_utf8_lossy(&std::fs::read(&c.console_log).unwrap_or_default()).into_owned();
    // The command line echoed by the kernel holds no marker: only the guest's echo does.
    if !log.lines().any(|l| l.trim_end() == MARKER) {
        return Err(BareError::NoMarker { status: status.to_string(), console: console(&c.console_log) });
    }
    Ok(took)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(accel: Accelerator, modules: bool) -> BareConfig {
        BareConfig {
            memory_mib: 384,
            cpus: 1,
            accel,
            kernel: "/c/kernel/k/vmlinuz".into(),
            initrd: "/t/initrd.cpio".into(),
            rootfs: "/c/rootfs/r/rootfs.img".into(),
            modules_disk: modules.then(|| "/c/kernel/k/modules.img".into()),
            console_log: "/t/console.log".into(),
        }
    }

    fn after<'a>(a: &'a [String], flag: &str) -> Vec<&'a str> {
        a.windows(2).filter(|w| w[0] == flag).map(|w| w[1].as_str()).collect()
    }

    #[test]
    fn tcg_boot_matches_the_runners_hardware_and_has_no_network_or_agent() {
        let a = bare_args(&config(Accelerator::Tcg, true));
        assert_eq!(after(&a, "-machine"), ["q35"]);
        assert_eq!(after(&a, "-accel"), ["tcg"]);
        assert_eq!(after(&a, "-cpu"), ["max"]);
        assert_eq!(after(&a, "-m"), ["384"]);
        assert_eq!(after(&a, "-smp"), ["1"]);
        assert_eq!(after(&a, "-append"), ["console=ttyS0 panic=-1 rdinit=/bench-init"]);
        assert_eq!(
            after(&a, "-drive"),
            [
                "file=/c/rootfs/r/rootfs.img,if=none,id=root,format=raw,readonly=on",
                "file=/c/kernel/k/modules.img,if=none,id=modules,format=raw,readonly=on"
            ]
        );
        assert_eq!(after(&a, "-serial"), ["file:/t/console.log"]);
        assert!(a.contains(&"-no-reboot".to_string()));
        for absent in ["-netdev", "-chardev", "-mon"] {
            assert!(!a.iter().any(|x| x == absent), "{absent} in {a:?}");
        }
    }

    #[test]
    fn kvm_boot_uses_the_host_cpu_and_no_modules_disk_when_there_is_none() {
        let a = bare_args(&config(Accelerator::Kvm, false));
        assert_eq!(after(&a, "-accel"), ["kvm"]);
        assert_eq!(after(&a, "-cpu"), ["host"]);
        assert_eq!(after(&a, "-drive").len(), 1);
        assert_eq!(after(&a, "-device"), ["virtio-blk-pci,drive=root"]);
    }

    #[test]
    fn the_init_prints_exactly_the_marker_the_boot_looks_for() {
        assert!(BARE_INIT.contains(&format!("echo \"{MARKER}\"")));
        assert!(BARE_INIT.starts_with("#!/bin/busybox sh\n"));
        assert!(BARE_INIT.contains("poweroff -f"));
    }

    #[test]
    fn the_initrd_is_the_runners_two_parts_then_the_bench_init() {
        let d = tempfile::tempdir().unwrap();
        let (base, modules, out) = (d.path().join("base"), d.path().join("mods"), d.path().join("initrd"));
        std::fs::write(&base, b"BASE").unwrap();
        std::fs::write(&modules, b"MODS").unwrap();
        write_initrd(&base, &modules, d.path(), &out).unwrap();
        let bytes = std::fs::read(&out).unwrap();
        assert!(bytes.starts_with(b"BASEMODS070701"), "{:?}", &bytes[..14]);
        let text = String::from_utf8_lossy(&bytes);
        assert!(text.contains(BARE_INIT_PATH) && text.contains(MARKER) && text.contains("TRAILER!!!"));
    }
}
