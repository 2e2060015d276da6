//! Keeps a qapi connection from being used again after a command on it was dropped
//! before its answer came.
//!
//! qapi 0.15 matches an answer to its command by the command's `id`. It sends ids only
//! when QEMU's QMP greeting offers the `oob` capability, and its greeting parser never
//! sees that offer (qapi-qmp 0.15's `#[serde(untagged)]` `QmpCapability::OutOfBand`
//! matches only `null`, not `"oob"`); guest agent (QGA) commands have no ids at all. So
//! every command on a connection is id 0. A command future dropped before its answer
//! (a `tokio::time::timeout` that fired while QEMU was busy) leaves id 0 pending, and
//! the next command on that connection panics inside qapi ("QAPI duplicate command id
//! 0") while it holds qapi's lock; dropping the connection then panics again on the
//! poisoned lock and aborts the whole process. A late answer would also be taken as
//! the answer to the next command.
//!
//! [`InFlight::run`] wraps every command (one at a time per connection, as `Vm`'s
//! `&mut self` methods issue them: a second command waiting for qapi's write lock when
//! the first is dropped would not be stopped): once one was dropped unanswered, the
//! connection refuses further commands with an [`std::io::ErrorKind::BrokenPipe`]
//! error and [`InFlight::abandoned`] says so; its owner reconnects (see
//! [`super::vm::Vm`]).

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};

/// Whether a command on one connection was dropped before its answer.
#[derive(Debug, Default)]
pub struct InFlight {
    abandoned: AtomicBool,
}

/// Marks the connection abandoned when dropped armed (its command never finished).
struct Armed<'a>(&'a AtomicBool, bool);

impl Drop for Armed<'_> {
    fn drop(&mut self) {
        if self.1 {
            self.0.store(true, Ordering::Relaxed);
        }
    }
}

impl InFlight {
    /// Whether an earlier command was dropped before its answer: the connection is out
    /// of step and must be replaced.
    pub fn abandoned(&self) -> bool {
        self.abandoned.load(Ordering::Relaxed)
    }

    /// Runs `command` (one qapi `execute` future, not yet polled) unless the connection
    /// is abandoned. `protocol` names it in the error (`QMP`, `guest agent`).
    ///
    /// Errors: [`std::io::ErrorKind::BrokenPipe`] without sending anything if an
    /// earlier command was dropped unanswered; else `command`'s own.
    pub async fn run<T>(
        &self,
        protocol: &str,
        command: impl Future<Output = Result<T, qapi::ExecuteError>>,
    ) -> std::io::Result<T> {
        self.run_answered(protocol, command).await?.map_err(std::io::Error::from)
    }

    /// [`InFlight::run`], keeping an error the other side answered with (QMP's or the
    /// guest agent's `{"error": …}`: the command was refused, e.g. a file that is not
    /// there) apart from a failed connection.
    ///
    /// Errors: as [`InFlight::run`], for the connection only.
    pub async fn run_answered<T>(
        &self,
        protocol: &str,
        command: impl Future<Output = Result<T, qapi::ExecuteError>>,
    ) -> std::io::Result<Result<T, qapi::Error>> {
        if self.abandoned() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::BrokenPipe,
                format!("{protocol} connection out of step: an earlier command was given up before its answer"),
            ));
        }
        let mut armed = Armed(&self.abandoned, true);
        let result = command.await;
        armed.1 = false;
        match result {
            Ok(v) => Ok(Ok(v)),
            Err(qapi::ExecuteError::Qapi(refused)) => Ok(Err(refused)),
            Err(qapi::ExecuteError::Io(e)) => Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn only_a_command_dropped_unfinished_abandons_the_connection() {
        let inflight = InFlight::default();
        let answered: Result<u8, qapi::ExecuteError> = Ok(7);
        assert_eq!(inflight.run("QMP", async { answered }).await.unwrap(), 7);
        let refused = Err(qapi::ExecuteError::Io(std::io::Error::other("refused")));
        let e = inflight.run::<u8>("QMP", async { refused }).await.unwrap_err();
        assert_eq!(e.to_string(), "refused");
        assert!(!inflight.abandoned(), "answered commands, even errors, keep it in step");

        let never = inflight.run::<u8>("guest agent", std::future::pending());
        assert!(tokio::time::timeout(std::time::Duration::from_millis(1), never).await.is_err());
        assert!(inflight.abandoned());
        let sent = std::cell::Cell::new(false);
        let e = inflight
            .run::<u8>("guest agent", async {
                sent.set(true);
                Ok(1)
            })
            .await
            .unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::BrokenPipe);
        assert_eq!(
            e.to_string(),
            "guest agent connection out of step: an earlier command was given up before its answer"
        );
        assert!(!sent.get(), "nothing is sent on a connection out of step");
    }
}
