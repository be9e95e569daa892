//! The Rust retry helper acts on the real component's decisions.

use agent_recovery::Policy;
use agent_recovery::retry::{Attempt, RecoveryError, Retry};
use std::time::Duration;

#[test]
fn retries_with_one_key_and_the_decided_delays() {
    let policy = Policy::reference().unwrap();
    let mut keys = Vec::new();
    let mut slept = Vec::new();
    let out = Retry::new(
        "run-1",
        "step-1",
        "charge",
        r#"{"amount":5,"currency":"usd"}"#,
    )
    .seed(42)
    .run(
        &policy,
        |a: &Attempt| {
            keys.push(a.idempotency_key.clone());
            match a.number {
                1 => Err(
                    r#"{"source":"http","status":429,"headers":{"retry-after":"2"}}"#.to_owned(),
                ),
                2 => Err(r#"{"source":"network","code":"ECONNRESET"}"#.to_owned()),
                _ => Ok(a.number),
            }
        },
        |d| slept.push(d),
    )
    .unwrap();
    assert_eq!(out, 3);
    assert_eq!(keys.len(), 3);
    assert!(
        keys.iter().all(|k| k == &keys[0]),
        "one key for every attempt: {keys:?}"
    );
    assert_eq!(
        keys[0],
        policy
            .key(
                "run-1",
                "step-1",
                "charge",
                r#"{"currency":"usd","amount":5}"#
            )
            .unwrap()
    );
    assert_eq!(slept.len(), 2);
    assert!(
        slept[0] >= Duration::from_millis(2000),
        "the Retry-After floor: {slept:?}"
    );
    // The second delay is the component's own decision for attempt 2, elapsed = the first delay.
    let ctx = format!(
        r#"{{"call":"tool","attempt":2,"elapsed_ms":{},"seed":"42"}}"#,
        slept[0].as_millis()
    );
    let d: serde_json::Value = serde_json::from_str(
        &policy
            .decide_json(r#"{"source":"network","code":"ECONNRESET"}"#, &ctx)
            .unwrap(),
    )
    .unwrap();
    assert_eq!(
        slept[1],
        Duration::from_millis(d["delay_ms"].as_u64().unwrap())
    );
}

#[test]
fn stops_on_a_non_retry_action_with_the_envelope() {
    let policy = Policy::reference().unwrap();
    let mut calls = 0;
    let err = Retry::new("r", "s", "t", "{}")
        .run(
            &policy,
            |_: &Attempt| -> Result<(), String> {
                calls += 1;
                Err(r#"{"source":"http","status":400}"#.to_owned())
            },
            |_| panic!("must not sleep"),
        )
        .unwrap_err();
    assert_eq!(calls, 1);
    match err {
        RecoveryError::Stopped {
            action, decision, ..
        } => {
            assert_eq!(action, "fail");
            assert_eq!(decision["envelope"]["code"], "tool.http.400_bad_request");
        }
        other => panic!("unexpected {other}"),
    }
}

#[test]
fn keeps_the_attempt_budget() {
    let policy = Policy::reference().unwrap();
    let mut calls = 0;
    let mut total = Duration::ZERO;
    let err = Retry::new("r", "s", "t", "{}")
        .call("llm")
        .seed(1)
        .run(
            &policy,
            |_: &Attempt| -> Result<(), String> {
                calls += 1;
                Err(r#"{"source":"http","status":503}"#.to_owned())
            },
            |d| total += d,
        )
        .unwrap_err();
    assert_eq!(calls, 3, "llm calls get 3 attempts");
    assert!(total <= Duration::from_millis(60_000));
    match err {
        RecoveryError::Stopped {
            action, decision, ..
        } => {
            assert_eq!(action, "dead_letter");
            assert_eq!(decision["reason_code"], "runtime.budget.attempts_exhausted");
        }
        other => panic!("unexpected {other}"),
    }
}

#[test]
fn a_bad_observation_is_a_policy_error() {
    let policy = Policy::reference().unwrap();
    let err = Retry::new("r", "s", "t", "{}")
        .run(
            &policy,
            |_: &Attempt| -> Result<(), String> { Err("not json".to_owned()) },
            |_| {},
        )
        .unwrap_err();
    assert!(matches!(err, RecoveryError::Policy(_)), "{err}");
}
