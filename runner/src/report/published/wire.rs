//! "On the wire" in `report.md` and `report.html`: for each VM with a capture
//! (`RUN/vms/VM/capture.pcap`, see docs/src/wire.md), the RPC table `vmrepro wire`
//! prints ([`crate::wire::table`]) and, on the page, an inline SVG timeline: time on
//! the x axis, one row per RPC call (XID), a mark for every send, resend and the first
//! reply, the wait before each resend drawn as a bar with its length in ms.
//!
//! The timeline is bounded: at most [`TIMELINE_ROWS`] calls, those sent most often
//! first (so every retransmitted call is there when there are few), shown in order of
//! first send; the chart says how many of how many it shows. Plain SVG 1.1 like
//! [`super::chart`]; each mark carries its XID and time (`data-xid`, `data-t`, a
//! `<title>`), so a test can check it against the summary.

use std::fmt::Write as _;

use super::chart::{fmt_num, tick_step, Scale};
use super::document::{escape, Block, Section};
use crate::analyse::Analysis;
use crate::wire::run_dir::{run_captures, VmWire, WireError};
use crate::wire::summary::{CallTimeline, WireSummary};
use crate::wire::table;

/// Most calls (rows) a timeline shows.
pub const TIMELINE_ROWS: usize = 40;

const WIDTH: f64 = 960.0;
const LEFT: f64 = 230.0;
const RIGHT: f64 = 190.0;
const TOP: f64 = 64.0;
const ROW: f64 = 18.0;
const BOTTOM: f64 = 44.0;
const SEND: &str = "#1f6fb2";
const RESEND: &str = "#d97706";
const REPLY: &str = "#1e8449";
const LOST: &str = "#c0392b";

/// The "On the wire" section of run `a`: `None` when no VM had a capture. A capture
/// that can't be read is named with the reason, never skipped.
pub fn wire_section(a: &Analysis) -> Option<Section> {
    let vms = match run_captures(&a.dir, None) {
        Ok(v) => v,
        Err(WireError::NoCaptures { .. }) => return None,
        Err(e) => {
            let mut s = Section::new("On the wire");
            s.push(Block::Para(format!("The captures could not be read: {e}")));
            return Some(s);
        }
    };
    let mut s = Section::new("On the wire");
    s.push(Block::Para(
        "Each captured VM's traffic as QEMU's filter-dump saw it on the VM's netdev, outside the guest and after the guest's own netem: a frame a VM's netem dropped is in no capture. The capture spans the whole run (boot, mounts and every repeat). Per RPC procedure: distinct calls (XIDs), sends after a call's first (retrans), calls answered, first send to first whole reply in ms; then datagrams with a missing fragment and the ten longest waits before a resend. `vmrepro wire RUN_DIR VM` prints the same."
            .into(),
    ));
    // One time scale for every VM, so their waits compare by eye.
    let until_s = vms.iter().map(|v| time_axis(&timeline_rows(&v.summary), v.start_us, 0.0).hi).fold(0.0, f64::max);
    for v in &vms {
        let measurements: Vec<&str> = a
            .results
            .measurements
            .iter()
            .filter(|m| m.vms.iter().any(|x| x.vm == v.vm))
            .map(|m| m.name.as_str())
            .collect();
        let within = if measurements.is_empty() {
            "in no measurement".to_string()
        } else {
            format!("measurement {}", measurements.join(", "))
        };
        s.push(Block::Para(format!("VM {} ({within}), times in s since the capture's first frame:", v.vm)));
        s.push(Block::Table(table::render(&v.vm, &v.summary, v.start_us)));
        s.push(Block::Chart(timeline_svg_to(v, until_s)));
    }
    Some(s)
}

/// The calls a timeline shows: at most [`TIMELINE_ROWS`], those with the most sends
/// first (ties: unanswered first, then earlier), in order of first send.
pub fn timeline_rows(s: &WireSummary) -> Vec<&CallTimeline> {
    let mut rows: Vec<&CallTimeline> = s.calls.iter().collect();
    rows.sort_by(|a, b| {
        b.sends_us
            .len()
            .cmp(&a.sends_us.len())
            .then(a.reply_us.is_some().cmp(&b.reply_us.is_some()))
            .then(a.sends_us[0].cmp(&b.sends_us[0]))
    });
    rows.truncate(TIMELINE_ROWS);
    rows.sort_by_key(|c| (c.sends_us[0], c.xid));
    rows
}

