//! Saved VM state: boot a kind of VM once, save its state after the guest agent first
//! answers, and start later VMs of the same kind from that state instead of booting.
//!
//! **Saving.** A VM that booted (its kind had no saved state) is migrated to a file
//! with QMP `migrate` `file:<path>` (QEMU ≥ 8.2): with copied RAM the guest runs while
//! its memory is copied and stops only for the last pass; with mapped RAM (below) the
//! stream is the device state alone and the guest stays stopped while the runner
//! writes its RAM out. Stopping also flushes its disks. Its qcow2 root overlay is then
//! copied beside the memory, and the VM resumes (`cont`) and runs its steps. The entry, `<cache>/vmstate/<key>/` ([`STATE_FILE`], [`ROOT_FILE`],
//! [`CONSOLE_FILE`], [`META_FILE`]), is written like every cache entry (build folder,
//! `fsync`, rename; [`crate::infra::images::cache::Cache::begin_entry`]), with
//! [`RAM_FILE`] when the RAM is mapped (below): one VM saves it,
//! and VMs of the same kind that boot at the same time just boot.
//!
//! **Restoring.** QEMU starts with the same arguments plus `-incoming file:<state>`
//! (`-incoming defer` and the mapped RAM file, for a mapped state), its
//! root overlay backed by the saved overlay (so the disk is what the saved guest's page
//! cache expects), and resumes where the saved guest stopped: its guest agent answers in
//! a fraction of a second instead of a boot's seconds.
//!
//! **The RAM: mapped, not copied** ([`StateRam::Mapped`], the default). A booting VM's
//! RAM is a memfd mapped shared ([`GuestRam::Shared`]), and its save sets the
//! `x-ignore-shared` migration capability, so the migration stream holds only the
//! device state (0.7 MB for a q35 guest, with QEMU's firmware and option ROMs); the
//! runner then copies the stopped guest's RAM out of the memfd into [`RAM_FILE`],
//! skipping the pages that are zero ([`write_ram_file`]). A
//! restored VM maps that file privately, copy-on-write ([`GuestRam::Mapped`]), starts
//! with `-incoming defer` and loads the device state over QMP with the same capability
//! ([`super::qmp::Qmp::load_state`]): the load reads no RAM, the guest reads the pages it
//! touches from the host's page cache, and every VM restored from the file shares the
//! pages none of them wrote. The fallback, [`StateRam::Copied`], is the stream with the
//! RAM in it (QEMU's anonymous memory): used when the host can't make a memfd, and
//! recorded per VM in `run.json` (`vms[].state_ram`). The two kinds of state have
//! different keys.
//!
//! **What a kind is** ([`state_key`]): the SHA-256 of QEMU's version, [`STATE_FORMAT`],
//! the kernel's and rootfs's cache keys, the size and modification time of the disk
//! images a restored guest's page cache sits on (rebuilt under the same key, an ext4
//! image differs: mkfs picks a new UUID), the host CPU and kernel (with KVM, whose
//! `-cpu host` copies the CPU), and QEMU's whole argument vector with the per-VM parts (name, sockets,
//! files, tap, MAC) replaced by placeholders: memory, vCPUs, accelerator, the kernel
//! command line (with the suite's `cmdline:`) and every device are in it.
//!
//! **Identity.** Nothing that differs between VMs of a kind is in the saved state:
//! the kernel command line has no host name or address, the guest's init gives eth0 no
//! address, and eth0 is taken down before the save (no link, no IPv6 address, nothing
//! sent from the saving VM's MAC). After the agent answers, booted or restored, the runner
//! applies the VM's identity with one command ([`identity_script`]): host name, MAC,
//! MTU, address, clock, and host randomness mixed into the guest's entropy pool.
//!
//! What a restored guest shares with the guest that was saved (and with every other
//! VM restored from the same state): its boot log (`dmesg`), `uptime`,
//! `/proc/sys/kernel/random/boot_id`, and everything in its memory: the same start
//! state on every run. Its random-number generator is reseeded with host randomness
//! by the identity command.

