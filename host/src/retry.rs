//! A retry helper for one step: a one-step run of the recovery
//! [`Runtime`](crate::runtime::Runtime), so it cannot drift from it.
//!
//! It runs an operation; the recovery loop (the reference component's
//! `runtime@0.2.0`, `docs/runtime.md`) decides everything else: when an attempt
//! failed (the component's `check-outcome` when you hand back a raw response,
//! see [`Retry::run_reply`]), what the policy decides on it, how long to sleep
//! (through the sleeper you pass, so tests never sleep), the run's retry
//! budget, the attempt count, and the **same idempotency key** on every
//! attempt. It stops on any action other than `retry` with a
//! [`RecoveryError`] that carries the decision.
//!
//! It is a plain loop on the calling thread, in the spirit of `backon`: no
//! thread, no channel. The operation, the sleeper and the policy are
//! borrowed for the one call and called between the loop's steps, so none
//! of them needs to be `Send` or `'static`: a closure may hold an `Rc` or
//! push to a local `Vec` (second example).
//!
//! ```
//! use agent_recovery::{Policy, retry::{Retry, Attempt}};
//!
//! let policy = Policy::reference()?;
//! let mut slept = Vec::new();
//! let result = Retry::new("run-1", "step-3", "search", r#"{"q":"acme"}"#)
//!     .seed(7)
//!     .run(&policy, |a: &Attempt| {
//!         // The same key on every attempt makes the retry safe.
//!         assert_eq!(a.idempotency_key.len(), 64);
//!         if a.number < 3 {
//!             Err(r#"{"source":"http","status":503}"#.to_owned())
//!         } else {
//!             Ok("found 1 customer")
//!         }
//!     }, |d| slept.push(d))
//!     .unwrap();
//! assert_eq!(result, "found 1 customer");
//! assert_eq!(slept.len(), 2);
//! # Ok::<(), agent_recovery::Error>(())
//! ```
//!
//! A closure that is not `Send`, borrowing the caller's locals:
//!
//! ```
//! use std::cell::RefCell;
//! use std::rc::Rc;
//! use agent_recovery::{Policy, retry::{Retry, Attempt}};
//!
//! let policy = Policy::reference()?;
//! let client = Rc::new(RefCell::new(vec![503, 503, 200])); // a stand-in for a !Send client
//! let mut statuses = Vec::new();
//! let body = Retry::new("run-1", "step-4", "fetch", "{}")
//!     .seed(7)
//!     .run(&policy, |_: &Attempt| {
//!         let status = client.borrow_mut().remove(0);
//!         statuses.push(status);
//!         match status {
//!             200 => Ok("<html>"),
//!             s => Err(format!(r#"{{"source":"http","status":{s}}}"#)),
//!         }
//!     }, |_| {})
//!     .unwrap();
//! assert_eq!((body, statuses), ("<html>", vec![503, 503, 200]));
//! # Ok::<(), agent_recovery::Error>(())
//! ```
//!
//! # What the loop settles (where the three helpers used to differ)
//!
//! - **Elapsed time is carried.** A `context` member `elapsed_ms` (retry time
//!   the run spent before this step) is added to what this step spends, so one
//!   budget spans the run.
//! - **A `retry` without a delay calls again at once** (no sleep), rather than
//!   stopping.
//! - **What counts as a failure** is the component's call: an `Err`
//!   observation is a failure; with [`Retry::run_reply`], a
//!   [`Reply::Response`] is judged by `check-outcome` (a 200 whose body is a
//!   refusal fails, a 304 succeeds). An `Err` that is not JSON is an
//!   `exception` observation (type `agent_recovery.InvalidObservation`) the
//!   policy decides on, as in the runtime.
//! - **The step as it is**: decisions get `checkpoint_available: false` and
//!   `fallback_available: false` (a state or policy failure escalates); give
//!   either as `true` in [`Retry::context`] to get `restore` / `fallback`
//!   back and act on it yourself.
//! - **No breaker unless asked** (as in Node and Python): one retried call
//!   never short-circuits itself; [`Retry::breaker`] turns it on (target: the
//!   tool name). Each call has its own store, so nothing is shared between
//!   two calls: use a [`Runtime`](crate::runtime::Runtime) for a breaker
//!   shared across calls.
//! - **Timeouts**: [`Retry::attempt_timeout_ms`] turns a slower attempt into a
//!   `timeout` observation the policy decides on; [`Retry::deadline_ms`] ends
//!   the step when no retry can fit.
//! - **Events**: [`Retry::on_event`] gets the runtime's events (the same JSON
//!   in every language), not an ad-hoc callback.
//! - `idempotent` is passed to decisions only when you give it (a `Retry`
//!   always has a key, so it is never assumed `false`).

