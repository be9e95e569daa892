//! The loop vectors (`tests/loops/*.json`) through the real component and the
//! real Runtime, on a virtual clock, plus the properties the vectors do not
//! spell out (same key on every attempt, byte-identical reruns, a 0.1 policy
//! deciding under the 0.2 loop, an in-flight key).
//!
//! A vector is `{"name", "spec", "runs": [{"scenario", "expect": {"outcome",
//! "events", "dead_letters", "journal"?, "store"?}}]}`; the runs share one store, in order
//! (`journal`: the run ids with a journal entry after the run, in key order). Every
//! expected event is matched against the event at the same position (same
//! count), member by member (objects as subsets, arrays element by element);
//! see docs/runtime.md, "Loop vectors".

use std::path::{Path, PathBuf};
use std::sync::Arc;

use agent_recovery::runtime::scenario::{self, ScenarioOutput};
use agent_recovery::runtime::{Call, Clock, Outcome, Runtime, Step, VirtualClock};
use agent_recovery::store::{MemoryStore, Store};
use agent_recovery::{Loader, Policy};
use serde_json::{Value, json};

fn vectors() -> Vec<(String, Value)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/loops");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("tests/loops exists")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    assert!(
        files.len() >= 16,
        "expected the loop vectors in {}",
        dir.display()
    );
    files
        .into_iter()
        .map(|p| {
            let text = std::fs::read_to_string(&p).expect("readable vector");
            let v: Value = serde_json::from_str(&text).expect("vector is JSON");
            (p.file_name().unwrap().to_string_lossy().into_owned(), v)
        })
        .collect()
}

/// `expected` is contained in `actual`: objects member by member, arrays of the same length.
fn subset(expected: &Value, actual: &Value, path: &str) -> Result<(), String> {
    match (expected, actual) {
        (Value::Object(e), Value::Object(a)) => {
            for (k, ev) in e {
                let av = a
                    .get(k)
                    .ok_or_else(|| format!("{path}.{k}: missing in {actual}"))?;
                subset(ev, av, &format!("{path}.{k}"))?;
            }
            Ok(())
        }
        (Value::Array(e), Value::Array(a)) => {
            if e.len() != a.len() {
                return Err(format!(
                    "{path}: expected {} items, got {}: {actual}",
                    e.len(),
                    a.len()
                ));
            }
            for (i, (ev, av)) in e.iter().zip(a).enumerate() {
                subset(ev, av, &format!("{path}[{i}]"))?;
            }
            Ok(())
        }
        _ if expected == actual => Ok(()),
        _ => Err(format!("{path}: expected {expected}, got {actual}")),
    }
}

fn run(scenario: &Value, store: Arc<dyn Store>) -> ScenarioOutput {
    scenario::run(&scenario.to_string(), store, None, Loader::default())
        .unwrap_or_else(|e| panic!("scenario failed to run: {e}"))
}

fn as_json(out: &ScenarioOutput) -> Value {
    serde_json::from_str(&out.to_json()).expect("output is JSON")
}

