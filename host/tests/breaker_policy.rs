//! The circuit-breaker thresholds are policy configuration:
//! a hot swap through a `PolicyHandle` changes them at the next decision, and
//! an open breaker's stored `open_ms` decides when it half-opens for every
//! worker, whatever that worker's own configuration.
//!
//! The expected timelines were derived by hand from `docs/runtime.md` ("The
//! rules"), the breaker's defaults, the reference's 3 failures / 30 000 ms and
//! payments-policy's documented 2 failures / 60 000 ms (20 000 ms run budget),
//! with the delays of `tests/vectors/tools/jitter.py` for seed 7 and base
//! 250 ms: 53 ms after attempt 1, 152 ms after attempt 2 (both caps, 30 000
//! and 5 000, are above those ceilings).

mod common;

use std::sync::{Arc, Mutex, PoisonError};

use agent_recovery::runtime::{Outcome, Runtime, Step, VirtualClock};
use agent_recovery::{
    ErrorKind, MemoryStore, Policy, PolicyErrorKind, PolicyHandle, Store, SwapOptions,
};
use serde_json::{Value, json};

use common::handle::payments_wasm;

const T0: u64 = 1_767_225_600_000;
const BREAKER_KEY: &str = "agent-recovery/breaker/api.pay";
const FAILED_503: &str = r#"{"source":"http","status":503}"#;

/// A step on target `api.pay` whose calls return `outcomes` in order (then ok).
fn step(id: &str, outcomes: &Outcomes) -> Step<'static> {
    let outcomes = Arc::clone(outcomes);
    Step::new(id, "payments.charge", move |_call| {
        let mut left = outcomes.lock().unwrap_or_else(PoisonError::into_inner);
        if left.is_empty() {
            Outcome::Ok(json!({"id": "ch_1"}))
        } else {
            left.remove(0)
        }
    })
    .call("tool")
    .target("api.pay")
}

/// What the next calls return, shared with the test.
type Outcomes = Arc<Mutex<Vec<Outcome>>>;

fn failing_twice_then_ok() -> Outcomes {
    Arc::new(Mutex::new(vec![
        Outcome::Failed(FAILED_503.into()),
        Outcome::Failed(FAILED_503.into()),
    ]))
}

/// The events of a run, parsed; `(event, t_ms, the event's other detail)`.
fn timeline(events: &[String]) -> Vec<(String, u64, Value)> {
    events
        .iter()
        .map(|text| {
            let e: Value = serde_json::from_str(text).expect("an event is JSON");
            let detail = ["state", "delay_ms", "action", "code", "attempt"]
                .iter()
                .filter_map(|k| e.get(*k).map(|v| ((*k).to_owned(), v.clone())))
                .collect::<serde_json::Map<_, _>>();
            (
                e["event"].as_str().unwrap_or_default().to_owned(),
                e["t_ms"].as_u64().expect("t_ms"),
                Value::Object(detail),
            )
        })
        .collect()
}

fn stored_breaker(store: &MemoryStore, now: u64) -> Value {
    let v = store
        .get(BREAKER_KEY, now)
        .expect("the store answers")
        .expect("the breaker is stored");
    serde_json::from_str(&v.value).expect("a stored breaker is JSON")
}

