//! What a `FallbackStore(Redis, SQLite)` honours while degraded, against a
//! real `redis-server` the test starts, pauses (SIGSTOP), resumes and kills:
//! idempotency entries written while healthy are seen while degraded, the
//! flush's conflict rule (a spooled claim never replaces an entry Redis has,
//! a spooled write does), and the probe and flush run on the background
//! thread, never in a caller's store call, at most once per `probe_ms`
//! while Redis is dead (docs/store.md, "When Redis is down").

mod redis_server;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agent_recovery::runtime::{Clock, Outcome, Runtime, Step, VirtualClock};
use agent_recovery::store::{
    self, Cas, FallbackOptions, FallbackStore, Listeners, RedisStore, SqliteStore, Store,
    fallback::FLUSH_THREAD,
};
use redis_server::RedisServer;
use serde_json::Value;

const T0: u64 = 1_767_225_600_000;
const KEY: &str = "agent-recovery/idem/run-1/charge/abc";
const IN_FLIGHT: &str = r#"{"status":"in_flight","since_ms":1}"#;
const DONE: &str = r#"{"status":"done","result":{"ok":true},"target":"t","at_ms":2}"#;

/// Events with the name of the thread that emitted them.
type Heard = Arc<Mutex<Vec<(Value, Option<String>)>>>;

fn fallback(
    server: &RedisServer,
    prefix: &str,
    timeout_ms: u64,
) -> (FallbackStore, Heard, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("temp dir");
    let url = server.url(&format!(
        "?prefix={prefix}&timeout_ms={timeout_ms}&connect_timeout_ms={timeout_ms}"
    ));
    let redis = Arc::new(RedisStore::open(&url).expect("open redis"));
    let local = Arc::new(SqliteStore::open(dir.path().join("spool.sqlite")).expect("spool"));
    let heard: Heard = Arc::default();
    let sink = Arc::clone(&heard);
    let listeners = Listeners::default();
    listeners.subscribe(Arc::new(move |e: &str| {
        let name = std::thread::current().name().map(str::to_owned);
        sink.lock()
            .expect("events")
            .push((serde_json::from_str(e).expect("event is JSON"), name));
    }));
    let options = FallbackOptions {
        name: prefix.to_owned(),
        probe_ms: 100,
        listeners,
    };
    (FallbackStore::new(redis, local, options), heard, dir)
}

fn direct(server: &RedisServer, prefix: &str) -> RedisStore {
    RedisStore::open(&server.url(&format!("?prefix={prefix}&fallback=none"))).expect("open")
}

/// Polls (calls the store at a later virtual time) until it serves Redis
/// again; a hung flush fails the test, it is not timing.
fn until_restored(s: &FallbackStore, mut now: u64) -> u64 {
    let start = Instant::now();
    loop {
        let _ = s.get("agent-recovery/ping", now);
        if !s.is_degraded() && !s.is_reconnecting() {
            return now;
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "never left degraded mode"
        );
        now += 100;
        std::thread::sleep(Duration::from_millis(5)); // polling for a condition
    }
}

fn put(s: &dyn Store, key: &str, value: &str, now: u64) {
    let current = s.get(key, now).expect("get").map(|v| v.version);
    let cas = s
        .compare_and_set(key, current, value, Some(600_000), now)
        .expect("write");
    assert!(matches!(cas, Cas::Written { .. }), "{cas:?}");
}

