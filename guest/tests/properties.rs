//! Properties over open input: any bytes or any JSON in, an envelope or a
//! clear policy error out — never a panic (a panic in the component is a trap).
//! Every envelope has a registry code; every decision keeps to its budgets.

use agent_recovery_policy::{classify_json, decide_json, lookup};
use proptest::prelude::*;
use serde_json::{Value, json};

fn any_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(|f| json!(f)),
        ".{0,12}".prop_map(Value::String),
        prop_oneof![
            Just("error"),
            Just("code"),
            Just("status"),
            Just("type"),
            Just("message"),
            Just("retryAfter")
        ]
        .prop_map(|s| Value::String(s.to_owned())),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            prop::collection::btree_map(
                prop_oneof![
                    Just("error".to_owned()),
                    Just("code".to_owned()),
                    Just("message".to_owned()),
                    Just("data".to_owned()),
                    Just("status".to_owned()),
                    Just("details".to_owned()),
                    Just("type".to_owned()),
                    Just("retryable".to_owned()),
                    Just("result".to_owned()),
                    Just("isError".to_owned()),
                    Just("choices".to_owned()),
                    Just("__type".to_owned()),
                    "[a-z_]{1,8}",
                ],
                inner,
                0..5
            )
            .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn observation() -> impl Strategy<Value = Value> {
    (any_json(), any_json(), 100u16..1000, 0usize..8).prop_map(|(a, b, status, shape)| match shape {
        0 => json!({"source": "http", "status": status, "body": a, "headers": {"retry-after": b.to_string()}}),
        1 => json!({"source": "http", "status": status, "body": a.to_string()}),
        2 => json!({"source": "jsonrpc", "message": {"jsonrpc": "2.0", "id": 1, "error": a}}),
        3 => json!({"source": "a2a", "message": {"jsonrpc": "2.0", "id": 1, "result": a}}),
        4 => json!({"source": "mcp", "message": {"jsonrpc": "2.0", "id": 1, "result": {"isError": true, "content": a, "structuredContent": b}}}),
        5 => json!({"source": "network", "code": a}),
        6 => a,
        _ => json!({"source": "http", "status": status, "headers": a, "body": b}),
    })
}

fn check_envelope(text: &str) {
    let env: Value = serde_json::from_str(text).expect("output is JSON");
    let code = env["code"].as_str().expect("code");
    assert!(lookup(code).is_some(), "unregistered code {code}");
    if env["retryable"] == true {
        assert_eq!(env["class"], "transient");
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn any_bytes_classify_or_error(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
        let text = String::from_utf8_lossy(&bytes);
        if let Ok(out) = classify_json(&text) {
            check_envelope(&out);
        }
    }

    #[test]
    fn any_json_observation_classifies_or_errors(obs in observation()) {
        if let Ok(out) = classify_json(&obs.to_string()) {
            check_envelope(&out);
        }
    }

    #[test]
    fn decisions_respect_attempts_and_budget(
        obs in observation(),
        attempt in 1u32..12,
        elapsed in 0u64..120_000,
        seed in any::<u64>(),
    ) {
        let ctx = json!({"attempt": attempt, "elapsed_ms": elapsed, "seed": seed}).to_string();
        if let Ok(out) = decide_json(&obs.to_string(), &ctx) {
            let d: Value = serde_json::from_str(&out).unwrap();
            check_envelope(&d["envelope"].to_string());
            if d["action"] == "retry" {
                let delay = d["delay_ms"].as_u64().unwrap();
                prop_assert!(attempt < d["max_attempts"].as_u64().unwrap() as u32);
                prop_assert!(elapsed + delay <= 60_000, "delay {delay} overruns the budget at {elapsed}");
                prop_assert_eq!(d["envelope"]["retry_after_ms"].as_u64(), Some(delay));
                prop_assert_eq!(d["budget_remaining_ms"].as_u64(), Some(60_000 - elapsed - delay));
            }
        }
    }
}

#[test]
fn deep_nesting_is_an_error_not_a_crash() {
    let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
    assert!(classify_json(&deep).is_err());
    let obs = format!(
        r#"{{"source":"http","status":500,"body":{}{}}}"#,
        "{\"a\":".repeat(5000),
        "1".to_owned() + &"}".repeat(5000)
    );
    assert!(classify_json(&obs).is_err());
}

#[test]
fn a_ten_megabyte_body_still_classifies() {
    let body = "x".repeat(10 * 1024 * 1024);
    let obs = json!({"source": "http", "status": 503, "body": body}).to_string();
    let env: Value = serde_json::from_str(&classify_json(&obs).unwrap()).unwrap();
    assert_eq!(env["code"], "tool.http.503_unavailable");
    assert!(env["message"].as_str().unwrap().len() < 2000);
}

#[test]
fn context_errors_name_the_right_kind() {
    let obs = r#"{"source":"http","status":503}"#;
    let kind = |ctx: &str| decide_json(obs, ctx).unwrap_err().kind;
    use agent_recovery_policy::ErrorKind;
    assert_eq!(kind(r#"{"surprise":true}"#), ErrorKind::InvalidContext);
    assert_eq!(kind(r#"{"attempt":"one"}"#), ErrorKind::InvalidContext);
    assert_eq!(
        kind(r#"{"config":{"tool":{"base_ms":0}}}"#),
        ErrorKind::InvalidConfig
    );
    assert_eq!(kind(r#"{"config":{"toll":{}}}"#), ErrorKind::InvalidConfig);
    assert_eq!(
        kind(r#"{"config":{"llm":{"base_ms":10,"cap_ms":5}}}"#),
        ErrorKind::InvalidConfig
    );
    assert_eq!(kind("[1]"), ErrorKind::InvalidContext);
}
