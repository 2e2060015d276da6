//! The inline SVG chart of one measurement in `report.html`: one row per VM, every
//! repeat a dot, the range of the repeats a bar, the median a tick, the confidence
//! interval of a compared VM's ratio to its baseline (in the metric's units) a thin
//! bracketed line under its bar, and the baseline's median a dashed line across all
//! rows. Plain SVG 1.1 markup (no script, no external font or style), so it shows the
//! same in a browser, in a mail client that renders HTML, and to an XML parser.
//!
//! Each mark carries its number (`data-value`, and a `<title>` a browser shows on
//! hover), so a test can check the chart holds the numbers of `results.json`.

use std::fmt::Write as _;

use super::document::escape;

/// One VM's row.
#[derive(Debug, Clone)]
pub struct Series {
    /// VM name.
    pub vm: String,
    /// Its kernel release.
    pub release: String,
    /// The value of every counted repeat, in order.
    pub values: Vec<f64>,
    /// Median of `values`.
    pub median: Option<f64>,
    /// The baseline VM.
    pub baseline: bool,
    /// The verdict in words (`same`, `slower (1.1x–1.3x)`, `baseline`).
    pub verdict: String,
    /// The Mann–Whitney test's interval of the ratio to the baseline, as values in the
    /// metric's units (`low <= high`), and its words for the hover text (`99 % interval
    /// of the ratio 1.05x–1.40x`); `None` for the baseline, or when the numbers of
    /// repeats are too small for the interval's confidence.
    pub interval: Option<(f64, f64, String)>,
}

const WIDTH: f64 = 820.0;
const LEFT: f64 = 230.0;
const RIGHT: f64 = 170.0;
const TOP: f64 = 58.0;
const ROW: f64 = 46.0;
const BOTTOM: f64 = 44.0;

/// Colour of a row's marks: the baseline blue, worse red, better green, same grey.
fn colour(s: &Series) -> &'static str {
    let word = s.verdict.split_whitespace().next().unwrap_or("");
    match word {
        _ if s.baseline => "#1f6fb2",
        "slower" | "worse" => "#c0392b",
        "faster" | "better" => "#1e8449",
        _ => "#6b7280",
    }
}

/// A "nice" tick step (1, 2 or 5 × 10^k) giving about `n` ticks over `range`.
pub(super) fn tick_step(range: f64, n: f64) -> f64 {
    if range <= 0.0 || !range.is_finite() {
        return 1.0;
    }
    let raw = range / n;
    let mag = 10f64.powf(raw.log10().floor());
    let f = raw / mag;
    let nice = if f <= 1.0 {
        1.0
    } else if f <= 2.0 {
        2.0
    } else if f <= 5.0 {
        5.0
    } else {
        10.0
    };
    nice * mag
}

/// Short text of a value for labels.
pub fn fmt_num(v: f64) -> String {
    let a = v.abs();
    if a >= 1000.0 {
        format!("{v:.0}")
    } else if a >= 10.0 {
        format!("{v:.1}")
    } else if a >= 0.1 || a == 0.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    }
}

/// A tick label: as many decimals as the step needs.
pub(super) fn fmt_tick(t: f64, step: f64) -> String {
    let decimals = (-step.log10().floor()).max(0.0) as usize;
    format!("{t:.decimals$}")
}

/// The chart of measurement `title` (values in `unit`) over `series`.
pub fn strip_chart(title: &str, unit: &str, series: &[Series]) -> String {
    let axis = value_axis(series);
    let height = TOP + ROW * series.len().max(1) as f64 + BOTTOM;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"{WIDTH:.0}\" height=\"{height:.0}\" viewBox=\"0 0 {WIDTH:.0} {height:.0}\" font-family=\"sans-serif\" font-size=\"12\" class=\"vmrepro-chart\">"
    );
    let _ = writeln!(s, "<title>{}</title>", escape(&format!("{title} ({unit})")));
    let _ = writeln!(s, "<rect x=\"0\" y=\"0\" width=\"{WIDTH:.0}\" height=\"{height:.0}\" fill=\"#ffffff\"/>");
    let _ = writeln!(
        s,
        "<text x=\"{LEFT:.0}\" y=\"20\" font-size=\"14\" font-weight=\"bold\" fill=\"#1b1f24\">{}</text>",
        escape(&format!("{title} ({unit})"))
    );
    let _ = writeln!(
        s,
        "<text x=\"{LEFT:.0}\" y=\"38\" font-size=\"11\" fill=\"#57606a\">dots: repeats · bar: range · tick: median · {}dashed line: baseline median</text>",
        if series.iter().any(|s| s.interval.is_some()) { "[ ]: the ratio's interval · " } else { "" }
    );
    let bottom = TOP + ROW * series.len().max(1) as f64;
    axis.write_grid(&mut s, &escape(unit), TOP, bottom);
    // The baseline's median across every row.
    if let Some(m) = series.iter().find(|s| s.baseline).and_then(|s| s.median) {
        let xm = axis.x(m);
        let _ = writeln!(
            s,
            "<line class=\"baseline-median\" data-value=\"{m}\" x1=\"{xm:.1}\" y1=\"{:.0}\" x2=\"{xm:.1}\" y2=\"{bottom:.0}\" stroke=\"#1f6fb2\" stroke-width=\"1.5\" stroke-dasharray=\"5,4\"><title>{}</title></line>",
            TOP - 6.0,
            escape(&format!("baseline median {} {unit}", fmt_num(m)))
        );
    }
    for (i, sr) in series.iter().enumerate() {
        write_row(&mut s, &axis, unit, TOP + ROW * i as f64 + ROW / 2.0, sr);
    }
    s.push_str("</svg>");
    s
}

