//! Building QEMU's argument vector for one VM. Pure: no I/O, so it is snapshot-tested
//! with redacted paths.

use std::path::PathBuf;

/// Acceleration actually used for a VM (after `auto` was resolved).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Accelerator {
    /// Hardware virtualisation (`-accel kvm -cpu host`).
    Kvm,
    /// Software emulation (`-accel tcg -cpu max`).
    Tcg,
}

/// Everything QEMU needs to boot one of our VMs.
#[derive(Debug, Clone, serde::Serialize)]
pub struct QemuConfig {
    /// VM name.
    pub name: String,
    /// Memory in MiB.
    pub memory_mib: u64,
    /// vCPUs.
    pub cpus: u32,
    /// Acceleration.
    pub accel: Accelerator,
    /// Kernel image.
    pub kernel: PathBuf,
    /// initrd (cpio).
    pub initrd: PathBuf,
    /// Kernel command line.
    pub append: String,
    /// qcow2 overlay used as the root disk (`/dev/vda`).
    pub root_overlay: PathBuf,
    /// Read-only modules disk (`/dev/vdb`), if any.
    pub modules_disk: Option<PathBuf>,
    /// Tap device in the suite's namespace.
    pub tap: String,
    /// NIC MAC address.
    pub mac: String,
    /// QMP unix socket path.
    pub qmp_socket: PathBuf,
    /// Guest agent unix socket path.
    pub qga_socket: PathBuf,
    /// Serial console log file.
    pub console_log: PathBuf,
    /// Unix socket of the second serial port, `ttyS1` in the guest, where a root
    /// shell waits for `vmrepro shell` (`/sbin/vmrepro-shell`).
    pub shell_socket: PathBuf,
    /// Where the guest's RAM lives (see [`GuestRam`]).
    pub ram: GuestRam,
    /// A saved VM state to start from instead of booting (`-incoming file:<path>`, or
    /// `-incoming defer` with a [`GuestRam::Mapped`] RAM: the runner then starts the
    /// load over QMP, see [`super::state`]).
    pub incoming: Option<PathBuf>,
    /// Append to the console log (which then starts with the saved guest's boot log)
    /// instead of truncating it.
    pub console_append: bool,
    /// The host CPU the QEMU process is bound to (`--pin`, see [`super::pin`]); not a
    /// QEMU argument: set with `sched_setaffinity` before QEMU starts.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pinned_cpu: Option<usize>,
    /// Packet capture of the NIC's traffic, both directions (`-object filter-dump`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub capture: Option<CaptureArgs>,
}

/// Where a guest's RAM lives. With saved VM states ([`super::state`]) the runner gives
/// a booting guest [`GuestRam::Shared`] and a restored one [`GuestRam::Mapped`]; without
/// them, or in the fallback, QEMU's own [`GuestRam::Anonymous`] memory.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum GuestRam {
    /// QEMU's anonymous memory (`-m`): a saved state carries the RAM in its migration
    /// stream, and a restore copies it back in.
    Anonymous,
    /// A memfd the runner creates and hands QEMU as file descriptor [`RAM_FD`],
    /// mapped shared (`memory-backend-file,share=on,mem-path=/proc/self/fd/3`): a save
    /// with the `x-ignore-shared` migration capability writes only the device state,
    /// and the runner copies the RAM out of the memfd into the state's RAM file.
    Shared,
    /// A saved state's RAM file, mapped privately (copy-on-write:
    /// `share=off,readonly=on,rom=off`, QEMU ≥ 8.2): QEMU opens the file read-only, the
    /// guest's pages come from the host's page cache as it touches them, and the VMs
    /// restored from one file share every page none of them wrote.
    Mapped(PathBuf),
}

/// The file descriptor a [`GuestRam::Shared`] guest's memfd has in QEMU.
pub const RAM_FD: i32 = 3;

/// The QOM id of the guest RAM's memory backend (`-machine memory-backend=ram0`).
pub const RAM_BACKEND_ID: &str = "ram0";

/// The `filter-dump` netfilter of a VM's netdev: every frame the guest sends or
/// receives, its first `snaplen` bytes, in pcap format (QEMU's `net/dump.c`; stamped
/// with the VM's virtual clock).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct CaptureArgs {
    /// The pcap file (QEMU truncates it at start).
    pub file: PathBuf,
    /// Bytes kept of each frame (`maxlen`).
    pub snaplen: u32,
    /// Created with `status=off`: it records nothing until QMP `qom-set`s its `status`
    /// to `on` ([`super::qmp::Qmp::set_capture`]).
    pub off: bool,
}

