//! Reading a capture file: classic pcap (as QEMU's `filter-dump` and tcpdump write
//! it), through the `pcap-file` crate, bounded in size.

use crate::path_io::{FileError, Folder};

/// Largest capture file read, bytes (a run's capture stops at its own cap, 64 MiB by
/// default; a larger file is not one this tool wrote).
pub const MAX_CAPTURE_BYTES: u64 = 1 << 30;

/// One captured frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    /// Capture time, microseconds since the Unix epoch (QEMU's `filter-dump` stamps
    /// frames with the VM's virtual clock plus the host time the filter started).
    pub time_us: u64,
    /// Length of the frame on the wire, bytes.
    pub orig_len: u32,
    /// The captured bytes (the first `snaplen` bytes), from the Ethernet header on.
    pub data: Vec<u8>,
    /// Where its record (header and bytes) starts in the file, bytes: what places it in
    /// a measured iteration (`run.json`'s `capture_bytes` of the iteration's step).
    pub offset: u64,
}

/// What reading a capture meets.
#[derive(Debug, thiserror::Error)]
pub enum PcapError {
    /// The file could not be read, or was refused (a link, not a regular file, larger
    /// than [`MAX_CAPTURE_BYTES`]).
    #[error(transparent)]
    File(#[from] FileError),
    /// The pcap structure is broken at frame `frame` (1-based), byte `offset`.
    #[error("{}: frame {frame} at byte {offset}: {message}", path.display())]
    Format {
        /// The file.
        path: std::path::PathBuf,
        /// 1-based frame number (0: the file header).
        frame: usize,
        /// Byte offset of the frame's record header.
        offset: usize,
        /// What `pcap-file` said.
        message: String,
    },
    /// The link type is not Ethernet (`LINKTYPE_ETHERNET`, 1).
    #[error("{}: link type {linktype} is not Ethernet", path.display())]
    LinkType {
        /// The file.
        path: std::path::PathBuf,
        /// The header's link type.
        linktype: u32,
    },
}

/// Reads the capture `rel` inside the run folder `folder` through the confined layer:
/// no symbolic link followed (on the way or at the end), a regular file (a named pipe
/// or device is refused before any open that could block), its size checked from its
/// metadata against [`MAX_CAPTURE_BYTES`] before it is read. A capture cut in the
/// middle of its last frame (QEMU stopped while writing) keeps the frames before it.
///
/// Errors: [`PcapError::File`] (`… is a symbolic link; …`, `… is a named pipe, not a
/// regular file`, `… is larger than N bytes`), [`PcapError::Format`],
/// [`PcapError::LinkType`].
pub fn read_capture_in(folder: &Folder, rel: &str) -> Result<Vec<Frame>, PcapError> {
    let bytes = folder.read(rel, MAX_CAPTURE_BYTES)?;
    let path = folder.display(rel);
    parse_capture(&bytes).map_err(|(frame, offset, message)| match message {
        Some(m) => PcapError::Format { path, frame, offset, message: m },
        None => PcapError::LinkType { path, linktype: frame as u32 },
    })
}

/// Parses pcap bytes. Errors: `(frame, offset, Some(message))` for a broken structure,
/// `(linktype, 0, None)` for a link type other than Ethernet.
///
/// Records are read raw and checked here: pcap-file 2.0.0's `next_packet` refuses
/// every frame whose length on the wire exceeds the file's snap length
/// (courvoif/pcap-file#36, fixed after 2.0.0), i.e. every frame a headers-only
/// capture cut, such as QEMU's `filter-dump` with `maxlen=256` writes for each
/// 1514-byte IP fragment. What is checked is what libpcap checks: the saved length is
/// at most the snap length and the length on the wire, and the sub-second part of the
/// timestamp is below one second.
fn parse_capture(bytes: &[u8]) -> Result<Vec<Frame>, (usize, usize, Option<String>)> {
    let (mut rest, parser) = pcap_file::pcap::PcapParser::new(bytes).map_err(|e| (0, 0, Some(e.to_string())))?;
    let header = parser.header();
    let linktype = u32::from(header.datalink);
    if linktype != 1 {
        return Err((linktype as usize, 0, None));
    }
    let (snap_len, per_second) = match header.ts_resolution {
        pcap_file::TsResolution::MicroSecond => (header.snaplen, 1_000_000u64),
        pcap_file::TsResolution::NanoSecond => (header.snaplen, 1_000_000_000u64),
    };
    let mut frames = Vec::new();
    while !rest.is_empty() {
        let offset = bytes.len() - rest.len();
        match parser.next_raw_packet(rest) {
            Ok((r, p)) => {
                let broken = if p.incl_len > snap_len {
                    Some(format!("frame of {} bytes in a capture of snap length {snap_len}", p.incl_len))
                } else if p.incl_len > p.orig_len {
                    Some(format!(
                        "frame of {} bytes saved, longer than its {} bytes on the wire",
                        p.incl_len, p.orig_len
                    ))
                } else if u64::from(p.ts_frac) >= per_second {
                    Some(format!("timestamp fraction {} is a second or more", p.ts_frac))
                } else {
                    None
                };
                if let Some(m) = broken {
                    return Err((frames.len() + 1, offset, Some(m)));
                }
                let frac_us = u64::from(p.ts_frac) * 1_000_000 / per_second;
                frames.push(Frame {
                    time_us: u64::from(p.ts_sec) * 1_000_000 + frac_us,
                    orig_len: p.orig_len,
                    data: p.data.into_owned(),
                    offset: offset as u64,
                });
                rest = r;
            }
            Err(pcap_file::PcapError::IncompleteBuffer) => break,
            Err(e) => return Err((frames.len() + 1, offset, Some(e.to_string()))),
        }
    }
    Ok(frames)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A pcap file (microsecond, little-endian, Ethernet) of `frames`.
    pub(crate) fn pcap_bytes(frames: &[(u64, Vec<u8>)]) -> Vec<u8> {
        let mut w = pcap_file::pcap::PcapWriter::new(Vec::new()).unwrap();
        for (t, data) in frames {
            let p = pcap_file::pcap::PcapPacket::new(std::time::Duration::from_micros(*t), data.len() as u32, data);
            w.write_packet(&p).unwrap();
        }
        w.into_writer()
    }

    #[test]
    fn reads_frames_and_keeps_those_before_a_cut_one() {
        let mut bytes = pcap_bytes(&[(1_500_000, vec![1; 60]), (2_000_001, vec![2; 70])]);
        let frames = parse_capture(&bytes).unwrap();
        assert_eq!(
            frames.iter().map(|f| (f.time_us, f.data.len(), f.offset)).collect::<Vec<_>>(),
            // A 24-byte file header, then 16 bytes of record header before each frame.
            [(1_500_000, 60, 24), (2_000_001, 70, 24 + 16 + 60)]
        );
        bytes.truncate(bytes.len() - 10);
        assert_eq!(parse_capture(&bytes).unwrap().len(), 1);
        assert_eq!(parse_capture(b"not a pcap file at all").unwrap_err().0, 0);
    }

    /// A headers-only capture as QEMU's filter-dump writes it (snap length 256): a
    /// 1514-byte IP fragment is kept as its first 256 bytes with its length on the wire;
    /// pcap-file's own `next_packet` refuses it.
    #[test]
    fn reads_frames_cut_at_the_snap_length() {
        let header = pcap_file::pcap::PcapHeader { snaplen: 256, ..Default::default() };
        let mut w = pcap_file::pcap::PcapWriter::with_header(Vec::new(), header).unwrap();
        let cut = vec![7u8; 256];
        w.write_packet(&pcap_file::pcap::PcapPacket::new(std::time::Duration::from_micros(3_000_250), 1514, &cut))
            .unwrap();
        let bytes = w.into_writer();
        let (rest, parser) = pcap_file::pcap::PcapParser::new(&bytes).unwrap();
        assert!(parser.next_packet(rest).is_err(), "pcap-file 2.0.0 refuses it (if this fails, the crate was fixed)");
        let frames = parse_capture(&bytes).unwrap();
        assert_eq!(
            frames.iter().map(|f| (f.time_us, f.orig_len, f.data.len())).collect::<Vec<_>>(),
            [(3_000_250, 1514, 256)]
        );
        // A frame longer than the file's snap length (the header's, at byte 16, made
        // 200) is broken, and named.
        let mut broken = bytes.clone();
        let big_endian = bytes[..4] == [0xa1, 0xb2, 0xc3, 0xd4];
        broken[16..20].copy_from_slice(&if big_endian { 200u32.to_be_bytes() } else { 200u32.to_le_bytes() });
        let err = parse_capture(&broken).unwrap_err();
        assert_eq!((err.0, err.1), (1, 24));
        assert!(err.2.as_deref().unwrap_or_default().contains("256 bytes in a capture of snap length 200"), "{err:?}");
    }
}
