//! What `Retry::run` costs per call, a one-step run of the Runtime (a plain
//! loop on the calling thread, the operation, the policy and the sleeper lent
//! to the step), next to the same step on a Runtime built once:
//!
//! - success: the operation succeeds at once;
//! - one failed attempt: a 503 first (a policy decision, a sleep of 0 real ms).
//!
//! `cargo run --release -p agent-recovery --example retry_overhead`
//!
//! CPU time is the whole process's (`/proc/self/stat` utime + stime, every
//! thread counted), in clock ticks, divided by the iterations.

use std::sync::Arc;
use std::time::Instant;

use agent_recovery::Policy;
use agent_recovery::retry::{Attempt, Retry};
use agent_recovery::runtime::{Call, Outcome, Runtime, Step, VirtualClock};

/// The process's CPU time so far, in clock ticks (usually 1/100 s).
fn cpu_ticks() -> Option<u64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // The fields after the command name, which is in parentheses.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some(utime + stime)
}

fn per_iteration(name: &str, n: u32, mut f: impl FnMut(u32)) {
    for i in 0..n / 10 {
        f(u32::MAX - i); // warm up
    }
    let cpu = cpu_ticks();
    let start = Instant::now();
    for i in 0..n {
        f(i);
    }
    let wall = start.elapsed().as_secs_f64() * 1e6 / f64::from(n);
    let on_cpu = match (cpu, cpu_ticks()) {
        // 100 ticks a second on Linux (USER_HZ).
        (Some(a), Some(b)) => format!("{:>7.0} µs CPU", (b - a) as f64 * 1e4 / f64::from(n)),
        _ => "(no /proc/self/stat)".to_owned(),
    };
    println!("{name:<36} {wall:>7.0} µs wall, {on_cpu} per call");
}

const UNAVAILABLE: &str = r#"{"source":"http","status":503}"#;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let policy = Arc::new(Policy::reference()?);
    let n = 1_000;

    per_iteration("Retry::run, success", n, |i| {
        let out = Retry::new(&format!("ok-{i}"), "s", "search", "{}")
            .seed(7)
            .now_ms(0)
            .run(&*policy, |_: &Attempt| Ok::<_, String>(1), |_| {});
        assert!(out.is_ok());
    });
    per_iteration("Retry::run, one failed attempt", n, |i| {
        let out = Retry::new(&format!("fail-{i}"), "s", "search", "{}")
            .seed(7)
            .now_ms(0)
            .run(
                &*policy,
                |a: &Attempt| {
                    if a.number == 1 {
                        Err(UNAVAILABLE.to_owned())
                    } else {
                        Ok(1)
                    }
                },
                |_| {},
            );
        assert!(out.is_ok());
    });

    let runtime = Runtime::builder()
        .policy(policy.clone())
        .clock(Arc::new(VirtualClock::new(0)))
        .seed(7)
        .build()?;
    per_iteration("Runtime built once, success", n, |i| {
        let mut run = runtime.run(&format!("rt-ok-{i}")).expect("run");
        let step = Step::new("s", "search", |_: &Call| Outcome::Ok(1.into())).call("tool");
        assert_eq!(run.step(step).expect("step").outcome, "ok");
    });
    per_iteration("Runtime built once, one failed attempt", n, |i| {
        let mut run = runtime.run(&format!("rt-fail-{i}")).expect("run");
        let step = Step::new("s", "search", |c: &Call| {
            if c.attempt == 1 {
                Outcome::Failed(UNAVAILABLE.to_owned())
            } else {
                Outcome::Ok(1.into())
            }
        })
        .call("tool");
        assert_eq!(run.step(step).expect("step").outcome, "ok");
    });
    Ok(())
}