#[test]
fn loop_vectors() {
    let mut failures = Vec::new();
    for (file, v) in vectors() {
        let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
        for (i, r) in v["runs"].as_array().expect("runs").iter().enumerate() {
            let mut out = as_json(&run(&r["scenario"], Arc::clone(&store)));
            // `expect.journal`: the run ids with a journal entry, in key order.
            if let (Some(o), true) = (out.as_object_mut(), r["expect"].get("journal").is_some()) {
                let journal: Vec<Value> = store
                    .keys(
                        "agent-recovery/journal/",
                        agent_recovery::store::MAX_INTEGER,
                    )
                    .expect("keys")
                    .iter()
                    .filter_map(|k| k.strip_prefix("agent-recovery/journal/"))
                    .map(|id| Value::from(id.to_owned()))
                    .collect();
                o.insert("journal".into(), Value::Array(journal));
            }
            // `expect.store`: the named keys' values (null: absent) when the
            // run ended (its `now_ms` plus its last event's `t_ms`).
            if let Some(keys) = r["expect"].get("store").and_then(Value::as_object) {
                let end = r["scenario"]["now_ms"].as_u64().expect("now_ms")
                    + out["events"]
                        .as_array()
                        .and_then(|e| e.last())
                        .and_then(|e| e["t_ms"].as_u64())
                        .unwrap_or(0);
                let mut values = serde_json::Map::new();
                for k in keys.keys() {
                    let v = store.get(k, end).expect("get").map_or(Value::Null, |v| {
                        serde_json::from_str(&v.value).expect("stored JSON")
                    });
                    values.insert(k.clone(), v);
                }
                out["store"] = Value::Object(values);
            }
            if let Err(e) = subset(&r["expect"], &out, &format!("{file} run {i}")) {
                failures.push(format!("{e}\n  actual events: {}", out["events"]));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn every_attempt_of_a_step_carries_one_key_and_compensations_their_own() {
    for (file, v) in vectors() {
        let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
        for r in v["runs"].as_array().unwrap() {
            let out = as_json(&run(&r["scenario"], Arc::clone(&store)));
            let mut keys: std::collections::BTreeMap<(String, bool), String> = Default::default();
            for e in out["events"].as_array().unwrap() {
                if e["event"] != "attempt" {
                    continue;
                }
                let key = e["key"].as_str().expect("attempt has a key").to_owned();
                assert_eq!(key.len(), 64, "{file}: key is a sha256");
                let comp = e["call"] == "compensation";
                let step = e["step"].as_str().unwrap().to_owned();
                let seen = keys
                    .entry((step.clone(), comp))
                    .or_insert_with(|| key.clone());
                assert_eq!(
                    *seen, key,
                    "{file}: step {step} changed its key between attempts"
                );
                if comp {
                    assert_ne!(
                        keys.get(&(step.clone(), false)),
                        Some(&key),
                        "{file}: a compensation reuses its step's key"
                    );
                }
            }
        }
    }
}

/// docs/runtime.md, "Inputs": the `run` input carrying the run's first step
/// is `run` then that step. Every vector, its first step sent in the `run`
/// input, gives the same bytes, journal and store.
#[test]
fn every_vector_gives_the_same_bytes_with_its_first_step_in_the_run_input() {
    for (file, v) in vectors() {
        let plain: Arc<dyn Store> = Arc::new(MemoryStore::new());
        let fused: Arc<dyn Store> = Arc::new(MemoryStore::new());
        for (i, r) in v["runs"].as_array().unwrap().iter().enumerate() {
            let text = r["scenario"].to_string();
            let a = run(&r["scenario"], Arc::clone(&plain)).to_json();
            let b =
                scenario::run_with_first_step(&text, Arc::clone(&fused), None, Loader::default())
                    .unwrap_or_else(|e| panic!("{file} run {i}: {e}"))
                    .to_json();
            assert_eq!(b, a, "{file} run {i}");
            let now = r["scenario"]["now_ms"].as_u64().expect("now_ms");
            let dump = |s: &Arc<dyn Store>| -> Vec<(String, Option<String>)> {
                s.keys("agent-recovery/", now)
                    .expect("keys")
                    .into_iter()
                    .map(|k| {
                        let v = s.get(&k, now).expect("get");
                        (k, v.map(|v| v.value))
                    })
                    .collect()
            };
            assert_eq!(dump(&fused), dump(&plain), "{file} run {i}: the stores");
        }
    }
}

#[test]
fn the_same_scenario_gives_the_same_bytes() {
    for (file, v) in vectors() {
        let first: Vec<String> = {
            let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
            v["runs"]
                .as_array()
                .unwrap()
                .iter()
                .map(|r| run(&r["scenario"], Arc::clone(&store)).to_json())
                .collect()
        };
        let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
        for (i, r) in v["runs"].as_array().unwrap().iter().enumerate() {
            assert_eq!(
                run(&r["scenario"], Arc::clone(&store)).to_json(),
                first[i],
                "{file} run {i}"
            );
        }
    }
}

/// payments-policy is a 0.1 component (no runtime export): it decides, the
/// reference's loop runs. Its tool limit is 3 attempts
/// (docs/custom-policies.md), so five 503s dead-letter at attempt 3, not 5. (The run pins its
/// breaker: payments-policy's own, 2 failures, would open it first; that is
/// `tests/breaker_policy.rs`.)
#[test]
fn a_0_1_policy_decides_under_the_loop() {
    let payments =
        Policy::from_file(env!("AGENT_RECOVERY_PAYMENTS_WASM")).expect("payments-policy loads");
    let scenario = json!({"run_id": "p1", "seed": 7, "now_ms": 1_767_225_600_000u64,
        "config": {"breaker": {"failure_threshold": 10}},
        "steps": [{"id": "refund", "tool": "payments.refund", "call": "tool", "target": "psp",
                   "outcomes": [{"source":"http","status":503}, {"source":"http","status":503}, {"source":"http","status":503}]}]});
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let out = scenario::run(
        &scenario.to_string(),
        store,
        Some(Arc::new(payments)),
        Loader::default(),
    )
    .expect("runs");
    assert_eq!(out.outcome, "dead_lettered");
    let attempts = out
        .events
        .iter()
        .filter(|e| e.contains(r#""event":"attempt""#))
        .count();
    assert_eq!(
        attempts, 3,
        "payments-policy allows 3 tool attempts: {:?}",
        out.events
    );
}

/// docs/runtime.md, "Inputs": `Runtime::run` notes the time and calls the
/// loop nothing (the runtime's first run aside, which checks the
/// configuration); the first step sends the `run` input with `started_ms`.
/// The run is the one whose `run` input went at once: its deadline and its
/// events' `t_ms` count from `run`, byte for byte.
#[test]
fn a_run_sends_its_run_input_with_its_first_step() {
    let drive = |later: bool, fail_first: bool| {
        let clock = Arc::new(VirtualClock::new(1_767_225_600_000));
        let rt = Runtime::builder()
            .store(Arc::new(MemoryStore::new()))
            .clock(clock.clone())
            .seed(7)
            .config_json(json!({"deadline_ms": 5000}))
            .build()
            .unwrap();
        if later {
            // The runtime's first run: its `run` input goes at once.
            assert!(!rt.run("first").unwrap().state().is_empty());
        }
        let mut run = rt.run("r").unwrap();
        assert_eq!(run.state().is_empty(), later);
        clock.advance(6_000);
        let report = run
            .step(
                Step::new("s", "search", |c: &Call| {
                    if fail_first && c.attempt == 1 {
                        Outcome::Failed(r#"{"source":"http","status":503}"#.into())
                    } else {
                        Outcome::Ok(json!({"hits": 1}))
                    }
                })
                .call("tool"),
            )
            .unwrap();
        (report.outcome.clone(), run.events().to_vec())
    };
    for fail_first in [false, true] {
        let late = drive(true, fail_first);
        assert_eq!(late, drive(false, fail_first));
        if fail_first {
            // 6 s after `run` with a 5 s deadline, the failed attempt is not retried.
            assert_eq!(late.0, "dead_lettered");
            for e in &late.1 {
                let e: Value = serde_json::from_str(e).unwrap();
                assert!(e["t_ms"].as_u64().unwrap() >= 6_000, "{e}");
            }
        }
    }
}

/// A key marked in flight (a worker that is calling it now, or crashed while
/// calling) is not called again: the step ends `in_flight`.
#[test]
fn a_key_in_flight_is_not_called_twice() {
    let store = Arc::new(MemoryStore::new());
    let clock = Arc::new(VirtualClock::new(1_767_225_600_000));
    let rt = Runtime::builder()
        .store(store.clone())
        .clock(clock.clone())
        .seed(7)
        .build()
        .unwrap();
    // The key of ("r1", "s1", "t", null), as the component derives it (docs/envelope-and-decision.md, "Idempotency keys").
    let key = Policy::reference()
        .unwrap()
        .key("r1", "s1", "t", "null")
        .unwrap();
    let marker = format!("agent-recovery/idem/{key}");
    store
        .compare_and_set(
            &marker,
            None,
            r#"{"status":"in_flight","since_ms":1767225599000}"#,
            Some(86_400_000),
            clock.now_ms(),
        )
        .unwrap();
    let mut calls = 0;
    let mut run = rt.run("r1").unwrap();
    let report = run
        .step(Step::new("s1", "t", |_: &Call| {
            calls += 1;
            Outcome::Ok(Value::Null)
        }))
        .unwrap();
    assert_eq!(report.outcome, "in_flight");
    drop(run);
    assert_eq!(calls, 0);
}

/// The typed results: replan carries the envelope rendered for the model;
/// await_input a token; a compensation closure runs with its own key.
#[test]
fn step_reports_carry_what_the_caller_needs() {
    let rt = Runtime::builder()
        .clock(Arc::new(VirtualClock::new(0)))
        .seed(7)
        .build()
        .unwrap();
    let mut run = rt.run("r-replan").unwrap();
    let report = run
        .step(Step::new("s", "search", |_: &Call| {
            Outcome::Response(r#"{"source":"http","status":400,"provider":"openai","body":{"error":{"message":"too long","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}}"#.into())
        }))
        .unwrap();
    assert_eq!(report.outcome, "replan");
    let rendered = report.rendered.expect("rendered for the model");
    assert_eq!(
        rendered["error"]["code"], "llm.context.overflow",
        "{rendered}"
    );
    assert!(rendered["error"]["hint"].is_string());
    assert!(report.run_finished);
}

/// A store whose reads never see idempotency entries: the race where another
/// worker claims the key between this worker's read and its claim.
struct BlindReads(MemoryStore);

impl Store for BlindReads {
    fn get(
        &self,
        key: &str,
        now_ms: u64,
    ) -> Result<Option<agent_recovery::store::Versioned>, agent_recovery::store::StoreError> {
        if key.starts_with("agent-recovery/idem/") {
            return Ok(None);
        }
        self.0.get(key, now_ms)
    }
    fn compare_and_set(
        &self,
        key: &str,
        expected: Option<u64>,
        value: &str,
        ttl_ms: Option<u64>,
        now_ms: u64,
    ) -> Result<agent_recovery::store::Cas, agent_recovery::store::StoreError> {
        self.0.compare_and_set(key, expected, value, ttl_ms, now_ms)
    }
    fn append(
        &self,
        stream: &str,
        record: &str,
        now_ms: u64,
    ) -> Result<u64, agent_recovery::store::StoreError> {
        self.0.append(stream, record, now_ms)
    }
    fn read(
        &self,
        stream: &str,
        after: u64,
        limit: usize,
    ) -> Result<Vec<(u64, String)>, agent_recovery::store::StoreError> {
        self.0.read(stream, after, limit)
    }
    fn delete(&self, key: &str) -> Result<bool, agent_recovery::store::StoreError> {
        self.0.delete(key)
    }
    fn keys(
        &self,
        prefix: &str,
        now_ms: u64,
    ) -> Result<Vec<String>, agent_recovery::store::StoreError> {
        self.0.keys(prefix, now_ms)
    }
}

/// The in-flight mark is a create-if-absent (compare-and-set with no version):
/// a worker that loses the race does not call, and sees the winner's outcome.
#[test]
fn a_concurrent_duplicate_loses_the_claim_and_does_not_call() {
    let key = Policy::reference()
        .unwrap()
        .key("r1", "s1", "t", "null")
        .unwrap();
    let marker = format!("agent-recovery/idem/{key}");
    for (existing, outcome) in [
        (r#"{"status":"in_flight","since_ms":0}"#, "in_flight"),
        (
            r#"{"status":"done","result":{"n":1},"target":"t","at_ms":0}"#,
            "ok",
        ),
    ] {
        let inner = MemoryStore::new();
        inner
            .compare_and_set(&marker, None, existing, None, 0)
            .unwrap();
        let rt = Runtime::builder()
            .store(Arc::new(BlindReads(inner)))
            .clock(Arc::new(VirtualClock::new(1_000)))
            .seed(7)
            .build()
            .unwrap();
        let calls = std::sync::atomic::AtomicU32::new(0);
        let mut run = rt.run("r1").unwrap();
        let report = run
            .step(Step::new("s1", "t", |_: &Call| {
                calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                Outcome::Ok(Value::Null)
            }))
            .unwrap();
        assert_eq!(report.outcome, outcome);
        if outcome == "ok" {
            assert_eq!(report.result, Some(json!({"n": 1})));
        }
        drop(run);
        assert_eq!(calls.into_inner(), 0, "{existing}");
    }
}

/// A call slower than `attempt_timeout_ms` (on the runtime's clock) is a
/// `timeout` observation the policy decides on: here a retry, same key.
#[test]
fn a_slow_attempt_becomes_a_timeout_observation() {
    let clock = Arc::new(VirtualClock::new(0));
    let events = Arc::new(std::sync::Mutex::new(Vec::new()));
    let sink = Arc::clone(&events);
    let rt = Runtime::builder()
        .clock(clock.clone())
        .seed(7)
        .attempt_timeout_ms(1_000)
        .on_event(move |e| sink.lock().unwrap().push(e.to_owned()))
        .build()
        .unwrap();
    let mut run = rt.run("r-slow").unwrap();
    let report = run
        .step(
            Step::new("s", "search", |call: &Call| {
                assert_eq!(call.timeout_ms, Some(1_000));
                if call.attempt == 1 {
                    clock.advance(1_500); // the call took 1.5 s
                }
                Outcome::Ok(json!("late"))
            })
            .call("tool"),
        )
        .unwrap();
    assert_eq!(report.outcome, "ok");
    let events = events.lock().unwrap();
    let decision: Value = events
        .iter()
        .map(|e| serde_json::from_str::<Value>(e).unwrap())
        .find(|e| e["event"] == "decision")
        .expect("a decision on the timeout");
    assert_eq!(decision["code"], "tool.timeout.total");
    assert_eq!(decision["action"], "retry");
}

#[test]
fn a_runtime_is_shared_across_threads() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Runtime>();
}

/// The in-flight mark is a lease (`in_flight_ttl_ms`, 5 min by default): while
/// the call runs it is there; a worker that died mid-call frees the key after
/// the lease, not after the 24 h cache TTL.
#[test]
fn the_in_flight_mark_is_a_lease() {
    let store = Arc::new(MemoryStore::new());
    let clock = Arc::new(VirtualClock::new(1_000));
    let rt = Runtime::builder()
        .store(store.clone())
        .clock(clock.clone())
        .seed(7)
        .build()
        .unwrap();
    let key = Policy::reference()
        .unwrap()
        .key("r1", "s1", "t", "null")
        .unwrap();
    let marker = format!("agent-recovery/idem/{key}");
    let mut run = rt.run("r1").unwrap();
    let report = run
        .step(Step::new("s1", "t", |_: &Call| {
            let now = clock.now_ms();
            let mark = store
                .get(&marker, now)
                .unwrap()
                .expect("marked in flight during the call");
            assert!(
                mark.value.contains(r#""status":"in_flight""#),
                "{}",
                mark.value
            );
            assert!(store.get(&marker, now + 299_999).unwrap().is_some());
            assert!(
                store.get(&marker, now + 300_000).unwrap().is_none(),
                "the lease is 300 000 ms"
            );
            Outcome::Ok(Value::Null)
        }))
        .unwrap();
    assert_eq!(report.outcome, "ok");
    // Once done, the record lasts the cache TTL (24 h).
    let now = 1_000;
    assert!(store.get(&marker, now + 86_399_999).unwrap().is_some());
    assert!(store.get(&marker, now + 86_400_000).unwrap().is_none());
}
