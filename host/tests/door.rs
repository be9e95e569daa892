//! The small door (`agent_recovery::door`) through the real component, the
//! real runtime, a real tokio runtime and a real HTTP server on 127.0.0.1.
//!
//! The expectations come from the docs: a 503 is retried and a 400 is not
//! (`docs/observation.md`, the vectors of `tests/vectors/http.json`: code
//! `tool.http.400_bad_request`); every attempt of a call gets the same
//! idempotency key (`docs/runtime.md`); a breaker opens after
//! `failure_threshold` transient failures for a first window of 250 ms, and
//! the next calls start at the first target whose breaker is not open
//! (`docs/fallbacks-and-breakers.md`, `docs/getting-started.md`); the seed-7
//! tool delay after attempt 1 is 53 ms (`tests/vectors/tools/jitter.py`, as
//! in `host/tests/telemetry.rs`).

#[path = "door_http/mod.rs"]
mod door_http;

use std::future::IntoFuture;
use std::sync::{Arc, Mutex};

use agent_recovery::door::{BlockingRecoverable, Door, DoorError, Recoverable};
use agent_recovery::runtime::{Call, Clock, VirtualClock};
use agent_recovery::{ErrorKind, Policy};
use serde_json::{Value, json};

use door_http::{Response, get, serve};

const T0: u64 = 1_767_225_600_000;

fn http(status: u16) -> String {
    json!({"source": "http", "status": status}).to_string()
}

fn door(clock: &Arc<VirtualClock>) -> agent_recovery::door::DoorBuilder {
    Door::builder().clock(clock.clone()).seed(7).call("tool")
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime")
}

/// The async door against the server: 503, then 200. The response is
/// handed to the component (`check`), which judges the 503 a failure and
/// the 200 none; both requests carried the same key.
#[test]
fn async_closure_is_retried_with_one_key_against_a_real_server() {
    let clock = Arc::new(VirtualClock::new(T0));
    let door = door(&clock).tool("search.get").build().unwrap();
    let answer: Result<Response, DoorError<std::io::Error>> = runtime().block_on(async {
        let server = serve(vec![503, 200]).await;
        let addr = server.addr;
        let answer = (move |call: Call| async move { get(addr, &call.key).await })
            .recover(&door)
            .check(|r: &Response| Some(http(r.status)))
            .await;
        let keys = server.keys.lock().unwrap().clone();
        assert_eq!(keys.len(), 2, "{keys:?}");
        assert_eq!(keys[0], keys[1]);
        assert_eq!(keys[0].len(), 64, "a sha256 hex key: {keys:?}");
        answer
    });
    assert_eq!(answer.unwrap().status, 200);
    assert_eq!(
        clock.now_ms(),
        T0 + 53,
        "slept the policy's delay on the door's clock"
    );
}

/// The step is driven in the caller's task: the single-threaded event loop
/// keeps serving other tasks while the operation awaits.
#[test]
fn the_operation_runs_in_the_callers_task_and_gets_key_target_attempt() {
    let clock = Arc::new(VirtualClock::new(T0));
    let door = door(&clock)
        .tool("erp.sync")
        .target("erp-eu")
        .build()
        .unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::clone(&seen);
    let value = runtime()
        .block_on(
            (move |call: Call| {
                let log = Arc::clone(&log);
                async move {
                    log.lock()
                        .unwrap()
                        .push((call.target.clone(), call.attempt, call.key.clone()));
                    tokio::task::yield_now().await;
                    if call.attempt < 3 {
                        Err(503)
                    } else {
                        Ok("synced")
                    }
                }
            })
            .recover(&door)
            .args(json!({"batch": 3}))
            .observe(|status: &i32| http(*status as u16))
            .into_future(),
        )
        .unwrap();
    assert_eq!(value, "synced");
    let seen = seen.lock().unwrap();
    assert_eq!(
        seen.iter()
            .map(|(t, a, _)| (t.as_str(), *a))
            .collect::<Vec<_>>(),
        [("erp-eu", 1), ("erp-eu", 2), ("erp-eu", 3)]
    );
    assert!(seen.iter().all(|(_, _, k)| *k == seen[0].2));
}

/// The blocking twin; a permanent failure is not retried and comes back
/// with the policy's decision, the operation's error and the envelope
/// rendered for the model (what the policy's `render-json` gives for it).
#[test]
fn blocking_permanent_failure_is_a_door_error_with_the_decision() {
    let clock = Arc::new(VirtualClock::new(T0));
    let door = door(&clock).tool("payments.charge").build().unwrap();
    let mut calls = 0;
    let op = |_: Call| {
        calls += 1;
        Err::<(), _>(400)
    };
    let err = op
        .recover(&door)
        .observe(|s: &i32| http(*s as u16))
        .call()
        .unwrap_err();
    assert_eq!(calls, 1);
    let DoorError::Stopped {
        outcome,
        decision,
        for_model,
        cause,
        ..
    } = &err
    else {
        panic!("not stopped: {err}");
    };
    assert_eq!(outcome, "failed");
    assert_eq!(decision["action"], "fail");
    assert_eq!(err.code(), "tool.http.400_bad_request");
    assert_eq!(*cause, Some(400));
    let rendered = Policy::reference()
        .unwrap()
        .render_json(
            &decision["envelope"].to_string(),
            agent_recovery::types::RenderFormat::ModelToolResult,
            "",
        )
        .unwrap();
    assert_eq!(
        *for_model,
        serde_json::from_str::<Value>(&rendered).unwrap()
    );
    assert_eq!(for_model["error"]["code"], "tool.http.400_bad_request");
    assert_eq!(err.for_model(), Some(for_model));
    assert!(
        err.to_string().contains("tool.http.400_bad_request"),
        "{err}"
    );
}

