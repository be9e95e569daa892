//! Bad input through the library: every failure is a clear, one-line error
//! of the right kind, never a trap, a panic or a hang.

mod common;

use agent_recovery::types::{CallKind, RenderFormat};
use agent_recovery::{Error, ErrorKind, PolicyErrorKind};

use common::policy;

/// Asserts a clean, one-line error of `kind`.
fn assert_clean(result: agent_recovery::Result<String>, kind: ErrorKind, what: &str) -> Error {
    let err = match result {
        Ok(out) => panic!(
            "{what}: expected {kind:?}, got output {}",
            &out[..out.len().min(200)]
        ),
        Err(err) => err,
    };
    assert_eq!(err.kind(), kind, "{what}: {err}");
    let msg = err.message();
    assert!(
        !msg.is_empty() && !msg.contains('\n'),
        "{what}: one line: {msg:?}"
    );
    assert!(!msg.contains("panicked"), "{what}: {msg}");
    if !matches!(kind, ErrorKind::Policy(_)) {
        // The host's own messages end with "; <hint>" (the policy words its own).
        assert!(
            msg.contains("; "),
            "{what}: the message should end with a hint: {msg}"
        );
    }
    err
}

const INVALID_JSON: ErrorKind = ErrorKind::Policy(PolicyErrorKind::InvalidJson);
const INVALID_OBS: ErrorKind = ErrorKind::Policy(PolicyErrorKind::InvalidObservation);
const INVALID_CTX: ErrorKind = ErrorKind::Policy(PolicyErrorKind::InvalidContext);

