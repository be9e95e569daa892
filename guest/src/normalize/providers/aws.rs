//! AWS services, Amazon Bedrock included.
//!
//! The error code comes from the JSON `__type` (`ns#Code`), the
//! `x-amzn-ErrorType` header (`Code:uri`), or an XML `<Error><Code>` (S3, the
//! query protocol, EC2's `<Errors>`). The code decides, not the status: AWS
//! sends throttling as 400 (`Throttling`, `ThrottlingException`), so the codes
//! botocore's standard retry mode treats as throttling are
//! `http.429_rate_limited` whatever the status.
//!
//! botocore's special retryable codes are transient too: STS
//! `IDPCommunicationError` (`retries/special.py`) and DynamoDB's
//! `ReplicatedWriteConflictException` (`data/_retry.json`).
//!
//! Not a rate limit: `ServiceQuotaExceededException` is a quota (waiting will
//! not raise it). A Bedrock `ValidationException` whose message starts with a
//! documented overflow prefix is `context.overflow` ([`super::message_prefix`]). AWS stays a tool surface unless the hint says `bedrock`, a
//! header is `x-amzn-bedrock-*`, the code is one only Bedrock sends, or the
//! body is a Converse response (whose `stopReason` can also be a safety stop).

use super::{Response, string};
use crate::hints::MAX_HINT_MS;
use crate::json_view::View;
use crate::normalize::http::status_base;
use crate::normalize::{Finding, str_at};
use crate::observation_view::BodyView;
use crate::registry::Surface;

/// botocore's `ThrottledRetryableChecker` list: throttling whatever the status.
const THROTTLING: &[&str] = &[
    "Throttling",
    "ThrottlingException",
    "ThrottledException",
    "RequestThrottledException",
    "TooManyRequestsException",
    "ProvisionedThroughputExceededException",
    "TransactionInProgressException",
    "RequestLimitExceeded",
    "BandwidthLimitExceeded",
    "LimitExceededException",
    "RequestThrottled",
    "SlowDown",
    "PriorRequestNotComplete",
    "EC2ThrottledException",
];

/// Codes only Bedrock's runtime sends: the call was an LLM call.
const BEDROCK_ONLY: &[&str] = &[
    "ModelNotReadyException",
    "ModelTimeoutException",
    "ModelErrorException",
    "ModelStreamErrorException",
];

pub(super) fn parse(r: &Response<'_>, hinted: bool) -> Option<Finding> {
    let header_code = r.headers.get("x-amzn-errortype").and_then(clean_code);
    let mut f = match r.body {
        BodyView::Json(v) => json(v, r.status, header_code, hinted)?,
        BodyView::Text(t) => {
            xml(t, r.status).or_else(|| header_code.map(|c| error(r.status, c, None)))?
        }
        BodyView::Empty => error(r.status, header_code?, None),
    };
    if f.base == "http.429_rate_limited" || f.base == "http.503_unavailable" {
        // x-amz-retry-after is milliseconds; an HTTP Retry-After still wins later.
        f.retry_after_ms = r
            .headers
            .get("x-amz-retry-after")
            .and_then(|s| s.parse::<u64>().ok())
            .map(|ms| ms.min(MAX_HINT_MS));
    }
    let bedrock = r.hint == Some("bedrock")
        || r.headers.any_prefix("x-amzn-bedrock-")
        || f.upstream
            .code
            .as_deref()
            .is_some_and(|c| BEDROCK_ONLY.contains(&c))
        || f.surface == Some(Surface::Llm);
    f.upstream.provider = Some(if bedrock { "bedrock" } else { "aws" }.into());
    if bedrock {
        f.surface = Some(Surface::Llm);
    }
    Some(f)
}

/// `ns#Code`, `Code:uri` or `Code` → `Code`.
fn clean_code(raw: &str) -> Option<&str> {
    let after_ns = raw.rsplit_once('#').map_or(raw, |(_, c)| c);
    let code = after_ns.split(':').next().unwrap_or(after_ns).trim();
    (!code.is_empty()).then_some(code)
}

