//! Parser for `/proc/self/mountstats`: the NFS client's per-mount RPC statistics
//! (what nfs-utils' `mountstats(8)` reads).
//!
//! Source of the format: `fs/nfs/super.c` (`nfs_show_stats`) and
//! `net/sunrpc/stats.c` (`rpc_clnt_show_stats`, `rpc_print_iostats`), RPC iostats
//! version 1.0 (Linux 2.6.17) and 1.1 (Linux 2.6.27 on; still current in 6.x). One
//! block per mount (the kernel indents with tabs):
//!
//! ```text
//! device 10.0.0.1:/home mounted on /mnt/home with fstype nfs statvers=1.1
//!     opts:    rw,vers=3,rsize=8192,wsize=8192,...,proto=udp,...
//!     age:    12
//!     ...
//!     RPC iostats version: 1.1  p/v: 100003/3 (nfs)
//!     xprt:    udp 0 1 850 619 0 12 4 0 0 0
//!     per-op statistics
//!             NULL: 0 0 0 0 0 0 0 0
//!             READ: 611 850 0 79432 5031024 12 2480 19220
//! ```
//!
//! A per-op line is `NAME: ops transmissions major_timeouts bytes_sent bytes_received
//! queue_ms rtt_ms execute_ms [errors]` (cumulative since the mount; `errors` since
//! Linux 5.3). `transmissions - ops` is the number of retransmissions of that
//! operation; `major_timeouts` sums the major timeouts of its requests.
//!
//! Only the block of the mount at the given mount point is read. Its other lines are
//! kept as `label → rest of line`; lines of that block that fit no known shape are kept
//! in `unknown`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{ParseError, Tool};

/// Cumulative statistics of one RPC operation on one mount.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OpStats {
    /// Operations requested.
    pub ops: u64,
    /// Transmissions, retransmissions included.
    pub transmissions: u64,
    /// Major timeouts, summed over the requests (`tk_timeouts`: a request can count
    /// several).
    pub major_timeouts: u64,
    /// Bytes sent, headers included.
    pub bytes_sent: u64,
    /// Bytes received, headers included.
    pub bytes_received: u64,
    /// Milliseconds from the request's start to its *last* transmission, summed: time
    /// queued for a slot or the congestion window, plus the retransmission timeouts
    /// waited before the transmission that got the reply.
    pub queue_ms: u64,
    /// Milliseconds between the last transmission and the reply, summed.
    pub rtt_ms: u64,
    /// Milliseconds from the request's start to its end, summed.
    pub execute_ms: u64,
    /// Operations that ended in an error (Linux >= 5.3; absent before).
    pub errors: Option<u64>,
}

impl OpStats {
    /// Field-wise `self - before` (saturating), for statistics taken around a command.
    pub fn since(&self, before: &OpStats) -> OpStats {
        OpStats {
            ops: self.ops.saturating_sub(before.ops),
            transmissions: self.transmissions.saturating_sub(before.transmissions),
            major_timeouts: self.major_timeouts.saturating_sub(before.major_timeouts),
            bytes_sent: self.bytes_sent.saturating_sub(before.bytes_sent),
            bytes_received: self.bytes_received.saturating_sub(before.bytes_received),
            queue_ms: self.queue_ms.saturating_sub(before.queue_ms),
            rtt_ms: self.rtt_ms.saturating_sub(before.rtt_ms),
            execute_ms: self.execute_ms.saturating_sub(before.execute_ms),
            errors: self.errors.zip(before.errors).map(|(a, b)| a.saturating_sub(b)),
        }
    }
}

/// The block of one mount in `/proc/self/mountstats`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mountstats {
    /// The `device …` line's device (`server:/export`).
    pub device: String,
    /// `statvers=` of the block (e.g. `1.1`).
    pub statvers: String,
    /// Per-operation statistics by operation name (`READ`, `GETATTR`, …).
    pub ops: BTreeMap<String, OpStats>,
    /// Other labelled lines of the block (`opts`, `age`, `xprt`, `events`, …), `label →
    /// value` as printed (several `xprt:` lines, with `nconnect`, joined by ` | `).
    pub other: BTreeMap<String, String>,
    /// Lines of the block that fit no known shape, trimmed.
    pub unknown: Vec<String>,
}

