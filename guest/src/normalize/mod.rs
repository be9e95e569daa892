//! Normalization: any observation in, one envelope out.
//!
//! Classification comes from structure only: status codes, provider error codes
//! and types, JSON-RPC codes, task states, headers, exception and error-code
//! names. Messages are carried through, never matched.

mod envelope_body;
mod exception;
mod frameworks;
mod http;
pub(crate) mod providers;
pub(crate) mod rpc;
mod sse;
mod transport;

pub use providers::message_prefix::{PrefixRule, RULES as MESSAGE_PREFIX_RULES};

use crate::error::PolicyError;
use crate::json_view::View;
use crate::model::{CallKind, Category, Envelope, ErrorClass, Severity, SourceKind, Upstream};
use crate::observation::Observation;
use crate::observation_view::{FailureView, ObservationView};
use crate::registry::{self, Surface};
use serde_json::Value;

/// Longest message kept, in bytes; longer ones are cut at a character boundary.
pub const MAX_MESSAGE: usize = 1000;

/// What a normalizer found, before it is completed from the registry.
#[derive(Clone, Debug, Default)]
pub struct Finding {
    /// Registry base, e.g. `http.429_rate_limited`.
    pub base: &'static str,
    /// A full registry code given by the server itself (adopted as-is).
    pub adopted_code: Option<String>,
    /// Surface implied by the shape (e.g. an LLM provider body), if any.
    pub surface: Option<Surface>,
    /// Upstream message.
    pub message: Option<String>,
    /// Offending field.
    pub field: Option<String>,
    /// Allowed values.
    pub allowed_values: Option<Value>,
    /// Suggested value.
    pub suggested_value: Option<Value>,
    /// The server's own hint.
    pub hint: Option<String>,
    /// The server's retry delay, in ms.
    pub retry_after_ms: Option<u64>,
    /// The server's explicit retryable signal (`x-should-retry`, `data.retryable`, ...).
    pub retryable: Option<bool>,
    /// The server's severity, when it gave one.
    pub severity: Option<Severity>,
    /// The server's category, when it gave one.
    pub category: Option<Category>,
    /// The server's class, when it gave one (a rendered envelope).
    pub class: Option<ErrorClass>,
    /// Request id from the response.
    pub request_id: Option<String>,
    /// Sibling codes given by the server (full codes).
    pub related_codes: Vec<String>,
    /// Documentation link from the server.
    pub docs_url: Option<String>,
    /// What was observed.
    pub upstream: Upstream,
}

impl Finding {
    /// A finding of `base` with nothing else known.
    pub fn new(base: &'static str) -> Self {
        Self {
            base,
            ..Self::default()
        }
    }
}

/// Normalize an observation into an envelope.
pub fn classify(obs: &Observation) -> Result<Envelope, PolicyError> {
    classify_view(&ObservationView::from_observation(obs))
}

/// Normalize a borrowed observation into an envelope (what every entry point runs).
pub(crate) fn classify_view(obs: &ObservationView<'_>) -> Result<Envelope, PolicyError> {
    let finding = find(obs, None)?;
    Ok(finish(finding, obs))
}

/// What an observation shows, before the registry completes it. `inherited`
/// is the provider hint of the exception that holds it as a member.
pub(crate) fn find(
    obs: &ObservationView<'_>,
    inherited: Option<&str>,
) -> Result<Finding, PolicyError> {
    Ok(match &obs.failure {
        FailureView::Http {
            status,
            headers,
            body,
        } => http::classify(
            *status,
            headers,
            body,
            obs.provider.as_deref().or(inherited),
            obs.now_ms,
        )?,
        FailureView::Rpc { protocol, message } => rpc::classify(*protocol, message, obs)?,
        FailureView::Network { code, message } => transport::network(code, message.as_deref()),
        FailureView::Exception {
            type_name,
            message,
            detail,
        } => match detail {
            None => transport::exception(type_name, message.as_deref()),
            Some(d) => exception::classify(type_name, message.as_deref(), d, obs, inherited),
        },
        FailureView::Timeout { phase, after_ms } => transport::timeout(*phase, *after_ms),
    })
}

/// The surface of the call: the caller's word, else the shape's, else the source's.
fn surface(obs: &ObservationView<'_>, finding: &Finding) -> Surface {
    if let Some(c) = obs.call {
        return c.into();
    }
    if let Some(s) = finding.surface {
        return s;
    }
    if obs
        .provider
        .as_deref()
        .is_some_and(providers::is_llm_provider)
    {
        return Surface::Llm;
    }
    match finding.upstream.source {
        Some(SourceKind::A2a) => CallKind::Agent.into(),
        _ => Surface::Tool,
    }
}

