//! A number the measured command prints (`measure[].metric`): found in `run`'s stdout
//! or in a file it wrote, by an RFC 6901 JSON pointer (`/jobs/0/read/iops` in
//! `fio --output-format=json`, `/end/sum_received/bits_per_second` in `iperf3 --json`)
//! or by a regular expression with one capture group (any text output).
//!
//! A value that is missing, not a number, or not finite is an error that quotes the
//! output, never a zero: the analysis makes it a failed iteration.

use crate::plan::measurement::{Extract, OutputMetric};

/// Most characters of the output an error quotes.
pub const QUOTED_CHARS: usize = 160;

/// Why an iteration's output gave no value for its metric.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MetricError {
    /// The output is empty (the command printed nothing, or the file is empty).
    #[error("the output is empty")]
    Empty,
    /// The output is not JSON.
    #[error("the output is not JSON ({reason}): {quote}")]
    NotJson {
        /// serde_json's message (line and column).
        reason: String,
        /// The start of the output, escaped.
        quote: String,
    },
    /// The JSON has nothing at the pointer.
    #[error("the JSON has nothing at {pointer}: {quote}")]
    NoValue {
        /// The pointer.
        pointer: String,
        /// The start of the output, escaped.
        quote: String,
    },
    /// The regular expression matched nothing.
    #[error("no match for {regex:?}: {quote}")]
    NoMatch {
        /// The expression.
        regex: String,
        /// The start of the output, escaped.
        quote: String,
    },
    /// The value found is not a finite number.
    #[error("{found} is not a number")]
    NotANumber {
        /// The value found, escaped.
        found: String,
    },
    /// The plan's regular expression does not compile (a plan edited by hand).
    #[error("the regular expression {regex:?} is invalid: {reason}")]
    BadRegex {
        /// The expression.
        regex: String,
        /// The regex crate's message.
        reason: String,
    },
}

/// The value of `m` in `text` (the section `m.from` names).
///
/// Errors: see [`MetricError`].
pub fn extract(m: &OutputMetric, text: &str) -> Result<f64, MetricError> {
    if text.trim().is_empty() {
        return Err(MetricError::Empty);
    }
    match &m.extract {
        Extract::Json(pointer) => {
            let value: serde_json::Value = serde_json::from_str(text)
                .map_err(|e| MetricError::NotJson { reason: e.to_string(), quote: quote(text) })?;
            let found = value
                .pointer(pointer)
                .ok_or_else(|| MetricError::NoValue { pointer: pointer.clone(), quote: quote(text) })?;
            match found.as_f64().filter(|x| x.is_finite()) {
                Some(x) => Ok(x),
                None => Err(MetricError::NotANumber { found: quote(&found.to_string()) }),
            }
        }
        Extract::Regex(re) => {
            let compiled = compile(re)?;
            let caps = compiled
                .captures(text)
                .ok_or_else(|| MetricError::NoMatch { regex: re.clone(), quote: quote(text) })?;
            let got = caps.get(1).map_or("", |g| g.as_str());
            parse_number(got).ok_or_else(|| MetricError::NotANumber { found: quote(got) })
        }
    }
}

/// `re` compiled, with at most 1 MiB of compiled program (the regex crate's bound,
/// lowered): a suite's expression can't make the host build a huge automaton.
///
/// Errors: [`MetricError::BadRegex`].
pub fn compile(re: &str) -> Result<regex::Regex, MetricError> {
    regex::RegexBuilder::new(re)
        .size_limit(1 << 20)
        .build()
        .map_err(|e| MetricError::BadRegex { regex: re.to_string(), reason: e.to_string() })
}

/// A decimal number as tools print it (`12`, `-0.5`, `1.2e9`); `inf`, `nan`, empty
/// and anything else are `None`.
fn parse_number(s: &str) -> Option<f64> {
    let s = s.trim();
    let plain = !s.is_empty() && s.chars().all(|c| c.is_ascii_digit() || matches!(c, '.' | '-' | '+' | 'e' | 'E'));
    s.parse::<f64>().ok().filter(|x| plain && x.is_finite())
}

/// The first [`QUOTED_CHARS`] characters of `text`, escaped (quotes, control
/// characters, newlines), with `…` when cut.
pub fn quote(text: &str) -> String {
    let cut: String = text.chars().take(QUOTED_CHARS).collect();
    let more = if cut.len() < text.len() { "…" } else { "" };
    let escaped: String =
        cut.chars().map(|c| if c == '\'' { c.to_string() } else { c.escape_debug().to_string() }).collect();
    format!("\"{escaped}\"{more}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::measurement::{Better, MetricFrom};

    fn metric(extract: Extract) -> OutputMetric {
        OutputMetric { name: "value".into(), from: MetricFrom::Stdout, extract, unit: None, better: Better::Higher }
    }

    #[test]
    fn json_pointers_and_regexes_find_numbers() {
        let m = metric(Extract::Json("/jobs/0/read/iops".into()));
        assert_eq!(extract(&m, r#"{"jobs": [{"read": {"iops": 1234.5}}]}"#), Ok(1234.5));
        let m = metric(Extract::Regex(r"failures: ([0-9]+)".into()));
        assert_eq!(extract(&m, "run 1\nfailures: 17 of 100\n"), Ok(17.0));
    }

    #[test]
    fn missing_or_non_numbers_are_errors_that_quote_the_output() {
        let m = metric(Extract::Json("/end/sum/bits_per_second".into()));
        let e = extract(&m, r#"{"error": "unable to connect"}"#).unwrap_err();
        assert_eq!(
            e.to_string(),
            r#"the JSON has nothing at /end/sum/bits_per_second: "{\"error\": \"unable to connect\"}""#
        );
        let e = extract(&m, "iperf3: error - unable to connect to server\n").unwrap_err();
        assert!(
            e.to_string().starts_with("the output is not JSON (expected value at line 1 column 1): \"iperf3: error"),
            "{e}"
        );
        assert_eq!(
            extract(&m, r#"{"end": {"sum": {"bits_per_second": "fast"}}}"#).unwrap_err().to_string(),
            r#""\"fast\"" is not a number"#
        );
        assert_eq!(extract(&m, " \n"), Err(MetricError::Empty));
        let m = metric(Extract::Regex(r"rate ([^ ]*)".into()));
        assert_eq!(extract(&m, "rate NaN ops").unwrap_err().to_string(), r#""NaN" is not a number"#);
        assert_eq!(extract(&m, "rate  ops").unwrap_err().to_string(), r#""" is not a number"#);
        assert!(matches!(extract(&m, "nothing"), Err(MetricError::NoMatch { .. })));
        let long = "x".repeat(500);
        let e = extract(&m, &long).unwrap_err().to_string();
        assert!(e.ends_with("\"…") && e.len() < 250, "{e}");
    }
}
