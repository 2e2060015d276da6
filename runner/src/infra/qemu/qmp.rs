//! QMP client (QEMU Machine Protocol) over the VM's unix socket, via the `qapi` crate.

use std::path::Path;

use super::inflight::InFlight;

use qapi::futures::{QapiService, QmpStreamTokio};
use tokio::io::WriteHalf;
use tokio::net::UnixStream;

type Service = QapiService<QmpStreamTokio<WriteHalf<UnixStream>>>;

/// A negotiated QMP connection.
///
/// Every command goes through [`InFlight`]: once one was given up before its answer
/// (a timeout around it), the others fail with `BrokenPipe` and [`Qmp::out_of_step`]
/// is true; connect again.
pub struct Qmp {
    service: Service,
    events: tokio::task::JoinHandle<()>,
    inflight: InFlight,
}

impl std::fmt::Debug for Qmp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Qmp")
    }
}

impl Qmp {
    /// Connects to `socket`, drops what QEMU still had for an earlier client
    /// (`skip_to_greeting`), and negotiates capabilities.
    ///
    /// Errors: the socket can't be connected to, it closed, or the greeting or the
    /// negotiation failed.
    pub async fn connect(socket: &Path) -> std::io::Result<Qmp> {
        use tokio::io::AsyncReadExt;
        let (read, write) = tokio::io::split(UnixStream::connect(socket).await?);
        let mut read = tokio::io::BufReader::new(read);
        let greeting = skip_to_greeting(&mut read).await?;
        // qapi reads the greeting itself: it gets it back, then the rest of the stream.
        let read = std::io::Cursor::new(greeting).chain(read);
        let stream = QmpStreamTokio::open_split(read, write).await?.negotiate().await?;
        let (service, events) = stream.spawn_tokio();
        Ok(Qmp { service, events, inflight: InFlight::default() })
    }

    /// Closes a connection, first waiting up to `limit` for the late answer that put it
    /// out of step: QEMU sends an answer to whichever client is connected when it is
    /// ready, so a new connection opened before it came would get it in place of its
    /// own. qapi's reader ends once it has that answer (no one is left to take it).
    pub async fn close(mut self, limit: std::time::Duration) {
        if self.out_of_step() {
            let _ = tokio::time::timeout(limit, &mut self.events).await;
        }
    }

    /// `command`, through [`InFlight`].
    async fn execute<C: qapi::qmp::QmpCommand>(&self, command: C) -> std::io::Result<C::Ok> {
        self.inflight.run("QMP", self.service.execute(command)).await
    }

    /// Whether a command was given up before its answer: this connection must be
    /// replaced (see [`InFlight`]).
    pub fn out_of_step(&self) -> bool {
        self.inflight.abandoned()
    }

    /// `query-status`: whether the guest CPUs are running.
    pub async fn running(&self) -> std::io::Result<bool> {
        let s = self.execute(qapi::qmp::query_status {}).await?;
        Ok(s.running)
    }

    /// `query-status`: QEMU's run state, as QMP names it (`running`, `paused`,
    /// `inmigrate`, `postmigrate`, …).
    pub async fn run_state(&self) -> std::io::Result<String> {
        let s = self.execute(qapi::qmp::query_status {}).await?;
        Ok(serde_json::to_value(s.status).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default())
    }

    /// `cont`: resumes the guest's CPUs.
    pub async fn cont(&self) -> std::io::Result<()> {
        self.execute(qapi::qmp::cont {}).await.map(|_| ())
    }

    /// `migrate` to `file:<path>` (QEMU ≥ 8.2), live: the guest runs while its memory is
    /// copied and is stopped only for the last pass (state `postmigrate`, its disks
    /// flushed); then waits, polling `query-migrate` every 10 ms, until it completed.
    /// Returns the RAM bytes written.
    ///
    /// Errors: QMP refused the command, or the migration failed (QEMU's
    /// `error-desc`).
    pub async fn migrate_to_file(&self, path: &Path) -> Result<u64, super::error::AgentError> {
        let uri = format!("file:{}", path.display());
        let cmd = qapi::qmp::migrate { uri: Some(uri), channels: None, detach: None, resume: None };
        self.execute(cmd).await?;
        loop {
            let info = self.execute(qapi::qmp::query_migrate {}).await?;
            match info.status {
                Some(qapi::qmp::MigrationStatus::completed) => {
                    return Ok(info.ram.map(|r| r.transferred.max(0) as u64).unwrap_or(0));
                }
                Some(qapi::qmp::MigrationStatus::failed | qapi::qmp::MigrationStatus::cancelled) => {
                    return Err(super::error::AgentError::MigrationFailed {
                        reason: info.error_desc.unwrap_or_else(|| "migration failed (QEMU gave no reason)".into()),
                    });
                }
                _ => tokio::time::sleep(std::time::Duration::from_millis(10)).await,
            }
        }
    }