/// Complete a finding from the registry into an envelope.
pub(crate) fn finish(f: Finding, obs: &ObservationView<'_>) -> Envelope {
    let want = surface(obs, &f);
    // A code adopted from the server must be one of ours; otherwise derive it.
    let adopted = f.adopted_code.as_deref().and_then(registry::lookup);
    let (code, info) = match adopted {
        Some(info) => (info.code.clone(), Some(info)),
        None => {
            let def = registry::def(f.base).or_else(|| registry::def("exception.unhandled"));
            match def {
                Some(d) => {
                    let d = refine(d, want);
                    let s = registry::surface_for(d, want);
                    let code = [s.as_str(), ".", d.base].concat();
                    let info = registry::lookup(&code);
                    (code, info)
                }
                None => (format!("{}.exception.unhandled", want.as_str()), None),
            }
        }
    };
    let (mut class, default_retryable, mut severity, mut category, default_message, default_hint) =
        match info {
            Some(i) => (
                i.class,
                i.retryable,
                i.severity,
                i.category,
                i.message,
                i.recovery,
            ),
            None => (
                ErrorClass::Permanent,
                false,
                Severity::Error,
                Category::Internal,
                "The call failed.",
                "Do not retry unchanged.",
            ),
        };
    let mut retryable = f.retryable.unwrap_or(default_retryable);
    // A server's explicit retryable signal overrides the code's default class.
    if retryable && !default_retryable {
        class = ErrorClass::Transient;
    } else if !retryable && default_retryable {
        class = ErrorClass::Permanent;
    }
    if let Some(c) = f.class {
        class = c;
    }
    // Only transient failures are retryable, whatever the server said.
    if class != ErrorClass::Transient {
        retryable = false;
    }
    if let Some(s) = f.severity {
        severity = s;
    }
    if let Some(c) = f.category {
        category = c;
    }
    let hint_from_server = f.hint.as_deref().is_some_and(|h| !h.trim().is_empty());
    let hint = match (&f.hint, retryable, f.retry_after_ms) {
        (Some(h), _, _) if hint_from_server => one_line(h),
        (_, true, Some(ms)) => {
            wait_hint(ms)
        }
        // The server's explicit signal contradicts the code's default: so must the hint.
        (_, false, _) if default_retryable => {
            "Do not retry: the server marked this failure as not retryable; fix the request or report the failure.".to_owned()
        }
        (_, true, None) if !default_retryable => {
            "Retry after the backoff delay with the same idempotency key: the server marked this failure as retryable.".to_owned()
        }
        _ => match &f.field {
            Some(field) if !retryable && category == Category::Validation => {
                let sentence = default_hint.trim_end_matches('.');
                format!("{sentence} (field `{field}`).")
            }
            _ => default_hint.to_owned(),
        },
    };
    let mut related = f.related_codes;
    if let Some(i) = info {
        for r in &i.related_codes {
            if !related.contains(r) {
                related.push(r.clone());
            }
        }
    }
    Envelope {
        code,
        message: f
            .message
            .as_deref()
            .map(one_line)
            .filter(|m| !m.is_empty())
            .unwrap_or_else(|| default_message.to_owned()),
        class,
        retryable,
        severity,
        category,
        retry_after_ms: f.retry_after_ms,
        field: f.field,
        allowed_values: f.allowed_values,
        suggested_value: f.suggested_value,
        hint,
        request_id: f
            .request_id
            .or_else(|| obs.request_id.as_deref().map(str::to_owned)),
        related_codes: related,
        docs_url: f.docs_url,
        upstream: f.upstream,
        hint_from_server,
    }
}

/// The hint of a retry after `ms`: "Wait {ms} ms, then retry the same request
/// with the same idempotency key." (built without the formatting machinery).
pub(crate) fn wait_hint(ms: u64) -> String {
    let mut s = String::with_capacity(80);
    s.push_str("Wait ");
    crate::json_out::push_u64(&mut s, ms);
    s.push_str(" ms, then retry the same request with the same idempotency key.");
    s
}

/// A definition that says more for this surface: a 413 on an LLM call is fixed
/// by shrinking the request (`request.too_large`, semantic), not a permanent failure.
fn refine(d: &'static registry::CodeDef, want: Surface) -> &'static registry::CodeDef {
    let refined = match (d.base, want) {
        ("http.413_payload_too_large", Surface::Llm) => registry::def("request.too_large"),
        _ => None,
    };
    refined.unwrap_or(d)
}

/// One line, at most [`MAX_MESSAGE`] bytes, cut at a character boundary.
pub(crate) fn one_line(s: &str) -> String {
    let first = s
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("");
    let mut end = first.len().min(MAX_MESSAGE);
    while !first.is_char_boundary(end) {
        end -= 1;
    }
    let cut = first.get(..end).unwrap_or("");
    if end < first.len() {
        format!("{cut}…")
    } else {
        cut.to_owned()
    }
}

/// A string member of a JSON object.
pub(crate) fn str_at<'v>(v: &'v View<'_>, key: &str) -> Option<&'v str> {
    v.get(key).and_then(View::as_str)
}
