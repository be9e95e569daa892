//! The loop's state machine natively: bad inputs and states are errors with a
//! hint, never a panic (a panic in the component is a trap), in any phase.

use agent_recovery_policy::ErrorKind;
use agent_recovery_policy::advance;
use proptest::prelude::*;

fn started() -> String {
    advance("", r#"{"input":"run","now_ms":0,"run_id":"r","seed":7}"#)
        .unwrap()
        .state
}

fn reading() -> String {
    advance(
        &started(),
        r#"{"input":"step","now_ms":0,"step":{"id":"s","tool":"t"}}"#,
    )
    .unwrap()
    .state
}

#[test]
fn bad_inputs_are_errors_with_a_hint() {
    let state = started();
    let cases: &[(&str, &str, &str)] = &[
        ("", "{", "input"),
        ("", "[]", "expected an object"),
        (
            "",
            r#"{"input":"step","now_ms":0,"step":{"id":"s","tool":"t"}}"#,
            "must be `run`",
        ),
        ("", r#"{"input":"run","now_ms":0}"#, "run_id"),
        (
            "",
            r#"{"input":"run","now_ms":0,"run_id":"r","config":{"atempt_budget":1}}"#,
            "atempt_budget",
        ),
        (
            &state,
            r#"{"input":"run","now_ms":0,"run_id":"r"}"#,
            "already started",
        ),
        (
            &state,
            r#"{"input":"step","step":{"id":"s","tool":"t"}}"#,
            "now_ms",
        ),
        (
            &state,
            r#"{"input":"step","now_ms":0,"step":{"id":"","tool":"t"}}"#,
            "non-empty",
        ),
        (
            &state,
            r#"{"input":"step","now_ms":0,"step":{"id":"s","tool":"t","call":"rpc"}}"#,
            "tool, llm or agent",
        ),
        (
            &state,
            r#"{"input":"step","now_ms":0,"step":{"id":"s","tool":"t","retries":3}}"#,
            "retries",
        ),
        (
            &state,
            r#"{"input":"attempt","now_ms":0,"result":"ok"}"#,
            "phase",
        ),
        (
            &state,
            r#"{"input":"teleport","now_ms":0}"#,
            "unknown input",
        ),
        (
            "{\"v\":1}",
            r#"{"input":"slept","now_ms":0}"#,
            "not a state",
        ),
        ("not json", r#"{"input":"slept","now_ms":0}"#, "not a state"),
    ];
    for (state, input, needle) in cases {
        let err = advance(state, input).expect_err(input);
        assert!(err.message.contains(needle), "{input}: {}", err.message);
        assert!(
            matches!(
                err.kind,
                ErrorKind::InvalidArgument | ErrorKind::InvalidJson | ErrorKind::InvalidConfig
            ),
            "{input}: {:?}",
            err.kind
        );
    }
    let reading = reading();
    let err = advance(
        &reading,
        r#"{"input":"attempt","now_ms":0,"result":{"maybe":1}}"#,
    )
    .unwrap_err();
    assert!(err.message.contains("`result` must be"), "{}", err.message);
    let err = advance(&reading, r#"{"input":"attempt","now_ms":0,"result":"ok"}"#).unwrap_err();
    assert!(err.message.contains("phase \"reading\""), "{}", err.message);
    let err = advance(&reading, r#"{"input":"read","now_ms":0,"values":[]}"#).unwrap_err();
    assert!(err.message.contains("`values` object"), "{}", err.message);
    let err = advance(
        &reading,
        r#"{"input":"read","now_ms":0,"values":{"agent-recovery/breaker/t":{"state":"ajar"}}}"#,
    )
    .unwrap_err();
    assert!(err.message.contains("delete the key"), "{}", err.message);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// Any text as the input, in two phases: an error or a new state, never a panic.
    #[test]
    fn any_input_never_panics(text in ".{0,200}", kind in prop::sample::select(vec![
        "run", "step", "read", "claimed", "attempt", "decision", "slept", "restored", "cancel", "end", "recover", "taken"])) {
        let _ = advance(&started(), &text);
        let _ = advance(&reading(), &text);
        let framed = format!(r#"{{"input":"{kind}","now_ms":1,"x":{}}}"#, serde_json::to_string(&text).unwrap());
        let _ = advance(&started(), &framed);
        let _ = advance(&reading(), &framed);
    }

    /// Any JSON value where a decision or a result goes: never a panic.
    #[test]
    fn any_json_answer_never_panics(v in prop::sample::select(vec![
        "null", "1", "\"ok\"", "[]", "{}", r#"{"ok":null}"#, r#"{"failed":7}"#, r#"{"response":{"status":"x"}}"#,
        r#"{"action":7}"#, r#"{"action":"retry","delay_ms":-1}"#, r#"{"action":"explode"}"#])) {
        let state = reading();
        let claimed = advance(&state, r#"{"input":"read","now_ms":0,"values":{}}"#).unwrap().state;
        let calling = advance(&claimed, r#"{"input":"claimed","now_ms":0,"ok":true}"#).unwrap().state;
        let _ = advance(&calling, &format!(r#"{{"input":"attempt","now_ms":0,"result":{v}}}"#));
        let deciding = advance(&calling, r#"{"input":"attempt","now_ms":0,"result":{"failed":{"source":"http","status":503}}}"#).unwrap().state;
        let _ = advance(&deciding, &format!(r#"{{"input":"decision","now_ms":0,"decision":{v}}}"#));
    }
}

/// The `taken` input: refused outside the retry quota's phase and
/// with a malformed `tokens`, each with a hint; the loop only asks it when
/// the run configuration sets `retry_quota`.
#[test]
fn taken_is_checked() {
    let e = advance(&reading(), r#"{"input":"taken","now_ms":0,"ok":true}"#).unwrap_err();
    assert_eq!(e.kind, ErrorKind::InvalidArgument);
    assert!(
        e.message.contains("answer the last effect"),
        "{}",
        e.message
    );
    for (input, needle) in [
        (r#"{"input":"taken","now_ms":0}"#, "boolean `ok`"),
        (
            r#"{"input":"taken","now_ms":0,"ok":true,"tokens":"5"}"#,
            "non-negative integer",
        ),
    ] {
        let e = advance(&reading(), input).unwrap_err();
        assert_eq!(e.kind, ErrorKind::InvalidArgument);
        assert!(e.message.contains(needle), "{input}: {}", e.message);
    }
    // With a quota, a retry asks for tokens before its sleep.
    let run = r#"{"input":"run","now_ms":0,"run_id":"r","seed":7,"config":{"retry_quota":{"name":"q","capacity":20,"retry_cost":3}}}"#;
    let mut state = advance("", run).unwrap().state;
    let mut effects = String::new();
    for input in [
        r#"{"input":"step","now_ms":0,"step":{"id":"s","tool":"t","call":"tool"}}"#,
        r#"{"input":"read","now_ms":0,"values":{}}"#,
        r#"{"input":"claimed","now_ms":0,"ok":true}"#,
        r#"{"input":"attempt","now_ms":0,"result":{"failed":{"source":"http","status":503}}}"#,
        r#"{"input":"decision","now_ms":0,"decision":{"action":"retry","delay_ms":10,"envelope":{"code":"tool.http.503_unavailable","class":"transient"}}}"#,
        // The failure is recorded in the target's breaker (a fresh store took the swap).
        r#"{"input":"swapped","now_ms":0,"ok":true,"version":1}"#,
    ] {
        let next = advance(&state, input).unwrap();
        state = next.state;
        effects = next.effects;
    }
    let fx: Vec<serde_json::Value> = serde_json::from_str(&effects).unwrap();
    assert_eq!(
        fx.last().unwrap(),
        &serde_json::json!({"effect":"take","key":"agent-recovery/quota/q","cost":3,"capacity":20})
    );
    let next = advance(
        &state,
        r#"{"input":"taken","now_ms":0,"ok":true,"tokens":17}"#,
    )
    .unwrap();
    let fx: Vec<serde_json::Value> = serde_json::from_str(&next.effects).unwrap();
    assert_eq!(
        fx.last().unwrap(),
        &serde_json::json!({"effect":"sleep","ms":10,"cancellable":true})
    );
}
