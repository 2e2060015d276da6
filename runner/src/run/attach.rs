//! Reaching a running run from outside: `vmrepro shell RUN VM` (an interactive shell on
//! the VM's second serial port) and `vmrepro stop RUN` (its control socket, see
//! [`super::keep`]). Both find the run's sockets through its `run.json`
//! (`temp_dir`), so they work for any run whose runner still lives — a `--keep` run
//! after its steps, or any run while its steps run.
//!
//! The shell protocol (the guest side is `/sbin/vmrepro-shell` in the rootfs): on
//! connecting, the client sends [`hello_line`] (terminal size and `TERM`; also a
//! harmless `stty` command for a shell that is still running from an earlier
//! attach), then relays bytes both ways. `Ctrl-]` detaches and leaves the shell
//! running; when the guest's shell ends, the guest prints [`SHELL_ENDED`] and the
//! client ends too. One client at a time (a lock file beside the socket).

use crate::path_io::PathIo;
use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use super::record::{read_json, RunRecord};
use super::{RunStatus, RUN_FILE, SHELL_SOCKET};

/// What the guest prints when its shell ends (an OSC sequence terminals ignore).
pub const SHELL_ENDED: &[u8] = b"\x1b]7770;vmrepro-shell-ended\x07";
/// The byte that detaches the client (`Ctrl-]`, as telnet's escape).
pub const DETACH: u8 = 0x1d;

/// Why a run can't be reached.
#[derive(Debug, thiserror::Error)]
pub enum AttachError {
    /// The folder holds no readable `run.json`.
    #[error("{}: not a run folder ({source})", dir.display())]
    NotARun {
        /// The folder given.
        dir: PathBuf,
        /// Why `run.json` couldn't be read.
        source: Box<super::record::RunDirError>,
    },
    /// The run has no VM of that name.
    #[error("run {} has no VM {vm} (its VMs: {})", dir.display(), vms.join(", "))]
    NoSuchVm {
        /// The run folder.
        dir: PathBuf,
        /// The name given.
        vm: String,
        /// The run's VMs.
        vms: Vec<String>,
    },
    /// Nothing listens: the run ended, or its runner was killed.
    #[error("run {} is not running ({why}): its VMs are gone; `vmrepro run --keep SUITE` keeps a run's VMs after its steps", dir.display())]
    NotRunning {
        /// The run folder.
        dir: PathBuf,
        /// What `run.json` says.
        why: String,
    },
    /// Another `vmrepro shell` is attached to this VM.
    #[error("another `vmrepro shell` is attached to VM {vm} of run {} (one at a time; Ctrl-] detaches it)", dir.display())]
    Busy {
        /// The run folder.
        dir: PathBuf,
        /// The VM.
        vm: String,
    },
    /// The connection failed.
    #[error(transparent)]
    Io(#[from] PathIo),
    /// The run's control socket answered something else than `stopped <status>`.
    #[error("unexpected answer from {}: {answer}", path.display())]
    UnexpectedAnswer {
        /// The control socket.
        path: PathBuf,
        /// What it answered, trimmed.
        answer: String,
    },
}

/// The run of folder `dir`: its record (`run.json`).
///
/// Errors: [`AttachError::NotARun`].
pub fn read_run(dir: &Path) -> Result<RunRecord, AttachError> {
    read_json(&dir.join(RUN_FILE))
        .map_err(|source| AttachError::NotARun { dir: dir.to_path_buf(), source: Box::new(source) })
}

/// Why nothing answers for a run whose record is `rec`.
fn not_running(dir: &Path, rec: &RunRecord) -> AttachError {
    let why = match rec.status {
        RunStatus::Running => {
            "run.json says running, but nothing listens: its runner was killed (its VMs died with it)".into()
        }
        s => format!(
            "it ended: {}",
            serde_json::to_value(s).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default()
        ),
    };
    AttachError::NotRunning { dir: dir.to_path_buf(), why }
}

/// How `vmrepro stop` ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StopOutcome {
    /// The run stopped; its final status (`passed`, `failed`, `interrupted`, …).
    Stopped(String),
    /// Nothing to stop (why).
    NotRunning(String),
}

