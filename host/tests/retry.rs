//! The Rust retry helper acts on the real component's decisions.

use agent_recovery::Policy;
use agent_recovery::retry::{Attempt, RecoveryError, Reply, Retry};
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};
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

/// The decision that stopped the helper (panics on anything else, with the error).
fn stopped(err: RecoveryError) -> (String, Value) {
    match err {
        RecoveryError::Stopped {
            action, decision, ..
        } => (action, decision),
        other => panic!("expected a decision, got {other}"),
    }
}

fn ctx(v: Value) -> serde_json::Map<String, Value> {
    match v {
        Value::Object(m) => m,
        other => panic!("not an object: {other}"),
    }
}

const UNAVAILABLE: &str = r#"{"source":"http","status":503}"#;

#[test]
fn an_observation_that_is_not_json_is_reported_as_an_exception() {
    // The loop's rule (docs/wit.md, the typed runtime): a non-JSON
    // observation becomes an `exception` observation the policy decides on.
    let policy = Policy::reference().unwrap();
    let mut calls = 0;
    let err = Retry::new("r", "s", "t", "{}")
        .run(
            &policy,
            |_: &Attempt| -> Result<(), String> {
                calls += 1;
                Err("not json".to_owned())
            },
            |_| {},
        )
        .unwrap_err();
    assert_eq!(calls, 1);
    let (action, decision) = stopped(err);
    assert_eq!(action, "fail");
    assert_eq!(
        decision["envelope"]["upstream"]["type"], "agent_recovery.InvalidObservation",
        "{decision}"
    );
}

/// An observation `classify` refuses does not stop the run with an error: the
/// loop decides on it as an `agent_recovery.InvalidObservation` (docs/runtime.md, Inputs).
#[test]
fn an_observation_the_component_refuses_is_decided_as_an_invalid_observation() {
    let policy = Policy::reference().unwrap();
    let mut calls = 0;
    let err = Retry::new("r", "s", "t", "{}")
        .run(
            &policy,
            |_: &Attempt| -> Result<(), String> {
                calls += 1;
                Err(r#"{"source":"carrier-pigeon"}"#.to_owned())
            },
            |_| {},
        )
        .unwrap_err();
    assert_eq!(calls, 1);
    let (action, decision) = stopped(err);
    assert_eq!(action, "fail");
    assert_eq!(
        decision["envelope"]["upstream"]["type"], "agent_recovery.InvalidObservation",
        "{decision}"
    );
}

#[test]
fn args_that_are_not_json_are_an_error_before_any_call() {
    let policy = Policy::reference().unwrap();
    let err = Retry::new("r", "s", "t", "{not json")
        .run(
            &policy,
            |_: &Attempt| -> Result<(), String> { panic!("must not be called") },
            |_| {},
        )
        .unwrap_err();
    match err {
        RecoveryError::Policy(e) => assert!(e.message().contains("args_json"), "{e}"),
        other => panic!("unexpected {other}"),
    }
}

#[test]
fn the_elapsed_time_of_earlier_steps_is_carried() {
    // 59 990 ms of the run's 60 000 ms budget spent before this step: the
    // first delay (53 ms for seed 7, tests/vectors/tools/jitter.py) does not
    // fit, so the step is exhausted at once. The old Rust helper
    // reset elapsed_ms to 0 and retried.
    let policy = Policy::reference().unwrap();
    let mut calls = 0;
    let err = Retry::new("r", "s", "t", "{}")
        .seed(7)
        .context(ctx(json!({"elapsed_ms": 59_990})))
        .run(
            &policy,
            |_: &Attempt| -> Result<(), String> {
                calls += 1;
                Err(UNAVAILABLE.to_owned())
            },
            |_| panic!("must not sleep"),
        )
        .unwrap_err();
    assert_eq!(calls, 1);
    let (action, decision) = stopped(err);
    assert_eq!(action, "dead_letter");
    assert_eq!(decision["reason_code"], "runtime.budget.retry_exhausted");
}

#[test]
fn a_retry_without_delay_calls_again_at_once() {
    // base_ms 1, cap_ms 1, seed 12: jitter.py gives 0 ms after attempts 1 and 2.
    // A retry of 0 ms calls again without sleeping (the old helper slept 0 ms).
    let policy = Policy::reference().unwrap();
    let mut calls = 0;
    let out = Retry::new("r", "s", "t", "{}")
        .seed(12)
        .context(ctx(
            json!({"config": {"tool": {"base_ms": 1, "cap_ms": 1}}}),
        ))
        .run(
            &policy,
            |a: &Attempt| {
                calls += 1;
                if a.number < 3 {
                    Err(UNAVAILABLE.to_owned())
                } else {
                    Ok(a.number)
                }
            },
            |d| panic!("must not sleep ({d:?})"),
        )
        .unwrap();
    assert_eq!((out, calls), (3, 3));
}

#[test]
fn the_component_judges_a_raw_response() {
    let policy = Policy::reference().unwrap();
    // A 304 is a success: the value comes back after one call.
    let out = Retry::new("r", "page", "http.get", "{}")
        .run_reply(
            &policy,
            |_: &Attempt| {
                Reply::Response(
                    "cached page",
                    r#"{"source":"http","status":304}"#.to_owned(),
                )
            },
            |_| panic!("must not sleep"),
        )
        .unwrap();
    assert_eq!(out, "cached page");
    // A 200 whose body is a content-filter stop is a failure (a policy
    // refusal; with no fallback target the policy escalates).
    let refusal = json!({"source": "http", "status": 200, "body": {
        "id": "chatcmpl-1", "object": "chat.completion", "model": "gpt-4o",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": null, "refusal": null},
                     "finish_reason": "content_filter"}]}});
    let err = Retry::new("r", "answer", "llm.chat", "{}")
        .call("llm")
        .run_reply(
            &policy,
            |_: &Attempt| Reply::Response("an empty answer", refusal.to_string()),
            |_| panic!("must not sleep"),
        )
        .unwrap_err();
    let (action, decision) = stopped(err);
    assert_eq!(action, "escalate");
    assert_eq!(decision["envelope"]["code"], "llm.policy.refusal");
}

