//! The JSON entry points. Every host prints their output unchanged, so the same
//! input gives byte-identical JSON in Rust, Node and Python.

use crate::backoff;
use crate::config::ConfigOverrides;
use crate::decide::{self, Context};
use crate::error::{ErrorKind, PolicyError};
use crate::model::{CallKind, Decision, Envelope};
use crate::normalize;
use crate::observation::Observation;
use crate::observation_view::ObservationView;

/// The largest JSON input accepted, in bytes.
pub const MAX_INPUT: usize = 32 * 1024 * 1024;

/// Refuse inputs over [`MAX_INPUT`] bytes.
pub fn check_size(what: &str, text: &str) -> Result<(), PolicyError> {
    if text.len() > MAX_INPUT {
        return Err(PolicyError::new(
            ErrorKind::TooLarge,
            format!(
                "{what} is {} bytes, over the {MAX_INPUT}-byte limit; truncate the body before classifying",
                text.len()
            ),
        ));
    }
    Ok(())
}

/// Bytes reserved for an output up front: a decision is 700 to 1 200 bytes,
/// so one allocation holds it instead of the five a 128-byte start grows through.
const OUTPUT_CAPACITY: usize = 1536;

/// Serialize an output as compact JSON.
pub fn to_json<T: serde::Serialize>(v: &T) -> Result<String, PolicyError> {
    let internal = |e: &dyn std::fmt::Display| {
        PolicyError::new(
            ErrorKind::Internal,
            format!("could not serialize output ({e}); please report this"),
        )
    };
    let mut out = Vec::with_capacity(OUTPUT_CAPACITY);
    serde_json::to_writer(&mut out, v).map_err(|e| internal(&e))?;
    String::from_utf8(out).map_err(|e| internal(&e))
}

/// Classify a parsed observation.
pub fn classify(obs: &Observation) -> Result<Envelope, PolicyError> {
    normalize::classify(obs)
}

/// Parse a JSON observation (size-checked).
pub fn parse_observation(observation: &str) -> Result<Observation, PolicyError> {
    check_size("observation", observation)?;
    Observation::from_json_str(observation)
}

/// Parse a JSON context (size-checked; `""` means `{}`).
pub fn parse_context(context: &str) -> Result<Context, PolicyError> {
    check_size("context", context)?;
    Context::from_json_str(context)
}

/// Read a JSON observation (size-checked) without building the owned
/// [`Observation`]: the reference's fast path.
fn observation_view(observation: &str) -> Result<ObservationView<'_>, PolicyError> {
    check_size("observation", observation)?;
    ObservationView::parse(observation)
}

/// Classify a JSON observation; returns the envelope as JSON.
pub fn classify_json(observation: &str) -> Result<String, PolicyError> {
    crate::json_out::envelope(&normalize::classify_view(&observation_view(observation)?)?)
}

/// Decide for a parsed observation and context.
pub fn decide(obs: Observation, ctx: Context) -> Result<Decision, PolicyError> {
    decide::decide(obs, ctx)
}

/// Decide for a parsed observation and context, with `defaults` in place of
/// the reference's parameters (the context's `config` still overrides them).
/// A custom policy's [`decide`](crate::RecoveryPolicy::decide) uses it to apply
/// its own [`breaker`](crate::RecoveryPolicy::breaker) thresholds.
pub fn decide_from(
    obs: Observation,
    ctx: Context,
    defaults: crate::config::Config,
) -> Result<Decision, PolicyError> {
    decide::decide_from(obs, ctx, defaults)
}

/// Decide from JSON; returns the decision as JSON.
pub fn decide_json(observation: &str, context: &str) -> Result<String, PolicyError> {
    let obs = observation_view(observation)?;
    crate::json_out::decision(&decide::decide_view(
        obs,
        parse_context(context)?,
        crate::config::Config::default(),
        None,
    )?)
}

/// The full-jitter delay for failed attempt `attempt` of a `call`.
pub fn backoff_delay(
    call: CallKind,
    attempt: u32,
    seed: Option<u64>,
    config: Option<&ConfigOverrides>,
) -> Result<u64, PolicyError> {
    let cfg = match config {
        Some(o) => o.resolve()?,
        None => crate::config::Config::default(),
    };
    backoff::delay(&cfg.for_call(call), attempt, seed)
}

/// The idempotency key of one logical action.
pub fn idempotency_key(
    run_id: &str,
    step_id: &str,
    tool: &str,
    args_json: &str,
) -> Result<String, PolicyError> {
    check_size("args", args_json)?;
    crate::idempotency::key(run_id, step_id, tool, args_json)
}
