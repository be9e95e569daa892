//! The JSON text of a decision and of an envelope, written member by member
//! into one buffer.
//!
//! `serde_json` escapes strings byte by byte; most of an output is registry
//! text with nothing to escape, so here a string is checked once (a loop the
//! compiler can vectorise) and copied whole. The text is byte-identical to
//! `serde_json::to_string` of the same value (same member order, same
//! escapes: `\"`, `\\`, `\b \f \n \r \t`, other control characters as
//! `\u00xx`), which `tests` below and every vector check against the derive.
//! `allowed_values` and `suggested_value` (any JSON) are written by `serde_json`.

use crate::error::{ErrorKind, PolicyError};
use crate::model::{Decision, Envelope, Upstream};
use std::fmt::Write as _;

/// Bytes reserved up front: a decision is 700 to 1 200 bytes.
const CAPACITY: usize = 1536;

/// The JSON text of a decision.
pub fn decision(d: &Decision) -> Result<String, PolicyError> {
    let mut out = String::with_capacity(CAPACITY);
    out.push_str("{\"action\":\"");
    out.push_str(d.action.as_str());
    out.push_str("\",\"delay_ms\":");
    opt_u64(&mut out, d.delay_ms);
    out.push_str(",\"attempt\":");
    u64_(&mut out, u64::from(d.attempt));
    out.push_str(",\"max_attempts\":");
    u64_(&mut out, u64::from(d.max_attempts));
    out.push_str(",\"budget_remaining_ms\":");
    u64_(&mut out, d.budget_remaining_ms);
    out.push_str(",\"reason\":");
    string(&mut out, d.reason);
    out.push_str(",\"reason_code\":");
    opt_str(&mut out, d.reason_code);
    out.push_str(",\"envelope\":");
    envelope_into(&mut out, &d.envelope)?;
    if let Some(b) = &d.breaker {
        out.push_str(",\"breaker\":{\"failure_threshold\":");
        u64_(&mut out, u64::from(b.failure_threshold));
        out.push_str(",\"open_ms\":");
        u64_(&mut out, b.open_ms);
        if let Some(r) = &b.rate {
            out.push_str(",\"rate\":{\"failure_rate_threshold\":");
            u64_(&mut out, u64::from(r.failure_rate_threshold));
            out.push_str(",\"minimum_calls\":");
            u64_(&mut out, u64::from(r.minimum_calls));
            out.push_str(",\"window_ms\":");
            u64_(&mut out, r.window_ms);
            out.push('}');
        }
        out.push('}');
    }
    if let Some(safe) = d.replay_safe {
        out.push_str(",\"replay_safe\":");
        out.push_str(if safe { "true" } else { "false" });
    }
    if let Some(f) = &d.fallbacks {
        out.push_str(",\"fallbacks\":");
        out.push_str(
            &serde_json::to_string(f)
                .map_err(|e| PolicyError::new(crate::error::ErrorKind::Internal, e.to_string()))?,
        );
    }
    if let Some(dl) = &d.dead_letters {
        out.push_str(",\"dead_letters\":");
        out.push_str(
            &serde_json::to_string(dl)
                .map_err(|e| PolicyError::new(crate::error::ErrorKind::Internal, e.to_string()))?,
        );
    }
    out.push('}');
    Ok(out)
}

/// The JSON text of an envelope.
pub fn envelope(e: &Envelope) -> Result<String, PolicyError> {
    let mut out = String::with_capacity(CAPACITY);
    envelope_into(&mut out, e)?;
    Ok(out)
}

fn envelope_into(out: &mut String, e: &Envelope) -> Result<(), PolicyError> {
    out.push_str("{\"code\":");
    string(out, &e.code);
    out.push_str(",\"message\":");
    string(out, &e.message);
    out.push_str(",\"class\":\"");
    out.push_str(e.class.as_str());
    out.push_str("\",\"retryable\":");
    out.push_str(if e.retryable { "true" } else { "false" });
    out.push_str(",\"severity\":\"");
    out.push_str(e.severity.as_str());
    out.push_str("\",\"category\":\"");
    out.push_str(e.category.as_str());
    out.push_str("\",\"retry_after_ms\":");
    opt_u64(out, e.retry_after_ms);
    out.push_str(",\"field\":");
    opt_str(out, e.field.as_deref());
    out.push_str(",\"allowed_values\":");
    value(out, e.allowed_values.as_ref())?;
    out.push_str(",\"suggested_value\":");
    value(out, e.suggested_value.as_ref())?;
    out.push_str(",\"hint\":");
    string(out, &e.hint);
    out.push_str(",\"request_id\":");
    opt_str(out, e.request_id.as_deref());
    out.push_str(",\"related_codes\":[");
    for (i, c) in e.related_codes.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        string(out, c);
    }
    out.push_str("],\"docs_url\":");
    opt_str(out, e.docs_url.as_deref());
    out.push_str(",\"upstream\":");
    upstream(out, &e.upstream);
    out.push('}');
    Ok(())
}

fn upstream(out: &mut String, u: &Upstream) {
    out.push_str("{\"source\":");
    opt_str(out, u.source.map(|s| s.as_str()));
    out.push_str(",\"provider\":");
    opt_str(out, u.provider.as_deref());
    out.push_str(",\"status\":");
    opt_u64(out, u.status.map(u64::from));
    out.push_str(",\"code\":");
    opt_str(out, u.code.as_deref());
    out.push_str(",\"type\":");
    opt_str(out, u.error_type.as_deref());
    out.push('}');
}

