//! The loop across a fleet (docs/runtime.md, "The rules"): two
//! runtimes, each with its own handle on one SQLite file, as two workers.
//!
//! - one half-open probe: both read the open breaker before either claims the
//!   probe lease; exactly one calls.
//! - the retry quota: a bucket drained by one worker refuses the other's retry.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use agent_recovery::runtime::{Call, Outcome, Runtime, Step, VirtualClock};
use agent_recovery::store::{Cas, SqliteStore, Store, StoreError, Versioned};
use serde_json::Value;

const NOW: u64 = 1_767_225_600_000;

/// A rendezvous of two threads at the probe lease's claim, so both have read
/// the open breaker before either claims. Gives up after 10 s (then the
/// assertions below say what happened).
#[derive(Default)]
struct Rendezvous {
    arrived: Mutex<usize>,
    all: Condvar,
}

impl Rendezvous {
    fn meet(&self) {
        let mut n = self.arrived.lock().unwrap();
        *n += 1;
        self.all.notify_all();
        let _ = self
            .all
            .wait_timeout_while(n, Duration::from_secs(10), |n| *n < 2)
            .unwrap();
    }
}

/// The worker's real SQLite handle; its claim of a probe lease waits for the
/// other worker to reach its own claim first.
struct Worker {
    db: SqliteStore,
    meet: Arc<Rendezvous>,
}

impl Store for Worker {
    fn get(&self, key: &str, now_ms: u64) -> Result<Option<Versioned>, StoreError> {
        self.db.get(key, now_ms)
    }
    fn compare_and_set(
        &self,
        key: &str,
        expected: Option<u64>,
        value: &str,
        ttl_ms: Option<u64>,
        now_ms: u64,
    ) -> Result<Cas, StoreError> {
        if key.starts_with("agent-recovery/probe/") {
            self.meet.meet();
        }
        self.db
            .compare_and_set(key, expected, value, ttl_ms, now_ms)
    }
    fn append(&self, stream: &str, record: &str, now_ms: u64) -> Result<u64, StoreError> {
        self.db.append(stream, record, now_ms)
    }
    fn read(
        &self,
        stream: &str,
        after: u64,
        limit: usize,
    ) -> Result<Vec<(u64, String)>, StoreError> {
        self.db.read(stream, after, limit)
    }
    fn delete(&self, key: &str) -> Result<bool, StoreError> {
        self.db.delete(key)
    }
    fn keys(&self, prefix: &str, now_ms: u64) -> Result<Vec<String>, StoreError> {
        self.db.keys(prefix, now_ms)
    }
}

fn events_of(events: &Mutex<Vec<String>>) -> Vec<Value> {
    events
        .lock()
        .unwrap()
        .iter()
        .map(|e| serde_json::from_str(e).unwrap())
        .collect()
}

