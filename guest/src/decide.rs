//! The recovery decision flow.
//!
//! 1. Classify. 2. Fatal -> escalate. 3. Input required -> await input.
//! 4. Transient -> retry after `max(full-jitter delay, server hint)` while attempts
//!    and the run's retry budget allow; else compensate (side effects pending) or
//!    dead-letter. A not-idempotent call never retries an ambiguous failure.
//! 5. Permanent -> fail. 6. Semantic -> replan. 7. Policy -> fallback (or
//!    escalate without one). 8. State -> restore (or escalate without a checkpoint).

use crate::backoff;
use crate::config::{Config, ConfigOverrides};
use crate::error::{ErrorKind, PolicyError};
use crate::model::{Action, CallKind, Category, Decision, Envelope, ErrorClass, Severity};
use crate::normalize;
use crate::observation::Observation;
use crate::observation_view::ObservationView;
use serde::Deserialize;
use serde_json::Value;

/// What the caller knows about the step (JSON form of `context`).
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Context {
    /// Kind of call; overrides the observation's.
    pub call: Option<String>,
    /// The attempt that just failed, from 1.
    pub attempt: Option<u32>,
    /// Retry delay already spent in this run, ms.
    pub elapsed_ms: Option<u64>,
    /// Seed for reproducible jitter (a number or a decimal string).
    pub seed: Option<Seed>,
    /// The caller's clock, Unix ms.
    pub now_ms: Option<u64>,
    /// False when a repeat could duplicate a side effect.
    pub idempotent: Option<bool>,
    /// False when there is no checkpoint.
    pub checkpoint_available: Option<bool>,
    /// False when there is no fallback path.
    pub fallback_available: Option<bool>,
    /// Side effects taken that need compensation on exhaustion.
    pub compensations_pending: Option<u32>,
    /// Parameter overrides.
    pub config: Option<ConfigOverrides>,
}

/// [`Context`] as its JSON text says it, with `config` kept as text for its
/// own parse (its errors are `invalid_config`).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ContextText<'a> {
    call: Option<String>,
    attempt: Option<u32>,
    elapsed_ms: Option<u64>,
    seed: Option<Seed>,
    now_ms: Option<u64>,
    idempotent: Option<bool>,
    checkpoint_available: Option<bool>,
    fallback_available: Option<bool>,
    compensations_pending: Option<u32>,
    #[serde(borrow)]
    config: Option<&'a serde_json::value::RawValue>,
}

/// A seed given as a JSON number or a decimal string (JavaScript cannot hold every u64).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(try_from = "Value")]
pub struct Seed(pub u64);

impl TryFrom<Value> for Seed {
    type Error = String;
    fn try_from(v: Value) -> Result<Self, String> {
        match &v {
            Value::Number(n) => n.as_u64().map(Seed),
            Value::String(s) => s.trim().parse().ok().map(Seed),
            _ => None,
        }
        .ok_or_else(|| {
            format!("seed must be an integer from 0 to 2^64-1 (number or decimal string), got {v}")
        })
    }
}

impl Context {
    /// Parse a context from JSON text (`""` means `{}`).
    pub fn from_json_str(text: &str) -> Result<Self, PolicyError> {
        if text.trim().is_empty() {
            return Ok(Self::default());
        }
        if let Some(ctx) = Self::from_object_text(text) {
            return Ok(ctx);
        }
        // The slow path names what is wrong (invalid JSON, invalid context or
        // invalid config); it also decides every input the fast path refused.
        let v: Value = serde_json::from_str(text).map_err(|e| PolicyError::json("context", &e))?;
        Self::from_json(v)
    }

    /// A well-formed context object parsed in one pass, with no `Value` tree;
    /// `None` whenever anything fails (an error, a duplicate member, not an
    /// object), so that [`from_json`](Self::from_json) says why. On success it
    /// equals what `from_json` returns: the same derive reads the same members.
    fn from_object_text(text: &str) -> Option<Self> {
        // A derived struct also accepts a JSON array (members by position);
        // a context must be an object, so anything else takes the slow path.
        if !text.trim_start().starts_with('{') {
            return None;
        }
        let t: ContextText<'_> = serde_json::from_str(text).ok()?;
        let config = match t.config {
            None => None,
            Some(raw) => Some(serde_json::from_str::<ConfigOverrides>(raw.get()).ok()?),
        };
        Some(Context {
            call: t.call,
            attempt: t.attempt,
            elapsed_ms: t.elapsed_ms,
            seed: t.seed,
            now_ms: t.now_ms,
            idempotent: t.idempotent,
            checkpoint_available: t.checkpoint_available,
            fallback_available: t.fallback_available,
            compensations_pending: t.compensations_pending,
            config,
        })
    }