fn value(out: &mut String, v: Option<&serde_json::Value>) -> Result<(), PolicyError> {
    match v {
        None => out.push_str("null"),
        Some(v) => {
            let text = serde_json::to_string(v).map_err(|e| {
                PolicyError::new(
                    ErrorKind::Internal,
                    format!("could not serialize output ({e}); please report this"),
                )
            })?;
            out.push_str(&text);
        }
    }
    Ok(())
}

fn u64_(out: &mut String, n: u64) {
    push_u64(out, n);
}

/// Appends the decimal digits of `n` (what `{n}` prints, without the
/// formatting machinery, which costs more than the digits on this path).
pub(crate) fn push_u64(out: &mut String, mut n: u64) {
    let mut digits = [0u8; 20];
    let mut start = digits.len();
    for slot in digits.iter_mut().rev() {
        // `n % 10` is below 10, so the cast cannot truncate.
        *slot = b'0' + (n % 10) as u8;
        start -= 1;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.push_str(
        digits
            .get(start..)
            .and_then(|d| std::str::from_utf8(d).ok())
            .unwrap_or(""),
    );
}

fn opt_u64(out: &mut String, n: Option<u64>) {
    match n {
        Some(n) => u64_(out, n),
        None => out.push_str("null"),
    }
}

fn opt_str(out: &mut String, s: Option<&str>) {
    match s {
        Some(s) => string(out, s),
        None => out.push_str("null"),
    }
}

/// Whether a byte must be escaped in a JSON string (as `serde_json` does).
const fn needs_escape(b: u8) -> bool {
    b < 0x20 || b == b'"' || b == b'\\'
}

/// A JSON string: copied whole when nothing needs escaping.
fn string(out: &mut String, s: &str) {
    out.push('"');
    // No early exit: the whole check is one branch-free pass.
    let clean = s
        .as_bytes()
        .iter()
        .fold(true, |ok, &b| ok & !needs_escape(b));
    if clean {
        out.push_str(s);
    } else {
        escaped(out, s);
    }
    out.push('"');
}

fn escaped(out: &mut String, s: &str) {
    let mut start = 0;
    for (i, b) in s.bytes().enumerate() {
        if !needs_escape(b) {
            continue;
        }
        // `i` and `start` are at ASCII bytes, so both are character boundaries.
        out.push_str(s.get(start..i).unwrap_or(""));
        match b {
            b'"' => out.push_str("\\\""),
            b'\\' => out.push_str("\\\\"),
            0x08 => out.push_str("\\b"),
            0x0c => out.push_str("\\f"),
            b'\n' => out.push_str("\\n"),
            b'\r' => out.push_str("\\r"),
            b'\t' => out.push_str("\\t"),
            _ => {
                let _ = write!(out, "\\u{b:04x}");
            }
        }
        start = i + 1;
    }
    out.push_str(s.get(start..).unwrap_or(""));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Action, Category, ErrorClass, Severity, SourceKind};
    use proptest::prelude::*;

    fn env(text: &str) -> Envelope {
        Envelope {
            code: "tool.http.429_rate_limited".into(),
            message: text.into(),
            class: ErrorClass::Transient,
            retryable: true,
            severity: Severity::Error,
            category: Category::RateLimit,
            retry_after_ms: Some(2000),
            field: Some(text.into()),
            allowed_values: Some(serde_json::json!([text, 1, {"b": null, "a": 1.5}])),
            suggested_value: None,
            hint: text.into(),
            request_id: None,
            related_codes: vec![text.into(), "x".into()],
            docs_url: Some(text.into()),
            upstream: Upstream {
                source: Some(SourceKind::Http),
                provider: Some(text.into()),
                status: Some(429),
                code: None,
                error_type: Some(text.into()),
            },
            hint_from_server: false,
        }
    }

    fn decision_of(text: &str, breaker: bool) -> Decision {
        Decision {
            action: Action::Retry,
            delay_ms: Some(u64::MAX),
            attempt: u32::MAX,
            max_attempts: 3,
            budget_remaining_ms: 0,
            reason: "transient",
            reason_code: None,
            envelope: env(text),
            breaker: breaker.then(crate::config::BreakerThresholds::default),
            replay_safe: None,
            fallbacks: None,
            dead_letters: None,
        }
    }

    #[test]
    fn digits_are_those_of_display() {
        for n in [
            0,
            1,
            9,
            10,
            99,
            100,
            12_345,
            1 << 53,
            u64::MAX - 1,
            u64::MAX,
        ] {
            let mut s = String::new();
            push_u64(&mut s, n);
            assert_eq!(s, n.to_string());
        }
    }

    #[test]
    fn escapes_like_serde_json() {
        for text in [
            "",
            "plain",
            "q\"uote b\\ack",
            "\u{0}\u{1}\u{8}\u{9}\u{a}\u{b}\u{c}\u{d}\u{1f}\u{7f}",
            "é …  \u{2028}",
        ] {
            let e = env(text);
            assert_eq!(
                envelope(&e).ok(),
                serde_json::to_string(&e).ok(),
                "{text:?}"
            );
            for b in [true, false] {
                let d = decision_of(text, b);
                assert_eq!(
                    decision(&d).ok(),
                    serde_json::to_string(&d).ok(),
                    "{text:?}"
                );
            }
        }
    }

    proptest! {
        #[test]
        fn any_text_is_written_like_serde_json(text in any::<String>()) {
            let d = decision_of(&text, true);
            prop_assert_eq!(decision(&d).ok(), serde_json::to_string(&d).ok());
        }
    }
}