/// Reads the block of the mount on `mount_point` from `/proc/self/mountstats` text.
///
/// # Errors
/// [`ParseError::Empty`] for blank input; [`ParseError::NotRecognised`] when no
/// `device … mounted on <mount_point> with fstype nfs…` line is there.
pub fn parse(text: &str, mount_point: &str) -> Result<Mountstats, ParseError> {
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let Some(first) = lines.first() else { return Err(ParseError::Empty { tool: Tool::Mountstats }) };
    let wanted = format!(" mounted on {mount_point} with fstype nfs");
    // The last block on that path: a mount stacked over an older one is listed after it.
    let Some(start) = lines.iter().rposition(|l| l.starts_with("device ") && l.contains(&wanted)) else {
        return Err(ParseError::NotRecognised {
            tool: Tool::Mountstats,
            lines: lines.len(),
            first_line: first.trim().to_string(),
        });
    };
    let header = lines[start];
    let mut out = Mountstats {
        device: header["device ".len()..].split(" mounted on ").next().unwrap_or("").to_string(),
        statvers: header.split("statvers=").nth(1).unwrap_or("").trim().to_string(),
        ..Mountstats::default()
    };
    let mut in_ops = false;
    // With `nconnect` there is one `xprt:` line per connection: keep them all.
    let mut xprts = Vec::new();
    for line in &lines[start + 1..] {
        if line.starts_with("device ") {
            break;
        }
        let t = line.trim();
        if t == "per-op statistics" {
            in_ops = true;
            continue;
        }
        let Some((label, rest)) = t.split_once(':') else {
            out.unknown.push(t.to_string());
            continue;
        };
        if in_ops {
            let nums: Option<Vec<u64>> = rest.split_whitespace().map(|w| w.parse().ok()).collect();
            match nums.as_deref() {
                Some([o, tr, mt, bs, br, q, r, e, rest @ ..]) if rest.len() <= 1 => {
                    out.ops.insert(
                        label.trim().to_string(),
                        OpStats {
                            ops: *o,
                            transmissions: *tr,
                            major_timeouts: *mt,
                            bytes_sent: *bs,
                            bytes_received: *br,
                            queue_ms: *q,
                            rtt_ms: *r,
                            execute_ms: *e,
                            errors: rest.first().copied(),
                        },
                    );
                }
                _ => out.unknown.push(t.to_string()),
            }
        } else if label.trim() == "xprt" {
            xprts.push(rest.trim().to_string());
        } else {
            out.other.insert(label.trim().to_string(), rest.trim().to_string());
        }
    }
    if !xprts.is_empty() {
        out.other.insert("xprt".into(), xprts.join(" | "));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Captured in a 6.1.176 guest of the RTO carry-over suite (its earlier, 5 MB
    /// version) after a read over NFSv3/UDP (shortened: most per-op lines and `events`
    /// left out).
    const SAMPLE: &str = "device rootfs mounted on / with fstype rootfs
device 10.83.0.1:/home mounted on /mnt/home with fstype nfs statvers=1.1
\topts:\trw,vers=3,rsize=8192,wsize=8192,namlen=255,acregmin=3,proto=udp,timeo=11,retrans=3
\tage:\t33
\tcaps:\tcaps=0x3fcf,wtmult=4096,dtsize=8192,bsize=0,namlen=255
\tsec:\tflavor=1,pseudoflavor=1
\tbytes:\t0 0 0 0 5000000 0 611 0
\tRPC iostats version: 1.1  p/v: 100003/3 (nfs)
\txprt:\tudp 0 1 850 619 0 12 4 0 0 0
\tper-op statistics
\t        NULL: 0 0 0 0 0 0 0 0 0
\t     GETATTR: 2 2 0 240 224 0 1 1 0
\t        READ: 611 850 0 79432 5031024 12 2480 19220 0
\tstrange line
device proc mounted on /proc with fstype proc
";

    #[test]
    fn reads_the_block_of_the_mount_point() {
        let m = parse(SAMPLE, "/mnt/home").unwrap();
        assert_eq!(m.device, "10.83.0.1:/home");
        assert_eq!(m.statvers, "1.1");
        let read = m.ops["READ"];
        assert_eq!((read.ops, read.transmissions, read.major_timeouts), (611, 850, 0));
        assert_eq!((read.queue_ms, read.rtt_ms, read.execute_ms, read.errors), (12, 2480, 19220, Some(0)));
        assert_eq!(m.other["xprt"], "udp 0 1 850 619 0 12 4 0 0 0");
        assert_eq!(m.other["RPC iostats version"], "1.1  p/v: 100003/3 (nfs)");
        assert_eq!(m.unknown, vec!["strange line".to_string()]);
        assert_eq!(m.ops.len(), 3);
    }

    #[test]
    fn pre_5_3_lines_have_no_errors_field_and_deltas_subtract() {
        let text =
            "device s:/e mounted on /m with fstype nfs statvers=1.1\n\tper-op statistics\n\tREAD: 10 12 1 1 2 3 4 5\n";
        let before = parse(text, "/m").unwrap().ops["READ"];
        assert_eq!(before.errors, None);
        let after = OpStats { ops: 20, transmissions: 30, ..before };
        let d = after.since(&before);
        assert_eq!((d.ops, d.transmissions, d.execute_ms), (10, 18, 0));
    }

    #[test]
    fn other_mounts_or_empty_input_are_errors() {
        assert!(matches!(parse("", "/m"), Err(ParseError::Empty { .. })));
        assert!(matches!(parse(SAMPLE, "/mnt/other"), Err(ParseError::NotRecognised { .. })));
    }
}
