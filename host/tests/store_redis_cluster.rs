//! The Redis store on a real three-node Redis Cluster started by the test
//! (`tests/store/redis_cluster.py`, shared with the Node and Python suites):
//! the shared store vectors, the key layout's slots, runtime steps while every
//! slot holding the store's keys migrates to another node (ASK, then MOVED),
//! and an unreachable cluster (`unavailable`; `fallback=local` degrades).

mod redis_server;
mod store_ops;

use std::sync::{Arc, Mutex};

use agent_recovery::runtime::{Clock, Outcome, Runtime, Step, SystemClock, VirtualClock};
use agent_recovery::store::{self, RedisStore, Store, StoreErrorKind};
use redis_server::RedisCluster;
use serde_json::Value;
use store_ops::{Rebased, run_case, vectors};

#[test]
fn redis_store_on_a_cluster_passes_the_shared_vectors() {
    let cluster = RedisCluster::start();
    let mut failures = Vec::new();
    for (n, case) in vectors().iter().enumerate() {
        let store = RedisStore::open(&cluster.url(&format!("?prefix=cv{n}&fallback=none")))
            .expect("open the cluster store");
        run_case(
            "redis cluster",
            case,
            &Rebased::new(&store),
            &|now| store.purge_expired(now),
            &mut failures,
        );
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Every key of the layout vectors is in the slot the vector says, as the
/// cluster computes it (`CLUSTER KEYSLOT` on one node).
#[test]
fn the_layout_vectors_slots_are_the_clusters() {
    let cluster = RedisCluster::start();
    let mut conn = redis::Client::open(format!("redis://127.0.0.1:{}", cluster.ports[0]))
        .expect("client")
        .get_connection()
        .expect("connect");
    let path = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/store/redis-layout.json");
    let doc: Value =
        serde_json::from_str(&std::fs::read_to_string(path).expect("read")).expect("JSON");
    let mut checked = 0;
    for case in doc["cases"].as_array().expect("cases") {
        let (Some(key), Some(slot)) = (case["redis_key"].as_str(), case["slot"].as_u64()) else {
            continue;
        };
        let got: u64 = redis::cmd("CLUSTER")
            .arg("KEYSLOT")
            .arg(key)
            .query(&mut conn)
            .expect("KEYSLOT");
        assert_eq!(got, slot, "{key}");
        checked += 1;
    }
    assert!(checked >= 10, "only {checked} slots checked");
}

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

/// A run of 60 steps (every third call fails once, so the policy retries
/// through the store's breaker and budget entries) while every slot that
/// holds the store's keys and is not on the first node moves there: from step 20 the slots are
/// MIGRATING with half their keys moved (the client follows ASK), from step
/// 40 they belong to the new nodes (the client follows MOVED). No step fails
/// and nothing degrades (`fallback=none`: a store error would fail the step).
#[test]
fn a_slot_migration_during_a_run_fails_no_step() {
    let mut cluster = RedisCluster::start();
    let (events, sink) = collect();
    let rt = Runtime::builder()
        .opened_store(
            store::open_with(&cluster.url("?prefix=mig&fallback=none"), None).expect("open"),
        )
        .clock(Arc::new(VirtualClock::new(SystemClock.now_ms())))
        .seed(7)
        .on_event(sink)
        .build()
        .expect("runtime");
    let mut run = rt.run("run-migrating").expect("run");
    let calls = Arc::new(Mutex::new(0u32));
    let mut failed = Vec::new();
    let mut moved = 0;
    for i in 0..60 {
        if i == 20 {
            let r = cluster.begin_migration();
            assert!(
                r["slots"].as_u64().unwrap_or(0) > 0,
                "no slot to migrate: {r}"
            );
            moved += r["moved"].as_u64().unwrap_or(0);
        }
        if i == 40 {
            moved += cluster.finish_migration()["moved"].as_u64().unwrap_or(0);
        }
        let counter = Arc::clone(&calls);
        let step = Step::new(&format!("step-{i}"), "tool.call", move |_| {
            let mut n = counter.lock().expect("calls");
            *n += 1;
            if n.is_multiple_of(3) {
                Outcome::Failed(r#"{"source":"http","status":503}"#.into())
            } else {
                Outcome::Ok(serde_json::json!({"i": i}))
            }
        })
        .call("tool")
        .target("api.migrating");
        match run.step(step) {
            Ok(report) if report.outcome == "ok" => {}
            other => failed.push(format!("step {i}: {other:?}")),
        }
    }
    assert!(
        failed.is_empty(),
        "{} failed steps:\n{}",
        failed.len(),
        failed.join("\n")
    );
    assert!(moved > 0, "the migration moved no key");
    let events = events.lock().expect("events");
    assert!(
        !events.iter().any(|e| e["event"] == "store_degraded"),
        "the store degraded during the migration"
    );
}

/// Nobody listens: `fallback=none` answers `unavailable` within the bound;
/// the default `fallback=local` serves from the spool and says `store_degraded`.
#[test]
fn an_unreachable_cluster_is_unavailable_or_degrades() {
    let ports: Vec<u16> = (0..2)
        .map(|_| {
            std::net::TcpListener::bind("127.0.0.1:0")
                .expect("bind")
                .local_addr()
                .expect("addr")
                .port()
        })
        .collect();
    let url = format!(
        "redis+cluster://127.0.0.1:{},127.0.0.1:{}",
        ports[0], ports[1]
    );
    let e = RedisStore::open(&format!(
        "{url}?fallback=none&connect_timeout_ms=300&timeout_ms=300"
    ))
    .expect_err("nobody listens");
    assert_eq!(e.kind(), StoreErrorKind::Unavailable, "{e}");
    assert!(e.message().contains("redis+cluster://127.0.0.1:"), "{e}");

    let dir = tempfile::tempdir().expect("temp dir");
    let (events, sink) = collect();
    let opened = store::open_with(
        &format!(
            "{url}?connect_timeout_ms=300&timeout_ms=300&spool={}",
            dir.path().join("spool.sqlite").display()
        ),
        Some(Arc::new(sink)),
    )
    .expect("open with the cluster down");
    let s = opened.store;
    let written = s
        .compare_and_set("k", None, "1", None, 5)
        .expect("served by the spool");
    assert!(matches!(written, store::Cas::Written { .. }), "{written:?}");
    assert_eq!(
        s.get("k", 5).expect("get").map(|v| v.value).as_deref(),
        Some("1")
    );
    let events = events.lock().expect("events");
    assert_eq!(
        events.first().map(|e| e["event"].clone()),
        Some(Value::from("store_degraded")),
        "{events:?}"
    );
}

/// Dead-letter ids on a cluster never repeat either: FLUSHALL on every node,
/// then the stream starts above every id it gave.
#[test]
fn dead_letter_ids_never_repeat_after_the_cluster_loses_its_data() {
    let cluster = RedisCluster::start();
    let s = RedisStore::open(&cluster.url("?prefix=cids&fallback=none")).expect("open");
    let stream = "agent-recovery/dead-letter";
    let before: Vec<u64> = (0..5)
        .map(|n| s.append(stream, &format!("{n}"), 1).expect("append"))
        .collect();
    for port in &cluster.ports {
        let mut c = redis::Client::open(format!("redis://127.0.0.1:{port}"))
            .expect("client")
            .get_connection()
            .expect("connect");
        redis::cmd("FLUSHALL")
            .query::<()>(&mut c)
            .expect("FLUSHALL");
    }
    let after = s.append(stream, "5", 2).expect("append after the loss");
    assert!(
        before.iter().all(|id| *id < after),
        "{after} repeats or precedes {before:?}"
    );
    assert_eq!(
        s.read(stream, 0, 10).expect("read"),
        vec![(after, "5".to_owned())]
    );
}
