//! The infrastructure a plan runs on: images (kernels, root filesystems, the cache),
//! the run's private network, and the QEMU VMs; and what the host must allow an
//! ordinary user ([`host`]).

pub(crate) mod hash;
pub mod host;
pub mod images;
pub mod net;
pub(crate) mod process;
pub mod qemu;
