//! Typed progress events sent from the runner to whatever renders them (the CLI's
//! progress bars or plain lines, or nothing in tests).

use std::sync::Arc;
use std::time::Duration;

/// Something that happened during a run.
#[derive(Debug, Clone)]
pub enum Event {
    /// An image is being fetched or built.
    ImageStarted {
        /// Human description, e.g. `kernel debian 6.1`.
        what: String,
    },
    /// An image is ready.
    ImageReady {
        /// Human description.
        what: String,
        /// Found in the cache (nothing built).
        cached: bool,
        /// Time taken.
        took: Duration,
    },
    /// A one-line notice for the user (e.g. the KVM → TCG fallback).
    Notice(String),
    /// A VM's QEMU was started.
    VmStarted {
        /// VM name.
        vm: String,
        /// It loads a saved VM state instead of booting.
        restoring: bool,
    },
    /// A VM is ready for its steps: its guest agent answered (and its identity is set).
    VmReady {
        /// VM name.
        vm: String,
        /// Boot time.
        took: Duration,
    },
    /// A step started.
    StepStarted {
        /// VM name.
        vm: String,
        /// Step name.
        step: String,
    },
    /// A step ended.
    StepFinished {
        /// VM name.
        vm: String,
        /// Step name.
        step: String,
        /// How it ended.
        status: StepStatus,
        /// Time taken.
        took: Duration,
    },
    /// VMs are being shut down (only sent when at least one VM was started).
    TearingDown,
}

/// Outcome of one step (in events and in `run.json`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StepStatus {
    /// Exited with the expected status.
    Passed,
    /// Exited with another status, or was killed by a signal.
    Failed,
    /// Not run: an earlier step of its VM or a dependency did not pass.
    Skipped,
    /// Hit its timeout (waiting for its dependencies, or running).
    TimedOut,
    /// The VM or its agent failed during the step.
    Error,
    /// The step is running: only in a `run.json` written while the run is going.
    Running,
    /// The step was running when the run stopped (another VM failed, or an
    /// interruption); its output is lost with the guest.
    Cancelled,
}

impl std::fmt::Display for StepStatus {
    /// The `run.json` spelling: `passed`, `timed_out`, …
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            StepStatus::Passed => "passed",
            StepStatus::Failed => "failed",
            StepStatus::Skipped => "skipped",
            StepStatus::TimedOut => "timed_out",
            StepStatus::Error => "error",
            StepStatus::Running => "running",
            StepStatus::Cancelled => "cancelled",
        })
    }
}

/// Receives events; cheap to clone.
pub type EventSink = Arc<dyn Fn(Event) + Send + Sync>;

/// A sink that drops everything.
pub fn discard() -> EventSink {
    Arc::new(|_| {})
}
