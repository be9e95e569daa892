//! Interrupting a blocking operation at its timeout.
//!
//! A [`Step`](super::Step)'s operation is an ordinary closure called on the
//! run's thread, so `attempt_timeout_ms` and the run's deadline can only be
//! *measured* for it: a call that hangs holds the run until it returns (the
//! runtime then reports it as a `timeout` observation). Node and Python's
//! async runtimes race the call against a timer instead. [`interruptible`]
//! gives a blocking Rust operation the same behaviour: each call runs on a
//! thread of its own, and the runtime stops waiting at the call's
//! `timeout_ms`.
//!
//! Why a thread and not a signal: a thread cannot be stopped safely from
//! outside in Rust, so a call that times out is **abandoned**, not killed. It
//! runs to its end on its thread and its outcome is dropped. That is why the
//! retry that usually follows uses the same idempotency key
//! ([`Call::key`]): pass it to the service (an `Idempotency-Key` header), and
//! an abandoned call that still lands is not applied twice. Give the blocking
//! client its own timeout too (`call.timeout_ms`), so abandoned threads do not
//! pile up behind a service that never answers.

use super::step::{Call, Outcome};
use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::sync::Arc;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::thread;
use std::time::{Duration, Instant};

/// Wraps a blocking operation so that the runtime stops waiting for a call at
/// its `timeout_ms` (the run's `attempt_timeout_ms`, or what is left before
/// its `deadline_ms`, whichever is sooner).
///
/// The result is an operation for [`Step::new`](super::Step::new),
/// [`Step::compensate`](super::Step::compensate) or
/// [`Operations`](super::Operations). A call without a `timeout_ms` runs
/// directly on the caller's thread, as an unwrapped operation would. A call
/// with one runs on a new thread; when it has not returned after `timeout_ms`
/// of wall time, the call is answered with the observation
/// `{"source":"timeout","phase":"total","after_ms":<waited>}`, which the
/// policy decides on (usually a retry with the same key), and the thread is
/// left to finish on its own (see the [module docs](self)). A panic in the
/// operation is raised again on the caller's thread, as it would be without
/// the wrapper. When no thread can be spawned, the call runs on the caller's
/// thread and is measured instead.
///
/// The timeout is wall time: on a [`VirtualClock`](super::VirtualClock) an
/// operation that advances the clock is judged by the runtime's measurement
/// as before, and one that really blocks is still cut at `timeout_ms`.
///
/// ```
/// use agent_recovery::runtime::{Call, Outcome, Runtime, Step, interruptible};
///
/// let runtime = Runtime::builder().attempt_timeout_ms(2_000).build()?;
/// let mut run = runtime.run("run-1")?;
/// let report = run.step(Step::new(
///     "lookup",
///     "crm.lookup",
///     interruptible(|call: &Call| {
///         // a blocking client; call.key as its idempotency key,
///         // call.timeout_ms as its own timeout
///         Outcome::Ok(serde_json::json!({"id": 7, "key": call.key.len()}))
///     }),
/// ))?;
/// assert_eq!(report.outcome, "ok");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn interruptible<F>(operation: F) -> impl FnMut(&Call) -> Outcome + Send + 'static
where
    F: Fn(&Call) -> Outcome + Send + Sync + 'static,
{
    let operation = Arc::new(operation);
    move |call: &Call| match call.timeout_ms {
        None => operation(call),
        Some(limit) => on_thread(&operation, call, Duration::from_millis(limit)),
    }
}

fn on_thread<F>(operation: &Arc<F>, call: &Call, limit: Duration) -> Outcome
where
    F: Fn(&Call) -> Outcome + Send + Sync + 'static,
{
    let (tx, rx) = mpsc::sync_channel(1);
    let (op, owned) = (Arc::clone(operation), call.clone());
    let started = Instant::now();
    let spawned = thread::Builder::new()
        .name(format!("agent-recovery call {}", call.step))
        .spawn(move || {
            // The receiver may be gone (the call timed out): nothing to do then.
            let _ = tx.send(catch_unwind(AssertUnwindSafe(|| op(&owned))));
        });
    if spawned.is_err() {
        return operation(call);
    }
    match rx.recv_timeout(limit) {
        Ok(Ok(outcome)) => outcome,
        Ok(Err(panic)) => resume_unwind(panic),
        // The thread always sends before it ends; a disconnect without a
        // message cannot happen, and is reported like a timeout if it does.
        Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => {
            timed_out(started.elapsed())
        }
    }
}

fn timed_out(waited: Duration) -> Outcome {
    let ms = u64::try_from(waited.as_millis()).unwrap_or(u64::MAX);
    Outcome::Failed(format!(
        r#"{{"source":"timeout","phase":"total","after_ms":{ms}}}"#
    ))
}
