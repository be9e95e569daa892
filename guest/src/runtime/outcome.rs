//! "Was this outcome a failure?": owned by the component, so hosts never decide it.

use serde_json::Value;

use crate::error::{ErrorKind, PolicyError};
use crate::normalize;
use crate::observation_view::ObservationView;

/// A 2xx without a failure in its body, a 3xx (a redirect or `304 Not
/// Modified` is the client's business, not a failure) and a JSON-RPC result
/// are successes: `None`. Anything `classify` recognises as a failure (a 4xx,
/// a 5xx, a 200 carrying a refusal or a safety stop, a JSON-RPC error, an MCP
/// `isError` result, a failed A2A task) is `Some(envelope)`.
pub fn check(outcome: &Value) -> Result<Option<Value>, PolicyError> {
    let status = outcome.get("status").and_then(Value::as_u64);
    if matches!(status, Some(300..=399)) {
        return Ok(None);
    }
    let obs = ObservationView::from_value(outcome)?;
    match normalize::classify_view(&obs) {
        Ok(envelope) => serde_json::to_value(envelope).map(Some).map_err(|e| {
            PolicyError::new(
                ErrorKind::Internal,
                format!("could not serialize an envelope ({e}); please report this"),
            )
        }),
        // `classify` refuses a success ("classify only failed calls").
        Err(e) if e.kind == ErrorKind::InvalidObservation && is_success_shape(outcome) => Ok(None),
        Err(e) => Err(e),
    }
}

/// The exception type of an observation the loop cannot use.
pub const INVALID_OBSERVATION: &str = "agent_recovery.InvalidObservation";

/// What the loop decides on for a call that failed with `obs`: `obs` itself,
/// or, when it is not an observation of a failure (`null`, a number, an
/// object `classify` refuses), an `exception` observation of type
/// [`INVALID_OBSERVATION`] whose message says why. A bad observation never
/// stops the run: the policy decides on it like on any failure.
pub fn failure(obs: Value) -> Value {
    match ObservationView::from_value(&obs).and_then(|v| normalize::classify_view(&v)) {
        Ok(_) => obs,
        Err(e) => invalid(&e),
    }
}

/// A raw outcome judged: `None` when it succeeded, else the observation to
/// decide on (the outcome itself, or the [`failure`] substitute when the
/// outcome is not one the component can read).
pub fn judge(outcome: &Value) -> Option<Value> {
    match check(outcome) {
        Ok(None) => None,
        Ok(Some(_)) => Some(outcome.clone()),
        Err(e) => Some(invalid(&e)),
    }
}

fn invalid(e: &PolicyError) -> Value {
    serde_json::json!({
        "source": "exception",
        "type": INVALID_OBSERVATION,
        "message": format!(
            "the operation's observation is not one the loop can decide on: {}",
            e.message
        ),
    })
}

/// An HTTP 1xx/2xx, or a JSON-RPC message without `error`.
fn is_success_shape(outcome: &Value) -> bool {
    if let Some(status) = outcome.get("status").and_then(Value::as_u64) {
        return status < 300;
    }
    let message = outcome.get("message").unwrap_or(outcome);
    message.get("error").is_none()
        && (message.get("result").is_some() || message.get("jsonrpc").is_some())
}

/// `check-outcome` on JSON text.
pub fn check_json(outcome: &str) -> Result<Option<String>, PolicyError> {
    crate::api::check_size("outcome", outcome)?;
    let v: Value = serde_json::from_str(outcome).map_err(|e| PolicyError::json("outcome", &e))?;
    match check(&v)? {
        None => Ok(None),
        Some(env) => crate::api::to_json(&env).map(Some),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusal_in_a_200_is_a_failure_and_304_is_not() {
        let refusal = r#"{"source":"http","status":200,"provider":"openai","body":{"choices":[{"finish_reason":"content_filter","message":{"content":null}}]}}"#;
        assert!(check_json(refusal).unwrap().is_some());
        assert!(
            check_json(r#"{"source":"http","status":304}"#)
                .unwrap()
                .is_none()
        );
        assert!(
            check_json(r#"{"source":"http","status":200,"body":{"ok":true}}"#)
                .unwrap()
                .is_none()
        );
        assert!(
            check_json(r#"{"source":"http","status":503}"#)
                .unwrap()
                .is_some()
        );
    }
}
