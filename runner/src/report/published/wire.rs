//! "On the wire" in `report.md` and `report.html`: what each VM's packet capture
//! (`RUN/vms/VM/capture.pcap`, see docs/src/wire.md) shows, one section per measurement
//! whose VMs were captured, since that is how the capture is cut: each measured
//! iteration's frames are the bytes QEMU wrote while its step ran (`capture_bytes` in
//! `run.json`).
//!
//! A section says what each capture holds (`capture: measured`: only the measured
//! iterations' steps; `capture: true`: the whole run), then per VM the RPC table
//! `vmrepro wire` prints ([`crate::wire::table`]) over the measurement's iterations, and
//! on the page, per iteration, an inline SVG that sets the VMs' calls side by side:
//! one panel per VM, one row per call in order of first send (row k holds each VM's
//! k-th call), time since that call's first send on the x axis, a mark for every send,
//! resend and the first reply, and a bar with its length in ms for the wait before
//! each resend. The RTO suite's two kernels send the same calls and resend the same
//! ones; their rows line up, and the unpatched kernel's bars are the longer.
//!
//! The chart is bounded: only rows where a call was sent again or never answered on
//! some VM, at most [`TIMELINE_ROWS`] of them (the first in call order), and at most
//! [`MAX_ITERATION_CHARTS`] iterations per measurement; it says how many it shows.
//! Plain SVG 1.1 like [`super::chart`]; each call's group carries its row, VM, XID,
//! number of sends and waits (`data-row`, `data-vm`, `data-xid`, `data-sends`,
//! `data-waits-ms`), so a test can check it against the summary.

use std::fmt::Write as _;

use super::chart::{fmt_num, tick_step, Scale};
use super::document::{escape, Block, Section};
use crate::analyse::Analysis;
use crate::run::record::CaptureRecord;
use crate::wire::run_dir::{captures, Capture, WireError};
use crate::wire::summary::{CallTimeline, WireSummary};
use crate::wire::table;

/// Most rows (calls) a chart shows.
pub const TIMELINE_ROWS: usize = 60;
/// Most iterations of one measurement charted.
pub const MAX_ITERATION_CHARTS: u32 = 3;

const WIDTH: f64 = 1000.0;
const LEFT: f64 = 150.0;
const GAP: f64 = 28.0;
const RIGHT: f64 = 16.0;
const TOP: f64 = 96.0;
const ROW: f64 = 16.0;
const BOTTOM: f64 = 44.0;
const SEND: &str = "#1f6fb2";
const RESEND: &str = "#d97706";
const REPLY: &str = "#1e8449";
const LOST: &str = "#c0392b";

