//! The Runtime a `Retry` runs on, and the parts fixed when it is built.
//!
//! Building a [`Runtime`] links and instantiates the loop component, which
//! costs more than a short run; so each thread keeps the runtimes it built
//! (one per configuration) and reuses them. A runtime's clock, store and event
//! callback are fixed when it is built, so here they read the run this thread
//! is carrying out now ([`Current`], a thread-local): a clock the caller's
//! sleeper moves on, a fresh in-memory store per run, the caller's `on_event`.
//! The operation, the sleeper and the policy are not parts of the runtime:
//! they are lent to the run's one step and called on this thread.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::Arc;

use super::{Decide, OnEvent};
use crate::runtime::{Clock, Runtime, RuntimeError, SystemClock};
use crate::store::{Cas, MemoryStore, Store, StoreError, Versioned};
use crate::{Error, ErrorKind, Result};

/// What distinguishes one cached runtime from another.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) struct Settings {
    pub(super) seed: Option<u64>,
    pub(super) attempt_budget: u32,
    pub(super) breaker: Option<(u32, u64)>,
    pub(super) attempt_timeout_ms: Option<u64>,
    pub(super) deadline_ms: Option<u64>,
}

/// At most this many runtimes per thread (then the cache starts over).
const CACHED: usize = 8;

/// The run this thread is carrying out.
pub(super) struct Current {
    /// A virtual clock's start ([`Retry::now_ms`](super::Retry::now_ms)), or none: the system clock.
    base: Option<u64>,
    /// How far the clock is ahead of its source: the delays the sleeper did not spend.
    ahead_ms: Cell<u64>,
    on_event: Option<OnEvent>,
    store: MemoryStore,
}

impl Current {
    pub(super) fn new(base: Option<u64>, on_event: Option<OnEvent>) -> Self {
        Current {
            base,
            ahead_ms: Cell::new(0),
            on_event,
            store: MemoryStore::new(),
        }
    }

    /// The sleeper was asked for `ms` and took `took` ms of system time.
    ///
    /// On the system clock (the default), a sleeper that really sleeps moves
    /// the system clock itself; one that returns at once (a test's, a
    /// scheduler's) does not, so the part of each delay the sleeper did not
    /// spend is added on top: `now = system now + Σ max(0, delay − time the
    /// sleeper took)`. Either way the loop sees time pass by the delays it
    /// chose, and a slow operation still counts against `attempt_timeout_ms`.
    /// From a fixed base ([`Retry::now_ms`](super::Retry::now_ms)) the clock
    /// is virtual: `now = base + Σ delay`, nothing else moves it.
    pub(super) fn slept(&self, ms: u64, took: u64) {
        let took = if self.base.is_none() { took } else { 0 };
        self.ahead_ms
            .set(self.ahead_ms.get().saturating_add(ms.saturating_sub(took)));
    }
}

thread_local! {
    static CURRENT: RefCell<Option<Rc<Current>>> = const { RefCell::new(None) };
    static RUNTIMES: RefCell<HashMap<Settings, Rc<Runtime>>> = RefCell::new(HashMap::new());
}

fn current() -> Option<Rc<Current>> {
    CURRENT.with(|c| c.borrow().clone())
}

/// Puts back the run that was current before this one (an outer `Retry`'s,
/// whose operation runs this one) however this one ends.
struct Restore(Option<Rc<Current>>);

impl Drop for Restore {
    fn drop(&mut self) {
        CURRENT.with(|c| *c.borrow_mut() = self.0.take());
    }
}

/// Runs `f` on this thread's runtime for `settings`, with `run` as the current run.
pub(super) fn with_runtime<R>(
    settings: Settings,
    run: Current,
    f: impl FnOnce(&Runtime, &Current) -> std::result::Result<R, RuntimeError>,
) -> std::result::Result<R, RuntimeError> {
    let runtime = match RUNTIMES.with(|r| r.borrow().get(&settings).cloned()) {
        Some(runtime) => runtime,
        None => {
            let runtime = Rc::new(build(settings)?);
            RUNTIMES.with(|r| {
                let mut r = r.borrow_mut();
                if r.len() >= CACHED {
                    r.clear();
                }
                r.insert(settings, runtime.clone());
            });
            runtime
        }
    };
    let run = Rc::new(run);
    let _restore = Restore(CURRENT.with(|c| c.borrow_mut().replace(run.clone())));
    f(&runtime, &run)
}