    /// Parse a context from a JSON value.
    pub fn from_json(v: Value) -> Result<Self, PolicyError> {
        let Value::Object(mut m) = v else {
            return Err(PolicyError::new(
                ErrorKind::InvalidContext,
                format!(
                    "context must be a JSON object, got {}; send {{\"attempt\": 1}}",
                    crate::json_kind(&v)
                ),
            ));
        };
        // The config is parsed on its own so that its errors are `invalid_config`
        // and every other error is `invalid_context`.
        let config = match m.remove("config") {
            None | Some(Value::Null) => None,
            Some(c) => Some(crate::from_value::<ConfigOverrides>(&c).map_err(|e| {
                PolicyError::new(
                    ErrorKind::InvalidConfig,
                    format!("context.config is invalid: {e}; see the defaults in docs/envelope-and-decision.md"),
                )
            })?),
        };
        let mut ctx: Context = crate::from_value(&Value::Object(m)).map_err(|e| {
            PolicyError::new(
                ErrorKind::InvalidContext,
                format!(
                    "context is invalid: {e}; see the context in docs/envelope-and-decision.md"
                ),
            )
        })?;
        ctx.config = config;
        Ok(ctx)
    }

    /// Fill unset fields from `other` (the observation's embedded context).
    pub fn or(mut self, other: Context) -> Self {
        macro_rules! fill { ($($f:ident),*) => { $( if self.$f.is_none() { self.$f = other.$f; } )* } }
        fill!(
            call,
            attempt,
            elapsed_ms,
            seed,
            now_ms,
            idempotent,
            checkpoint_available,
            fallback_available,
            compensations_pending,
            config
        );
        self
    }
}

/// Codes whose failure may have happened after the server acted on the request.
const AMBIGUOUS: &[&str] = &[
    "timeout.read",
    "timeout.write",
    "timeout.total",
    "network.connection_reset",
    "http.500_internal_error",
    "http.502_bad_gateway",
    "http.504_gateway_timeout",
    "http.5xx_server_error",
    "jsonrpc.internal_error",
    "jsonrpc.server_error",
    "mcp.request_timeout",
    "mcp.connection_closed",
    "response.malformed",
    // A stream that failed half-way: the server acted on the request.
    "stream.error",
];

fn base_of(code: &str) -> &str {
    code.split_once('.').map_or(code, |(_, b)| b)
}

fn call_of(code: &str) -> CallKind {
    match code.split('.').next() {
        Some("llm") => CallKind::Llm,
        Some("agent") => CallKind::Agent,
        _ => CallKind::Tool,
    }
}

/// Decide the next step for an observation, with the reference's defaults.
pub fn decide(obs: Observation, ctx: Context) -> Result<Decision, PolicyError> {
    decide_from(obs, ctx, Config::default())
}

/// Decide the next step for an observation; the context's `config` overrides
/// `defaults` member by member.
pub fn decide_from(
    obs: Observation,
    ctx: Context,
    defaults: Config,
) -> Result<Decision, PolicyError> {
    decide_view(ObservationView::from_observation(&obs), ctx, defaults, None)
}

/// A change a policy makes to the envelope before the decision flow reads it
/// (a policy document's per-code class, severity and hint).
pub(crate) type Adjust<'a> = &'a dyn Fn(&mut Envelope);

/// [`decide_from`] with `adjust` applied to the envelope before the flow.
pub(crate) fn decide_adjusted(
    obs: Observation,
    ctx: Context,
    defaults: Config,
    adjust: Adjust<'_>,
) -> Result<Decision, PolicyError> {
    decide_view(
        ObservationView::from_observation(&obs),
        ctx,
        defaults,
        Some(adjust),
    )
}

/// [`decide_from`] for a borrowed observation: what every entry point runs
/// (the reference's `decide_json` builds the view straight from the text).
pub(crate) fn decide_view(
    mut obs: ObservationView<'_>,
    ctx: Context,
    defaults: Config,
    adjust: Option<Adjust<'_>>,
) -> Result<Decision, PolicyError> {
    let ctx = match obs.context.take() {
        Some(embedded) => ctx.or(Context::from_json(embedded.to_value())?),
        None => ctx,
    };
    let call = match ctx.call.as_deref() {
        Some(c) => Some(CallKind::parse(c).ok_or_else(|| {
            PolicyError::new(
                ErrorKind::InvalidContext,
                format!("call {c:?} is not one of tool, llm, agent; use one of those"),
            )
        })?),
        None => None,
    };
    if call.is_some() {
        obs.call = call;
    }
    if obs.now_ms.is_none() {
        obs.now_ms = ctx.now_ms;
    }
    let attempt = ctx.attempt.unwrap_or(1);
    if attempt == 0 {
        return Err(PolicyError::new(
            ErrorKind::InvalidContext,
            "attempt must be at least 1 (got 0); it is the number of the attempt that just failed",
        ));
    }
    let mut ctx = ctx;
    if ctx.idempotent.is_none() {
        // The observation's word on the call stands in for the context's.
        ctx.idempotent = obs.replay.map(crate::replay::Replay::is_repeatable);
    }
    let config = defaults.with(&ctx.config.unwrap_or_default())?;
    let mut envelope = normalize::classify_view(&obs)?;
    if let Some(adjust) = adjust {
        adjust(&mut envelope);
    }
    let call = obs.call.unwrap_or_else(|| call_of(&envelope.code));
    let replay_safe = crate::replay::safe(
        obs.replay,
        obs.response_started,
        ctx.idempotent,
        &envelope.code,
    );
    let mut d = flow(envelope, &ctx, attempt, call, &config)?;
    d.replay_safe = replay_safe;
    Ok(d)
}

