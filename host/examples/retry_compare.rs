//! The figures of `scripts/bench.sh` for Rust: agent-recovery's small door
//! next to backon on the same no-op operation, and what a step costs while
//! the Redis store is unreachable.
//!
//! `cargo run --release -p agent-recovery --example retry_compare`
//!
//! - success: the operation succeeds at once;
//! - one failure: it fails once (a 503), then succeeds. Nothing really
//!   sleeps: the door runs on a `VirtualClock`, backon on a zero delay.
//! - degraded step: a one-step run on a Runtime over the default Redis store
//!   (`store::open_with`, the server clock) whose Redis refuses connections,
//!   so every call is served by the local spool file.
//!
//! Each figure is the median of 5 rounds (wall time per call of a round).
//! The last line is JSON, read by scripts/bench.py.

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use agent_recovery::door::{BlockingRecoverable, Door};
use agent_recovery::runtime::{Call, Outcome, Runtime, Step, VirtualClock};
use agent_recovery::store;
use backon::{BlockingRetryable, ConstantBuilder};

const ROUNDS: usize = 5;

/// The median over `ROUNDS` rounds of the wall time per call of `n` calls, µs.
fn median_us(n: u32, mut f: impl FnMut(u32)) -> f64 {
    for i in 0..n / 10 {
        f(u32::MAX - i); // warm up
    }
    let mut rounds: Vec<f64> = (0..ROUNDS)
        .map(|_| {
            let start = Instant::now();
            for i in 0..n {
                f(i);
            }
            start.elapsed().as_secs_f64() * 1e6 / f64::from(n)
        })
        .collect();
    rounds.sort_by(f64::total_cmp);
    rounds[ROUNDS / 2]
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let door = Door::builder()
        .tool("noop")
        .call("tool")
        .clock(Arc::new(VirtualClock::new(0)))
        .seed(7)
        .build()?;
    let ok = |_: Call| Ok::<_, u16>(1);
    let door_ok = median_us(1_000, |_| {
        assert_eq!(ok.recover(&door).call().ok(), Some(1));
    });
    let once = |call: Call| {
        if call.attempt == 1 {
            Err(503u16)
        } else {
            Ok(1)
        }
    };
    let door_retry = median_us(1_000, |_| {
        let out = once
            .recover(&door)
            .observe(|status| format!(r#"{{"source":"http","status":{status}}}"#))
            .call();
        assert_eq!(out.ok(), Some(1));
    });

    let backoff = ConstantBuilder::default()
        .with_delay(Duration::ZERO)
        .with_max_times(3);
    let backon_ok = median_us(100_000, |_| {
        // black_box: so the optimizer cannot fold the call away.
        let out = (|| Ok::<_, u16>(black_box(1)))
            .retry(black_box(backoff))
            .sleep(std::thread::sleep)
            .call();
        assert_eq!(black_box(out), Ok(1));
    });
    let backon_retry = median_us(100_000, |_| {
        let mut attempt = 0;
        let out = (|| {
            attempt += 1;
            if black_box(attempt) == 1 {
                Err(503u16)
            } else {
                Ok(1)
            }
        })
        .retry(black_box(backoff))
        .sleep(std::thread::sleep)
        .call();
        assert_eq!(out, Ok(1));
    });

    // A port nothing listens on: every connection is refused.
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let dir = std::env::temp_dir().join(format!("agent-recovery-bench-{}", std::process::id()));
    let url = format!(
        "redis://127.0.0.1:{port}/0?spool={}",
        dir.join("spool.sqlite").display()
    );
    let runtime = Runtime::builder()
        .opened_store(store::open_with(&url, None)?)
        .seed(7)
        .build()?;
    let mut n = 0u64;
    let degraded_us = median_us(200, |_| {
        n += 1; // a new run each time (a repeated one is an idempotency-cache hit)
        let mut run = runtime.run(&format!("down-{n}")).expect("run");
        let step = Step::new("s", "noop", |_: &Call| Outcome::Ok(1.into())).call("tool");
        assert_eq!(run.step(step).expect("step").outcome, "ok");
    });
    drop(runtime);
    let _ = std::fs::remove_dir_all(&dir);

    println!("door, success                 {door_ok:>9.2} µs");
    println!("door, one failure then success {door_retry:>8.2} µs");
    println!("backon, success               {:>9.1} ns", backon_ok * 1e3);
    println!(
        "backon, one failure then success {:>6.1} ns",
        backon_retry * 1e3
    );
    println!(
        "step on the Redis store, Redis down {:>6.3} ms",
        degraded_us / 1e3
    );
    println!(
        "{{\"door_ok_us\":{door_ok:.2},\"door_retry_us\":{door_retry:.2},\"backon_ok_us\":{backon_ok:.4},\"backon_retry_us\":{backon_retry:.4},\"degraded_step_ms\":{:.3}}}",
        degraded_us / 1e3
    );
    Ok(())
}
