//! Parser for the report of the bash `time` keyword, in bash's default format
//! and in the POSIX format of `time -p` (which GNU `time -p` also prints).
//!
//! Source of the formats: bash `execute_cmd.c` (`BASH_TIMEFORMAT`,
//! `POSIX_TIMEFORMAT`, `mkfmt`, `print_formatted_time`), the same strings in
//! older bash (3.x era) and in bash 5.2 (Debian bookworm, package `bash`
//! 5.2.15-2+b8):
//!
//! ```text
//! BASH_TIMEFORMAT   "\nreal\t%3lR\nuser\t%3lU\nsys\t%3lS"
//! POSIX_TIMEFORMAT  "real %2R\nuser %2U\nsys %2S"
//! ```
//!
//! written to stderr in one `fprintf(stderr, "%s\n", …)` after the command
//! finished, for example (TABs between label and value)
//!
//! ```text
//! "\nreal\t0m4.512s\nuser\t0m0.004s\nsys\t0m1.201s\n"
//! ```
//!
//! and with `time -p` (or GNU `time -p`, format `real %e\nuser %U\nsys %S`;
//! checked: time 1.9)
//!
//! ```text
//! real 4.51
//! user 0.00
//! sys 1.20
//! ```
//!
//! Accepted value forms, each alone after its label and one or more blanks
//! (TAB as bash prints it, or runs of spaces as after copy-and-paste):
//!
//! * `<minutes>m<seconds>[.<fraction>]s` (the `l` forms): bash never uses
//!   hours, the minutes simply grow (`real\t75m3.153s`); any number of minutes
//!   is accepted.
//! * `<seconds>[.<fraction>]` (the POSIX forms).
//! * The decimal separator may be `.` or `,`: older bash (e.g. the 3.x
//!   `execute_cmd.c`) always prints `.`, newer bash (checked: 5.2) prints the
//!   locale's decimal point (`locale_decpoint()` in `mkfmt`), e.g.
//!   `real\t0m4,512s` under `de_DE.UTF-8`. GNU `time -p` prints `.` in every
//!   locale (checked: 1.9).
//!
//! Values are converted to seconds as `f64`: the minutes are folded into the
//! seconds in decimal before the conversion, so `2m3.153s` gives exactly the
//! same `f64` as the literal `123.153`. They carry the precision bash printed
//! (3 decimals in the default format, 2 with `-p`).
//!
//! A report is a `real` line followed by a `user` line and then a `sys` line.
//! Other lines may sit between them (a serial console can interleave kernel
//! messages) and before or after them (the timed command's own stderr); all of
//! those are kept, trimmed, in [`BashTime::unknown`]. If several reports were
//! captured, the **last** complete one is parsed and the earlier ones' lines go
//! to `unknown`. With `time -p` a command's last stderr line without newline
//! is glued in front of `real`; the glued text is split off into `unknown`.
//!
//! Errors:
//!
//! * [`ParseError::Empty`] for blank input, [`ParseError::NotRecognised`] when
//!   there is no `real`, `user` or `sys` line at all (e.g. GNU time's default
//!   report, or a `TIMEFORMAT` this parser does not know).
//! * [`ParseError::Incomplete`] when some of the three lines are there but no
//!   complete report is, naming the missing ones (`missing: sys`). The report
//!   exists for its elapsed time and its CPU times, and a half report usually
//!   means the capture was cut off, so no value is guessed. bash itself prints
//!   such a report in POSIX mode for a bare `time` (only `user` and `sys`).

use super::{nonblank_lines, not_recognised, ParseError, Tool};
use serde::{Deserialize, Serialize};

/// One bash `time` report, see the [module docs](self).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BashTime {
    /// Wall-clock time, seconds (`real`).
    pub elapsed_s: f64,
    /// User CPU time of the shell and its children, seconds (`user`).
    pub user_s: f64,
    /// System CPU time of the shell and its children, seconds (`sys`).
    pub system_s: f64,
    /// Every other non-blank line (trimmed): the command's own stderr, text
    /// glued in front of `real`, and the lines of earlier or partial reports.
    pub unknown: Vec<String>,
}

/// Which of the three report lines a line is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Real,
    User,
    Sys,
}

impl Kind {
    fn label(self) -> &'static str {
        match self {
            Kind::Real => "real",
            Kind::User => "user",
            Kind::Sys => "sys",
        }
    }
}

/// One recognised report line: its kind, its value in seconds, and any
/// foreign text glued in front of it (only possible for `real`).
#[derive(Debug, Clone, PartialEq)]
struct TimeLine<'a> {
    kind: Kind,
    seconds: f64,
    prefix: &'a str,
}