fn flow(
    mut env: Envelope,
    ctx: &Context,
    attempt: u32,
    call: CallKind,
    config: &Config,
) -> Result<Decision, PolicyError> {
    let backoff_cfg = config.for_call(call);
    let remaining = config
        .retry_budget_ms
        .saturating_sub(ctx.elapsed_ms.unwrap_or(0));
    let exhausted = if ctx.compensations_pending.unwrap_or(0) > 0 {
        Action::Compensate
    } else {
        Action::DeadLetter
    };
    let mut delay_ms = None;
    let (action, reason, reason_code): (Action, &'static str, Option<&'static str>) =
        if env.severity == Severity::Fatal {
            (Action::Escalate, "fatal", None)
        } else if env.category == Category::InputRequired {
            (Action::AwaitInput, "input_required", None)
        } else {
            match env.class {
                ErrorClass::Transient => {
                    if ctx.idempotent == Some(false) && AMBIGUOUS.contains(&base_of(&env.code)) {
                        (
                            Action::Fail,
                            "not_idempotent",
                            Some("runtime.policy.not_idempotent"),
                        )
                    } else if attempt >= backoff_cfg.max_attempts {
                        (
                            exhausted,
                            "attempts_exhausted",
                            Some("runtime.budget.attempts_exhausted"),
                        )
                    } else {
                        let jitter = backoff::delay(&backoff_cfg, attempt, ctx.seed.map(|s| s.0))?;
                        let delay = jitter.max(env.retry_after_ms.unwrap_or(0));
                        if remaining == 0 || delay > remaining {
                            let reason = if env.retry_after_ms.is_some_and(|h| h > remaining) {
                                "hint_exceeds_budget"
                            } else {
                                "budget_exhausted"
                            };
                            (exhausted, reason, Some("runtime.budget.retry_exhausted"))
                        } else {
                            delay_ms = Some(delay);
                            env.retry_after_ms = Some(delay);
                            if !env.hint_from_server {
                                env.hint = normalize::wait_hint(delay);
                            }
                            (Action::Retry, "transient", None)
                        }
                    }
                }
                ErrorClass::Permanent => (Action::Fail, "permanent", None),
                ErrorClass::Semantic => (Action::Replan, "semantic", None),
                ErrorClass::Policy if ctx.fallback_available == Some(false) => (
                    Action::Escalate,
                    "no_fallback",
                    Some("runtime.policy.no_fallback"),
                ),
                ErrorClass::Policy => (Action::Fallback, "policy", None),
                ErrorClass::State if ctx.checkpoint_available == Some(false) => (
                    Action::Escalate,
                    "no_checkpoint",
                    Some("runtime.state.checkpoint_missing"),
                ),
                ErrorClass::State => (Action::Restore, "state", None),
            }
        };
    if action != Action::Retry {
        action_hint(&mut env, action, reason, remaining);
    }
    Ok(Decision {
        action,
        delay_ms,
        attempt,
        max_attempts: backoff_cfg.max_attempts,
        budget_remaining_ms: remaining - delay_ms.unwrap_or(0),
        reason,
        reason_code,
        envelope: env,
        breaker: Some(config.breaker),
        replay_safe: None,
        fallbacks: None,
        dead_letters: None,
    })
}

