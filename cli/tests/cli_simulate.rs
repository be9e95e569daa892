//! `agent-recovery simulate`: the real binary, the real component, a virtual
//! clock; byte-identical output, a store file shared by two runs, clean errors.

mod common;

use serde_json::Value;

use common::cli::{fails, ok, path_str, run, scratch};

const SCENARIO: &str = r#"{"run_id": "r1", "seed": 7, "now_ms": 1767225600000, "config": {},
 "steps": [
   {"id": "charge", "tool": "payments.charge", "call": "tool", "target": "api.pay",
    "args": {"amount": 10}, "side_effect": true,
    "outcomes": [{"source":"http","status":503}, {"source":"http","status":503}, "ok"],
    "fallbacks": [{"target": "api.pay-b", "outcomes": ["ok"]}],
    "compensation": {"outcomes": ["ok"]}}]}"#;

#[test]
fn json_output_is_the_issue_format_and_byte_identical() {
    let path = scratch("simulate-basic.json", SCENARIO.as_bytes());
    let first = ok(&run(&["simulate", path_str(&path), "--json"], b""));
    let second = ok(&run(&["simulate", path_str(&path), "--json"], b""));
    assert_eq!(first, second);
    let v: Value = serde_json::from_str(&first).unwrap();
    assert_eq!(v["outcome"], "completed");
    let events = v["events"].as_array().unwrap();
    for e in events {
        for member in ["t_ms", "event", "step", "target"] {
            assert!(e.get(member).is_some(), "{member} missing in {e}");
        }
    }
    let attempts: Vec<&Value> = events.iter().filter(|e| e["event"] == "attempt").collect();
    assert_eq!(attempts.len(), 3);
    assert!(
        attempts.iter().all(|a| a["key"] == attempts[0]["key"]),
        "one key per step"
    );
    // seed 7, tool backoff (docs/envelope-and-decision.md; tests/vectors/tools/jitter.py): 53 then 152 ms.
    let sleeps: Vec<u64> = events
        .iter()
        .filter(|e| e["event"] == "sleep")
        .map(|e| e["delay_ms"].as_u64().unwrap())
        .collect();
    assert_eq!(sleeps, vec![53, 152]);
}

#[test]
fn the_table_names_every_event() {
    let path = scratch("simulate-table.json", SCENARIO.as_bytes());
    let table = ok(&run(&["simulate", path_str(&path), "--human"], b""));
    assert!(table.starts_with("    t_ms  event"), "{table}");
    assert_eq!(
        table.lines().filter(|l| l.contains(" attempt ")).count(),
        3,
        "{table}"
    );
    assert!(
        table.ends_with("outcome: completed; dead letters written: 0"),
        "{table}"
    );
}

