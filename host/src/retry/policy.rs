//! The decider a `Retry` lends its step: the caller's policy, asked with the
//! caller's context members on top of the loop's, and the decisions it made.

use std::cell::RefCell;

use serde_json::{Map, Value};

use super::Decide;
use crate::Result;

/// The caller's policy, as the step's decider.
pub(super) struct Asked<'p, P: ?Sized> {
    policy: &'p P,
    extra: &'p Map<String, Value>,
    /// Every decision the policy made, in order (JSON text).
    decisions: RefCell<Vec<String>>,
}

impl<'p, P: Decide + ?Sized> Asked<'p, P> {
    pub(super) fn new(policy: &'p P, extra: &'p Map<String, Value>) -> Self {
        Asked {
            policy,
            extra,
            decisions: RefCell::new(Vec::new()),
        }
    }

    /// The decisions the policy made, in order.
    pub(super) fn decisions(self) -> Vec<String> {
        self.decisions.into_inner()
    }
}

impl<P: Decide + ?Sized> Decide for Asked<'_, P> {
    fn decide_json(&self, observation: &str, context: &str) -> Result<String> {
        let context = merge_context(self.extra, context);
        let decision = self.policy.decide_json(observation, &context)?;
        self.decisions.borrow_mut().push(decision.clone());
        Ok(decision)
    }

    fn key(&self, run_id: &str, step_id: &str, tool: &str, args_json: &str) -> Result<String> {
        self.policy.key(run_id, step_id, tool, args_json)
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
fn merge_context(extra: &Map<String, Value>, context: &str) -> String {
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
