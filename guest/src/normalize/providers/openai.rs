//! OpenAI, Azure OpenAI and OpenAI-compatible servers.
//!
//! Errors: `{"error": {"message", "type", "param", "code"}}` (Azure adds
//! `innererror`). Failures inside a 200: chat `choices[].finish_reason`
//! (`content_filter`, `length`) and `message.refusal`; the Responses API's
//! `incomplete_details.reason`, `refusal` output parts and `status: "failed"`.
//!
//! Where this differs from openai-python's `_should_retry` (which retries every
//! 429): `insufficient_quota`, `billing_hard_limit_reached` and
//! `billing_not_active` come as 429 too, but waiting will not help, so they are
//! `quota.exhausted`, not a rate limit.

use super::{Response, code_text, google, is_success, items, string};
use crate::json_view::View;
use crate::normalize::http::status_base;
use crate::normalize::{Finding, str_at};
use crate::observation_view::BodyView;
use crate::registry::Surface;

pub(super) fn parse(r: &Response<'_>, hinted: bool) -> Option<Finding> {
    let BodyView::Json(v) = r.body else {
        return None;
    };
    let mut f = match v.get("error").filter(|e| is_error_object(e, hinted)) {
        Some(err) => error(r.status, err),
        None => completion(v).or_else(|| response(v))?,
    };
    let azure = matches!(r.hint, Some("azure-openai" | "azure_openai" | "azure"))
        || v.pointer("/error/innererror").is_some();
    f.upstream.provider = Some(if azure { "azure-openai" } else { "openai" }.into());
    // The shape is shared by many services; say LLM only when something says so.
    let llm = hinted
        || r.headers.any_prefix("openai-")
        || r.headers.get("x-ratelimit-limit-tokens").is_some()
        || is_success(r.status);
    if llm {
        f.surface = Some(Surface::Llm);
    }
    Some(f)
}

/// `{"message": "...", "type"|"param"|"code": ...}`; with a hint, a message alone.
/// A Google status name in `status` (Gemini's OpenAI-compatible endpoint answers
/// errors in Google's shape) is left to the Google parser.
fn is_error_object(e: &View<'_>, hinted: bool) -> bool {
    let Some(obj) = e.as_object() else {
        return false;
    };
    obj.get("message").is_some_and(View::is_string)
        && str_at(e, "status").is_none_or(|s| google::status_name_base(s).is_none())
        && (hinted
            || ["type", "param", "code"]
                .iter()
                .any(|k| obj.contains_key(k)))
}

/// The base for an error `code`, if it says more than the status.
fn code_base(code: &str) -> Option<&'static str> {
    Some(match code {
        "context_length_exceeded" => "context.overflow",
        "invalid_api_key" => "http.401_unauthorized",
        "model_not_found" | "DeploymentNotFound" => "model.not_found",
        "rate_limit_exceeded" => "http.429_rate_limited",
        "insufficient_quota" | "billing_hard_limit_reached" | "billing_not_active" => {
            "quota.exhausted"
        }
        "content_policy_violation"
        | "content_filter"
        | "invalid_prompt"
        | "image_content_policy_violation"
        | "ResponsibleAIPolicyViolation" => "policy.input_blocked",
        "unsupported_country_region_territory" => "http.403_forbidden",
        "server_error" => "http.500_internal_error",
        "vector_store_timeout" => "http.504_gateway_timeout",
        _ => return None,
    })
}

/// The base for an error `type`, if it says more than the status.
fn type_base(t: &str, status: u16) -> Option<&'static str> {
    match t {
        "insufficient_quota" => Some("quota.exhausted"),
        "server_error" if status < 500 => Some("http.500_internal_error"),
        _ => None,
    }
}

fn error(status: u16, err: &View<'_>) -> Finding {
    let code = code_text(err.get("code"));
    let typ = string(err, "type");
    let inner = err.pointer("/innererror/code").and_then(View::as_str);
    let base = code
        .as_deref()
        .and_then(code_base)
        .or_else(|| inner.and_then(code_base))
        .or_else(|| typ.as_deref().and_then(|t| type_base(t, status)))
        .unwrap_or_else(|| {
            if is_success(status) {
                // A failed Responses object: its other codes are input errors.
                "http.400_bad_request"
            } else {
                status_base(status)
            }
        });
    let mut f = Finding::new(base);
    f.message = string(err, "message");
    f.field = string(err, "param").filter(|p| !p.is_empty());
    f.upstream.code = code;
    f.upstream.error_type = typ;
    f
}

/// A stop recorded in a 200 (`member` names where it was found).
fn stop(base: &'static str, value: &str, member: &str) -> Finding {
    let mut f = Finding::new(base);
    f.upstream.code = Some(value.to_owned());
    f.upstream.error_type = Some(member.to_owned());
    f
}

/// Chat and legacy completions: a refusal anywhere wins over a truncation.
fn completion(v: &View<'_>) -> Option<Finding> {
    let choices = v.get("choices")?.as_array()?;
    let mut truncated = None;
    for c in choices {
        let refusal = c
            .pointer("/message/refusal")
            .or_else(|| c.pointer("/delta/refusal"))
            .and_then(View::as_str)
            .filter(|s| !s.is_empty());
        if let Some(text) = refusal {
            let mut f = stop("policy.refusal", "refusal", "message.refusal");
            f.message = Some(text.to_owned());
            return Some(f);
        }
        match str_at(c, "finish_reason") {
            Some("content_filter") => {
                return Some(stop("policy.refusal", "content_filter", "finish_reason"));
            }
            Some("length") => truncated = Some(stop("output.truncated", "length", "finish_reason")),
            _ => {}
        }
    }
    truncated
}

