//! A cheap check that `classify-json` and `decide-json` returned what the
//! contract promises, before a host passes the text on unchanged.
//!
//! # Why check at all, and why only this much?
//!
//! Hosts print the component's bytes as they are (that is what makes Rust,
//! Node and Python agree byte for byte), so a broken or hostile policy could
//! hand an agent `<html>` or `{"code": 42}` where a decision belongs. The
//! check is one pass of serde over the text with no tree built: it must be one
//! JSON object with every required top-level member of the schema
//! (`docs/schema/*.schema.json`), and the members a caller branches on have
//! the right type (`action`, `code`, `class`: strings; `retryable`: a bool).
//! Values are not checked against their enums: the contract may add cases.
//! A byte scan (`output_scan.rs`) accepts the common, plainly written text
//! first; serde decides (and words the error) whenever the scan is unsure.

use std::borrow::Cow;

use serde::Deserialize;
use serde::de::IgnoredAny;

use crate::component::output_scan;
use crate::error::{Error, ErrorKind, Result};

/// The members of an envelope: all required, a few typed.
#[derive(Deserialize)]
#[allow(dead_code, reason = "fields exist to be checked, not read")]
struct EnvelopeShape<'a> {
    #[serde(borrow)]
    code: Cow<'a, str>,
    #[serde(borrow)]
    class: Cow<'a, str>,
    retryable: bool,
    message: IgnoredAny,
    severity: IgnoredAny,
    category: IgnoredAny,
    retry_after_ms: IgnoredAny,
    field: IgnoredAny,
    allowed_values: IgnoredAny,
    suggested_value: IgnoredAny,
    hint: IgnoredAny,
    request_id: IgnoredAny,
    related_codes: IgnoredAny,
    docs_url: IgnoredAny,
    upstream: IgnoredAny,
}

/// The members of a decision: all required, its envelope checked too.
#[derive(Deserialize)]
#[allow(dead_code, reason = "fields exist to be checked, not read")]
struct DecisionShape<'a> {
    #[serde(borrow)]
    action: Cow<'a, str>,
    delay_ms: IgnoredAny,
    attempt: IgnoredAny,
    max_attempts: IgnoredAny,
    budget_remaining_ms: IgnoredAny,
    reason: IgnoredAny,
    reason_code: IgnoredAny,
    #[serde(borrow)]
    envelope: EnvelopeShape<'a>,
}

/// Which output is checked.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Shape {
    /// The output of `classify-json`.
    Envelope,
    /// The output of `decide-json`.
    Decision,
}

/// Returns `text` if it is a JSON object of `shape`, else an
/// [`ErrorKind::InvalidOutput`] error naming `what` and the problem.
pub(crate) fn check(what: &str, shape: Shape, text: String) -> Result<String> {
    check_str(what, shape, &text).map(|()| text)
}

/// Checks that `text` is a decision as `decide-json` must print it: one JSON
/// object with every required member, `action` a string and the envelope
/// checked like [`check_envelope_json`]. This is the check the host applies to
/// every answer (see [`FailurePolicy`](crate::FailurePolicy)).
pub fn check_decision_json(text: &str) -> Result<()> {
    check_str("decide-json", Shape::Decision, text)
}

/// Checks that `text` is an envelope as `classify-json` must print it: one
/// JSON object with every required member, `code` and `class` strings and
/// `retryable` a bool.
pub fn check_envelope_json(text: &str) -> Result<()> {
    check_str("classify-json", Shape::Envelope, text)
}

/// [`check_decision_json`] without the byte scan: serde alone. For the
/// `check_calls` benchmark, which compares the two paths.
#[doc(hidden)]
pub fn check_decision_json_serde(text: &str) -> Result<()> {
    check_serde("decide-json", Shape::Decision, text)
}

fn check_str(what: &str, shape: Shape, text: &str) -> Result<()> {
    if output_scan::accepts(matches!(shape, Shape::Decision), text) {
        return Ok(());
    }
    check_serde(what, shape, text)
}

