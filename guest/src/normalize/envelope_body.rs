//! Bodies that already carry an agent-readable envelope, at the top
//! level (problem+json extension members, MCP `structuredContent`) or under
//! `error`. This is what makes rendered envelopes round-trip through `classify`.

use super::Finding;
use crate::hints;
use crate::json_view::View;
use crate::model::{Category, ErrorClass, Severity};
use crate::registry;

/// The object holding envelope members, if `v` is (or wraps) one. An envelope is
/// an object with a string `code` and at least one of `retryable`, `hint`,
/// `severity`, `category`, `retry_after_ms`.
pub(crate) fn find<'v>(v: &'v View<'v>) -> Option<&'v View<'v>> {
    let is_env = |o: &View<'_>| {
        o.get("code").is_some_and(View::is_string)
            && [
                "retryable",
                "hint",
                "severity",
                "category",
                "retry_after_ms",
                "class",
            ]
            .iter()
            .any(|k| o.get(k).is_some())
    };
    if let Some(e) = v.get("error").filter(|e| is_env(e)) {
        return Some(e);
    }
    if is_env(v) {
        return Some(v);
    }
    None
}

/// Apply the envelope members of `e` to `f`: a registry code is adopted, any
/// other code is kept as the upstream code; explicit fields win over derived ones.
pub(crate) fn apply(e: &View<'_>, f: &mut Finding) {
    if let Some(code) = e.get("code").and_then(View::as_str) {
        if registry::lookup(code).is_some() {
            f.adopted_code = Some(code.to_owned());
        } else if f.upstream.code.is_none() {
            f.upstream.code = Some(code.to_owned());
        }
    }
    let s = |k: &str| e.get(k).and_then(View::as_str).map(str::to_owned);
    if let Some(m) = s("message").or_else(|| s("detail")) {
        f.message = Some(m);
    }
    if let Some(v) = e.get("field") {
        match v {
            View::String(x) => f.field = Some(x.as_ref().to_owned()),
            View::Array(xs) => {
                let parts: Vec<&str> = xs.iter().filter_map(View::as_str).collect();
                if !parts.is_empty() {
                    f.field = Some(parts.join(","));
                }
            }
            _ => {}
        }
    }
    if let Some(v) = e.get("allowed_values").filter(|v| !v.is_null()) {
        f.allowed_values = Some(v.to_value());
    }
    if let Some(v) = e.get("suggested_value").filter(|v| !v.is_null()) {
        f.suggested_value = Some(v.to_value());
    }
    if let Some(h) = s("hint") {
        f.hint = Some(h);
    }
    if let Some(b) = e.get("retryable").and_then(View::as_bool) {
        f.retryable = Some(b);
    }
    if let Some(ms) = e.get("retry_after_ms").and_then(hints::ms_value) {
        f.retry_after_ms = Some(ms);
    } else if let Some(ms) = e.get("retry_after").and_then(hints::seconds_value_to_ms) {
        f.retry_after_ms = Some(ms);
    }
    if let Some(x) = s("severity").as_deref().and_then(Severity::parse) {
        f.severity = Some(x);
    }
    if let Some(x) = s("category").as_deref().and_then(Category::parse) {
        f.category = Some(x);
    }
    if let Some(x) = s("class").as_deref().and_then(ErrorClass::parse) {
        f.class = Some(x);
    }
    if let Some(x) = s("request_id") {
        f.request_id = Some(x);
    }
    if let Some(x) = s("docs_url") {
        f.docs_url = Some(x);
    }
    if let Some(rel) = e.get("related_codes").and_then(View::as_array) {
        for r in rel.iter().filter_map(View::as_str) {
            if !f.related_codes.iter().any(|x| x == r) {
                f.related_codes.push(r.to_owned());
            }
        }
    }
}

/// The minimal tool error: `{"error": "rate_limit", "message": ..., "retry_after": 60}`.
pub(crate) fn apply_minimal(v: &View<'_>, f: &mut Finding) {
    if let Some(code) = v.get("error").and_then(View::as_str) {
        if f.upstream.code.is_none() {
            f.upstream.code = Some(code.to_owned());
        }
        if let Some(m) = v.get("message").and_then(View::as_str) {
            f.message = Some(m.to_owned());
        }
        if let Some(ms) = v.get("retry_after_ms").and_then(hints::ms_value) {
            f.retry_after_ms = Some(ms);
        } else if let Some(ms) = v.get("retry_after").and_then(hints::seconds_value_to_ms) {
            f.retry_after_ms = Some(ms);
        }
    }
}

/// The registry base for a foreign envelope, from its category and retryable flag.
pub(crate) fn base_for(category: Option<Category>, retryable: bool) -> &'static str {
    match (category, retryable) {
        (Some(Category::Validation), _) => "http.400_bad_request",
        (Some(Category::Auth), _) => "http.401_unauthorized",
        (Some(Category::RateLimit), _) => "http.429_rate_limited",
        (Some(Category::Quota), _) => "quota.exhausted",
        (Some(Category::Timeout), _) => "timeout.total",
        (Some(Category::Network), _) => "network.error",
        (Some(Category::NotFound), _) => "http.404_not_found",
        (Some(Category::Conflict | Category::State), _) => "http.409_conflict",
        (Some(Category::Cancelled), _) => "exception.cancelled",
        (Some(Category::Dependency), true) => "http.503_unavailable",
        (Some(Category::Internal), true) | (None, true) => "http.5xx_server_error",
        (Some(Category::Internal), false) => "exception.unhandled",
        _ if retryable => "http.5xx_server_error",
        _ => "http.4xx_client_error",
    }
}
