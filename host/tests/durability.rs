//! Durability (docs/durability.md): `Run::end` and `Drop`, `Runtime::recover`
//! over the journal, the dead-letter API with compare-and-set under races,
//! the `dead_letter_depth` event, and the idempotency cache across a reopened
//! SQLite store. The real loop component, real stores, a virtual clock.
//!
//! A worker "dies mid-call" here by panicking inside its operation: the run
//! is dropped while the thread panics, so it is not ended and stays in the
//! journal exactly as after a SIGKILL (the kill harness,
//! tests/durability/kill.py, does it with real processes).

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, Barrier, Mutex};

use agent_recovery::runtime::deadletters::{CLOSED_KEY, DeadLetterError};
use agent_recovery::runtime::{
    Call, Clock, ListOptions, Operations, Outcome, RecoverOptions, Runtime, Step, VirtualClock,
};
use agent_recovery::store::{MemoryStore, SqliteStore, Store};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

const T0: u64 = 1_767_225_600_000;
const JOURNAL: &str = "agent-recovery/journal/";
const STREAM: &str = "agent-recovery/dead-letter";

/// Retries wait a few ms, three attempts per step; a step whose target is
/// open waits for the probe (so every failing run ends dead-lettered).
fn config() -> Value {
    json!({"policy": {"tool": {"base_ms": 1, "cap_ms": 4, "max_attempts": 3}}, "on_open": "wait"})
}

fn runtime(store: Arc<dyn Store>, clock: Arc<VirtualClock>, config: Value) -> Runtime {
    Runtime::builder()
        .store(store)
        .clock(clock)
        .seed(7)
        .config_json(config)
        .build()
        .unwrap()
}

fn ok_step(id: &str) -> Step<'static> {
    Step::new(id, &format!("t.{id}"), |_: &Call| {
        Outcome::Ok(json!({"ok": true}))
    })
}

fn failing_step(id: &str) -> Step<'static> {
    Step::new(id, &format!("t.{id}"), |_: &Call| {
        Outcome::Failed(r#"{"source":"http","status":503}"#.into())
    })
}

