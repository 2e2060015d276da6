//! The captures of a run folder: `RUN/vms/VM/capture.pcap`, one per VM that had
//! `capture:` on, decoded and summarised.

use std::path::{Path, PathBuf};

use super::decode::decode;
use super::pcap::{read_capture_in, Frame, PcapError};
use super::summary::WireSummary;
use crate::path_io::{Folder, Kind};

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

/// Reads the capture of VM `vm`, or of every VM with one (sorted by name), from the run
/// folder `run`, through the confined layer ([`Folder`]), summarised whole. See
/// [`captures`] for what is refused.
///
/// Errors: [`WireError::NoCapture`], [`WireError::NoCaptures`], [`WireError::Pcap`].
pub fn run_captures(run: &Path, vm: Option<&str>) -> Result<Vec<VmWire>, WireError> {
    Ok(captures(run, vm)?
        .into_iter()
        .map(|(vm, c)| VmWire { summary: c.summary(), start_us: c.start_us(), vm })
        .collect())
}

/// Reads the capture of VM `vm`, or of every VM with one (sorted by name), from the run
/// folder `run`, through the confined layer ([`Folder`]). A VM name is a plain file
/// name (the suite's VM names are). A capture that is a symbolic link, a named pipe or
/// device, or larger than [`super::pcap::MAX_CAPTURE_BYTES`] is refused by name (never
/// skipped); so is a named VM whose folder is a link. Listing every VM skips entries of
/// `vms/` that are not folders (links included: nothing is read through them).
///
/// Errors: [`WireError::NoCapture`], [`WireError::NoCaptures`], [`WireError::Pcap`].
pub fn captures(run: &Path, vm: Option<&str>) -> Result<Vec<(String, Capture)>, WireError> {
    let folder = Folder::open(run).map_err(PcapError::from)?;
    let vms_ok = matches!(folder.kind("vms"), Ok(Some(Kind::Folder)));
    let capture = |v: &str| format!("vms/{v}/{CAPTURE_FILE}");
    let names: Vec<String> = match vm {
        Some(v) => {
            let plain = !v.is_empty() && !v.contains('/') && v != "." && v != "..";
            // Anything at the capture's place (a link, a pipe) is read below and refused
            // by name; only "nothing there" is "no capture".
            let there = plain && vms_ok && !matches!(folder.kind(&capture(v)), Ok(None));
            if !there {
                return Err(WireError::NoCapture { run: run.to_path_buf(), vm: v.to_string() });
            }
            vec![v.to_string()]
        }
        None => {
            let mut n: Vec<String> = if vms_ok { std::fs::read_dir(run.join("vms")).ok() } else { None }
                .into_iter()
                .flatten()
                .flatten()
                .filter_map(|e| e.file_name().into_string().ok())
                .filter(|v| matches!(folder.kind(&format!("vms/{v}")), Ok(Some(Kind::Folder))))
                .filter(|v| !matches!(folder.kind(&capture(v)), Ok(None)))
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
            let frames = read_capture_in(&folder, &capture(&vm))?;
            Ok((vm, Capture { frames }))
        })
        .collect()
}

/// One VM's capture, read once for the analysis of its measured iterations.
#[derive(Debug, Clone, Default)]
pub struct Capture {
    frames: Vec<Frame>,
}

impl Capture {
    /// Reads `vms/VM/capture.pcap` of VM `vm` in the run folder `run` (as
    /// [`run_captures`], confined and bounded). `Ok(None)`: the VM has no capture file.
    ///
    /// Errors: [`WireError::Pcap`] (a link, not a regular file, too large, broken).
    pub fn read(run: &Path, vm: &str) -> Result<Option<Capture>, WireError> {
        let folder = Folder::open(run).map_err(PcapError::from)?;
        let rel = format!("vms/{vm}/{CAPTURE_FILE}");
        if matches!(folder.kind(&rel), Ok(None)) || matches!(folder.kind(&format!("vms/{vm}")), Ok(None)) {
            return Ok(None);
        }
        Ok(Some(Capture { frames: read_capture_in(&folder, &rel)? }))
    }