#[test]
fn events_on_a_virtual_clock() {
    // Delays 53 then 152 ms (seed 7, jitter.py): the clock starts at now_ms
    // and moves only by what was slept, so t_ms is exact.
    let policy = Policy::reference().unwrap();
    let events = Arc::new(Mutex::new(Vec::new()));
    let sink = events.clone();
    let out = Retry::new("r", "s", "t", "{}")
        .seed(7)
        .now_ms(1_767_225_600_000)
        .on_event(move |e| {
            sink.lock()
                .unwrap()
                .push(serde_json::from_str::<Value>(e).unwrap())
        })
        .run(
            &policy,
            |a: &Attempt| {
                if a.number < 3 {
                    Err(UNAVAILABLE.to_owned())
                } else {
                    Ok(())
                }
            },
            |_| {},
        );
    assert!(out.is_ok());
    let events = events.lock().unwrap();
    let got: Vec<(u64, &str)> = events
        .iter()
        .map(|e| (e["t_ms"].as_u64().unwrap(), e["event"].as_str().unwrap()))
        .collect();
    assert_eq!(
        got,
        [
            (0, "attempt"),
            (0, "decision"),
            (0, "sleep"),
            (53, "attempt"),
            (53, "decision"),
            (53, "sleep"),
            (205, "attempt"),
            (205, "ok"),
            (205, "outcome"),
        ]
    );
    let keys: Vec<&Value> = events
        .iter()
        .filter(|e| e["event"] == "attempt")
        .map(|e| &e["key"])
        .collect();
    assert!(keys.iter().all(|k| *k == keys[0]), "one key: {keys:?}");
}

#[test]
fn the_deadline_stops_when_no_retry_fits() {
    // deadline 100 ms: the first retry (53 ms) fits, the second (152 ms) does
    // not, so the loop ends the step as a total timeout without asking the
    // policy (docs/runtime.md, "Timeouts").
    let policy = Policy::reference().unwrap();
    let mut calls = 0;
    let mut slept = Vec::new();
    let err = Retry::new("r", "s", "t", "{}")
        .seed(7)
        .now_ms(1_000)
        .deadline_ms(100)
        .run(
            &policy,
            |_: &Attempt| -> Result<(), String> {
                calls += 1;
                Err(UNAVAILABLE.to_owned())
            },
            |d| slept.push(d),
        )
        .unwrap_err();
    assert_eq!(calls, 2);
    assert_eq!(slept, [Duration::from_millis(53)]);
    let (action, decision) = stopped(err);
    assert_eq!(action, "dead_letter");
    assert_eq!(decision["reason_code"], "tool.timeout.total");
    assert_eq!(decision["envelope"]["code"], "tool.timeout.total");
}

