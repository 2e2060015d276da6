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
}