use std::path::{Path, PathBuf};

use super::args::{qemu_args, GuestRam, QemuConfig};

/// Cache kind of saved VM states.
pub const KIND: &str = "vmstate";
/// The migration stream (QMP `migrate` to `file:`).
pub const STATE_FILE: &str = "state";
/// The guest's RAM when the state was saved, as a sparse file of the guest's memory
/// size (only in [`StateRam::Mapped`] states).
pub const RAM_FILE: &str = "ram";
/// The root overlay as it was when the state was saved (qcow2, backed by the rootfs).
pub const ROOT_FILE: &str = "root.qcow2";
/// The saved guest's serial console up to the save.
pub const CONSOLE_FILE: &str = "console.log";
/// What the entry is (JSON, [`StateMeta`]).
pub const META_FILE: &str = "meta.json";
/// Changes when what a saved state must contain changes (the identity protocol, the
/// files of an entry): older entries are then not used.
pub const STATE_FORMAT: u32 = 1;
/// Oldest QEMU that can migrate to and from a file (`file:` URIs: QEMU 8.2).
pub const MIN_QEMU: (u32, u32) = (8, 2);

/// What an entry was saved from, written to [`META_FILE`] for `vmrepro images list`.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct StateMeta {
    /// `uname -r` of the guest's kernel.
    pub kernel_release: String,
    /// The rootfs (`bookworm-nfs`, `bookworm-nfs+iperf3`).
    pub rootfs: String,
    /// Guest memory, MiB.
    pub memory_mib: u64,
    /// The VM (and suite) it was saved from.
    pub saved_from: String,
    /// Bytes of guest RAM written.
    pub ram_bytes: u64,
    /// Seconds the save took (migration and overlay copy).
    pub took_s: f64,
}

/// How saved states hold the guest's RAM (see the module docs).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StateRam {
    /// A RAM file beside the device state, mapped copy-on-write by each restored VM.
    #[default]
    Mapped,
    /// The RAM inside the migration stream, copied into each restored VM (the fallback).
    Copied,
}

/// Whether this host's QEMU can save and restore VM state, and the inputs of every
/// [`state_key`] that don't depend on the VM.
#[derive(Debug, Clone)]
pub struct StateSupport {
    /// First line of `qemu-system-x86_64 --version`.
    pub qemu_version: String,
    /// The host CPU's model name and flags (`/proc/cpuinfo`) and the host kernel's
    /// release, for KVM keys.
    pub host_cpu: String,
    /// How the states hold the guest's RAM.
    pub ram: StateRam,
    /// Why the states fall back to [`StateRam::Copied`] though [`StateRam::Mapped`]
    /// was asked for, as a sentence.
    pub ram_fallback: Option<String>,
}

impl StateSupport {
    /// Checks QEMU's version (`qemu_version`, the first line of its `--version`: at
    /// least [`MIN_QEMU`], which also has the `rom=` property a [`GuestRam::Mapped`]
    /// RAM needs); `host_kernel` is the host's `/proc/sys/kernel/osrelease` (both as
    /// the run's environment record read them). `ram` is how the states should hold
    /// the RAM; [`StateRam::Mapped`] falls back to [`StateRam::Copied`] when the host
    /// can't create a memfd (`memfd_create`, Linux ≥ 3.17) or this host's QEMU can't
    /// map one as guest RAM ([`qemu_maps_memfd`], asked once per process).
    ///
    /// Errors: the reason saved states can't be used, as a sentence.
    pub fn probe(qemu_version: &str, host_kernel: &str, ram: StateRam) -> Result<StateSupport, String> {
        let version = qemu_version.to_string();
        match parse_qemu_version(&version) {
            Some(v) if v >= MIN_QEMU => {}
            Some((a, b)) => {
                return Err(format!(
                    "QEMU {a}.{b} can't save VM state to a file (needs {}.{}); every VM boots",
                    MIN_QEMU.0, MIN_QEMU.1
                ))
            }
            None => return Err(format!("can't read QEMU's version from {version:?}; every VM boots")),
        }
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let first = cpuinfo.split("\n\n").next().unwrap_or_default();
        let host_cpu = first
            .lines()
            .filter(|l| l.starts_with("model name") || l.starts_with("flags"))
            .chain(std::iter::once(host_kernel.trim()))
            .collect::<Vec<_>>()
            .join("\n");
        let (ram, ram_fallback) = match ram {
            StateRam::Mapped => {
                static ANSWER: std::sync::OnceLock<Result<(), String>> = std::sync::OnceLock::new();
                match ANSWER.get_or_init(qemu_maps_memfd) {
                    Ok(()) => (StateRam::Mapped, None),
                    Err(e) => (
                        StateRam::Copied,
                        Some(format!("saved states carry the guest's RAM in their migration stream: {e}")),
                    ),
                }
            }
            StateRam::Copied => (StateRam::Copied, None),
        };
        Ok(StateSupport { qemu_version: version, host_cpu, ram, ram_fallback })
    }