#[test]
fn malformed_json_and_empty_input() {
    let p = policy();
    for (input, what) in [
        ("", "empty"),
        ("   \n", "whitespace"),
        ("{", "truncated"),
        (r#"{"source":"http","status":429,}"#, "trailing comma"),
        ("{'source':'http'}", "single quotes"),
        (r#"{"source":"http"} {"source":"http"}"#, "two values"),
    ] {
        assert_clean(p.classify_json(input), INVALID_JSON, what);
        assert_clean(p.decide_json(input, "{}"), INVALID_JSON, what);
    }
}

#[test]
fn wrong_types_and_shapes() {
    let p = policy();
    for (input, what) in [
        ("[]", "array"),
        ("42", "number"),
        ("null", "null"),
        (r#"{"source":"http","status":"429"}"#, "status as string"),
        (r#"{"source":"http","status":42}"#, "status out of range"),
        (r#"{"source":"carrier-pigeon"}"#, "unknown source"),
        (
            r#"{"source":"http","status":429,"headers":[1,2]}"#,
            "headers as array of numbers",
        ),
        (r#"{"source":"network"}"#, "network without code"),
        (r#"{"body":"x"}"#, "no source, no recognisable shape"),
    ] {
        let err = p.classify_json(input).expect_err(what);
        assert!(
            matches!(err.kind(), ErrorKind::Policy(_)) && err.kind().is_bad_input(),
            "{what}: {err:?}"
        );
        assert_clean(Err(err), INVALID_OBS, what);
    }
}

#[test]
fn bad_contexts_and_configs() {
    let p = policy();
    let obs = r#"{"source":"http","status":503}"#;
    assert_clean(
        p.decide_json(obs, r#"{"attempt":0}"#),
        INVALID_CTX,
        "attempt 0",
    );
    assert_clean(
        p.decide_json(obs, r#"{"attempt":-1}"#),
        INVALID_CTX,
        "negative attempt",
    );
    assert_clean(p.decide_json(obs, "[1]"), INVALID_CTX, "context array");
    assert_clean(
        p.decide_json(obs, r#"{"call":"robot"}"#),
        INVALID_CTX,
        "unknown call",
    );
    assert_clean(
        p.decide_json(
            obs,
            r#"{"attempt":1,"config":{"tool":{"base_ms":500,"cap_ms":10}}}"#,
        ),
        ErrorKind::Policy(PolicyErrorKind::InvalidConfig),
        "cap below base",
    );
    assert_clean(p.decide_json(obs, "{"), INVALID_JSON, "truncated context");
}

#[test]
fn bad_arguments_to_the_other_exports() {
    let p = policy();
    let err = p
        .key("run", "step", "tool", "{not json")
        .expect_err("bad args JSON");
    assert!(err.kind().is_bad_input(), "{err:?}");
    assert_clean(Err(err), INVALID_JSON, "key args");

    let err = p
        .backoff(CallKind::Tool, 0, Some(1), None)
        .expect_err("attempt 0");
    assert!(err.kind().is_bad_input(), "{err:?}");

    let err = p
        .render_json("not an envelope", RenderFormat::ProblemJson, "")
        .expect_err("bad envelope");
    assert!(err.kind().is_bad_input(), "{err:?}");
}

#[test]
fn ten_megabyte_bodies_classify() {
    let p = policy();
    let text = format!(
        r#"{{"source":"http","status":502,"body":"{}"}}"#,
        "<html>bad gateway</html>".repeat(10 << 20 >> 5)
    );
    assert!(text.len() > 7 << 20);
    let envelope = p
        .classify_json(&text)
        .expect("a 10 MB text body classifies");
    assert!(
        envelope.contains("502"),
        "{}",
        &envelope[..200.min(envelope.len())]
    );

    let item = r#"{"type":"server_error","message":"upstream failed","param":null},"#;
    let items = item.repeat((10 << 20) / item.len());
    let json = format!(
        r#"{{"source":"http","status":500,"body":{{"error":{{"message":"m","details":[{}]}}}}}}"#,
        items.trim_end_matches(',')
    );
    assert!(json.len() > 9 << 20);
    match p.decide_json(&json, r#"{"attempt":1,"seed":1}"#) {
        Ok(decision) => assert!(decision.contains("\"action\"")),
        // Still a clean answer when the sandbox's limits say no.
        Err(e) => assert!(
            matches!(e.kind(), ErrorKind::MemoryLimit | ErrorKind::OutOfFuel),
            "{e:?}"
        ),
    }
}

/// A member repeated 100 000 times between other members: serde_json's
/// `Value` keeps the last of each, and so does the borrowed view, in one pass
/// per member name (fuel is deterministic: the quadratic removal this guards
/// against ran out of fuel on this input).
#[test]
fn many_duplicate_members_classify_within_the_default_limits() {
    let p = policy();
    let pairs = r#""body":"x","a":1,"#.repeat(100_000);
    let text = format!(r#"{{"source":"http",{pairs}"status":503,"body":"last"}}"#);
    assert!(text.len() > 1_500_000);
    let envelope = p
        .classify_json(&text)
        .expect("duplicate members classify under the default fuel");
    assert!(
        envelope.contains(r#""code":"tool.http.503_unavailable""#),
        "{envelope}"
    );
}

#[test]
fn inputs_over_sixteen_mebibytes_are_too_large() {
    let p = policy();
    let text = format!(
        r#"{{"source":"http","status":500,"body":"{}"}}"#,
        "x".repeat(17 << 20)
    );
    let err = assert_clean(p.classify_json(&text), ErrorKind::InputTooLarge, "17 MiB");
    assert!(err.message().contains("16777216"), "{err}");
    assert!(err.kind().is_bad_input());
}

#[test]
fn deeply_nested_json_is_an_error_not_a_stack_overflow() {
    let p = policy();
    for depth in [200, 10_000, 1_000_000] {
        let nested = format!("{}{}", "[".repeat(depth), "]".repeat(depth));
        let body = format!(r#"{{"source":"http","status":500,"body":{nested}}}"#);
        let result = p.classify_json(&body);
        if let Err(e) = &result {
            assert!(e.kind().is_bad_input(), "depth {depth} body: {e:?}");
        }
        let nested_obj = format!("{}1{}", r#"{"a":"#.repeat(depth), "}".repeat(depth));
        let err = p.classify_json(&nested_obj).expect_err("nested root");
        assert!(err.kind().is_bad_input(), "depth {depth} root: {err:?}");
        let err = p
            .decide_json(r#"{"source":"http","status":500}"#, &nested_obj)
            .expect_err("nested context");
        assert!(err.kind().is_bad_input(), "depth {depth} context: {err:?}");
    }
    // The instances that answered are healthy: nothing trapped.
    assert!(
        policy()
            .classify_json(r#"{"source":"http","status":429}"#)
            .is_ok()
    );
}

#[test]
fn invalid_utf8_is_reported_with_its_offset() {
    let err = agent_recovery::utf8(b"{\"a\":\"\xff\"}").expect_err("not UTF-8");
    assert_eq!(err.kind(), ErrorKind::InvalidUtf8);
    assert!(
        err.message()
            .starts_with("input is not valid UTF-8 at byte 6;"),
        "{err}"
    );
    assert_eq!(agent_recovery::utf8("é".as_bytes()).ok(), Some("é"));
}