/// The base for an AWS error code, whatever the status (also used for the
/// exception classes botocore makes at run time, which are named after the code).
pub(crate) fn code_base(code: &str) -> Option<&'static str> {
    if THROTTLING.contains(&code) {
        return Some("http.429_rate_limited");
    }
    Some(match code {
        "ServiceQuotaExceededException" => "quota.exhausted",
        // botocore retries these whatever the status (`retries/special.py`,
        // `data/_retry.json`): STS cannot reach the identity provider; a DynamoDB
        // global-table write conflicted with another region's.
        "IDPCommunicationError" => "http.503_unavailable",
        "ReplicatedWriteConflictException" => "http.423_locked",
        "RequestTimeout" | "RequestTimeoutException" => "http.408_request_timeout",
        "ModelTimeoutException" => "http.504_gateway_timeout",
        "InternalError" | "InternalFailure" | "InternalServerError" | "InternalServerException" => {
            "http.500_internal_error"
        }
        "ServiceUnavailable" | "ServiceUnavailableException" | "ModelNotReadyException" => {
            "http.503_unavailable"
        }
        "ModelErrorException" | "ModelStreamErrorException" => "http.502_bad_gateway",
        "ValidationException" | "ValidationError" | "SerializationException" => {
            "http.400_bad_request"
        }
        "AccessDeniedException" | "AccessDenied" => "http.403_forbidden",
        "UnrecognizedClientException"
        | "InvalidSignatureException"
        | "SignatureDoesNotMatch"
        | "IncompleteSignature"
        | "MissingAuthenticationToken"
        | "InvalidClientTokenId"
        | "InvalidAccessKeyId"
        | "ExpiredToken"
        | "ExpiredTokenException" => "http.401_unauthorized",
        "ResourceNotFoundException" | "NoSuchKey" | "NoSuchBucket" | "NotFoundException" => {
            "http.404_not_found"
        }
        "ConflictException" | "ResourceInUseException" => "http.409_conflict",
        "ConditionalCheckFailedException" | "PreconditionFailed" => "http.412_precondition_failed",
        _ => return None,
    })
}

fn error(status: u16, code: &str, message: Option<String>) -> Finding {
    let base = code_base(code).unwrap_or_else(|| status_base(status));
    let mut f = Finding::new(base);
    f.message = message;
    super::message_prefix::refine(&mut f, "aws", Some(code), status);
    f.upstream.code = Some(code.to_owned());
    f
}

fn json(v: &View<'_>, status: u16, header_code: Option<&str>, hinted: bool) -> Option<Finding> {
    let message = string(v, "message")
        .or_else(|| string(v, "Message"))
        .or_else(|| string(v, "errorMessage"));
    let body_code = str_at(v, "__type").and_then(clean_code).or_else(|| {
        // awsQueryCompatible JSON and other SDK renderings, accepted with a hint.
        hinted
            .then(|| v.pointer("/Error/Code").or_else(|| v.get("code")))
            .flatten()
            .and_then(View::as_str)
    });
    match body_code.or(header_code) {
        Some(code) => Some(error(status, code, message)),
        None => converse(v),
    }
}

/// Bedrock Converse (`stopReason`) and InvokeModel guardrail interventions.
fn converse(v: &View<'_>) -> Option<Finding> {
    let (base, value, member) = match str_at(v, "stopReason") {
        Some(r @ ("guardrail_intervened" | "content_filtered")) => {
            ("policy.refusal", r, "stopReason")
        }
        Some(r @ "max_tokens") => ("output.truncated", r, "stopReason"),
        Some(r @ "model_context_window_exceeded") => ("context.overflow", r, "stopReason"),
        _ => match str_at(v, "amazon-bedrock-guardrailAction") {
            Some(a @ "INTERVENED") => ("policy.refusal", a, "amazon-bedrock-guardrailAction"),
            _ => return None,
        },
    };
    let mut f = Finding::new(base);
    f.surface = Some(Surface::Llm);
    f.upstream.code = Some(value.to_owned());
    f.upstream.error_type = Some(member.to_owned());
    Some(f)
}

/// The text of the first `<name>…</name>` element, entities decoded.
fn tag(xml: &str, name: &str) -> Option<String> {
    let open = format!("<{name}>");
    let close = format!("</{name}>");
    let start = xml.find(&open)? + open.len();
    let rest = xml.get(start..)?;
    let end = rest.find(&close)?;
    let text = rest.get(..end)?.trim();
    Some(
        text.replace("&lt;", "<")
            .replace("&gt;", ">")
            .replace("&quot;", "\"")
            .replace("&apos;", "'")
            .replace("&amp;", "&"),
    )
}