/// A horizontal scale: values `lo..hi` in round `step`s, drawn from x = `left` over
/// `width` pixels; the strip charts' value axis and the wire timelines' time axis.
pub(super) struct Scale {
    /// The value at the left end.
    pub lo: f64,
    /// The value at the right end.
    pub hi: f64,
    /// Between two ticks.
    pub step: f64,
    /// The x coordinate of `lo`.
    pub left: f64,
    /// The plot's width, pixels.
    pub width: f64,
}

impl Scale {
    /// The x coordinate of value `v`.
    pub(super) fn x(&self, v: f64) -> f64 {
        self.left + (v - self.lo) / (self.hi - self.lo) * self.width
    }

    /// Writes the grid lines from y = `top` down to y = `bottom` with their tick labels
    /// (at most 50), the axis line and the axis label `label` (already escaped for XML).
    pub(super) fn write_grid(&self, s: &mut String, label: &str, top: f64, bottom: f64) {
        let mut t = self.lo;
        let mut guard = 0;
        while t <= self.hi + self.step * 1e-6 && guard < 50 {
            let xt = self.x(t);
            let _ = writeln!(
                s,
                "<line x1=\"{xt:.1}\" y1=\"{top:.0}\" x2=\"{xt:.1}\" y2=\"{bottom:.0}\" stroke=\"#eaeef2\" stroke-width=\"1\"/>"
            );
            let _ = writeln!(
                s,
                "<text x=\"{xt:.1}\" y=\"{:.0}\" text-anchor=\"middle\" fill=\"#57606a\">{}</text>",
                bottom + 16.0,
                fmt_tick(t, self.step)
            );
            t += self.step;
            guard += 1;
        }
        let _ = writeln!(
            s,
            "<line x1=\"{:.0}\" y1=\"{bottom:.0}\" x2=\"{:.0}\" y2=\"{bottom:.0}\" stroke=\"#8c959f\" stroke-width=\"1\"/>",
            self.left,
            self.left + self.width
        );
        let _ = writeln!(
            s,
            "<text x=\"{:.0}\" y=\"{:.0}\" text-anchor=\"middle\" fill=\"#57606a\">{label}</text>",
            self.left + self.width / 2.0,
            bottom + 34.0
        );
    }
}

/// The value axis of `series`' finite values (`0..1` when there are none): from zero
/// when the values spread over more than half of it, else a window around them; both
/// ends on a tick; drawn from x = [`LEFT`] over the plot's width.
fn value_axis(series: &[Series]) -> Scale {
    let all: Vec<f64> = series
        .iter()
        .flat_map(|s| s.values.iter().copied().chain(s.interval.iter().flat_map(|i| [i.0, i.1])))
        .filter(|v| v.is_finite())
        .collect();
    let (mut lo, mut hi) = all.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &v| (a.min(v), b.max(v)));
    if all.is_empty() {
        (lo, hi) = (0.0, 1.0);
    }
    // The axis labels say where a window starts.
    let span = (hi - lo).max(hi.abs() * 0.02).max(1e-9);
    if lo >= 0.0 && lo < 0.5 * hi {
        lo = 0.0;
    } else {
        lo -= span * 0.25;
    }
    hi += span * 0.15;
    let step = tick_step(hi - lo, 5.0);
    Scale {
        lo: (lo / step).floor() * step,
        hi: (hi / step).ceil() * step,
        step,
        left: LEFT,
        width: WIDTH - LEFT - RIGHT,
    }
}

