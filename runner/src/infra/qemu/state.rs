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
//! gives the VM its identity: host name, MAC, MTU, address, clock, and host randomness
//! mixed into the guest's entropy pool. A restored guest (and the guest that saved the
//! state) gets it from the identity helper ([`IdentityHelper`]), which the saving guest
//! started just before its save ([`pre_save_script`]) and which every restored guest
//! finds waiting; a booted guest that saved nothing, with one command
//! ([`identity_script`]).
//!
//! What a restored guest shares with the guest that was saved (and with every other
//! VM restored from the same state): its boot log (`dmesg`), `uptime`,
//! `/proc/sys/kernel/random/boot_id`, and everything in its memory: the same start
//! state on every run. Its random-number generator is reseeded with host randomness
//! when it is given its identity.

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
pub const STATE_FORMAT: u32 = 2;
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
        // What runs in the saved guest: a state saved with another identity helper
        // would answer another protocol.
        "pre_save": crate::infra::hash::sha256_hex(pre_save_script().as_bytes()),
    });
    crate::infra::hash::sha256_hex(text.to_string().as_bytes())
}

/// Whether `path` can be given to QEMU as a `file:` migration URI (QEMU splits its
/// options at commas).
pub fn usable_path(path: &Path) -> bool {
    !path.to_string_lossy().contains(',')
}

/// The identity helper: a small perl program that a saving guest starts just before
/// its state is saved, so that it is already running, its `ip` already started, in
/// every guest restored from that state. It waits for one request line on a FIFO,
/// applies it without starting a process (randomness to `/dev/urandom` and the
/// `RNDRESEEDCRNG` ioctl, host name, `clock_settime`, eth0 through the `ip -force
/// -batch -` it started), answers in a file and exits. The runner writes the request
/// and reads the answer with the guest agent's file commands
/// ([`super::vm::Vm::exchange`]): under TCG a just-restored guest starts each process
/// slowly, and the identity command ([`identity_script`]: `sh`, `cat`, `perl`, `date`,
/// `ip`) was most of a restore's time.
///
/// Its files, in [`IdentityHelper::dir`]: `identity` (the FIFO, which the helper holds
/// open read-write, so that a writer never waits), `identity.ready` (the helper's PID,
/// written once it listens), `identity.out` (the answer, renamed into place whole:
/// `ok RELEASE` or `error: WHY`), `identity.err` (what `ip` printed), `identity.pl`.
/// Every path it touches and the clock syscall are fields, so that its tests run it on
/// the host against temporary files and a fake `ip` ([`IdentityHelper::GUEST`] is the
/// guest's).
#[derive(Debug, Clone, Copy)]
pub struct IdentityHelper<'a> {
    /// Folder of its files (`/run/vmrepro`, a tmpfs in the guest).
    pub dir: &'a str,
    /// `ip` (iproute2), by absolute path.
    pub ip: &'a str,
    /// Where the randomness goes (`/dev/urandom`).
    pub urandom: &'a str,
    /// The kernel's host name (`/proc/sys/kernel/hostname`).
    pub hostname: &'a str,
    /// The rootfs's host name file (`/etc/hostname`).
    pub etc_hostname: &'a str,
    /// The kernel release it answers with (`/proc/sys/kernel/osrelease`).
    pub osrelease: &'a str,
    /// The NIC it waits for before configuring it (`/sys/class/net/eth0`).
    pub eth0: &'a str,
    /// x86_64 syscall that takes `(CLOCK_REALTIME, &timespec)`: 227, `clock_settime`
    /// (its tests use 228, `clock_gettime`).
    pub clock_syscall: u32,
}

impl IdentityHelper<'static> {
    /// The helper as the guest runs it.
    pub const GUEST: IdentityHelper<'static> = IdentityHelper {
        dir: "/run/vmrepro",
        ip: "/sbin/ip",
        urandom: "/dev/urandom",
        hostname: "/proc/sys/kernel/hostname",
        etc_hostname: "/etc/hostname",
        osrelease: "/proc/sys/kernel/osrelease",
        eth0: "/sys/class/net/eth0",
        clock_syscall: 227,
    };
}