    /// The RAM a VM of a kind that may be saved boots with.
    pub fn booting_ram(&self) -> GuestRam {
        match self.ram {
            StateRam::Mapped => GuestRam::Shared,
            StateRam::Copied => GuestRam::Anonymous,
        }
    }
}

/// A new memfd for a [`GuestRam::Shared`] guest's RAM (close-on-exec; QEMU gets it as
/// [`super::args::RAM_FD`]).
///
/// Errors: `memfd_create` failed.
pub fn memfd() -> std::io::Result<std::os::fd::OwnedFd> {
    // `MFD_NOEXEC_SEAL` (Linux ≥ 6.3): guest RAM is never executed by the host, and
    // with `vm.memfd_noexec` ≥ 1 a memfd without it is refused or warned about; older
    // kernels refuse the flag (EINVAL), and get the memfd without it.
    const MFD_NOEXEC_SEAL: libc::c_uint = 0x0008;
    let create = |flags| {
        // SAFETY: a NUL-terminated name and flags.
        unsafe { libc::memfd_create(c"vmrepro-guest-ram".as_ptr(), flags) }
    };
    let mut fd = create(libc::MFD_CLOEXEC | MFD_NOEXEC_SEAL);
    if fd < 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::EINVAL) {
        fd = create(libc::MFD_CLOEXEC);
    }
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: `fd` is a new descriptor nothing else owns.
    let owned: std::os::fd::OwnedFd = unsafe { std::os::fd::FromRawFd::from_raw_fd(fd) };
    // Above the standard descriptors and RAM_FD (a runner started with one of 0-2
    // closed would get the memfd there, and a child's dup2 onto it would clobber it).
    // SAFETY: F_DUPFD_CLOEXEC on a descriptor this function owns.
    let high = unsafe { libc::fcntl(std::os::fd::AsRawFd::as_raw_fd(&owned), libc::F_DUPFD_CLOEXEC, 10) };
    if high < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: `high` is a new descriptor nothing else owns; `owned` is closed on return.
    Ok(unsafe { std::os::fd::FromRawFd::from_raw_fd(high) })
}