/// `fallbacks`: a 503 opens `primary` (threshold 1), the retry skips it
/// for `backup`; the next call of the same door starts at `backup`, since
/// the breaker is still open (the clock moved 53 ms of a 250 ms window).
#[test]
fn fallbacks_stay_on_the_backup_while_the_breaker_is_open() {
    let clock = Arc::new(VirtualClock::new(T0));
    let door = door(&clock)
        .tool("llm.chat")
        .target("primary")
        .fallbacks(&["backup"])
        .breaker(1, 30_000)
        .build()
        .unwrap();
    let targets = Mutex::new(Vec::new());
    let op = |call: Call| {
        targets.lock().unwrap().push(call.target.clone());
        match call.target.as_str() {
            "primary" => Err(503),
            _ => Ok(call.target),
        }
    };
    let observe = |s: &i32| http(*s as u16);
    assert_eq!(op.recover(&door).observe(observe).call().unwrap(), "backup");
    assert_eq!(*targets.lock().unwrap(), ["primary", "backup"]);
    assert_eq!(op.recover(&door).observe(observe).call().unwrap(), "backup");
    assert_eq!(*targets.lock().unwrap(), ["primary", "backup", "backup"]);
    assert!(clock.now_ms() - T0 < 250);
}

/// Each call is a run of its own: two calls get two keys (a new run id).
#[test]
fn each_call_is_a_new_run_with_a_new_key() {
    let clock = Arc::new(VirtualClock::new(T0));
    let door = door(&clock).tool("kv.put").build().unwrap();
    let key = |call: Call| Ok::<_, i32>(call.key);
    let (a, b) = (
        key.recover(&door).call().unwrap(),
        key.recover(&door).call().unwrap(),
    );
    assert_ne!(a, b);
}

/// With one run id and step id for every call, the second call's key is
/// already done: the door says so rather than inventing a value.
#[test]
fn a_fixed_run_id_answers_the_second_call_from_the_idempotency_cache() {
    let clock = Arc::new(VirtualClock::new(T0));
    let door = door(&clock).tool("kv.put").run_id("r-1").build().unwrap();
    let mut n = 0;
    let mut op = |_: Call| {
        n += 1;
        Ok::<_, i32>(n)
    };
    assert_eq!((&mut op).recover(&door).call().unwrap(), 1);
    let again = (&mut op).recover(&door).call().unwrap_err();
    assert!(
        matches!(again, DoorError::AlreadyDone(Value::Null)),
        "{again}"
    );
    assert_eq!(n, 1);
}

/// The options as JSON: the known names are taken, an unknown one is
/// refused with the list of options.
#[test]
fn unknown_options_are_refused() {
    let err = Door::builder().options(&json!({"retries": 3})).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    assert!(err.message().contains("\"retries\""), "{err}");
    assert!(err.message().contains("fallbacks"), "{err}");
    let err = Door::builder()
        .options(&json!({"fallbacks": "b"}))
        .unwrap_err();
    assert!(err.message().contains("array of target names"), "{err}");
    let clock = Arc::new(VirtualClock::new(T0));
    let door = door(&clock)
        .options(&json!({"tool": "t", "target": "a", "fallbacks": ["b"], "breaker": [1, 30000]}))
        .unwrap()
        .build()
        .unwrap();
    let op = |call: Call| {
        if call.target == "a" {
            Err(503)
        } else {
            Ok(call.target)
        }
    };
    let got = op
        .recover(&door)
        .observe(|s: &i32| http(*s as u16))
        .call()
        .unwrap();
    assert_eq!(got, "b");
}

/// The blocking twin calls a closure that is not `Send` (it holds an `Rc`
/// and borrows a `RefCell`): the step runs on this thread.
#[test]
fn blocking_closure_that_is_not_send() {
    let clock = Arc::new(VirtualClock::new(T0));
    let door = door(&clock)
        .tool("search.get")
        .call("tool")
        .build()
        .unwrap();
    let statuses = std::rc::Rc::new(std::cell::RefCell::new(vec![503, 200]));
    let keys = std::cell::RefCell::new(Vec::new());
    let op = |call: Call| {
        keys.borrow_mut().push(call.key.clone());
        match statuses.borrow_mut().remove(0) {
            200 => Ok(call.attempt),
            s => Err(s),
        }
    };
    let out = op.recover(&door).observe(|s: &i32| http(*s as u16)).call();
    assert_eq!(out.unwrap(), 2);
    let keys = keys.borrow();
    assert_eq!(keys.len(), 2);
    assert_eq!(keys[0], keys[1]);
}