/// The helper's program, with `@NAME@` for each [`IdentityHelper`] field. Only core
/// perl, no module (under TCG, loading `POSIX.pm` in a guest cost about half a second).
/// SIGPIPE is ignored, so an `ip` that died makes an error answer, not a silent exit; a line
/// that is not a well-formed request changes nothing (`error: bad request`).
const HELPER_PERL: &str = r#"use strict;
$SIG{PIPE} = 'IGNORE';
my $dir = '@DIR@';
my ($fifo, $out, $ready, $err) = ("$dir/identity", "$dir/identity.out", "$dir/identity.ready", "$dir/identity.err");
sub answer {
    my ($text) = @_;
    if (open(my $f, '>', "$out.tmp")) {
        print $f "$text\n";
        close($f);
        rename("$out.tmp", $out);
    }
    exit 0;
}
unlink($fifo, $out, $ready);
# mknod(2) of a FIFO, mode 0600 (x86_64 syscall 133): POSIX::mkfifo would load POSIX.pm.
syscall(133, $fifo, 0010600, 0) == 0 or die "mkfifo $fifo: $!\n";
open(my $in, '+<', $fifo) or die "opening $fifo: $!\n";
my $helper = fork() // die "fork: $!\n";
if ($helper) {
    # The parent: exits 0 once the helper listens (its PID in $ready), 1 if it died or
    # took over 10 s (then it is killed).
    for (my $i = 0; $i < 1000 && !-e $ready; $i++) {
        last if waitpid($helper, 1) == $helper;
        select(undef, undef, undef, 0.01);
    }
    exit 0 if -e $ready;
    kill('KILL', $helper);
    exit 1;
}
open(STDIN, '<', '/dev/null') or die "stdin: $!\n";
open(STDOUT, '>', '/dev/null') or die "stdout: $!\n";
open(STDERR, '>', $err) or die "opening $err: $!\n";
open(my $ip, '|-', '@IP@', '-force', '-batch', '-') or die "starting @IP@: $!\n";
open(my $r, '>', "$ready.tmp") or die "opening $ready.tmp: $!\n";
print $r "$$\n";
close($r) or die "writing $ready.tmp: $!\n";
rename("$ready.tmp", $ready) or die "renaming $ready.tmp: $!\n";
my $line = <$in>;
defined($line) or answer('error: no request');
chomp($line);
$line =~ /\Av1 ([0-9a-f]{128}) ([a-z][a-z0-9-]{0,62}) ([0-9]{1,12})\.([0-9]{3}) ((?:[0-9a-f]{2}:){5}[0-9a-f]{2}) ([0-9]{2,5}) ([0-9]{1,3}(?:\.[0-9]{1,3}){3}\/[0-9]{1,2})\z/
    or answer('error: bad request');
my ($random, $name, $sec, $ms, $mac, $mtu, $cidr) = ($1, $2, $3, $4, $5, $6, $7);
if (open(my $u, '>', '@URANDOM@')) {
    syswrite($u, pack('H*', $random));
    ioctl($u, 0x5207, 0);
    close($u);
}
for my $file ('@HOSTNAME@', '@ETC_HOSTNAME@') {
    open(my $h, '>', $file) or answer("error: $file: $!");
    print $h "$name\n";
    close($h) or answer("error: $file: $!");
}
my $ts = pack('qq', $sec, $ms * 1000000);
syscall(@CLOCK@, 0, $ts) == 0 or answer("error: setting the clock: $!");
for (my $i = 0; !-e '@ETH0@' && $i < 200; $i++) {
    select(undef, undef, undef, 0.05);
}
print $ip "link set lo up\nlink set eth0 down\naddress flush dev eth0\nlink set eth0 address $mac mtu $mtu\naddress add $cidr dev eth0\nlink set eth0 up\n";
if (!close($ip)) {
    my $status = ($? & 127) ? 'signal ' . ($? & 127) : 'status ' . ($? >> 8);
    my $said = '';
    if (open(my $e, '<', $err)) {
        local $/;
        $said = <$e> // '';
    }
    $said =~ s/\s+/ /g;
    $said =~ s/ \z//;
    answer("error: ip exited with $status: $said");
}
open(my $o, '<', '@OSRELEASE@') or answer("error: @OSRELEASE@: $!");
my $release = <$o> // '';
chomp($release);
answer("ok $release");
"#;

