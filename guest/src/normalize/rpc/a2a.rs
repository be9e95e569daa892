//! A2A v1.0 error details: the `google.rpc.ErrorInfo` reason that names the
//! A2A error in every binding (JSON-RPC `error.data[]`, REST `error.details[]`,
//! gRPC `status.details[]`), and `google.rpc.BadRequest` field violations.
//!
//! | A2A error | JSON-RPC | REST | ErrorInfo reason | code |
//! | --- | --- | --- | --- | --- |
//! | TaskNotFoundError | -32001 | 404 | `TASK_NOT_FOUND` | `a2a.task_not_found` |
//! | TaskNotCancelableError | -32002 | 400 | `TASK_NOT_CANCELABLE` | `a2a.task_not_cancelable` |
//! | PushNotificationNotSupportedError | -32003 | 400 | `PUSH_NOTIFICATION_NOT_SUPPORTED` | `a2a.push_not_supported` |
//! | UnsupportedOperationError | -32004 | 400 | `UNSUPPORTED_OPERATION` | `a2a.unsupported_operation` |
//! | ContentTypeNotSupportedError | -32005 | 400 | `CONTENT_TYPE_NOT_SUPPORTED` | `a2a.content_type_not_supported` |
//! | InvalidAgentResponseError | -32006 | 500 | `INVALID_AGENT_RESPONSE` | `a2a.invalid_agent_response` |
//! | ExtendedAgentCardNotConfiguredError | -32007 | 400 | `EXTENDED_AGENT_CARD_NOT_CONFIGURED` | `a2a.extended_card_not_configured` |
//! | ExtensionSupportRequiredError | -32008 | 400 | `EXTENSION_SUPPORT_REQUIRED` | `a2a.extension_support_required` |
//! | VersionNotSupportedError | -32009 | 400 | `VERSION_NOT_SUPPORTED` | `a2a.version_not_supported` |
//!
//! The reason is the error type in UPPER_SNAKE_CASE without `Error`
//! (A2A specification v1.0, sections 5.4, 9.5 and 11.6), domain `a2a-protocol.org`.

use crate::json_view::View;
use crate::normalize::{Finding, str_at};

/// The ErrorInfo domain of A2A errors.
pub(crate) const DOMAIN: &str = "a2a-protocol.org";

/// The base of an A2A ErrorInfo reason.
pub(crate) fn reason_base(reason: &str) -> Option<&'static str> {
    Some(match reason {
        "TASK_NOT_FOUND" => "a2a.task_not_found",
        "TASK_NOT_CANCELABLE" => "a2a.task_not_cancelable",
        "PUSH_NOTIFICATION_NOT_SUPPORTED" => "a2a.push_not_supported",
        "UNSUPPORTED_OPERATION" => "a2a.unsupported_operation",
        "CONTENT_TYPE_NOT_SUPPORTED" => "a2a.content_type_not_supported",
        "INVALID_AGENT_RESPONSE" => "a2a.invalid_agent_response",
        "EXTENDED_AGENT_CARD_NOT_CONFIGURED" | "AUTHENTICATED_EXTENDED_CARD_NOT_CONFIGURED" => {
            "a2a.extended_card_not_configured"
        }
        "EXTENSION_SUPPORT_REQUIRED" => "a2a.extension_support_required",
        "VERSION_NOT_SUPPORTED" => "a2a.version_not_supported",
        _ => return None,
    })
}

/// A detail's type name without its `type.googleapis.com/` prefix.
fn detail_type<'v>(d: &'v View<'_>) -> Option<&'v str> {
    let t = str_at(d, "@type")?;
    Some(t.rsplit_once('/').map_or(t, |(_, name)| name))
}

/// The A2A reason in a list of google.rpc details, if any.
pub(crate) fn reason<'v>(details: &'v [View<'v>]) -> Option<&'v str> {
    details
        .iter()
        .filter(|d| detail_type(d) == Some("google.rpc.ErrorInfo"))
        .filter(|d| str_at(d, "domain").is_none_or(|dom| dom == DOMAIN))
        .find_map(|d| str_at(d, "reason"))
        .filter(|r| reason_base(r).is_some())
}

/// Apply a v1.0 `error.data` array: an A2A ErrorInfo reason decides the code
/// when the JSON-RPC code alone did not name an A2A error; the first
/// BadRequest field violation is the field.
pub(crate) fn apply_details(data: Option<&View<'_>>, f: &mut Finding) {
    let Some(details) = data.and_then(View::as_array) else {
        return;
    };
    if let Some(base) = reason(details).and_then(reason_base)
        && !f.base.starts_with("a2a.")
    {
        f.base = base;
    }
    if f.field.is_none() {
        f.field = details
            .iter()
            .filter(|d| detail_type(d) == Some("google.rpc.BadRequest"))
            .filter_map(|d| d.get("fieldViolations").and_then(View::as_array))
            .flatten()
            .find_map(|v| str_at(v, "field"))
            .map(str::to_owned);
    }
}
