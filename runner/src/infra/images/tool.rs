//! Running the external tools that build images (mmdebstrap, mkfs, make, dpkg-deb, …):
//! `run_tool` in its own process group, killed with the runner or when the run's
//! [`CancelFlag`] is set.

use std::path::Path;

use super::ImageError;

/// A per-run cancellation flag for image builds: set it and every external tool started
/// by `run_tool` with it (and that tool's children: it runs in its own process group)
/// is killed within 100 ms, and its build fails, so nothing half-built reaches the cache.
/// Each run has its own flag (see [`Cache::with_cancel`](super::Cache::with_cancel)): an interrupted run never
/// fails the builds of a later run in the same process.
#[derive(Debug, Clone, Default)]
pub struct CancelFlag(std::sync::Arc<std::sync::atomic::AtomicBool>);

impl CancelFlag {
    /// A flag that is not set.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets the flag: builds using it stop.
    pub fn cancel(&self) {
        self.0.store(true, std::sync::atomic::Ordering::SeqCst);
    }

    /// Whether the flag is set.
    pub fn is_cancelled(&self) -> bool {
        self.0.load(std::sync::atomic::Ordering::SeqCst)
    }
}

/// Runs an external tool in its own process group (killed with the runner:
/// `PR_SET_PDEATHSIG`), capturing stdout and stderr (through a temp file, so a chatty
/// tool can't block on a full pipe); on failure returns [`ImageError::Tool`] with the
/// last lines; when `cancel` is set while it runs, kills it and fails. `log`, if given, receives the output as it is written (appended, so
/// `tail -f` shows a long build's progress).
pub(crate) fn run_tool(
    cmd: &mut std::process::Command,
    what: &str,
    log: Option<&Path>,
    cancel: &CancelFlag,
) -> Result<String, ImageError> {
    use std::os::unix::process::CommandExt;
    use std::process::Stdio;
    let fail = |status: String, tail: String| ImageError::Tool { tool: what.to_string(), status, tail };
    let out = match log {
        Some(path) => {
            let f = std::fs::OpenOptions::new().create(true).append(true).read(true).open(path);
            f.map_err(|e| fail(format!("cannot open log {}: {e}", path.display()), String::new()))?
        }
        None => tempfile::tempfile().map_err(|e| fail(format!("cannot create output file: {e}"), String::new()))?,
    };
    let start = out.metadata().map(|m| m.len()).unwrap_or(0);
    let err = out.try_clone().map_err(|e| fail(format!("cannot create output file: {e}"), String::new()))?;
    cmd.stdin(Stdio::null()).stdout(out.try_clone().map_err(|e| fail(e.to_string(), String::new()))?).stderr(err);
    cmd.process_group(0);
    let parent = std::process::id();
    // SAFETY: the closure only makes async-signal-safe calls (prctl, getppid).
    unsafe {
        cmd.pre_exec(move || crate::infra::process::die_with_parent(parent));
    }
    let mut child = cmd.spawn().map_err(|e| fail(format!("cannot start: {e}"), String::new()))?;
    let status = loop {
        if let Some(st) = child.try_wait().map_err(|e| fail(e.to_string(), String::new()))? {
            break st;
        }
        if cancel.is_cancelled() {
            // SAFETY: signalling the process group we created for this child.
            unsafe {
                libc::kill(-(child.id() as i32), libc::SIGKILL);
            }
            let _ = child.wait();
            return Err(fail("interrupted".into(), String::new()));
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    let mut text = String::new();
    {
        use std::io::{Read, Seek};
        let mut f = out;
        let _ = f.seek(std::io::SeekFrom::Start(start));
        let mut bytes = Vec::new();
        let _ = f.read_to_end(&mut bytes);
        text.push_str(&String::from_utf8_lossy(&bytes));
    }
    if !status.success() {
        let lines: Vec<&str> = text.lines().collect();
        let tail = lines[lines.len().saturating_sub(15)..].join("\n");
        return Err(fail(status.to_string(), tail));
    }
    Ok(text)
}

/// Waits before the second and the third attempt of a step that failed because the
/// network did (a name that would not resolve, a connection refused or timed out):
/// seconds, not minutes, since the archive is usually back at once (seen in CI: an
/// mmdebstrap run failed on "Temporary failure resolving 'deb.debian.org'" 25 minutes
/// into a run whose earlier builds had fetched from the same archive).
pub(crate) const NETWORK_RETRY_WAITS: [std::time::Duration; 2] =
    [std::time::Duration::from_secs(10), std::time::Duration::from_secs(30)];

/// Whether `text` (an error's words, or the last lines a tool printed) says the network
/// failed rather than the request: apt's `Temporary failure resolving`, `Could not
/// resolve '…'`, `Could not connect`, `Connection timed out`, `Connection failed`,
/// `Unable to connect` (apt 2.6, under mmdebstrap) and ureq 2's transport errors
/// (`Dns Failed`, `Connection Failed`, `timed out`, `connection reset`). A 404, a
/// checksum that differs or a package apt can't find is not.
pub(crate) fn network_failure(text: &str) -> bool {
    const SIGNS: [&str; 10] = [
        "temporary failure resolving",
        "could not resolve '",
        "could not connect",
        "connection timed out",
        "connection failed",
        "unable to connect",
        "dns failed",
        "timed out reading",
        "connection reset",
        "network is unreachable",
    ];
    let text = text.to_ascii_lowercase();
    SIGNS.iter().any(|s| text.contains(s))
}

/// Runs `attempt`, and again after each of `waits` while it fails with an error for
/// which `network` gives words (the error is the network's; `None` otherwise), printing
/// a notice on stderr each time, naming `what` and the first line of those words that
/// [`network_failure`] matches; returns its last result. Gives up waiting, returning
/// the last error, once `cancel` is set.
pub(crate) fn retry_on_network<T, E>(
    what: &str,
    waits: &[std::time::Duration],
    cancel: Option<&CancelFlag>,
    network: impl Fn(&E) -> Option<String>,
    mut attempt: impl FnMut() -> Result<T, E>,
) -> Result<T, E> {
    for wait in waits {
        let e = match attempt() {
            Err(e) if !cancel.is_some_and(CancelFlag::is_cancelled) => e,
            r => return r,
        };
        let Some(words) = network(&e) else { return Err(e) };
        let line = words.lines().find(|l| network_failure(l)).or(words.lines().next()).unwrap_or("");
        eprintln!("notice: {what}: the network failed ({}); trying again in {} s", line.trim(), wait.as_secs());
        let until = std::time::Instant::now() + *wait;
        while std::time::Instant::now() < until {
            if cancel.is_some_and(CancelFlag::is_cancelled) {
                return Err(e);
            }
            std::thread::sleep(std::time::Duration::from_millis(100).min(until - std::time::Instant::now()));
        }
    }
    attempt()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::infra::images::Cache;

    #[test]
    fn a_cancelled_run_stops_its_builds_and_no_later_ones() {
        // The flag of an interrupted run: its tool is killed at once.
        let interrupted = CancelFlag::new();
        interrupted.cancel();
        let t = std::time::Instant::now();
        let err = run_tool(std::process::Command::new("sleep").arg("30"), "sleep", None, &interrupted).unwrap_err();
        assert!(err.to_string().contains("interrupted"), "{err}");
        assert!(t.elapsed() < std::time::Duration::from_secs(5), "killed within the poll interval: {:?}", t.elapsed());
        // A later run in the same process has its own flag: its builds run (the flag used
        // to be a process-wide latch, and every later build failed as "interrupted").
        let cache = Cache::new(std::env::temp_dir()).with_cancel(CancelFlag::new());
        let out = run_tool(std::process::Command::new("echo").arg("built"), "echo", None, cache.cancel_flag()).unwrap();
        assert_eq!(out.trim(), "built");
        assert!(!cache.cancel_flag().is_cancelled() && interrupted.is_cancelled());
    }
    /// The lines mmdebstrap printed when CI's resolver failed, and ureq's wording.
    #[test]
    fn network_failures_are_told_from_other_failures() {
        let ci = "Err:1 http://deb.debian.org/debian bookworm InRelease\n  Temporary failure resolving 'deb.debian.org'\nE: Some index files failed to download.";
        assert!(network_failure(ci));
        assert!(network_failure(
            "http://a.example/x.deb: Dns Failed: resolve dns name 'a.example:80': failed to lookup address"
        ));
        assert!(network_failure("http://a.example/x.deb: Connection Failed: Connect error: connection refused"));
        assert!(!network_failure("E: Unable to locate package nfs-kernel-sever"));
        assert!(!network_failure("http://a.example/x.deb: status code 404"));
        assert!(!network_failure("expected 10 bytes with SHA-256 ab, got 11 bytes"));
    }

    #[test]
    fn a_network_failure_is_tried_again_and_others_are_not() {
        let waits = [std::time::Duration::from_millis(1); 2];
        let is_network = |e: &String| network_failure(e).then(|| e.clone());
        // Fails twice on the network, then works: three attempts.
        let mut n = 0;
        let r = retry_on_network("test", &waits, None, is_network, || {
            n += 1;
            if n < 3 {
                Err("Temporary failure resolving 'x'".to_string())
            } else {
                Ok(n)
            }
        });
        assert_eq!(r, Ok(3));
        // Always the network: three attempts, then the last error.
        let mut n = 0;
        let r: Result<(), String> = retry_on_network("test", &waits, None, is_network, || {
            n += 1;
            Err(format!("Could not connect ({n})"))
        });
        assert_eq!((r, n), (Err("Could not connect (3)".to_string()), 3));
        // Not the network: one attempt.
        let mut n = 0;
        let r: Result<(), String> = retry_on_network("test", &waits, None, is_network, || {
            n += 1;
            Err("Unable to locate package x".to_string())
        });
        assert_eq!((r.is_err(), n), (true, 1));
        // A cancelled run does not wait.
        let cancel = CancelFlag::new();
        cancel.cancel();
        let mut n = 0;
        let long = [std::time::Duration::from_secs(60); 2];
        let t = std::time::Instant::now();
        let r: Result<(), String> = retry_on_network("test", &long, Some(&cancel), is_network, || {
            n += 1;
            Err("Could not connect".to_string())
        });
        assert_eq!((r.is_err(), n), (true, 1));
        assert!(t.elapsed() < std::time::Duration::from_secs(5));
    }
}
