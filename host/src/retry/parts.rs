//! The Runtime a worker runs a `Retry` on, and its parts.
//!
//! Building a [`Runtime`] links and instantiates the loop component, which
//! costs more than a short run; so each worker thread keeps the runtimes it
//! built (one per configuration) and reuses them. A runtime's decider, clock,
//! store and event callback are fixed when it is built, so here they are
//! relays to the run the worker is carrying out now ([`Current`], a
//! thread-local): the caller's policy and sleeper (through the [`Link`]), a
//! fresh in-memory store per run, the caller's `on_event`.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use super::relay::{Answer, Ask, Link, gone};
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

/// At most this many runtimes per worker (then the cache starts over).
const CACHED: usize = 8;

/// The run a worker is carrying out.
pub(super) struct Current {
    link: Arc<Link>,
    /// A virtual clock's start ([`Retry::now_ms`](super::Retry::now_ms)), or none: the system clock.
    base: Option<u64>,
    /// How far the clock is ahead of its source: the delays the sleeper did not spend.
    ahead_ms: AtomicU64,
    on_event: Option<OnEvent>,
    store: MemoryStore,
}

impl Current {
    pub(super) fn new(link: Arc<Link>, base: Option<u64>, on_event: Option<OnEvent>) -> Self {
        Current {
            link,
            base,
            ahead_ms: AtomicU64::new(0),
            on_event,
            store: MemoryStore::new(),
        }
    }
}

thread_local! {
    static CURRENT: RefCell<Option<Arc<Current>>> = const { RefCell::new(None) };
    static RUNTIMES: RefCell<HashMap<Settings, Rc<Runtime>>> = RefCell::new(HashMap::new());
}

fn current() -> Option<Arc<Current>> {
    CURRENT.with(|c| c.borrow().clone())
}

/// Clears [`CURRENT`] however the run ends.
struct Reset;

impl Drop for Reset {
    fn drop(&mut self) {
        CURRENT.with(|c| c.borrow_mut().take());
    }
}

/// Runs `f` on this worker's runtime for `settings`, with `run` as the current run.
pub(super) fn with_runtime<R>(
    settings: Settings,
    run: Current,
    f: impl FnOnce(&Runtime) -> std::result::Result<R, RuntimeError>,
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
    CURRENT.with(|c| *c.borrow_mut() = Some(Arc::new(run)));
    let _reset = Reset;
    f(&runtime)
}

fn build(settings: Settings) -> std::result::Result<Runtime, RuntimeError> {
    let mut builder = Runtime::builder()
        .decider(Arc::new(RelayDecider))
        .clock(Arc::new(SleeperClock))
        .store(Arc::new(RelayStore))
        .on_event(|event| {
            if let Some(f) = current().and_then(|c| c.on_event.clone()) {
                f(event);
            }
        })
        .attempt_budget(settings.attempt_budget);
    if let Some(seed) = settings.seed {
        builder = builder.seed(seed);
    }
    if let Some((threshold, open_ms)) = settings.breaker {
        builder = builder.breaker(threshold, open_ms);
    }
    if let Some(ms) = settings.attempt_timeout_ms {
        builder = builder.attempt_timeout_ms(ms);
    }
    if let Some(ms) = settings.deadline_ms {
        builder = builder.deadline_ms(ms);
    }
    builder.build()
}

/// The decider: each `decide` goes to the caller's policy.
struct RelayDecider;

impl Decide for RelayDecider {
    fn decide_json(&self, observation: &str, context: &str) -> Result<String> {
        let asked = current().and_then(|c| {
            c.link
                .ask(Ask::Decide(observation.to_owned(), context.to_owned()))
        });
        match asked {
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

/// The clock: the caller's sleeper does the sleeping, and `now_ms` moves on
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
struct SleeperClock;

impl Clock for SleeperClock {
    fn now_ms(&self) -> u64 {
        let run = current();
        let ahead = run
            .as_ref()
            .map_or(0, |c| c.ahead_ms.load(Ordering::SeqCst));
        run.and_then(|c| c.base)
            .unwrap_or_else(|| SystemClock.now_ms())
            .saturating_add(ahead)
    }

    fn sleep_ms(&self, ms: u64) {
        let Some(run) = current() else {
            return;
        };
        let took = match run.link.ask(Ask::Sleep(ms)) {
            Some(Answer::Slept(took)) if run.base.is_none() => took,
            _ => 0,
        };
        run.ahead_ms
            .fetch_add(ms.saturating_sub(took), Ordering::SeqCst);
    }
}

/// The store: the current run's own in-memory store, so nothing (breakers,
/// attempt counts, the idempotency cache) is shared between two calls.
struct RelayStore;

fn no_run() -> StoreError {
    StoreError::new(
        crate::store::StoreErrorKind::Unavailable,
        "the retry's store was used outside a run; this is a bug, please report it",
    )
}

impl Store for RelayStore {
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