/// The time axis over `rows`' sends and replies (seconds since the capture's first
/// frame, `t0_us`), reaching at least `until_s`.
fn time_axis(rows: &[&CallTimeline], t0_us: u64, until_s: f64) -> Scale {
    let secs = |us: u64| us.saturating_sub(t0_us) as f64 / 1e6;
    let times = rows.iter().flat_map(|c| c.sends_us.iter().copied().chain(c.reply_us)).map(secs);
    let (lo, hi) = times.fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), t| (a.min(t), b.max(t)));
    let (lo, hi) = if lo.is_finite() { (lo, hi.max(lo + 1e-3).max(until_s)) } else { (0.0, until_s.max(1.0)) };
    let step = tick_step(hi - lo, 6.0);
    Scale {
        lo: (lo / step).floor() * step,
        hi: ((hi / step).ceil() * step).max(lo + step),
        step,
        left: LEFT,
        width: WIDTH - LEFT - RIGHT,
    }
}

/// One VM's timeline as an SVG element (see the module's docs), its time axis reaching
/// at least `until_s` (seconds since the capture's first frame; 0 for its own extent),
/// so several VMs' timelines share one scale.
pub fn timeline_svg_to(v: &VmWire, until_s: f64) -> String {
    let s = &v.summary;
    let rows = timeline_rows(s);
    let axis = time_axis(&rows, v.start_us, until_s);
    let secs = |us: u64| us.saturating_sub(v.start_us) as f64 / 1e6;
    let bottom = TOP + ROW * rows.len().max(1) as f64;
    let height = bottom + BOTTOM;
    let retransmitted = s.calls.iter().filter(|c| c.sends_us.len() > 1).count();
    let mut o = String::new();
    let _ = writeln!(
        o,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"{WIDTH:.0}\" height=\"{height:.0}\" viewBox=\"0 0 {WIDTH:.0} {height:.0}\" font-family=\"sans-serif\" font-size=\"11\" class=\"vmrepro-wire\" data-vm=\"{}\" data-calls=\"{}\" data-rows=\"{}\">",
        escape(&v.vm),
        s.calls.len(),
        rows.len()
    );
    let title = format!("{}: RPC calls on the wire", v.vm);
    let _ = writeln!(o, "<title>{}</title>", escape(&title));
    let _ = writeln!(o, "<rect x=\"0\" y=\"0\" width=\"{WIDTH:.0}\" height=\"{height:.0}\" fill=\"#ffffff\"/>");
    let _ = writeln!(
        o,
        "<text x=\"{LEFT:.0}\" y=\"18\" font-size=\"14\" font-weight=\"bold\" fill=\"#1b1f24\">{}</text>",
        escape(&title)
    );
    let shown = if rows.len() < s.calls.len() {
        format!(
            "{} of {} calls shown, those sent most often first ({retransmitted} calls were sent again)",
            rows.len(),
            s.calls.len()
        )
    } else {
        format!("all {} calls ({retransmitted} sent again)", s.calls.len())
    };
    let _ = writeln!(o, "<text x=\"{LEFT:.0}\" y=\"34\" fill=\"#57606a\">{}</text>", escape(&shown));
    let _ = writeln!(
        o,
        "<text x=\"{LEFT:.0}\" y=\"50\" fill=\"#57606a\"><tspan fill=\"{SEND}\">\u{25cf} first send</tspan><tspan dx=\"14\" fill=\"{RESEND}\">\u{25cf} resend, bar: wait before it (ms)</tspan><tspan dx=\"14\" fill=\"{REPLY}\">| first reply</tspan><tspan dx=\"14\" fill=\"{LOST}\">\u{00d7} no reply</tspan></text>"
    );
    axis.write_grid(&mut o, "s since the capture's first frame", TOP, bottom);
    for (i, c) in rows.iter().enumerate() {
        let y = TOP + ROW * i as f64 + ROW / 2.0;
        write_call(&mut o, &axis, &secs, y, c);
    }
    o.push_str("</svg>");
    o
}