/// The "On the wire" sections of run `a`: one per measurement with a captured VM, and
/// one for captured VMs that took part in no measurement; none when no VM had a
/// capture. Captures that can't be read are named with the reason, never skipped.
pub fn wire_sections(a: &Analysis) -> Vec<Section> {
    let vms = match captures(&a.dir, None) {
        Ok(v) => v,
        Err(WireError::NoCaptures { .. }) => return vec![],
        Err(e) => {
            let mut s = Section::new("On the wire");
            s.push(Block::Para(format!("The captures could not be read: {e}")));
            return vec![s];
        }
    };
    let capture = |vm: &str| vms.iter().find(|(v, _)| v == vm).map(|(_, c)| c);
    let mut out = Vec::new();
    for m in &a.results.measurements {
        let captured: Vec<&str> = m.vms.iter().map(|v| v.vm.as_str()).filter(|v| capture(v).is_some()).collect();
        if captured.is_empty() {
            continue;
        }
        let mut s = Section::new(&format!("On the wire: {}", m.name));
        s.push(Block::Para(INTRO.into()));
        s.push(Block::Items(
            captured.iter().map(|vm| held(vm, a.record.vm(vm).and_then(|r| r.capture.as_ref()))).collect(),
        ));
        // Per VM: the measured iterations' windows, in iteration order.
        let mut windows: Vec<VmIterations> = Vec::new();
        for vm in &captured {
            let c = capture(vm).expect("captured");
            let v = m.vm(vm).expect("in the measurement");
            let (mut per, mut missing) = (Vec::new(), Vec::new());
            for i in &v.iterations {
                match a.record.vm(vm).and_then(|r| r.step(&i.step)).and_then(|st| st.capture_bytes) {
                    Some(range) => per.push((i.iteration, c.window(range))),
                    None => missing.push(i.iteration.to_string()),
                }
            }
            windows.push(VmIterations { vm, per, missing });
        }
        // First the iterations side by side, then each VM's table.
        let most = windows.iter().flat_map(|w| w.per.iter().map(|(n, _)| *n)).max().unwrap_or(0);
        for n in 1..=most.min(MAX_ITERATION_CHARTS) {
            let panels: Vec<Panel> = windows
                .iter()
                .filter_map(|w| w.per.iter().find(|(i, _)| *i == n).map(|(_, s)| Panel { vm: w.vm, summary: s }))
                .collect();
            if !panels.is_empty() {
                s.push(Block::Chart(timeline_svg(&format!("{}, iteration {n}", m.name), &panels)));
            }
        }
        if most > MAX_ITERATION_CHARTS {
            s.push(Block::Para(format!(
                "Charted: iterations 1 to {MAX_ITERATION_CHARTS} of {most}; the tables below hold them all."
            )));
        }
        for VmIterations { vm, per, missing } in &windows {
            let whole = WireSummary::merge(&per.iter().map(|(_, w)| w.clone()).collect::<Vec<_>>());
            let not_in = if missing.is_empty() {
                String::new()
            } else {
                format!("; iteration {} not in the capture", missing.join(", "))
            };
            s.push(Block::Para(format!(
                "VM {vm}, its {} measured iteration(s) together{not_in} (times in s since its capture's first frame):",
                per.len()
            )));
            let start = capture(vm).map_or(0, Capture::start_us);
            s.push(Block::Table(table::render(vm, &whole, start)));
        }
        out.push(s);
    }
    let outside: Vec<&(String, Capture)> =
        vms.iter().filter(|(vm, _)| !a.results.measurements.iter().any(|m| m.vm(vm).is_some())).collect();
    if !outside.is_empty() {
        let mut s = Section::new("On the wire: VMs in no measurement");
        s.push(Block::Para(INTRO.into()));
        for (vm, c) in outside {
            s.push(Block::Para(held(vm, a.record.vm(vm).and_then(|r| r.capture.as_ref()))));
            s.push(Block::Table(table::render(vm, &c.summary(), c.start_us())));
        }
        out.push(s);
    }
    out
}

/// One captured VM's measured iterations in a measurement.
struct VmIterations<'a> {
    /// The VM.
    vm: &'a str,
    /// Each iteration in the capture: its number and its frames, summarised.
    per: Vec<(u32, WireSummary)>,
    /// The numbers of those not in it (the capture had stopped).
    missing: Vec<String>,
}

/// What every wire section says first: where the capture point is and what the table
/// holds.
const INTRO: &str = "Each captured VM's traffic as QEMU's filter-dump saw it on the VM's netdev, outside the guest and after the guest's own netem: a frame a VM's netem dropped is in no capture. Per RPC procedure: distinct calls (XIDs), sends after a call's first (retrans), calls answered, first send to first whole reply in ms; then datagrams with a missing fragment (which one: 0-based index) and the ten longest waits before a resend. An iteration's frames are those QEMU wrote while its step ran: its setup (the mount), the observers, the measured command, the records after it and its teardown (the unmount). `vmrepro wire RUN_DIR VM` prints the whole capture the same way.";

