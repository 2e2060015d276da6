//! Parser for the report that GNU `time` (`/usr/bin/time`, not the shell
//! keyword) writes to stderr in its **default** format.
//!
//! Source of the format: GNU time's built-in default format string, identical in
//! time 1.7 (1996; the version in 2003-era distributions and still the "1.7"
//! shipped by older Debian releases) and time 1.9 (Debian bookworm, package
//! `time` 1.9-0.2):
//!
//! ```text
//! %Uuser %Ssystem %Eelapsed %PCPU (%Xavgtext+%Davgdata %Mmaxresident)k
//! %Iinputs+%Ooutputs (%Fmajor+%Rminor)pagefaults %Wswaps
//! ```
//!
//! for example
//!
//! ```text
//! Command exited with non-zero status 1
//! 0.00user 0.05system 0:04.52elapsed 1%CPU (0avgtext+0avgdata 1920maxresident)k
//! 0inputs+0outputs (0major+85minor)pagefaults 0swaps
//! ```
//!
//! * `%U`/`%S` are CPU seconds with two decimals.
//! * `%E` is wall-clock time, `m:ss.cc` below one hour and `h:mm:ss` (whole
//!   seconds) from one hour on.
//! * `%P` is `<n>%`, or `?%` when the elapsed time was zero (time 1.7).
//! * `%X`, `%D`, `%M` are kilobytes; with time 1.7 on Linux before 2.6.32 they
//!   are always 0 (the kernel did not fill those rusage fields).
//! * The report is preceded by `Command exited with non-zero status N` when the
//!   command failed, or `Command terminated by signal N` when it was killed.
//!
//! The captured stderr also contains whatever the measured command wrote to its
//! own stderr (e.g. `cat: FILE: Input/output error`); such lines are kept in
//! [`GnuTime::unknown`]. If a command's last stderr line had no newline, GNU time's
//! report is glued to it; the glued text is split off into `unknown` as well.

use super::{nonblank_lines, not_recognised, ParseError, Tool};
use serde::{Deserialize, Serialize};

/// One GNU time report (default format), see the [module docs](self).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GnuTime {
    /// User CPU time, seconds (`%U`).
    pub user_s: f64,
    /// System CPU time, seconds (`%S`).
    pub system_s: f64,
    /// Wall-clock time, seconds (`%E`, converted from `m:ss.cc` or `h:mm:ss`).
    pub elapsed_s: f64,
    /// CPU share in percent (`%P`); `None` when GNU time printed `?%` (zero elapsed time).
    pub cpu_percent: Option<u32>,
    /// Average shared text size, KiB (`%X`).
    pub avg_text_kb: u64,
    /// Average unshared data size, KiB (`%D`).
    pub avg_data_kb: u64,
    /// Maximum resident set size, KiB (`%M`).
    pub max_rss_kb: u64,
    /// File system inputs, 512-byte blocks (`%I`).
    pub inputs: u64,
    /// File system outputs, 512-byte blocks (`%O`).
    pub outputs: u64,
    /// Major page faults (`%F`).
    pub major_faults: u64,
    /// Minor page faults (`%R`).
    pub minor_faults: u64,
    /// Swaps (`%W`).
    pub swaps: u64,
    /// Exit status of the command: `Some(n)` from `Command exited with non-zero
    /// status n`, `Some(0)` when GNU time printed no status line, `None` when the
    /// command was killed by a signal (see [`signal`](Self::signal)).
    pub exit_status: Option<i32>,
    /// Signal number from `Command terminated by signal N`, if any.
    pub signal: Option<i32>,
    /// Every other non-blank line (trimmed): the command's own stderr, text glued
    /// in front of the report, and any earlier reports if several were captured
    /// (the **last** complete report is the one parsed).
    pub unknown: Vec<String>,
}

const EXIT_PREFIX: &str = "Command exited with non-zero status ";
const SIGNAL_PREFIX: &str = "Command terminated by signal ";

/// Parses captured stderr containing a GNU time default-format report.
///
/// Returns [`ParseError::Empty`] for blank input and
/// [`ParseError::NotRecognised`] when no two consecutive lines form a report.
pub fn parse(input: &str) -> Result<GnuTime, ParseError> {
    let lines: Vec<&str> = nonblank_lines(input).collect();
    let mut found = None;
    for i in 0..lines.len().saturating_sub(1) {
        if let (Some(first), Some(second)) = (parse_first(lines[i]), parse_second(lines[i + 1])) {
            found = Some((i, first, second));
        }
    }
    let Some((at, first, second)) = found else {
        return Err(not_recognised(Tool::GnuTime, input));
    };

    let mut exit_status = Some(0);
    let mut signal = None;
    let mut status_line = None;
    if at > 0 {
        if let Some((_, status)) = parse_status(lines[at - 1]) {
            status_line = Some(at - 1);
            match status {
                Status::Exited(code) => exit_status = Some(code),
                Status::Signal(sig) => {
                    exit_status = None;
                    signal = Some(sig);
                }
            }
        }
    }
    Ok(GnuTime {
        user_s: first.user_s,
        system_s: first.system_s,
        elapsed_s: first.elapsed_s,
        cpu_percent: first.cpu_percent,
        avg_text_kb: first.avg_text_kb,
        avg_data_kb: first.avg_data_kb,
        max_rss_kb: first.max_rss_kb,
        inputs: second[0],
        outputs: second[1],
        major_faults: second[2],
        minor_faults: second[3],
        swaps: second[4],
        exit_status,
        signal,
        unknown: collect_unknown(&lines, at, status_line, &first.prefix),
    })
}

