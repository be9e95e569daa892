//! The telemetry mapping (docs/telemetry.md, "The mapping") against the
//! shared vectors of `tests/telemetry-map/`, which the Rust, Node and Python
//! hosts run too.

use agent_recovery_policy::telemetry::{Instruction, Observation, map_lane, map_lane_json};
use serde_json::Value;

fn cases() -> Vec<Value> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../tests/telemetry-map/lanes.json"
    );
    let text = std::fs::read_to_string(path).expect("tests/telemetry-map/lanes.json");
    let doc: Value = serde_json::from_str(&text).expect("lanes.json is JSON");
    doc["cases"].as_array().expect("cases").clone()
}

fn observations(case: &Value) -> Vec<Observation> {
    serde_json::from_value(case["observations"].clone()).expect("observations")
}

fn check(name: &str, got: &[Instruction], expected: &Value) {
    let got = serde_json::to_value(got).expect("instructions serialize");
    assert_eq!(
        &got,
        expected,
        "case {name}\nexpected: {}\n     got: {}",
        serde_json::to_string_pretty(expected).unwrap_or_default(),
        serde_json::to_string_pretty(&got).unwrap_or_default()
    );
}

#[test]
fn every_vector_in_one_call() {
    let cases = cases();
    assert!(cases.len() >= 7, "the vectors are all there");
    for case in cases {
        let name = case["name"].as_str().unwrap_or("?");
        let out = map_lane("", observations(&case)).expect(name);
        check(name, &out.instructions, &case["instructions"]);
    }
}

#[test]
fn every_vector_one_observation_per_call() {
    for case in cases() {
        let name = case["name"].as_str().unwrap_or("?");
        let mut state = String::new();
        let mut all = Vec::new();
        for o in observations(&case) {
            let out = map_lane(&state, vec![o]).expect(name);
            state = out.state;
            all.extend(out.instructions);
        }
        check(name, &all, &case["instructions"]);
    }
}

#[test]
fn every_vector_through_the_json_twin() {
    for case in cases() {
        let name = case["name"].as_str().unwrap_or("?");
        let (_, text) = map_lane_json("", &case["observations"].to_string()).expect(name);
        let got: Value = serde_json::from_str(&text).expect("instructions are JSON");
        assert_eq!(got, case["instructions"], "case {name}");
    }
}

#[test]
fn a_new_lane_must_start_with_lane() {
    let obs: Vec<Observation> =
        serde_json::from_str(r#"[{"now_ms": 1, "kind": "call_end"}]"#).expect("observation");
    let err = map_lane("", obs).expect_err("no lane start");
    assert!(
        err.message.contains("starts with a `lane` observation"),
        "{}",
        err.message
    );
}

#[test]
fn a_lane_starts_once() {
    let start = r#"[{"now_ms": 1, "kind": {"lane": {"run_id": "r", "kind": "bare"}}}]"#;
    let (state, text) = map_lane_json("", start).expect("lane");
    assert_eq!(text, "[]", "a bare lane has no span");
    let err = map_lane_json(&state, start).expect_err("second start");
    assert!(
        err.message.contains("has started already"),
        "{}",
        err.message
    );
}

#[test]
fn a_bad_state_is_an_error_not_a_panic() {
    let err = map_lane_json("{not json", "[]").expect_err("bad state");
    assert!(
        err.message.contains("telemetry lane state"),
        "{}",
        err.message
    );
    let err = map_lane_json("", "[{\"now_ms\": -1}]").expect_err("bad observations");
    assert!(
        err.message.contains("telemetry observations"),
        "{}",
        err.message
    );
}

#[test]
fn nothing_after_the_lane_ended() {
    let obs = r#"[{"now_ms": 1, "kind": {"lane": {"run_id": "r", "kind": {"step": {"id": "s", "tool": "t"}}}}},
                  {"now_ms": 2, "kind": {"finish": {"outcome": "ok"}}}]"#;
    let (state, _) = map_lane_json("", obs).expect("lane");
    let (_, text) = map_lane_json(
        &state,
        r#"[{"now_ms": 3, "kind": {"event": "{\"event\":\"sleep\",\"delay_ms\":5}"}}, {"now_ms": 3, "kind": "abandon"}]"#,
    )
    .expect("after the end");
    assert_eq!(text, "[]");
}

#[test]
fn integers_past_i64_saturate() {
    let obs = r#"[{"now_ms": 1, "kind": {"lane": {"run_id": "r", "kind": "bare"}}},
                  {"now_ms": 1, "kind": {"call_start": {"role": "operation", "step": "s", "target": "t",
                   "key": "k", "attempt": 1, "timeout_ms": 18446744073709551615}}}]"#;
    let (_, text) = map_lane_json("", obs).expect("maps");
    assert!(
        text.contains(r#"{"key":"agent_recovery.timeout_ms","value":{"int":9223372036854775807}}"#),
        "{text}"
    );
}
