//! Google APIs (Gemini API, Vertex AI and every API on the google.rpc error model).
//!
//! Errors: `{"error": {"code": 429, "message", "status": "RESOURCE_EXHAUSTED",
//! "details": [{"@type": "type.googleapis.com/google.rpc.QuotaFailure", ...}]}}`,
//! also wrapped in an array (`[{"error": ...}]`, streaming endpoints). The status
//! name decides the base; the typed details refine it: `ErrorInfo.reason`,
//! `QuotaFailure` violations, `RetryInfo.retryDelay`, `BadRequest` field
//! violations, `Help` links and `RequestInfo.requestId`.
//!
//! `RESOURCE_EXHAUSTED` is a rate limit unless the details show a quota that
//! waiting seconds cannot refill: a per-day or per-month quota id or metric, a
//! quota whose limit is `0` (the plan does not include it), or disabled billing.
//! The SDKs retry every 429; this is where they waste a day of retries.
//!
//! Failures inside a 200 (generateContent): `promptFeedback.blockReason` and
//! `candidates[].finishReason`.

use super::{Response, code_text, items, join_fields, string};
use crate::hints;
use crate::json_view::View;
use crate::normalize::http::status_base;
use crate::normalize::rpc::a2a;
use crate::normalize::{Finding, str_at};
use crate::observation_view::BodyView;
use crate::registry::Surface;

/// Services whose errors are LLM errors.
const LLM_SERVICES: &[&str] = &[
    "generativelanguage.googleapis.com",
    "aiplatform.googleapis.com",
];

pub(super) fn parse(r: &Response<'_>, hinted: bool) -> Option<Finding> {
    let BodyView::Json(v) = r.body else {
        return None;
    };
    let wrapped = v
        .as_array()
        .and_then(|a| a.iter().find_map(|x| x.get("error")));
    let err = v.get("error").or(wrapped).filter(|e| e.is_object());
    let mut f = match err {
        Some(e) if hinted || wrapped.is_some() || is_rpc_error(e) => error(r.status, e),
        _ => generate_content(v)?,
    };
    if f.base.starts_with("a2a.") {
        // An A2A agent's REST binding answers in the google.rpc.Status shape.
        f.upstream.provider = Some("a2a".into());
        f.surface = Some(Surface::Agent);
        return Some(f);
    }
    f.upstream.provider = Some("google".into());
    if hinted {
        f.surface = Some(Surface::Llm);
    }
    Some(f)
}

/// The google.rpc shape: a canonical status name, or a numeric code with details.
fn is_rpc_error(e: &View<'_>) -> bool {
    str_at(e, "status").is_some_and(|s| status_name_base(s).is_some())
        || (e.get("code").is_some_and(View::is_u64) && e.get("details").is_some_and(View::is_array))
}

/// The base for a canonical status name (google.rpc.Code).
pub(crate) fn status_name_base(name: &str) -> Option<&'static str> {
    Some(match name {
        "INVALID_ARGUMENT" | "FAILED_PRECONDITION" | "OUT_OF_RANGE" => "http.400_bad_request",
        "UNAUTHENTICATED" => "http.401_unauthorized",
        "PERMISSION_DENIED" => "http.403_forbidden",
        "NOT_FOUND" => "http.404_not_found",
        "ALREADY_EXISTS" | "ABORTED" => "http.409_conflict",
        "RESOURCE_EXHAUSTED" => "http.429_rate_limited",
        "CANCELLED" => "exception.cancelled",
        "DATA_LOSS" | "UNKNOWN" | "INTERNAL" => "http.500_internal_error",
        "NOT_IMPLEMENTED" | "UNIMPLEMENTED" => "http.501_not_implemented",
        "UNAVAILABLE" => "http.503_unavailable",
        "DEADLINE_EXCEEDED" => "http.504_gateway_timeout",
        _ => return None,
    })
}

/// `ErrorInfo.reason` values that say more than the status name.
fn reason_base(reason: &str) -> Option<&'static str> {
    Some(match reason {
        "API_KEY_INVALID" | "API_KEY_EXPIRED" | "ACCESS_TOKEN_EXPIRED" | "CREDENTIALS_MISSING" => {
            "http.401_unauthorized"
        }
        "SERVICE_DISABLED" | "API_KEY_SERVICE_BLOCKED" | "CONSUMER_SUSPENDED" => {
            "http.403_forbidden"
        }
        "BILLING_DISABLED" => "quota.exhausted",
        "RATE_LIMIT_EXCEEDED" => "http.429_rate_limited",
        _ => return None,
    })
}

