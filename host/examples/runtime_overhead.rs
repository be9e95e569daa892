//! The recovery runtime's overhead per step, on a virtual clock (no sleeping):
//!
//! - success: a run with one step whose operation succeeds at once
//!   (3 calls into the loop component + store reads and writes);
//! - one failed attempt: the same step failing once with a 503 first
//!   (+1 policy decision, +2 loop calls, the breaker write);
//! - cached: the step's key is already recorded as done (nothing is called).
//!
//! `cargo run --release -p agent-recovery --example runtime_overhead`

use std::sync::Arc;
use std::time::Instant;

use agent_recovery::runtime::{Call, Outcome, Runtime, Step, VirtualClock};
use agent_recovery::store::MemoryStore;
use serde_json::{Value, json};

/// This thread's time on a CPU, ns (Linux `schedstat`): unlike wall time, it
/// does not count waiting for a core on a busy machine.
fn cpu_ns() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    text.split_whitespace().next()?.parse().ok()
}

fn per_iteration(name: &str, n: u32, mut f: impl FnMut(u32)) {
    for i in 0..n / 10 {
        f(u32::MAX - i); // warm up (distinct run ids)
    }
    let cpu = cpu_ns();
    let start = Instant::now();
    for i in 0..n {
        f(i);
    }
    let wall = start.elapsed().as_secs_f64() * 1e6 / f64::from(n);
    let on_cpu = match (cpu, cpu_ns()) {
        (Some(a), Some(b)) => format!("{:>8.1} µs on CPU", (b - a) as f64 / 1e3 / f64::from(n)),
        _ => "(no schedstat)".to_owned(),
    };
    println!("{name:<28} {wall:>8.1} µs wall, {on_cpu} per run");
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let clock = Arc::new(VirtualClock::new(1_767_225_600_000));
    let runtime = Runtime::builder()
        .clock(clock)
        .store(Arc::new(MemoryStore::new()))
        .seed(7)
        .build()?;
    let n = 2_000;

    per_iteration("plain closure (baseline)", n, |_| {
        let op = |_: &Call| Outcome::Ok(Value::Null);
        let call = Call {
            kind: "operation".into(),
            step: "s".into(),
            target: "t".into(),
            key: String::new(),
            attempt: 1,
            timeout_ms: None,
        };
        std::hint::black_box(op(&call));
    });

    per_iteration("success, one step", n, |i| {
        let mut run = runtime.run(&format!("ok-{i}")).expect("run");
        let r = run
            .step(
                Step::new("search", "search", |_: &Call| {
                    Outcome::Ok(json!({"hits": 1}))
                })
                .call("tool"),
            )
            .expect("step");
        assert_eq!(r.outcome, "ok");
    });

    per_iteration("one failed attempt, then ok", n, |i| {
        let mut run = runtime.run(&format!("fail-{i}")).expect("run");
        let r = run
            .step(
                Step::new("search", "search", |c: &Call| {
                    if c.attempt == 1 {
                        Outcome::Failed(r#"{"source":"http","status":503}"#.into())
                    } else {
                        Outcome::Ok(Value::Null)
                    }
                })
                .call("tool")
                .target(&format!("t{}", i % 64)),
            )
            .expect("step");
        assert_eq!(r.outcome, "ok");
    });

    let mut first = runtime.run("cached")?;
    first.step(Step::new("search", "search", |_: &Call| {
        Outcome::Ok(Value::Null)
    }))?;
    drop(first);
    per_iteration("cached (duplicate key)", n, |_| {
        let mut run = runtime.run("cached").expect("run");
        let r = run
            .step(Step::new("search", "search", |_: &Call| -> Outcome {
                unreachable!("cached")
            }))
            .expect("step");
        assert_eq!(r.outcome, "ok");
    });
    Ok(())
}