/// What VM `vm`'s capture holds, from its `run.json` record (`None`: a run folder
/// that does not say).
fn held(vm: &str, rec: Option<&CaptureRecord>) -> String {
    let mut t = match rec {
        Some(r) if r.measured_only => format!(
            "{vm}: capture: measured, so only its measured iterations' steps are in it (boot, setup steps, warm-up iterations and other steps are not); {} bytes",
            r.bytes
        ),
        Some(r) => format!(
            "{vm}: capture: true, the whole run from boot (below: its measured iterations' frames only); {} bytes",
            r.bytes
        ),
        None => format!("{vm}: run.json does not say what its capture holds"),
    };
    if let Some(why) = rec.and_then(|r| r.stopped.as_deref()) {
        let _ = write!(t, "; {why}");
    }
    t
}

/// One VM's calls in one iteration, a panel of [`timeline_svg`].
#[derive(Debug)]
pub struct Panel<'a> {
    /// The VM.
    pub vm: &'a str,
    /// Its iteration's frames, summarised.
    pub summary: &'a WireSummary,
}

/// The rows [`timeline_svg`] shows: 0-based call positions (in order of first send)
/// where some panel's call was sent again or never answered, the first
/// [`TIMELINE_ROWS`] of them; and how many there are in all.
pub fn timeline_rows(panels: &[Panel]) -> (Vec<usize>, usize) {
    let most = panels.iter().map(|p| p.summary.calls.len()).max().unwrap_or(0);
    let rows: Vec<usize> = (0..most)
        .filter(|&k| {
            panels.iter().any(|p| p.summary.calls.get(k).is_some_and(|c| c.sends_us.len() > 1 || c.reply_us.is_none()))
        })
        .collect();
    let all = rows.len();
    (rows.into_iter().take(TIMELINE_ROWS).collect(), all)
}

/// How long call `c` lasted from its first send to its reply (or its last send),
/// seconds.
fn span_s(c: &CallTimeline) -> f64 {
    let end = c.reply_us.unwrap_or(*c.sends_us.last().expect("a call has a send"));
    end.saturating_sub(c.sends_us[0]) as f64 / 1e6
}