#[test]
fn a_key_completed_while_healthy_is_honoured_while_paused_and_while_dead() {
    let mut server = RedisServer::start();
    let (s, _, _dir) = fallback(&server, "seen", 300);
    assert!(matches!(
        s.compare_and_set(KEY, None, IN_FLIGHT, Some(600_000), T0)
            .expect("claim"),
        Cas::Written { .. }
    ));
    put(&s, KEY, DONE, T0 + 1);
    assert!(!s.is_degraded());

    server.signal("STOP");
    let seen = s.get(KEY, T0 + 2).expect("served locally");
    assert!(s.is_degraded(), "a paused Redis degrades the store");
    assert_eq!(seen.map(|v| v.value).as_deref(), Some(DONE));
    // A second claim of the key loses, as it would on Redis.
    let cas = s
        .compare_and_set(KEY, None, IN_FLIGHT, Some(600_000), T0 + 3)
        .expect("claim while degraded");
    assert!(
        matches!(&cas, Cas::Conflict { current: Some(v) } if v.value == DONE),
        "{cas:?}"
    );
    server.signal("CONT");
    until_restored(&s, T0 + 200);

    server.kill();
    let seen = s.get(KEY, T0 + 10_000).expect("served locally");
    assert!(s.is_degraded(), "a dead Redis degrades the store");
    assert_eq!(seen.map(|v| v.value).as_deref(), Some(DONE));
}

#[test]
fn a_completed_entry_wins_over_an_in_flight_claim_when_the_spool_is_flushed() {
    let server = RedisServer::start();
    let (s, _, _dir) = fallback(&server, "rule", 300);
    let redis = direct(&server, "rule");
    let other = "agent-recovery/idem/run-2/charge/def";
    // Claimed through the store (so the spool file has it too).
    assert!(matches!(
        s.compare_and_set(KEY, None, IN_FLIGHT, Some(600_000), T0)
            .expect("claim"),
        Cas::Written { .. }
    ));
    // Completed in Redis by a worker of another machine (not in the spool file).
    put(&redis, other, DONE, T0);

    server.signal("STOP");
    // Completed here while degraded: a write over the claim.
    put(&s, KEY, DONE, T0 + 1);
    assert!(s.is_degraded());
    // Claimed here while degraded: this machine cannot see the other's entry.
    assert!(matches!(
        s.compare_and_set(other, None, IN_FLIGHT, Some(600_000), T0 + 2)
            .expect("claim"),
        Cas::Written { .. }
    ));
    server.signal("CONT");
    until_restored(&s, T0 + 200);

    let got = |k: &str| redis.get(k, T0 + 300).expect("get").map(|v| v.value);
    assert_eq!(
        got(KEY).as_deref(),
        Some(DONE),
        "the completed entry replaced the claim"
    );
    assert_eq!(
        got(other).as_deref(),
        Some(DONE),
        "the spooled claim did not replace the completed entry"
    );
}