/// Collects `unknown` in text order: every line except the status line and the
/// two report lines, plus any foreign text glued in front of those (trimmed).
fn collect_unknown(lines: &[&str], at: usize, status_line: Option<usize>, first_prefix: &str) -> Vec<String> {
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        if Some(i) == status_line {
            if let Some((prefix, _)) = parse_status(line) {
                if !prefix.trim().is_empty() {
                    out.push(prefix.trim().to_string());
                }
            }
        } else if i == at {
            if !first_prefix.trim().is_empty() {
                out.push(first_prefix.trim().to_string());
            }
        } else if i != at + 1 {
            out.push(line.trim().to_string());
        }
    }
    out
}

enum Status {
    Exited(i32),
    Signal(i32),
}

/// Recognises a status line, possibly with foreign text glued in front; returns
/// that text and the status.
fn parse_status(line: &str) -> Option<(&str, Status)> {
    let line = line.trim_end();
    for (marker, is_exit) in [(EXIT_PREFIX, true), (SIGNAL_PREFIX, false)] {
        if let Some(pos) = line.find(marker) {
            let n: i32 = line[pos + marker.len()..].trim().parse().ok()?;
            let status = if is_exit { Status::Exited(n) } else { Status::Signal(n) };
            return Some((&line[..pos], status));
        }
    }
    None
}

struct First {
    prefix: String,
    user_s: f64,
    system_s: f64,
    elapsed_s: f64,
    cpu_percent: Option<u32>,
    avg_text_kb: u64,
    avg_data_kb: u64,
    max_rss_kb: u64,
}

/// `0.00user 0.05system 0:04.52elapsed 1%CPU (0avgtext+0avgdata 1920maxresident)k`,
/// possibly with foreign text before it.
fn parse_first(line: &str) -> Option<First> {
    let line = line.trim_end();
    if !line.ends_with("maxresident)k") {
        return None;
    }
    let tokens: Vec<&str> = line.split_whitespace().collect();
    if tokens.len() < 6 {
        return None;
    }
    let t = &tokens[tokens.len() - 6..];
    // t[0] may carry glued foreign text: keep only the trailing `[0-9.]+user`.
    let user_tok = t[0].strip_suffix("user")?;
    let num_start = user_tok.rfind(|c: char| !(c.is_ascii_digit() || c == '.')).map_or(0, |p| p + 1);
    let user_s = parse_seconds(&user_tok[num_start..])?;
    let system_s = parse_seconds(t[1].strip_suffix("system")?)?;
    let elapsed_s = parse_elapsed(t[2].strip_suffix("elapsed")?)?;
    let cpu = t[3].strip_suffix("%CPU")?;
    let cpu_percent = if cpu == "?" { None } else { Some(cpu.parse().ok()?) };
    let (text, data) = t[4].strip_prefix('(')?.split_once('+')?;
    let avg_text_kb = text.strip_suffix("avgtext")?.parse().ok()?;
    let avg_data_kb = data.strip_suffix("avgdata")?.parse().ok()?;
    let max_rss_kb = t[5].strip_suffix("maxresident)k")?.parse().ok()?;
    // Everything before the report's first character is foreign text.
    let report_start = token_starts(line)[tokens.len() - 6] + num_start;
    let prefix = line[..report_start].to_string();
    Some(First { prefix, user_s, system_s, elapsed_s, cpu_percent, avg_text_kb, avg_data_kb, max_rss_kb })
}

/// Byte offsets at which the whitespace-separated tokens of `line` start.
fn token_starts(line: &str) -> Vec<usize> {
    let mut starts = Vec::new();
    let mut in_token = false;
    for (i, c) in line.char_indices() {
        if c.is_whitespace() {
            in_token = false;
        } else if !in_token {
            in_token = true;
            starts.push(i);
        }
    }
    starts
}

