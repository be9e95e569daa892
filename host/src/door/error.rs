//! What a call through the door gives back when it has no result.

use std::fmt;

use serde_json::Value;

use crate::runtime::RuntimeError;

/// A call through a [`Door`](super::Door) that has no result.
#[derive(Debug)]
#[non_exhaustive]
pub enum DoorError<E> {
    /// The step ended without a result (`failed`, `escalated`, `replan`,
    /// `dead_lettered`, `awaiting_input`, `cancelled`, `in_flight`).
    Stopped {
        /// How the step ended (the runtime's outcome).
        outcome: String,
        /// The decision that stopped it, as the policy printed it (with its
        /// `envelope`, the normalized error). When the loop stopped without
        /// a final decision of the policy (the attempt budget, an open
        /// breaker on every target, the run's deadline): `action` and
        /// `reason` are the outcome, `attempt` 0, and `envelope` the loop's.
        decision: Value,
        /// The envelope rendered `model-tool-result`: what to hand the
        /// model as the tool's result instead of an error.
        for_model: Value,
        /// What the operation's last attempt returned as its error; none
        /// when it returned a response the component judged a failure, or
        /// was not called (an open breaker).
        cause: Option<E>,
    },
    /// The step ended `ok` without calling the operation: its idempotency
    /// key was already done (a fixed `run_id` and `step_id` repeated), and
    /// this is the result recorded then (the door records `null`).
    AlreadyDone(Value),
    /// The loop, the policy or the store failed.
    Runtime(RuntimeError),
    /// The thread that drives the step could not start, or stopped without
    /// an answer (a panic in the runtime).
    Driver(String),
}

impl<E> DoorError<E> {
    /// The envelope rendered for the model (`model-tool-result`), for a
    /// step that stopped; `None` for the other errors.
    pub fn for_model(&self) -> Option<&Value> {
        match self {
            Self::Stopped { for_model, .. } => Some(for_model),
            _ => None,
        }
    }

    /// The stable code of the failure: the envelope's `code` for a stopped
    /// step, `door.already_done`, `runtime` or `door.driver` otherwise.
    pub fn code(&self) -> &str {
        match self {
            Self::Stopped { decision, .. } => decision["envelope"]["code"]
                .as_str()
                .unwrap_or("runtime.unknown"),
            Self::AlreadyDone(_) => "door.already_done",
            Self::Runtime(_) => "runtime",
            Self::Driver(_) => "door.driver",
        }
    }
}

impl<E: fmt::Display> fmt::Display for DoorError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Stopped {
                outcome,
                decision,
                cause,
                ..
            } => {
                write!(
                    f,
                    "the call ended {outcome} ({}): {}",
                    self.code(),
                    decision["envelope"]["hint"].as_str().unwrap_or("")
                )?;
                if let Some(cause) = cause {
                    write!(f, "; last error: {cause}")?;
                }
                Ok(())
            }
            Self::AlreadyDone(result) => write!(
                f,
                "the step's idempotency key was already done (recorded result {result}); \
                 leave run_id unset so that each call is a run of its own"
            ),
            Self::Runtime(e) => write!(f, "the recovery runtime failed: {e}"),
            Self::Driver(e) => write!(f, "the door's step thread failed: {e}"),
        }
    }
}

/// The operation's own error is the `cause` field (any `Display` type, so
/// that `?` works for every error type); `source` is the runtime's error.
impl<E: fmt::Debug + fmt::Display> std::error::Error for DoorError<E> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Runtime(e) => Some(e),
            _ => None,
        }
    }
}

impl<E> From<RuntimeError> for DoorError<E> {
    fn from(e: RuntimeError) -> Self {
        Self::Runtime(e)
    }
}
