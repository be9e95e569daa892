//! A store worker for the cross-process and cross-language tests
//! (`python/tests/test_store_processes.py`): opens `SqliteStore` at the path
//! given, prints `{"ready":true}`, then answers each JSON op read from stdin
//! (the op format of `tests/store/operations.json`, plus `increment`) with
//! one JSON line. The Python and Node workers speak the same protocol.
//!
//! `cargo run --release -p agent-recovery --example store_worker -- PATH`

#[path = "../tests/store_ops/mod.rs"]
mod store_ops;

use std::io::{BufRead, Write};
use std::process::ExitCode;

use agent_recovery::store::{Cas, SqliteStore, Store};
use serde_json::{Value, json};

/// `rounds` times: read `key` (a JSON integer), write it + 1 naming the
/// version read; returns the `[value read, version written]` of each win.
fn increment(store: &SqliteStore, op: &Value) -> Value {
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

fn main() -> ExitCode {
    let Some(path) = std::env::args().nth(1) else {
        eprintln!("usage: store_worker PATH");
        return ExitCode::from(2);
    };
    let store = match SqliteStore::open(&path) {
        Ok(store) => store,
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
            Ok(op) if op["op"] == "increment" => increment(&store, &op),
            Ok(op) => store_ops::apply(&store, &|now| store.purge_expired(now), &op),
            Err(e) => json!({"error": "invalid-argument", "message": format!("not JSON: {e}")}),
        };
        let _ = writeln!(out, "{answer}");
        let _ = out.flush();
    }
    ExitCode::SUCCESS
}