/// The side-by-side timeline of `panels` (one iteration of each VM), titled `title`:
/// see the module's docs. Every panel shares one time scale (seconds since each call's
/// first send), so their waits compare by length.
pub fn timeline_svg(title: &str, panels: &[Panel]) -> String {
    let (rows, all) = timeline_rows(panels);
    let calls = |k: usize| panels.iter().filter_map(move |p| p.summary.calls.get(k));
    let longest = rows.iter().flat_map(|&k| calls(k).map(span_s)).fold(0.0, f64::max).max(1e-3);
    let step = tick_step(longest, 5.0);
    let n = panels.len().max(1) as f64;
    let panel_w = (WIDTH - LEFT - RIGHT - GAP * (n - 1.0)) / n;
    let axis = |i: usize| Scale {
        lo: 0.0,
        hi: (longest / step).ceil() * step,
        step,
        left: LEFT + i as f64 * (panel_w + GAP),
        width: panel_w - 12.0,
    };
    let bottom = TOP + ROW * rows.len().max(1) as f64;
    let height = bottom + BOTTOM;
    let mut o = String::new();
    let _ = writeln!(
        o,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"{WIDTH:.0}\" height=\"{height:.0}\" viewBox=\"0 0 {WIDTH:.0} {height:.0}\" font-family=\"sans-serif\" font-size=\"11\" class=\"vmrepro-wire\" data-rows=\"{}\">",
        rows.len()
    );
    let heading = format!("{title}: RPC calls on the wire, call by call");
    let _ = writeln!(o, "<title>{}</title>", escape(&heading));
    let _ = writeln!(o, "<rect x=\"0\" y=\"0\" width=\"{WIDTH:.0}\" height=\"{height:.0}\" fill=\"#ffffff\"/>");
    let _ = writeln!(
        o,
        "<text x=\"10\" y=\"18\" font-size=\"14\" font-weight=\"bold\" fill=\"#1b1f24\">{}</text>",
        escape(&heading)
    );
    let most = panels.iter().map(|p| p.summary.calls.len()).max().unwrap_or(0);
    let differ = rows
        .iter()
        .filter(|&&k| calls(k).map(|c| c.procedure.as_str()).collect::<std::collections::BTreeSet<_>>().len() > 1)
        .count();
    let shown = if rows.len() < all {
        format!("the first {} of the {all} calls sent again or never answered on some VM (of {most} calls)", rows.len())
    } else {
        format!("the {all} calls sent again or never answered on some VM (of {most} calls)")
    };
    let agree = match (panels.len(), differ) {
        (1, _) => String::new(),
        (_, 0) => "; the VMs' procedures agree on every row".into(),
        (_, d) => format!("; the VMs' procedures differ on {d} rows"),
    };
    let _ = writeln!(
        o,
        "<text x=\"10\" y=\"36\" fill=\"#57606a\">{}</text>",
        escape(&format!("Row #k: each VM's k-th call in order of first send; shown: {shown}{agree}."))
    );
    let _ = writeln!(
        o,
        "<text x=\"10\" y=\"52\" fill=\"#57606a\"><tspan fill=\"{SEND}\">\u{25cf} first send</tspan><tspan dx=\"14\" fill=\"{RESEND}\">\u{25cf} resend, bar: wait before it (ms)</tspan><tspan dx=\"14\" fill=\"{REPLY}\">| first reply</tspan><tspan dx=\"14\" fill=\"{LOST}\">\u{00d7} no reply</tspan><tspan dx=\"14\">hover: XID and times</tspan></text>"
    );
    for (i, p) in panels.iter().enumerate() {
        let ax = axis(i);
        let resent = p.summary.calls.iter().filter(|c| c.sends_us.len() > 1).count();
        let waits: Vec<u64> = p.summary.waits.iter().map(|w| w.sent_us - w.previous_us).collect();
        let q = crate::wire::summary::Quantiles::of(&waits);
        let _ = writeln!(
            o,
            "<text x=\"{:.1}\" y=\"{:.0}\" font-weight=\"bold\" fill=\"#1b1f24\">{}</text>",
            ax.left,
            TOP - 24.0,
            escape(p.vm)
        );
        let _ = writeln!(
            o,
            "<text x=\"{:.1}\" y=\"{:.0}\" fill=\"#57606a\">{}</text>",
            ax.left,
            TOP - 10.0,
            escape(&format!(
                "{} calls, {resent} sent again, {} resends, wait p50 {} / max {} ms",
                p.summary.calls.len(),
                p.summary.waits.len(),
                fmt_num(q.p50_ms),
                fmt_num(q.max_ms)
            ))
        );
        ax.write_grid(&mut o, "s since the call's first send", TOP, bottom);
    }
    for (r, &k) in rows.iter().enumerate() {
        let y = TOP + ROW * r as f64 + ROW / 2.0;
        let procedure = calls(k).next().map_or("", |c| c.procedure.as_str());
        let _ = writeln!(
            o,
            "<text x=\"{:.0}\" y=\"{:.1}\" text-anchor=\"end\" font-family=\"monospace\" fill=\"#1b1f24\">{}</text>",
            LEFT - 8.0,
            y + 4.0,
            escape(&format!("#{} {procedure}", k + 1))
        );
        for (i, p) in panels.iter().enumerate() {
            match p.summary.calls.get(k) {
                Some(c) => write_call(&mut o, &axis(i), p, k, y, c),
                None => {
                    let _ = writeln!(
                        o,
                        "<text x=\"{:.1}\" y=\"{:.1}\" fill=\"#8c959f\">no call</text>",
                        axis(i).left,
                        y + 4.0
                    );
                }
            }
        }
    }
    o.push_str("</svg>");
    o
}

