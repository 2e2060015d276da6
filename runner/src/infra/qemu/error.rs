//! [`AgentError`]: why talking to a VM's QEMU (QMP) or its guest agent failed, beyond
//! an I/O error on the socket.

use std::time::Duration;

/// Why a request to QMP or to the guest agent failed. Carried by
/// [`VmError::Agent`](super::vm::VmError::Agent), which names the VM.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    /// The socket or the protocol failed.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// QMP's socket exists but QEMU did not send its greeting (and negotiate) in time.
    #[error("QMP did not greet within {}s", limit.as_secs())]
    QmpGreetingTimeout {
        /// The wait.
        limit: Duration,
    },
    /// A request needs QMP and there is no connection.
    #[error("QMP is not connected")]
    QmpNotConnected,
    /// Saving the VM's state took too long (it is given up; the guest runs on).
    #[error("the save took over {}s", limit.as_secs())]
    SaveTimeout {
        /// The limit.
        limit: Duration,
    },
    /// QEMU reported the migration to a file as failed or cancelled.
    #[error("{reason}")]
    MigrationFailed {
        /// QEMU's `error-desc`, or that it gave none.
        reason: String,
    },
    /// QMP refused to start loading a saved state (`migrate-set-capabilities` or
    /// `migrate-incoming`, [`super::qmp::Qmp::load_state`]).
    #[error("QEMU refused to load the saved state: {0}")]
    LoadRefused(std::io::Error),
    /// After a save, the guest was not running again in time.
    #[error("the guest did not run again within {}s after saving its state", limit.as_secs())]
    ResumeTimeout {
        /// The limit.
        limit: Duration,
    },
    /// A new agent connection never answered `guest-sync-delimited` within a step's
    /// timeout.
    #[error("no answer to guest-sync-delimited on a new connection {during}, within the step's timeout ({}s)", timeout.as_secs())]
    SyncTimeout {
        /// When (`during step NAME`).
        during: String,
        /// The step's timeout.
        timeout: Duration,
    },
    /// A [`super::vm::Vm::exchange`] with a program in the guest failed: it is not
    /// listening, or it stopped without answering.
    #[error("{step}: {why}")]
    ExchangeFailed {
        /// The exchange (`identity`).
        step: String,
        /// Why, as words.
        why: String,
    },
    /// The identity script (host name, address, clock) exited non-zero in the guest.
    #[error("setting the guest's host name, address and clock failed (exit {exit:?}): {stderr}")]
    Identity {
        /// Its exit status (`None`: killed).
        exit: Option<i64>,
        /// What it printed to stderr, trimmed.
        stderr: String,
    },
}