#[test]
fn a_slow_attempt_becomes_a_timeout_the_policy_decides_on() {
    let policy = Policy::reference().unwrap();
    let codes = Arc::new(Mutex::new(Vec::new()));
    let sink = codes.clone();
    let out = Retry::new("r", "s", "t", "{}")
        .seed(7)
        .attempt_timeout_ms(250)
        .on_event(move |e| {
            let e: Value = serde_json::from_str(e).unwrap();
            if e["event"] == "decision" {
                sink.lock()
                    .unwrap()
                    .push(e["code"].as_str().unwrap().to_owned());
            }
        })
        .run(
            &policy,
            |a: &Attempt| {
                if a.number == 1 {
                    // The operation itself is slow (this is not a wait for something else).
                    std::thread::sleep(Duration::from_millis(600));
                }
                Ok::<_, String>(a.number)
            },
            |_| {},
        )
        .unwrap();
    assert_eq!(out, 2, "the slow first attempt counted as a failure");
    assert_eq!(*codes.lock().unwrap(), ["tool.timeout.total"]);
}

#[test]
fn the_attempt_budget_option_stops_before_the_policy() {
    let policy = Policy::reference().unwrap();
    let mut calls = 0;
    let err = Retry::new("r", "s", "t", "{}")
        .seed(7)
        .attempt_budget(2)
        .run(
            &policy,
            |_: &Attempt| -> Result<(), String> {
                calls += 1;
                Err(UNAVAILABLE.to_owned())
            },
            |_| {},
        )
        .unwrap_err();
    assert_eq!(calls, 2);
    let (action, decision) = stopped(err);
    assert_eq!(action, "dead_letter");
    assert_eq!(decision["reason_code"], "runtime.budget.attempts_exhausted");
}

#[test]
fn the_breaker_opens_after_three_failures_and_the_next_call_fails_at_once() {
    // By default 3 consecutive transient failures open the target for a
    // first window of 250 ms (docs/fallbacks-and-breakers.md). After the
    // third failure (at 205 ms) the 3 ms retry finds it open: the call ends at
    // once with runtime.circuit.open, retry_after_ms 205 + 250 - 208 = 247,
    // and no fourth call.
    let policy = Policy::reference().unwrap();
    let mut slept = Vec::new();
    let err = Retry::new("r", "s", "t", "{}")
        .seed(7)
        .now_ms(0)
        .breaker(3, 30_000)
        .run(
            &policy,
            |a: &Attempt| {
                if a.number < 4 {
                    Err(UNAVAILABLE.to_owned())
                } else {
                    Ok(a.number)
                }
            },
            |d| slept.push(d.as_millis()),
        )
        .unwrap_err();
    let (action, decision) = stopped(err);
    assert_eq!(action, "fail");
    assert_eq!(decision["reason_code"], "runtime.circuit.open");
    assert_eq!(decision["envelope"]["retry_after_ms"], 247);
    assert_eq!(slept, [53, 152, 3]);
}

#[test]
fn without_a_breaker_one_call_is_never_short_circuited() {
    // The default, as in Node and Python: the fourth attempt follows the
    // policy's own delays (seed 7, tool: 53, 152, 3 ms; jitter.py).
    let policy = Policy::reference().unwrap();
    let mut slept = Vec::new();
    let out = Retry::new("r", "s", "t", "{}")
        .seed(7)
        .now_ms(0)
        .run(&policy, flaky(4), |d| slept.push(d.as_millis()))
        .unwrap();
    assert_eq!(out, 4);
    assert_eq!(slept, [53, 152, 3]);
}

/// Fails with a 503 until attempt `ok_at`, then returns the attempt number.
fn flaky(ok_at: u32) -> impl FnMut(&Attempt) -> Result<u32, String> {
    move |a: &Attempt| {
        if a.number < ok_at {
            Err(UNAVAILABLE.to_owned())
        } else {
            Ok(a.number)
        }
    }
}

#[test]
fn two_calls_share_nothing() {
    // Each call is its own run on its own store: the breaker the first call
    // opened (3 failures) does not short-circuit the second, which waits
    // exactly as the first did.
    let policy = Policy::reference().unwrap();
    let retry = Retry::new("r", "s", "t", "{}").seed(7).now_ms(0);
    let mut first = Vec::new();
    assert_eq!(retry.run(&policy, flaky(4), |d| first.push(d)).unwrap(), 4);
    let mut second = Vec::new();
    assert_eq!(retry.run(&policy, flaky(4), |d| second.push(d)).unwrap(), 4);
    assert_eq!(first, second);
}