/// Parses captured stderr containing a bash `time` report.
///
/// Returns [`ParseError::Empty`] for blank input,
/// [`ParseError::NotRecognised`] when no line is a `real`/`user`/`sys` line,
/// and [`ParseError::Incomplete`] when there is no complete report.
pub fn parse(input: &str) -> Result<BashTime, ParseError> {
    let lines: Vec<&str> = nonblank_lines(input).collect();
    let parsed: Vec<Option<TimeLine>> = lines.iter().map(|l| parse_line(l)).collect();
    let kind_at = |i: usize| parsed[i].as_ref().map(|t| t.kind);

    // The last `real` line that has a `user` and then a `sys` line after it,
    // before the next `real` line.
    let mut report = None;
    for i in (0..lines.len()).filter(|&i| kind_at(i) == Some(Kind::Real)) {
        let end = (i + 1..lines.len()).find(|&n| kind_at(n) == Some(Kind::Real)).unwrap_or(lines.len());
        let user = (i + 1..end).find(|&n| kind_at(n) == Some(Kind::User));
        let sys = user.and_then(|u| (u + 1..end).find(|&n| kind_at(n) == Some(Kind::Sys)));
        if let (Some(u), Some(s)) = (user, sys) {
            report = Some((i, u, s));
        }
    }
    let Some((r, u, s)) = report else {
        if parsed.iter().all(Option::is_none) {
            return Err(not_recognised(Tool::BashTime, input));
        }
        return Err(ParseError::Incomplete { tool: Tool::BashTime, missing: missing(&parsed) });
    };

    let mut unknown = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        if i == r {
            let prefix = parsed[r].as_ref().map_or("", |t| t.prefix.trim());
            if !prefix.is_empty() {
                unknown.push(prefix.to_string());
            }
        } else if i != u && i != s {
            unknown.push(line.trim().to_string());
        }
    }
    let value = |i: usize| parsed[i].as_ref().expect("report indices are recognised lines").seconds;
    Ok(BashTime { elapsed_s: value(r), user_s: value(u), system_s: value(s), unknown })
}

/// Which lines a partial report lacks. With a `real` line, the last one is
/// taken as the start of the report and the `user`/`sys` lines that do not
/// follow it in order are missing; without one, `real` is missing, plus
/// `user`/`sys` if they appear nowhere.
fn missing(parsed: &[Option<TimeLine>]) -> Vec<String> {
    let kinds: Vec<Option<Kind>> = parsed.iter().map(|t| t.as_ref().map(|t| t.kind)).collect();
    let mut out = Vec::new();
    match kinds.iter().rposition(|k| *k == Some(Kind::Real)) {
        Some(r) => {
            let user = (r + 1..kinds.len()).find(|&n| kinds[n] == Some(Kind::User));
            let sys = (user.unwrap_or(r) + 1..kinds.len()).find(|&n| kinds[n] == Some(Kind::Sys));
            if user.is_none() {
                out.push(Kind::User);
            }
            if sys.is_none() {
                out.push(Kind::Sys);
            }
        }
        None => {
            out.push(Kind::Real);
            for kind in [Kind::User, Kind::Sys] {
                if !kinds.contains(&Some(kind)) {
                    out.push(kind);
                }
            }
        }
    }
    out.into_iter().map(|k| k.label().to_string()).collect()
}

/// Recognises `real<blanks><value>`, `user<blanks><value>` or
/// `sys<blanks><value>`. A `real` line may have foreign text before the label
/// (glued, or separated by blanks); `user` and `sys` lines must start with
/// their label.
fn parse_line(line: &str) -> Option<TimeLine<'_>> {
    let line = line.trim();
    let value_start = line.rfind(char::is_whitespace)? + 1;
    let seconds = parse_value(&line[value_start..])?;
    let head = line[..value_start].trim_end();
    for kind in [Kind::Real, Kind::User, Kind::Sys] {
        if let Some(prefix) = head.strip_suffix(kind.label()) {
            if prefix.is_empty() || kind == Kind::Real {
                return Some(TimeLine { kind, seconds, prefix });
            }
        }
    }
    None
}

/// `<m>m<s>[.f]s` or `<s>[.f]`, with `.` or `,` as decimal separator → seconds.
fn parse_value(token: &str) -> Option<f64> {
    let (minutes, seconds) = match token.split_once('m') {
        Some((m, rest)) => (digits(m)?, rest.strip_suffix('s')?),
        None => (0, token),
    };
    let (whole, fraction) = match seconds.split_once(['.', ',']) {
        Some((w, f)) => (w, f),
        None => (seconds, "0"),
    };
    if fraction.is_empty() || !fraction.chars().all(|c| c.is_ascii_digit()) {
        return None;
    }
    let whole = minutes.checked_mul(60)?.checked_add(digits(whole)?)?;
    // Decimal text first, one conversion: exact up to f64 rounding.
    format!("{whole}.{fraction}").parse().ok()
}

