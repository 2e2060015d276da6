//! A VM's packet capture during a run: QEMU's `filter-dump` on its NIC's netdev
//! ([`crate::infra::qemu::args::CaptureArgs`]) writing `RUN/vms/VM/capture.pcap`.
//!
//! Where it sits: between the guest's virtio-net device and the tap, outside the
//! guest. A suite's netem (`net.egress`) runs inside the guest on its egress, so a
//! frame netem drops never reaches the capture of the VM that sends it, nor anyone
//! else's; what one VM's capture shows of its peers' traffic is what arrived at it.

use std::path::{Path, PathBuf};

use super::record::CaptureRecord;
use crate::infra::qemu::args::CaptureArgs;
use crate::infra::qemu::vm::Vm;
use crate::plan::{CapturePlan, VmPlan};

/// The capture file of a VM, inside its run folder `vms/VM/`.
pub use crate::wire::run_dir::CAPTURE_FILE;

/// The `filter-dump` arguments of `v`'s capture into `vdir` (its `vms/VM/` folder),
/// if it has one.
pub(super) fn qemu_capture(v: &VmPlan, vdir: &Path) -> Option<CaptureArgs> {
    let c = v.capture?;
    Some(CaptureArgs { file: vdir.join(CAPTURE_FILE), snaplen: c.snaplen, off: c.measured_only })
}

/// The capture's record in `run.json` before the VM starts (size 0, not stopped).
pub(super) fn record_of(v: &VmPlan) -> Option<CaptureRecord> {
    let c = v.capture?;
    Some(CaptureRecord {
        file: format!("vms/{}/{CAPTURE_FILE}", v.name),
        bytes: 0,
        max_bytes: c.max_bytes,
        measured_only: c.measured_only,
        stopped: None,
    })
}

/// A captured VM's capture while its steps run: turned on and off around each measured
/// iteration (`capture: measured`), the bytes each measured iteration wrote noted, and
/// stopped for good once its file reaches `max_bytes` (checked after every step, so the
/// file can pass the cap by what one step writes) or when QMP refuses a change. The
/// run never stops for it.
pub(super) struct CaptureControl {
    file: PathBuf,
    plan: CapturePlan,
    stopped: Option<String>,
    /// What `run.json` says of it.
    pub(super) record: CaptureRecord,
}

impl CaptureControl {
    /// The control of `v`'s capture in its `vms/VM/` folder `vdir`, if it has one.
    pub(super) fn of(v: &VmPlan, vdir: &Path) -> Option<CaptureControl> {
        Some(CaptureControl { file: vdir.join(CAPTURE_FILE), plan: v.capture?, stopped: None, record: record_of(v)? })
    }

    /// The capture file's size now (0 when QEMU has not made it).
    fn size(&self) -> u64 {
        std::fs::metadata(&self.file).map_or(0, |m| m.len())
    }

    /// Before a step (`measured`: a measured iteration): turns the capture on for it
    /// when only measured iterations are captured. Returns where the step's frames start
    /// in the file, for a measured iteration of a capture still going.
    pub(super) async fn before(&mut self, vm: &Vm, measured: bool) -> Option<u64> {
        if !measured || self.stopped.is_some() {
            return None;
        }
        let from = self.size();
        if self.plan.measured_only {
            if let Err(e) = vm.set_capture(true).await {
                self.stopped = Some(format!("stopped: QMP did not turn it on: {e}"));
                return None;
            }
        }
        Some(from)
    }

    /// After a step that started at byte `from` ([`CaptureControl::before`]): turns the
    /// capture off again (`capture: measured`), stops it when the file reached its cap,
    /// and updates its [`CaptureControl::record`]. Returns the step's byte range.
    pub(super) async fn after(&mut self, vm: &Vm, from: Option<u64>) -> Option<[u64; 2]> {
        if from.is_some() && self.plan.measured_only {
            if let Err(e) = vm.set_capture(false).await {
                self.stopped = Some(format!("stopped: QMP did not turn it off: {e}"));
            }
        }
        let to = self.size();
        if self.stopped.is_none() && to >= self.plan.max_bytes {
            // `capture: measured` is off already; a whole-run capture is turned off.
            let off = if self.plan.measured_only { Ok(()) } else { vm.set_capture(false).await };
            self.stopped = Some(match off {
                Ok(()) => format!(
                    "stopped at {to} bytes: network.capture_max_bytes is {}; later steps are not in it",
                    self.plan.max_bytes
                ),
                Err(e) => {
                    format!("reached network.capture_max_bytes ({}) but QMP did not stop it: {e}", self.plan.max_bytes)
                }
            });
        }
        self.record.bytes = to;
        self.record.stopped.clone_from(&self.stopped);
        from.map(|f| [f, to])
    }
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
        c.capture = Some(CaptureArgs { file: "/r/vms/a,b/capture.pcap".into(), snaplen: 256, off: false });
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
        c.capture = Some(CaptureArgs { file: "/r/c.pcap".into(), snaplen: 128, off: false });
        assert!(qemu_args(&c).iter().any(|x| x.ends_with("file=/r/c.pcap,maxlen=128")));
        // `capture: measured`: off until the runner turns it on.
        c.capture = Some(CaptureArgs { file: "/r/c.pcap".into(), snaplen: 128, off: true });
        assert!(qemu_args(&c).iter().any(|x| x.ends_with("file=/r/c.pcap,maxlen=128,status=off")));
        c.capture = None;
        assert!(!qemu_args(&c).iter().any(|x| x.contains("filter-dump")));
    }
}