#[test]
fn a_panicking_operation_panics_in_the_caller_and_the_next_call_works() {
    let policy = Policy::reference().unwrap();
    let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let _ = Retry::new("r", "s", "t", "{}").run(
            &policy,
            |_: &Attempt| -> Result<(), String> { panic!("the tool blew up") },
            |_| {},
        );
    }));
    assert!(panicked.is_err());
    let out = Retry::new("r", "s", "t", "{}")
        .seed(7)
        .run(&policy, flaky(2), |_| {})
        .unwrap();
    assert_eq!(out, 2);
}

#[test]
fn a_retry_inside_an_operation_runs_too() {
    // The inner call takes another worker: no deadlock, its own key.
    let policy = Policy::reference().unwrap();
    let mut inner_keys = Vec::new();
    let mut outer_key = String::new();
    let out = Retry::new("r", "outer", "t", "{}")
        .seed(7)
        .run(
            &policy,
            |a: &Attempt| {
                outer_key = a.idempotency_key.clone();
                Retry::new("r", "inner", "t", "{}")
                    .seed(7)
                    .run(
                        &policy,
                        |b: &Attempt| {
                            inner_keys.push(b.idempotency_key.clone());
                            flaky(2)(b)
                        },
                        |_| {},
                    )
                    .map_err(|e| e.to_string())
            },
            |_| {},
        )
        .unwrap();
    assert_eq!(out, 2);
    assert_eq!(inner_keys.len(), 2);
    assert_eq!(inner_keys[0], inner_keys[1]);
    assert_ne!(inner_keys[0], outer_key);
}

#[test]
fn bad_input_is_a_clear_error_not_a_crash() {
    let policy = Policy::reference().unwrap();
    let never = |_: &Attempt| -> Result<(), String> { panic!("must not be called") };
    // An empty run id: the loop refuses the run (its message names the member).
    match Retry::new("", "s", "t", "{}").run(&policy, never, |_| {}) {
        Err(RecoveryError::Policy(e)) => assert!(e.message().contains("run_id"), "{e}"),
        other => panic!("unexpected {other:?}"),
    }
    // An unknown context member: the policy refuses it (a typo must not
    // silently change a decision).
    let err = Retry::new("r", "s", "t", "{}")
        .context(ctx(json!({"elapsed": 5})))
        .run(
            &policy,
            |_: &Attempt| -> Result<(), String> { Err(UNAVAILABLE.to_owned()) },
            |_| {},
        )
        .unwrap_err();
    match err {
        RecoveryError::Policy(e) => assert!(e.message().contains("elapsed"), "{e}"),
        other => panic!("unexpected {other}"),
    }
}

#[test]
fn a_closure_that_is_not_send_borrows_the_callers_locals() {
    // The operation holds an `Rc` and borrows a `RefCell` and a `Vec` of the
    // caller: none of it is `Send`, and the loop runs on this thread.
    let policy = Policy::reference().unwrap();
    let seen = std::rc::Rc::new(std::cell::RefCell::new(Vec::new()));
    let log = std::cell::RefCell::new(String::new());
    let mut slept = Vec::new();
    let out = Retry::new("r", "s", "t", "{}")
        .seed(7)
        .now_ms(0)
        .run(
            &policy,
            |a: &Attempt| {
                seen.borrow_mut().push(a.number);
                log.borrow_mut().push_str(&format!("#{}", a.number));
                flaky(3)(a)
            },
            |d| slept.push(d.as_millis()),
        )
        .unwrap();
    assert_eq!(out, 3);
    assert_eq!(*seen.borrow(), [1, 2, 3]);
    assert_eq!(*log.borrow(), "#1#2#3");
    assert_eq!(slept, [53, 152]);
}

#[test]
fn events_arrive_on_the_calling_thread() {
    let policy = Policy::reference().unwrap();
    let caller = std::thread::current().id();
    let threads = Arc::new(Mutex::new(Vec::new()));
    let sink = threads.clone();
    Retry::new("r", "s", "t", "{}")
        .seed(7)
        .now_ms(0)
        .on_event(move |_| sink.lock().unwrap().push(std::thread::current().id()))
        .run(&policy, flaky(2), |_| {})
        .unwrap();
    let threads = threads.lock().unwrap();
    assert!(!threads.is_empty());
    assert!(
        threads.iter().all(|t| *t == caller),
        "{threads:?} vs {caller:?}"
    );
}
