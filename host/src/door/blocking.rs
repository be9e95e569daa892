//! The blocking twin: `op.recover(&door).call()` on the calling thread.

use std::sync::Arc;

use serde_json::Value;

use super::outcome::{Reading, outcome_of};
use super::{Door, DoorError};
use crate::runtime::Call;

/// Recovery for a blocking closure `FnMut(Call) -> Result<T, E>`: the
/// retries sleep on the door's clock, on the calling thread.
///
/// ```
/// use agent_recovery::door::{BlockingRecoverable, Door};
/// use agent_recovery::runtime::Call;
///
/// let door = Door::builder().tool("inventory.reserve").call("tool").seed(7).build()?;
/// let reserve = |call: Call| match call.attempt {
///     1 => Err(503), // the status of a failed HTTP call
///     _ => Ok(42),
/// };
/// let observe = |status: &i32| format!(r#"{{"source":"http","status":{status}}}"#);
/// assert_eq!(reserve.recover(&door).observe(observe).call()?, 42);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub trait BlockingRecoverable<T, E>: FnMut(Call) -> Result<T, E> + Sized {
    /// This operation, to be called under `door`'s runtime.
    fn recover(self, door: &Door) -> BlockingRecover<'_, Self, T, E>;
}

impl<F, T, E> BlockingRecoverable<T, E> for F
where
    F: FnMut(Call) -> Result<T, E>,
    T: 'static,
    E: std::fmt::Display + 'static,
{
    fn recover(self, door: &Door) -> BlockingRecover<'_, Self, T, E> {
        BlockingRecover {
            door,
            op: self,
            reading: Reading::default(),
        }
    }
}

/// A blocking call under a door, made by [`call`](Self::call).
///
/// # Default
///
/// | option | default |
/// | --- | --- |
/// | [`args`](Self::args) | `null` (part of the idempotency key and of a dead-letter record) |
/// | [`observe`](Self::observe) | an [`io::Error`](std::io::Error) of a network kind, or a boxed error whose source chain holds one: `{"source":"network","code":"ECONNREFUSED",...}` (the kind's libc name); any other error: `{"source":"exception","type":<the error's type name>,"message":<its Display>}` |
/// | [`check`](Self::check) | none: every `Ok` is a success |
pub struct BlockingRecover<'d, F, T, E> {
    door: &'d Door,
    op: F,
    reading: Reading<T, E>,
}

impl<F, T, E> BlockingRecover<'_, F, T, E>
where
    F: FnMut(Call) -> Result<T, E>,
{
    /// The call's arguments as JSON.
    pub fn args(mut self, args: Value) -> Self {
        self.reading.args = args;
        self
    }
    /// How an error becomes an observation (`docs/observation.md`), e.g.
    /// `{"source":"http","status":503}` for an HTTP client's status error.
    pub fn observe(mut self, f: impl Fn(&E) -> String + Send + Sync + 'static) -> Self {
        self.reading.observe = Arc::new(f);
        self
    }
    /// A response to hand the component for judgement (`Some(observation)`:
    /// a 200 carrying a refusal is a failure, a 304 is not); `None` is a success.
    pub fn check(mut self, f: impl Fn(&T) -> Option<String> + Send + Sync + 'static) -> Self {
        self.reading.check = Arc::new(f);
        self
    }

    /// Runs the call to its end on this thread (the closure, its value and
    /// its error need not be `Send`).
    pub fn call(self) -> Result<T, DoorError<E>> {
        let BlockingRecover {
            door,
            mut op,
            reading,
        } = self;
        let mut last = None;
        let finished = door.run_step(&reading.args, |call, _| {
            let result = op(call.clone());
            let outcome = outcome_of(&result, &*reading.check, &*reading.observe);
            last = Some(result);
            outcome
        })?;
        door.finish(finished, last)
    }
}
