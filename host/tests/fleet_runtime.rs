//! Runtimes (the real component) on a Redis store: a breaker one runtime
//! opened is seen by a second one with its own connection; and the fallback wrapper's events reach the runtime's
//! `on_event`.

mod redis_server;

use std::sync::{Arc, Mutex};

use agent_recovery::runtime::{Clock, Outcome, Runtime, Step, SystemClock, VirtualClock};
use agent_recovery::store;
use redis_server::RedisServer;
use serde_json::Value;

fn collect() -> (
    Arc<Mutex<Vec<Value>>>,
    impl Fn(&str) + Send + Sync + 'static,
) {
    let events = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&events);
    (events, move |e: &str| {
        sink.lock()
            .expect("events")
            .push(serde_json::from_str(e).expect("event is JSON"));
    })
}

fn runtime(
    url: &str,
    clock: Option<Arc<dyn Clock>>,
    on_event: impl Fn(&str) + Send + Sync + 'static,
) -> Runtime {
    let mut b = Runtime::builder().opened_store(store::open_with(url, None).expect("open"));
    if let Some(clock) = clock {
        b = b.clock(clock);
    }
    b.breaker(1, 60_000)
        .attempt_budget(2)
        .seed(7)
        .on_event(on_event)
        .build()
        .expect("runtime")
}

#[test]
fn a_breaker_opened_by_one_runtime_is_seen_by_another() {
    let server = RedisServer::start();
    let dir = tempfile::tempdir().expect("temp dir");
    let url = |n: u32| {
        server.url(&format!(
            "?prefix=rt&spool={}",
            dir.path().join(format!("spool-{n}.sqlite")).display()
        ))
    };
    // Virtual clocks (the breaker's open period passes without waiting),
    // starting at the real time; B starts 100 ms after A, inside the
    // breaker's first open window (250 ms).
    let t0 = SystemClock.now_ms();
    let (_, sink_a) = collect();
    let a = runtime(&url(1), Some(Arc::new(VirtualClock::new(t0))), sink_a);
    let mut run = a.run("run-a").expect("run");
    let report = run
        .step(
            Step::new("charge", "payments.charge", |_| {
                Outcome::Failed(r#"{"source":"http","status":503}"#.into())
            })
            .call("tool")
            .target("api.pay"),
        )
        .expect("step");
    assert_ne!(report.outcome, "ok");

    let (events_b, sink_b) = collect();
    let b = runtime(&url(2), Some(Arc::new(VirtualClock::new(t0 + 100))), sink_b);
    let mut run = b.run("run-b").expect("run");
    let pay_calls = Arc::new(Mutex::new(0));
    let counter = Arc::clone(&pay_calls);
    let report = run
        .step(
            Step::new("charge", "payments.charge", move |call| {
                if call.target == "api.pay" {
                    *counter.lock().expect("counter") += 1;
                }
                Outcome::Ok(serde_json::json!({"ok": true}))
            })
            .call("tool")
            .target("api.pay")
            .fallbacks(&["api.pay-b"]),
        )
        .expect("step");
    assert_eq!(report.outcome, "ok");
    assert_eq!(
        *pay_calls.lock().expect("counter"),
        0,
        "api.pay was called through an open breaker"
    );
    let events = events_b.lock().expect("events");
    let first = events
        .iter()
        .find(|e| e["target"] == "api.pay")
        .expect("an event for api.pay");
    assert_eq!(first["event"], "short_circuit", "{events:?}");
}

#[test]
fn the_wrappers_events_reach_on_event() {
    let mut server = RedisServer::start();
    let dir = tempfile::tempdir().expect("temp dir");
    let url = server.url(&format!(
        "?timeout_ms=200&connect_timeout_ms=200&spool={}",
        dir.path().join("spool.sqlite").display()
    ));
    server.kill();
    let (events, sink) = collect();
    // No clock given: the runtime reads the server clock (which falls back
    // to the local one while Redis is down).
    let rt = runtime(&url, None, sink);
    let mut run = rt.run("run-down").expect("run");
    let report = run
        .step(
            Step::new("lookup", "search.query", |_| {
                Outcome::Ok(serde_json::json!(1))
            })
            .call("tool"),
        )
        .expect("a store outage does not fail the step");
    assert_eq!(report.outcome, "ok");
    let events = events.lock().expect("events");
    let degraded: Vec<&Value> = events
        .iter()
        .filter(|e| e["event"] == "store_degraded")
        .collect();
    assert_eq!(degraded.len(), 1, "{events:?}");
    assert_eq!(degraded[0]["kind"], "unavailable");
}