/// `0inputs+0outputs (0major+85minor)pagefaults 0swaps` → the five numbers.
fn parse_second(line: &str) -> Option<[u64; 5]> {
    let tokens: Vec<&str> = line.split_whitespace().collect();
    let [io, faults, swaps] = tokens.as_slice() else {
        return None;
    };
    let (inputs, outputs) = io.split_once('+')?;
    let (major, minor) = faults.strip_prefix('(')?.split_once('+')?;
    Some([
        inputs.strip_suffix("inputs")?.parse().ok()?,
        outputs.strip_suffix("outputs")?.parse().ok()?,
        major.strip_suffix("major")?.parse().ok()?,
        minor.strip_suffix("minor)pagefaults")?.parse().ok()?,
        swaps.strip_suffix("swaps")?.parse().ok()?,
    ])
}

/// `12.34` (GNU time prints `%ld.%02ld`).
fn parse_seconds(s: &str) -> Option<f64> {
    if s.is_empty() || !s.chars().all(|c| c.is_ascii_digit() || c == '.') {
        return None;
    }
    s.parse().ok()
}

/// `m:ss.cc` or `h:mm:ss` (also accepts a bare `ss.cc`) → seconds.
fn parse_elapsed(s: &str) -> Option<f64> {
    let parts: Vec<&str> = s.split(':').collect();
    if parts.is_empty() || parts.len() > 3 {
        return None;
    }
    let (last, init) = parts.split_last()?;
    let mut total = 0.0;
    for p in init {
        if p.is_empty() || !p.chars().all(|c| c.is_ascii_digit()) {
            return None;
        }
        total = total * 60.0 + p.parse::<f64>().ok()?;
    }
    Some(total * 60.0 + parse_seconds(last)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    const REPORT: &str = "0.00user 0.05system 0:04.52elapsed 1%CPU (0avgtext+0avgdata 1920maxresident)k\n\
                          0inputs+0outputs (0major+85minor)pagefaults 0swaps\n";

    #[test]
    fn parses_default_report() {
        let t = parse(REPORT).unwrap();
        assert_eq!(t.user_s, 0.0);
        assert_eq!(t.system_s, 0.05);
        assert!((t.elapsed_s - 4.52).abs() < 1e-9);
        assert_eq!(t.cpu_percent, Some(1));
        assert_eq!(t.max_rss_kb, 1920);
        assert_eq!(t.minor_faults, 85);
        assert_eq!(t.exit_status, Some(0));
        assert_eq!(t.signal, None);
        assert!(t.unknown.is_empty());
    }

    #[test]
    fn elapsed_forms() {
        assert_eq!(parse_elapsed("0:04.52"), Some(4.52));
        assert_eq!(parse_elapsed("2:03.15"), Some(123.15));
        assert_eq!(parse_elapsed("1:02:03"), Some(3723.0));
        assert_eq!(parse_elapsed("1:x:03"), None);
        assert_eq!(parse_elapsed("1:2:3:4"), None);
    }

    #[test]
    fn status_lines_and_glued_prefix() {
        let input = format!("partial{}{}", "Command exited with non-zero status 3\n", REPORT);
        let t = parse(&input).unwrap();
        assert_eq!(t.exit_status, Some(3));
        assert_eq!(t.unknown, vec!["partial".to_string()]);

        let input = format!("Command terminated by signal 9\n{REPORT}");
        let t = parse(&input).unwrap();
        assert_eq!((t.exit_status, t.signal), (None, Some(9)));

        let glued = REPORT.replacen("0.00user", "no newline here 120.00user", 1);
        let t = parse(&glued).unwrap();
        assert_eq!(t.user_s, 120.0);
        assert_eq!(t.unknown, vec!["no newline here".to_string()]);

        let glued = REPORT.replacen("0.00user", "tail:0.00user", 1);
        let t = parse(&glued).unwrap();
        assert_eq!(t.unknown, vec!["tail:".to_string()]);
    }

    #[test]
    fn unknown_cpu_and_last_report_wins() {
        let first = REPORT.replace("1%CPU", "?%CPU");
        let second = REPORT.replace("0:04.52", "1:02:03");
        let t = parse(&format!("{first}{second}")).unwrap();
        assert_eq!(t.elapsed_s, 3723.0);
        assert_eq!(t.cpu_percent, Some(1));
        assert_eq!(t.unknown.len(), 2, "the earlier report is kept, not dropped");
        assert_eq!(parse(&first).unwrap().cpu_percent, None);
    }

    #[test]
    fn rejects_foreign_input() {
        assert_eq!(parse(""), Err(ParseError::Empty { tool: Tool::GnuTime }));
        let bash = "\nreal\t0m41.870s\nuser\t0m0.011s\nsys\t0m0.099s\n";
        assert!(matches!(parse(bash), Err(ParseError::NotRecognised { lines: 3, .. })));
        // A first line alone is not a report.
        assert!(parse(REPORT.lines().next().unwrap()).is_err());
    }
}
