//! A VM's packet capture during a run: QEMU's `filter-dump` on its NIC's netdev
//! ([`crate::infra::qemu::args::CaptureArgs`]) writing `RUN/vms/VM/capture.pcap`.
//!
//! Where it sits: between the guest's virtio-net device and the tap, outside the
//! guest. A suite's netem (`net.egress`) runs inside the guest on its egress, so a
//! frame netem drops never reaches the capture of the VM that sends it, nor anyone
//! else's; what one VM's capture shows of its peers' traffic is what arrived at it.

use std::path::Path;

use crate::infra::qemu::args::CaptureArgs;
use crate::plan::VmPlan;

/// The capture file of a VM, inside its run folder `vms/VM/`.
pub use crate::wire::run_dir::CAPTURE_FILE;

/// The `filter-dump` arguments of `v`'s capture into `vdir` (its `vms/VM/` folder),
/// if it has one.
pub(super) fn qemu_capture(v: &VmPlan, vdir: &Path) -> Option<CaptureArgs> {
    let c = v.capture?;
    Some(CaptureArgs { file: vdir.join(CAPTURE_FILE), snaplen: c.snaplen })
}

#[cfg(test)]
mod tests {
    use crate::infra::qemu::args::{qemu_args, CaptureArgs, CAPTURE_FILTER_ID};

    /// The command line a captured VM gets: one `filter-dump` on `net0`, after the
    /// netdev, both directions, the snap length; none without `capture:`.
    #[test]
    fn the_qemu_command_line_records_the_netdev() {
        let mut c =
            crate::infra::qemu::state::tests::config("a", crate::infra::qemu::args::Accelerator::Tcg, 256, None);
        c.capture = Some(CaptureArgs { file: "/r/vms/a,b/capture.pcap".into(), snaplen: 256 });
        let a = qemu_args(&c);
        let objects: Vec<&String> = a.windows(2).filter(|w| w[0] == "-object").map(|w| &w[1]).collect();
        assert_eq!(
            objects,
            [&format!(
                "filter-dump,id={CAPTURE_FILTER_ID},netdev=net0,queue=all,file=/r/vms/a,,b/capture.pcap,maxlen=256"
            )]
        );
        let netdev = a.iter().position(|x| x.starts_with("tap,id=net0")).unwrap();
        let object = a.iter().position(|x| x.starts_with("filter-dump")).unwrap();
        assert!(netdev < object, "the filter follows its netdev");
        c.capture = Some(CaptureArgs { file: "/r/c.pcap".into(), snaplen: 128 });
        assert!(qemu_args(&c).iter().any(|x| x.ends_with("file=/r/c.pcap,maxlen=128")));
        c.capture = None;
        assert!(!qemu_args(&c).iter().any(|x| x.contains("filter-dump")));
    }
}
