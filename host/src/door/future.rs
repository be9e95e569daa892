//! The async door: `op.recover(&door).await`.
//!
//! The step is driven by the runtime's async driver inside the caller's
//! task: no thread of its own. Its retry sleeps are tokio's timer (instant
//! on a virtual clock), the calls of a store that may block (SQLite, Redis)
//! run on tokio's blocking pool, the component's calls inline. The step
//! asks for each attempt over a channel; [`RecoverFuture`] polls the
//! operation's future it makes and hands the outcome back.

use std::future::{Future, IntoFuture};
use std::marker::PhantomData;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use futures_channel::mpsc::{UnboundedReceiver, unbounded};
use futures_channel::oneshot;
use futures_core::Stream;
use serde_json::Value;

use super::outcome::{Finished, Reading, abandoned, outcome_of};
use super::{Door, DoorError};
use crate::runtime::{Call, Outcome, RuntimeError};
use std::sync::Arc;

/// Recovery for an async closure `FnMut(Call) -> impl Future<Output =
/// Result<T, E>>`: `op.recover(&door).await`. Needs a tokio runtime (any
/// flavor, its timer enabled) when the door's clock is real or its store may block; with a
/// virtual clock and the memory store it runs on any executor.
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
/// | [`observe`](Self::observe) | an [`io::Error`](std::io::Error) of a network kind, or a boxed error whose source chain holds one: `{"source":"network","code":"ECONNREFUSED",...}` (the kind's libc name); any other error: `{"source":"exception","type":<the error's type name>,"message":<its Display>}` |
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
            driver: None,
            calls: None,
            current: None,
            last: None,
        }
    }
}

/// The step, driven by the runtime's async driver: `'static` and `Send`
/// whatever the operation is (the operation's future stays in the caller's
/// [`RecoverFuture`]).
type Driver = Pin<Box<dyn Future<Output = Result<Finished, RuntimeError>> + Send>>;

/// An attempt the step asks for, and where its outcome goes.
type Ask = (Call, oneshot::Sender<Outcome>);

/// The future of [`Recover`]. Dropping it cancels the run: the attempt in
/// progress is answered as abandoned and nothing is retried (the run's end
/// is driven at once, or on the tokio runtime when it has to wait).
pub struct RecoverFuture<F, Fut, T, E> {
    recover: Recover<F, Fut, T, E>,
    driver: Option<Driver>,
    calls: Option<UnboundedReceiver<Ask>>,
    current: Option<(Pin<Box<Fut>>, oneshot::Sender<Outcome>)>,
    last: Option<Result<T, E>>,
}

// Nothing is pinned in place: the operation's future and the step are boxed.
impl<F, Fut, T, E> Unpin for RecoverFuture<F, Fut, T, E> {}

impl<F, Fut, T, E> RecoverFuture<F, Fut, T, E> {
    /// Starts the step; `Err` when it needs a tokio runtime and none is current.
    fn start(&mut self) -> Result<(), DoorError<E>> {
        let door = self.recover.door.clone();
        if door.runtime.needs_tokio() && tokio::runtime::Handle::try_current().is_err() {
            return Err(DoorError::Driver(
                "the async door needs a tokio runtime (its retry sleeps are tokio's, a store \
                 that may block is called on tokio's blocking pool); await it inside one, use a \
                 VirtualClock and the memory store, or the blocking twin (`.call()`)"
                    .into(),
            ));
        }
        let (tx, rx) = unbounded::<Ask>();
        let args = self.recover.reading.args.clone();
        let attempt = move |call: Call, cancel: Arc<std::sync::atomic::AtomicBool>| {
            let (reply, answer) = oneshot::channel();
            let asked = tx.unbounded_send((call, reply)).is_ok();
            async move {
                match asked {
                    true => answer.await.unwrap_or_else(|_| abandoned(&cancel)),
                    false => abandoned(&cancel),
                }
            }
        };
        self.driver = Some(Box::pin(door.run_step_async(args, attempt)));
        self.calls = Some(rx);
        Ok(())
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
        if this.driver.is_none() {
            if this.calls.is_some() {
                return Poll::Ready(Err(DoorError::Driver(
                    "the call was polled after it completed".into(),
                )));
            }
            if let Err(e) = this.start() {
                return Poll::Ready(Err(e));
            }
        }
        loop {
            if let Some((attempt, _)) = &mut this.current {
                let result = ready!(attempt.as_mut().poll(cx));
                let r = &this.recover.reading;
                let outcome = outcome_of(&result, &*r.check, &*r.observe);
                if let Some((_, reply)) = this.current.take() {
                    let _ = reply.send(outcome);
                }
                this.last = Some(result);
            }
            if let Some(driver) = &mut this.driver
                && let Poll::Ready(finished) = driver.as_mut().poll(cx)
            {
                this.driver = None;
                return Poll::Ready(match finished {
                    Ok(finished) => this.recover.door.finish(finished, this.last.take()),
                    Err(e) => Err(DoorError::Runtime(e)),
                });
            }
            // The step waits: for an attempt it asked for, or on its own
            // (a sleep, the store); it wakes this task either way.
            match this.calls.as_mut().map(|rx| Pin::new(rx).poll_next(cx)) {
                Some(Poll::Ready(Some((call, reply)))) => {
                    this.current = Some((Box::pin((this.recover.op)(call)), reply));
                }
                _ => return Poll::Pending,
            }
        }
    }
}

impl<F, Fut, T, E> Drop for RecoverFuture<F, Fut, T, E> {
    /// A step still running is cancelled: the attempt in progress and every
    /// later one are answered as abandoned, and the run ends (compensations,
    /// the journal). That is driven here when it need not wait, else on the
    /// current tokio runtime.
    fn drop(&mut self) {
        let Some(mut driver) = self.driver.take() else {
            return;
        };
        self.current = None;
        self.calls = None;
        let mut cx = Context::from_waker(std::task::Waker::noop());
        if driver.as_mut().poll(&mut cx).is_pending()
            && let Ok(runtime) = tokio::runtime::Handle::try_current()
        {
            runtime.spawn(driver);
        }
    }
}
