//! Guest agent (QGA) client over the VM's virtio-serial unix socket:
//! `guest-sync-delimited` (by hand, on the raw socket) to find a live agent and drop
//! what it still had to say to earlier connections, then, via the `qapi` crate,
//! `guest-exec` + `guest-exec-status` to run commands with captured stdout, stderr and
//! exit status, and `guest-file-open`/`-read`/`-write`/`-close` for small files (the
//! identity helper's request and answer, [`super::state::IdentityHelper`]).

use std::path::Path;
use std::time::Duration;

use qapi::futures::{QapiService, QgaStreamTokio};

use super::inflight::InFlight;
use qapi::qga;
use tokio::io::WriteHalf;
use tokio::net::UnixStream;

type Service = QapiService<QgaStreamTokio<WriteHalf<UnixStream>>>;

/// `PATH` of every command run through the guest agent: Debian's default for root
/// (`/etc/profile`), so programs a suite copies to `/usr/local/bin` with `files:` are found.
pub const GUEST_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// A guest agent connection that has answered `guest-sync`.
///
/// Every command goes through [`InFlight`]: once one was given up before its answer
/// (a timeout around it), the others fail with `BrokenPipe` and [`Qga::out_of_step`]
/// is true; connect (and `guest-sync`) again.
pub struct Qga {
    service: Service,
    events: tokio::task::JoinHandle<()>,
    inflight: InFlight,
}

impl std::fmt::Debug for Qga {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Qga")
    }
}

/// What a command printed and how it ended.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct ExecResult {
    /// Exit status, if it exited normally.
    pub exit_code: Option<i64>,
    /// Terminating signal, if killed.
    pub signal: Option<i64>,
    /// Standard output bytes.
    #[serde(skip)]
    pub stdout: Vec<u8>,
    /// Standard error bytes.
    #[serde(skip)]
    pub stderr: Vec<u8>,
    /// The agent truncated the output (it keeps at most 16 MiB per stream).
    pub truncated: bool,
}

/// The sentinel byte of `guest-sync-delimited`: the client sends it before the request
/// (the agent's JSON parser drops any half-read input on it), the agent sends it before
/// its answer.
const SENTINEL: u8 = 0xFF;

/// `guest-sync-delimited` with `id` on a new, raw connection, as QEMU's guest agent
/// protocol asks on connecting and after any client-side timeout: sends the sentinel and
/// the request, then drops everything the agent sends until a sentinel followed by the
/// answer `{"return": id}` and its newline. What it drops are late answers to requests
/// of earlier connections: the guest holds its agent's writes while no client is
/// connected and hands them to the next one. `Ok(false)`: no such answer within `wait`,
/// or bytes after it (the agent was not idle).
///
/// Errors: writing the request, reading (including the agent's end of file).
async fn sync_delimited(stream: &mut UnixStream, id: i32, wait: Duration) -> std::io::Result<bool> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut request = vec![SENTINEL];
    request.extend_from_slice(format!(r#"{{"execute":"guest-sync-delimited","arguments":{{"id":{id}}}}}"#).as_bytes());
    request.push(b'\n');
    stream.write_all(&request).await?;
    let read = async {
        // The bytes after the last sentinel, while one has been seen.
        let mut answer: Option<Vec<u8>> = None;
        let mut buf = [0u8; 4096];
        loop {
            let n = stream.read(&mut buf).await?;
            if n == 0 {
                return Err(std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "the guest agent's socket closed"));
            }
            for (i, &b) in buf[..n].iter().enumerate() {
                match (&mut answer, b) {
                    (_, SENTINEL) => answer = Some(Vec::new()),
                    (None, _) => {}
                    (Some(line), b'\n') => {
                        let value: Option<serde_json::Value> = serde_json::from_slice(line).ok();
                        if value.is_some_and(|v| v.get("return").and_then(|r| r.as_i64()) == Some(id.into())) {
                            return Ok(i + 1 == n);
                        }
                        answer = None;
                    }
                    (Some(line), b) => line.push(b),
                }
            }
        }
    };
    tokio::time::timeout(wait, read).await.unwrap_or(Ok(false))
}