mod parts;
mod policy;
mod stopped;

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::runtime::{Call, Lent, Outcome, RuntimeError, Step};
use crate::{Error, ErrorKind, Policy, PolicyHandle, Result};
use parts::{Current, Settings};

/// Anything that can decide: a [`Policy`], or a handle that swaps policies.
pub trait Decide {
    /// `decide-json` of the component: the decision as JSON text.
    fn decide_json(&self, observation: &str, context: &str) -> Result<String>;
    /// The idempotency key of one logical action.
    fn key(&self, run_id: &str, step_id: &str, tool: &str, args_json: &str) -> Result<String>;
}

impl Decide for Policy {
    fn decide_json(&self, observation: &str, context: &str) -> Result<String> {
        Policy::decide_json(self, observation, context)
    }
    fn key(&self, run_id: &str, step_id: &str, tool: &str, args_json: &str) -> Result<String> {
        Policy::key(self, run_id, step_id, tool, args_json)
    }
}

/// A handle decides with whichever policy is active when it is asked, so a
/// swap takes effect between two attempts of the same step.
impl Decide for PolicyHandle {
    fn decide_json(&self, observation: &str, context: &str) -> Result<String> {
        PolicyHandle::decide_json(self, observation, context).map(|answer| answer.json)
    }
    fn key(&self, run_id: &str, step_id: &str, tool: &str, args_json: &str) -> Result<String> {
        self.active().policy().key(run_id, step_id, tool, args_json)
    }
}

/// One attempt, as the operation sees it.
#[derive(Clone, Debug)]
pub struct Attempt {
    /// The attempt number, from 1.
    pub number: u32,
    /// The idempotency key: the same for every attempt of this step.
    pub idempotency_key: String,
}

/// What an operation run by [`Retry::run_reply`] hands back.
#[derive(Clone, Debug, PartialEq)]
pub enum Reply<T> {
    /// It succeeded with this value.
    Ok(T),
    /// It failed, and it knows: an observation (JSON text, docs/observation.md).
    Failed(String),
    /// A raw response (observation-shaped JSON text, e.g.
    /// `{"source":"http","status":200,"body":{..}}`) for the component to
    /// judge; when it is a success, the run returns the value.
    Response(T, String),
}

/// Why the helper stopped without a result.
#[derive(Debug)]
pub enum RecoveryError {
    /// The policy decided something other than `retry` (`fail`, `replan`,
    /// `fallback`, `escalate`, `dead_letter`, ...): act on `action`.
    Stopped {
        /// The decision's action.
        action: String,
        /// The decision as the component printed it. When the loop stopped
        /// without asking the policy (the run's deadline, the attempt
        /// budget), a decision it made: `action`, `attempt`, `reason_code`
        /// (the code of the loop's event) and `envelope`.
        decision_json: String,
        /// The decision, parsed (its `envelope` is the normalized error).
        decision: Value,
    },
    /// The policy itself failed (bad observation, trap, ...), or the
    /// helper's own input was refused (arguments that are not JSON).
    Policy(Error),
}

impl fmt::Display for RecoveryError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Stopped {
                action, decision, ..
            } => write!(
                f,
                "recovery stopped: {action} ({}): {}",
                decision["envelope"]["code"].as_str().unwrap_or("?"),
                decision["envelope"]["hint"].as_str().unwrap_or("")
            ),
            Self::Policy(e) => write!(f, "recovery policy failed: {e}"),
        }
    }
}

impl std::error::Error for RecoveryError {}

type OnEvent = Arc<dyn Fn(&str) + Send + Sync>;

/// The retry loop for one step: a one-step run of the
/// [`Runtime`](crate::runtime::Runtime) on a fresh in-memory store, on the
/// calling thread.
///
/// # Default
///
/// | option | default |
/// | --- | --- |
/// | [`call`](Self::call) | `tool` |
/// | [`seed`](Self::seed) | none (the component draws from WASI random) |
/// | [`context`](Self::context) | no extra members |
/// | [`now_ms`](Self::now_ms) | none: the system clock, moved on by what the sleeper did not sleep |
/// | [`attempt_budget`](Self::attempt_budget) | none: the policy's `max_attempts` decides |
/// | [`breaker`](Self::breaker) | none (a threshold of 100, which one call never reaches) |
/// | [`attempt_timeout_ms`](Self::attempt_timeout_ms) | none |
/// | [`deadline_ms`](Self::deadline_ms) | none |
/// | [`on_event`](Self::on_event) | none |
#[derive(Clone)]
pub struct Retry {
    run_id: String,
    step_id: String,
    tool: String,
    args_json: String,
    call: &'static str,
    seed: Option<u64>,
    extra: serde_json::Map<String, Value>,
    now_ms: Option<u64>,
    attempt_budget: Option<u32>,
    breaker: Option<(u32, u64)>,
    attempt_timeout_ms: Option<u64>,
    deadline_ms: Option<u64>,
    on_event: Option<OnEvent>,
}

