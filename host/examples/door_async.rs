//! What one call through the async door costs, and how many threads a
//! batch of concurrent calls takes.
//!
//! `cargo run --release -p agent-recovery --example door_async`
//!
//! - success: `op.recover(&door).await` whose operation succeeds at once;
//! - one failure: it fails once (a 503), then succeeds;
//! - concurrent: 200 successful calls in flight at once (each waits until
//!   all have started) on one current-thread tokio runtime, and the most
//!   threads the process had meanwhile (`/proc/self/status`).
//!
//! The door runs on a `VirtualClock` (nothing really sleeps) and the memory
//! store, each call awaited on a current-thread tokio runtime. Each figure is
//! the median of 5 rounds (wall time per call of a round).

use std::future::IntoFuture;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use agent_recovery::door::{Door, Recoverable};
use agent_recovery::runtime::{Call, VirtualClock};

const ROUNDS: usize = 5;

/// The median over `ROUNDS` rounds of the wall time per call of `n` calls, µs.
fn median_us(n: u32, mut f: impl FnMut()) -> f64 {
    for _ in 0..n / 10 {
        f(); // warm up
    }
    let mut rounds: Vec<f64> = (0..ROUNDS)
        .map(|_| {
            let start = Instant::now();
            for _ in 0..n {
                f();
            }
            start.elapsed().as_secs_f64() * 1e6 / f64::from(n)
        })
        .collect();
    rounds.sort_by(f64::total_cmp);
    rounds[ROUNDS / 2]
}

/// The process's thread count (Linux), 0 elsewhere.
fn threads() -> usize {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Threads:").map(|n| n.trim().parse().ok()))
                .flatten()
        })
        .unwrap_or(0)
}

fn http(status: &u16) -> String {
    format!(r#"{{"source":"http","status":{status}}}"#)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let tokio = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let door = Door::builder()
        .tool("noop")
        .call("tool")
        .clock(Arc::new(VirtualClock::new(0)))
        .seed(7)
        .build()?;
    let ok = median_us(1_000, || {
        let out = tokio.block_on(
            (|_: Call| async { Ok::<_, u16>(1) })
                .recover(&door)
                .observe(http)
                .into_future(),
        );
        assert_eq!(out.ok(), Some(1));
    });
    let retry = median_us(1_000, || {
        let out = tokio.block_on(
            (|call: Call| async move {
                match call.attempt {
                    1 => Err(503u16),
                    _ => Ok(1),
                }
            })
            .recover(&door)
            .observe(http)
            .into_future(),
        );
        assert_eq!(out.ok(), Some(1));
    });

    let before = threads();
    let most = Arc::new(AtomicUsize::new(before));
    let concurrent = median_us(1, || {
        let started = Arc::new(AtomicUsize::new(0));
        let local = tokio::task::LocalSet::new();
        let handles: Vec<_> = (0..200)
            .map(|_| {
                let (most, started) = (Arc::clone(&most), Arc::clone(&started));
                let call = (move |_: Call| {
                    let (most, started) = (Arc::clone(&most), Arc::clone(&started));
                    async move {
                        started.fetch_add(1, Ordering::Relaxed);
                        while started.load(Ordering::Relaxed) < 200 {
                            tokio::task::yield_now().await;
                        }
                        most.fetch_max(threads(), Ordering::Relaxed);
                        Ok::<_, u16>(1)
                    }
                })
                .recover(&door)
                .observe(http);
                local.spawn_local(call.into_future())
            })
            .collect();
        let outs = tokio.block_on(local.run_until(async {
            let mut outs = Vec::new();
            for h in handles {
                outs.push(h.await.expect("a call's task"));
            }
            outs
        }));
        assert!(outs.iter().all(|o| matches!(o, Ok(1))));
    }) / 200.0;
    let most = most.load(Ordering::Relaxed);

    println!("async door, success                  {ok:>9.2} µs");
    println!("async door, one failure then success {retry:>9.2} µs");
    println!("async door, 200 in flight (per call)  {concurrent:>9.2} µs");
    println!("threads: {before} before, at most {most} during the 200 calls");
    println!(
        "{{\"door_async_ok_us\":{ok:.2},\"door_async_retry_us\":{retry:.2},\"door_async_concurrent_us\":{concurrent:.2},\"threads_before\":{before},\"threads_most\":{most}}}"
    );
    Ok(())
}
