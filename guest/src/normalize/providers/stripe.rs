//! Stripe.
//!
//! Errors: `{"error": {"type", "code", "decline_code", "param", "message",
//! "doc_url", "request_log_url"}}`, told apart from OpenAI's look-alike by
//! `doc_url`, `decline_code`, `request_log_url`, a Stripe-only type or a
//! `stripe-*` header. The type decides: `card_error` is `payment.declined`
//! (never retried: a retry with the same idempotency key replays the decline),
//! `idempotency_error` is `idempotency.key_reused`. `stripe-should-retry` is
//! honoured by the HTTP layer.
//!
//! Where this differs from stripe-python (which retries 409 and, without the
//! header, nothing else below 500): `rate_limit_error` and `lock_timeout` are
//! rate limits and retried, and `idempotency_key_in_use` (a concurrent request
//! holding the same key) is `http.423_locked`, retried after a short wait.

use super::{Response, string};
use crate::json_view::View;
use crate::normalize::http::status_base;
use crate::normalize::{Finding, str_at};
use crate::observation_view::BodyView;

pub(super) fn parse(r: &Response<'_>, hinted: bool) -> Option<Finding> {
    let BodyView::Json(v) = r.body else {
        return None;
    };
    let err = v.get("error").filter(|e| str_at(e, "type").is_some())?;
    let stripe_only = ["doc_url", "decline_code", "request_log_url"]
        .iter()
        .any(|k| err.get(k).is_some())
        || matches!(
            str_at(err, "type"),
            Some("card_error" | "idempotency_error")
        )
        || r.headers.any_prefix("stripe-");
    if !(hinted || stripe_only) {
        return None;
    }
    let mut f = error(r.status, err);
    f.upstream.provider = Some("stripe".into());
    Some(f)
}

fn base(status: u16, typ: Option<&str>, code: Option<&str>) -> &'static str {
    match (typ, code) {
        (Some("card_error"), _) => "payment.declined",
        // The code decides before the type: Stripe may send `idempotency_key_in_use`
        // (a request with this key is still in flight: retry later) under either
        // type, and it is not a key reused with other parameters.
        (_, Some("idempotency_key_in_use")) => "http.423_locked",
        (Some("idempotency_error"), _) => "idempotency.key_reused",
        (Some("rate_limit_error"), _) | (_, Some("lock_timeout" | "rate_limit")) => {
            "http.429_rate_limited"
        }
        (Some("api_error"), _) if status < 500 => "http.500_internal_error",
        (Some("authentication_error"), _) => "http.401_unauthorized",
        _ => status_base(status),
    }
}

fn error(status: u16, err: &View<'_>) -> Finding {
    let typ = str_at(err, "type");
    let code = str_at(err, "code");
    let mut f = Finding::new(base(status, typ, code));
    f.message = string(err, "message");
    f.field = string(err, "param").filter(|p| !p.is_empty());
    f.docs_url = string(err, "doc_url");
    // `decline_code` (the issuer's reason) refines `code: card_declined`.
    f.upstream.code = string(err, "decline_code").or_else(|| code.map(str::to_owned));
    f.upstream.error_type = typ.map(str::to_owned);
    f
}

#[cfg(test)]
mod tests {
    use super::super::test_support::{run, try_run};

    #[test]
    fn card_errors_are_declines_with_field_and_docs() {
        let body = r#"{"error":{"type":"card_error","code":"card_declined","decline_code":"insufficient_funds","param":"payment_method","message":"m","doc_url":"https://stripe.com/docs/error-codes/card-declined"}}"#;
        let f = run(402, &[], body, None);
        assert_eq!(f.base, "payment.declined");
        assert_eq!(f.field.as_deref(), Some("payment_method"));
        assert_eq!(f.upstream.code.as_deref(), Some("insufficient_funds"));
        assert_eq!(
            f.docs_url.as_deref(),
            Some("https://stripe.com/docs/error-codes/card-declined")
        );
        assert_eq!(f.surface, None);
    }

    #[test]
    fn types_and_codes() {
        let case = |status, t: &str, code: &str| {
            let body = format!(
                r#"{{"error":{{"type":"{t}","code":"{code}","message":"m","request_log_url":"https://dashboard.stripe.com/logs/req_1"}}}}"#
            );
            run(status, &[], &body, None).base
        };
        assert_eq!(
            case(400, "idempotency_error", "x"),
            "idempotency.key_reused"
        );
        assert_eq!(
            case(429, "invalid_request_error", "lock_timeout"),
            "http.429_rate_limited"
        );
        assert_eq!(
            case(429, "rate_limit_error", "rate_limit"),
            "http.429_rate_limited"
        );
        assert_eq!(
            case(409, "invalid_request_error", "idempotency_key_in_use"),
            "http.423_locked"
        );
        assert_eq!(
            case(409, "idempotency_error", "idempotency_key_in_use"),
            "http.423_locked"
        );
        assert_eq!(case(500, "api_error", "x"), "http.500_internal_error");
        assert_eq!(
            case(404, "invalid_request_error", "resource_missing"),
            "http.404_not_found"
        );
    }

    #[test]
    fn openai_look_alike_is_not_stripe_without_evidence() {
        let body =
            r#"{"error":{"type":"invalid_request_error","message":"m","param":"x","code":null}}"#;
        let f = try_run(400, &[], body, None).expect("openai");
        assert_eq!(f.upstream.provider.as_deref(), Some("openai"));
        let f = run(400, &[("Stripe-Version", "2024-06-20")], body, None);
        assert_eq!(f.upstream.provider.as_deref(), Some("stripe"));
        assert_eq!(f.field.as_deref(), Some("x"));
    }
}