impl Qga {
    /// Connects to `socket` and waits up to `wait` for the agent to answer a
    /// `guest-sync-delimited` with `sync_id` (a fresh id each time), dropping what it
    /// still had to say to earlier connections; then hands the connection to qapi.
    /// `Ok(None)` means no answer yet (try again).
    ///
    /// Errors: the socket can't be connected to.
    pub async fn try_connect(socket: &Path, wait: Duration, sync_id: i32) -> std::io::Result<Option<Qga>> {
        let mut stream = UnixStream::connect(socket).await?;
        if !matches!(sync_delimited(&mut stream, sync_id, wait).await, Ok(true)) {
            return Ok(None);
        }
        let (service, events) = QgaStreamTokio::open(stream).spawn_tokio();
        Ok(Some(Qga { service, events, inflight: InFlight::default() }))
    }

    /// `command`, through [`InFlight`].
    async fn execute<C: qga::QgaCommand>(&self, command: C) -> std::io::Result<C::Ok> {
        self.inflight.run("guest agent", self.service.execute(command)).await
    }

    /// Whether a command was given up before its answer: this connection must be
    /// replaced (see [`InFlight`]).
    pub fn out_of_step(&self) -> bool {
        self.inflight.abandoned()
    }

    /// Starts `path args…` with `stdin` and captured output, in an environment of
    /// `PATH`, `LC_ALL=C` and `env` (`NAME=value` each); returns the guest PID.
    pub async fn spawn(
        &self,
        path: &str,
        args: &[String],
        stdin: Option<Vec<u8>>,
        env: &[String],
    ) -> std::io::Result<i64> {
        let mut environment = vec![format!("PATH={GUEST_PATH}"), "LC_ALL=C".to_string()];
        environment.extend(env.iter().cloned());
        let r = self
            .execute(qga::guest_exec {
                path: path.to_string(),
                arg: Some(args.to_vec()),
                env: Some(environment),
                input_data: stdin,
                capture_output: Some(qga::GuestExecCaptureOutput::flag(true)),
            })
            .await?;
        Ok(r.pid)
    }

    /// `guest-file-open` of `path` with fopen `mode` (`r`, `r+`, …); `Ok(None)` when the
    /// agent refuses it (the file is not there, or may not be opened so).
    ///
    /// Errors: the connection failed.
    pub async fn file_open_if_there(&self, path: &str, mode: &str) -> std::io::Result<Option<i64>> {
        let open = qga::guest_file_open { path: path.to_string(), mode: Some(mode.to_string()) };
        Ok(self.inflight.run_answered("guest agent", self.service.execute(open)).await?.ok())
    }

    /// Whether the guest file `path` can be opened for reading (`guest-file-open`, then
    /// `guest-file-close`; a close the agent refuses, e.g. of a `/proc/PID` file whose
    /// process just ended, still counts as there).
    ///
    /// Errors: the connection failed.
    pub async fn file_there(&self, path: &str) -> std::io::Result<bool> {
        let Some(handle) = self.file_open_if_there(path, "r").await? else {
            return Ok(false);
        };
        let close = qga::guest_file_close { handle };
        let _refused = self.inflight.run_answered("guest agent", self.service.execute(close)).await?;
        Ok(true)
    }

    /// `guest-file-close` of `handle`.
    ///
    /// Errors: the connection failed, or the agent refused.
    async fn file_close(&self, handle: i64) -> std::io::Result<()> {
        self.execute(qga::guest_file_close { handle }).await.map(|_| ())
    }

    /// At most `limit` bytes of the guest file `path` (one `guest-file-read`, then
    /// close); `Ok(None)` when it can't be opened (not there).
    ///
    /// Errors: the connection failed, or the agent refused the read.
    pub async fn read_file_if_there(&self, path: &str, limit: u32) -> std::io::Result<Option<Vec<u8>>> {
        let Some(handle) = self.file_open_if_there(path, "r").await? else {
            return Ok(None);
        };
        let read = self.execute(qga::guest_file_read { handle, count: Some(limit.into()) }).await;
        let closed = self.file_close(handle).await;
        let read = read?;
        closed?;
        Ok(Some(read.buf_b64))
    }

