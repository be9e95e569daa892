//! The bridge between [`Retry::run`](super::Retry::run) and the [`Runtime`](crate::runtime::Runtime).
//!
//! The Runtime wants `'static + Send + Sync` parts (its decider and clock live
//! in `Arc`s); `Retry::run` takes a borrowed policy, an operation and a
//! sleeper with no such bounds. So the run goes on a scoped worker thread, and
//! everything the caller gave stays on the caller's thread: the worker *asks*
//! (call the operation, decide, sleep) through a channel and waits for the
//! answer. Only plain data (`String`s, [`Outcome`]s, the report) crosses.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, Sender};
use std::sync::{Mutex, PoisonError};

use serde_json::{Map, Value};

use super::{Attempt, Decide};
use crate::runtime::{Clock, Outcome, RuntimeError, StepReport, SystemClock};
use crate::{Error, ErrorKind, Result};

/// What the worker asks the caller's thread.
pub(super) enum Ask {
    /// Call the operation.
    Call(Attempt),
    /// Ask the policy: `decide-json(observation, context)`.
    Decide(String, String),
    /// Call the sleeper with this many ms.
    Sleep(u64),
    /// The step is over (the worker asks nothing more).
    Done(std::result::Result<(StepReport, Vec<String>), RuntimeError>),
}

/// What the caller's thread answers.
pub(super) enum Answer {
    /// The operation's outcome.
    Outcome(Outcome),
    /// The policy's decision (JSON text) or its error.
    Decision(Result<String>),
    /// The sleeper returned after this many ms of system time.
    Slept(u64),
}

/// The worker's end of the two channels.
pub(super) struct Link {
    ask: Sender<Ask>,
    answer: Mutex<Receiver<Answer>>,
}

impl Link {
    pub(super) fn new(ask: Sender<Ask>, answer: Receiver<Answer>) -> Self {
        Link {
            ask,
            answer: Mutex::new(answer),
        }
    }

    /// Ask and wait; `None` when the caller's thread stopped answering (its
    /// operation or sleeper panicked).
    pub(super) fn ask(&self, ask: Ask) -> Option<Answer> {
        self.ask.send(ask).ok()?;
        self.answer
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .recv()
            .ok()
    }

    /// The last message: the worker is done.
    pub(super) fn done(
        &self,
        result: std::result::Result<(StepReport, Vec<String>), RuntimeError>,
    ) {
        // The caller's thread may already be unwinding; nobody is left to tell.
        let _ = self.ask.send(Ask::Done(result));
    }
}

fn gone() -> Error {
    Error::new(
        ErrorKind::InvalidOutput,
        "the thread that called Retry::run stopped answering (its operation or sleeper panicked); the run was abandoned",
    )
}

/// The Runtime's decider: relays each `decide` to the caller's policy.
pub(super) struct RelayDecider(pub(super) std::sync::Arc<Link>);

impl Decide for RelayDecider {
    fn decide_json(&self, observation: &str, context: &str) -> Result<String> {
        match self
            .0
            .ask(Ask::Decide(observation.to_owned(), context.to_owned()))
        {
            Some(Answer::Decision(d)) => d,
            _ => Err(gone()),
        }
    }

    fn key(&self, _run_id: &str, _step_id: &str, _tool: &str, _args_json: &str) -> Result<String> {
        // The loop derives the key itself; nothing asks the decider for one.
        Err(Error::new(
            ErrorKind::InvalidArgument,
            "the retry relay derives no keys; ask the policy itself (Policy::key)",
        ))
    }
}

/// The Runtime's clock: the sleeper does the sleeping, and `now_ms` moves on
/// by what was slept.
///
/// On the system clock (the default), a sleeper that really sleeps moves the
/// system clock itself; one that returns at once (a test's, a scheduler's)
/// does not, so the part of each delay the sleeper did not spend is added on
/// top: `now = system now + Σ max(0, delay − time the sleeper took)`. Either
/// way the loop sees time pass by the delays it chose, and a slow operation
/// still counts against `attempt_timeout_ms`. From a fixed base
/// ([`Retry::now_ms`](super::Retry::now_ms)) the clock is virtual: `now =
/// base + Σ delay`, nothing else moves it.
pub(super) struct SleeperClock {
    link: std::sync::Arc<Link>,
    base: Option<u64>,
    ahead_ms: AtomicU64,
}

impl SleeperClock {
    pub(super) fn new(link: std::sync::Arc<Link>, base: Option<u64>) -> Self {
        SleeperClock {
            link,
            base,
            ahead_ms: AtomicU64::new(0),
        }
    }
}

impl Clock for SleeperClock {
    fn now_ms(&self) -> u64 {
        let ahead = self.ahead_ms.load(Ordering::SeqCst);
        self.base
            .unwrap_or_else(|| SystemClock.now_ms())
            .saturating_add(ahead)
    }

    fn sleep_ms(&self, ms: u64) {
        let took = match self.link.ask(Ask::Sleep(ms)) {
            Some(Answer::Slept(took)) if self.base.is_none() => took,
            _ => 0,
        };
        self.ahead_ms
            .fetch_add(ms.saturating_sub(took), Ordering::SeqCst);
    }
}

/// The decision context: the loop's, with the caller's
/// [`Retry::context`](super::Retry::context) members on top.
///
/// `call`, `attempt`, `seed` and `now_ms` are the loop's (it knows them);
/// `elapsed_ms` is the caller's plus the loop's (retry time spent before this
/// step, then in it); every other member is the caller's when given
/// (`idempotent`, `compensations_pending`, `checkpoint_available`,
/// `fallback_available`, `config`, ...).
pub(super) fn merge_context(extra: &Map<String, Value>, context: &str) -> String {
    if extra.is_empty() {
        return context.to_owned();
    }
    let Ok(Value::Object(mut ctx)) = serde_json::from_str::<Value>(context) else {
        return context.to_owned();
    };
    for (name, value) in extra {
        match name.as_str() {
            "call" | "attempt" | "seed" | "now_ms" => {}
            "elapsed_ms" => {
                let spent = ctx.get("elapsed_ms").and_then(Value::as_u64).unwrap_or(0);
                let carried = match value.as_u64() {
                    Some(before) => Value::from(before.saturating_add(spent)),
                    // Not a count of ms: the policy names the bad value.
                    None => value.clone(),
                };
                ctx.insert(name.clone(), carried);
            }
            _ => {
                ctx.insert(name.clone(), value.clone());
            }
        }
    }
    Value::Object(ctx).to_string()
}