/// `<Error><Code>…</Code><Message>…</Message><RequestId>…</RequestId></Error>`.
fn xml(t: &str, status: u16) -> Option<Finding> {
    let body = t.trim_start();
    if !body.starts_with('<') || !body.contains("<Error") {
        return None;
    }
    let code = tag(body, "Code")?;
    let code = clean_code(&code)?.to_owned();
    let mut f = error(status, &code, tag(body, "Message"));
    f.request_id = tag(body, "RequestId").or_else(|| tag(body, "RequestID"));
    f.upstream.error_type = tag(body, "Type");
    Some(f)
}

#[cfg(test)]
mod tests {
    use super::super::test_support::{run, try_run};
    use crate::registry::Surface;

    #[test]
    fn throttling_is_a_rate_limit_even_as_400() {
        let body = r#"{"__type":"com.amazonaws.dynamodb.v20120810#ProvisionedThroughputExceededException","message":"m"}"#;
        let f = run(400, &[], body, None);
        assert_eq!(f.base, "http.429_rate_limited");
        assert_eq!(
            f.upstream.code.as_deref(),
            Some("ProvisionedThroughputExceededException")
        );
        assert_eq!(f.upstream.provider.as_deref(), Some("aws"));
        assert_eq!(f.surface, None);
    }

    #[test]
    fn header_code_and_bedrock_surface() {
        let h = [(
            "x-amzn-ErrorType",
            "ThrottlingException:http://internal.amazon.com/coral/com.amazon.coral.availability/",
        )];
        let f = run(429, &h, r#"{"message":"m"}"#, Some("bedrock"));
        assert_eq!(f.base, "http.429_rate_limited");
        assert_eq!(f.upstream.code.as_deref(), Some("ThrottlingException"));
        assert_eq!(f.surface, Some(Surface::Llm));
        let f = run(
            429,
            &[("x-amzn-errortype", "ModelNotReadyException")],
            "",
            None,
        );
        assert_eq!(f.base, "http.503_unavailable");
        assert_eq!(f.upstream.provider.as_deref(), Some("bedrock"));
    }

    #[test]
    fn codes_map_to_bases() {
        for (status, code, base) in [
            (402, "ServiceQuotaExceededException", "quota.exhausted"),
            (400, "ValidationException", "http.400_bad_request"),
            (403, "AccessDeniedException", "http.403_forbidden"),
            (400, "UnrecognizedClientException", "http.401_unauthorized"),
            (403, "ExpiredTokenException", "http.401_unauthorized"),
            (404, "ResourceNotFoundException", "http.404_not_found"),
            (408, "ModelTimeoutException", "http.504_gateway_timeout"),
            (424, "ModelErrorException", "http.502_bad_gateway"),
            (500, "InternalServerException", "http.500_internal_error"),
            (418, "SomethingNew", "http.4xx_client_error"),
        ] {
            let body = format!(r#"{{"__type":"{code}","message":"m"}}"#);
            assert_eq!(run(status, &[], &body, None).base, base, "{code}");
        }
    }

    #[test]
    fn xml_errors() {
        let body = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>SlowDown</Code><Message>Please reduce your request rate &amp; retry.</Message><RequestId>4442587FB7D0A2F9</RequestId></Error>";
        let f = run(503, &[("x-amz-retry-after", "1200")], body, None);
        assert_eq!(f.base, "http.429_rate_limited");
        assert_eq!(f.retry_after_ms, Some(1200));
        assert_eq!(f.request_id.as_deref(), Some("4442587FB7D0A2F9"));
        assert_eq!(
            f.message.as_deref(),
            Some("Please reduce your request rate & retry.")
        );
        let body = "<Response><Errors><Error><Code>RequestLimitExceeded</Code><Message>m</Message></Error></Errors><RequestID>abc</RequestID></Response>";
        let f = run(503, &[], body, None);
        assert_eq!(f.base, "http.429_rate_limited");
        assert_eq!(f.request_id.as_deref(), Some("abc"));
        assert!(try_run(500, &[], "<html><body>oops</body></html>", None).is_none());
    }

    #[test]
    fn converse_stops() {
        let f = run(
            200,
            &[],
            r#"{"output":{"message":{"role":"assistant","content":[]}},"stopReason":"guardrail_intervened"}"#,
            None,
        );
        assert_eq!(f.base, "policy.refusal");
        assert_eq!(f.upstream.provider.as_deref(), Some("bedrock"));
        let f = run(200, &[], r#"{"stopReason":"max_tokens"}"#, Some("bedrock"));
        assert_eq!(f.base, "output.truncated");
        assert!(try_run(200, &[], r#"{"stopReason":"end_turn"}"#, Some("bedrock")).is_none());
    }
}