/// The QOM id of the capture filter (`/objects/capture0`).
pub const CAPTURE_FILTER_ID: &str = "capture0";

/// The machine, accelerator and CPU model every VM gets: `-machine q35` with
/// `-accel kvm -cpu host` or `-accel tcg -cpu max` (shared with `vmrepro bench`'s bare
/// boot, so both boot the same virtual hardware).
pub fn machine_args(accel: Accelerator) -> [&'static str; 6] {
    match accel {
        Accelerator::Kvm => ["-machine", "q35", "-accel", "kvm", "-cpu", "host"],
        Accelerator::Tcg => ["-machine", "q35", "-accel", "tcg", "-cpu", "max"],
    }
}

/// The argument vector (without the program name).
pub fn qemu_args(c: &QemuConfig) -> Vec<String> {
    let p = |p: &PathBuf| p.display().to_string();
    let mut a: Vec<String> = Vec::new();
    let mut push = |items: &[&str]| a.extend(items.iter().map(|s| s.to_string()));
    push(&["-name", &format!("guest={},process=vmrepro-{}", c.name, c.name)]);
    push(&["-nodefaults", "-no-user-config", "-display", "none", "-no-reboot"]);
    push(&machine_args(c.accel));
    push(&["-m", &c.memory_mib.to_string(), "-smp", &c.cpus.to_string()]);
    let backend = |path: &str, mapping: &str| {
        // `,` in a QEMU option value is written `,,`.
        let path = path.replace(',', ",,");
        format!("memory-backend-file,id={RAM_BACKEND_ID},size={}M,mem-path={path},{mapping}", c.memory_mib)
    };
    let ram = match &c.ram {
        GuestRam::Anonymous => None,
        GuestRam::Shared => Some(backend(&format!("/proc/self/fd/{RAM_FD}"), "share=on")),
        GuestRam::Mapped(file) => Some(backend(&p(file), "share=off,readonly=on,rom=off")),
    };
    if let Some(object) = ram {
        push(&["-object", &object, "-machine", &format!("memory-backend={RAM_BACKEND_ID}")]);
    }
    push(&["-kernel", &p(&c.kernel), "-initrd", &p(&c.initrd), "-append", &c.append]);
    push(&["-drive", &format!("file={},if=none,id=root,format=qcow2,cache=unsafe,discard=unmap", p(&c.root_overlay))]);
    push(&["-device", "virtio-blk-pci,drive=root"]);
    if let Some(m) = &c.modules_disk {
        push(&["-drive", &format!("file={},if=none,id=modules,format=raw,readonly=on", p(m))]);
        push(&["-device", "virtio-blk-pci,drive=modules"]);
    }
    push(&["-netdev", &format!("tap,id=net0,ifname={},script=no,downscript=no", c.tap)]);
    push(&["-device", &format!("virtio-net-pci,netdev=net0,mac={}", c.mac)]);
    if let Some(cap) = &c.capture {
        // `,` in a QEMU option value is written `,,`.
        let file = p(&cap.file).replace(',', ",,");
        push(&[
            "-object",
            &format!(
                "filter-dump,id={CAPTURE_FILTER_ID},netdev=net0,queue=all,file={file},maxlen={}{}",
                cap.snaplen,
                if cap.off { ",status=off" } else { "" }
            ),
        ]);
    }
    push(&["-chardev", &format!("socket,id=qmp,path={},server=on,wait=off", p(&c.qmp_socket))]);
    push(&["-mon", "chardev=qmp,mode=control"]);
    push(&["-chardev", &format!("socket,id=qga,path={},server=on,wait=off", p(&c.qga_socket))]);
    push(&["-device", "virtio-serial-pci", "-device", "virtserialport,chardev=qga,name=org.qemu.guest_agent.0"]);
    let append = if c.console_append { ",append=on" } else { "" };
    push(&["-chardev", &format!("file,id=console,path={}{append}", p(&c.console_log))]);
    push(&["-serial", "chardev:console"]);
    // Second port: ttyS1 (8250, built into every kernel we boot), nothing until a
    // client connects.
    push(&["-chardev", &format!("socket,id=shell,path={},server=on,wait=off", p(&c.shell_socket))]);
    push(&["-serial", "chardev:shell"]);
    match (&c.incoming, &c.ram) {
        // The x-ignore-shared capability must be set before the load starts: over QMP.
        (Some(_), GuestRam::Mapped(_)) => push(&["-incoming", "defer"]),
        (Some(state), _) => push(&["-incoming", &format!("file:{}", p(state))]),
        (None, _) => {}
    }
    a
}