/// A detail's type name without its `type.googleapis.com/` prefix.
fn detail_type<'v>(d: &'v View<'_>) -> Option<&'v str> {
    let t = str_at(d, "@type")?;
    Some(t.rsplit_once('/').map_or(t, |(_, name)| name))
}

/// A quota id or metric that refills only over a day or longer.
fn is_long_period(id: &str) -> bool {
    // The id's ASCII letters and digits, lowercased, searched in one pass
    // without a copy: the last 8 of them are kept in a u64, and each period
    // word is compared with its tail. (A non-ASCII character is never ASCII
    // alphanumeric, nor is any of its bytes.)
    const WORDS: [(u64, u64); 4] = [
        packed(b"perday"),
        packed(b"permonth"),
        packed(b"daily"),
        packed(b"monthly"),
    ];
    // Before 8 bytes are in, the window's high bytes are 0, which no word has.
    let mut window = 0u64;
    for b in id.bytes().filter(u8::is_ascii_alphanumeric) {
        window = (window << 8) | u64::from(b.to_ascii_lowercase());
        if WORDS.iter().any(|&(word, mask)| window & mask == word) {
            return true;
        }
    }
    false
}

/// A word of at most 8 bytes as the tail of a [`is_long_period`] window, and its mask.
const fn packed(word: &[u8]) -> (u64, u64) {
    let mut v = 0u64;
    let mut rest = word;
    while let [first, tail @ ..] = rest {
        v = (v << 8) | *first as u64;
        rest = tail;
    }
    let mask = if word.len() >= 8 {
        u64::MAX
    } else {
        (1u64 << (8 * word.len())) - 1
    };
    (v, mask)
}

/// Whether the details show a quota that waiting seconds will not refill.
fn exhausted_quota(details: &[&View<'_>]) -> bool {
    details.iter().any(|d| match detail_type(d) {
        Some("google.rpc.QuotaFailure") => items(d, "violations").any(|v| {
            ["quotaId", "quotaMetric", "quota_id", "quota_metric"]
                .iter()
                .filter_map(|k| str_at(v, k))
                .any(is_long_period)
                || code_text(v.get("quotaValue")).as_deref() == Some("0")
        }),
        Some("google.rpc.ErrorInfo") => d.get("metadata").is_some_and(|m| {
            ["quota_limit", "quota_metric", "quota_id"]
                .iter()
                .filter_map(|k| str_at(m, k))
                .any(is_long_period)
                || code_text(m.get("quota_limit_value")).as_deref() == Some("0")
        }),
        _ => false,
    })
}

fn error(status: u16, e: &View<'_>) -> Finding {
    let details: Vec<&View<'_>> = items(e, "details").collect();
    let of = |name: &'static str| {
        details
            .iter()
            .copied()
            .filter(move |d| detail_type(d) == Some(name))
    };
    let info = of("google.rpc.ErrorInfo").next();
    let reason = info.and_then(|i| str_at(i, "reason"));
    let name = str_at(e, "status");
    let http = e
        .get("code")
        .and_then(View::as_u64)
        .and_then(|c| u16::try_from(c).ok())
        .filter(|c| (400..600).contains(c));
    let a2a = info
        .filter(|i| str_at(i, "domain") == Some(a2a::DOMAIN))
        .and(reason)
        .and_then(a2a::reason_base);
    let mut base = a2a
        .or_else(|| reason.and_then(reason_base))
        .or_else(|| name.and_then(status_name_base))
        .unwrap_or_else(|| {
            status_base(if (400..600).contains(&status) {
                status
            } else {
                http.unwrap_or(status)
            })
        });
    if base == "http.429_rate_limited" && exhausted_quota(&details) {
        base = "quota.exhausted";
    }
    let mut f = Finding::new(base);
    f.message = string(e, "message");
    f.upstream.code = reason.map(str::to_owned);
    f.upstream.error_type = name.map(str::to_owned);
    f.retry_after_ms = of("google.rpc.RetryInfo")
        .find_map(|d| str_at(d, "retryDelay"))
        .and_then(hints::duration_to_ms);
    f.field = join_fields(
        of("google.rpc.BadRequest")
            .flat_map(|d| items(d, "fieldViolations"))
            .filter_map(|v| str_at(v, "field")),
    );
    f.docs_url = of("google.rpc.Help")
        .flat_map(|d| items(d, "links"))
        .find_map(|l| string(l, "url"));
    f.request_id = of("google.rpc.RequestInfo").find_map(|d| string(d, "requestId"));
    let service = info.and_then(|i| {
        str_at(i, "domain")
            .filter(|d| LLM_SERVICES.contains(d))
            .or_else(|| i.pointer("/metadata/service").and_then(View::as_str))
    });
    let metric_service = of("google.rpc.QuotaFailure")
        .flat_map(|d| items(d, "violations"))
        .filter_map(|v| str_at(v, "quotaMetric"))
        .find_map(|m| m.split('/').next());
    if service
        .or(metric_service)
        .is_some_and(|s| LLM_SERVICES.contains(&s))
    {
        f.surface = Some(Surface::Llm);
    }
    f
}

