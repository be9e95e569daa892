//! The bridge between [`Retry::run`](super::Retry::run) and the [`Runtime`](crate::runtime::Runtime).
//!
//! The Runtime wants `'static + Send + Sync` parts (its decider and clock live
//! in `Arc`s); `Retry::run` takes a borrowed policy, an operation and a
//! sleeper with no such bounds. So the run goes on a worker thread, and
//! everything the caller gave stays on the caller's thread: the worker *asks*
//! (call the operation, decide, sleep) through a channel and waits for the
//! answer. Only plain data (`String`s, [`Outcome`]s, the report) crosses.
//!
//! Workers are kept per calling thread and reused: a new thread costs more
//! than the whole run (wasmtime sets up its per-thread state on a thread's
//! first call). A nested `Retry::run` (from inside an operation) takes
//! another worker; a calling thread's idle workers end when it ends.

use std::cell::RefCell;
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Mutex, PoisonError};

use serde_json::{Map, Value};

use super::Attempt;
use crate::runtime::{Outcome, RuntimeError, StepReport};
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

/// A run for a worker to carry out.
pub(super) type Job = Box<dyn FnOnce() + Send>;

thread_local! {
    /// This thread's idle workers.
    static IDLE: RefCell<Vec<Sender<Job>>> = const { RefCell::new(Vec::new()) };
}

/// A worker thread, taken from the calling thread's idle ones for one run.
pub(super) struct Worker(Option<Sender<Job>>);

impl Worker {
    /// Hands `job` to an idle worker of this thread, or to a new one.
    pub(super) fn start(job: Job) -> Result<Worker> {
        let mut job = job;
        while let Some(worker) = IDLE.with(|idle| idle.borrow_mut().pop()) {
            match worker.send(job) {
                Ok(()) => return Ok(Worker(Some(worker))),
                // That worker is gone (a job of it panicked); try the next.
                Err(mpsc::SendError(back)) => job = back,
            }
        }
        let (worker, jobs) = mpsc::channel::<Job>();
        std::thread::Builder::new()
            .name("agent-recovery-retry".into())
            .spawn(move || {
                while let Ok(job) = jobs.recv() {
                    job();
                }
            })
            .map_err(|e| {
                Error::new(
                    ErrorKind::Io,
                    format!("cannot start the retry's worker thread: {e}; the process may be out of threads"),
                )
            })?;
        worker.send(job).map_err(|_| gone_worker())?;
        Ok(Worker(Some(worker)))
    }

    /// The run ended normally: the worker is idle again, for this thread's next run.
    pub(super) fn finished(mut self) {
        if let Some(worker) = self.0.take() {
            IDLE.with(|idle| idle.borrow_mut().push(worker));
        }
    }
}

fn gone_worker() -> Error {
    Error::new(
        ErrorKind::InvalidOutput,
        "the retry's new worker thread ended at once; this is a bug, please report it",
    )
}

pub(super) fn gone() -> Error {
    Error::new(
        ErrorKind::InvalidOutput,
        "the thread that called Retry::run stopped answering (its operation or sleeper panicked); the run was abandoned",
    )
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
