//! The fleet load figure (docs/stores.md, "A fleet on Redis"): 8 worker
//! processes of the Rust runtime doing steps on one store, for the memory
//! store (the no-store baseline), a SQLite file and one Redis.
//!
//! Each worker builds one Runtime (the real component) on a virtual clock
//! (backoff sleeps take no time, so the figure is the loop plus the store),
//! and runs steps with a no-op operation on its own target, one run per
//! step; every 10th step fails once with a 503 first, so the policy decides
//! a retry. It reports its step latencies; the parent prints steps/s,
//! decisions/s and p50/p99 per-step latency, and the same minus the memory
//! baseline (the store's added latency).
//!
//! Starts its own `redis-server` on a free port of 127.0.0.1 (persistence
//! off) and stops it at the end.
//!
//! `cargo run --release -p agent-recovery --example fleet_load -- [SECONDS] [WORKERS]`
//! (defaults 5 and 8).

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Command, ExitCode, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use agent_recovery::runtime::{Outcome, Runtime, Step, VirtualClock};
use agent_recovery::store;
use serde_json::{Value, json};

/// `worker SPEC SECONDS INDEX`: run steps for SECONDS, print one JSON line.
fn worker(spec: &str, seconds: u64, index: u64) -> Result<(), String> {
    let store: Arc<dyn store::Store> = if spec == "memory" {
        Arc::new(store::MemoryStore::new())
    } else {
        store::open(spec).map_err(|e| e.to_string())?
    };
    let decisions = Arc::new(AtomicU64::new(0));
    let counter = Arc::clone(&decisions);
    let runtime = Runtime::builder()
        .store(store)
        .clock(Arc::new(VirtualClock::new(1_767_225_600_000)))
        .seed(7)
        .on_event(move |e| {
            if e.contains(r#""event":"decision""#) {
                counter.fetch_add(1, Ordering::Relaxed);
            }
        })
        .build()
        .map_err(|e| e.to_string())?;
    let mut latencies_us = Vec::new();
    let start = Instant::now();
    let mut i = 0u64;
    while start.elapsed() < Duration::from_secs(seconds) {
        i += 1;
        let fail_first = i.is_multiple_of(10);
        let t = Instant::now();
        let mut run = runtime
            .run(&format!("w{index}-{i}"))
            .map_err(|e| e.to_string())?;
        let report = run
            .step(
                Step::new("noop", "noop.call", move |call| {
                    if fail_first && call.attempt == 1 {
                        Outcome::Failed(r#"{"source":"http","status":503}"#.into())
                    } else {
                        Outcome::Ok(json!(null))
                    }
                })
                .call("tool")
                // One target per worker: with a shared one, eight workers'
                // failures add up in one breaker and it opens (a fleet
                // behaviour, not what this measures).
                .target(&format!("api.noop-{index}")),
            )
            .map_err(|e| e.to_string())?;
        latencies_us.push(u64::try_from(t.elapsed().as_micros()).unwrap_or(u64::MAX));
        if report.outcome != "ok" {
            return Err(format!("step {i} ended {}", report.outcome));
        }
    }
    let secs = start.elapsed().as_secs_f64();
    println!(
        "{}",
        json!({"steps": i, "secs": secs, "decisions": decisions.load(Ordering::Relaxed), "lat_us": latencies_us})
    );
    Ok(())
}

fn pct(sorted: &[u64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let idx = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted.get(idx).copied().unwrap_or(0) as f64 / 1000.0
}

struct Row {
    name: &'static str,
    steps_s: f64,
    decisions_s: f64,
    p50: f64,
    p99: f64,
}

fn fleet(name: &'static str, spec: &str, seconds: u64, workers: u64) -> Result<Row, String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let children: Vec<_> = (0..workers)
        .map(|k| {
            Command::new(&exe)
                .args(["worker", spec, &seconds.to_string(), &k.to_string()])
                .stdout(Stdio::piped())
                .spawn()
                .map_err(|e| e.to_string())
        })
        .collect::<Result<_, _>>()?;
    let (mut steps, mut decisions, mut secs) = (0u64, 0u64, 0f64);
    let mut lat = Vec::new();
    for child in children {
        let out = child.wait_with_output().map_err(|e| e.to_string())?;
        let line = String::from_utf8_lossy(&out.stdout);
        let v: Value = serde_json::from_str(line.trim())
            .map_err(|e| format!("{name} worker answered {line:?} ({e})"))?;
        steps += v["steps"].as_u64().unwrap_or(0);
        decisions += v["decisions"].as_u64().unwrap_or(0);
        secs = secs.max(v["secs"].as_f64().unwrap_or(0.0));
        lat.extend(
            v["lat_us"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_u64),
        );
    }
    lat.sort_unstable();
    let secs = secs.max(1e-9);
    Ok(Row {
        name,
        steps_s: steps as f64 / secs,
        decisions_s: decisions as f64 / secs,
        p50: pct(&lat, 0.50),
        p99: pct(&lat, 0.99),
    })
}

fn start_redis() -> Result<(std::process::Child, u16), String> {
    let port = TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map_err(|e| e.to_string())?
        .port();
    let child = Command::new("redis-server")
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
        .args(["--save", "", "--appendonly", "no"])
        .stdout(Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot start redis-server ({e}); apt-get install -y redis-server"))?;
    let start = Instant::now();
    loop {
        if let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) {
            let mut buf = [0u8; 7];
            if s.write_all(b"PING\r\n").is_ok() && s.read_exact(&mut buf).is_ok() {
                return Ok((child, port));
            }
        }
        if start.elapsed() > Duration::from_secs(10) {
            return Err("redis-server did not answer PING within 10 s".into());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("worker") {
        let (spec, seconds, index) = (
            args.get(2).cloned().unwrap_or_default(),
            args.get(3).and_then(|s| s.parse().ok()).unwrap_or(5),
            args.get(4).and_then(|s| s.parse().ok()).unwrap_or(0),
        );
        return match worker(&spec, seconds, index) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("worker: {e}");
                ExitCode::FAILURE
            }
        };
    }
    let seconds: u64 = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(5);
    let workers: u64 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(8);
    let dir = std::env::temp_dir().join(format!("fleet-load-{}", std::process::id()));
    if let Err(e) = std::fs::create_dir_all(&dir) {
        eprintln!("{}: {e}", dir.display());
        return ExitCode::FAILURE;
    }
    let (mut redis, port) = match start_redis() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::FAILURE;
        }
    };
    let sqlite = dir.join("store.sqlite").display().to_string();
    let url = format!("redis://127.0.0.1:{port}/0?fallback=none");
    let rows = [
        fleet("memory (baseline)", "memory", seconds, workers),
        fleet("SQLite file", &sqlite, seconds, workers),
        fleet("Redis", &url, seconds, workers),
    ];
    let _ = redis.kill();
    let _ = redis.wait();
    let _ = std::fs::remove_dir_all(&dir);
    let mut ok = Vec::new();
    for r in rows {
        match r {
            Ok(r) => ok.push(r),
            Err(e) => {
                eprintln!("{e}");
                return ExitCode::FAILURE;
            }
        }
    }
    let (b50, b99) = ok.first().map_or((0.0, 0.0), |b| (b.p50, b.p99));
    println!(
        "{workers} workers x {seconds} s, one process each, virtual clock; latency per step in ms"
    );
    println!("| store | steps/s | decisions/s | p50 | p99 | added p50 | added p99 |");
    println!("|---|---:|---:|---:|---:|---:|---:|");
    for r in &ok {
        println!(
            "| {} | {:.0} | {:.0} | {:.2} | {:.2} | {:+.2} | {:+.2} |",
            r.name,
            r.steps_s,
            r.decisions_s,
            r.p50,
            r.p99,
            r.p50 - b50,
            r.p99 - b99
        );
    }
    ExitCode::SUCCESS
}