    /// Writes `bytes` into the guest file `path`, which must exist, opened `r+`
    /// (read-write, not truncated: a FIFO opened so never waits for a reader, so the
    /// agent can't hang on it); `Ok(false)` when it can't be opened.
    ///
    /// Errors: the connection failed, the agent refused the write, or it wrote fewer
    /// bytes (`WriteZero`).
    pub async fn write_file_if_there(&self, path: &str, bytes: &[u8]) -> std::io::Result<bool> {
        let Some(handle) = self.file_open_if_there(path, "r+").await? else {
            return Ok(false);
        };
        let write = self.execute(qga::guest_file_write { handle, buf_b64: bytes.to_vec(), count: None }).await;
        let closed = self.file_close(handle).await;
        if write?.count != bytes.len() as i64 {
            return Err(std::io::Error::new(std::io::ErrorKind::WriteZero, format!("short write to {path}")));
        }
        closed?;
        Ok(true)
    }

    /// `guest-get-time`: the guest's wall clock, nanoseconds since the Unix epoch.
    pub async fn time_ns(&self) -> std::io::Result<i64> {
        self.execute(qga::guest_get_time {}).await
    }

    /// Polls `guest-exec-status` once; `None` while the process runs.
    pub async fn status(&self, pid: i64) -> std::io::Result<Option<ExecResult>> {
        let s = self.execute(qga::guest_exec_status { pid }).await?;
        if !s.exited {
            return Ok(None);
        }
        Ok(Some(ExecResult {
            exit_code: s.exitcode,
            signal: s.signal,
            stdout: s.out_data.unwrap_or_default(),
            stderr: s.err_data.unwrap_or_default(),
            truncated: s.out_truncated.unwrap_or(false) || s.err_truncated.unwrap_or(false),
        }))
    }
}

