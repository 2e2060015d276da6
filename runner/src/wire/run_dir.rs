//! The captures of a run folder: `RUN/vms/VM/capture.pcap`, one per VM that had
//! `capture:` on, decoded and summarised.

use std::path::{Path, PathBuf};

use super::decode::decode;
use super::pcap::{read_capture, PcapError};
use super::summary::WireSummary;

/// A capture's file name inside its VM's folder.
pub const CAPTURE_FILE: &str = "capture.pcap";

/// What finding a run's captures meets.
#[derive(Debug, thiserror::Error)]
pub enum WireError {
    /// The capture could not be read.
    #[error(transparent)]
    Pcap(#[from] PcapError),
    /// The VM named has no capture in the run.
    #[error("{} has no capture of VM {vm} (is capture: on for it?)", run.display())]
    NoCapture {
        /// The run folder.
        run: PathBuf,
        /// The VM.
        vm: String,
    },
    /// The run has no capture at all.
    #[error("{} has no capture (no VM had capture: on)", run.display())]
    NoCaptures {
        /// The run folder.
        run: PathBuf,
    },
}

/// One VM's capture, summarised.
#[derive(Debug, Clone)]
pub struct VmWire {
    /// The VM's name.
    pub vm: String,
    /// The whole capture's summary.
    pub summary: WireSummary,
    /// Time of the first frame, microseconds since the epoch (0 for an empty capture).
    pub start_us: u64,
}

/// `true` when `p` is a folder itself, not a symbolic link to one (a run folder is
/// untrusted input: nothing is read through a link out of it).
fn real_dir(p: &Path) -> bool {
    std::fs::symlink_metadata(p).is_ok_and(|m| m.is_dir())
}

/// Reads the capture of VM `vm`, or of every VM with one (sorted by name), from the run
/// folder `run`. A VM name is a plain file name (the suite's VM names are); `vms/` and
/// `vms/VM/` must be folders, not links, and the capture a regular file.
pub fn run_captures(run: &Path, vm: Option<&str>) -> Result<Vec<VmWire>, WireError> {
    let vms = run.join("vms");
    let vms_ok = real_dir(&vms);
    let names: Vec<String> = match vm {
        Some(v) => {
            let plain = !v.is_empty() && !v.contains('/') && v != "." && v != "..";
            if !plain || !vms_ok || !real_dir(&vms.join(v)) || !vms.join(v).join(CAPTURE_FILE).is_file() {
                return Err(WireError::NoCapture { run: run.to_path_buf(), vm: v.to_string() });
            }
            vec![v.to_string()]
        }
        None => {
            let mut n: Vec<String> = std::fs::read_dir(&vms)
                .into_iter()
                .flatten()
                .flatten()
                .filter(|e| vms_ok && real_dir(&e.path()) && e.path().join(CAPTURE_FILE).is_file())
                .filter_map(|e| e.file_name().into_string().ok())
                .collect();
            n.sort();
            if n.is_empty() {
                return Err(WireError::NoCaptures { run: run.to_path_buf() });
            }
            n
        }
    };
    names
        .into_iter()
        .map(|vm| {
            let frames = read_capture(&vms.join(&vm).join(CAPTURE_FILE))?;
            let start_us = frames.first().map_or(0, |f| f.time_us);
            Ok(VmWire { summary: WireSummary::of(&decode(&frames), None), vm, start_us })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A VM folder that is a link out of the run is not read through.
    #[test]
    fn a_linked_vm_folder_is_not_followed() {
        let out = tempfile::tempdir().unwrap();
        std::fs::write(out.path().join(CAPTURE_FILE), crate::wire::pcap::tests::pcap_bytes(&[])).unwrap();
        let run = tempfile::tempdir().unwrap();
        std::fs::create_dir(run.path().join("vms")).unwrap();
        std::os::unix::fs::symlink(out.path(), run.path().join("vms/a")).unwrap();
        assert!(matches!(run_captures(run.path(), Some("a")), Err(WireError::NoCapture { .. })));
        assert!(matches!(run_captures(run.path(), None), Err(WireError::NoCaptures { .. })));
        std::fs::create_dir(run.path().join("vms/b")).unwrap();
        std::fs::write(run.path().join("vms/b").join(CAPTURE_FILE), crate::wire::pcap::tests::pcap_bytes(&[])).unwrap();
        let got = run_captures(run.path(), None).unwrap();
        assert_eq!(got.iter().map(|v| v.vm.as_str()).collect::<Vec<_>>(), ["b"]);
    }
}