    /// `migrate-set-capabilities` `x-ignore-shared` on: a migration then leaves out
    /// the RAM mapped shared from a file (a [`super::args::GuestRam::Shared`] guest's
    /// memfd), and a load expects a stream without it. QEMU ≥ 4.0 (an unstable
    /// capability).
    pub async fn ignore_shared_ram(&self) -> std::io::Result<()> {
        let on = qapi::qmp::MigrationCapabilityStatus {
            capability: qapi::qmp::MigrationCapability::x_ignore_shared,
            state: true,
        };
        self.execute(qapi::qmp::migrate_set_capabilities { capabilities: vec![on] }).await.map(|_| ())
    }

    /// Loads the saved device state `path` into a QEMU started with `-incoming defer`
    /// whose RAM is a mapped state's RAM file: [`Qmp::ignore_shared_ram`], then
    /// `migrate-incoming` `file:<path>`. Returns once the load started; QEMU runs the
    /// guest when it is done (or exits if it fails: `exit-on-error` is on).
    ///
    /// Errors: QMP refused either command.
    pub async fn load_state(&self, path: &Path) -> std::io::Result<()> {
        self.ignore_shared_ram().await?;
        let uri = format!("file:{}", path.display());
        let cmd = qapi::qmp::migrate_incoming { uri: Some(uri), channels: None, exit_on_error: None };
        self.execute(cmd).await.map(|_| ())
    }

    /// Whether a migration is under way (`query-migrate`: `setup`, `active`, …; not
    /// `none`, `completed`, `failed` or `cancelled`).
    pub async fn migration_active(&self) -> std::io::Result<bool> {
        use qapi::qmp::MigrationStatus as S;
        let info = self.execute(qapi::qmp::query_migrate {}).await?;
        Ok(!matches!(info.status, None | Some(S::none | S::completed | S::failed | S::cancelled)))
    }

    /// `migrate_cancel`: stops a migration still running (nothing if none runs).
    pub async fn cancel_migration(&self) -> std::io::Result<()> {
        self.execute(qapi::qmp::migrate_cancel {}).await.map(|_| ())
    }

    /// `qom-set /objects/capture0 status on|off`: starts or stops the VM's capture
    /// filter ([`super::args::CAPTURE_FILTER_ID`], a `filter-dump` netfilter; every
    /// netfilter has the `status` property). When it returns, every frame the filter
    /// saw before is written: `filter-dump` writes each frame with one `writev` from
    /// QEMU's main loop, which also runs this command.
    ///
    /// Errors: QMP refused the command (no such object: the VM has no capture).
    pub async fn set_capture(&self, on: bool) -> std::io::Result<()> {
        let cmd = qapi::qmp::qom_set {
            path: format!("/objects/{}", super::args::CAPTURE_FILTER_ID),
            property: "status".into(),
            value: serde_json::Value::String(if on { "on" } else { "off" }.into()),
        };
        self.execute(cmd).await.map(|_| ())
    }

    /// `quit`: QEMU exits at once (our disks are throwaway overlays).
    pub async fn quit(&self) -> std::io::Result<()> {
        match self.execute(qapi::qmp::quit {}).await {
            Ok(_) => Ok(()),
            // QEMU may close the socket before answering.
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => Ok(()),
            Err(e) => Err(e),
        }
    }
}

/// QEMU's monitor keeps what it had not sent to a client that left (the late answer to
/// a command given up on) and sends it to the next client before the greeting; qapi takes
/// the first line for the greeting. Reads whole lines until one starts as the greeting
/// does (`{"QMP":`) and returns that line, dropping those before it.
///
/// Errors: reading the socket, or its end before a greeting.
async fn skip_to_greeting(read: &mut (impl tokio::io::AsyncBufRead + Unpin)) -> std::io::Result<Vec<u8>> {
    use tokio::io::AsyncBufReadExt;
    loop {
        let mut line = Vec::new();
        if read.read_until(b'\n', &mut line).await? == 0 {
            return Err(std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "QMP closed before its greeting"));
        }
        if line.starts_with(br#"{"QMP":"#) {
            return Ok(line);
        }
    }
}

