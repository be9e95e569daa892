//! A retry helper that acts on the policy's decisions and decides nothing itself.
//!
//! It runs an operation; when the operation fails with an observation, it asks
//! the policy what to do with `{call, attempt, elapsed_ms, seed}`, sleeps the
//! chosen `delay_ms` (through a sleeper you pass, so tests never sleep), keeps
//! the attempt count and the retry time already spent, passes the **same
//! idempotency key** to every attempt, and stops on any action other than
//! `retry` with a [`RecoveryError`] that carries the decision.
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

use std::fmt;
use std::time::Duration;

use serde_json::{Value, json};

use crate::{Error, Policy, PolicyHandle, Result};

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

/// Why the helper stopped without a result.
#[derive(Debug)]
pub enum RecoveryError {
    /// The policy decided something other than `retry` (`fail`, `replan`,
    /// `fallback`, `escalate`, `dead_letter`, ...): act on `action`.
    Stopped {
        /// The decision's action.
        action: String,
        /// The decision as the component printed it.
        decision_json: String,
        /// The decision, parsed (its `envelope` is the normalized error).
        decision: Value,
    },
    /// The policy itself failed (bad observation, trap, ...).
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

/// The retry loop for one step.
///
/// # Default
///
/// | option | default |
/// | --- | --- |
/// | [`call`](Self::call) | `tool` |
/// | [`seed`](Self::seed) | none (the component draws from WASI random) |
/// | [`context`](Self::context) | no extra members |
#[derive(Clone, Debug)]
pub struct Retry {
    run_id: String,
    step_id: String,
    tool: String,
    args_json: String,
    call: &'static str,
    seed: Option<u64>,
    extra: serde_json::Map<String, Value>,
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

    /// Extra context members (`idempotent`, `compensations_pending`, `config`, ...).
    pub fn context(mut self, extra: serde_json::Map<String, Value>) -> Self {
        self.extra = extra;
        self
    }

    /// Run `op` until it succeeds or the policy says stop. `op` returns the
    /// failure as an observation (JSON text); `sleep` is called with each delay.
    pub fn run<T, P, Op, Sleep>(
        &self,
        policy: &P,
        mut op: Op,
        mut sleep: Sleep,
    ) -> std::result::Result<T, RecoveryError>
    where
        P: Decide + ?Sized,
        Op: FnMut(&Attempt) -> std::result::Result<T, String>,
        Sleep: FnMut(Duration),
    {
        let key = policy
            .key(&self.run_id, &self.step_id, &self.tool, &self.args_json)
            .map_err(RecoveryError::Policy)?;
        let mut elapsed_ms: u64 = 0;
        let mut number = 1;
        loop {
            let attempt = Attempt {
                number,
                idempotency_key: key.clone(),
            };
            let observation = match op(&attempt) {
                Ok(value) => return Ok(value),
                Err(observation) => observation,
            };
            let mut context = self.extra.clone();
            context.insert("call".into(), json!(self.call));
            context.insert("attempt".into(), json!(number));
            context.insert("elapsed_ms".into(), json!(elapsed_ms));
            if let Some(seed) = self.seed {
                context.insert("seed".into(), json!(seed.to_string()));
            }
            let decision_json = policy
                .decide_json(&observation, &Value::Object(context).to_string())
                .map_err(RecoveryError::Policy)?;
            let decision: Value = serde_json::from_str(&decision_json).unwrap_or(Value::Null);
            let action = decision["action"].as_str().unwrap_or("").to_owned();
            match (action.as_str(), decision["delay_ms"].as_u64()) {
                ("retry", Some(delay)) => {
                    sleep(Duration::from_millis(delay));
                    elapsed_ms = elapsed_ms.saturating_add(delay);
                    number = number.saturating_add(1);
                }
                _ => {
                    return Err(RecoveryError::Stopped {
                        action,
                        decision_json,
                        decision,
                    });
                }
            }
        }
    }
}