/// Whether QEMU here can take a memfd as guest RAM the way a [`GuestRam::Shared`]
/// guest gets it: `qemu-system-x86_64 -machine none` with a 2 MiB
/// `memory-backend-file` on `/proc/self/fd/3` (a new memfd) and QMP on stdin, told to
/// `quit`; bounded by 10 s.
///
/// Errors: why not, as words (no memfd, QEMU didn't start, or it exited with an error:
/// its last stderr line).
pub fn qemu_maps_memfd() -> Result<(), String> {
    use std::io::Write;
    use std::os::fd::AsRawFd;
    let fd = memfd().map_err(|e| format!("no memfd ({e})"))?;
    let raw = fd.as_raw_fd();
    let mut cmd = std::process::Command::new(super::qemu_binary());
    cmd.args(["-machine", "none", "-nodefaults", "-display", "none", "-object"])
        .arg(format!("memory-backend-file,id=probe,size=2M,mem-path=/proc/self/fd/{},share=on", super::args::RAM_FD))
        .args(["-qmp", "stdio"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped());
    // SAFETY: dup2/fcntl only (async-signal-safe), on a descriptor this function owns.
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(&mut cmd, move || super::vm::inherit_as(raw, super::args::RAM_FD))
    };
    let mut child = cmd.spawn().map_err(|e| format!("QEMU did not start ({e})"))?;
    if let Some(mut stdin) = child.stdin.take() {
        let _ = stdin.write_all(b"{\"execute\":\"qmp_capabilities\"}\n{\"execute\":\"quit\"}\n");
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let status = loop {
        match child.try_wait() {
            Ok(Some(st)) => break st,
            Ok(None) if std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(10))
            }
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return Err("QEMU with a memfd as guest RAM did not quit within 10 s".into());
            }
        }
    };
    let mut stderr = String::new();
    if let Some(mut e) = child.stderr.take() {
        let _ = std::io::Read::read_to_string(&mut e, &mut stderr);
    }
    if status.success() {
        Ok(())
    } else {
        let last = stderr.lines().last().unwrap_or("no message").trim().to_string();
        Err(format!("QEMU can't map a memfd as guest RAM ({status}: {last})"))
    }
}

/// Bytes of a page of guest RAM that [`write_ram_file`] skips when it is all zeros.
const PAGE: usize = 4096;

/// Writes the guest RAM in `src` (a stopped [`GuestRam::Shared`] guest's memfd, `size`
/// bytes) to a new file `dst` of the same size, leaving every all-zero 4 KiB page a hole,
/// readable by its owner only (mode 0600, as QEMU writes [`STATE_FILE`]: guest memory).
/// Returns the bytes written (the non-zero pages). Checks `stop` before each 2 MiB.
///
/// Errors: reading `src` or writing `dst` failed, or `stop` was set (`Interrupted`).
pub fn write_ram_file(
    src: &std::fs::File,
    size: u64,
    dst: &Path,
    stop: &std::sync::atomic::AtomicBool,
) -> std::io::Result<u64> {
    use std::os::unix::fs::FileExt;
    const CHUNK: usize = 2 << 20;
    let out = std::os::unix::fs::OpenOptionsExt::mode(
        std::fs::OpenOptions::new().write(true).create(true).truncate(true),
        0o600,
    )
    .open(dst)?;
    let mut buf = vec![0u8; CHUNK];
    let mut written = 0u64;
    let mut at = 0u64;
    while at < size {
        if stop.load(std::sync::atomic::Ordering::Relaxed) {
            return Err(std::io::Error::new(std::io::ErrorKind::Interrupted, "the save was given up"));
        }
        let n = (CHUNK as u64).min(size - at) as usize;
        src.read_exact_at(&mut buf[..n], at)?;
        // Runs of non-zero pages, each written with one call.
        let mut run: Option<usize> = None;
        for page in (0..n).step_by(PAGE).chain(std::iter::once(n)) {
            let zero = page == n || buf[page..(page + PAGE).min(n)].iter().all(|b| *b == 0);
            match (zero, run) {
                (false, None) => run = Some(page),
                (true, Some(from)) => {
                    out.write_all_at(&buf[from..page], at + from as u64)?;
                    written += (page - from) as u64;
                    run = None;
                }
                _ => {}
            }
        }
        at += n as u64;
    }
    out.set_len(size)?;
    Ok(written)
}

/// `(major, minor)` of `QEMU emulator version 10.0.2 (…)`.
pub fn parse_qemu_version(line: &str) -> Option<(u32, u32)> {
    let v = line.split("version ").nth(1)?.split_whitespace().next()?;
    let mut it = v.split('.');
    Some((it.next()?.parse().ok()?, it.next()?.parse().ok()?))
}

