//! The Redis store against a real `redis-server` started by the test
//! (`redis_server/`): the shared store vectors on `RedisStore` and on
//! `FallbackStore(Redis, SQLite)`, six processes sharing one counter and one
//! stream, Redis killed mid-run (spool, events, bounded call time, flush on
//! restart, order), and two runtimes sharing a breaker through Redis.

mod redis_server;
mod store_ops;

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agent_recovery::store::{
    self, FallbackOptions, FallbackStore, RedisStore, SqliteStore, Store, StoreErrorKind,
};
use redis_server::RedisServer;
use serde_json::{Value, json};
use store_ops::{Rebased, run_case, vectors};

/// Every case on its own prefix of one server, so each starts empty.
#[test]
fn redis_store_passes_the_shared_vectors() {
    let server = RedisServer::start();
    let mut failures = Vec::new();
    let cases = vectors();
    assert!(cases.len() >= 10, "too few cases: {}", cases.len());
    for (n, case) in cases.iter().enumerate() {
        let store = RedisStore::open(&server.url(&format!("?prefix=v{n}&fallback=none")))
            .expect("open redis store");
        run_case(
            "redis",
            case,
            &Rebased::new(&store),
            &|now| store.purge_expired(now),
            &mut failures,
        );
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn fallback_over_redis_and_sqlite_passes_the_shared_vectors() {
    let server = RedisServer::start();
    let dir = tempfile::tempdir().expect("temp dir");
    let mut failures = Vec::new();
    for (n, case) in vectors().iter().enumerate() {
        let redis = Arc::new(
            RedisStore::open(&server.url(&format!("?prefix=f{n}"))).expect("open redis store"),
        );
        let local =
            Arc::new(SqliteStore::open(dir.path().join(format!("spool-{n}.db"))).expect("spool"));
        let store = FallbackStore::new(redis.clone(), local, FallbackOptions::default());
        run_case(
            "fallback(redis, sqlite)",
            case,
            &Rebased::new(&store),
            &|now| redis.purge_expired(now),
            &mut failures,
        );
        assert!(!store.is_degraded(), "case {n} degraded with Redis up");
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The `store_worker` example over Redis, driven as a child process.
struct Worker {
    child: std::process::Child,
    out: BufReader<std::process::ChildStdout>,
}

impl Worker {
    fn start(url: &str) -> Self {
        // This test is <target>/<profile>/deps/store_redis-<hash>; the
        // example is <target>/<profile>/examples/store_worker (wherever
        // CARGO_TARGET_DIR put them).
        let exe = std::env::current_exe()
            .expect("the test's own path")
            .parent()
            .and_then(Path::parent)
            .expect("<target>/<profile>")
            .join("examples/store_worker");
        assert!(
            exe.exists(),
            "{} is missing; run `cargo build --release -p agent-recovery --example store_worker`",
            exe.display()
        );
        let mut child = Command::new(exe)
            .arg(url)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("spawn store_worker");
        let out = BufReader::new(child.stdout.take().expect("stdout"));
        let mut w = Worker { child, out };
        assert_eq!(w.answer(), json!({"ready": true}));
        w
    }
    fn send(&mut self, op: &Value) {
        let stdin = self.child.stdin.as_mut().expect("stdin");
        writeln!(stdin, "{op}").expect("write op");
        stdin.flush().expect("flush");
    }
    fn answer(&mut self) -> Value {
        let mut line = String::new();
        self.out.read_line(&mut line).expect("read answer");
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line:?}"))
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        drop(self.child.stdin.take());
        let _ = self.child.wait();
    }
}

/// Six processes: every increment that won read a distinct value and wrote
/// a distinct version, and the counter ends at the number of wins (no lost
/// update); six x 50 appends to one stream get the sequence numbers
/// 1..=300 exactly once, each worker's in its own order.
#[test]
fn six_processes_share_a_counter_and_a_stream_through_redis() {
    let server = RedisServer::start();
    let url = server.url("?prefix=procs");
    let mut workers: Vec<Worker> = (0..6).map(|_| Worker::start(&url)).collect();
    for w in &mut workers {
        w.send(&json!({"op": "increment", "key": "counter", "rounds": 100, "now_ms": 1}));
    }
    let mut read_values = Vec::new();
    let mut versions = Vec::new();
    for w in &mut workers {
        let a = w.answer();
        for win in a["wins"].as_array().unwrap_or_else(|| panic!("{a}")) {
            read_values.push(win[0].as_u64().expect("value"));
            versions.push(win[1].as_u64().expect("version"));
        }
    }
    let wins = read_values.len() as u64;
    assert!(wins >= 100, "only {wins} wins of 600 tries");
    read_values.sort_unstable();
    assert_eq!(read_values, (0..wins).collect::<Vec<_>>(), "a lost update");
    versions.sort_unstable();
    versions.dedup();
    assert_eq!(versions.len() as u64, wins, "a version issued twice");
    let check = RedisStore::open(&url).expect("open");
    let counter = check.get("counter", 1).expect("get").expect("counter");
    assert_eq!(counter.value, wins.to_string());

    for (i, w) in workers.iter_mut().enumerate() {
        for k in 0..50 {
            w.send(&json!({"op": "append", "stream": "s", "record": json!({"w": i, "k": k}).to_string(), "now_ms": 1}));
        }
    }
    let mut seqs = Vec::new();
    for w in &mut workers {
        for _ in 0..50 {
            seqs.push(w.answer().as_u64().expect("seq"));
        }
    }
    seqs.sort_unstable();
    // One number each, no gap: the stream's first (a time floor) and the 299 after it.
    assert!(seqs[0] >= store_ops::TIME_FLOOR, "first {}", seqs[0]);
    assert_eq!(seqs, (seqs[0]..seqs[0] + 300).collect::<Vec<_>>());
    let records = check.read("s", 0, 1000).expect("read");
    assert_eq!(records.len(), 300);
    for i in 0..6 {
        let ks: Vec<u64> = records
            .iter()
            .filter_map(|(_, r)| serde_json::from_str::<Value>(r).ok())
            .filter(|r| r["w"] == i)
            .map(|r| r["k"].as_u64().expect("k"))
            .collect();
        assert_eq!(ks, (0..50).collect::<Vec<_>>(), "worker {i} out of order");
    }
}

/// Section D: SIGKILL Redis mid-sequence. Writes go to the spool, one
/// `store_degraded` is emitted, no call exceeds timeout + connect timeout;
/// Redis restarted (empty: no persistence) on the same port, the next call
/// after `probe_ms` flushes: `store_restored` with `flushed` = what was
/// spooled, and Redis then holds every spooled record and journal entry in
/// order.
#[test]
fn redis_killed_mid_run_spools_and_flushes_on_restart() {
    let mut server = RedisServer::start();
    let dir = tempfile::tempdir().expect("temp dir");
    let spool = dir.path().join("spool.sqlite");
    let query = format!(
        "?prefix=kill&timeout_ms=300&connect_timeout_ms=300&probe_ms=100&spool={}",
        spool.display()
    );
    let url = server.url(&query);
    let events = Arc::new(Mutex::new(Vec::<Value>::new()));
    let sink = Arc::clone(&events);
    let opened = store::open_with(
        &url,
        Some(Arc::new(move |e: &str| {
            sink.lock()
                .expect("events")
                .push(serde_json::from_str(e).expect("event is JSON"));
        })),
    )
    .expect("open");
    let s = opened.store;
    let t0 = 1_767_225_600_000;
    let first = s
        .append("agent-recovery/dead-letter", r#"{"n":0}"#, t0)
        .expect("append");
    assert!(first >= store_ops::TIME_FLOOR, "first id {first}");

    server.kill();
    let bound = Duration::from_millis(300 + 300);
    let mut slowest = Duration::ZERO;
    let mut timed = |f: &mut dyn FnMut()| {
        let start = Instant::now();
        f();
        slowest = slowest.max(start.elapsed());
    };
    let mut spooled = 0;
    for n in 1..=3u64 {
        timed(&mut || {
            s.append(
                "agent-recovery/dead-letter",
                &format!(r#"{{"n":{n}}}"#),
                t0 + n,
            )
            .expect("append while degraded is served locally");
        });
        spooled += 1;
    }
    timed(&mut || {
        let cas = s
            .compare_and_set(
                "agent-recovery/journal/run-1/charge",
                None,
                r#"{"state":"started"}"#,
                None,
                t0 + 10,
            )
            .expect("journal write while degraded");
        assert!(matches!(cas, store::Cas::Written { .. }), "{cas:?}");
    });
    spooled += 1;
    timed(&mut || {
        // Not a journal or dead-letter key: served locally, not spooled.
        s.compare_and_set(
            "agent-recovery/breaker/api",
            None,
            r#"{"state":"open"}"#,
            None,
            t0 + 11,
        )
        .expect("breaker write while degraded");
    });
    timed(&mut || {
        let v = s
            .get("agent-recovery/journal/run-1/charge", t0 + 12)
            .expect("get");
        assert!(v.is_some(), "a degraded read sees what was written locally");
    });
    assert!(
        slowest <= bound,
        "a call took {slowest:?}, more than {bound:?}"
    );
    {
        let ev = events.lock().expect("events");
        assert_eq!(ev.len(), 1, "{ev:?}");
        assert_eq!(ev[0]["event"], "store_degraded");
        assert_eq!(ev[0]["kind"], "unavailable");
        assert_eq!(ev[0]["at_ms"], t0 + 1);
    }

    let server = RedisServer::start_on(server.port);
    // Before probe_ms has passed (by the now_ms passed in) it stays local.
    s.get("x", t0 + 50).expect("get");
    assert_eq!(events.lock().expect("events").len(), 1);
    // Due: the call starts the probe and the flush on the background thread.
    s.get("x", t0 + 200).expect("get after the probe");
    let start = Instant::now();
    while events.lock().expect("events").len() < 2 {
        assert!(start.elapsed() < Duration::from_secs(60), "never restored");
        std::thread::sleep(Duration::from_millis(5)); // polling for a condition
    }
    {
        let ev = events.lock().expect("events");
        assert_eq!(ev.len(), 2, "{ev:?}");
        assert_eq!(ev[1]["event"], "store_restored");
        assert_eq!(ev[1]["flushed"], spooled);
        assert_eq!(ev[1]["at_ms"], t0 + 200);
        assert_eq!(ev[1]["degraded_ms"], 199);
        assert!(!ev[1]["store"].as_str().unwrap_or("").contains("spool="));
    }
    let direct = RedisStore::open(&server.url("?prefix=kill")).expect("open");
    let read = direct
        .read("agent-recovery/dead-letter", 0, 100)
        .expect("read");
    // Redis came back empty: the stream starts again, above every id it gave before.
    assert!(
        read.iter().all(|(id, _)| *id > first),
        "{read:?} vs {first}"
    );
    let records: Vec<String> = read.into_iter().map(|(_, r)| r).collect();
    assert_eq!(records, vec![r#"{"n":1}"#, r#"{"n":2}"#, r#"{"n":3}"#]);
    let journal = direct
        .get("agent-recovery/journal/run-1/charge", t0 + 200)
        .expect("get");
    assert_eq!(
        journal.map(|v| v.value).as_deref(),
        Some(r#"{"state":"started"}"#)
    );
    assert!(
        direct
            .get("agent-recovery/breaker/api", t0 + 200)
            .expect("get")
            .is_none()
    );
    // Healthy again: writes go to Redis.
    s.append("agent-recovery/dead-letter", r#"{"n":4}"#, t0 + 201)
        .expect("append");
    let all = direct
        .read("agent-recovery/dead-letter", 0, 10)
        .expect("read");
    assert_eq!(all.len(), 4);
    assert_eq!(all[3].1, r#"{"n":4}"#);
}

/// A second process opening the same spool flushes what an earlier one left
/// (on its background thread, started by its first call).
#[test]
fn a_spool_left_by_an_earlier_process_is_flushed_at_open() {
    let mut server = RedisServer::start();
    let dir = tempfile::tempdir().expect("temp dir");
    let url = server.url(&format!(
        "?prefix=left&timeout_ms=300&connect_timeout_ms=300&spool={}",
        dir.path().join("spool.sqlite").display()
    ));
    let port = server.port;
    server.kill();
    {
        let s = store::open(&url).expect("open with Redis down");
        s.append("events", r#"{"a":1}"#, 5).expect("served locally");
    }
    let server = RedisServer::start_on(port);
    let s = store::open(&url).expect("open");
    s.get("x", 10).expect("first call");
    let direct = RedisStore::open(&server.url("?prefix=left")).expect("open");
    let start = Instant::now();
    while direct.read("events", 0, 10).expect("read").is_empty() {
        // The background thread flushes it.
        assert!(start.elapsed() < Duration::from_secs(60), "never flushed");
        std::thread::sleep(Duration::from_millis(5)); // polling for a condition
    }
    let read = direct.read("events", 0, 10).expect("read");
    assert_eq!(read.len(), 1, "{read:?}");
    assert_eq!(read[0].1, r#"{"a":1}"#);
}

/// Another program's keys under the prefix (WRONGTYPE) are `corrupt`;
/// another application's metadata is `incompatible`; Redis down is
/// `unavailable`; each message names the URL and ends with a hint.
#[test]
fn errors_have_the_documented_kinds() {
    let mut server = RedisServer::start();
    let mut raw = redis::Client::open(server.url(""))
        .expect("client")
        .get_connection()
        .expect("connect");
    redis::cmd("SET")
        // The entry "x" under prefix wt (tests/store/redis-layout.json's form).
        .arg(format!("{{wt:{}}}:e:x", sha256_8("x")))
        .arg("a string")
        .query::<()>(&mut raw)
        .expect("SET");
    redis::cmd("HSET")
        .arg("{inc}:meta")
        .arg("app")
        .arg("someone-else")
        .arg("schema")
        .arg("1")
        .query::<()>(&mut raw)
        .expect("HSET");
    let s = RedisStore::open(&server.url("?prefix=wt&fallback=none")).expect("open");
    let e = s.get("x", 1).expect_err("a string where a hash belongs");
    assert_eq!(e.kind(), StoreErrorKind::Corrupt, "{e}");
    let e = RedisStore::open(&server.url("?prefix=inc")).expect_err("another app");
    assert_eq!(e.kind(), StoreErrorKind::Incompatible, "{e}");
    assert!(e.message().contains("someone-else"), "{e}");

    let url = server.url("?fallback=none&timeout_ms=200&connect_timeout_ms=200");
    let s = RedisStore::open(&url).expect("open");
    server.kill();
    let e = s.get("x", 1).expect_err("redis is down");
    assert_eq!(e.kind(), StoreErrorKind::Unavailable, "{e}");
    assert!(
        e.message().contains("; ") && e.message().contains("127.0.0.1"),
        "{e}"
    );
    let e = RedisStore::open(&url).expect_err("redis is down");
    assert_eq!(e.kind(), StoreErrorKind::Unavailable, "{e}");
    let e = RedisStore::open("redis://u:secret@127.0.0.1:1/0?nope=1").expect_err("unknown option");
    assert_eq!(e.kind(), StoreErrorKind::InvalidArgument);
    assert!(!e.message().contains("secret"), "{e}");
}

/// The first 8 hex digits of SHA-256 (the layout's tag), for keys written by hand.
fn sha256_8(name: &str) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(name.as_bytes())[..4]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Dead-letter ids never repeat: a stream the server lost (FLUSHALL, as a
/// restart without persistence) starts again above every id it gave.
#[test]
fn dead_letter_ids_never_repeat_after_redis_loses_its_data() {
    let server = RedisServer::start();
    let s = RedisStore::open(&server.url("?prefix=ids&fallback=none")).expect("open");
    let stream = "agent-recovery/dead-letter";
    let before: Vec<u64> = (0..5)
        .map(|n| s.append(stream, &format!("{n}"), 1).expect("append"))
        .collect();
    let mut raw = redis::Client::open(server.url(""))
        .expect("client")
        .get_connection()
        .expect("connect");
    redis::cmd("FLUSHALL")
        .query::<()>(&mut raw)
        .expect("FLUSHALL");
    let after = s.append(stream, "5", 2).expect("append after the loss");
    assert!(
        before.iter().all(|id| *id < after),
        "{after} repeats or precedes {before:?}"
    );
    assert!(
        after <= agent_recovery::store::MAX_INTEGER,
        "{after} exceeds 2^53 - 1"
    );
    assert_eq!(
        s.read(stream, 0, 10).expect("read"),
        vec![(after, "5".to_owned())]
    );
}
