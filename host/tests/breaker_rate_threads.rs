//! The failure-rate breaker under real concurrency (docs/fallbacks-and-breakers.md,
//! "Failure-rate mode" and "Many workers at once"): 32 threads of one process
//! run steps on one target that fails 10 % of first attempts (every tenth
//! first call answers 503; the retry succeeds), on one shared store.
//!
//! In the failure-rate mode (50 %, at least 20 calls) the breaker never
//! opens: no `breaker` `open` event, and the stored breaker is closed. Every
//! call is recorded with a compare-and-set re-applied on conflicts, so the
//! stored window counts exactly the calls and the failures the operation saw.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use agent_recovery::runtime::{Call, Outcome, Runtime, Step};
use agent_recovery::store::{MemoryStore, Store};
use serde_json::{Value, json};

const THREADS: u64 = 32;
const STEPS: u64 = 20;

#[test]
fn thirty_two_threads_at_ten_percent_first_attempt_failures_never_open_the_rate_breaker() {
    let store = Arc::new(MemoryStore::new());
    let events = Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let seen = Arc::clone(&events);
    let rt = Runtime::builder()
        .store(store.clone())
        .config_json(json!({
            "journal": false,
            "breaker": {"rate": {"failure_rate_threshold": 50, "minimum_calls": 20, "window_ms": 600_000}}
        }))
        .on_event(move |e| seen.lock().unwrap().push(e.to_owned()))
        .build()
        .expect("runtime");
    let first_calls = AtomicU64::new(0);
    let calls = AtomicU64::new(0);
    let failures = AtomicU64::new(0);
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let (rt, first_calls, calls, failures) = (&rt, &first_calls, &calls, &failures);
            s.spawn(move || {
                for i in 0..STEPS {
                    let mut run = rt.run(&format!("w{t}-{i}")).expect("run");
                    let op = |c: &Call| {
                        calls.fetch_add(1, Ordering::SeqCst);
                        if c.attempt == 1 && first_calls.fetch_add(1, Ordering::SeqCst) % 10 == 9 {
                            failures.fetch_add(1, Ordering::SeqCst);
                            return Outcome::Failed(r#"{"source":"http","status":503}"#.into());
                        }
                        Outcome::Ok(Value::Null)
                    };
                    let step = Step::new("s", "flaky.get", op).target("flaky");
                    let report = run.step(step).expect("step");
                    assert_eq!(report.outcome, "ok", "thread {t} step {i}");
                }
            });
        }
    });
    let (calls, failures) = (calls.into_inner(), failures.into_inner());
    assert_eq!(calls, THREADS * STEPS + failures);
    assert_eq!(failures, THREADS * STEPS / 10);
    let opened: Vec<String> = events
        .lock()
        .unwrap()
        .iter()
        .filter(|e| e.contains(r#""event":"breaker""#))
        .cloned()
        .collect();
    assert!(opened.is_empty(), "the breaker changed state: {opened:?}");
    let stored = store
        .get(
            "agent-recovery/breaker/flaky",
            agent_recovery::store::MAX_INTEGER,
        )
        .expect("get")
        .expect("the breaker is stored");
    let b: Value = serde_json::from_str(&stored.value).unwrap();
    assert_eq!(b["state"], "closed", "{b}");
    let sum = |m: &str| -> u64 {
        b["window"]
            .as_array()
            .expect("the window is stored")
            .iter()
            .map(|x| x[m].as_u64().unwrap())
            .sum()
    };
    // No count was lost to a concurrent update.
    assert_eq!((sum("calls"), sum("failures")), (calls, failures), "{b}");
}
