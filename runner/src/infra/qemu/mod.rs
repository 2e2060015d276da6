//! QEMU: command lines ([`args`]), acceleration choice ([`accel`]), the QMP and guest
//! agent clients ([`qmp`], [`qga`]) and the [`vm::Vm`] that owns one QEMU process.

pub mod accel;
pub mod args;
pub mod qga;
pub mod qmp;
pub mod vm;

/// The QEMU binary for x86-64 guests (`$VMREPRO_QEMU` overrides it).
pub fn qemu_binary() -> String {
    std::env::var("VMREPRO_QEMU").unwrap_or_else(|_| "qemu-system-x86_64".to_string())
}