#[test]
fn a_hot_swap_to_payments_policy_applies_its_breaker_at_the_next_decision() {
    let clock = Arc::new(VirtualClock::new(T0));
    let store = Arc::new(MemoryStore::new());
    let handle = PolicyHandle::builder()
        .reference()
        .expect("the reference loads");
    let runtime = Runtime::builder()
        .handle(handle.clone())
        .clock(clock.clone())
        .store(store.clone())
        .seed(7)
        .build()
        .expect("the runtime builds");
    let mut run = runtime.run("swap-run").expect("the run starts");

    // The reference decides: two 503s in a row stay under its threshold of 3.
    let outcomes = failing_twice_then_ok();
    let report = run.step(step("first", &outcomes)).expect("step 1 runs");
    assert_eq!(report.outcome, "ok");
    let first = timeline(run.events());
    assert!(
        first.iter().all(|(event, _, _)| event != "breaker"),
        "two failures must not open the reference's breaker: {first:?}"
    );
    assert_eq!(stored_breaker(&store, T0 + 205)["state"], "closed");

    // Mid-run, the platform team swaps in payments-policy.
    let payments = Arc::new(Policy::from_file(payments_wasm()).expect("payments-policy loads"));
    handle
        .swap_policy(payments, &SwapOptions::default())
        .expect("payments-policy passes its checks");

    // Same run, same target: now 2 failures open it (its first window 250 ms,
    // under payments' 60 000 ms cap).
    let outcomes = failing_twice_then_ok();
    let report = run.step(step("second", &outcomes)).expect("step 2 runs");
    let second: Vec<_> = timeline(run.events()).split_off(first.len());
    // Step 1 took 53 + 152 = 205 ms; step 2's attempt 1 fails at 205, its
    // attempt 2 at 258, which opens the breaker until 258 + 250. At 410 the
    // next call is short-circuited (508 - 410 = 98 ms to the probe) and, with
    // on_open "fail" (the default), the step fails at once.
    let expected = vec![
        ("attempt", 205, json!({"attempt": 1})),
        (
            "decision",
            205,
            json!({"attempt": 1, "action": "retry", "code": "tool.http.503_unavailable", "delay_ms": 53}),
        ),
        ("sleep", 205, json!({"delay_ms": 53})),
        ("attempt", 258, json!({"attempt": 2})),
        (
            "decision",
            258,
            json!({"attempt": 2, "action": "retry", "code": "tool.http.503_unavailable", "delay_ms": 152}),
        ),
        ("breaker", 258, json!({"state": "open"})),
        ("sleep", 258, json!({"delay_ms": 152})),
        (
            "short_circuit",
            410,
            json!({"code": "runtime.circuit.open", "delay_ms": 98, "state": "open"}),
        ),
        (
            "decision",
            410,
            json!({"attempt": 2, "action": "fail", "code": "runtime.circuit.open"}),
        ),
        ("outcome", 410, json!({"state": "failed"})),
    ];
    let expected: Vec<(String, u64, Value)> = expected
        .into_iter()
        .map(|(e, t, d)| (e.to_owned(), t, d))
        .collect();
    assert_eq!(second, expected);
    assert_eq!(report.outcome, "failed");
    assert_eq!(
        outcomes
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len(),
        0,
        "both failures were called; the short-circuit called nothing"
    );
    // The open breaker carries its window, when the outage began and its
    // epoch (its first state change).
    assert_eq!(
        stored_breaker(&store, T0 + 410),
        json!({"state": "open", "failures": 2, "since_ms": T0 + 258, "open_ms": 250, "down_since_ms": T0 + 258, "epoch": 1})
    );

    // Another worker sharing the store, 50 ms later, with its own run
    // configuration saying open_ms 100 (and on_open "wait"): the stored 250
    // decides, so it is short-circuited until 508 (48 ms from 460), and its
    // reference policy retries after max(48, 53) = 53 ms, as the probe.
    clock.advance(50);
    let worker = Runtime::builder()
        .clock(clock.clone())
        .store(store.clone())
        .seed(7)
        .config_json(
            json!({"breaker": {"failure_threshold": 3, "open_ms": 100}, "on_open": "wait"}),
        )
        .build()
        .expect("the second worker builds");
    let mut other = worker.run("other-worker").expect("the run starts");
    let ok: Outcomes = Arc::default();
    let report = other.step(step("third", &ok)).expect("step 3 runs");
    assert_eq!(report.outcome, "ok");
    let third = timeline(other.events());
    let head: Vec<_> = third.iter().take(4).cloned().collect();
    assert_eq!(
        head,
        vec![
            (
                "short_circuit".to_owned(),
                0,
                json!({"code": "runtime.circuit.open", "delay_ms": 48, "state": "open"})
            ),
            (
                "decision".to_owned(),
                0,
                // The key has no call yet: the decision event's count is 0.
                json!({"attempt": 0, "action": "retry", "code": "runtime.circuit.open", "delay_ms": 53})
            ),
            ("sleep".to_owned(), 0, json!({"delay_ms": 53})),
            ("breaker".to_owned(), 53, json!({"state": "half_open"})),
        ]
    );
    assert_eq!(stored_breaker(&store, T0 + 513)["state"], "closed");
}

/// Bad thresholds are refused, never crash: in a decide context (the real
/// component, `invalid-config` with a hint), in a run configuration (the loop
/// refuses the run), and the payments component clamps looser asks.
#[test]
fn bad_thresholds_are_structured_errors() {
    let reference = Policy::reference().expect("the reference loads");
    let e = reference
        .decide_json(
            FAILED_503,
            r#"{"attempt":1,"config":{"breaker":{"failure_threshold":0}}}"#,
        )
        .expect_err("threshold 0 is refused");
    assert_eq!(e.kind(), ErrorKind::Policy(PolicyErrorKind::InvalidConfig));
    assert!(e.message().contains("e.g. 3"), "{e}");

    let runtime = Runtime::builder()
        .clock(Arc::new(VirtualClock::new(T0)))
        .breaker(3, 0)
        .build()
        .expect("the runtime builds");
    let e = runtime
        .run("bad-breaker")
        .err()
        .expect("open_ms 0 is refused");
    assert!(e.to_string().contains("breaker.open_ms"), "{e}");

    let payments = Policy::from_file(payments_wasm()).expect("payments-policy loads");
    let d: Value = serde_json::from_str(
        &payments
            .decide_json(
                FAILED_503,
                r#"{"attempt":1,"seed":7,"config":{"breaker":{"failure_threshold":5,"open_ms":1000}}}"#,
            )
            .expect("payments decides"),
    )
    .expect("a decision is JSON");
    assert_eq!(
        d["breaker"],
        json!({"failure_threshold": 2, "open_ms": 60000})
    );
}