/// Failures inside a generateContent response (or a streamed array of them).
fn generate_content(v: &View<'_>) -> Option<Finding> {
    let chunks: Vec<&View<'_>> = match v.as_array() {
        Some(a) => a.iter().collect(),
        None => vec![v],
    };
    let mut truncated = None;
    for c in chunks {
        if let Some(block) = c
            .pointer("/promptFeedback/blockReason")
            .and_then(View::as_str)
            .filter(|b| !b.is_empty() && *b != "BLOCK_REASON_UNSPECIFIED")
        {
            let mut f = stop("policy.input_blocked", block, "promptFeedback.blockReason");
            f.message = c
                .pointer("/promptFeedback/blockReasonMessage")
                .and_then(View::as_str)
                .map(str::to_owned);
            return Some(f);
        }
        for cand in items(c, "candidates") {
            let Some(reason) = str_at(cand, "finishReason") else {
                continue;
            };
            let base = match reason {
                "SAFETY"
                | "RECITATION"
                | "BLOCKLIST"
                | "PROHIBITED_CONTENT"
                | "SPII"
                | "IMAGE_SAFETY"
                | "IMAGE_PROHIBITED_CONTENT"
                | "IMAGE_RECITATION" => "policy.refusal",
                "MALFORMED_FUNCTION_CALL" | "UNEXPECTED_TOOL_CALL" | "TOO_MANY_TOOL_CALLS" => {
                    "output.malformed_tool_call"
                }
                "MAX_TOKENS" => {
                    truncated = Some(stop("output.truncated", reason, "finishReason"));
                    continue;
                }
                _ => continue,
            };
            let mut f = stop(base, reason, "finishReason");
            f.message = string(cand, "finishMessage");
            return Some(f);
        }
    }
    truncated
}

fn stop(base: &'static str, value: &str, member: &str) -> Finding {
    let mut f = Finding::new(base);
    f.surface = Some(Surface::Llm);
    f.upstream.code = Some(value.to_owned());
    f.upstream.error_type = Some(member.to_owned());
    f
}

#[cfg(test)]
mod tests {
    use super::super::test_support::{run, try_run};
    use crate::registry::Surface;