/// Call `c` (row `k` of panel `p`) at y = `y` on `axis`: a line from first send to
/// reply, the wait bars, the marks. Times in tooltips: seconds since the panel's
/// iteration's first call.
fn write_call(o: &mut String, axis: &Scale, p: &Panel, k: usize, y: f64, c: &CallTimeline) {
    let t0 = c.sends_us[0];
    let origin = p.summary.calls.first().map_or(t0, |f| f.sends_us[0]);
    let rel = |us: u64| us.saturating_sub(t0) as f64 / 1e6;
    let at = |us: u64| us.saturating_sub(origin) as f64 / 1e6;
    let waits: Vec<String> =
        c.sends_us.windows(2).map(|w| (w[1].saturating_sub(w[0]) as f64 / 1000.0).to_string()).collect();
    let _ = writeln!(
        o,
        "<g class=\"call\" data-row=\"{}\" data-vm=\"{}\" data-xid=\"{}\" data-sends=\"{}\" data-waits-ms=\"{}\">",
        k + 1,
        escape(p.vm),
        c.xid,
        c.sends_us.len(),
        waits.join(",")
    );
    let _ = writeln!(
        o,
        "<title>{}</title>",
        escape(&format!(
            "{}: call #{} 0x{:08x} {}, first sent {:.3} s into the iteration; {}",
            p.vm,
            k + 1,
            c.xid,
            c.procedure,
            at(t0),
            match (c.sends_us.len(), c.reply_us) {
                (1, Some(r)) => format!("sent once, reply after {} ms", fmt_num(r.saturating_sub(t0) as f64 / 1000.0)),
                (n, Some(r)) => format!("{n} sends, reply after {} ms", fmt_num(r.saturating_sub(t0) as f64 / 1000.0)),
                (1, None) => "sent once, no reply".to_string(),
                (n, None) => format!("{n} sends, no reply"),
            }
        ))
    );
    let _ = writeln!(
        o,
        "<line x1=\"{:.1}\" y1=\"{y:.1}\" x2=\"{:.1}\" y2=\"{y:.1}\" stroke=\"#8c959f\" stroke-width=\"1\"/>",
        axis.x(0.0),
        axis.x(span_s(c))
    );
    for pair in c.sends_us.windows(2) {
        let (xa, xb) = (axis.x(rel(pair[0])), axis.x(rel(pair[1])));
        let wait_ms = pair[1].saturating_sub(pair[0]) as f64 / 1000.0;
        let _ = writeln!(
            o,
            "<rect class=\"wait\" x=\"{xa:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"6\" fill=\"{RESEND}\" fill-opacity=\"0.3\"/>",
            y - 3.0,
            (xb - xa).max(0.5)
        );
        if xb - xa > 30.0 {
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
        let (class, fill) = if n == 0 { ("send", SEND) } else { ("resend", RESEND) };
        let _ = writeln!(
            o,
            "<circle class=\"{class}\" cx=\"{:.1}\" cy=\"{y:.1}\" r=\"3.5\" fill=\"{fill}\"/>",
            axis.x(rel(us))
        );
    }
    match c.reply_us {
        Some(r) => {
            let x = axis.x(rel(r));
            let _ = writeln!(
                o,
                "<line class=\"reply\" x1=\"{x:.1}\" y1=\"{:.1}\" x2=\"{x:.1}\" y2=\"{:.1}\" stroke=\"{REPLY}\" stroke-width=\"2\"/>",
                y - 6.0,
                y + 6.0
            );
        }
        None => {
            let _ = writeln!(
                o,
                "<text class=\"unanswered\" x=\"{:.1}\" y=\"{:.1}\" fill=\"{LOST}\" font-size=\"12\">\u{00d7}</text>",
                axis.x(span_s(c)) + 5.0,
                y + 4.0
            );
        }
    }
    o.push_str("</g>\n");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::decode::decode;
    use crate::wire::decode::tests::{frame, udp, CLIENT, SERVER};
    use crate::wire::rpc::tests::{call, reply};

    /// One VM's iteration: a GETATTR answered at once, a READ sent `sends` times
    /// `wait_us` apart then answered, a WRITE never answered.
    fn iteration(start: u64, sends: u64, wait_us: u64) -> WireSummary {
        let read = call(7, 100003, 3, 6, &[]);
        let mut frames = vec![
            frame(start, udp(CLIENT, SERVER, 800, 2049, &call(8, 100003, 3, 1, &[]))),
            frame(start + 500, udp(SERVER, CLIENT, 2049, 800, &reply(8))),
        ];
        let mut t = start + 1_000_000;
        for _ in 0..sends {
            frames.push(frame(t, udp(CLIENT, SERVER, 800, 2049, &read)));
            t += wait_us;
        }
        frames.push(frame(t - wait_us + 400, udp(SERVER, CLIENT, 2049, 800, &reply(7))));
        frames.push(frame(t, udp(CLIENT, SERVER, 800, 2049, &call(9, 100003, 3, 7, &[]))));
        WireSummary::of(&decode(&frames), None)
    }

    /// Two VMs that resend the same READ three times, one waiting twice as long: the
    /// READ's row holds both, with their sends and waits; the GETATTR answered at once
    /// has no row; the unanswered WRITE has one.
    #[test]
    fn the_same_call_of_two_vms_shares_a_row() {
        let (fast, slow) = (iteration(1_000_000, 3, 700_000), iteration(50_000_000, 3, 1_400_000));
        let panels = [Panel { vm: "patched", summary: &fast }, Panel { vm: "mainline", summary: &slow }];
        assert_eq!(timeline_rows(&panels), (vec![1, 2], 2));
        let svg = timeline_svg("read, iteration 1", &panels);
        assert!(roxmltree::Document::parse(&svg).is_ok(), "well-formed: {svg}");
        assert!(
            svg.contains("class=\"call\" data-row=\"2\" data-vm=\"patched\" data-xid=\"7\" data-sends=\"3\" data-waits-ms=\"700,700\""),
            "{svg}"
        );
        assert!(
            svg.contains("class=\"call\" data-row=\"2\" data-vm=\"mainline\" data-xid=\"7\" data-sends=\"3\" data-waits-ms=\"1400,1400\""),
            "{svg}"
        );
        assert_eq!(svg.matches("class=\"call\"").count(), 4, "{svg}");
        assert_eq!(svg.matches("class=\"unanswered\"").count(), 2);
        assert_eq!(svg.matches("class=\"resend\"").count(), 4);
        // One scale: a 700 ms wait is half as wide as a 1400 ms one.
        let doc = roxmltree::Document::parse(&svg).unwrap();
        let xs = |vm: &str| -> Vec<f64> {
            let g = doc
                .descendants()
                .find(|n| n.attribute("data-row") == Some("2") && n.attribute("data-vm") == Some(vm))
                .expect("the READ's group");
            g.children()
                .filter(|c| c.has_tag_name("circle"))
                .map(|c| c.attribute("cx").unwrap().parse().unwrap())
                .collect()
        };
        let (p, m) = (xs("patched"), xs("mainline"));
        assert_eq!((p.len(), m.len()), (3, 3));
        assert!(((m[1] - m[0]) - 2.0 * (p[1] - p[0])).abs() < 0.2, "{p:?} {m:?}");
        assert!(svg.contains("the 2 calls sent again or never answered on some VM (of 3 calls); the VMs&#39; procedures agree on every row"), "{svg}");
        assert!(svg.contains("mainline: call #2 0x00000007 NFSv3 READ, first sent 1.000 s into the iteration; 3 sends, reply after 2800 ms"), "{svg}");
    }
}
