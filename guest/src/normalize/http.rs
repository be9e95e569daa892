//! HTTP responses: provider bodies first, then the status, then server hints.
//! A streamed body (`text/event-stream`) is read for its first error event,
//! whose data is then classified like a body (see `sse`).

use super::sse::{self, StreamError};
use super::{Finding, envelope_body, providers, str_at};
use crate::error::PolicyError;
use crate::headers::HeaderList;
use crate::hints;
use crate::model::SourceKind;
use crate::observation_view::BodyView;

/// The registry base for a status code, when the body says nothing more specific.
pub(crate) fn status_base(status: u16) -> &'static str {
    match status {
        400 => "http.400_bad_request",
        401 => "http.401_unauthorized",
        402 => "http.402_payment_required",
        403 => "http.403_forbidden",
        404 => "http.404_not_found",
        405 => "http.405_method_not_allowed",
        408 => "http.408_request_timeout",
        409 => "http.409_conflict",
        410 => "http.410_gone",
        412 => "http.412_precondition_failed",
        413 => "http.413_payload_too_large",
        415 => "http.415_unsupported_media_type",
        422 => "http.422_unprocessable",
        423 => "http.423_locked",
        425 => "http.425_too_early",
        429 => "http.429_rate_limited",
        500 => "http.500_internal_error",
        501 => "http.501_not_implemented",
        502 => "http.502_bad_gateway",
        503 => "http.503_unavailable",
        504 => "http.504_gateway_timeout",
        529 => "http.529_overloaded",
        s if (400..500).contains(&s) => "http.4xx_client_error",
        s if (500..600).contains(&s) => "http.5xx_server_error",
        _ => "http.unexpected_status",
    }
}

/// Header names that carry a request id, in order of preference.
const REQUEST_ID_HEADERS: &[&str] = &[
    "x-request-id",
    "request-id",
    "x-amzn-requestid",
    "x-amz-request-id",
    "x-goog-request-id",
    "x-correlation-id",
];

/// Classify a response. `hint` is the caller's lowercase provider, if any;
/// `now_ms` the caller's clock (for an HTTP-date `Retry-After`).
pub(super) fn classify(
    status: u16,
    headers: &HeaderList<'_>,
    body: &BodyView<'_>,
    hint: Option<&str>,
    now_ms: Option<u64>,
) -> Result<Finding, PolicyError> {
    let success = (200..300).contains(&status);
    // A streamed response that failed after its status: read its error event.
    let streamed = match body {
        BodyView::Text(t) if sse::is_event_stream(headers.get("content-type"), t) => {
            sse::first_error(t)
        }
        _ => None,
    };
    let stream_body;
    let (body, in_stream) = match streamed {
        Some(StreamError::Json(v)) => {
            stream_body = BodyView::Json(v);
            (&stream_body, true)
        }
        Some(StreamError::Text(t)) => {
            let mut f = Finding::new(if success {
                "stream.error"
            } else {
                status_base(status)
            });
            f.message = Some(t);
            f.upstream.error_type = Some("error".into());
            return Ok(finish_http(f, status, headers, now_ms));
        }
        None => (body, false),
    };
    let provider_finding = providers::parse(status, headers, body, hint);
    let mut f = match provider_finding {
        Some(f) => f,
        None if in_stream && success => {
            let mut f = Finding::new("stream.error");
            if let BodyView::Json(v) = body {
                let err = v.get("error").filter(|e| e.is_object()).unwrap_or(v);
                f.message = str_at(err, "message").map(str::to_owned);
                f.upstream.code = str_at(err, "code").map(str::to_owned);
                f.upstream.error_type = str_at(err, "type").map(str::to_owned);
            }
            f
        }
        None if success => {
            return Err(PolicyError::observation(format!(
                "status {status} with no failure in the body (no error object, error event, refusal or safety stop); classify only failed calls"
            )));
        }
        None => Finding::new(status_base(status)),
    };
    if let BodyView::Json(v) = body {
        if let Some(e) = envelope_body::find(v) {
            envelope_body::apply(e, &mut f);
        } else {
            envelope_body::apply_minimal(v, &mut f);
        }
    }
    Ok(finish_http(f, status, headers, now_ms))
}

/// What every HTTP finding gets from the status and the headers.
fn finish_http(
    mut f: Finding,
    status: u16,
    headers: &HeaderList<'_>,
    now_ms: Option<u64>,
) -> Finding {
    f.upstream.source = Some(SourceKind::Http);
    f.upstream.status = Some(status);
    // Headers are the most authoritative timing hint; a body hint is used only without one.
    if let Some(ms) = hints::from_headers(headers, now_ms) {
        f.retry_after_ms = Some(ms);
    }
    // `x-should-retry` (OpenAI, Anthropic) and `stripe-should-retry` override the status.
    if let Some(b) = headers
        .flag("x-should-retry")
        .or_else(|| headers.flag("stripe-should-retry"))
    {
        f.retryable = Some(b);
    }
    if f.request_id.is_none() {
        f.request_id = REQUEST_ID_HEADERS
            .iter()
            .find_map(|h| headers.get(h))
            .map(str::to_owned);
    }
    f
}
