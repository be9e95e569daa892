//! A store worker for the cross-process and cross-language tests
//! (`python/tests/test_store_processes.py`): opens `SqliteStore` at the path
//! given, prints `{"ready":true}`, then answers each JSON op read from stdin
//! (the op format of `tests/store/operations.json`, plus `increment`) with
//! one JSON line. The Python and Node workers speak the same protocol.
//!
//! `bench` (`{"op":"bench","rounds":N}`) times N read-then-compare-and-set
//! increments and N reads of one key and answers the mean microseconds of
//! each (`tests/store/measure.py` prints them for the three languages).
//!
//! PATH may also be a `redis://` URL: the worker then opens a bare
//! `RedisStore` (the Rust cross-process test over Redis, `tests/store_redis.rs`).
//!
//! `cargo run --release -p agent-recovery --example store_worker -- PATH|URL [full|normal]`

#[path = "../tests/store_ops/mod.rs"]
mod store_ops;

use std::io::{BufRead, Write};
use std::process::ExitCode;
use std::time::Instant;

use std::sync::Arc;

use agent_recovery::store::{
    Cas, RedisStore, SqliteOptions, SqliteStore, Store, StoreError, Synchronous,
};
use serde_json::{Value, json};

/// `rounds` times: read `key` (a JSON integer), write it + 1 naming the
/// version read; returns the `[value read, version written]` of each win.
fn increment(store: &dyn Store, op: &Value) -> Value {
    let key = op["key"].as_str().unwrap_or("counter");
    let now = op["now_ms"].as_u64().unwrap_or(0);
    let mut wins = Vec::new();
    for _ in 0..op["rounds"].as_u64().unwrap_or(0) {
        let current = match store.get(key, now) {
            Ok(current) => current,
            Err(e) => return json!({"error": e.kind().as_str(), "message": e.message()}),
        };
        let (n, expected) = match &current {
            Some(v) => (v.value.parse::<u64>().unwrap_or(0), Some(v.version)),
            None => (0, None),
        };
        match store.compare_and_set(key, expected, &(n + 1).to_string(), None, now) {
            Ok(Cas::Written { version }) => wins.push(json!([n, version])),
            Ok(Cas::Conflict { .. }) => {}
            Err(e) => return json!({"error": e.kind().as_str(), "message": e.message()}),
        }
    }
    json!({ "wins": wins })
}

/// Mean microseconds of `rounds` increments (get + compare-and-set) and of
/// `rounds` gets, on the key `bench`.
fn bench(store: &dyn Store, op: &Value) -> Value {
    let rounds = op["rounds"].as_u64().unwrap_or(1).max(1);
    let start = Instant::now();
    for _ in 0..rounds {
        let answer = increment(store, &json!({"key": "bench", "rounds": 1}));
        if answer.get("error").is_some() {
            return answer;
        }
    }
    let cas_us = start.elapsed().as_secs_f64() * 1e6 / rounds as f64;
    let start = Instant::now();
    for _ in 0..rounds {
        if let Err(e) = store.get("bench", 0) {
            return json!({"error": e.kind().as_str(), "message": e.message()});
        }
    }
    let get_us = start.elapsed().as_secs_f64() * 1e6 / rounds as f64;
    json!({"cas_us": cas_us, "get_us": get_us})
}

fn main() -> ExitCode {
    let Some(path) = std::env::args().nth(1) else {
        eprintln!("usage: store_worker PATH");
        return ExitCode::from(2);
    };
    let synchronous = match std::env::args().nth(2).as_deref() {
        None | Some("full") => Synchronous::Full,
        Some("normal") => Synchronous::Normal,
        Some(other) => {
            eprintln!("unknown synchronous {other:?}; pass full or normal");
            return ExitCode::from(2);
        }
    };
    let options = SqliteOptions {
        synchronous,
        ..SqliteOptions::default()
    };
    type Purge = Box<dyn Fn(u64) -> Result<usize, StoreError>>;
    let opened: Result<(Arc<dyn Store>, Purge), StoreError> =
        if path.starts_with("redis://") || path.starts_with("redis+cluster://") {
            RedisStore::open(&path).map(|s| {
                let p = s.clone();
                (
                    Arc::new(s) as Arc<dyn Store>,
                    Box::new(move |now| p.purge_expired(now)) as Purge,
                )
            })
        } else {
            SqliteStore::open_with(&path, &options).map(|s| {
                let s = Arc::new(s);
                let p = Arc::clone(&s);
                (
                    s as Arc<dyn Store>,
                    Box::new(move |now| p.purge_expired(now)) as Purge,
                )
            })
        };
    let (store, purge) = match opened {
        Ok(pair) => pair,
        Err(e) => {
            println!(
                "{}",
                json!({"error": e.kind().as_str(), "message": e.message()})
            );
            return ExitCode::from(1);
        }
    };
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{}", json!({"ready": true}));
    let _ = out.flush();
    for line in std::io::stdin().lock().lines() {
        let Ok(line) = line else { break };
        let answer = match serde_json::from_str::<Value>(&line) {
            Ok(op) if op["op"] == "increment" => increment(store.as_ref(), &op),
            Ok(op) if op["op"] == "bench" => bench(store.as_ref(), &op),
            Ok(op) => store_ops::apply(store.as_ref(), &purge, &op),
            Err(e) => json!({"error": "invalid-argument", "message": format!("not JSON: {e}")}),
        };
        let _ = writeln!(out, "{answer}");
        let _ = out.flush();
    }
    ExitCode::SUCCESS
}
