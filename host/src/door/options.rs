//! The door's options: a builder, and the same options as JSON (the names of
//! the Python door), where an unknown name is refused.

use std::sync::Arc;

use serde_json::Value;

use super::Door;
use crate::error::{Error, ErrorKind};
use crate::runtime::{Clock, DecisionLog, Runtime, RuntimeError};
use crate::store::Store;
use crate::{Policy, Result};

/// The options [`DoorBuilder::options`] takes as JSON, in the Python door's
/// spelling. `policy`, `store`, `clock` and `on_event` are objects: set them
/// with the builder's methods.
pub const OPTIONS: &[&str] = &[
    "call",
    "tool",
    "target",
    "fallbacks",
    "side_effect",
    "idempotent",
    "run_id",
    "step_id",
    "seed",
    "timeout_ms",
    "policy_config",
    "breaker",
];

/// What each call's step is made of.
#[derive(Clone, Debug, Default)]
pub(super) struct StepOptions {
    pub(super) call: Option<String>,
    pub(super) tool: Option<String>,
    pub(super) target: Option<String>,
    pub(super) fallbacks: Vec<String>,
    pub(super) side_effect: bool,
    pub(super) idempotent: Option<bool>,
    pub(super) run_id: Option<String>,
    pub(super) step_id: Option<String>,
}

impl StepOptions {
    pub(super) fn tool(&self) -> &str {
        self.tool.as_deref().unwrap_or("operation")
    }
}

/// Called with each event's JSON text.
type OnEvent = Arc<dyn Fn(&str) + Send + Sync>;

/// Options of a [`Door`]; see [`Door`] for every default.
#[derive(Default)]
pub struct DoorBuilder {
    step: StepOptions,
    policy: Option<Arc<Policy>>,
    store: Option<Arc<dyn Store>>,
    clock: Option<Arc<dyn Clock>>,
    seed: Option<u64>,
    timeout_ms: Option<u64>,
    policy_config: Option<Value>,
    breaker: Option<(u32, u64)>,
    on_event: Option<OnEvent>,
    decision_log: Option<DecisionLog>,
}

impl std::fmt::Debug for DoorBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DoorBuilder")
            .field("step", &self.step)
            .field("seed", &self.seed)
            .field("timeout_ms", &self.timeout_ms)
            .field("breaker", &self.breaker)
            .finish_non_exhaustive()
    }
}

fn bad(message: String) -> Error {
    Error::new(ErrorKind::InvalidArgument, message)
}