/// The Responses API object.
fn response(v: &View<'_>) -> Option<Finding> {
    if str_at(v, "object") != Some("response") {
        return None;
    }
    let refusal = items(v, "output")
        .flat_map(|o| items(o, "content"))
        .find(|c| str_at(c, "type") == Some("refusal"));
    if let Some(part) = refusal {
        let mut f = stop("policy.refusal", "refusal", "output.content.refusal");
        f.message = string(part, "refusal");
        return Some(f);
    }
    match v
        .pointer("/incomplete_details/reason")
        .and_then(View::as_str)
    {
        Some(reason @ "content_filter") => {
            return Some(stop("policy.refusal", reason, "incomplete_details.reason"));
        }
        Some(reason @ "max_output_tokens") => {
            return Some(stop(
                "output.truncated",
                reason,
                "incomplete_details.reason",
            ));
        }
        _ => {}
    }
    None
}

#[cfg(test)]
mod tests {
    use super::super::test_support::{run, try_run};

    const HINT: Option<&str> = Some("openai");

    #[test]
    fn quota_is_not_a_rate_limit() {
        let body = r#"{"error":{"message":"You exceeded your current quota.","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}"#;
        let f = run(429, &[], body, None);
        assert_eq!(f.base, "quota.exhausted");
        assert_eq!(f.upstream.code.as_deref(), Some("insufficient_quota"));
        let f = run(
            429,
            &[],
            r#"{"error":{"message":"m","type":"requests","param":null,"code":"rate_limit_exceeded"}}"#,
            None,
        );
        assert_eq!(f.base, "http.429_rate_limited");
    }

    #[test]
    fn codes_map_to_bases_and_keep_param() {
        let f = run(
            400,
            &[],
            r#"{"error":{"message":"m","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}"#,
            None,
        );
        assert_eq!(f.base, "context.overflow");
        assert_eq!(f.field.as_deref(), Some("messages"));
        assert_eq!(
            f.upstream.error_type.as_deref(),
            Some("invalid_request_error")
        );
        let f = run(
            404,
            &[],
            r#"{"error":{"message":"m","type":"invalid_request_error","param":null,"code":"model_not_found"}}"#,
            None,
        );
        assert_eq!(f.base, "model.not_found");
        assert_eq!(f.field, None);
    }

    #[test]
    fn azure_content_filter_is_input_blocked() {
        let body = r#"{"error":{"message":"m","type":null,"param":"prompt","status":400,"code":"content_filter","innererror":{"code":"ResponsibleAIPolicyViolation"}}}"#;
        let f = run(400, &[], body, None);
        assert_eq!(f.base, "policy.input_blocked");
        assert_eq!(f.upstream.provider.as_deref(), Some("azure-openai"));
    }

    #[test]
    fn refusals_and_truncation_in_a_200() {
        let f = run(
            200,
            &[],
            r#"{"object":"chat.completion","choices":[{"index":0,"finish_reason":"length","message":{"role":"assistant","content":"abc"}}]}"#,
            None,
        );
        assert_eq!(f.base, "output.truncated");
        assert_eq!(f.surface, Some(crate::registry::Surface::Llm));
        let f = run(
            200,
            &[],
            r#"{"choices":[{"finish_reason":"stop","message":{"content":null,"refusal":"I can't help with that."}}]}"#,
            HINT,
        );
        assert_eq!(f.base, "policy.refusal");
        assert_eq!(f.message.as_deref(), Some("I can't help with that."));
        let f = run(
            200,
            &[],
            r#"{"object":"response","status":"incomplete","incomplete_details":{"reason":"content_filter"},"output":[]}"#,
            None,
        );
        assert_eq!(f.base, "policy.refusal");
    }

    #[test]
    fn a_normal_completion_is_not_a_failure() {
        let body = r#"{"object":"chat.completion","choices":[{"finish_reason":"stop","message":{"content":"hi","refusal":null}}]}"#;
        assert!(try_run(200, &[], body, HINT).is_none());
        let body = r#"{"object":"response","status":"completed","error":null,"incomplete_details":null,"output":[]}"#;
        assert!(try_run(200, &[], body, HINT).is_none());
    }

    #[test]
    fn a_failed_response_object_maps_its_code() {
        let body = r#"{"object":"response","status":"failed","error":{"code":"server_error","message":"m"}}"#;
        assert_eq!(run(200, &[], body, HINT).base, "http.500_internal_error");
        let body = r#"{"object":"response","status":"failed","error":{"code":"invalid_image","message":"m"}}"#;
        assert_eq!(run(200, &[], body, HINT).base, "http.400_bad_request");
    }

    #[test]
    fn google_errors_behind_the_openai_hint_stay_google() {
        let body = r#"{"error":{"code":400,"message":"m","status":"INVALID_ARGUMENT"}}"#;
        let f = run(400, &[], body, HINT);
        assert_eq!(f.upstream.provider.as_deref(), Some("google"));
        assert_eq!(f.upstream.error_type.as_deref(), Some("INVALID_ARGUMENT"));
    }

    #[test]
    fn the_surface_is_llm_only_with_evidence() {
        let body =
            r#"{"error":{"message":"m","type":"invalid_request_error","param":null,"code":null}}"#;
        assert_eq!(run(400, &[], body, None).surface, None);
        let f = run(400, &[("openai-version", "2020-10-01")], body, None);
        assert_eq!(f.surface, Some(crate::registry::Surface::Llm));
    }
}