impl fmt::Debug for Retry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Retry")
            .field("run_id", &self.run_id)
            .field("step_id", &self.step_id)
            .field("tool", &self.tool)
            .field("args_json", &self.args_json)
            .field("call", &self.call)
            .field("seed", &self.seed)
            .field("context", &self.extra)
            .field("now_ms", &self.now_ms)
            .field("attempt_budget", &self.attempt_budget)
            .field("breaker", &self.breaker)
            .field("attempt_timeout_ms", &self.attempt_timeout_ms)
            .field("deadline_ms", &self.deadline_ms)
            .finish_non_exhaustive()
    }
}

impl Retry {
    /// A retry loop for step `step_id` of run `run_id`, calling `tool` with `args_json`.
    pub fn new(run_id: &str, step_id: &str, tool: &str, args_json: &str) -> Self {
        Retry {
            run_id: run_id.to_owned(),
            step_id: step_id.to_owned(),
            tool: tool.to_owned(),
            args_json: args_json.to_owned(),
            call: "tool",
            seed: None,
            extra: serde_json::Map::new(),
            now_ms: None,
            attempt_budget: None,
            breaker: None,
            attempt_timeout_ms: None,
            deadline_ms: None,
            on_event: None,
        }
    }

    /// The kind of call: `tool`, `llm` or `agent`.
    pub fn call(mut self, call: &'static str) -> Self {
        self.call = call;
        self
    }