/// Asks the run in `dir` to stop, and waits (at most `limit`) until it has torn down
/// and written its final `run.json`.
///
/// Errors: [`AttachError::NotARun`]; [`AttachError::Io`] when the request fails or
/// the run doesn't answer within `limit`.
pub async fn stop(dir: &Path, limit: Duration) -> Result<StopOutcome, AttachError> {
    let rec = read_run(dir)?;
    let Some(tmp) = &rec.temp_dir else { return Ok(StopOutcome::NotRunning(not_running(dir, &rec).to_string())) };
    let sock = Path::new(tmp).join(super::keep::CONTROL_SOCKET);
    let mut conn = match tokio::net::UnixStream::connect(&sock).await {
        Ok(c) => c,
        Err(_) => return Ok(StopOutcome::NotRunning(not_running(dir, &rec).to_string())),
    };
    let io = |what: &'static str| {
        let sock = sock.clone();
        move |source| AttachError::Io(PathIo { what, path: sock, source })
    };
    conn.write_all(b"stop\n").await.map_err(io("asking to stop through"))?;
    let mut answer = String::new();
    match tokio::time::timeout(limit, conn.read_to_string(&mut answer)).await {
        Err(_) => Err(io("waiting for the run to stop at")(std::io::Error::from(std::io::ErrorKind::TimedOut))),
        Ok(Err(e)) => Err(io("waiting for the run to stop at")(e)),
        Ok(Ok(_)) => match answer.trim().strip_prefix("stopped ") {
            Some(status) => Ok(StopOutcome::Stopped(status.to_string())),
            None => Err(AttachError::UnexpectedAnswer { path: sock.clone(), answer: answer.trim().to_string() }),
        },
    }
}

/// The shell socket of VM `vm` of the run in `dir`, and the lock file that keeps a
/// second client off.
///
/// Errors: [`AttachError::NotARun`], [`AttachError::NoSuchVm`],
/// [`AttachError::NotRunning`].
pub fn shell_socket(dir: &Path, vm: &str) -> Result<(PathBuf, PathBuf), AttachError> {
    let rec = read_run(dir)?;
    if rec.vm(vm).is_none() {
        return Err(AttachError::NoSuchVm {
            dir: dir.to_path_buf(),
            vm: vm.to_string(),
            vms: rec.vms.iter().map(|v| v.name.clone()).collect(),
        });
    }
    let vdir = rec.temp_dir.as_ref().map(|t| Path::new(t).join(vm));
    match vdir {
        Some(d) if d.join(SHELL_SOCKET).exists() => Ok((d.join(SHELL_SOCKET), d.join("shell.lock"))),
        _ => Err(not_running(dir, &rec)),
    }
}

/// The first line a client sends: `Ctrl-U` (drop anything half-typed), then
/// `stty rows R cols C # vmrepro-shell TERM=<term>` and a carriage return. `term` is
/// passed on only if it is a plain terminal name.
pub fn hello_line(rows: u16, cols: u16, term: &str) -> Vec<u8> {
    let term = if !term.is_empty() && term.chars().all(|c| c.is_ascii_alphanumeric() || "._+-".contains(c)) {
        term
    } else {
        "xterm-256color"
    };
    format!("\x15stty rows {rows} cols {cols} # vmrepro-shell TERM={term}\r").into_bytes()
}

/// How a shell session ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionEnd {
    /// The user pressed `Ctrl-]` (the guest shell keeps running).
    Detached,
    /// The guest's shell ended (`exit`, Ctrl-D).
    ShellEnded,
    /// The input ended (non-interactive use) and the guest was quiet for a second.
    InputEnded,
    /// The VM's side closed: QEMU exited (the run ended, or the guest powered off).
    Closed,
}