/// One call's row at y = `y`: its XID and procedure, a line from first send to reply,
/// the wait bars, the marks, and the outcome at the right.
fn write_call(o: &mut String, axis: &Scale, secs: &dyn Fn(u64) -> f64, y: f64, c: &CallTimeline) {
    let _ = writeln!(
        o,
        "<text x=\"{:.0}\" y=\"{:.1}\" text-anchor=\"end\" font-family=\"monospace\" fill=\"#1b1f24\">{}</text>",
        LEFT - 8.0,
        y + 4.0,
        escape(&format!("0x{:08x} {}", c.xid, c.procedure))
    );
    let first = secs(c.sends_us[0]);
    let last = secs(*c.sends_us.last().expect("a call has a send"));
    let end = c.reply_us.map_or(last, secs);
    let _ = writeln!(
        o,
        "<line x1=\"{:.1}\" y1=\"{y:.1}\" x2=\"{:.1}\" y2=\"{y:.1}\" stroke=\"#8c959f\" stroke-width=\"1\"/>",
        axis.x(first),
        axis.x(end)
    );
    for (n, pair) in c.sends_us.windows(2).enumerate() {
        let (a, b) = (secs(pair[0]), secs(pair[1]));
        let wait_ms = pair[1].saturating_sub(pair[0]) as f64 / 1000.0;
        let (xa, xb) = (axis.x(a), axis.x(b));
        let _ = writeln!(
            o,
            "<rect class=\"wait\" data-xid=\"{}\" data-ms=\"{wait_ms}\" x=\"{xa:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"6\" fill=\"{RESEND}\" fill-opacity=\"0.3\"><title>{}</title></rect>",
            c.xid,
            y - 3.0,
            (xb - xa).max(0.5),
            escape(&format!("0x{:08x}: waited {} ms before send {}", c.xid, fmt_num(wait_ms), n + 2))
        );
        if xb - xa > 26.0 {
            let _ = writeln!(
                o,
                "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\" font-size=\"9\" fill=\"#8a4b00\">{}</text>",
                (xa + xb) / 2.0,
                y - 4.0,
                fmt_num(wait_ms)
            );
        }
    }
    for (n, &us) in c.sends_us.iter().enumerate() {
        let t = secs(us);
        let (class, fill) = if n == 0 { ("send", SEND) } else { ("resend", RESEND) };
        let _ = writeln!(
            o,
            "<circle class=\"{class}\" data-xid=\"{}\" data-t=\"{t}\" cx=\"{:.1}\" cy=\"{y:.1}\" r=\"3.5\" fill=\"{fill}\"><title>{}</title></circle>",
            c.xid,
            axis.x(t),
            escape(&format!("0x{:08x} {} send {} at {t:.6} s", c.xid, c.procedure, n + 1))
        );
    }
    let outcome = match c.reply_us {
        Some(r) => {
            let t = secs(r);
            let _ = writeln!(
                o,
                "<line class=\"reply\" data-xid=\"{}\" data-t=\"{t}\" x1=\"{x:.1}\" y1=\"{:.1}\" x2=\"{x:.1}\" y2=\"{:.1}\" stroke=\"{REPLY}\" stroke-width=\"2\"><title>{}</title></line>",
                c.xid,
                y - 6.0,
                y + 6.0,
                escape(&format!("0x{:08x} reply at {t:.6} s", c.xid)),
                x = axis.x(t)
            );
            format!("reply after {} ms", fmt_num(r.saturating_sub(c.sends_us[0]) as f64 / 1000.0))
        }
        None => {
            let _ = writeln!(
                o,
                "<text class=\"unanswered\" data-xid=\"{}\" x=\"{:.1}\" y=\"{:.1}\" fill=\"{LOST}\" font-size=\"12\">\u{00d7}</text>",
                c.xid,
                axis.x(last) + 5.0,
                y + 4.0
            );
            "no reply".to_string()
        }
    };
    let sends = match c.sends_us.len() {
        1 => String::new(),
        n => format!("{n} sends, "),
    };
    let _ = writeln!(
        o,
        "<text x=\"{:.0}\" y=\"{:.1}\" fill=\"#57606a\">{}</text>",
        WIDTH - RIGHT + 10.0,
        y + 4.0,
        escape(&format!("{sends}{outcome}"))
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::decode::decode;
    use crate::wire::decode::tests::{frame, udp, CLIENT, SERVER};
    use crate::wire::rpc::tests::{call, reply};

    fn vm_wire(frames: &[crate::wire::pcap::Frame]) -> VmWire {
        VmWire {
            vm: "client".into(),
            summary: WireSummary::of(&decode(frames), None),
            start_us: frames.first().map_or(0, |f| f.time_us),
        }
    }

    /// A READ sent three times (waits 0.7 s and 1.4 s) then answered, a GETATTR
    /// answered at once, a WRITE never answered: every send, resend and reply has its
    /// mark, at its time.
    #[test]
    fn every_send_resend_and_reply_has_a_mark() {
        let read = call(7, 100003, 3, 6, &[]);
        let frames = vec![
            frame(1_000_000, udp(CLIENT, SERVER, 800, 2049, &read)),
            frame(1_700_000, udp(CLIENT, SERVER, 800, 2049, &read)),
            frame(2_000_000, udp(CLIENT, SERVER, 800, 2049, &call(8, 100003, 3, 1, &[]))),
            frame(2_000_500, udp(SERVER, CLIENT, 2049, 800, &reply(8))),
            frame(3_100_000, udp(CLIENT, SERVER, 800, 2049, &read)),
            frame(3_100_400, udp(SERVER, CLIENT, 2049, 800, &reply(7))),
            frame(3_200_000, udp(CLIENT, SERVER, 800, 2049, &call(9, 100003, 3, 7, &[]))),
        ];
        let v = vm_wire(&frames);
        let svg = timeline_svg_to(&v, 0.0);
        // Alone, the axis ends at the last mark (2.2 s); shared with a longer VM's, at its end.
        assert!(svg.contains(">2.5</text>") && !svg.contains(">10</text>"), "{svg}");
        assert!(timeline_svg_to(&v, 9.5).contains(">10</text>"));
        assert_eq!(svg.matches("class=\"send\"").count(), 3);
        assert_eq!(svg.matches("class=\"resend\" data-xid=\"7\"").count(), 2);
        assert_eq!(svg.matches("class=\"reply\"").count(), 2);
        assert!(svg.contains("class=\"reply\" data-xid=\"7\" data-t=\"2.1004\""), "{svg}");
        assert!(svg.contains("class=\"wait\" data-xid=\"7\" data-ms=\"700\""), "{svg}");
        assert!(svg.contains("class=\"wait\" data-xid=\"7\" data-ms=\"1400\""), "{svg}");
        assert!(svg.contains("class=\"unanswered\" data-xid=\"9\""), "{svg}");
        assert!(svg.contains("3 sends, reply after 2100 ms"), "{svg}");
        assert!(svg.contains("all 3 calls (1 sent again)"), "{svg}");
    }

    /// More calls than rows: the resent ones stay, the chart says how many it shows.
    #[test]
    fn rows_are_capped_keeping_the_resent_calls() {
        let mut frames = Vec::new();
        for x in 0..100u32 {
            let t = 1_000_000 + u64::from(x) * 10_000;
            let c = call(x, 100003, 3, 1, &[]);
            frames.push(frame(t, udp(CLIENT, SERVER, 800, 2049, &c)));
            if x == 77 {
                frames.push(frame(t + 5_000, udp(CLIENT, SERVER, 800, 2049, &c)));
            }
            frames.push(frame(t + 6_000, udp(SERVER, CLIENT, 2049, 800, &reply(x))));
        }
        let v = vm_wire(&frames);
        let rows = timeline_rows(&v.summary);
        assert_eq!(rows.len(), TIMELINE_ROWS);
        assert!(rows.iter().any(|c| c.xid == 77));
        assert!(rows.windows(2).all(|w| w[0].sends_us[0] <= w[1].sends_us[0]));
        let svg = timeline_svg_to(&v, 0.0);
        assert!(svg.contains("40 of 100 calls shown, those sent most often first (1 calls were sent again)"), "{svg}");
        assert_eq!(svg.matches("class=\"send\"").count(), TIMELINE_ROWS);
    }
}
