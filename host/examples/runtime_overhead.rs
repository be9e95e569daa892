//! The recovery runtime's overhead per step, on a virtual clock (no sleeping):
//!
//! - success: a run with one step whose operation succeeds at once
//!   (3 calls into the loop component + store reads and writes);
//! - one failed attempt: the same step failing once with a 503 first
//!   (+1 policy decision, +2 loop calls, the breaker write);
//! - cached: the step's key is already recorded as done (nothing is called);
//! - the success and failed-attempt rows again with the journal off (run
//!   configuration `journal: false`): the difference is the journal's cost;
//! - telemetry: the failed-attempt step on two runtimes with `Telemetry::off()`
//!   and one with the default `Telemetry::global()` and no provider installed
//!   (the OpenTelemetry no-op providers), interleaved step by step (6 000 of
//!   each, the order rotating, distinct run ids). The no-op minus off
//!   difference is the cost of telemetry when nobody configured an exporter;
//!   the off minus off difference is what the machine cannot resolve.
//!
//! `cargo run --release -p agent-recovery --example runtime_overhead`

use std::sync::Arc;
use std::time::Instant;

use agent_recovery::runtime::{Call, Outcome, Runtime, Step, Telemetry, VirtualClock};
use agent_recovery::store::MemoryStore;
use serde_json::{Value, json};

/// This thread's time on a CPU, ns (Linux `schedstat`): unlike wall time, it
/// does not count waiting for a core on a busy machine.
fn cpu_ns() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    text.split_whitespace().next()?.parse().ok()
}

/// Runs `f` `n` times; prints and returns µs per run (on CPU when known, else wall).
fn per_iteration(name: &str, n: u32, mut f: impl FnMut(u32)) -> f64 {
    for i in 0..n / 10 {
        f(u32::MAX - i); // warm up (distinct run ids)
    }
    let cpu = cpu_ns();
    let start = Instant::now();
    for i in 0..n {
        f(i);
    }
    let wall = start.elapsed().as_secs_f64() * 1e6 / f64::from(n);
    let cpu_us = match (cpu, cpu_ns()) {
        (Some(a), Some(b)) => Some((b - a) as f64 / 1e3 / f64::from(n)),
        _ => None,
    };
    let on_cpu = match cpu_us {
        Some(us) => format!("{us:>8.1} µs on CPU"),
        None => "(no schedstat)".to_owned(),
    };
    println!("{name:<28} {wall:>8.1} µs wall, {on_cpu} per run");
    cpu_us.unwrap_or(wall)
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

    // One step whose first attempt fails (a 503), then succeeds; targets
    // spread over 64 breakers so none opens.
    let fail_step = |rt: &Runtime, tag: &str, i: u32| {
        let mut run = rt.run(&format!("{tag}-{i}")).expect("run");
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
    };
    per_iteration("one failed attempt, then ok", n, |i| {
        fail_step(&runtime, "fail", i)
    });

    // The same two rows with the journal off (run configuration `journal:
    // false`): the difference is the journal's cost (its write before every
    // call, and the state it carries).
    let unjournaled = Runtime::builder()
        .clock(Arc::new(VirtualClock::new(1_767_225_600_000)))
        .store(Arc::new(MemoryStore::new()))
        .seed(7)
        .config_json(json!({"journal": false}))
        .build()?;
    per_iteration("success, journal off", n, |i| {
        let mut run = unjournaled.run(&format!("ok-{i}")).expect("run");
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
    per_iteration("one failed, then ok, j. off", n, |i| {
        fail_step(&unjournaled, "fail", i)
    });

    // Telemetry off vs. the no-op global providers (the default).
    let build = |telemetry: Option<Telemetry>| {
        let b = Runtime::builder()
            .clock(Arc::new(VirtualClock::new(1_767_225_600_000)))
            .store(Arc::new(MemoryStore::new()))
            .seed(7);
        match telemetry {
            Some(t) => b.telemetry(t).build(),
            None => b.build(),
        }
    };
    // Two `off` runtimes (the A/A difference: what this machine cannot
    // resolve) and one with the default no-op global providers, interleaved
    // step by step with the order rotating, each step timed on CPU alone.
    let sides = [
        ("telemetry off (A)", build(Some(Telemetry::off()))?),
        ("telemetry off (A')", build(Some(Telemetry::off()))?),
        ("no-op global (default)", build(None)?),
    ];
    let timed = |rt: &Runtime, tag: &str, i: u32| -> f64 {
        let (t0, w0) = (cpu_ns(), Instant::now());
        fail_step(rt, tag, i);
        match (t0, cpu_ns()) {
            (Some(x), Some(y)) => (y - x) as f64 / 1e3,
            _ => w0.elapsed().as_secs_f64() * 1e6,
        }
    };
    for i in 0..n / 10 {
        for (k, (_, rt)) in sides.iter().enumerate() {
            fail_step(rt, &format!("warm{k}"), i);
        }
    }
    let rounds = 3 * n;
    let mut sum = [0.0f64; 3];
    for i in 0..rounds {
        for j in 0..3 {
            let k = (j + i as usize) % 3;
            sum[k] += timed(&sides[k].1, &format!("s{k}"), i);
        }
    }
    let mean: Vec<f64> = sum.iter().map(|s| s / f64::from(rounds)).collect();
    for ((name, _), m) in sides.iter().zip(&mean) {
        println!("{name:<28} {m:>8.1} µs on CPU per run");
    }
    println!(
        "{:<28} {:>+8.1} µs per step (A/A: {:+.1} µs)",
        "no-op global minus off",
        mean[2] - mean[0],
        mean[1] - mean[0]
    );

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
