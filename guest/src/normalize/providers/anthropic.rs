//! Anthropic (the Messages API, also as served by Bedrock and Vertex AI).
//!
//! Errors: `{"type": "error", "error": {"type", "message"}, "request_id"}`, the
//! type naming the condition whatever the status: `overloaded_error` is
//! `http.529_overloaded` even when a proxy rewrote the status. Failures inside
//! a 200: `stop_reason` `refusal`, `max_tokens` and `model_context_window_exceeded`.
//!
//! `error.details.error_code` names the cause more precisely than the type (the
//! Python SDK raises one class per code: `anthropic/_error_classes.py`,
//! `ERROR_CLASSES`). Where this differs from the SDK (which retries every 429):
//! every spend or contract limit (`enforced_spend_limit_reached`,
//! `contract_spend_limit_reached`, the linked organization's spend limit and
//! billing) and `billing_error` (402) are `quota.exhausted`, not a rate limit;
//! `ramp_limit_exceeded` ("retry after the time in the `retry-after` header")
//! stays a rate limit. A server-side conversation thread that is gone or out of
//! step (`thread_not_found`, ...) is `conversation.state_lost` (state).
//!
//! A context overflow has no code: `400 invalid_request_error` with the fixed
//! prefix `prompt is too long:` is `context.overflow` (see [`super::message_prefix`]).

use super::{Response, string};
use crate::json_view::View;
use crate::normalize::http::status_base;
use crate::normalize::{Finding, str_at};
use crate::observation_view::BodyView;
use crate::registry::Surface;

pub(super) fn parse(r: &Response<'_>, hinted: bool) -> Option<Finding> {
    let BodyView::Json(v) = r.body else {
        return None;
    };
    let error_obj = v
        .get("error")
        .filter(|e| str_at(e, "type").is_some() && e.get("message").is_some());
    let mut f = match (str_at(v, "type"), error_obj) {
        (Some("error"), Some(err)) => error(r.status, v, err),
        (None, Some(err)) if hinted => error(r.status, v, err),
        (Some("message"), _) => stop(v)?,
        _ => return None,
    };
    f.upstream.provider = Some("anthropic".into());
    f.surface = Some(Surface::Llm);
    Some(f)
}

fn type_base(t: &str) -> Option<&'static str> {
    Some(match t {
        "invalid_request_error" => "http.400_bad_request",
        "authentication_error" => "http.401_unauthorized",
        "billing_error" => "quota.exhausted",
        "permission_error" => "http.403_forbidden",
        "not_found_error" => "http.404_not_found",
        "request_too_large" => "http.413_payload_too_large",
        "rate_limit_error" => "http.429_rate_limited",
        "api_error" => "http.500_internal_error",
        "timeout_error" => "http.504_gateway_timeout",
        "overloaded_error" => "http.529_overloaded",
        _ => return None,
    })
}

/// Error codes under `error.details.error_code` that mean more than the type
/// (the class docstrings in `anthropic/types/**/<code>_error.py` say what each means).
pub(crate) fn detail_base(code: &str) -> Option<&'static str> {
    Some(match code {
        // Spend, contract and billing limits: waiting seconds will not help.
        "enforced_spend_limit_reached"
        | "contract_spend_limit_reached"
        | "linked_organization_spend_limit_reached"
        | "linked_organization_billing_unavailable"
        | "storage_quota_exceeded" => "quota.exhausted",
        // "Retry after the time in the `retry-after` header."
        "ramp_limit_exceeded" => "http.429_rate_limited",
        // The server-side thread is gone, already continued, or holds other values.
        "thread_not_found" | "thread_already_continued" | "thread_fingerprint_mismatch" => {
            "conversation.state_lost"
        }
        // "Another request is still continuing from the same previous_message_id."
        "thread_continue_in_flight" => "http.423_locked",
        // Disabled for trust and safety reasons: nobody but a human can repair it.
        "organization_on_hold" => "http.403_forbidden",
        "request_body_too_large_after_decoding" => "http.413_payload_too_large",
        // Subclasses of ServiceUnavailableError / OverloadedError whose docstrings
        // say "Retry the request": the same as their status, named here so that the
        // exception classes (which carry no status) are read right too.
        "cmek_key_unreachable" | "cmek_context_unavailable" | "registration_pending" => {
            "http.503_unavailable"
        }
        "compaction_unavailable" => "http.529_overloaded",
        _ => return None,
    })
}

