//! Limits on numeric settings: outside them the value is a mistake.

use std::time::Duration;

/// Guest memory, MiB.
pub const MEMORY_MIB: std::ops::RangeInclusive<u64> = 128..=16384;
/// vCPUs.
pub const CPUS: std::ops::RangeInclusive<u32> = 1..=16;
/// Any timeout.
pub const TIMEOUT: std::ops::RangeInclusive<Duration> = Duration::from_secs(1)..=Duration::from_secs(24 * 3600);
/// Measured iterations per VM (`repeat`).
pub const REPEAT: std::ops::RangeInclusive<u32> = 1..=100;
/// Warm-up iterations per VM (`warmup`).
pub const WARMUP: std::ops::RangeInclusive<u32> = 0..=10;
/// Significance level of a verdict (`verdict.alpha`).
pub const ALPHA: std::ops::RangeInclusive<f64> = 0.0001..=0.2;
/// Effect floor of a verdict, a fraction (`verdict.floor`).
pub const FLOOR: std::ops::RangeInclusive<f64> = 0.0..=1.0;
/// Exit statuses (`expect_exit`).
pub const EXIT_STATUS: std::ops::RangeInclusive<i32> = 0..=255;
/// MTU, bytes. The top is a tap device's largest MTU (65535 less its 14-byte
/// Ethernet header): the runner could not set more on the VMs' taps.
pub const MTU: std::ops::RangeInclusive<u32> = 576..=65521;
/// Bytes kept of each captured frame (`network.capture_snaplen`): at least an
/// Ethernet, IPv4 and UDP header and an RPC header's XID; at most pcap's 65535.
pub const CAPTURE_SNAPLEN: std::ops::RangeInclusive<u32> = 64..=65535;
/// Largest size of one VM's capture (`network.capture_max_bytes`), bytes: at least
/// one full frame with the pcap header; at most the size `vmrepro wire` and
/// `analyse` read ([`crate::wire::pcap::MAX_CAPTURE_BYTES`], 1 GiB).
pub const CAPTURE_MAX_BYTES: std::ops::RangeInclusive<u64> = 65536..=(1 << 30);
/// Size of the measured file, bytes.
pub const FILE_BYTES: u64 = 8 * 1024 * 1024 * 1024;
/// Read-ahead of an NFS mount, KiB (1 GiB; more than any guest's memory would use).
pub const READ_AHEAD_KB: u32 = 1024 * 1024;
/// Bytes one iteration of a measurement moves (`bytes`): 1 PiB, far more than a
/// guest moves in a step's 24 h.
pub const MEASURE_BYTES: std::ops::RangeInclusive<u64> = 1..=(1 << 50);
/// VMs in one suite.
pub const VMS: usize = 16;
/// Actions in one list of a measurement's `each:` (`before` or `after`): each is a step
/// per iteration, and a handful covers every report seen.
pub const ACTIONS: usize = 8;