/// `hex(sha256(text))`, written out independently of the component.
fn sha(text: &str) -> String {
    Sha256::digest(text.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// docs/envelope-and-decision.md, "Idempotency keys", for args `null`: canonical JSON of
/// `[run_id, step_id, tool, null]`.
fn key(run_id: &str, step: &str, tool: &str) -> String {
    sha(&format!(r#"["{run_id}","{step}","{tool}",null]"#))
}

fn journal(store: &dyn Store) -> Vec<String> {
    store.keys(JOURNAL, T0 + 10_000_000).unwrap()
}

/// A dead-letter record's compensations: (step, outcome), in the order run.
fn compensations(rec: &Value) -> Vec<(&str, &str)> {
    rec["compensations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["step"].as_str().unwrap(), c["outcome"].as_str().unwrap()))
        .collect()
}

fn records(store: &dyn Store) -> Vec<Value> {
    store
        .read(STREAM, 0, usize::MAX)
        .unwrap()
        .into_iter()
        .map(|(_, r)| serde_json::from_str(&r).unwrap())
        .collect()
}

/// A run of two compensable steps that "dies" during its third step's call.
fn die_in_third_step(rt: &Runtime, run_id: &str, comps: &Arc<Mutex<Vec<String>>>) -> String {
    let seen = Arc::new(Mutex::new(String::new()));
    let _ = catch_unwind(AssertUnwindSafe(|| {
        let mut run = rt.run(run_id).unwrap();
        for id in ["a", "b"] {
            let c = Arc::clone(comps);
            let step = ok_step(id)
                .side_effect(true)
                .compensate(move |call: &Call| {
                    c.lock().unwrap().push(format!("first:{}", call.step));
                    Outcome::Ok(Value::Null)
                });
            assert_eq!(run.step(step).unwrap().outcome, "ok");
        }
        let s = Arc::clone(&seen);
        let dying = Step::new("c", "t.c", move |call: &Call| {
            *s.lock().unwrap() = call.key.clone();
            panic!("the worker dies mid-call");
        })
        .side_effect(true);
        let _ = run.step(dying);
    }));
    seen.lock().unwrap().clone()
}

#[test]
fn end_deletes_the_journal_and_drop_ends_a_run_unless_panicking() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let rt = runtime(
        Arc::clone(&store),
        Arc::new(VirtualClock::new(T0)),
        config(),
    );

    let mut run = rt.run("ended").unwrap();
    run.step(ok_step("a")).unwrap();
    // Written before the call, still there between steps.
    assert_eq!(journal(&*store), ["agent-recovery/journal/ended"]);
    run.end().unwrap();
    assert!(journal(&*store).is_empty());

    {
        let mut run = rt.run("dropped").unwrap();
        run.step(ok_step("a")).unwrap();
        assert_eq!(journal(&*store), ["agent-recovery/journal/dropped"]);
    }
    assert!(journal(&*store).is_empty(), "Drop ends the run");

    // A run that a step finished (dead-lettered) has no journal and ends as a no-op.
    let mut run = rt.run("finished").unwrap();
    assert_eq!(
        run.step(failing_step("x")).unwrap().outcome,
        "dead_lettered"
    );
    assert!(journal(&*store).is_empty());
    run.end().unwrap();

    let comps = Arc::new(Mutex::new(Vec::new()));
    die_in_third_step(&rt, "panicked", &comps);
    assert_eq!(journal(&*store), ["agent-recovery/journal/panicked"]);
}

#[test]
fn recover_resumes_the_step_with_its_key_then_compensates_in_reverse_order() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let clock = Arc::new(VirtualClock::new(T0));
    let config = json!({"policy": {"tool": {"base_ms": 1, "cap_ms": 4, "max_attempts": 3}}, "on_open": "wait",
                        "dead_letter": {"owner": "payments-oncall", "runbook": "https://runbooks.example/dlq"}});
    let rt = runtime(Arc::clone(&store), Arc::clone(&clock), config);
    let comps = Arc::new(Mutex::new(Vec::new()));
    let died_with = die_in_third_step(&rt, "trip", &comps);
    assert_eq!(died_with, key("trip", "c", "t.c"));

    // Another worker, later: its operations by tool name.
    clock.advance(1_000);
    let calls = Arc::new(Mutex::new(Vec::new()));
    let mut ops = Operations::new();
    for id in ["a", "b", "c"] {
        let c1 = Arc::clone(&calls);
        let c2 = Arc::clone(&calls);
        ops.insert(
            Step::new("_", &format!("t.{id}"), move |call: &Call| {
                c1.lock().unwrap().push((
                    call.kind.clone(),
                    call.step.clone(),
                    call.key.clone(),
                    call.attempt,
                ));
                Outcome::Ok(json!({"again": true}))
            })
            .compensate(move |call: &Call| {
                c2.lock().unwrap().push((
                    call.kind.clone(),
                    call.step.clone(),
                    call.key.clone(),
                    call.attempt,
                ));
                Outcome::Ok(Value::Null)
            }),
        );
    }
    // Too young for the default age (in_flight_ttl_ms, 300 000 ms): not stolen.
    assert!(
        rt.recover(&ops, RecoverOptions::default())
            .unwrap()
            .is_empty()
    );
    assert_eq!(journal(&*store).len(), 1);

    let reports = rt.recover(&ops, RecoverOptions::older_than_ms(0)).unwrap();
    assert_eq!(reports.len(), 1);
    let r = &reports[0];
    assert_eq!(
        (
            r.run_id.as_str(),
            r.outcome.as_str(),
            r.step.as_deref(),
            r.step_outcome.as_deref()
        ),
        ("trip", "interrupted", Some("c"), Some("ok"))
    );
    assert_eq!(r.dead_letter_id.as_deref(), Some("1"));
    let calls = calls.lock().unwrap().clone();
    let kinds: Vec<(&str, &str)> = calls.iter().map(|c| (c.0.as_str(), c.1.as_str())).collect();
    // The resumed step (same key, same attempt number; it has no
    // compensation), then b and a undone in reverse order.
    assert_eq!(
        kinds,
        [
            ("operation", "c"),
            ("compensation", "b"),
            ("compensation", "a")
        ]
    );
    assert_eq!(calls[0].2, died_with);
    assert_eq!(calls[0].3, 1);
    for (_, step, k, _) in &calls[1..] {
        // docs/runtime.md: the compensation's key uses "compensate:" + tool.
        assert_eq!(*k, key("trip", step, &format!("compensate:t.{step}")));
    }
    // Nothing left: no journal, no lease; the record says what happened.
    assert!(journal(&*store).is_empty());
    assert!(
        store
            .keys("agent-recovery/recovering/", T0 + 10_000_000)
            .unwrap()
            .is_empty()
    );
    let rec = &records(&*store)[0];
    assert_eq!(rec["outcome"], "interrupted");
    assert_eq!(rec["step_outcome"], "ok");
    assert_eq!(rec["recovered"], true);
    assert_eq!(rec["owner"], "payments-oncall");
    assert_eq!(rec["runbook"], "https://runbooks.example/dlq");
    assert_eq!(rec["input"]["tool"], "t.c");
    // A second recover finds nothing.
    assert!(
        rt.recover(&ops, RecoverOptions::older_than_ms(0))
            .unwrap()
            .is_empty()
    );
    // The first worker's compensations never ran.
    assert!(comps.lock().unwrap().is_empty());
}

#[test]
fn a_run_leased_by_another_recovering_worker_is_skipped() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let rt = runtime(
        Arc::clone(&store),
        Arc::new(VirtualClock::new(T0)),
        config(),
    );
    die_in_third_step(&rt, "leased", &Arc::new(Mutex::new(Vec::new())));
    store
        .compare_and_set(
            "agent-recovery/recovering/leased",
            None,
            "{}",
            Some(300_000),
            T0,
        )
        .unwrap();
    assert!(
        rt.recover(&Operations::new(), RecoverOptions::older_than_ms(0))
            .unwrap()
            .is_empty()
    );
    assert_eq!(journal(&*store), ["agent-recovery/journal/leased"]);
}

#[test]
fn a_tool_without_operations_is_dead_lettered_never_silence() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let rt = runtime(
        Arc::clone(&store),
        Arc::new(VirtualClock::new(T0)),
        config(),
    );
    die_in_third_step(&rt, "lost", &Arc::new(Mutex::new(Vec::new())));
    let reports = rt
        .recover(&Operations::new(), RecoverOptions::older_than_ms(0))
        .unwrap();
    assert_eq!(reports.len(), 1);
    assert!(reports[0].dead_letter_id.is_some());
    let rec = &records(&*store)[0];
    assert_eq!(rec["run_id"], "lost");
    assert_eq!(rec["recovered"], true);
    assert_eq!(rec["trail"][0]["code"], "runtime.recover.unknown_tool");
    // The compensations had no operations either: each is listed as failed.
    assert_eq!(compensations(rec), [("b", "failed"), ("a", "failed")]);
    assert!(journal(&*store).is_empty());
}

/// Three dead-lettered runs on `store`.
fn three_records(rt: &Runtime) {
    for run_id in ["d1", "d2", "d3"] {
        let mut run = rt.run(run_id).unwrap();
        assert_eq!(
            run.step(failing_step("sync")).unwrap().outcome,
            "dead_lettered"
        );
    }
}

#[test]
fn the_dead_letter_api_lists_shows_purges_and_counts() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let clock = Arc::new(VirtualClock::new(T0));
    let rt = runtime(Arc::clone(&store), Arc::clone(&clock), config());
    three_records(&rt);
    let dl = rt.dead_letters();
    let ids = |items: Vec<agent_recovery::runtime::Item>| -> Vec<(String, String)> {
        items.into_iter().map(|i| (i.id, i.status)).collect()
    };
    assert_eq!(dl.depth().unwrap(), 3);
    let all = dl.list(&ListOptions::default()).unwrap();
    assert_eq!(all.len(), 3);
    assert_eq!(all[1].record["run_id"], "d2");
    assert_eq!(all[1].record["v"], 1);
    assert_eq!(dl.show("2").unwrap(), all[1]);

    let purged = dl.purge("2").unwrap();
    assert_eq!(purged.status, "purged");
    assert_eq!(purged.purged_ms, Some(clock.now_ms()));
    assert_eq!(dl.depth().unwrap(), 2);
    // Purging twice counts once.
    dl.purge("2").unwrap();
    assert_eq!(dl.depth().unwrap(), 2);
    assert_eq!(
        ids(dl.list(&ListOptions::default()).unwrap()),
        [("1".into(), "open".into()), ("3".into(), "open".into())]
    );
    let every = ListOptions {
        all: true,
        ..ListOptions::default()
    };
    assert_eq!(dl.list(&every).unwrap().len(), 3);
    let after = ListOptions {
        after: 1,
        limit: Some(1),
        all: true,
        ..ListOptions::default()
    };
    assert_eq!(
        ids(dl.list(&after).unwrap()),
        [("2".into(), "purged".into())]
    );

    // A request: the item records it, the key follows the replay rule.
    let t = dl.request_replay("1").unwrap();
    let original = all[0].record["key"].as_str().unwrap().to_owned();
    assert_eq!(original, key("d1", "sync", "t.sync"));
    assert_eq!(t.n, 1);
    assert_eq!(t.run_id, "d1/replay/1");
    assert_eq!(
        t.key,
        sha(&format!(r#"["agent-recovery/replay","{original}",1]"#))
    );
    assert_eq!(dl.show("1").unwrap().status, "replay_requested");
    // Asking again while it is pending is a conflict.
    assert!(matches!(
        dl.request_replay("1"),
        Err(DeadLetterError::Conflict { .. })
    ));
    assert_eq!(dl.show("1").unwrap().replays.len(), 1);

    // Errors: typed, never a panic.
    for bad in [
        "",
        "0",
        "01",
        "-1",
        "+1",
        "x",
        "1.0",
        "99999999999999999999",
    ] {
        assert!(
            matches!(dl.show(bad), Err(DeadLetterError::BadId(_))),
            "{bad:?}"
        );
    }
    assert!(matches!(dl.show("4"), Err(DeadLetterError::NotFound(_))));
    assert!(matches!(dl.purge("4"), Err(DeadLetterError::NotFound(_))));
    assert!(matches!(
        dl.request_replay("2"),
        Err(DeadLetterError::Closed { .. })
    ));
    // The kinds Node's and Python's DeadLetterError carry for the same cases.
    assert_eq!(dl.show("x").unwrap_err().kind(), "invalid_argument");
    assert_eq!(dl.show("4").unwrap_err().kind(), "not_found");
    assert_eq!(dl.request_replay("2").unwrap_err().kind(), "conflict");
}

#[test]
fn two_threads_purging_and_requesting_at_once_lose_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.db");
    let writer: Arc<dyn Store> = Arc::new(SqliteStore::open(&path).unwrap());
    for seq in 1..=40u64 {
        writer
            .append(
                STREAM,
                &json!({"run_id": format!("r{seq}"), "key": "k", "input": {"id": "s", "tool": "t"}}).to_string(),
                T0,
            )
            .unwrap();
    }
    let clock = Arc::new(VirtualClock::new(T0));
    // Two workers, each with its own connection to the file.
    let rts: Vec<Runtime> = (0..2)
        .map(|_| {
            runtime(
                Arc::new(SqliteStore::open(&path).unwrap()),
                Arc::clone(&clock),
                config(),
            )
        })
        .collect();
    let barrier = Barrier::new(2);
    let granted: Vec<usize> = std::thread::scope(|s| {
        let handles: Vec<_> = rts
            .iter()
            .map(|rt| {
                let barrier = &barrier;
                s.spawn(move || {
                    barrier.wait();
                    let dl = rt.dead_letters();
                    // Both purge every record 1..=20 (each counted once), both
                    // request a replay of 21..=40 (one of them gets it).
                    for id in 1..=20 {
                        dl.purge(&id.to_string()).unwrap();
                    }
                    let mut granted = 0;
                    for id in 21..=40 {
                        match dl.request_replay(&id.to_string()) {
                            Ok(t) => {
                                assert_eq!(t.n, 1);
                                granted += 1;
                            }
                            Err(DeadLetterError::Conflict { .. }) => {}
                            Err(e) => panic!("{e}"),
                        }
                    }
                    granted
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert_eq!(granted.iter().sum::<usize>(), 20);
    let closed: Value =
        serde_json::from_str(&writer.get(CLOSED_KEY, T0).unwrap().unwrap().value).unwrap();
    assert_eq!(closed["count"], 20);
    let dl = rts[0].dead_letters();
    assert_eq!(dl.depth().unwrap(), 20);
    for id in 21..=40 {
        let item = dl.show(&id.to_string()).unwrap();
        assert_eq!(item.status, "replay_requested");
        assert_eq!(item.replays.len(), 1);
    }
}

#[test]
fn the_depth_event_fires_when_the_threshold_is_crossed() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let events = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&events);
    let rt = Runtime::builder()
        .store(Arc::clone(&store))
        .clock(Arc::new(VirtualClock::new(T0)))
        .seed(7)
        .config_json(
            json!({"policy": {"tool": {"base_ms": 1, "cap_ms": 4, "max_attempts": 3}}, "on_open": "wait",
                            "dead_letter": {"depth_threshold": 2}}),
        )
        .on_event(move |e| seen.lock().unwrap().push(e.to_owned()))
        .build()
        .unwrap();
    let depth_events = || -> Vec<Value> {
        events
            .lock()
            .unwrap()
            .iter()
            .map(|e| serde_json::from_str::<Value>(e).unwrap())
            .filter(|e| e["event"] == "dead_letter_depth")
            .collect()
    };
    let mut run = rt.run("d1").unwrap();
    run.step(failing_step("sync")).unwrap();
    assert!(depth_events().is_empty(), "depth 1 < 2");
    let mut run = rt.run("d2").unwrap();
    run.step(failing_step("sync")).unwrap();
    let fired = depth_events();
    assert_eq!(fired.len(), 1);
    let e = &fired[0];
    assert_eq!(
        (
            &e["step"],
            &e["target"],
            &e["depth"],
            &e["threshold"],
            &e["id"]
        ),
        (
            &json!("sync"),
            &Value::Null,
            &json!(2),
            &json!(2),
            &json!("2")
        )
    );
    // The run's own events carry it too, after the dead_letter event.
    let own: Vec<&str> = run
        .events()
        .iter()
        .filter(|e| {
            e.contains(r#""event":"dead_letter""#) || e.contains(r#""event":"dead_letter_depth""#)
        })
        .map(String::as_str)
        .collect();
    assert_eq!(own.len(), 2);
    assert!(own[0].contains("\"event\":\"dead_letter\""));
    assert!(own[1].starts_with(r#"{"t_ms":"#) && own[1].contains(r#""event":"dead_letter_depth""#));
    // Still above: no new event; below again then above again: one more.
    let mut run = rt.run("d3").unwrap();
    run.step(failing_step("sync")).unwrap();
    assert_eq!(depth_events().len(), 1);
    let dl = rt.dead_letters();
    for id in ["1", "2", "3"] {
        dl.purge(id).unwrap();
    }
    let mut run = rt.run("d4").unwrap();
    run.step(failing_step("sync")).unwrap();
    assert_eq!(depth_events().len(), 1, "depth 1 after the purges");
    let mut run = rt.run("d5").unwrap();
    run.step(failing_step("sync")).unwrap();
    let fired = depth_events();
    assert_eq!(fired.len(), 2);
    assert_eq!(
        (&fired[1]["depth"], &fired[1]["id"]),
        (&json!(2), &json!("5"))
    );
}

#[test]
fn the_idempotency_cache_survives_a_reopened_store_within_its_ttl() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.db");
    let clock = Arc::new(VirtualClock::new(T0));
    let config = json!({"idempotency_ttl_ms": 60_000});
    let calls = Arc::new(Mutex::new(0u32));
    let step = |calls: &Arc<Mutex<u32>>| {
        let calls = Arc::clone(calls);
        Step::new("search", "t.search", move |_: &Call| {
            *calls.lock().unwrap() += 1;
            Outcome::Ok(json!({"hits": 3}))
        })
    };
    let events_of = |rt: &Runtime| -> (String, Vec<String>) {
        let mut run = rt.run("cached").unwrap();
        let report = run.step(step(&calls)).unwrap();
        let events = run.events().to_vec();
        run.end().unwrap();
        (report.outcome, events)
    };
    {
        let rt = runtime(
            Arc::new(SqliteStore::open(&path).unwrap()),
            Arc::clone(&clock),
            config.clone(),
        );
        assert_eq!(events_of(&rt).0, "ok");
    }
    assert_eq!(*calls.lock().unwrap(), 1);
    // A restarted worker, 59 s later: the cache answers, nothing is called.
    clock.advance(59_000);
    {
        let rt = runtime(
            Arc::new(SqliteStore::open(&path).unwrap()),
            Arc::clone(&clock),
            config.clone(),
        );
        let (outcome, events) = events_of(&rt);
        assert_eq!(outcome, "ok");
        assert!(
            events.iter().any(|e| e.contains(r#""event":"cached""#)),
            "{events:?}"
        );
    }
    assert_eq!(*calls.lock().unwrap(), 1);
    // After the TTL: called again; the expired row was removed by the writes.
    clock.advance(2_000);
    {
        let rt = runtime(
            Arc::new(SqliteStore::open(&path).unwrap()),
            Arc::clone(&clock),
            config.clone(),
        );
        let (outcome, events) = events_of(&rt);
        assert_eq!(outcome, "ok");
        assert!(!events.iter().any(|e| e.contains(r#""event":"cached""#)));
    }
    assert_eq!(*calls.lock().unwrap(), 2);
    clock.advance(61_000);
    let store = SqliteStore::open(&path).unwrap();
    // One more write purges what expired (docs/store.md): no idem row is left.
    store
        .compare_and_set("unrelated", None, "1", None, clock.now_ms())
        .unwrap();
    let conn = rusqlite::Connection::open(&path).unwrap();
    let left: i64 = conn
        .query_row(
            "SELECT COUNT(*) FROM ar_entries WHERE key LIKE 'agent-recovery/idem/%'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(left, 0);
}

#[test]
fn replay_runs_the_record_again_under_the_replay_key() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let rt = runtime(
        Arc::clone(&store),
        Arc::new(VirtualClock::new(T0)),
        config(),
    );
    three_records(&rt);
    let keys = Arc::new(Mutex::new(Vec::new()));
    let k = Arc::clone(&keys);
    let ops = Operations::new().with(Step::new("_", "t.sync", move |call: &Call| {
        k.lock().unwrap().push(call.key.clone());
        Outcome::Ok(json!({"synced": true}))
    }));
    let dl = rt.dead_letters();
    let original = key("d2", "sync", "t.sync");
    let t = dl.replay("2", &ops).unwrap();
    let expected = sha(&format!(r#"["agent-recovery/replay","{original}",1]"#));
    assert_eq!(t.key, expected);
    assert_eq!(t.outcome.as_deref(), Some("ok"));
    assert_eq!(*keys.lock().unwrap(), [expected]);
    let item = dl.show("2").unwrap();
    assert_eq!(item.status, "replayed");
    assert_eq!(item.replays[0]["outcome"], "ok");
    assert_eq!(dl.depth().unwrap(), 2);
    assert!(matches!(
        dl.replay("2", &ops),
        Err(DeadLetterError::Closed { .. })
    ));
    assert!(journal(&*store).is_empty());

    // A replay that fails again: back to open, and a new record with replay_of.
    let failing = Operations::new().with(failing_step("sync"));
    let t = dl.replay("3", &failing).unwrap();
    assert_eq!(t.outcome.as_deref(), Some("dead_lettered"));
    assert_eq!(dl.show("3").unwrap().status, "open");
    let recs = records(&*store);
    assert_eq!(recs.len(), 4);
    assert_eq!(recs[3]["replay_of"], json!({"id": "3", "n": 1}));
    assert_eq!(recs[3]["run_id"], "d3/replay/1");
    assert_eq!(dl.depth().unwrap(), 3);
}

#[test]
fn replay_carries_out_a_pending_request_and_refuses_records_it_cannot_run() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let rt = runtime(
        Arc::clone(&store),
        Arc::new(VirtualClock::new(T0)),
        config(),
    );
    three_records(&rt);
    let dl = rt.dead_letters();
    let requested = dl.request_replay("1").unwrap();
    let ops = Operations::new().with(ok_step("sync"));
    let done = dl.replay("1", &ops).unwrap();
    assert_eq!((done.n, &done.key), (1, &requested.key));
    let item = dl.show("1").unwrap();
    assert_eq!(item.replays.len(), 1);
    assert_eq!(item.replays[0]["outcome"], "ok");
    assert!(
        rt.recover(&ops, RecoverOptions::older_than_ms(0))
            .unwrap()
            .is_empty()
    );

    // A record without `input` (written before format 1) is not guessed at.
    store
        .append(
            STREAM,
            r#"{"run_id":"old","step_id":"s","tool":"t","key":"k"}"#,
            T0,
        )
        .unwrap();
    assert!(matches!(
        dl.replay("4", &ops),
        Err(DeadLetterError::InvalidRecord { .. })
    ));
    assert!(matches!(
        dl.request_replay("4"),
        Err(DeadLetterError::InvalidRecord { .. })
    ));
}

#[test]
fn a_journal_entry_the_loop_refuses_is_reported_and_the_others_recovered() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let rt = runtime(
        Arc::clone(&store),
        Arc::new(VirtualClock::new(T0)),
        config(),
    );
    die_in_third_step(&rt, "good", &Arc::new(Mutex::new(Vec::new())));
    store
        .compare_and_set(
            "agent-recovery/journal/alien",
            None,
            r#"{"run_id":"alien","state":{"v":99},"v":1,"written_ms":0}"#,
            None,
            T0,
        )
        .unwrap();
    let ops = Operations::new().with(ok_step("c"));
    let reports = rt.recover(&ops, RecoverOptions::older_than_ms(0)).unwrap();
    let outcomes: Vec<(&str, &str)> = reports
        .iter()
        .map(|r| (r.run_id.as_str(), r.outcome.as_str()))
        .collect();
    assert_eq!(outcomes, [("alien", "error"), ("good", "interrupted")]);
    assert!(reports[0].error.is_some());
    assert!(reports[0].to_json().contains(r#""error":"#));
    assert!(!reports[1].to_json().contains(r#""error":"#));
    assert_eq!(journal(&*store), ["agent-recovery/journal/alien"]);
    assert!(
        store
            .keys("agent-recovery/recovering/", T0)
            .unwrap()
            .is_empty()
    );
}

#[test]
fn a_tool_registered_without_its_compensation_fails_that_compensation() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let rt = runtime(
        Arc::clone(&store),
        Arc::new(VirtualClock::new(T0)),
        config(),
    );
    die_in_third_step(&rt, "nocomp", &Arc::new(Mutex::new(Vec::new())));
    // The recovering worker has the tools' operations, no compensations; the
    // resumed call fails for good, so the run rolls back.
    let ops = Operations::new()
        .with(ok_step("a"))
        .with(ok_step("b"))
        .with(Step::new("c", "t.c", |_: &Call| {
            Outcome::Failed(r#"{"source":"http","status":404}"#.into())
        }));
    let reports = rt.recover(&ops, RecoverOptions::older_than_ms(0)).unwrap();
    assert_eq!(reports.len(), 1);
    let rec = &records(&*store)[0];
    assert_eq!(compensations(rec), [("b", "failed"), ("a", "failed")]);
    // Answered `no_compensation`: the loop's MissingCompensation failure
    // (docs/runtime.md, the `attempt` input), not an unknown tool.
    let text = rec["compensations"].to_string();
    assert!(
        text.contains("agent_recovery.MissingCompensation"),
        "{text}"
    );
    assert!(!text.contains("runtime.recover.unknown_tool"), "{text}");
}
