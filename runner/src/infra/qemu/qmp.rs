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
