//! The wire: packet captures of a run's VMs (`RUN/vms/VM/capture.pcap`, recorded by
//! QEMU's `filter-dump` on the VM's netdev, see [`crate::run`]'s capture) and what they
//! show at the RPC level.
//!
//! - [`pcap`]: reading a capture (classic pcap, Ethernet), bounded.
//! - [`decode`](mod@decode): frames → IPv4 datagrams (fragment bookkeeping), UDP and TCP, RPC
//!   messages ([`rpc`]: the ONC RPC header, NFSv3 procedures, NFSv4 COMPOUND
//!   operations, TCP record marks).
//! - [`run_dir`]: a run folder's captures; [`table`]: the text `vmrepro wire` prints.
//! - [`summary`]: calls, replies, retransmissions and their waits, latencies, lost
//!   fragment datagrams, TCP resends; the `wire.*` counters.

pub mod decode;
pub mod pcap;
pub mod rpc;
pub mod summary;

pub mod run_dir;
pub mod table;