impl DoorBuilder {
    /// The policy that decides.
    pub fn policy(mut self, policy: Arc<Policy>) -> Self {
        self.policy = Some(policy);
        self
    }
    /// Where breakers, attempt counts and the idempotency cache live.
    pub fn store(mut self, store: Arc<dyn Store>) -> Self {
        self.store = Some(store);
        self
    }
    /// The clock to read and sleep on (a `VirtualClock` in tests).
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = Some(clock);
        self
    }
    /// Seed every decision's jitter.
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = Some(seed);
        self
    }
    /// `tool`, `llm` or `agent`: selects the backoff parameters.
    pub fn call(mut self, kind: &str) -> Self {
        self.step.call = Some(kind.to_owned());
        self
    }
    /// The tool name (part of the idempotency key; the default target and step id).
    pub fn tool(mut self, tool: &str) -> Self {
        self.step.tool = Some(tool.to_owned());
        self
    }
    /// The first target (a breaker's key: a host, a model name).
    pub fn target(mut self, target: &str) -> Self {
        self.step.target = Some(target.to_owned());
        self
    }
    /// The targets to fall back to, in order; the operation calls `call.target`.
    pub fn fallbacks<S: AsRef<str>>(mut self, targets: &[S]) -> Self {
        self.step.fallbacks = targets.iter().map(|t| t.as_ref().to_owned()).collect();
        self
    }
    /// The call changes external state (send `call.key` to the service).
    pub fn side_effect(mut self, yes: bool) -> Self {
        self.step.side_effect = yes;
        self
    }
    /// Whether repeating the call is safe; `false` makes ambiguous failures fail.
    pub fn idempotent(mut self, yes: bool) -> Self {
        self.step.idempotent = Some(yes);
        self
    }
    /// One run id for every call (default: a new one per call).
    pub fn run_id(mut self, run_id: &str) -> Self {
        self.step.run_id = Some(run_id.to_owned());
        self
    }
    /// The step id (default: the tool name).
    pub fn step_id(mut self, step_id: &str) -> Self {
        self.step.step_id = Some(step_id.to_owned());
        self
    }
    /// A call slower than this is a `timeout` observation.
    pub fn timeout_ms(mut self, ms: u64) -> Self {
        self.timeout_ms = Some(ms);
        self
    }
    /// The policy configuration of every decision (`context.config`).
    pub fn policy_config(mut self, config: Value) -> Self {
        self.policy_config = Some(config);
        self
    }
    /// Consecutive transient failures that open a target's breaker, and for how long.
    pub fn breaker(mut self, failure_threshold: u32, open_ms: u64) -> Self {
        self.breaker = Some((failure_threshold, open_ms));
        self
    }
    /// Called with each event's JSON text as it happens.
    pub fn on_event(mut self, f: impl Fn(&str) + Send + Sync + 'static) -> Self {
        self.on_event = Some(Arc::new(f));
        self
    }
    /// Log every decision, one JSON line each (docs/decision-logs.md).
    pub fn decision_log(mut self, log: DecisionLog) -> Self {
        self.decision_log = Some(log);
        self
    }

    /// The options of [`OPTIONS`] as one JSON object (configuration read
    /// from a file, the Python door's names). An unknown name or a value of
    /// the wrong type is refused (`invalid-argument`).
    pub fn options(mut self, options: &Value) -> Result<Self> {
        let Some(map) = options.as_object() else {
            return Err(bad(format!(
                "door options must be a JSON object, got {options}; pass {{\"tool\": \"...\", ...}}"
            )));
        };
        for (name, value) in map {
            let wrong = |expected: &str| {
                bad(format!(
                    "door option {name:?} is {expected}, got {value}; fix the value or leave the option out"
                ))
            };
            let text = || {
                value
                    .as_str()
                    .map(str::to_owned)
                    .ok_or_else(|| wrong("a string"))
            };
            let number = || {
                value
                    .as_u64()
                    .ok_or_else(|| wrong("a non-negative integer"))
            };
            let flag = || value.as_bool().ok_or_else(|| wrong("true or false"));
            match name.as_str() {
                "call" => self.step.call = Some(text()?),
                "tool" => self.step.tool = Some(text()?),
                "target" => self.step.target = Some(text()?),
                "run_id" => self.step.run_id = Some(text()?),
                "step_id" => self.step.step_id = Some(text()?),
                "side_effect" => self.step.side_effect = flag()?,
                "idempotent" => self.step.idempotent = Some(flag()?),
                "seed" => self.seed = Some(number()?),
                "timeout_ms" => self.timeout_ms = Some(number()?),
                "policy_config" => self.policy_config = Some(value.clone()),
                "fallbacks" => {
                    let targets = value.as_array().and_then(|a| {
                        a.iter()
                            .map(|t| t.as_str().map(str::to_owned))
                            .collect::<Option<Vec<_>>>()
                    });
                    self.step.fallbacks =
                        targets.ok_or_else(|| wrong("an array of target names"))?;
                }
                "breaker" => {
                    let pair = value
                        .as_array()
                        .filter(|a| a.len() == 2)
                        .and_then(|a| Some((u32::try_from(a[0].as_u64()?).ok()?, a[1].as_u64()?)));
                    self.breaker = Some(pair.ok_or_else(|| wrong("[failure_threshold, open_ms]"))?);
                }
                _ => {
                    return Err(bad(format!(
                        "the door has no option {name:?}; the options are {}",
                        OPTIONS.join(", ")
                    )));
                }
            }
        }
        Ok(self)
    }

    /// Loads the loop and the policy (the reference unless one was given).
    pub fn build(self) -> std::result::Result<Door, RuntimeError> {
        let policy = match self.policy {
            Some(p) => p,
            None => Arc::new(Policy::reference()?),
        };
        let mut b = Runtime::builder().policy(Arc::clone(&policy));
        if let Some(store) = self.store {
            b = b.store(store);
        }
        if let Some(clock) = self.clock {
            b = b.clock(clock);
        }
        if let Some(seed) = self.seed {
            b = b.seed(seed);
        }
        if let Some(ms) = self.timeout_ms {
            b = b.attempt_timeout_ms(ms);
        }
        if let Some(config) = self.policy_config {
            b = b.policy_config(config);
        }
        if let Some((threshold, open_ms)) = self.breaker {
            b = b.breaker(threshold, open_ms);
        }
        if let Some(f) = self.on_event {
            b = b.on_event(move |e| f(e));
        }
        if let Some(log) = self.decision_log {
            b = b.decision_log(log);
        }
        Ok(Door {
            runtime: Arc::new(b.build()?),
            policy,
            options: Arc::new(self.step),
        })
    }
}