impl IdentityHelper<'_> {
    /// The FIFO the request is written to.
    pub fn request_path(&self) -> String {
        format!("{}/identity", self.dir)
    }

    /// The answer file (`ok RELEASE` or `error: WHY`, one line).
    pub fn answer_path(&self) -> String {
        format!("{}/identity.out", self.dir)
    }

    /// The file holding the helper's PID once it listens.
    pub fn ready_path(&self) -> String {
        format!("{}/identity.ready", self.dir)
    }

    /// The perl program (see [`IdentityHelper`]).
    pub fn program(&self) -> String {
        HELPER_PERL
            .replace("@DIR@", self.dir)
            .replace("@IP@", self.ip)
            .replace("@URANDOM@", self.urandom)
            .replace("@HOSTNAME@", self.hostname)
            .replace("@ETC_HOSTNAME@", self.etc_hostname)
            .replace("@OSRELEASE@", self.osrelease)
            .replace("@ETH0@", self.eth0)
            .replace("@CLOCK@", &self.clock_syscall.to_string())
    }

    /// The shell command that writes the program to `identity.pl` and runs it: the
    /// program forks the helper and exits once the helper listens (within 10 s; else
    /// it kills it), with no polling process in between. Prints `identity helper
    /// ready` when it does, and otherwise why on stderr (its status is 0 either way).
    pub fn start_script(&self) -> String {
        let dir = self.dir;
        format!(
            "mkdir -p {dir} && chmod 0700 {dir}
cat > {dir}/identity.pl <<'VMREPRO_HELPER_EOF'
{program}VMREPRO_HELPER_EOF
if perl {dir}/identity.pl </dev/null >/dev/null 2>{dir}/identity.start-err; then
  echo 'identity helper ready'
else
  echo \"identity helper did not start: $(head -c 500 {dir}/identity.start-err) $(head -c 500 {dir}/identity.err 2>/dev/null)\" >&2
fi
",
            program = self.program()
        )
    }
}

/// The command run in a booted guest just before its state is saved: starts the
/// identity helper ([`IdentityHelper::start_script`]), then takes eth0 down (the state
/// then holds no link, no IPv6 address and sends nothing from the saved MAC). Its exit
/// status is that of `ip link set eth0 down`; its output has `identity helper ready`
/// when the helper listens.
pub fn pre_save_script() -> String {
    format!("{}ip link set eth0 down\n", IdentityHelper::GUEST.start_script())
}

/// What [`pre_save_script`] prints once the identity helper listens.
pub const HELPER_READY: &str = "identity helper ready";

/// The identity helper's request line: `v1`, `random` as lowercase hex (exactly
/// [`IDENTITY_RANDOM_BYTES`]), the host name, the clock (`now_s`, seconds since the
/// epoch, to the millisecond), the MAC, the MTU and `cidr` (`ADDR/PREFIX`),
/// space-separated, with a newline. The inputs are those of [`identity_script`].
pub fn identity_request(random: &[u8], hostname: &str, mac: &str, mtu: u32, cidr: &str, now_s: f64) -> String {
    let hex: String = random.iter().map(|b| format!("{b:02x}")).collect();
    format!("v1 {hex} {hostname} {now_s:.3} {} {mtu} {cidr}\n", mac.to_ascii_lowercase())
}