fn check_serde(what: &str, shape: Shape, text: &str) -> Result<()> {
    let parsed = match shape {
        Shape::Envelope => serde_json::from_str::<EnvelopeShape<'_>>(text).map(drop),
        Shape::Decision => serde_json::from_str::<DecisionShape<'_>>(text).map(drop),
    };
    parsed.map_err(|e| {
        let name = match shape {
            Shape::Envelope => "envelope",
            Shape::Decision => "decision",
        };
        let head: String = text.chars().take(60).collect();
        Error::new(
            ErrorKind::InvalidOutput,
            format!(
                "`{what}` returned text that is not a JSON {name} ({e}): {head:?}; the component does not follow the contract, report it to its authors"
            ),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const ENVELOPE: &str = r#"{"code":"tool.http.503_unavailable","message":"m \"quoted\"","class":"transient","retryable":true,"severity":"error","category":"dependency","retry_after_ms":null,"field":null,"allowed_values":null,"suggested_value":null,"hint":"h","request_id":null,"related_codes":[],"docs_url":null,"upstream":{"source":"http"},"added_later":1}"#;

    fn decision(envelope: &str) -> String {
        format!(
            r#"{{"action":"retry","delay_ms":5,"attempt":1,"max_attempts":3,"budget_remaining_ms":9,"reason":"transient","reason_code":null,"envelope":{envelope}}}"#
        )
    }

    #[test]
    fn contract_outputs_pass_and_are_returned_unchanged() {
        let got = check("classify-json", Shape::Envelope, ENVELOPE.to_string());
        assert_eq!(got.as_deref(), Ok(ENVELOPE));
        let d = decision(ENVELOPE);
        assert_eq!(
            check("decide-json", Shape::Decision, d.clone()).as_deref(),
            Ok(d.as_str())
        );
    }

    /// What serde alone says of `text`.
    fn serde_accepts(shape: Shape, text: &str) -> bool {
        match shape {
            Shape::Envelope => serde_json::from_str::<EnvelopeShape<'_>>(text).is_ok(),
            Shape::Decision => serde_json::from_str::<DecisionShape<'_>>(text).is_ok(),
        }
    }

    fn scan_accepts(shape: Shape, text: &str) -> bool {
        output_scan::accepts(matches!(shape, Shape::Decision), text)
    }

    /// Valid outputs in the forms a policy writes them: the scan must take
    /// these itself (else it saves nothing).
    fn plain_outputs() -> Vec<(Shape, String)> {
        let spaced = " {\n \"code\" : \"c\", \"class\":\"t\\n\\\"x\\/\", \"retryable\" : false , \"message\":\"\",\"severity\":-0.5e+3,\"category\":[1,[],{},{\"a\":[true,false,null]}],\"retry_after_ms\":120,\"field\":0,\"allowed_values\":[\"a\",\"b\"],\"suggested_value\":1E9,\"hint\":null,\"request_id\":\"r\",\"related_codes\":[],\"docs_url\":null,\"upstream\":{\"status\":503,\"headers\":{\"x\":\"y\"}}}\r\n"
            .to_string();
        vec![
            (Shape::Envelope, ENVELOPE.to_string()),
            (Shape::Decision, decision(ENVELOPE)),
            (Shape::Envelope, spaced.clone()),
            (Shape::Decision, decision(&spaced)),
        ]
    }

    #[test]
    fn the_scan_takes_plainly_written_outputs() {
        for (shape, text) in plain_outputs() {
            assert!(serde_accepts(shape, &text), "{text}");
            assert!(scan_accepts(shape, &text), "{text}");
        }
    }

    /// Every one-byte deletion, replacement and insertion of the plain
    /// outputs: whatever the scan accepts, serde accepts too, so the scan
    /// never lets through a text the serde check refuses.
    #[test]
    fn the_scan_accepts_nothing_serde_refuses() {
        const BYTES: &[u8] = b"\"\\{}[],: \t0129-+.eEutfnlrsx\x01/";
        let mut cases = 0;
        let mut refused = 0;
        for (shape, text) in plain_outputs() {
            let bytes = text.as_bytes();
            for at in 0..=bytes.len() {
                let mut variants = Vec::new();
                if at < bytes.len() {
                    let mut v = bytes.to_vec();
                    v.remove(at);
                    variants.push(v);
                }
                for &b in BYTES {
                    let mut v = bytes.to_vec();
                    v.insert(at, b);
                    variants.push(v);
                    if at < bytes.len() {
                        let mut v = bytes.to_vec();
                        v[at] = b;
                        variants.push(v);
                    }
                }
                for v in variants {
                    let Ok(v) = String::from_utf8(v) else {
                        continue;
                    };
                    cases += 1;
                    let serde = serde_accepts(shape, &v);
                    refused += usize::from(!serde);
                    assert!(!scan_accepts(shape, &v) || serde, "scan took {v:?}");
                }
            }
        }
        assert!(
            cases > 10_000 && refused > cases / 4,
            "{cases} cases, {refused} refused"
        );
    }

    /// Texts serde takes that the scan leaves to it: still accepted.
    #[test]
    fn what_the_scan_leaves_to_serde_is_still_accepted() {
        let escaped_name = ENVELOPE.replace(r#""hint":"h""#, r#""h\u0069nt":"h""#);
        let unicode = ENVELOPE.replace(r#""hint":"h""#, r#""hint":"\u00e9""#);
        for (shape, text) in [
            (Shape::Envelope, escaped_name),
            (Shape::Envelope, unicode.clone()),
            (Shape::Decision, decision(&unicode)),
        ] {
            assert!(!scan_accepts(shape, &text), "{text}");
            assert_eq!(
                check("x", shape, text.clone()).as_deref(),
                Ok(text.as_str())
            );
        }
    }

    #[test]
    fn garbage_missing_members_and_wrong_types_are_invalid_output() {
        let no_hint = ENVELOPE.replace(r#""hint":"h","#, "");
        let bad_retryable = ENVELOPE.replace(r#""retryable":true"#, r#""retryable":"maybe""#);
        let numeric_code =
            ENVELOPE.replace(r#""code":"tool.http.503_unavailable""#, r#""code":42"#);
        for (shape, text) in [
            (Shape::Decision, "<html>not json</html>".to_string()),
            (
                Shape::Envelope,
                r#"{"code": 42, "retryable": "maybe""#.to_string(),
            ),
            (Shape::Envelope, "[]".to_string()),
            (Shape::Envelope, format!("{ENVELOPE} trailing")),
            (Shape::Envelope, no_hint.clone()),
            (Shape::Envelope, bad_retryable),
            (Shape::Envelope, numeric_code),
            (Shape::Decision, ENVELOPE.to_string()),
            (Shape::Decision, decision(&no_hint)),
            (
                Shape::Decision,
                decision(ENVELOPE).replace(r#""action":"retry","#, ""),
            ),
        ] {
            let err = check("x", shape, text.clone()).expect_err(&text);
            assert_eq!(err.kind(), ErrorKind::InvalidOutput, "{text}");
            assert!(err.message().contains("not a JSON"), "{err}");
        }
    }
}