fn build(settings: Settings) -> std::result::Result<Runtime, RuntimeError> {
    let mut builder = Runtime::builder()
        .decider(Arc::new(NeverAsked))
        .clock(Arc::new(RunClock))
        .store(Arc::new(RunStore))
        .on_event(|event| {
            if let Some(f) = current().and_then(|c| c.on_event.clone()) {
                f(event);
            }
        })
        .attempt_budget(settings.attempt_budget);
    if let Some(seed) = settings.seed {
        builder = builder.seed(seed);
    }
    // No breaker unless asked: the largest threshold the loop accepts (100,
    // the most attempts a policy may allow) never opens within one call. The
    // same default as Node's retry() and Python's retry().
    let (threshold, open_ms) = settings.breaker.unwrap_or((100, 30_000));
    builder = builder.breaker(threshold, open_ms);
    if let Some(ms) = settings.attempt_timeout_ms {
        builder = builder.attempt_timeout_ms(ms);
    }
    if let Some(ms) = settings.deadline_ms {
        builder = builder.deadline_ms(ms);
    }
    builder.build()
}

/// The runtime's decider, never asked: each step's decisions go to the
/// caller's policy, lent to the step (and nothing is loaded for it).
struct NeverAsked;

impl Decide for NeverAsked {
    fn decide_json(&self, _observation: &str, _context: &str) -> Result<String> {
        Err(not_lent())
    }
    fn key(&self, _run_id: &str, _step_id: &str, _tool: &str, _args_json: &str) -> Result<String> {
        Err(not_lent())
    }
}

fn not_lent() -> Error {
    Error::new(
        ErrorKind::InvalidOutput,
        "the retry's runtime was asked to decide without the caller's policy; this is a bug, please report it",
    )
}

/// The clock: the current run's, moved on by its sleeper ([`Current::slept`]).
/// It never sleeps itself: the step's sleeper does.
struct RunClock;

impl Clock for RunClock {
    fn now_ms(&self) -> u64 {
        let run = current();
        let ahead = run.as_ref().map_or(0, |c| c.ahead_ms.get());
        run.and_then(|c| c.base)
            .unwrap_or_else(|| SystemClock.now_ms())
            .saturating_add(ahead)
    }

    fn sleep_ms(&self, _ms: u64) {}
}

/// The store: the current run's own in-memory store, so nothing (breakers,
/// attempt counts, the idempotency cache) is shared between two calls.
struct RunStore;

fn no_run() -> StoreError {
    StoreError::new(
        crate::store::StoreErrorKind::Unavailable,
        "the retry's store was used outside a run; this is a bug, please report it",
    )
}

impl Store for RunStore {
    fn get(&self, key: &str, now_ms: u64) -> std::result::Result<Option<Versioned>, StoreError> {
        current().ok_or_else(no_run)?.store.get(key, now_ms)
    }
    fn compare_and_set(
        &self,
        key: &str,
        expected: Option<u64>,
        value: &str,
        ttl_ms: Option<u64>,
        now_ms: u64,
    ) -> std::result::Result<Cas, StoreError> {
        current()
            .ok_or_else(no_run)?
            .store
            .compare_and_set(key, expected, value, ttl_ms, now_ms)
    }
    fn append(
        &self,
        stream: &str,
        record: &str,
        now_ms: u64,
    ) -> std::result::Result<u64, StoreError> {
        current()
            .ok_or_else(no_run)?
            .store
            .append(stream, record, now_ms)
    }
    fn read(
        &self,
        stream: &str,
        after: u64,
        limit: usize,
    ) -> std::result::Result<Vec<(u64, String)>, StoreError> {
        current()
            .ok_or_else(no_run)?
            .store
            .read(stream, after, limit)
    }
    fn delete(&self, key: &str) -> std::result::Result<bool, StoreError> {
        current().ok_or_else(no_run)?.store.delete(key)
    }
    fn keys(&self, prefix: &str, now_ms: u64) -> std::result::Result<Vec<String>, StoreError> {
        current().ok_or_else(no_run)?.store.keys(prefix, now_ms)
    }
}

/// Moves the current run's clock on by `ms`, as a slow call moves the
/// system clock: for tests of attempt timeouts on a virtual clock.
#[cfg(test)]
pub(super) fn spend(ms: u64) {
    if let Some(run) = current() {
        run.ahead_ms.set(run.ahead_ms.get().saturating_add(ms));
    }
}