/// The key of the kind of VM `config` boots (see the module docs): equal for two VMs
/// exactly when one may start from the other's saved state.
/// `base_images` are the disk images under the guest's page cache (the rootfs image,
/// the modules disk): their sizes and modification times count.
pub fn state_key(
    config: &QemuConfig,
    kernel_key: &str,
    rootfs_key: &str,
    base_images: &[&Path],
    support: &StateSupport,
) -> String {
    let placeholder = |s: &str| PathBuf::from(format!("/vmstate/{s}"));
    let generic = QemuConfig {
        name: "vm".into(),
        initrd: placeholder("initrd"),
        root_overlay: placeholder("root.qcow2"),
        tap: "tap".into(),
        mac: "52:54:00:00:00:00".into(),
        qmp_socket: placeholder("qmp"),
        qga_socket: placeholder("qga"),
        console_log: placeholder("console"),
        shell_socket: placeholder("shell"),
        // A booting guest's shared memfd and a restored guest's mapped file are the
        // same kind of RAM; QEMU's anonymous RAM (the copied states) is another.
        ram: match config.ram {
            GuestRam::Anonymous => GuestRam::Anonymous,
            GuestRam::Shared | GuestRam::Mapped(_) => GuestRam::Mapped(placeholder(RAM_FILE)),
        },
        incoming: None,
        console_append: false,
        pinned_cpu: None,
        // A netfilter holds no guest state: a saved state serves VMs with and without one.
        capture: None,
        ..config.clone()
    };
    let cpu = match config.accel {
        super::args::Accelerator::Kvm => support.host_cpu.as_str(),
        super::args::Accelerator::Tcg => "",
    };
    let stamps: Vec<String> = base_images
        .iter()
        .map(|p| {
            let m = std::fs::metadata(p).ok();
            let mtime =
                m.as_ref().and_then(|m| m.modified().ok()).and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok());
            format!("{} {} {}", p.display(), m.map_or(0, |m| m.len()), mtime.map_or(0, |d| d.as_nanos()))
        })
        .collect();
    let text = serde_json::json!({
        "bases": stamps,
        "format": STATE_FORMAT,
        "qemu": support.qemu_version,
        "kernel": kernel_key,
        "rootfs": rootfs_key,
        "host_cpu": cpu,
        "args": qemu_args(&generic),
    });
    crate::infra::hash::sha256_hex(text.to_string().as_bytes())
}

/// Whether `path` can be given to QEMU as a `file:` migration URI (QEMU splits its
/// options at commas).
pub fn usable_path(path: &Path) -> bool {
    !path.to_string_lossy().contains(',')
}

/// The command run in a booted guest just before its state is saved: it runs the
/// programs of [`identity_script`] that boot did not (`perl`, `date`) once, so that their
/// files are in the saved guest's page cache and a restored guest's identity command
/// does not read them from its disk first, then takes eth0 down (the state then holds
/// no link, no IPv6 address and sends nothing from the saved MAC). Its exit status is
/// that of `ip link set eth0 down`.
pub const PRE_SAVE_SCRIPT: &str = "perl -e 1 >/dev/null 2>&1; date >/dev/null 2>&1; ip link set eth0 down";

/// Bytes of host randomness [`identity_script`] mixes into the guest's entropy pool
/// (sent on its stdin).
pub const IDENTITY_RANDOM_BYTES: usize = 64;