    /// The whole capture's summary.
    pub fn summary(&self) -> WireSummary {
        WireSummary::of(&decode(&self.frames), None)
    }

    /// Time of the first frame, microseconds since the epoch (0 for an empty capture).
    pub fn start_us(&self) -> u64 {
        self.frames.first().map_or(0, |f| f.time_us)
    }

    /// The summary of the frames whose records start in the bytes `[from, to)` of the
    /// file (an iteration's `capture_bytes`): decoded on their own, so a call belongs
    /// to the iteration whose frames hold it, and a datagram is lost when a fragment of
    /// it is missing among them.
    pub fn window(&self, [from, to]: [u64; 2]) -> WireSummary {
        let inside: Vec<Frame> = self.frames.iter().filter(|f| f.offset >= from && f.offset < to).cloned().collect();
        WireSummary::of(&decode(&inside), None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A VM folder that is a link out of the run is not read through: refused by name
    /// when named, skipped when listing.
    #[test]
    fn a_linked_vm_folder_is_not_followed() {
        let out = tempfile::tempdir().unwrap();
        std::fs::write(out.path().join(CAPTURE_FILE), crate::wire::pcap::tests::pcap_bytes(&[])).unwrap();
        let run = tempfile::tempdir().unwrap();
        std::fs::create_dir(run.path().join("vms")).unwrap();
        std::os::unix::fs::symlink(out.path(), run.path().join("vms/a")).unwrap();
        let named = run_captures(run.path(), Some("a")).unwrap_err().to_string();
        assert!(named.contains("vms/a is a symbolic link"), "{named}");
        assert!(matches!(run_captures(run.path(), None), Err(WireError::NoCaptures { .. })));
        std::fs::create_dir(run.path().join("vms/b")).unwrap();
        std::fs::write(run.path().join("vms/b").join(CAPTURE_FILE), crate::wire::pcap::tests::pcap_bytes(&[])).unwrap();
        let got = run_captures(run.path(), None).unwrap();
        assert_eq!(got.iter().map(|v| v.vm.as_str()).collect::<Vec<_>>(), ["b"]);
    }

    /// An iteration's counters come from the frames in its byte range only: a READ
    /// resent once in the first range, a GETATTR in the second.
    #[test]
    fn a_window_holds_the_frames_of_its_byte_range() {
        use crate::wire::decode::tests::{frame, udp, CLIENT, SERVER};
        use crate::wire::rpc::tests::{call, reply};
        let read = call(1, 100003, 3, 6, &[]);
        let frames = [
            frame(1_000_000, udp(CLIENT, SERVER, 800, 2049, &read)),
            frame(1_700_000, udp(CLIENT, SERVER, 800, 2049, &read)),
            frame(1_700_500, udp(SERVER, CLIENT, 2049, 800, &reply(1))),
            frame(2_000_000, udp(CLIENT, SERVER, 800, 2049, &call(2, 100003, 3, 1, &[]))),
        ];
        let bytes = crate::wire::pcap::tests::pcap_bytes(
            &frames.iter().map(|f| (f.time_us, f.data.clone())).collect::<Vec<_>>(),
        );
        let run = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(run.path().join("vms/a")).unwrap();
        std::fs::write(run.path().join("vms/a").join(CAPTURE_FILE), &bytes).unwrap();
        let c = Capture::read(run.path(), "a").unwrap().unwrap();
        let fourth = c.frames[3].offset;
        let counters = |w: WireSummary| -> std::collections::BTreeMap<&str, f64> { w.counters().into_iter().collect() };
        let first = counters(c.window([24, fourth]));
        assert_eq!(
            (first["wire.rpc.calls"], first["wire.rpc.retransmissions"], first["wire.rpc.replies"]),
            (1.0, 1.0, 1.0)
        );
        assert_eq!(first["wire.rpc.wait_max_ms"], 700.0);
        let second = counters(c.window([fourth, bytes.len() as u64]));
        assert_eq!(
            (second["wire.rpc.calls"], second["wire.rpc.retransmissions"], second["wire.rpc.unanswered"]),
            (1.0, 0.0, 1.0)
        );
        assert!(Capture::read(run.path(), "b").unwrap().is_none(), "no capture of b");
    }
}
