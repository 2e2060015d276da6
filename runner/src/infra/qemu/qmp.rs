//! QMP client (QEMU Machine Protocol) over the VM's unix socket, via the `qapi` crate.

use std::path::Path;

use qapi::futures::{QapiService, QmpStreamTokio};
use tokio::io::WriteHalf;
use tokio::net::UnixStream;

type Service = QapiService<QmpStreamTokio<WriteHalf<UnixStream>>>;

/// A negotiated QMP connection.
pub struct Qmp {
    service: Service,
    events: tokio::task::JoinHandle<()>,
}

impl std::fmt::Debug for Qmp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Qmp")
    }
}

impl Qmp {
    /// Connects to `socket` and negotiates capabilities.
    pub async fn connect(socket: &Path) -> std::io::Result<Qmp> {
        let stream = QmpStreamTokio::open_uds(socket).await?;
        let stream = stream.negotiate().await?;
        let (service, events) = stream.spawn_tokio();
        Ok(Qmp { service, events })
    }

    /// `query-status`: whether the guest CPUs are running.
    pub async fn running(&self) -> std::io::Result<bool> {
        let s = self.service.execute(qapi::qmp::query_status {}).await.map_err(std::io::Error::from)?;
        Ok(s.running)
    }

    /// `query-status`: QEMU's run state, as QMP names it (`running`, `paused`,
    /// `inmigrate`, `postmigrate`, …).
    pub async fn run_state(&self) -> std::io::Result<String> {
        let s = self.service.execute(qapi::qmp::query_status {}).await.map_err(std::io::Error::from)?;
        Ok(serde_json::to_value(s.status).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default())
    }

    /// `cont`: resumes the guest's CPUs.
    pub async fn cont(&self) -> std::io::Result<()> {
        self.service.execute(qapi::qmp::cont {}).await.map(|_| ()).map_err(std::io::Error::from)
    }

    /// `migrate` to `file:<path>` (QEMU ≥ 8.2), live: the guest runs while its memory is
    /// copied and is stopped only for the last pass (state `postmigrate`, its disks
    /// flushed); then waits, polling `query-migrate` every 10 ms, until it completed.
    /// Returns the RAM bytes written.
    ///
    /// Errors: QMP refused the command, or the migration failed (QEMU's
    /// `error-desc`).
    pub async fn migrate_to_file(&self, path: &Path) -> std::io::Result<u64> {
        let uri = format!("file:{}", path.display());
        let cmd = qapi::qmp::migrate { uri: Some(uri), channels: None, detach: None, resume: None };
        self.service.execute(cmd).await.map_err(std::io::Error::from)?;
        loop {
            let info = self.service.execute(qapi::qmp::query_migrate {}).await.map_err(std::io::Error::from)?;
            match info.status {
                Some(qapi::qmp::MigrationStatus::completed) => {
                    return Ok(info.ram.map(|r| r.transferred.max(0) as u64).unwrap_or(0));
                }
                Some(qapi::qmp::MigrationStatus::failed | qapi::qmp::MigrationStatus::cancelled) => {
                    return Err(std::io::Error::other(
                        info.error_desc.unwrap_or_else(|| "migration failed (QEMU gave no reason)".into()),
                    ));
                }
                _ => tokio::time::sleep(std::time::Duration::from_millis(10)).await,
            }
        }
    }

    /// Whether a migration is under way (`query-migrate`: `setup`, `active`, …; not
    /// `none`, `completed`, `failed` or `cancelled`).
    pub async fn migration_active(&self) -> std::io::Result<bool> {
        use qapi::qmp::MigrationStatus as S;
        let info = self.service.execute(qapi::qmp::query_migrate {}).await.map_err(std::io::Error::from)?;
        Ok(!matches!(info.status, None | Some(S::none | S::completed | S::failed | S::cancelled)))
    }

    /// `migrate_cancel`: stops a migration still running (nothing if none runs).
    pub async fn cancel_migration(&self) -> std::io::Result<()> {
        self.service.execute(qapi::qmp::migrate_cancel {}).await.map(|_| ()).map_err(std::io::Error::from)
    }

    /// `quit`: QEMU exits at once (our disks are throwaway overlays).
    pub async fn quit(&self) -> std::io::Result<()> {
        match self.service.execute(qapi::qmp::quit {}).await {
            Ok(_) => Ok(()),
            // QEMU may close the socket before answering.
            Err(qapi::ExecuteError::Io(e)) if e.kind() == std::io::ErrorKind::UnexpectedEof => Ok(()),
            Err(e) => Err(e.into()),
        }
    }
}

impl Drop for Qmp {
    fn drop(&mut self) {
        self.events.abort();
    }
}