/// Make the envelope's `hint` say what to do now, for an action other than retry.
///
/// When the policy overrode the error's own recovery (exhausted, not idempotent,
/// no fallback, no checkpoint) the hint is the decision's, even over a server's
/// own hint: the server described how to recover from the error, and that path
/// is closed. Otherwise a server's hint is kept, and a registry hint is kept
/// unless it tells the agent to retry (the code is retryable by default but
/// this decision does not retry it).
fn action_hint(env: &mut Envelope, action: Action, reason: &str, remaining_ms: u64) {
    let overridden = matches!(
        reason,
        "attempts_exhausted"
            | "budget_exhausted"
            | "hint_exceeds_budget"
            | "not_idempotent"
            | "no_fallback"
            | "no_checkpoint"
    );
    let retry_hint =
        !env.hint_from_server && crate::registry::lookup(&env.code).is_some_and(|i| i.retryable);
    if !overridden && !retry_hint {
        return;
    }
    let dead_letter = "dead-letter the input with this envelope for a human or a later run";
    env.hint = match (action, reason) {
        (Action::Compensate, "hint_exceeds_budget") => format!(
            "Stop retrying: the server asked to wait {} ms, more than the {remaining_ms} ms left in the retry budget; run the pending compensations in reverse order, then {dead_letter}.",
            env.retry_after_ms.unwrap_or(0)
        ),
        (Action::DeadLetter, "hint_exceeds_budget") => format!(
            "Stop retrying: the server asked to wait {} ms, more than the {remaining_ms} ms left in the retry budget; {dead_letter}.",
            env.retry_after_ms.unwrap_or(0)
        ),
        (Action::Compensate, "budget_exhausted") => format!(
            "Stop retrying: the run's retry budget is spent; run the pending compensations in reverse order, then {dead_letter}."
        ),
        (Action::DeadLetter, "budget_exhausted") => {
            format!("Stop retrying: the run's retry budget is spent; {dead_letter}.")
        }
        (Action::Compensate, _) => format!(
            "Stop retrying: every allowed attempt failed; run the pending compensations in reverse order, then {dead_letter}."
        ),
        (Action::DeadLetter, _) => {
            format!("Stop retrying: every allowed attempt failed; {dead_letter}.")
        }
        (Action::Fail, "not_idempotent") => "Do not repeat the call: it may have taken effect; check whether it did, and pass an idempotency key to make retries safe.".to_owned(),
        (Action::Escalate, "no_fallback") => "Escalate to a human with this envelope: the error needs a fallback path and none is available.".to_owned(),
        (Action::Escalate, "no_checkpoint") => "Escalate to a human with this envelope: the error needs a checkpoint to restore and none is available.".to_owned(),
        (Action::Fail, _) => "Do not retry: the server marked this failure as not retryable; fix the request or report the failure.".to_owned(),
        (Action::Escalate, _) => "Escalate to a human with this envelope; do not retry.".to_owned(),
        (Action::Replan, _) => "Do not resend it unchanged: give this envelope to the model to change the request.".to_owned(),
        (Action::Fallback, _) => "Do not retry: take the fallback path.".to_owned(),
        (Action::Restore, _) => "Restore the checkpoint, then run the step again.".to_owned(),
        (Action::AwaitInput, _) => "Wait for the requested input, then continue.".to_owned(),
        (Action::Retry, _) => return,
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The one-pass parse must agree with the `Value` path (the original
    /// implementation) on every context it accepts, and leave every other
    /// context to that path.
    #[test]
    fn the_one_pass_context_parse_agrees_with_the_value_path() {
        let slow = |t: &str| {
            serde_json::from_str::<Value>(t)
                .ok()
                .and_then(|v| Context::from_json(v).ok())
        };
        let accepted = [
            r#"{"attempt":1,"elapsed_ms":1500,"seed":42}"#,
            r#"{}"#,
            r#" {"call":"llm","seed":"18446744073709551615","now_ms":1}"#,
            r#"{"attempt":null,"config":null,"idempotent":false}"#,
            r#"{"att\u0065mpt":3,"checkpoint_available":true,"fallback_available":false}"#,
            r#"{"compensations_pending":2,"config":{"tool":{"base_ms":10,"max_attempts":2},"retry_budget_ms":5}}"#,
            r#"{"config":{"breaker":{"failure_threshold":4}}}"#,
        ];
        for t in accepted {
            let fast = Context::from_object_text(t);
            assert!(fast.is_some(), "the fast path refused {t}");
            assert_eq!(fast, slow(t), "{t}");
        }
        let refused = [
            // Arrays would fill a derived struct by position.
            r#"[null,1]"#,
            // Duplicates: the Value path keeps the last one.
            r#"{"attempt":1,"attempt":2}"#,
            r#"{"config":{"tool":{"base_ms":1},"tool":{"base_ms":2}}}"#,
            r#"{"attempt":-1}"#,
            r#"{"attempt":1.5}"#,
            r#"{"unknown":1}"#,
            r#"{"config":{"unknown":1}}"#,
            r#"{"config":[]}"#,
            r#"{"seed":"x"}"#,
            r#"{"attempt":1} x"#,
        ];
        for t in refused {
            assert_eq!(Context::from_object_text(t), None, "{t}");
        }
        // And through the public entry point the refused ones decide as before.
        assert_eq!(
            Context::from_json_str(r#"{"attempt":1,"attempt":2}"#)
                .ok()
                .and_then(|c| c.attempt),
            Some(2)
        );
        assert!(Context::from_json_str("[null,1]").is_err());
    }
}