#[test]
fn two_runtimes_racing_for_a_probe_make_one_half_open_call() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("fleet.sqlite");
    // The breaker another worker opened 10 minutes ago for 10 minutes: its probe is due now.
    SqliteStore::open(&path)
        .unwrap()
        .compare_and_set(
            "agent-recovery/breaker/api.pay",
            None,
            &format!(
                r#"{{"state":"open","failures":3,"since_ms":{},"open_ms":600000}}"#,
                NOW - 600_000
            ),
            None,
            NOW,
        )
        .unwrap();
    let meet = Arc::new(Rendezvous::default());
    let calls = Arc::new(AtomicUsize::new(0));
    let outcomes: Vec<(String, Vec<Value>)> = std::thread::scope(|s| {
        let workers: Vec<_> = ["w1", "w2"]
            .into_iter()
            .map(|name| {
                let store = Arc::new(Worker {
                    db: SqliteStore::open(&path).unwrap(),
                    meet: Arc::clone(&meet),
                });
                let calls = Arc::clone(&calls);
                s.spawn(move || {
                    let events = Arc::new(Mutex::new(Vec::new()));
                    let sink = Arc::clone(&events);
                    let rt = Runtime::builder()
                        .store(store)
                        .clock(Arc::new(VirtualClock::new(NOW)))
                        .seed(7)
                        .on_event(move |e| sink.lock().unwrap().push(e.to_owned()))
                        .build()
                        .unwrap();
                    let mut run = rt.run(name).unwrap();
                    let report = run
                        .step(
                            Step::new("pay", "payments.charge", |_: &Call| {
                                calls.fetch_add(1, Ordering::SeqCst);
                                Outcome::Ok(Value::Null)
                            })
                            .call("tool")
                            .target("api.pay"),
                        )
                        .unwrap();
                    drop(run);
                    (report.outcome, events_of(&events))
                })
            })
            .collect();
        workers.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert_eq!(calls.load(Ordering::SeqCst), 1, "{outcomes:?}");
    let half_open: Vec<_> = outcomes
        .iter()
        .flat_map(|(_, ev)| ev.iter())
        .filter(|e| e["event"] == "breaker" && e["state"] == "half_open")
        .collect();
    assert_eq!(half_open.len(), 1, "{outcomes:?}");
    let (winner, loser): (Vec<_>, Vec<_>) = outcomes.iter().partition(|(o, _)| o == "ok");
    assert_eq!((winner.len(), loser.len()), (1, 1), "{outcomes:?}");
    // The loser read `open` too (it reached the claim), lost it, and was
    // short-circuited for the lease's 10 minutes: longer than the run's
    // 60 s retry budget, so it never called.
    let lost = &loser[0].1;
    let sc = lost
        .iter()
        .find(|e| e["event"] == "short_circuit")
        .expect("a short-circuit");
    assert_eq!(sc["delay_ms"], 600_000, "{lost:?}");
    assert!(
        !lost.iter().any(|e| e["event"] == "attempt"),
        "the loser called: {lost:?}"
    );
    // The lease stays (it expires), naming the winner's step.
    let lease = SqliteStore::open(&path)
        .unwrap()
        .get("agent-recovery/probe/api.pay", NOW)
        .unwrap()
        .expect("the lease");
    let lease: Value = serde_json::from_str(&lease.value).unwrap();
    assert_eq!(lease["since_ms"], NOW);
    assert_eq!(lease["open_ms"], 600_000);
}

#[test]
fn a_retry_quota_drained_by_one_worker_refuses_the_others_retry() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("quota.sqlite");
    let worker = |name: &str, outcomes: Vec<&'static str>| {
        let rt = Runtime::builder()
            .store(Arc::new(SqliteStore::open(&path).unwrap()))
            .clock(Arc::new(VirtualClock::new(NOW)))
            .seed(7)
            .retry_quota(serde_json::json!({"capacity": 10}))
            .build()
            .unwrap();
        let mut run = rt.run(name).unwrap();
        let mut left = outcomes.into_iter();
        let report = run
            .step(
                Step::new("sync", "erp.sync", move |_: &Call| match left.next() {
                    Some("ok") | None => Outcome::Ok(Value::Null),
                    Some(o) => Outcome::Response(o.to_owned()),
                })
                .call("tool")
                .target(name),
            )
            .unwrap();
        (report.outcome, report.envelope)
    };
    let tokens = || -> Value {
        let v = SqliteStore::open(&path)
            .unwrap()
            .get("agent-recovery/quota/default", NOW)
            .unwrap()
            .expect("the bucket");
        serde_json::from_str::<Value>(&v.value).unwrap()["tokens"].clone()
    };
    let e503 = r#"{"source":"http","status":503}"#;
    // Worker 1: two retries take 5 + 5 of the 10 tokens, its third is refused.
    let (outcome, envelope) = worker("w1", vec![e503, e503, e503]);
    assert_eq!(outcome, "dead_lettered");
    assert_eq!(
        envelope.unwrap()["code"],
        "runtime.budget.retry_quota_exhausted"
    );
    assert_eq!(tokens(), 0);
    // Worker 2, another runtime on the same file: its first retry is refused.
    let (outcome, envelope) = worker("w2", vec![e503, "ok"]);
    assert_eq!(outcome, "dead_lettered");
    assert_eq!(
        envelope.unwrap()["code"],
        "runtime.budget.retry_quota_exhausted"
    );
    // Worker 3: a success without a retry refunds success_refund (1).
    let (outcome, _) = worker("w3", vec!["ok"]);
    assert_eq!(outcome, "ok");
    assert_eq!(tokens(), 1);
}
