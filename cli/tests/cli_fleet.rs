//! The fleet demo: two `agent-recovery simulate --store redis://...`
//! processes one after the other on a real `redis-server`. The first
//! (examples/fleet/trip.json) trips api.pay's breaker (three 503s); the
//! second (examples/fleet/next.json, 300 ms later) short-circuits its
//! first call to api.pay and falls back to api.pay-b. Without the shared
//! store the second run calls api.pay.

mod common;
// The real redis-server helper of the library tests.
#[path = "../../host/tests/redis_server/mod.rs"]
mod redis_server;

use std::path::PathBuf;

use common::cli::{ok, run};
use redis_server::RedisServer;
use serde_json::Value;

fn scenario(name: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../examples/fleet")
        .join(name)
        .display()
        .to_string()
}

fn simulate(args: &[&str]) -> Value {
    serde_json::from_str(&ok(&run(args, b""))).expect("simulate --json prints JSON")
}

#[test]
fn a_breaker_tripped_by_one_process_short_circuits_the_next() {
    let server = RedisServer::start();
    let dir = tempfile::tempdir().expect("temp dir");
    let url = server.url(&format!(
        "?spool={}",
        dir.path().join("spool.sqlite").display()
    ));
    let (trip, next) = (scenario("trip.json"), scenario("next.json"));
    let a = simulate(&["simulate", &trip, "--json", "--store", &url]);
    assert_eq!(a["outcome"], "dead_lettered", "{a}");
    let b = simulate(&["simulate", &next, "--json", "--store", &url]);
    let first = &b["events"][0];
    assert_eq!(first["event"], "short_circuit", "{b}");
    assert_eq!(first["target"], "api.pay");
    // Opened at t=205 of run A for its first 250 ms window; run B starts 300 ms later.
    assert_eq!(first["delay_ms"], 155);
    assert_eq!(b["outcome"], "completed", "{b}");
    // The dead letter of run A is in Redis: `dlq depth` through the URL sees it.
    let depth = ok(&run(&["dlq", "depth", "--json", "--store", &url], b""));
    assert_eq!(depth.trim(), r#"{"depth":1}"#);

    let alone = simulate(&["simulate", &next, "--json"]);
    assert_eq!(alone["events"][0]["event"], "attempt");
    assert_eq!(alone["events"][0]["target"], "api.pay");
}