/// The kernel release in the identity helper's answer (`ok RELEASE`).
///
/// Errors: the helper's `error: WHY` (as `WHY`), or the answer as text when it is
/// neither.
pub fn parse_identity_answer(answer: &[u8]) -> Result<String, String> {
    let text = String::from_utf8_lossy(answer);
    let line = text.lines().next().unwrap_or_default().trim();
    if let Some(release) = line.strip_prefix("ok ") {
        return Ok(release.trim().to_string());
    }
    match line.strip_prefix("error: ") {
        Some(why) => Err(why.to_string()),
        None => Err(format!("an answer that is neither ok nor error: {line:?}")),
    }
}

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
/// `cidr` is `ADDR/PREFIX`. It first stops an identity helper that is still waiting
/// (the fallback when a saving guest's helper failed). All inputs come from the plan (names and addresses the
/// suite checker accepted, a MAC and MTU the runner chose), not from suite text.
pub fn identity_script(hostname: &str, mac: &str, mtu: u32, cidr: &str, now_s: f64) -> String {
    let ready = IdentityHelper::GUEST.ready_path();
    format!(
        "set -e
kill \"$(cat {ready} 2>/dev/null)\" 2>/dev/null || true
rm -f {ready}
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

    /// The identity helper, run on the host with every path it touches in a temporary
    /// folder, the clock syscall a read (`clock_gettime`) and `ip` a fake that records
    /// what it was told: nothing of the host is changed.
    struct HostHelper {
        dir: tempfile::TempDir,
        /// The helper's paths in `dir`: run folder, ip, urandom, hostname, etc-hostname,
        /// osrelease, eth0.
        paths: [String; 7],
    }

    impl HostHelper {
        fn path(&self, name: &str) -> String {
            self.dir.path().join(name).to_str().unwrap().to_string()
        }

        /// The helper's paths, with a fake `ip` that exits with `ip_status` (printing
        /// an RTNETLINK message when that is not 0).
        fn new(ip_status: u8) -> HostHelper {
            let dir = tempfile::tempdir().unwrap();
            let at = |n: &str| dir.path().join(n).to_str().unwrap().to_string();
            let paths = ["run", "ip", "urandom", "hostname", "etc-hostname", "osrelease", "eth0"].map(at);
            let h = HostHelper { dir, paths };
            let fake = format!(
                "#!/bin/sh\ncat > {}\n[ {ip_status} = 0 ] || echo 'RTNETLINK answers: Operation not permitted' >&2\nexit {ip_status}\n",
                h.path("ip.in")
            );
            std::fs::write(h.path("ip"), fake).unwrap();
            std::fs::set_permissions(h.path("ip"), std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
            std::fs::write(h.path("osrelease"), "6.1.0-test-amd64\n").unwrap();
            std::fs::write(h.path("eth0"), "").unwrap();
            std::fs::create_dir(h.path("run")).unwrap();
            h
        }

        fn helper(&self) -> IdentityHelper<'_> {
            let [dir, ip, urandom, hostname, etc_hostname, osrelease, eth0] = &self.paths;
            IdentityHelper { dir, ip, urandom, hostname, etc_hostname, osrelease, eth0, clock_syscall: 228 }
        }

        /// Starts the helper with `sh -c` of its start script (`PATH` only for the
        /// shell's own tools) and returns what the script printed.
        fn start(&self) -> String {
            let out = std::process::Command::new("/bin/sh")
                .arg("-c")
                .arg(self.helper().start_script())
                .env_clear()
                .env("PATH", "/usr/bin:/bin")
                .output()
                .unwrap();
            String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr)
        }

        /// Writes `line` into the FIFO (opened read-write: never waits) and returns the
        /// answer, waiting up to 10 s.
        fn ask(&self, line: &str) -> String {
            use std::io::Write;
            let h = self.helper();
            let mut fifo = std::fs::OpenOptions::new().read(true).write(true).open(h.request_path()).unwrap();
            fifo.write_all(line.as_bytes()).unwrap();
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
            while std::time::Instant::now() < deadline {
                if let Ok(a) = std::fs::read_to_string(h.answer_path()) {
                    return a;
                }
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            panic!("no answer within 10 s");
        }

        fn read(&self, name: &str) -> Vec<u8> {
            std::fs::read(self.path(name)).unwrap_or_default()
        }
    }

    impl Drop for HostHelper {
        fn drop(&mut self) {
            // A helper still waiting: a line that is no request makes it exit (opened
            // without waiting: with no helper left there is no reader, and it fails).
            let mut fifo = std::fs::OpenOptions::new();
            std::os::unix::fs::OpenOptionsExt::custom_flags(fifo.write(true), libc::O_NONBLOCK);
            if let Ok(mut f) = fifo.open(self.helper().request_path()) {
                let _ = std::io::Write::write_all(&mut f, b"stop\n");
            }
        }
    }

    #[test]
    fn the_helper_names_no_host_path_but_its_own() {
        let h = HostHelper::new(0);
        let helper = h.helper();
        let program = helper.start_script();
        let root = h.dir.path().to_str().unwrap();
        // Every absolute path (two components or more) is one of the test's.
        let paths = regex::Regex::new(r#"(?:^|[\s'"<>=(])(/[A-Za-z0-9_.-]+/[A-Za-z0-9_./-]+)"#).unwrap();
        let mut seen = 0;
        for m in paths.captures_iter(&program) {
            let path = &m[1];
            assert!(path.starts_with(root) || path == "/dev/null", "a host path in the helper: {path}");
            seen += 1;
        }
        assert!(seen > 10, "the scan finds the helper's paths ({seen})");
        // The guest's helper uses the files the runner reads and writes.
        let guest = IdentityHelper::GUEST.program();
        for f in ["identity\"", "identity.out\"", "identity.ready\""] {
            assert!(guest.contains(&format!("$dir/{f}")), "{f}");
        }
        assert!(guest.contains("my $dir = '/run/vmrepro';") && guest.contains("'/sbin/ip', '-force', '-batch', '-'"));
        assert!(guest.contains("syscall(227, 0, $ts)"), "clock_settime on x86_64");
    }

    #[test]
    fn the_pre_save_command_is_valid_shell() {
        let out = std::process::Command::new("/bin/sh").arg("-n").arg("-c").arg(pre_save_script()).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        assert!(pre_save_script().ends_with("ip link set eth0 down\n"));
        let out = std::process::Command::new("perl")
            .arg("-c")
            .arg("-e")
            .arg(IdentityHelper::GUEST.program())
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    }

    // x86_64 syscall numbers (mknod 133, clock_gettime 228).
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn the_helper_applies_a_request_and_answers_with_the_release() {
        let h = HostHelper::new(0);
        assert_eq!(h.start().trim(), HELPER_READY);
        let random: Vec<u8> = (0..IDENTITY_RANDOM_BYTES as u8).collect();
        let request =
            identity_request(&random, "client-a", "52:54:00:9E:43:32", 1400, "10.77.0.11/24", 1_764_540_000.25);
        assert!(request.contains(" 1764540000.250 52:54:00:9e:43:32 1400 10.77.0.11/24\n"), "{request}");
        let answer = h.ask(&request);
        assert_eq!(parse_identity_answer(answer.as_bytes()), Ok("6.1.0-test-amd64".to_string()));
        assert_eq!(h.read("urandom"), random, "the host's bytes, as bytes");
        assert_eq!(h.read("hostname"), b"client-a\n");
        assert_eq!(h.read("etc-hostname"), b"client-a\n");
        let ip = String::from_utf8(h.read("ip.in")).unwrap();
        assert_eq!(
            ip,
            "link set lo up\nlink set eth0 down\naddress flush dev eth0\nlink set eth0 address 52:54:00:9e:43:32 mtu 1400\naddress add 10.77.0.11/24 dev eth0\nlink set eth0 up\n"
        );
    }

    // x86_64 syscall numbers (mknod 133, clock_gettime 228).
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn an_ip_that_fails_is_an_error_answer_with_its_message() {
        let h = HostHelper::new(2);
        assert_eq!(h.start().trim(), HELPER_READY);
        let request =
            identity_request(&[7; IDENTITY_RANDOM_BYTES], "server", "52:54:00:00:00:01", 1500, "10.0.0.1/24", 1.0);
        let answer = h.ask(&request);
        assert_eq!(
            parse_identity_answer(answer.as_bytes()),
            Err("ip exited with status 2: RTNETLINK answers: Operation not permitted".to_string())
        );
    }

    // x86_64 syscall numbers (mknod 133, clock_gettime 228).
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn a_line_that_is_no_request_changes_nothing() {
        let good =
            identity_request(&[1; IDENTITY_RANDOM_BYTES], "client-a", "52:54:00:00:00:01", 1500, "10.0.0.1/24", 5.5);
        let bad = [
            good.replace("client-a", "client;reboot"),
            good.replace(" 1500 ", " 1500 extra "),
            good.replacen(&"01".repeat(IDENTITY_RANDOM_BYTES), "zz", 1),
            good.replace("10.0.0.1/24", "10.0.0.1/24 dev lo"),
        ];
        for line in bad {
            let h = HostHelper::new(0);
            assert_eq!(h.start().trim(), HELPER_READY);
            assert_eq!(parse_identity_answer(h.ask(&line).as_bytes()), Err("bad request".to_string()), "{line}");
            assert!(h.read("hostname").is_empty() && h.read("urandom").is_empty(), "{line}");
        }
    }

    // x86_64 syscall numbers (mknod 133, clock_gettime 228).
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn a_helper_that_can_not_start_says_why() {
        let h = HostHelper::new(0);
        std::fs::remove_file(h.path("ip")).unwrap();
        let said = h.start();
        assert!(!said.contains(HELPER_READY), "{said}");
        assert!(said.contains("identity helper did not start") && said.contains("No such file"), "{said}");
        assert!(!std::path::Path::new(&h.helper().ready_path()).exists());
    }

    #[test]
    fn answers_are_read_as_ok_or_error() {
        assert_eq!(parse_identity_answer(b"ok 6.12.95+deb12-cloud-amd64\n"), Ok("6.12.95+deb12-cloud-amd64".into()));
        assert_eq!(parse_identity_answer(b"error: bad request\n"), Err("bad request".into()));
        assert!(parse_identity_answer(b"").unwrap_err().contains("neither ok nor error"));
    }

    #[test]
    fn paths_with_commas_are_not_given_to_qemu() {
        assert!(usable_path(Path::new("/root/.cache/vmrepro/vmstate/abc/state")));
        assert!(!usable_path(Path::new("/home/a,b/.cache/vmrepro/vmstate/abc/state")));
    }
}
