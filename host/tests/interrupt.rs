//! `runtime::interruptible`: a blocking operation that hangs is abandoned at
//! its `timeout_ms`, so a per-attempt timeout and a run deadline are enforced,
//! not only measured. The hung calls here block on a channel until the test
//! releases them, so nothing depends on how long anything takes beyond the
//! timeouts themselves.

use agent_recovery::runtime::{Call, Clock, Outcome, Runtime, Step, interruptible};
use serde_json::{Value, json};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread::{self, ThreadId};

/// Real time, but a retry's sleep passes at once (it moves an offset): the
/// call timeouts are real, the backoff costs nothing. Not virtual, so the
/// runtime behaves as on the system clock.
#[derive(Default)]
struct FastSleeps {
    slept: AtomicU64,
}

impl Clock for FastSleeps {
    fn now_ms(&self) -> u64 {
        agent_recovery::runtime::SystemClock.now_ms() + self.slept.load(Ordering::SeqCst)
    }
    fn sleep_ms(&self, ms: u64) {
        self.slept.fetch_add(ms, Ordering::SeqCst);
    }
}

fn runtime(attempt_timeout_ms: Option<u64>, events: &Arc<Mutex<Vec<Value>>>) -> Runtime {
    let sink = Arc::clone(events);
    let mut b = Runtime::builder()
        .clock(Arc::new(FastSleeps::default()))
        .seed(7)
        .on_event(move |e| sink.lock().unwrap().push(serde_json::from_str(e).unwrap()));
    if let Some(ms) = attempt_timeout_ms {
        b = b.attempt_timeout_ms(ms);
    }
    b.build().unwrap()
}

/// A tool whose first call hangs until released; later calls answer at once.
struct Hanging {
    release: Mutex<mpsc::Receiver<()>>,
    first_done: mpsc::Sender<Outcome>,
}

impl Hanging {
    fn call(&self, call: &Call) -> Outcome {
        if call.attempt > 1 {
            return Outcome::Ok(json!("second"));
        }
        self.release.lock().unwrap().recv().unwrap();
        let late = Outcome::Ok(json!("first, too late"));
        self.first_done.send(late.clone()).unwrap();
        late
    }
}

#[test]
fn a_hung_call_is_abandoned_at_its_timeout_and_retried_with_the_same_key() {
    let events = Arc::new(Mutex::new(Vec::new()));
    let rt = runtime(Some(100), &events);
    let (release, release_rx) = mpsc::channel();
    let (first_done_tx, first_done) = mpsc::channel();
    let tool = Arc::new(Hanging {
        release: Mutex::new(release_rx),
        first_done: first_done_tx,
    });
    let t = Arc::clone(&tool);
    let mut run = rt.run("r-hang").unwrap();
    let report = run
        .step(Step::new("s", "crm.lookup", interruptible(move |c: &Call| t.call(c))).call("tool"))
        .unwrap();
    assert_eq!(report.outcome, "ok");
    assert_eq!(report.result, Some(json!("second")));

    let events = events.lock().unwrap();
    let decision = events
        .iter()
        .find(|e| e["event"] == "decision")
        .expect("a decision on the abandoned call");
    assert_eq!(decision["code"], "tool.timeout.total");
    assert_eq!(decision["action"], "retry");
    let keys: Vec<&Value> = events
        .iter()
        .filter(|e| e["event"] == "attempt")
        .map(|e| &e["key"])
        .collect();
    assert_eq!(keys.len(), 2, "{events:?}");
    assert_eq!(keys[0], keys[1]);

    // The first call is still running on its own thread: released now, it
    // finishes there, and its late outcome went nowhere.
    assert!(first_done.try_recv().is_err());
    release.send(()).unwrap();
    assert_eq!(
        first_done.recv().unwrap(),
        Outcome::Ok(json!("first, too late"))
    );
}

#[test]
fn a_run_deadline_stops_waiting_for_a_hung_call() {
    let events = Arc::new(Mutex::new(Vec::<Value>::new()));
    let sink = Arc::clone(&events);
    let clock = Arc::new(FastSleeps::default());
    let rt = Runtime::builder()
        .clock(clock.clone())
        .seed(7)
        .deadline_ms(150)
        .on_event(move |e| sink.lock().unwrap().push(serde_json::from_str(e).unwrap()))
        .build()
        .unwrap();
    let (_keep_blocked, release_rx) = mpsc::channel::<()>();
    let release_rx = Mutex::new(release_rx);
    let mut run = rt.run("r-deadline").unwrap();
    let report = run
        .step(
            Step::new(
                "s",
                "crm.lookup",
                interruptible(move |c: &Call| {
                    assert!(c.timeout_ms.is_some_and(|ms| ms <= 150), "{c:?}");
                    // Hangs until the test ends (the sender is dropped then).
                    let _ = release_rx.lock().unwrap().recv();
                    Outcome::Ok(json!("never seen"))
                }),
            )
            .call("tool"),
        )
        .unwrap();
    assert_ne!(report.outcome, "ok");
    let codes: Vec<Value> = events
        .lock()
        .unwrap()
        .iter()
        .filter(|e| e["event"] == "decision")
        .map(|e| e["code"].clone())
        .collect();
    assert!(codes.iter().all(|c| c == "tool.timeout.total"), "{codes:?}");
    assert!(!codes.is_empty());
}

#[test]
fn without_a_timeout_the_call_runs_on_the_callers_thread() {
    let events = Arc::new(Mutex::new(Vec::new()));
    let seen: Arc<Mutex<Vec<ThreadId>>> = Arc::default();
    for timeout in [None, Some(60_000)] {
        let rt = runtime(timeout, &events);
        let s = Arc::clone(&seen);
        let mut run = rt.run("r-thread").unwrap();
        let report = run
            .step(Step::new(
                "s",
                "crm.lookup",
                interruptible(move |_: &Call| {
                    s.lock().unwrap().push(thread::current().id());
                    Outcome::Ok(json!(1))
                }),
            ))
            .unwrap();
        assert_eq!(report.outcome, "ok");
    }
    let seen = seen.lock().unwrap();
    assert_eq!(seen[0], thread::current().id());
    assert_ne!(seen[1], thread::current().id());
}

#[test]
fn a_panic_in_the_operation_reaches_the_caller() {
    let events = Arc::new(Mutex::new(Vec::new()));
    let rt = runtime(Some(60_000), &events);
    let mut run = rt.run("r-panic").unwrap();
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        run.step(Step::new(
            "s",
            "crm.lookup",
            interruptible(|_: &Call| panic!("the client panicked")),
        ))
    }));
    let payload = caught.expect_err("the panic is raised again on this thread");
    assert_eq!(
        payload.downcast_ref::<&str>().copied(),
        Some("the client panicked")
    );
}
