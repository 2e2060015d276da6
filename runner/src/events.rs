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
    },
    /// A VM's guest agent answered.
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
        /// `passed`, `failed`, `skipped`, …
        status: String,
        /// Time taken.
        took: Duration,
    },
    /// VMs are being shut down.
    TearingDown,
}

/// Receives events; cheap to clone.
pub type EventSink = Arc<dyn Fn(Event) + Send + Sync>;

/// A sink that drops everything.
pub fn discard() -> EventSink {
    Arc::new(|_| {})
}
