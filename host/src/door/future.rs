//! The async door: `op.recover(&door).await`.
//!
//! The step runs on a thread of its own (the runtime is blocking: its retry
//! sleeps and store calls block that thread, never the caller's event
//! loop). Each attempt is handed to the caller's task over a channel, the
//! operation's future runs there, and its outcome goes back to the step.

use std::future::{Future, IntoFuture};
use std::marker::PhantomData;
use std::pin::Pin;
use std::sync::{Arc, mpsc};
use std::task::{Context, Poll, ready};

use futures_channel::mpsc::{UnboundedReceiver, unbounded};
use futures_core::Stream;
use serde_json::Value;

use super::outcome::{Finished, Reading, abandoned, outcome_of};
use super::{Door, DoorError};
use crate::runtime::{Call, Outcome, RuntimeError};

/// Recovery for an async closure `FnMut(Call) -> impl Future<Output =
/// Result<T, E>>`: `op.recover(&door).await`. Works on any executor (the
/// step's thread needs none).
pub trait Recoverable<Fut, T, E>: FnMut(Call) -> Fut + Sized
where
    Fut: Future<Output = Result<T, E>>,
{
    /// This operation, to be called under `door`'s runtime.
    fn recover(self, door: &Door) -> Recover<Self, Fut, T, E>;
}

impl<F, Fut, T, E> Recoverable<Fut, T, E> for F
where
    F: FnMut(Call) -> Fut,
    Fut: Future<Output = Result<T, E>>,
    T: 'static,
    E: std::fmt::Display + 'static,
{
    fn recover(self, door: &Door) -> Recover<Self, Fut, T, E> {
        Recover {
            door: door.clone(),
            op: self,
            reading: Reading::default(),
            _fut: PhantomData,
        }
    }
}

/// An async call under a door; `.await` it.
///
/// # Default
///
/// | option | default |
/// | --- | --- |
/// | [`args`](Self::args) | `null` (part of the idempotency key and of a dead-letter record) |
/// | [`observe`](Self::observe) | `{"source":"exception","type":<the error's type name>,"message":<its Display>}` |
/// | [`check`](Self::check) | none: every `Ok` is a success |
pub struct Recover<F, Fut, T, E> {
    door: Door,
    op: F,
    reading: Reading<T, E>,
    _fut: PhantomData<fn() -> Fut>,
}

impl<F, Fut, T, E> Recover<F, Fut, T, E> {
    /// The call's arguments as JSON.
    pub fn args(mut self, args: Value) -> Self {
        self.reading.args = args;
        self
    }
    /// How an error becomes an observation (`docs/observation.md`).
    pub fn observe(mut self, f: impl Fn(&E) -> String + Send + Sync + 'static) -> Self {
        self.reading.observe = Arc::new(f);
        self
    }
    /// A response to hand the component for judgement (`Some(observation)`);
    /// `None` is a success.
    pub fn check(mut self, f: impl Fn(&T) -> Option<String> + Send + Sync + 'static) -> Self {
        self.reading.check = Arc::new(f);
        self
    }
}

impl<F, Fut, T, E> IntoFuture for Recover<F, Fut, T, E>
where
    F: FnMut(Call) -> Fut,
    Fut: Future<Output = Result<T, E>>,
{
    type Output = Result<T, DoorError<E>>;
    type IntoFuture = RecoverFuture<F, Fut, T, E>;

    fn into_future(self) -> Self::IntoFuture {
        RecoverFuture {
            recover: self,
            rx: None,
            current: None,
            last: None,
        }
    }
}

/// What the step's thread sends the caller's task.
enum Msg {
    /// Make this attempt and answer its outcome.
    Call(Call, mpsc::Sender<Outcome>),
    /// The step ended.
    Done(Result<Finished, RuntimeError>),
}

/// The future of [`Recover`]. Dropping it cancels the run: the attempt in
/// progress is answered as abandoned and nothing is retried.
pub struct RecoverFuture<F, Fut, T, E> {
    recover: Recover<F, Fut, T, E>,
    rx: Option<UnboundedReceiver<Msg>>,
    current: Option<(Pin<Box<Fut>>, mpsc::Sender<Outcome>)>,
    last: Option<Result<T, E>>,
}

// Nothing is pinned in place: the operation's future is boxed.
impl<F, Fut, T, E> Unpin for RecoverFuture<F, Fut, T, E> {}

impl<F, Fut, T, E> RecoverFuture<F, Fut, T, E> {
    /// Starts the step's thread.
    fn start(&mut self) -> Result<UnboundedReceiver<Msg>, DoorError<E>> {
        let (tx, rx) = unbounded();
        let door = self.recover.door.clone();
        let args = self.recover.reading.args.clone();
        std::thread::Builder::new()
            .name("agent-recovery-door".into())
            .spawn(move || {
                let finished = door.run_step(&args, |call, cancel| {
                    let (reply, answer) = mpsc::channel();
                    if tx.unbounded_send(Msg::Call(call.clone(), reply)).is_err() {
                        return abandoned(cancel);
                    }
                    answer.recv().unwrap_or_else(|_| abandoned(cancel))
                });
                let _ = tx.unbounded_send(Msg::Done(finished));
            })
            .map_err(|e| DoorError::Driver(format!("cannot start the step's thread: {e}")))?;
        Ok(rx)
    }
}

impl<F, Fut, T, E> Future for RecoverFuture<F, Fut, T, E>
where
    F: FnMut(Call) -> Fut,
    Fut: Future<Output = Result<T, E>>,
{
    type Output = Result<T, DoorError<E>>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        if this.rx.is_none() {
            match this.start() {
                Ok(rx) => this.rx = Some(rx),
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
        loop {
            if let Some((attempt, reply)) = &mut this.current {
                let result = ready!(attempt.as_mut().poll(cx));
                let r = &this.recover.reading;
                let _ = reply.send(outcome_of(&result, &*r.check, &*r.observe));
                this.last = Some(result);
                this.current = None;
            }
            let Some(rx) = this.rx.as_mut() else {
                return Poll::Ready(Err(DoorError::Driver(
                    "the step's thread never started".into(),
                )));
            };
            match ready!(Pin::new(rx).poll_next(cx)) {
                Some(Msg::Call(call, reply)) => {
                    this.current = Some((Box::pin((this.recover.op)(call)), reply));
                }
                Some(Msg::Done(Ok(finished))) => {
                    return Poll::Ready(this.recover.door.finish(finished, this.last.take()));
                }
                Some(Msg::Done(Err(e))) => return Poll::Ready(Err(DoorError::Runtime(e))),
                None => {
                    return Poll::Ready(Err(DoorError::Driver(
                        "the step's thread stopped without an answer (a panic in the runtime); \
                         see its message on stderr"
                            .into(),
                    )));
                }
            }
        }
    }
}