#[test]
fn the_probe_and_the_flush_run_on_the_background_thread_not_in_the_call() {
    let server = RedisServer::start();
    // A long timeout: a probe of the paused server stays in progress long
    // after the call that started it has returned.
    let (s, heard, _dir) = fallback(&server, "bg", 2_000);
    s.get("x", T0).expect("healthy");
    server.signal("STOP");
    // (A read degrades it: a write that timed out may still land once the
    // server resumes, which is not what this test is about.)
    s.get("x", T0 + 1).expect("served locally");
    assert!(s.is_degraded());
    s.append("agent-recovery/dead-letter", r#"{"n":1}"#, T0 + 2)
        .expect("served locally");
    // Due to probe: the call starts the probe and is served locally at once,
    // while the probe is still waiting for the paused server.
    let me = std::thread::current().id();
    let seen = s.get(KEY, T0 + 500).expect("served locally");
    assert!(seen.is_none());
    assert!(
        s.is_reconnecting(),
        "the call returned only after the probe ended: it ran in the call"
    );
    assert_eq!(std::thread::current().id(), me);
    // More calls while the probe waits: served locally, none starts another.
    s.append("agent-recovery/dead-letter", r#"{"n":2}"#, T0 + 600)
        .expect("served locally");
    assert!(s.is_reconnecting() && s.is_degraded());
    server.signal("CONT");
    until_restored(&s, T0 + 700);

    let events = heard.lock().expect("events");
    let restored: Vec<_> = events
        .iter()
        .filter(|(e, _)| e["event"] == "store_restored")
        .collect();
    assert_eq!(restored.len(), 1, "{events:?}");
    assert_eq!(restored[0].0["flushed"], 2);
    assert_eq!(
        restored[0].1.as_deref(),
        Some(FLUSH_THREAD),
        "the flush ran on the caller's thread"
    );
    let records = direct(&server, "bg")
        .read("agent-recovery/dead-letter", 0, 10)
        .expect("read");
    assert_eq!(records.len(), 2, "{records:?}");
}

#[test]
fn a_spool_left_by_an_earlier_process_is_served_until_flushed() {
    let mut server = RedisServer::start();
    let port = server.port;
    let dir = tempfile::tempdir().expect("temp dir");
    let url = server.url(&format!(
        "?prefix=left&timeout_ms=300&connect_timeout_ms=300&spool={}",
        dir.path().join("spool.sqlite").display()
    ));
    server.kill();
    {
        let s = store::open(&url).expect("open with Redis down");
        assert!(matches!(
            s.compare_and_set(KEY, None, IN_FLIGHT, Some(600_000), T0)
                .expect("claim"),
            Cas::Written { .. }
        ));
        put(s.as_ref(), KEY, DONE, T0 + 1);
    }
    let server = RedisServer::start_on(port);
    let s = store::open(&url).expect("open");
    // Redis has nothing yet: the first call is served from the spool file.
    assert_eq!(
        s.get(KEY, T0 + 2).expect("get").map(|v| v.value).as_deref(),
        Some(DONE)
    );
    let redis = direct(&server, "left");
    let start = Instant::now();
    let mut now = T0 + 3;
    while redis.get(KEY, now).expect("get").is_none() {
        assert!(start.elapsed() < Duration::from_secs(60), "never flushed");
        let _ = s.get("agent-recovery/ping", now);
        now += 1_000;
        std::thread::sleep(Duration::from_millis(5)); // polling for a condition
    }
    assert_eq!(
        redis
            .get(KEY, now)
            .expect("get")
            .map(|v| v.value)
            .as_deref(),
        Some(DONE)
    );
}

/// A store on the spool file `spool`, probing every `probe_ms`.
fn fallback_on(
    server: &RedisServer,
    prefix: &str,
    spool: &std::path::Path,
    probe_ms: u64,
) -> FallbackStore {
    let url = server.url(&format!(
        "?prefix={prefix}&timeout_ms=300&connect_timeout_ms=300"
    ));
    let redis = Arc::new(RedisStore::open(&url).expect("open redis"));
    let local = Arc::new(SqliteStore::open(spool).expect("spool"));
    let options = FallbackOptions {
        name: prefix.to_owned(),
        probe_ms,
        listeners: Listeners::default(),
    };
    FallbackStore::new(redis, local, options)
}

#[test]
fn a_key_a_degraded_process_completed_in_the_spool_is_honoured_by_one_serving_redis() {
    let server = RedisServer::start();
    let dir = tempfile::tempdir().expect("temp dir");
    let spool = dir.path().join("spool.sqlite");
    // Two processes of one machine on one spool file: `a` probes Redis again
    // only in an hour, `b` every 100 ms.
    let a = fallback_on(&server, "machine", &spool, 3_600_000);
    let b = fallback_on(&server, "machine", &spool, 100);
    b.get("agent-recovery/ping", T0).expect("healthy");
    server.signal("STOP");
    a.get("agent-recovery/ping", T0).expect("served locally");
    assert!(a.is_degraded());
    server.signal("CONT");

    // Redis answers again; `a`, still degraded, claims and completes the key
    // in the spool file only.
    assert!(matches!(
        a.compare_and_set(KEY, None, IN_FLIGHT, Some(600_000), T0 + 1)
            .expect("claim"),
        Cas::Written { .. }
    ));
    put(&a, KEY, DONE, T0 + 2);
    assert!(a.is_degraded() && !b.is_degraded());
    let redis = direct(&server, "machine");
    assert!(redis.get(KEY, T0 + 3).expect("get").is_none());

    // `b` serves Redis, which has no entry yet: it must see the completion,
    // and its claim must lose, as on one store.
    let seen = b.get(KEY, T0 + 3).expect("get");
    assert_eq!(seen.map(|v| v.value).as_deref(), Some(DONE));
    let cas = b
        .compare_and_set(KEY, None, IN_FLIGHT, Some(600_000), T0 + 4)
        .expect("claim");
    assert!(
        matches!(&cas, Cas::Conflict { current: Some(v) } if v.value == DONE),
        "{cas:?}"
    );

    // `b` flushes the spool (its calls start the flush while it is due),
    // then Redis has the completion.
    let start = Instant::now();
    let mut now = T0 + 200;
    while redis.get(KEY, now).expect("get").is_none() || b.is_reconnecting() {
        assert!(start.elapsed() < Duration::from_secs(60), "never flushed");
        let _ = b.get(KEY, now);
        now += 200;
        std::thread::sleep(Duration::from_millis(5)); // polling for a condition
    }
    assert_eq!(
        redis
            .get(KEY, now)
            .expect("get")
            .map(|v| v.value)
            .as_deref(),
        Some(DONE)
    );
    assert_eq!(
        b.get(KEY, now).expect("get").map(|v| v.value).as_deref(),
        Some(DONE)
    );
}

#[test]
fn while_redis_is_dead_probes_are_bounded_by_probe_ms_and_the_spool_reaches_redis_after_a_restart()
{
    let mut server = RedisServer::start();
    let port = server.port;
    let dir = tempfile::tempdir().expect("temp dir");
    let url = server.url("?prefix=probes&timeout_ms=300&connect_timeout_ms=300");
    let redis = Arc::new(RedisStore::open(&url).expect("open redis"));
    let local = Arc::new(SqliteStore::open(dir.path().join("spool.sqlite")).expect("spool"));
    let probe_ms = 1_000;
    let store = Arc::new(FallbackStore::new(
        redis,
        local,
        FallbackOptions {
            name: "probes".to_owned(),
            probe_ms,
            listeners: Listeners::default(),
        },
    ));
    // A virtual clock: the runtime passes its time to every store call, so
    // the probe interval is counted in virtual milliseconds, nothing sleeps.
    let clock = Arc::new(VirtualClock::new(T0));
    let shared: Arc<dyn Store> = store.clone();
    let rt = Runtime::builder()
        .store(shared)
        .clock(clock.clone())
        .build()
        .expect("runtime");
    let step = |run: &str| {
        rt.run(run)
            .expect("run")
            .step(
                Step::new("charge", "payments.charge", |_| {
                    Outcome::Ok(serde_json::json!({"ok": true}))
                })
                .call("tool"),
            )
            .expect("a store outage does not fail the step")
            .outcome
    };
    assert_eq!(step("healthy"), "ok");
    assert!(!store.is_degraded());
    assert_eq!(store.probes(), 0);

    server.kill();
    let start = clock.now_ms();
    for i in 0..40 {
        clock.advance(100);
        assert_eq!(step(&format!("down-{i}")), "ok");
    }
    assert!(store.is_degraded(), "a dead Redis degrades the store");
    let span = clock.now_ms() - start;
    // Every store call of the 40 steps was due to probe if nothing bounded
    // it; at most one probe starts per probe_ms of the calls' now_ms.
    let probes = store.probes();
    assert!(probes >= 1, "never probed the dead Redis in {span} ms");
    assert!(
        probes <= span / probe_ms + 1,
        "{probes} probes in {span} virtual ms with probe_ms {probe_ms}"
    );

    // Restarted empty (no persistence): what reaches Redis is what the
    // spool held, the idempotency entries of the 40 steps run while it was
    // dead.
    let restarted = RedisServer::start_on(port);
    let now = until_restored(&store, clock.now_ms() + probe_ms);
    let direct = direct(&restarted, "probes");
    let keys = direct.keys("agent-recovery/idem/", now).expect("keys");
    assert_eq!(keys.len(), 40, "{keys:?}");
    for key in &keys {
        let value = direct.get(key, now).expect("get").expect("live entry");
        let value: Value = serde_json::from_str(&value.value).expect("JSON");
        assert_eq!(value["status"], "done", "{key}: {value}");
    }
    assert!(store.probes() > probes, "the restart was found by a probe");
}
