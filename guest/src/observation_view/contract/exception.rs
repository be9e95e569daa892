//! The `exception` source: a type name, and what the exception carries (an
//! HTTP response, the framework's retry verdict, a cause, group members).
//!
//! ```text
//! {"source":"exception", "type":"<module.Class>", "message"?, "status"?, "headers"?,
//!  "body"?, "retryable"?, "cause"?: <observation>, "exceptions"?: [<observation>...]}
//! ```
//! A member nested deeper than [`MAX_EXCEPTION_DEPTH`] is not read (nor checked).
//! An error inside a member names its path: `at cause.exceptions[1]: ...`.

use super::{body, headers, opt_string, trimmed, type_err};
use crate::error::PolicyError;
use crate::json_view::{Obj, View};
use crate::observation::MAX_EXCEPTION_DEPTH;
use crate::observation_view::{ExceptionDetailView, FailureView, ObservationView};

/// Members beyond `type` and `message` that make an exception carry a detail.
const DETAIL_MEMBERS: [&str; 6] = [
    "status",
    "headers",
    "body",
    "retryable",
    "cause",
    "exceptions",
];

pub(super) fn exception<'a>(m: &mut Obj<'a>, depth: usize) -> Result<FailureView<'a>, PolicyError> {
    let type_name = match m.get("type") {
        Some(View::String(s)) if !s.trim().is_empty() => trimmed(s),
        Some(other) => {
            return Err(type_err(
                "type",
                "a non-empty string such as \"httpx.ReadTimeout\"",
                other,
            ));
        }
        None => {
            return Err(PolicyError::observation(
                "an exception observation needs \"type\"; add the exception type, e.g. \"type\": \"httpx.ReadTimeout\"",
            ));
        }
    };
    let message = opt_string(m, "message")?;
    let carries = DETAIL_MEMBERS
        .iter()
        .any(|k| m.get(k).is_some_and(|v| !v.is_null()));
    let detail = if carries {
        Some(Box::new(detail(m, depth)?))
    } else {
        None
    };
    Ok(FailureView::Exception {
        type_name,
        message,
        detail,
    })
}

fn detail<'a>(m: &mut Obj<'a>, depth: usize) -> Result<ExceptionDetailView<'a>, PolicyError> {
    let status = match m.get("status") {
        None | Some(View::Null) => None,
        Some(v) => Some(
            v.as_u64()
                .and_then(|s| u16::try_from(s).ok())
                .filter(|s| (100..=999).contains(s))
                .ok_or_else(|| type_err("status", "an HTTP status between 100 and 999", v))?,
        ),
    };
    let headers = headers(m)?;
    let body = body(m);
    let retryable = match m.get("retryable") {
        None | Some(View::Null) => None,
        Some(View::Bool(b)) => Some(*b),
        Some(other) => return Err(type_err("retryable", "a boolean", other)),
    };
    let mut d = ExceptionDetailView {
        status,
        headers,
        body,
        retryable,
        cause: None,
        exceptions: Vec::new(),
    };
    if depth >= MAX_EXCEPTION_DEPTH {
        // Refuse nothing for depth: deeper members are simply not read.
        return Ok(d);
    }
    match m.remove("cause") {
        None | Some(View::Null) => {}
        Some(v @ View::Object(_)) => {
            let c = ObservationView::from_view_at(v, depth + 1).map_err(|e| at("cause", e))?;
            d.cause = Some(Box::new(c));
        }
        Some(other) => return Err(type_err("cause", "an observation object", &other)),
    }
    match m.remove("exceptions") {
        None | Some(View::Null) => {}
        Some(View::Array(items)) => {
            for (i, v) in items.into_iter().enumerate() {
                let path = format!("exceptions[{i}]");
                if !v.is_object() {
                    return Err(at(&path, type_err("member", "an observation object", &v)));
                }
                let member =
                    ObservationView::from_view_at(v, depth + 1).map_err(|e| at(&path, e))?;
                d.exceptions.push(member);
            }
        }
        Some(other) => {
            return Err(type_err(
                "exceptions",
                "an array of observation objects",
                &other,
            ));
        }
    }
    Ok(d)
}