/// Longest kernel command line the runner boots, bytes, its own part included. x86's
/// `COMMAND_LINE_SIZE` is 2048, but Debian's 5.10 kernel stopped early in boot with a
/// 2.4 KiB line and booted with 1.6 KiB; 1.5 KiB stays below what was seen to boot.
pub const MAX_KERNEL_CMDLINE_BYTES: usize = 1536;

/// Kernel parameters the runner sets or relies on, with why a suite may not give them
/// (checked on `vms[].cmdline`, also after `--`, since the guest's init reads the whole
/// of `/proc/cmdline`; a `sysctl.` entry is also refused as a key of `vms[].sysctl`).
/// Names compare as the kernel compares them (`-` = `_`; in a `sysctl.` name, `/` = `.`).
pub const RUNNER_PARAMETERS: &[(&str, &str)] = &[
    (
        "console",
        "its serial console, console=ttyS0, records the guest's log: another console moves /dev/console away from it",
    ),
    ("panic", "with panic=-1 a kernel panic ends QEMU at once instead of at the boot timeout"),
    ("rdinit", "its init starts the guest agent: with another init the agent never answers"),
    ("init", "its init starts the guest agent: with another init the agent never answers"),
    (
        "earlycon",
        "its serial console, console=ttyS0, records the guest's log: an early console writes the boot to another place",
    ),
    (
        "earlyprintk",
        "its serial console, console=ttyS0, records the guest's log: an early console writes the boot to another place",
    ),
    ("root", "the guest starts from its initramfs, whose init mounts the VM's root disk itself"),
    ("rootfstype", "the guest starts from its initramfs, whose init mounts the VM's root disk itself"),
    ("initrd", "it passes its own initramfs"),
    ("noinitrd", "it boots from its own initramfs"),
    ("net.ifnames", "its init configures the NIC by the name eth0"),
    ("ip", "it gives the guest its address after boot, through the guest agent: kernel IP autoconfiguration would fight it"),
    ("nfsaddrs", "it gives the guest its address after boot, through the guest agent: kernel IP autoconfiguration would fight it"),
    ("maxcpus", "it gives the guest the VM's cpus: with QEMU's -smp, and maxcpus= would quietly cut them; set cpus: instead"),
    ("nr_cpus", "it gives the guest the VM's cpus: with QEMU's -smp, and nr_cpus= would quietly cut them; set cpus: instead"),
    (
        "possible_cpus",
        "it gives the guest the VM's cpus: with QEMU's -smp, and possible_cpus= would contradict them; set cpus: instead",
    ),
    ("nosmp", "it gives the guest the VM's cpus: with QEMU's -smp, and nosmp would cut them to one; set cpus: instead"),
    (
        "sysctl.kernel.panic",
        "it boots with panic=-1 so that a kernel panic ends QEMU at once and the VM shows as crashed; with kernel.panic=0 a panicked guest hangs until the timeout",
    ),
];

/// Prefix of the parameters `/sbin/vmrepro-init` reads (`vmrepro.hostname`,
/// `vmrepro.ip`, `vmrepro.mtu`, from older runners; the runner now gives a guest its
/// identity through the guest agent, see [`super::state::identity_script`]): a suite's
/// would configure eth0 behind the runner's back.
pub const RUNNER_PREFIX: &str = "vmrepro.";

/// The runner's own part of every guest's kernel command line: serial console,
/// panic → exit, its initramfs's init, eth0 by that name.
pub const RUNNER_CMDLINE: &str = "console=ttyS0 panic=-1 rdinit=/init net.ifnames=0";

/// The kernel command line for a guest: serial console, panic → exit, our initramfs,
/// eth0 by that name, then the suite's `cmdline:`. Nothing in it differs between VMs
/// that boot the same kernel with the same `cmdline:`, so one saved state serves them
/// all ([`super::state`]).
pub fn kernel_cmdline(extra: Option<&str>) -> String {
    let mut s = String::from(RUNNER_CMDLINE);
    for e in extra.into_iter().chain(host_cmdline().as_deref()) {
        s.push(' ');
        s.push_str(e);
    }
    s
}