/// The command that gives a booted or restored guest its identity, run through the
/// guest agent with [`IDENTITY_RANDOM_BYTES`] of host randomness on stdin: the bytes
/// are written to `/dev/urandom` (mixed into the input pool, not credited) and the
/// kernel's generator is reseeded from that pool at once (`RNDRESEEDCRNG`, ioctl
/// 0x5207, Linux ≥ 4.17, through perl, which every Debian rootfs has), so that VMs
/// restored from one state don't draw the same random numbers;
/// `/proc/sys/kernel/hostname` and `/etc/hostname`; eth0 down (dropping the IPv6
/// link-local address made from the saved MAC), its MAC, MTU and address, and up; the
/// clock set to `now_s` (the host's clock, seconds since the epoch, with GNU `date`).
/// Its output's first line is the guest's kernel release (`/proc/sys/kernel/osrelease`),
/// which the runner checks on a restored guest (one command instead of two: under TCG
/// each costs a process start in the guest and a guest-agent round trip).
/// `cidr` is `ADDR/PREFIX`. All inputs come from the plan (names and addresses the
/// suite checker accepted, a MAC and MTU the runner chose), not from suite text.
pub fn identity_script(hostname: &str, mac: &str, mtu: u32, cidr: &str, now_s: f64) -> String {
    format!(
        "set -e
cat > /dev/urandom
cat /proc/sys/kernel/osrelease
perl -e 'open(my $f, \">\", \"/dev/urandom\") or exit 0; ioctl($f, 0x5207, 0); exit 0'
echo {hostname} > /proc/sys/kernel/hostname
echo {hostname} > /etc/hostname
date -u -s @{now_s:.3} > /dev/null
i=0
while [ ! -e /sys/class/net/eth0 ] && [ \"$i\" -lt 200 ]; do sleep 0.05; i=$((i + 1)); done
ip -force -batch - <<'EOF'
link set lo up
link set eth0 down
address flush dev eth0
link set eth0 address {mac} mtu {mtu}
address add {cidr} dev eth0
link set eth0 up
EOF
"
    )
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::infra::qemu::args::Accelerator;

    /// A VM's QEMU configuration with paths under `/tmp/run-NAME`.
    pub(crate) fn config(name: &str, accel: Accelerator, memory_mib: u64, extra: Option<&str>) -> QemuConfig {
        let p = |s: &str| PathBuf::from(format!("/tmp/run-{name}/{s}"));
        QemuConfig {
            name: name.into(),
            memory_mib,
            cpus: 1,
            accel,
            kernel: "/cache/kernel/k1/vmlinuz".into(),
            initrd: p("initrd.cpio"),
            append: crate::infra::qemu::args::kernel_cmdline(extra),
            root_overlay: p("root.qcow2"),
            modules_disk: Some("/cache/kernel/k1/modules.ext4".into()),
            tap: format!("tap-{name}"),
            mac: crate::infra::net::mac_for("suite", name),
            qmp_socket: p("qmp.sock"),
            qga_socket: p("qga.sock"),
            console_log: p("console.log"),
            shell_socket: p("shell.sock"),
            ram: GuestRam::Anonymous,
            incoming: None,
            console_append: false,
            pinned_cpu: None,
            capture: None,
        }
    }

    fn support() -> StateSupport {
        StateSupport {
            qemu_version: "QEMU emulator version 10.0.2".into(),
            host_cpu: "flags: vmx".into(),
            ram: StateRam::Mapped,
            ram_fallback: None,
        }
    }

    #[test]
    fn vms_that_differ_only_in_identity_share_a_key() {
        let s = support();
        let a = state_key(&config("client-a", Accelerator::Tcg, 384, None), "k1", "r1", &[], &s);
        let b = state_key(&config("client-b", Accelerator::Tcg, 384, None), "k1", "r1", &[], &s);
        assert_eq!(a, b);
        let mut restored = config("client-c", Accelerator::Tcg, 384, None);
        restored.incoming = Some("/cache/vmstate/x/state".into());
        restored.console_append = true;
        assert_eq!(state_key(&restored, "k1", "r1", &[], &s), a, "a restored VM is of the kind it was restored from");
    }

    #[test]
    fn a_mapped_state_serves_booting_and_restored_vms_and_no_copied_one() {
        let s = support();
        let with = |ram: GuestRam| {
            let mut c = config("client-a", Accelerator::Tcg, 384, None);
            c.ram = ram;
            state_key(&c, "k1", "r1", &[], &s)
        };
        let booting = with(GuestRam::Shared);
        assert_eq!(
            booting,
            with(GuestRam::Mapped("/cache/vmstate/x/ram".into())),
            "saved from a memfd, mapped from a file"
        );
        assert_ne!(booting, with(GuestRam::Anonymous), "a copied state is another kind");
    }

    /// The QEMU here maps a memfd handed over as descriptor 3, and a child that was not
    /// handed it has no such descriptor.
    #[test]
    fn qemu_takes_the_memfd_as_descriptor_3_and_no_other_child_sees_it() {
        assert_eq!(qemu_maps_memfd(), Ok(()));
        let fd = memfd().unwrap();
        assert!(std::os::fd::AsRawFd::as_raw_fd(&fd) >= 10, "above the standard descriptors and RAM_FD");
        let link = |hand_over: bool| {
            let mut cmd = std::process::Command::new("readlink");
            cmd.arg(format!("/proc/self/fd/{}", super::super::args::RAM_FD));
            if hand_over {
                let raw = std::os::fd::AsRawFd::as_raw_fd(&fd);
                // SAFETY: dup2 only, in the child.
                unsafe {
                    std::os::unix::process::CommandExt::pre_exec(&mut cmd, move || {
                        super::super::vm::inherit_as(raw, super::super::args::RAM_FD)
                    })
                };
            }
            String::from_utf8_lossy(&cmd.output().unwrap().stdout).trim().to_string()
        };
        assert!(link(true).starts_with("/memfd:vmrepro-guest-ram"), "{}", link(true));
        assert!(!link(false).contains("vmrepro-guest-ram"), "{}", link(false));
    }

    #[test]
    fn the_ram_file_keeps_the_bytes_and_leaves_zero_pages_holes() {
        use std::os::unix::fs::MetadataExt;
        let dir = tempfile::tempdir().unwrap();
        let src_path = dir.path().join("memfd");
        let size = 8u64 << 20;
        let mut bytes = vec![0u8; size as usize];
        // Pages 1, 2 and 700 hold data (a run of two, then one alone), the last byte too.
        bytes[PAGE + 7] = 1;
        bytes[2 * PAGE] = 2;
        bytes[700 * PAGE + 4095] = 3;
        *bytes.last_mut().unwrap() = 4;
        std::fs::write(&src_path, &bytes).unwrap();
        let dst = dir.path().join(RAM_FILE);
        let go = std::sync::atomic::AtomicBool::new(false);
        let written = write_ram_file(&std::fs::File::open(&src_path).unwrap(), size, &dst, &go).unwrap();
        assert_eq!(written, 4 * PAGE as u64);
        assert_eq!(std::fs::read(&dst).unwrap(), bytes);
        let meta = std::fs::metadata(&dst).unwrap();
        assert_eq!(meta.len(), size);
        assert_eq!(meta.mode() & 0o777, 0o600, "guest memory, as private as the migration stream");
        assert!(meta.blocks() * 512 <= 16 * PAGE as u64, "{} bytes allocated for 4 pages", meta.blocks() * 512);
        let stopped = std::sync::atomic::AtomicBool::new(true);
        let e = write_ram_file(&std::fs::File::open(&src_path).unwrap(), size, &dst, &stopped).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::Interrupted);
    }

    #[test]
    fn anything_the_guest_could_see_changes_the_key() {
        let s = support();
        let base = state_key(&config("a", Accelerator::Tcg, 384, None), "k1", "r1", &[], &s);
        let others = [
            state_key(&config("a", Accelerator::Tcg, 512, None), "k1", "r1", &[], &s),
            state_key(&config("a", Accelerator::Kvm, 384, None), "k1", "r1", &[], &s),
            state_key(&config("a", Accelerator::Tcg, 384, Some("nosmt")), "k1", "r1", &[], &s),
            state_key(&config("a", Accelerator::Tcg, 384, None), "k2", "r1", &[], &s),
            state_key(&config("a", Accelerator::Tcg, 384, None), "k1", "r2", &[], &s),
            state_key(
                &config("a", Accelerator::Tcg, 384, None),
                "k1",
                "r1",
                &[],
                &StateSupport { qemu_version: "QEMU emulator version 10.1.0".into(), ..support() },
            ),
        ];
        for (i, k) in others.iter().enumerate() {
            assert_ne!(k, &base, "change {i} must change the key");
        }
        // The host CPU counts with KVM (-cpu host), not with TCG (-cpu max).
        let with_cpu = |accel, cpu: &str| {
            let support = StateSupport { host_cpu: cpu.into(), ..support() };
            state_key(&config("a", accel, 384, None), "k1", "r1", &[], &support)
        };
        assert_ne!(with_cpu(Accelerator::Kvm, "flags: vmx"), with_cpu(Accelerator::Kvm, "flags: vmx avx512f"));
        assert_eq!(with_cpu(Accelerator::Tcg, "flags: vmx"), with_cpu(Accelerator::Tcg, "flags: vmx avx512f"));
    }

    #[test]
    fn a_rebuilt_base_image_changes_the_key() {
        let dir = tempfile::tempdir().unwrap();
        let image = dir.path().join("rootfs.ext4");
        std::fs::write(&image, b"first build").unwrap();
        let c = config("a", Accelerator::Tcg, 384, None);
        let before = state_key(&c, "k1", "r1", &[&image], &support());
        assert_eq!(before, state_key(&c, "k1", "r1", &[&image], &support()));
        std::fs::write(&image, b"second build, same cache key").unwrap();
        assert_ne!(before, state_key(&c, "k1", "r1", &[&image], &support()));
    }

    #[test]
    fn qemu_versions_are_read_from_the_version_line() {
        assert_eq!(
            parse_qemu_version("QEMU emulator version 10.0.2 (Debian 1:10.0.2+ds-2+deb13u1~bpo12+1)"),
            Some((10, 0))
        );
        assert_eq!(parse_qemu_version("QEMU emulator version 7.2.15 (Debian 1:7.2+dfsg-7+deb12u12)"), Some((7, 2)));
        assert_eq!(parse_qemu_version("QEMU emulator version 8.2.0"), Some((8, 2)));
        assert_eq!(parse_qemu_version("qemu-system-x86_64: not found"), None);
        assert!(parse_qemu_version("QEMU emulator version 8.1.5").unwrap() < MIN_QEMU);
        assert!(parse_qemu_version("QEMU emulator version 8.2.0").unwrap() >= MIN_QEMU);
    }

    #[test]
    fn identity_sets_name_link_address_and_clock() {
        let s = identity_script("client-a", "52:54:00:9e:43:32", 1400, "10.77.0.11/24", 1_764_540_000.25);
        assert!(s.contains("echo client-a > /proc/sys/kernel/hostname"));
        assert!(s.contains("link set eth0 address 52:54:00:9e:43:32 mtu 1400"));
        assert!(s.contains("address add 10.77.0.11/24 dev eth0"));
        assert!(s.contains("date -u -s @1764540000.250"));
        let first_output = s.lines().find(|l| l.starts_with("cat /proc") || l.starts_with("echo"));
        assert_eq!(first_output, Some("cat /proc/sys/kernel/osrelease"), "the kernel release is the first line out");
        assert!(s.contains("ioctl($f, 0x5207, 0)"), "the generator is reseeded after the host's bytes are mixed in");
        // Down before the MAC changes, up after the address: the link-local address is
        // made again from the new MAC.
        let (down, up) = (s.find("link set eth0 down").unwrap(), s.find("link set eth0 up").unwrap());
        assert!(down < s.find("link set eth0 address").unwrap() && up > s.find("address add").unwrap());
    }

    #[test]
    fn paths_with_commas_are_not_given_to_qemu() {
        assert!(usable_path(Path::new("/root/.cache/vmrepro/vmstate/abc/state")));
        assert!(!usable_path(Path::new("/home/a,b/.cache/vmrepro/vmstate/abc/state")));
    }
}