/// The error of a nested member, with the member's path in front
/// (`at cause.exceptions[1]: type must be ...`).
fn at(segment: &str, mut e: PolicyError) -> PolicyError {
    e.message = match e.message.strip_prefix("at ") {
        Some(rest) => format!("at {segment}.{rest}"),
        None => format!("at {segment}: {}", e.message),
    };
    e
}

#[cfg(test)]
mod tests {
    use crate::error::ErrorKind;
    use crate::observation_view::{FailureView, ObservationView};

    fn detail_of(text: &str) -> crate::observation_view::ExceptionDetailView<'_> {
        match ObservationView::parse(text).expect("valid").failure {
            FailureView::Exception { detail, .. } => *detail.expect("a detail"),
            other => panic!("not an exception: {other:?}"),
        }
    }

    #[test]
    fn a_plain_exception_has_no_detail() {
        let v = ObservationView::parse(r#"{"source":"exception","type":"x.Y","message":"m"}"#)
            .expect("valid");
        assert!(matches!(
            v.failure,
            FailureView::Exception { detail: None, .. }
        ));
    }

    #[test]
    fn members_are_read() {
        let d = detail_of(
            r#"{"source":"exception","type":"ai.AI_RetryError","status":429,
                "headers":[["Retry-After","3"]],"body":"{\"a\":1}","retryable":true,
                "cause":{"source":"exception","type":"AI_APICallError","status":503},
                "exceptions":[{"source":"network","code":"ECONNRESET"}]}"#,
        );
        assert_eq!(d.status, Some(429));
        assert_eq!(d.headers.get("retry-after"), Some("3"));
        assert!(matches!(d.body, crate::observation_view::BodyView::Json(_)));
        assert_eq!(d.retryable, Some(true));
        assert!(d.cause.is_some());
        assert_eq!(d.exceptions.len(), 1);
    }

    #[test]
    fn errors_name_the_member_path() {
        let e = ObservationView::parse(
            r#"{"source":"exception","type":"E","cause":{"source":"exception","type":"F",
                "exceptions":[{"source":"exception","type":"G"},{"source":"exception","type":7}]}}"#,
        )
        .expect_err("bad type");
        assert_eq!(e.kind, ErrorKind::InvalidObservation);
        assert!(
            e.message
                .starts_with("at cause.exceptions[1]: type must be"),
            "{}",
            e.message
        );
        for (text, want) in [
            (
                r#"{"type":"E","source":"exception","status":"429"}"#,
                "status must be",
            ),
            (
                r#"{"type":"E","source":"exception","retryable":"yes"}"#,
                "retryable must be",
            ),
            (
                r#"{"type":"E","source":"exception","cause":[1]}"#,
                "cause must be",
            ),
            (
                r#"{"type":"E","source":"exception","exceptions":{}}"#,
                "exceptions must be",
            ),
            (
                r#"{"type":"E","source":"exception","exceptions":[1]}"#,
                "at exceptions[0]: member must be",
            ),
            (
                r#"{"type":"E","source":"exception","headers":5}"#,
                "headers",
            ),
        ] {
            let e = ObservationView::parse(text).expect_err(text);
            assert!(e.message.starts_with(want), "{text}: {}", e.message);
        }
    }

    #[test]
    fn depth_is_bounded_without_refusing() {
        // 20 levels of causes, the deepest one malformed: never read, so no error.
        let mut text = r#"{"source":"exception","type":"Bad","cause":5}"#.to_owned();
        for _ in 0..20 {
            text = format!(r#"{{"source":"exception","type":"Wrapper","cause":{text}}}"#);
        }
        let mut v = ObservationView::parse(&text).expect("deep members are ignored");
        let mut levels = 0;
        while let FailureView::Exception {
            detail: Some(d), ..
        } = v.failure
        {
            match d.cause {
                Some(c) => {
                    levels += 1;
                    v = *c;
                }
                None => break,
            }
        }
        assert_eq!(levels, crate::observation::MAX_EXCEPTION_DEPTH);
    }

    #[test]
    fn owned_round_trip_keeps_the_detail() {
        let text = r#"{"source":"exception","type":"E","status":500,"body":{"x":1},
            "cause":{"source":"exception","type":"F","exceptions":[{"source":"timeout"}]}}"#;
        let view = ObservationView::parse(text).expect("valid");
        let owned = view.clone().into_observation();
        assert_eq!(ObservationView::from_observation(&owned), view);
    }
}