/// Relays `input` → `sock` and `sock` → `output` until the session ends (see
/// [`SessionEnd`]). `interactive`: `Ctrl-]` in the input detaches; otherwise the
/// session ends a second after the input ends.
///
/// Errors: reading or writing fails.
pub async fn relay<I, O, S>(mut input: I, mut output: O, sock: S, interactive: bool) -> std::io::Result<SessionEnd>
where
    I: AsyncRead + Unpin,
    O: AsyncWrite + Unpin,
    S: AsyncRead + AsyncWrite + Unpin,
{
    let (mut rd, mut wr) = tokio::io::split(sock);
    let mut inbuf = [0u8; 1024];
    let mut sockbuf = [0u8; 4096];
    let mut pending: Vec<u8> = Vec::new();
    let mut input_open = true;
    loop {
        let quiet = tokio::time::sleep(Duration::from_secs(1));
        tokio::select! {
            n = input.read(&mut inbuf), if input_open => {
                let n = n?;
                if n == 0 {
                    input_open = false;
                    continue;
                }
                let chunk = &inbuf[..n];
                if interactive {
                    if let Some(i) = chunk.iter().position(|b| *b == DETACH) {
                        wr.write_all(&chunk[..i]).await?;
                        return Ok(SessionEnd::Detached);
                    }
                }
                wr.write_all(chunk).await?;
            }
            n = rd.read(&mut sockbuf) => {
                let n = n?;
                if n == 0 {
                    output.write_all(&pending).await?;
                    output.flush().await?;
                    return Ok(SessionEnd::Closed);
                }
                pending.extend_from_slice(&sockbuf[..n]);
                if let Some(i) = find(&pending, SHELL_ENDED) {
                    output.write_all(&pending[..i]).await?;
                    output.flush().await?;
                    return Ok(SessionEnd::ShellEnded);
                }
                // Hold back only what could be the start of the marker.
                let keep = held_back(&pending, SHELL_ENDED);
                let upto = pending.len() - keep;
                output.write_all(&pending[..upto]).await?;
                output.flush().await?;
                pending.drain(..upto);
            }
            () = quiet, if !input_open => {
                output.write_all(&pending).await?;
                output.flush().await?;
                return Ok(SessionEnd::InputEnded);
            }
        }
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// The length of the longest end of `buf` that is a proper start of `marker`.
fn held_back(buf: &[u8], marker: &[u8]) -> usize {
    (1..marker.len().min(buf.len() + 1)).rev().find(|&k| buf.ends_with(&marker[..k])).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hello_line_is_also_a_harmless_command() {
        assert_eq!(
            hello_line(50, 200, "tmux-256color"),
            b"\x15stty rows 50 cols 200 # vmrepro-shell TERM=tmux-256color\r"
        );
        assert_eq!(
            hello_line(24, 80, "x; rm -rf /"),
            b"\x15stty rows 24 cols 80 # vmrepro-shell TERM=xterm-256color\r",
            "an odd TERM is not passed on"
        );
    }

    #[test]
    fn only_a_possible_start_of_the_marker_is_held_back() {
        assert_eq!(held_back(b"root@alpha:~# ", SHELL_ENDED), 0);
        assert_eq!(held_back(b"bye\x1b]77", SHELL_ENDED), 4);
        assert_eq!(held_back(b"\x1b", SHELL_ENDED), 1);
    }

    /// A fake guest: answers the hello and the commands like the guest script does.
    async fn fake_guest(mut s: tokio::io::DuplexStream, script: Vec<(&'static [u8], &'static [u8])>) {
        let mut buf = vec![0u8; 4096];
        for (expect, reply) in script {
            let mut got = Vec::new();
            while !got.ends_with(expect) {
                let n = s.read(&mut buf).await.unwrap();
                assert!(n > 0, "the client closed before sending {expect:?}; got {got:?}");
                got.extend_from_slice(&buf[..n]);
            }
            s.write_all(reply).await.unwrap();
        }
        // Keep the connection open (QEMU does while the VM runs).
        tokio::time::sleep(Duration::from_secs(30)).await;
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_marker_split_over_two_reads_ends_the_session_only_when_whole() {
        let (client, mut guest) = tokio::io::duplex(256);
        let (_user, input) = tokio::io::duplex(64);
        let session = tokio::spawn(async move {
            let mut out = Vec::new();
            let end = relay(input, &mut out, client, true).await.unwrap();
            (end, out)
        });
        guest.write_all(b"logout\r\n\x1b]7770;vmrepro-").await.unwrap();
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert!(!session.is_finished(), "half a marker must not end the session");
        guest.write_all(b"shell-ended\x07").await.unwrap();
        let (end, out) = tokio::time::timeout(Duration::from_secs(5), session).await.unwrap().unwrap();
        assert_eq!(end, SessionEnd::ShellEnded);
        assert_eq!(out, b"logout\r\n", "what came before the marker is shown, the marker is not");
    }

    #[tokio::test(flavor = "current_thread")]
    async fn ctrl_bracket_detaches_and_the_marker_ends_the_session() {
        // Detach.
        let (client, guest) = tokio::io::duplex(256);
        tokio::spawn(fake_guest(guest, vec![(b"\r", b"root@alpha:~# ")]));
        let (mut user, input) = tokio::io::duplex(64);
        user.write_all(b"\r\x1d").await.unwrap();
        let mut out = Vec::new();
        let end = tokio::time::timeout(Duration::from_secs(5), relay(input, &mut out, client, true)).await.unwrap();
        assert_eq!(end.unwrap(), SessionEnd::Detached);

        // The guest's shell ends: output before the marker is shown, the marker is not.
        let (client, guest) = tokio::io::duplex(256);
        tokio::spawn(fake_guest(guest, vec![(b"exit\r", b"logout\r\n\x1b]7770;vmrepro-shell-ended\x07")]));
        let (mut user, input) = tokio::io::duplex(64);
        user.write_all(b"exit\r").await.unwrap();
        let mut out = Vec::new();
        let end = tokio::time::timeout(Duration::from_secs(5), relay(input, &mut out, client, true)).await.unwrap();
        assert_eq!(end.unwrap(), SessionEnd::ShellEnded);
        assert_eq!(out, b"logout\r\n");

        // Non-interactive: the input ends, then a quiet second ends the session.
        let (client, guest) = tokio::io::duplex(256);
        tokio::spawn(fake_guest(guest, vec![(b"uname -r\n", b"6.1.0-50-cloud-amd64\r\n")]));
        let (mut user, input) = tokio::io::duplex(64);
        user.write_all(b"uname -r\n").await.unwrap();
        drop(user);
        let mut out = Vec::new();
        let end = tokio::time::timeout(Duration::from_secs(5), relay(input, &mut out, client, false)).await.unwrap();
        assert_eq!(end.unwrap(), SessionEnd::InputEnded);
        assert_eq!(out, b"6.1.0-50-cloud-amd64\r\n");
    }
}
