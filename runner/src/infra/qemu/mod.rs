//! QEMU: command lines ([`args`]), acceleration choice ([`accel`]), the QMP and guest
//! agent clients ([`qmp`], [`qga`]), host CPU pinning ([`pin`]) and the [`vm::Vm`] that
//! owns one QEMU process.

pub mod accel;
pub mod args;
pub mod error;
pub mod inflight;
pub mod pin;
pub mod qga;
pub mod qmp;
pub mod state;
pub mod vm;

/// The QEMU binary for x86-64 guests (`$VMREPRO_QEMU` overrides it).
pub fn qemu_binary() -> String {
    std::env::var("VMREPRO_QEMU").unwrap_or_else(|_| "qemu-system-x86_64".to_string())
}

/// The first line of `<qemu_binary()> --version` (empty if it can't run).
pub fn qemu_version() -> String {
    std::process::Command::new(qemu_binary())
        .arg("--version")
        .output()
        .ok()
        .and_then(|o| String::from_utf8_lossy(&o.stdout).lines().next().map(str::to_string))
        .unwrap_or_default()
}