/// A non-empty run of ASCII digits as `u64`.
fn digits(s: &str) -> Option<u64> {
    if s.is_empty() || !s.chars().all(|c| c.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_format_with_tabs() {
        let t = parse("\nreal\t0m4.512s\nuser\t0m0.004s\nsys\t0m1.201s\n").unwrap();
        assert_eq!(t.elapsed_s, 4.512);
        assert_eq!(t.user_s, 0.004);
        assert_eq!(t.system_s, 1.201);
        assert!(t.unknown.is_empty());
    }

    #[test]
    fn default_format_with_spaces() {
        let t = parse("\nreal    0m4.512s\nuser    0m0.004s\nsys     0m1.201s\n").unwrap();
        assert_eq!((t.elapsed_s, t.user_s, t.system_s), (4.512, 0.004, 1.201));
    }

    #[test]
    fn minutes_fold_into_seconds() {
        let t = parse("real    2m3.153s\nuser    0m0.010s\nsys     0m2.000s\n").unwrap();
        assert_eq!(t.elapsed_s, 123.153);
        assert_eq!(parse_value("75m3.153s"), Some(4503.153));
        assert_eq!(parse_value("100000m0.000s"), Some(6_000_000.0));
        assert_eq!(parse_value("0m4s"), Some(4.0), "precision 0 has no separator");
    }

    #[test]
    fn posix_format_and_comma_separator() {
        let t = parse("real 4.51\nuser 0.00\nsys 1.20\n").unwrap();
        assert_eq!((t.elapsed_s, t.user_s, t.system_s), (4.51, 0.0, 1.2));
        let t = parse("\nreal\t0m4,512s\nuser\t0m0,004s\nsys\t0m1,201s\n").unwrap();
        assert_eq!((t.elapsed_s, t.user_s, t.system_s), (4.512, 0.004, 1.201));
        assert_eq!(parse_value("4,51"), Some(4.51));
    }

    #[test]
    fn rejects_malformed_values() {
        for bad in ["4.", "m4.5s", "1m4.5", "4.5s", "-1.0", "1.2.3", "0x10", "4.5e3", "1m2m3s"] {
            assert_eq!(parse_value(bad), None, "{bad}");
        }
        assert_eq!(parse_line("real"), None);
        assert_eq!(parse_line("real 1.0 extra"), None);
        assert_eq!(parse_line("surreal 1.0").map(|t| t.prefix), Some("sur"), "glued text before real");
        assert_eq!(parse_line("superuser 1.0"), None, "user/sys must start the line");
    }

    #[test]
    fn foreign_lines_glued_prefix_and_last_report_wins() {
        let input = "cat: f: Input/output error\nreal 1.00\nuser 0.00\nsys 0.10\n\
                     partial line without newlinereal 9.50\nuser 0.25\n[  12.3] nfs: server not responding\nsys 1.75\ntrailer\n";
        let t = parse(input).unwrap();
        assert_eq!((t.elapsed_s, t.user_s, t.system_s), (9.5, 0.25, 1.75));
        assert_eq!(
            t.unknown,
            vec![
                "cat: f: Input/output error",
                "real 1.00",
                "user 0.00",
                "sys 0.10",
                "partial line without newline",
                "[  12.3] nfs: server not responding",
                "trailer",
            ]
        );
    }

    #[test]
    fn incomplete_reports_name_what_is_missing() {
        let miss = |input: &str| match parse(input) {
            Err(ParseError::Incomplete { tool: Tool::BashTime, missing }) => missing,
            other => panic!("{input:?}: {other:?}"),
        };
        assert_eq!(miss("\nreal\t0m4.512s\nuser\t0m0.004s\n"), vec!["sys"]);
        assert_eq!(miss("real 4.51\nsys 1.20\n"), vec!["user"]);
        assert_eq!(miss("real 4.51\n"), vec!["user", "sys"]);
        assert_eq!(miss("user\t0m0.00s\nsys\t0m0.00s\n"), vec!["real"], "bash --posix: bare `time`");
        assert_eq!(miss("sys 1.0\n"), vec!["real", "user"]);
        // Out of order: the sys line comes before user, so the report after `real` lacks it.
        assert_eq!(miss("real 1.0\nsys 1.0\nuser 1.0\n"), vec!["sys"]);
        assert_eq!(parse("real 4.51\n").unwrap_err().to_string(), "bash time: incomplete report, missing: user, sys");
    }

    #[test]
    fn rejects_foreign_input() {
        assert_eq!(parse(" \n\n"), Err(ParseError::Empty { tool: Tool::BashTime }));
        let gnu = "0.00user 0.05system 0:04.52elapsed 1%CPU (0avgtext+0avgdata 1920maxresident)k\n\
                   0inputs+0outputs (0major+85minor)pagefaults 0swaps\n";
        assert!(matches!(parse(gnu), Err(ParseError::NotRecognised { lines: 2, .. })));
    }
}