    /// A seed for reproducible jitter.
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = Some(seed);
        self
    }

    /// Extra decision-context members (`elapsed_ms` spent by earlier steps,
    /// `idempotent`, `compensations_pending`, `config`, ...). `elapsed_ms` is
    /// added to this step's; `call`, `attempt`, `seed` and `now_ms` are the
    /// loop's; every other member given here wins over the loop's.
    pub fn context(mut self, extra: serde_json::Map<String, Value>) -> Self {
        self.extra = extra;
        self
    }

    /// Start the loop's clock at `ms` (Unix ms) and move it only by the delays
    /// slept: a virtual clock, so event times (`t_ms`) are reproducible.
    pub fn now_ms(mut self, ms: u64) -> Self {
        self.now_ms = Some(ms);
        self
    }

    /// Stop after this many calls even if the policy would go on (the
    /// runtime's persisted per-input budget; here the store lives for one run).
    pub fn attempt_budget(mut self, calls: u32) -> Self {
        self.attempt_budget = Some(calls);
        self
    }

    /// Consecutive transient failures that open the target's breaker, and how
    /// long it stays open (the call after that is the one probe).
    pub fn breaker(mut self, failure_threshold: u32, open_ms: u64) -> Self {
        self.breaker = Some((failure_threshold, open_ms));
        self
    }

    /// An attempt slower than this (on the loop's clock) is a `timeout`
    /// observation (phase `total`) that the policy decides on; the operation
    /// itself is not interrupted.
    pub fn attempt_timeout_ms(mut self, ms: u64) -> Self {
        self.attempt_timeout_ms = Some(ms);
        self
    }

    /// The step's deadline, ms after it starts: no attempt starts and no retry
    /// sleep ends after it (the step stops as a total timeout, `dead_letter`).
    pub fn deadline_ms(mut self, ms: u64) -> Self {
        self.deadline_ms = Some(ms);
        self
    }

    /// Called with each event's JSON text as it happens (`docs/runtime.md`,
    /// "Events"), on the calling thread.
    pub fn on_event(mut self, f: impl Fn(&str) + Send + Sync + 'static) -> Self {
        self.on_event = Some(Arc::new(f));
        self
    }

    /// Run `op` until it succeeds or the policy says stop. `op` returns the
    /// failure as an observation (JSON text); `sleep` is called with each delay.
    pub fn run<T, P, Op, Sleep>(
        &self,
        policy: &P,
        mut op: Op,
        sleep: Sleep,
    ) -> std::result::Result<T, RecoveryError>
    where
        P: Decide + ?Sized,
        Op: FnMut(&Attempt) -> std::result::Result<T, String>,
        Sleep: FnMut(Duration),
    {
        self.run_reply(
            policy,
            |a: &Attempt| match op(a) {
                Ok(value) => Reply::Ok(value),
                Err(observation) => Reply::Failed(observation),
            },
            sleep,
        )
    }

    /// Like [`run`](Self::run), for an operation that may hand back a raw
    /// response ([`Reply::Response`]) for the component to judge.
    ///
    /// Everything happens on the calling thread, in this call: the
    /// operation, the sleeper and the policy are borrowed for the step (none
    /// of them needs to be `Send` or `'static`), and the loop's effects are
    /// carried out between their calls. A panic in the operation or the
    /// sleeper unwinds through here.
    pub fn run_reply<T, P, Op, Sleep>(
        &self,
        policy: &P,
        mut op: Op,
        mut sleep: Sleep,
    ) -> std::result::Result<T, RecoveryError>
    where
        P: Decide + ?Sized,
        Op: FnMut(&Attempt) -> Reply<T>,
        Sleep: FnMut(Duration),
    {
        let args: Value = serde_json::from_str(&self.args_json).map_err(|e| {
            RecoveryError::Policy(Error::new(
                ErrorKind::InvalidArgument,
                format!(
                    "the step's args_json is not JSON ({e}); pass the tool's arguments as JSON text, e.g. \"{{}}\""
                ),
            ))
        })?;
        let settings = Settings {
            seed: self.seed,
            // The policy's max_attempts decides unless asked otherwise.
            attempt_budget: self.attempt_budget.unwrap_or(u32::MAX),
            breaker: self.breaker,
            attempt_timeout_ms: self.attempt_timeout_ms,
            deadline_ms: self.deadline_ms,
        };
        let decider = policy::Asked::new(policy, &self.extra);
        let mut value: Option<T> = None;
        let mut call = |call: &Call| {
            let attempt = Attempt {
                number: call.attempt,
                idempotency_key: call.key.clone(),
            };
            match op(&attempt) {
                Reply::Ok(v) => {
                    value = Some(v);
                    Outcome::Ok(Value::Null)
                }
                Reply::Failed(observation) => {
                    value = None;
                    Outcome::Failed(observation)
                }
                Reply::Response(v, response) => {
                    value = Some(v);
                    Outcome::Response(response)
                }
            }
        };
        // The step's own operation is never called: `call` is lent instead.
        let step = Step::new(&self.step_id, &self.tool, |_: &Call| {
            Outcome::Ok(Value::Null)
        })
        .call(self.call)
        .args(args);
        let current = Current::new(self.now_ms, self.on_event.clone());
        let ended = parts::with_runtime(settings, current, |runtime, current| {
            let mut sleep_ms = |ms: u64| {
                let started = Instant::now();
                sleep(Duration::from_millis(ms));
                let took = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
                current.slept(ms, took);
            };
            let mut run = runtime.run_of_one_step(&self.run_id)?;
            let lent = Lent {
                call: &mut call,
                sleep: Some(&mut sleep_ms),
                decide: Some(&decider),
            };
            // The one step is the whole run (docs/durability.md): the run, the
            // step and its end in the step's calls.
            let report = run.step_then_end(&step, lent)?;
            let events = run.events().to_vec();
            Ok((report, events))
        });
        match ended {
            Ok((report, events)) => stopped::finish(report, &events, &decider.decisions(), value),
            Err(RuntimeError::Policy(e)) => Err(RecoveryError::Policy(e)),
            Err(other) => Err(RecoveryError::Policy(Error::new(
                ErrorKind::InvalidOutput,
                format!("the retry's runtime failed: {other}"),
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;

    /// On a virtual clock ([`Retry::now_ms`]) an attempt is as slow as the
    /// loop's clock moved during it: here the operation moves it (600 ms,
    /// then 200 ms), as a slow call moves the system clock.
    #[test]
    fn a_slow_attempt_on_a_virtual_clock_is_a_timeout() {
        let policy = Policy::reference().unwrap();
        let events = Arc::new(Mutex::new(Vec::new()));
        let sink = events.clone();
        let out = Retry::new("r", "s", "t", "{}")
            .seed(7)
            .now_ms(1_000)
            .attempt_timeout_ms(250)
            .on_event(move |e| sink.lock().unwrap().push(e.to_owned()))
            .run(
                &policy,
                |a: &Attempt| {
                    parts::spend(if a.number == 1 { 600 } else { 200 });
                    Ok::<_, String>(a.number)
                },
                |_| {},
            )
            .unwrap();
        assert_eq!(out, 2, "the slow first attempt counted as a failure");
        let decisions: Vec<Value> = events
            .lock()
            .unwrap()
            .iter()
            .map(|e| serde_json::from_str::<Value>(e).unwrap())
            .filter(|e| e["event"] == "decision")
            .collect();
        assert_eq!(decisions.len(), 1, "{decisions:?}");
        assert_eq!(decisions[0]["code"], "tool.timeout.total");
        assert_eq!(
            decisions[0]["t_ms"], 600,
            "decided when the first attempt returned"
        );
    }
}