/// Writes the row of `sr` centred at y = `y`: its labels (VM, release), the range bar,
/// a dot per repeat, the median tick and the verdict at the right.
fn write_row(s: &mut String, axis: &Scale, unit: &str, y: f64, sr: &Series) {
    let c = colour(sr);
    let label = if sr.baseline { format!("{} (baseline)", sr.vm) } else { sr.vm.clone() };
    let _ = writeln!(
        s,
        "<text x=\"{:.0}\" y=\"{:.0}\" text-anchor=\"end\" font-weight=\"bold\" fill=\"#1b1f24\">{}</text>",
        LEFT - 12.0,
        y - 2.0,
        escape(&label)
    );
    let _ = writeln!(
        s,
        "<text x=\"{:.0}\" y=\"{:.0}\" text-anchor=\"end\" font-size=\"11\" fill=\"#57606a\">{}</text>",
        LEFT - 12.0,
        y + 12.0,
        escape(&sr.release)
    );
    let vals: Vec<f64> = sr.values.iter().copied().filter(|v| v.is_finite()).collect();
    if let (Some(mn), Some(mx)) = (vals.iter().copied().reduce(f64::min), vals.iter().copied().reduce(f64::max)) {
        let _ = writeln!(
            s,
            "<line class=\"range\" data-min=\"{mn}\" data-max=\"{mx}\" x1=\"{:.1}\" y1=\"{y:.1}\" x2=\"{:.1}\" y2=\"{y:.1}\" stroke=\"{c}\" stroke-opacity=\"0.35\" stroke-width=\"8\" stroke-linecap=\"round\"/>",
            axis.x(mn),
            axis.x(mx)
        );
    }
    for (j, v) in sr.values.iter().enumerate() {
        if !v.is_finite() {
            continue;
        }
        // Repeats with equal values are spread up and down a little.
        let dy = [0.0, -6.0, 6.0][j % 3];
        let _ = writeln!(
            s,
            "<circle class=\"repeat\" data-vm=\"{}\" data-repeat=\"{}\" data-value=\"{v}\" cx=\"{:.1}\" cy=\"{:.1}\" r=\"4.5\" fill=\"{c}\" fill-opacity=\"0.85\" stroke=\"#ffffff\" stroke-width=\"1\"><title>{}</title></circle>",
            escape(&sr.vm),
            j + 1,
            axis.x(*v),
            y + dy,
            escape(&format!("{} repeat {}: {} {unit}", sr.vm, j + 1, fmt_num(*v)))
        );
    }
    if let Some((lo, hi, words)) = sr.interval.as_ref().filter(|i| i.0.is_finite() && i.1.is_finite()) {
        let (x1, x2, yi) = (axis.x(*lo), axis.x(*hi), y + 17.0);
        let title = escape(&format!("{}: {words}: {}–{} {unit}", sr.vm, fmt_num(*lo), fmt_num(*hi)));
        let _ = writeln!(
            s,
            "<path class=\"interval\" data-vm=\"{}\" data-low=\"{lo}\" data-high=\"{hi}\" d=\"M{x1:.1},{:.1} V{yi:.1} H{x2:.1} V{:.1}\" fill=\"none\" stroke=\"#1b1f24\" stroke-width=\"1.2\"><title>{title}</title></path>",
            escape(&sr.vm),
            yi - 4.0,
            yi - 4.0
        );
    }
    if let Some(m) = sr.median {
        let xm = axis.x(m);
        let _ = writeln!(
            s,
            "<line class=\"median\" data-vm=\"{}\" data-value=\"{m}\" x1=\"{xm:.1}\" y1=\"{:.1}\" x2=\"{xm:.1}\" y2=\"{:.1}\" stroke=\"#1b1f24\" stroke-width=\"2.5\"><title>{}</title></line>",
            escape(&sr.vm),
            y - 13.0,
            y + 13.0,
            escape(&format!("{} median {} {unit}", sr.vm, fmt_num(m)))
        );
    }
    let _ = writeln!(
        s,
        "<text x=\"{:.0}\" y=\"{:.0}\" fill=\"{c}\">{}</text>",
        LEFT + (WIDTH - LEFT - RIGHT) + 14.0,
        y + 4.0,
        escape(&if sr.baseline { "baseline".to_string() } else { sr.verdict.clone() })
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_round() {
        assert_eq!(tick_step(10.0, 5.0), 2.0);
        assert_eq!(tick_step(0.7, 5.0), 0.2);
        assert_eq!(tick_step(300.0, 5.0), 100.0);
        assert_eq!(fmt_tick(25.0, 5.0), "25");
        assert_eq!(fmt_tick(0.4, 0.2), "0.4");
    }

    #[test]
    fn chart_has_one_dot_per_repeat() {
        let s = strip_chart(
            "nfs-read: elapsed_s",
            "s",
            &[
                Series {
                    vm: "a".into(),
                    release: "6.1".into(),
                    values: vec![1.0, 1.2, 1.1],
                    median: Some(1.1),
                    baseline: true,
                    verdict: "baseline".into(),
                    interval: None,
                },
                Series {
                    vm: "b".into(),
                    release: "6.1".into(),
                    values: vec![2.0, 2.2],
                    median: Some(2.1),
                    baseline: false,
                    verdict: "slower (1.6x–2.2x)".into(),
                    interval: Some((1.9, 2.5, "99 % interval of the ratio 1.73x–2.27x".into())),
                },
            ],
        );
        assert_eq!(s.matches("<circle class=\"repeat\"").count(), 5);
        assert_eq!(s.matches("class=\"interval\"").count(), 1, "the baseline has none");
        assert!(s.contains("data-low=\"1.9\" data-high=\"2.5\""));
        assert!(s.contains("[ ]: the ratio's interval"));
        assert_eq!(s.matches("class=\"median\"").count(), 2);
        assert_eq!(s.matches("class=\"baseline-median\"").count(), 1);
    }
}