fn error(status: u16, v: &View<'_>, err: &View<'_>) -> Finding {
    let typ = string(err, "type");
    let detail = err
        .pointer("/details/error_code")
        .and_then(View::as_str)
        .map(str::to_owned);
    let from_type = typ.as_deref().and_then(type_base);
    let base = detail
        .as_deref()
        .and_then(detail_base)
        .or(match (from_type, status) {
            // A generic type says less than a specific status (e.g. 409, 422).
            (Some("http.400_bad_request"), 401..=499) => None,
            (b, _) => b,
        })
        .unwrap_or_else(|| status_base(status));
    let mut f = Finding::new(base);
    f.message = string(err, "message");
    super::message_prefix::refine(&mut f, "anthropic", typ.as_deref(), status);
    f.request_id = string(v, "request_id");
    f.upstream.code = detail;
    f.upstream.error_type = typ;
    f
}

fn stop(v: &View<'_>) -> Option<Finding> {
    let reason = str_at(v, "stop_reason")?;
    let base = match reason {
        "refusal" => "policy.refusal",
        "max_tokens" => "output.truncated",
        "model_context_window_exceeded" => "context.overflow",
        _ => return None,
    };
    let mut f = Finding::new(base);
    f.upstream.code = Some(reason.to_owned());
    f.upstream.error_type = Some("stop_reason".into());
    Some(f)
}

#[cfg(test)]
mod tests {
    use super::super::test_support::{run, try_run};

    fn err(t: &str) -> String {
        format!(
            r#"{{"type":"error","error":{{"type":"{t}","message":"m"}},"request_id":"req_011CAbc"}}"#
        )
    }

    #[test]
    fn types_map_to_bases() {
        for (status, t, base) in [
            (400, "invalid_request_error", "http.400_bad_request"),
            (401, "authentication_error", "http.401_unauthorized"),
            (402, "billing_error", "quota.exhausted"),
            (403, "permission_error", "http.403_forbidden"),
            (404, "not_found_error", "http.404_not_found"),
            (413, "request_too_large", "http.413_payload_too_large"),
            (429, "rate_limit_error", "http.429_rate_limited"),
            (500, "api_error", "http.500_internal_error"),
            (504, "timeout_error", "http.504_gateway_timeout"),
            (529, "overloaded_error", "http.529_overloaded"),
            (500, "overloaded_error", "http.529_overloaded"),
            (409, "conflict_error", "http.409_conflict"),
        ] {
            let f = run(status, &[], &err(t), None);
            assert_eq!(f.base, base, "{t}");
            assert_eq!(f.request_id.as_deref(), Some("req_011CAbc"));
            assert_eq!(f.upstream.error_type.as_deref(), Some(t));
        }
    }

    #[test]
    fn spend_limit_is_quota() {
        let body = r#"{"type":"error","error":{"type":"rate_limit_error","message":"m","details":{"error_code":"enforced_spend_limit_reached"}},"request_id":"req_1"}"#;
        let f = run(429, &[], body, Some("anthropic"));
        assert_eq!(f.base, "quota.exhausted");
        assert_eq!(
            f.upstream.code.as_deref(),
            Some("enforced_spend_limit_reached")
        );
    }

    #[test]
    fn stop_reasons() {
        let body = |r: &str| {
            format!(r#"{{"type":"message","role":"assistant","content":[],"stop_reason":"{r}"}}"#)
        };
        assert_eq!(run(200, &[], &body("refusal"), None).base, "policy.refusal");
        assert_eq!(
            run(200, &[], &body("max_tokens"), None).base,
            "output.truncated"
        );
        assert_eq!(
            run(200, &[], &body("model_context_window_exceeded"), None).base,
            "context.overflow"
        );
        assert!(try_run(200, &[], &body("end_turn"), Some("anthropic")).is_none());
    }
}
