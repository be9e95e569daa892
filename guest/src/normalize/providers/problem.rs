//! RFC 9457 (formerly 7807) problem details.
//!
//! Recognised by `Content-Type: application/problem+json`, or by the members
//! `title` with `status` or `type`. The HTTP status decides the base; `detail`
//! (else `title`) is the message, `type` is kept as the upstream type and is the
//! docs URL when it is an http(s) URL. Offending fields come from the common
//! extensions: `errors[].pointer` / `field` / `name` (RFC 9457's example),
//! `invalid-params[].name` (RFC 7807's), or the keys of an `errors` object
//! (ASP.NET Core's validation problem). Seed-004 extension members (`code`,
//! `retryable`, `hint`, ...) are applied afterwards by the HTTP layer.

use super::{Response, code_text, items, join_fields, string};
use crate::json_view::View;
use crate::normalize::http::status_base;
use crate::normalize::{Finding, str_at};
use crate::observation_view::BodyView;

pub(super) fn parse(r: &Response<'_>, hinted: bool) -> Option<Finding> {
    let BodyView::Json(v) = r.body else {
        return None;
    };
    let obj = v.as_object()?;
    let by_type = r.headers.get("content-type").is_some_and(|ct| {
        ct.to_ascii_lowercase()
            .starts_with("application/problem+json")
    });
    let by_shape = obj.get("title").is_some_and(View::is_string)
        && (obj.get("status").is_some_and(View::is_u64)
            || obj.get("type").is_some_and(View::is_string));
    if !(by_type || by_shape || hinted) {
        return None;
    }
    let body_status = v
        .get("status")
        .and_then(View::as_u64)
        .and_then(|s| u16::try_from(s).ok())
        .filter(|s| (400..600).contains(s));
    let status = if (400..600).contains(&r.status) {
        r.status
    } else {
        body_status.unwrap_or(r.status)
    };
    let mut f = Finding::new(status_base(status));
    f.message = string(v, "detail").or_else(|| string(v, "title"));
    f.field = fields(v);
    let typ = str_at(v, "type").filter(|t| !t.is_empty() && *t != "about:blank");
    f.docs_url = typ
        .filter(|t| t.starts_with("https://") || t.starts_with("http://"))
        .map(str::to_owned);
    f.upstream.error_type = typ.map(str::to_owned);
    f.upstream.code = code_text(v.get("code"));
    f.request_id = ["traceId", "trace_id", "requestId", "request_id"]
        .iter()
        .find_map(|k| string(v, k));
    f.upstream.provider = Some("problem+json".into());
    Some(f)
}

/// The offending fields named by the common extension members.
fn fields(v: &View<'_>) -> Option<String> {
    if let Some(map) = v.get("errors").and_then(View::as_object) {
        // Sorted, so the output does not depend on the map's order.
        let mut keys: Vec<&str> = map.keys().collect();
        keys.sort_unstable();
        return join_fields(keys.into_iter());
    }
    let named = |item: &View<'_>| -> Option<String> {
        let raw = ["pointer", "field", "name", "parameter"]
            .iter()
            .find_map(|k| str_at(item, k))
            .or_else(|| item.pointer("/source/pointer").and_then(View::as_str))?;
        Some(raw.strip_prefix('#').unwrap_or(raw).to_owned())
    };
    let names: Vec<String> = items(v, "errors")
        .chain(items(v, "invalid-params"))
        .chain(items(v, "invalid_params"))
        .filter_map(named)
        .collect();
    join_fields(names.iter().map(String::as_str))
}

#[cfg(test)]
mod tests {
    use super::super::test_support::{run, try_run};

    #[test]
    fn rfc9457_example_with_pointers() {
        let body = r##"{"type":"https://example.net/validation-error","title":"Your request is not valid.","errors":[{"detail":"must be a positive integer","pointer":"#/age"},{"detail":"must be 'green', 'red' or 'blue'","pointer":"#/profile/color"}]}"##;
        let f = run(
            422,
            &[("content-type", "application/problem+json")],
            body,
            None,
        );
        assert_eq!(f.base, "http.422_unprocessable");
        assert_eq!(f.field.as_deref(), Some("/age,/profile/color"));
        assert_eq!(
            f.docs_url.as_deref(),
            Some("https://example.net/validation-error")
        );
        assert_eq!(f.message.as_deref(), Some("Your request is not valid."));
    }

    #[test]
    fn shape_without_content_type_and_aspnet_errors_object() {
        let body = r#"{"type":"about:blank","title":"One or more validation errors occurred.","status":400,"errors":{"Name":["required"],"Email":["invalid"]},"traceId":"00-abc-01"}"#;
        let f = run(400, &[], body, None);
        assert_eq!(f.field.as_deref(), Some("Email,Name"));
        assert_eq!(f.docs_url, None);
        assert_eq!(f.request_id.as_deref(), Some("00-abc-01"));
    }

    #[test]
    fn title_alone_is_not_enough() {
        assert!(try_run(400, &[], r#"{"title":"x"}"#, None).is_none());
    }
}