    fn exhausted(violation: &str) -> String {
        format!(
            r#"{{"error":{{"code":429,"message":"m","status":"RESOURCE_EXHAUSTED","details":[
            {{"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[{violation}]}},
            {{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"37s"}}]}}}}"#
        )
    }

    #[test]
    fn per_minute_quota_is_a_rate_limit_with_retry_delay() {
        let v = r#"{"quotaMetric":"generativelanguage.googleapis.com/generate_content_free_tier_requests","quotaId":"GenerateRequestsPerMinutePerProjectPerModel-FreeTier"}"#;
        let f = run(429, &[], &exhausted(v), None);
        assert_eq!(f.base, "http.429_rate_limited");
        assert_eq!(f.retry_after_ms, Some(37_000));
        assert_eq!(f.surface, Some(Surface::Llm));
        assert_eq!(f.upstream.error_type.as_deref(), Some("RESOURCE_EXHAUSTED"));
    }

    #[test]
    fn per_day_or_zero_quota_is_exhausted() {
        let v = r#"{"quotaMetric":"generativelanguage.googleapis.com/generate_requests_per_model_per_day","quotaId":"GenerateRequestsPerDayPerProjectPerModel"}"#;
        assert_eq!(run(429, &[], &exhausted(v), None).base, "quota.exhausted");
        let v = r#"{"quotaId":"GenerateContentInputTokensPerModelPerMinute-FreeTier","quotaValue":"0"}"#;
        assert_eq!(run(429, &[], &exhausted(v), None).base, "quota.exhausted");
    }

    #[test]
    fn array_wrapped_without_details() {
        let body = r#"[{"error":{"code":503,"message":"m","status":"UNAVAILABLE"}}]"#;
        let f = run(503, &[], body, None);
        assert_eq!(f.base, "http.503_unavailable");
        assert_eq!(f.surface, None);
    }

    #[test]
    fn error_info_and_bad_request_details() {
        let body = r#"{"error":{"code":400,"message":"m","status":"INVALID_ARGUMENT","details":[
            {"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"API_KEY_INVALID","domain":"googleapis.com","metadata":{"service":"generativelanguage.googleapis.com"}}]}}"#;
        let f = run(400, &[], body, None);
        assert_eq!(f.base, "http.401_unauthorized");
        assert_eq!(f.upstream.code.as_deref(), Some("API_KEY_INVALID"));
        assert_eq!(f.surface, Some(Surface::Llm));
        let body = r#"{"error":{"code":400,"message":"m","status":"INVALID_ARGUMENT","details":[
            {"@type":"type.googleapis.com/google.rpc.BadRequest","fieldViolations":[{"field":"generation_config.temperature","description":"d"}]},
            {"@type":"type.googleapis.com/google.rpc.Help","links":[{"description":"d","url":"https://ai.google.dev/x"}]}]}}"#;
        let f = run(400, &[], body, None);
        assert_eq!(f.field.as_deref(), Some("generation_config.temperature"));
        assert_eq!(f.docs_url.as_deref(), Some("https://ai.google.dev/x"));
    }

    #[test]
    fn generate_content_failures() {
        let f = run(
            200,
            &[],
            r#"{"promptFeedback":{"blockReason":"PROHIBITED_CONTENT"}}"#,
            None,
        );
        assert_eq!(f.base, "policy.input_blocked");
        let body = r#"{"candidates":[{"content":{"parts":[]},"finishReason":"SAFETY","index":0}]}"#;
        assert_eq!(run(200, &[], body, None).base, "policy.refusal");
        let body = r#"{"candidates":[{"finishReason":"MAX_TOKENS"}]}"#;
        assert_eq!(run(200, &[], body, None).base, "output.truncated");
        let body = r#"{"candidates":[{"finishReason":"MALFORMED_FUNCTION_CALL"}]}"#;
        assert_eq!(run(200, &[], body, None).base, "output.malformed_tool_call");
        let body = r#"{"candidates":[{"finishReason":"STOP"}],"promptFeedback":{}}"#;
        assert!(try_run(200, &[], body, Some("gemini")).is_none());
    }

    #[test]
    fn long_periods_are_found_in_the_flattened_id() {
        // The copying form this replaced, as the reference.
        let flattened = |id: &str| {
            let flat: String = id
                .chars()
                .filter(|c| c.is_ascii_alphanumeric())
                .map(|c| c.to_ascii_lowercase())
                .collect();
            ["perday", "permonth", "daily", "monthly"]
                .iter()
                .any(|p| flat.contains(p))
        };
        for id in [
            "GenerateRequestsPerDayPerProjectPerModel-FreeTier",
            "GenerateRequestsPerMinutePerProjectPerModel-FreeTier",
            "per-day",
            "Per_Month",
            "dai ly",
            "MONTHLY",
            "perda",
            "p\u{e9}rday",
            "pér-day",
            "dailé",
            "",
            "d",
            "monthl",
        ] {
            assert_eq!(super::is_long_period(id), flattened(id), "{id}");
        }
    }
}