/// Run A opens api.pay's breaker (3 consecutive 503s) in a store file; run B,
/// 300 ms later, finds it open: the call is short-circuited without
/// consuming an outcome and the chain falls back to api.pay-b. Without the
/// file, run B calls api.pay.
#[test]
fn a_store_file_shares_breakers_between_runs() {
    let db = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("simulate-store.db");
    let _ = std::fs::remove_file(&db);
    let a = scratch(
        "simulate-a.json",
        br#"{"run_id": "r-a", "seed": 7, "now_ms": 1767225600000, "config": {"policy": {"tool": {"max_attempts": 3}}},
            "steps": [{"id": "pay", "tool": "payments.charge", "call": "tool", "target": "api.pay",
            "outcomes": [{"source":"http","status":503},{"source":"http","status":503},{"source":"http","status":503}]}]}"#,
    );
    let b = scratch(
        "simulate-b.json",
        br#"{"run_id": "r-b", "seed": 7, "now_ms": 1767225600300,
            "steps": [{"id": "pay", "tool": "payments.charge", "call": "tool", "target": "api.pay",
            "outcomes": [{"source":"http","status":503}, "ok"], "fallbacks": [{"target": "api.pay-b", "outcomes": ["ok"]}]}]}"#,
    );
    let out_a: Value = serde_json::from_str(&ok(&run(
        &["simulate", path_str(&a), "--json", "--store", path_str(&db)],
        b"",
    )))
    .unwrap();
    assert_eq!(out_a["outcome"], "dead_lettered");
    assert_eq!(out_a["dead_letters"].as_array().unwrap().len(), 1);
    let out_b: Value = serde_json::from_str(&ok(&run(
        &["simulate", path_str(&b), "--json", "--store", path_str(&db)],
        b"",
    )))
    .unwrap();
    let events: Vec<(String, String)> = out_b["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["event"].as_str().unwrap().to_owned(),
                e["target"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let expect: Vec<(String, String)> = [
        ("short_circuit", "api.pay"),
        ("fallback", "api.pay-b"),
        ("attempt", "api.pay-b"),
        ("ok", "api.pay-b"),
        ("outcome", "api.pay-b"),
    ]
    .iter()
    .map(|(a, b)| (a.to_string(), b.to_string()))
    .collect();
    assert_eq!(events, expect);
    // The first open window, 250 ms from t=205 of run A; run B starts 300 ms after A.
    assert_eq!(out_b["events"][0]["delay_ms"], 155);
    let alone: Value =
        serde_json::from_str(&ok(&run(&["simulate", path_str(&b), "--json"], b""))).unwrap();
    assert_eq!(alone["events"][0]["event"], "attempt");
    assert_eq!(alone["events"][0]["target"], "api.pay");
}

#[test]
fn bad_scenarios_are_usage_errors() {
    let cases: &[(&str, &[u8], &str)] = &[
        ("not-json", b"{", "scenario"),
        ("no-steps", br#"{"run_id":"r","now_ms":0,"steps":[]}"#, "`steps` is empty"),
        ("typo", br#"{"run_id":"r","now_ms":0,"steps":[{"id":"s","tool":"t","outcome":["ok"]}]}"#, "unknown field `outcome`"),
        ("bad-outcome", br#"{"run_id":"r","now_ms":0,"steps":[{"id":"s","tool":"t","outcomes":[5]}]}"#, "use \"ok\" or an observation"),
        ("short", br#"{"run_id":"r","now_ms":0,"steps":[{"id":"s","tool":"t","outcomes":[{"source":"http","status":503}]}]}"#, "no outcome left"),
        ("bad-config", br#"{"run_id":"r","now_ms":0,"config":{"atempt_budget":3},"steps":[{"id":"s","tool":"t","outcomes":["ok"]}]}"#, "atempt_budget"),
    ];
    for (name, body, needle) in cases {
        let path = scratch(&format!("simulate-bad-{name}.json"), body);
        let err = fails(&run(&["simulate", path_str(&path), "--json"], b""), 2);
        assert!(err.contains(needle), "{name}: {err}");
    }
    let err = fails(&run(&["simulate"], b""), 2);
    assert!(err.contains("<SCENARIO>"), "{err}");
    let err = fails(&run(&["simulate", "/nonexistent/s.json"], b""), 2);
    assert!(err.contains("cannot read scenario"), "{err}");
}

/// `--policy` previews another policy under the same loop: payments-policy
/// (a 0.1 component) allows 3 tool attempts where the reference allows 5.
#[test]
fn policy_previews_a_0_1_component_under_the_loop() {
    let path = scratch(
        "simulate-policy.json",
        br#"{"run_id": "p", "seed": 7, "now_ms": 1767225600000, "config": {"breaker": {"failure_threshold": 10, "open_ms": 30000}},
            "steps": [{"id": "refund", "tool": "payments.refund", "call": "tool", "target": "psp",
            "outcomes": [{"source":"http","status":503},{"source":"http","status":503},{"source":"http","status":503},
                         {"source":"http","status":503},{"source":"http","status":503}]}]}"#,
    );
    let count = |out: &str| {
        let v: Value = serde_json::from_str(out).unwrap();
        v["events"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["event"] == "attempt")
            .count()
    };
    let reference = ok(&run(&["simulate", path_str(&path), "--json"], b""));
    assert_eq!(count(&reference), 5);
    let wasm = common::fixtures::payments_wasm();
    let payments = ok(&run(
        &[
            "simulate",
            path_str(&path),
            "--json",
            "--policy",
            path_str(&wasm),
        ],
        b"",
    ));
    assert_eq!(count(&payments), 3);
}