/// Environment variable with kernel parameters the host's user adds to every guest's
/// command line, after the suite's: for breaking a guest's boot on purpose (the failure
/// tests: `mem=24M`, `module_blacklist=virtio_console`) or debugging one by hand. It
/// is read from the runner's own environment, never from a suite, a bundle or a run
/// folder, so the suite checker's command-line rules (SECURITY.md) don't apply to it;
/// it is part of the saved-state key like the rest of the line.
pub const HOST_CMDLINE_ENV: &str = "VMREPRO_HOST_CMDLINE";

/// [`HOST_CMDLINE_ENV`], trimmed; `None` when unset or blank.
fn host_cmdline() -> Option<String> {
    let v = std::env::var(HOST_CMDLINE_ENV).ok()?;
    let v = v.trim();
    (!v.is_empty()).then(|| v.to_string())
}

/// `qemu-cmdline.txt`'s line for `c`: `<qemu_binary()> <qemu_args(c)>`, shell-quoted,
/// behind `taskset -c N` when the VM is pinned to host CPU N (`--pin`), so that the
/// line run by hand starts QEMU as the runner did. A [`GuestRam::Shared`] guest's line
/// opens a new file under `/dev/shm` as descriptor [`RAM_FD`] in place of the
/// runner's memfd; a mapped restore's line (`-incoming defer`) comes after a comment
/// naming the QMP commands that start its load.
pub fn command_line(c: &QemuConfig) -> String {
    let mut line = shell_line(&super::qemu_binary(), &qemu_args(c));
    if c.ram == GuestRam::Shared {
        line.push_str(&format!(" {RAM_FD}<>\"$(mktemp /dev/shm/vmrepro-ram.XXXXXX)\""));
    }
    if let Some(cpu) = c.pinned_cpu {
        line = format!("taskset -c {cpu} {line}");
    }
    match (&c.incoming, &c.ram) {
        (Some(state), GuestRam::Mapped(_)) => format!(
            "# then on the QMP socket: migrate-set-capabilities x-ignore-shared on; migrate-incoming file:{}\n{line}",
            state.display()
        ),
        _ => line,
    }
}

/// Renders an argv as one shell-quoted line, for `qemu-cmdline.txt` (to re-run by hand).
pub fn shell_line(program: &str, args: &[String]) -> String {
    let quote = |s: &str| {
        if !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || "-_=,./:+@".contains(c)) {
            s.to_string()
        } else {
            format!("'{}'", s.replace('\'', r"'\''"))
        }
    };
    std::iter::once(quote(program)).chain(args.iter().map(|a| quote(a))).collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `qemu-cmdline.txt` runs by hand: a booting guest's line opens a file as the
    /// RAM descriptor; a mapped restore's says how its load starts.
    #[test]
    fn the_command_line_file_says_what_the_runner_adds_by_hand() {
        let booting = QemuConfig {
            ram: GuestRam::Shared,
            ..super::super::state::tests::config("a", Accelerator::Tcg, 384, None)
        };
        let line = command_line(&booting);
        assert!(line.ends_with(" 3<>\"$(mktemp /dev/shm/vmrepro-ram.XXXXXX)\""), "{line}");
        assert!(line.contains("mem-path=/proc/self/fd/3,share=on"), "{line}");
        let restored = QemuConfig {
            ram: GuestRam::Mapped("/cache/vmstate/k/ram".into()),
            incoming: Some("/cache/vmstate/k/state".into()),
            pinned_cpu: Some(1),
            ..booting
        };
        let text = command_line(&restored);
        let (comment, line) = text.split_once('\n').expect("two lines");
        assert_eq!(
            comment,
            "# then on the QMP socket: migrate-set-capabilities x-ignore-shared on; migrate-incoming file:/cache/vmstate/k/state"
        );
        assert!(line.starts_with("taskset -c 1 ") && line.ends_with("-incoming defer"), "{line}");
    }

    /// Every parameter the runner writes is one a suite may not give.
    #[test]
    fn runner_parameters_cover_the_runners_command_line() {
        let line = kernel_cmdline(None);
        for token in line.split(' ') {
            let name = token.split('=').next().unwrap_or(token);
            assert!(
                name.starts_with(RUNNER_PREFIX) || RUNNER_PARAMETERS.iter().any(|(p, _)| *p == name),
                "{name} is set by kernel_cmdline but not listed"
            );
        }
    }
}
