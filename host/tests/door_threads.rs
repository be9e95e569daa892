//! The async door drives its step in the caller's task: 200 calls in flight
//! at once on a current-thread tokio runtime take no thread of their own.
//!
//! Through the real component and runtime, on a `VirtualClock` and the
//! memory store. Each call fails once (a 503, retried by the reference
//! policy: `docs/observation.md`, `tests/vectors/http.json`) and then
//! succeeds; every attempt of a call gets the call's idempotency key
//! (`docs/runtime.md`). The first attempts wait for one another, so that all
//! 200 calls are in flight together when the threads are counted
//! (`/proc/self/status`), then fail one at a time, each followed by its
//! retry's success: the calls share the door's breaker, which consecutive
//! failures of its target open (`docs/fallbacks-and-breakers.md`). A
//! process of its own: no other test's threads.

use std::collections::BTreeSet;
use std::future::IntoFuture;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use agent_recovery::door::{Door, Recoverable};
use agent_recovery::runtime::{Call, Clock, VirtualClock};

const CALLS: usize = 200;
const T0: u64 = 1_767_225_600_000;

/// The process's thread count.
fn threads() -> usize {
    let status = std::fs::read_to_string("/proc/self/status").expect("read /proc/self/status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("Threads:"))
        .and_then(|n| n.trim().parse().ok())
        .expect("a Threads: line")
}

#[test]
fn two_hundred_concurrent_calls_take_no_thread_each() {
    let clock = Arc::new(VirtualClock::new(T0));
    let door = Door::builder()
        .tool("search.get")
        .call("tool")
        .clock(clock.clone())
        .seed(7)
        .build()
        .unwrap();
    let tokio = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let before = threads();
    let first_attempts = Arc::new(AtomicUsize::new(0));
    let turn = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(before));
    // (call, attempt, key) of every attempt.
    let seen = Arc::new(Mutex::new(Vec::new()));

    let local = tokio::task::LocalSet::new();
    let handles: Vec<_> = (0..CALLS)
        .map(|i| {
            let (first_attempts, turn, most, seen) = (
                first_attempts.clone(),
                turn.clone(),
                most.clone(),
                seen.clone(),
            );
            let op = move |call: Call| {
                let (first_attempts, turn, most, seen) = (
                    first_attempts.clone(),
                    turn.clone(),
                    most.clone(),
                    seen.clone(),
                );
                async move {
                    seen.lock().unwrap().push((i, call.attempt, call.key.clone()));
                    if call.attempt > 1 {
                        // The next call's first attempt may fail now.
                        turn.store(i + 1, Ordering::SeqCst);
                        return Ok(i);
                    }
                    // Every call is in flight before any first attempt ends.
                    first_attempts.fetch_add(1, Ordering::SeqCst);
                    while first_attempts.load(Ordering::SeqCst) < CALLS {
                        tokio::task::yield_now().await;
                    }
                    let now = threads();
                    most.fetch_max(now, Ordering::SeqCst);
                    assert!(
                        now < before + 8,
                        "{now} threads with {CALLS} calls in flight, {before} before: the calls took threads"
                    );
                    // One failure at a time, each followed by its call's
                    // success: 200 failures in a row would open the breaker.
                    while turn.load(Ordering::SeqCst) != i {
                        tokio::task::yield_now().await;
                    }
                    Err(503)
                }
            };
            let call = op
                .recover(&door)
                .observe(|status: &i32| format!(r#"{{"source":"http","status":{status}}}"#));
            local.spawn_local(call.into_future())
        })
        .collect();
    let answers = tokio.block_on(local.run_until(async move {
        let mut answers = Vec::new();
        for h in handles {
            answers.push(h.await.expect("a call's task"));
        }
        answers
    }));

    for (i, answer) in answers.into_iter().enumerate() {
        assert_eq!(answer.unwrap(), i, "call {i}");
    }
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 2 * CALLS, "one retry per call");
    let mut keys = BTreeSet::new();
    for i in 0..CALLS {
        let attempts: Vec<_> = seen.iter().filter(|(c, _, _)| *c == i).collect();
        assert_eq!(
            attempts.iter().map(|(_, a, _)| *a).collect::<Vec<_>>(),
            [1, 2]
        );
        assert_eq!(
            attempts[0].2, attempts[1].2,
            "call {i}: one key on both attempts"
        );
        keys.insert(attempts[0].2.clone());
    }
    assert_eq!(keys.len(), CALLS, "a key per call");
    assert!(clock.now_ms() > T0, "the retries slept on the door's clock");
    let most = most.load(Ordering::SeqCst);
    assert!(
        most < before + 8,
        "{most} threads with {CALLS} calls in flight, {before} before: the calls took threads"
    );
}