impl Drop for Qga {
    fn drop(&mut self) {
        self.events.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

    /// A fake guest agent for one connection on `socket`: reads the sentinel and the
    /// `guest-sync-delimited` request, writes `held` (what a guest held for earlier
    /// connections), then, if `answer`, its answer to the request; then answers one more
    /// request with `{"return": 42}`. Returns the request lines it read.
    fn fake_agent(socket: &Path, held: &'static [u8], answer: bool) -> tokio::task::JoinHandle<Vec<Vec<u8>>> {
        let listener = tokio::net::UnixListener::bind(socket).unwrap();
        tokio::spawn(async move {
            let (conn, _) = listener.accept().await.unwrap();
            let (read, mut write) = tokio::io::split(conn);
            let mut read = BufReader::new(read);
            let mut requests = Vec::new();
            let mut line = Vec::new();
            read.read_until(b'\n', &mut line).await.unwrap();
            let request: serde_json::Value = serde_json::from_slice(line.strip_prefix(&[SENTINEL]).unwrap()).unwrap();
            requests.push(line.clone());
            write.write_all(held).await.unwrap();
            if answer {
                let mut answer = vec![SENTINEL];
                answer.extend_from_slice(format!("{{\"return\": {}}}\n", request["arguments"]["id"]).as_bytes());
                write.write_all(&answer).await.unwrap();
            }
            line.clear();
            if read.read_until(b'\n', &mut line).await.unwrap_or(0) > 0 {
                requests.push(line.clone());
                write.write_all(b"{\"return\": 42}\n").await.unwrap();
            }
            requests
        })
    }

    #[tokio::test]
    async fn the_sync_drops_what_the_agent_held_for_earlier_connections() {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("qga.sock");
        // A late guest-exec-status answer, an earlier connection's sync answer (another
        // id), a late guest-get-time answer: all before this connection's answer.
        let held: &[u8] = b"{\"return\": {\"exited\": false}}\n\xff{\"return\": 999}\n{\"return\": 5}\n";
        let agent = fake_agent(&socket, held, true);
        let qga = Qga::try_connect(&socket, Duration::from_secs(5), 1234).await.unwrap().expect("synced");
        assert_eq!(qga.time_ns().await.unwrap(), 42, "the next request gets its own answer");
        drop(qga);
        let requests = agent.await.unwrap();
        assert_eq!(requests[0], b"\xff{\"execute\":\"guest-sync-delimited\",\"arguments\":{\"id\":1234}}\n");
        assert!(String::from_utf8_lossy(&requests[1]).contains("guest-get-time"), "{requests:?}");
    }

    /// A fake agent that syncs, then answers each request line with the next of
    /// `answers` and closes the connection when they run out.
    fn scripted_agent(socket: &Path, answers: Vec<&'static str>) -> tokio::task::JoinHandle<Vec<String>> {
        let listener = tokio::net::UnixListener::bind(socket).unwrap();
        tokio::spawn(async move {
            let (conn, _) = listener.accept().await.unwrap();
            let (read, mut write) = tokio::io::split(conn);
            let mut read = BufReader::new(read);
            let mut line = Vec::new();
            read.read_until(b'\n', &mut line).await.unwrap();
            let request: serde_json::Value = serde_json::from_slice(line.strip_prefix(&[SENTINEL]).unwrap()).unwrap();
            let mut sync = vec![SENTINEL];
            sync.extend_from_slice(format!("{{\"return\": {}}}\n", request["arguments"]["id"]).as_bytes());
            write.write_all(&sync).await.unwrap();
            let mut requests = Vec::new();
            for answer in answers {
                line.clear();
                if read.read_until(b'\n', &mut line).await.unwrap_or(0) == 0 {
                    break;
                }
                requests.push(String::from_utf8_lossy(&line).into_owned());
                write.write_all(answer.as_bytes()).await.unwrap();
            }
            requests
        })
    }

    #[tokio::test]
    async fn a_refused_open_is_no_file_and_a_lost_connection_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("qga.sock");
        let agent = scripted_agent(
            &socket,
            vec![
                "{\"error\": {\"class\": \"GenericError\", \"desc\": \"failed to open file '/run/x': No such file or directory\"}}\n",
                "{\"return\": 1000}\n",
                "{\"return\": {\"count\": 3, \"buf-b64\": \"b2sK\", \"eof\": true}}\n",
                "{\"return\": {}}\n",
            ],
        );
        let qga = Qga::try_connect(&socket, Duration::from_secs(5), 7).await.unwrap().expect("synced");
        assert_eq!(qga.read_file_if_there("/run/x", 4096).await.unwrap(), None, "refused: not there");
        assert_eq!(qga.read_file_if_there("/run/y", 4096).await.unwrap(), Some(b"ok\n".to_vec()));
        // The agent is gone: an error, not "not there yet".
        assert!(qga.read_file_if_there("/run/z", 4096).await.is_err());
        let requests = agent.await.unwrap();
        assert!(requests[0].contains("guest-file-open") && requests[0].contains("\"mode\":\"r\""), "{requests:?}");
        assert!(requests[2].contains("guest-file-read") && requests[2].contains("\"count\":4096"), "{requests:?}");
        assert!(requests[3].contains("guest-file-close"), "{requests:?}");
    }

    #[tokio::test]
    async fn a_file_is_there_when_it_opens_even_if_its_close_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("qga.sock");
        let refused = "{\"error\": {\"class\": \"GenericError\", \"desc\": \"No such process\"}}\n";
        let agent = scripted_agent(&socket, vec!["{\"return\": 1001}\n", refused, refused]);
        let qga = Qga::try_connect(&socket, Duration::from_secs(5), 8).await.unwrap().expect("synced");
        assert!(qga.file_there("/proc/118/stat").await.unwrap(), "opened: there, though its close was refused");
        assert!(!qga.file_there("/proc/119/stat").await.unwrap(), "refused open: not there");
        let requests = agent.await.unwrap();
        assert!(requests[1].contains("guest-file-close") && requests[1].contains("1001"), "{requests:?}");
        assert_eq!(requests.len(), 3, "no close after a refused open: {requests:?}");
    }

    #[tokio::test]
    async fn only_late_answers_are_no_sync() {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("qga.sock");
        let agent = fake_agent(&socket, b"\xff{\"return\": 999}\n{\"return\": 5}\n", false);
        let qga = Qga::try_connect(&socket, Duration::from_millis(200), 1234).await.unwrap();
        assert!(qga.is_none(), "no answer with this connection's id: try again");
        agent.abort();
    }
}
