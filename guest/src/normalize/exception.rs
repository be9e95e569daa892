//! Exceptions that carry more than a type name: the HTTP response they wrap
//! (status, headers, body), the framework's own retry verdict, the exception
//! they were raised from and the members of an exception group.
//!
//! 1. With a status, the response is classified as an HTTP response of the
//!    exception's provider would be (Retry-After, quota against rate limit,
//!    context overflow, safety), then the class refines it where its name says
//!    more than the status and body did (LiteLLM's `ContextWindowExceededError`
//!    is a 400 whose body may say nothing).
//! 2. When the class is a wrapper or unknown, the most specific recognised
//!    member decides: the cause first, then the group members in order; a
//!    cancellation counts only when nothing else is recognised (in a task
//!    group, siblings are cancelled because of the real failure).
//! 3. The framework's `retryable` verdict is used only when nothing is recognised.

use super::http::status_base;
use super::{Finding, find, frameworks, http, providers, transport};
use crate::model::SourceKind;
use crate::observation_view::{ExceptionDetailView, ObservationView};
use crate::registry::Surface;

pub(super) fn classify(
    type_name: &str,
    message: Option<&str>,
    d: &ExceptionDetailView<'_>,
    obs: &ObservationView<'_>,
    inherited: Option<&str>,
) -> Finding {
    let class = transport::exception(type_name, message);
    let last = type_name.rsplit(['.', ':']).next().unwrap_or(type_name);
    let root = type_name.split(['.', ':']).next().unwrap_or("");
    let hint = obs
        .provider
        .as_deref()
        .or(inherited)
        .or_else(|| frameworks::provider_hint(root))
        .or_else(|| {
            class
                .upstream
                .provider
                .as_deref()
                .and_then(|p| ["google", "aws", "bedrock"].into_iter().find(|k| *k == p))
        });
    let wrapper = frameworks::is_wrapper(type_name, root, last);
    let from_response = d.status.and_then(|status| {
        // A success status with nothing failing in the body says nothing: the class decides.
        http::classify(status, &d.headers, &d.body, hint, obs.now_ms)
            .ok()
            .map(|h| {
                let own = !frameworks::means_no_response(type_name, last);
                refine(h, &class, own, status, type_name)
            })
    });
    let responded = from_response.is_some();
    let class_surface = class.surface;
    let mut f = from_response.unwrap_or(class);
    if !responded
        && (wrapper || f.base == "exception.unhandled")
        && let Some(mut member) = best_member(d, hint)
    {
        // A member with no call of its own is part of the wrapper's call.
        member.surface = member.surface.or(class_surface);
        f = member;
    }
    if f.base == "exception.unhandled"
        && let Some(r) = d.retryable
    {
        f.retryable = Some(r);
    }
    f
}

/// The response's finding, refined by the class and marked as an exception's.
/// `own` is false when the class's base is only what it means without a response.
fn refine(mut f: Finding, class: &Finding, own: bool, status: u16, type_name: &str) -> Finding {
    let said_nothing_more = f.base == status_base(status) && f.adopted_code.is_none();
    let class_says_more =
        own && !class.base.starts_with("http.") && class.base != "exception.unhandled";
    if said_nothing_more && class_says_more {
        f.base = class.base;
    }
    if f.message.is_none() {
        f.message.clone_from(&class.message);
    }
    f.upstream.source = Some(SourceKind::Exception);
    f.upstream.error_type = Some(type_name.to_owned());
    if f.upstream.provider.is_none() {
        f.upstream.provider.clone_from(&class.upstream.provider);
    }
    if f.upstream.code.is_none() {
        f.upstream.code.clone_from(&class.upstream.code);
    }
    if f.surface.is_none() {
        f.surface = class.surface;
    }
    f
}

/// How much a member's finding says: 0 nothing, 1 a cancellation, 2 a failure.
fn rank(f: &Finding) -> u8 {
    match f.base {
        "exception.unhandled" => 0,
        "exception.cancelled" | "mcp.cancelled" | "task.canceled" => 1,
        _ => 2,
    }
}

/// The most specific recognised member: the cause, then the group members.
fn best_member(d: &ExceptionDetailView<'_>, hint: Option<&str>) -> Option<Finding> {
    let members = d.cause.as_deref().into_iter().chain(d.exceptions.iter());
    let mut best: Option<Finding> = None;
    for m in members {
        // A member that reports no failure is skipped, not an error.
        let Ok(mut f) = find(m, hint) else {
            continue;
        };
        if f.surface.is_none() {
            f.surface = m.call.map(Surface::from).or_else(|| {
                m.provider
                    .as_deref()
                    .filter(|p| providers::is_llm_provider(p))
                    .map(|_| Surface::Llm)
            });
        }
        if f.request_id.is_none() {
            f.request_id = m.request_id.as_deref().map(str::to_owned);
        }
        let r = rank(&f);
        if r > best.as_ref().map_or(0, rank) {
            let done = r == 2;
            best = Some(f);
            if done {
                break;
            }
        }
    }
    best
}