impl Drop for Qmp {
    fn drop(&mut self) {
        self.events.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// A real QEMU with no machine, its QMP on `socket`; killed on drop.
    struct Qemu(std::process::Child);

    impl Qemu {
        async fn start(socket: &Path) -> Qemu {
            Self::start_with(socket, &[]).await
        }

        async fn start_with(socket: &Path, extra: &[String]) -> Qemu {
            let mut cmd = std::process::Command::new(crate::infra::qemu::qemu_binary());
            cmd.args(extra).args(["-machine", "none", "-display", "none", "-nodefaults"]);
            Self::launch(cmd, socket).await
        }

        /// Starts `cmd` (a QEMU command line) with its QMP monitor on `socket` and
        /// waits for the socket.
        async fn launch(mut cmd: std::process::Command, socket: &Path) -> Qemu {
            let child = cmd
                .arg("-chardev")
                .arg(format!("socket,id=qmp,path={},server=on,wait=off", socket.display()))
                .args(["-mon", "chardev=qmp,mode=control"])
                .stdin(std::process::Stdio::null())
                .spawn()
                .expect("qemu-system-x86_64 runs");
            let mut qemu = Qemu(child);
            let deadline = std::time::Instant::now() + Duration::from_secs(20);
            while !socket.exists() {
                assert!(qemu.0.try_wait().unwrap().is_none(), "QEMU exited before creating its QMP socket");
                assert!(std::time::Instant::now() < deadline, "no QMP socket after 20 s");
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            qemu
        }

        fn signal(&self, sig: i32) {
            assert_eq!(unsafe { libc::kill(self.0.id() as i32, sig) }, 0);
        }
    }

    impl Drop for Qemu {
        fn drop(&mut self) {
            self.signal(libc::SIGCONT);
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }

    /// A paused q35 QEMU (no guest, no CPU run) with RAM of `mib` MiB given as
    /// `backend` (a `memory-backend-file` object's options), its QMP on `socket`, and
    /// `extra` arguments, handed descriptor `ram` (if any) as
    /// [`crate::infra::qemu::args::RAM_FD`]; killed on drop.
    async fn q35(socket: &Path, mib: u64, backend: &str, extra: &[&str], ram: Option<i32>) -> Qemu {
        let mut cmd = std::process::Command::new(crate::infra::qemu::qemu_binary());
        if let Some(fd) = ram {
            // SAFETY: dup2 only, in the child.
            unsafe {
                std::os::unix::process::CommandExt::pre_exec(&mut cmd, move || {
                    crate::infra::qemu::vm::inherit_as(fd, crate::infra::qemu::args::RAM_FD)
                })
            };
        }
        cmd.args(["-machine", "q35", "-accel", "tcg", "-m", &mib.to_string(), "-S"])
            .args(["-display", "none", "-nodefaults", "-object"])
            .arg(format!("memory-backend-file,id=ram0,size={mib}M,{backend}"))
            .args(["-machine", "memory-backend=ram0"])
            .args(extra);
        Qemu::launch(cmd, socket).await
    }

    /// Mapped saved states with the QEMU here and no guest: a machine whose RAM is a
    /// shared memfd saves only its device state under `x-ignore-shared`; the RAM file
    /// written from the memfd, with a marker put into it, is mapped privately by a
    /// second QEMU that loads the state with [`Qmp::load_state`]; its guest memory is
    /// the file's (read back with `pmemsave`), and the file is left as it was.
    #[tokio::test]
    async fn a_state_saved_without_its_ram_loads_over_a_mapped_ram_file() {
        use crate::infra::qemu::state::{memfd, write_ram_file, RAM_FILE};
        use std::os::fd::AsRawFd;
        const MIB: u64 = 64;
        let dir = tempfile::tempdir().unwrap();
        let memfd = memfd().unwrap();
        let a_socket = dir.path().join("a.sock");
        let a = q35(&a_socket, MIB, "mem-path=/proc/self/fd/3,share=on", &[], Some(memfd.as_raw_fd())).await;
        let qmp = Qmp::connect(&a_socket).await.unwrap();
        qmp.ignore_shared_ram().await.unwrap();
        let state = dir.path().join("state");
        qmp.migrate_to_file(&state).await.unwrap();
        let stream = std::fs::metadata(&state).unwrap().len();
        assert!(stream < MIB << 20 >> 4, "the stream holds no guest RAM: {stream} bytes");
        drop(a);

        let ram = dir.path().join(RAM_FILE);
        let go = std::sync::atomic::AtomicBool::new(false);
        write_ram_file(&std::fs::File::from(memfd), MIB << 20, &ram, &go).unwrap();
        let marker = b"vmrepro mapped RAM";
        let at = 3u64 << 20;
        std::os::unix::fs::FileExt::write_all_at(&std::fs::File::options().write(true).open(&ram).unwrap(), marker, at)
            .unwrap();
        let before = std::fs::read(&ram).unwrap();
        let b_socket = dir.path().join("b.sock");
        let backend = format!("mem-path={},share=off,readonly=on,rom=off", ram.display());
        let _b = q35(&b_socket, MIB, &backend, &["-incoming", "defer"], None).await;
        let qmp = Qmp::connect(&b_socket).await.unwrap();
        qmp.load_state(&state).await.unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while qmp.migration_active().await.unwrap() || qmp.run_state().await.unwrap() == "inmigrate" {
            assert!(std::time::Instant::now() < deadline, "the load did not end in 20 s");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let dump = dir.path().join("dump");
        let save = qapi::qmp::pmemsave { val: at, size: marker.len() as u64, filename: dump.display().to_string() };
        qmp.execute(save).await.unwrap();
        assert_eq!(std::fs::read(&dump).unwrap(), marker, "guest memory at 3 MiB is the RAM file's");
        assert!(std::fs::read(&ram).unwrap() == before, "the mapped RAM file is not written");
    }

    /// QEMU stopped (SIGSTOP) answers nothing, so a query under a timeout is given up
    /// before its answer, as when QEMU is busy loading a saved state on a loaded host.
    /// Without [`InFlight`], the next command panicked in qapi ("duplicate command id
    /// 0") and the connection's drop aborted the process.
    #[tokio::test]
    async fn a_query_given_up_before_its_answer_puts_the_connection_out_of_step() {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("qmp.sock");
        let qemu = Qemu::start(&socket).await;
        let qmp = Qmp::connect(&socket).await.unwrap();
        assert_eq!(qmp.run_state().await.unwrap(), "running");
        assert!(!qmp.out_of_step());

        qemu.signal(libc::SIGSTOP);
        let given_up = tokio::time::timeout(Duration::from_millis(200), qmp.run_state()).await;
        assert!(given_up.is_err(), "a stopped QEMU answered: {given_up:?}");
        assert!(qmp.out_of_step());
        qemu.signal(libc::SIGCONT);

        // The next command is refused without being sent, and stays refused.
        for _ in 0..2 {
            let e = qmp.running().await.unwrap_err();
            assert_eq!(e.kind(), std::io::ErrorKind::BrokenPipe, "{e}");
            assert!(e.to_string().contains("QMP connection out of step"), "{e}");
        }

        // A new connection is in step: QEMU takes it once the old one is closed (after
        // the late answer came to it).
        qmp.close(Duration::from_secs(5)).await;
        let again = tokio::time::timeout(Duration::from_secs(5), Qmp::connect(&socket)).await.unwrap().unwrap();
        assert_eq!(again.run_state().await.unwrap(), "running");
        assert!(!again.out_of_step());
        // A command that ends in an error (here QEMU exiting) keeps it in step.
        again.quit().await.unwrap();
        assert!(!again.out_of_step());
    }

    /// The QEMU here takes `status=off` on a `filter-dump` and `qom-set`s its status
    /// through [`Qmp::set_capture`], as `capture: measured` needs; `qom-get` reads the
    /// change back.
    #[tokio::test]
    async fn the_capture_filter_is_turned_on_and_off() {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("qmp.sock");
        let pcap = dir.path().join("capture.pcap");
        let id = crate::infra::qemu::args::CAPTURE_FILTER_ID;
        let extra = [
            "-netdev".to_string(),
            "hubport,id=net0,hubid=0".to_string(),
            "-object".to_string(),
            format!("filter-dump,id={id},netdev=net0,queue=all,file={},maxlen=256,status=off", pcap.display()),
        ];
        let _qemu = Qemu::start_with(&socket, &extra).await;
        let qmp = Qmp::connect(&socket).await.unwrap();
        let status = || qapi::qmp::qom_get { path: format!("/objects/{id}"), property: "status".into() };
        assert_eq!(qmp.execute(status()).await.unwrap(), serde_json::json!("off"));
        qmp.set_capture(true).await.unwrap();
        assert_eq!(qmp.execute(status()).await.unwrap(), serde_json::json!("on"));
        qmp.set_capture(false).await.unwrap();
        assert_eq!(qmp.execute(status()).await.unwrap(), serde_json::json!("off"));
        // The pcap file header is written when the filter is made, whatever its status.
        assert_eq!(std::fs::metadata(&pcap).unwrap().len(), 24);
        qmp.quit().await.unwrap();
    }
}
