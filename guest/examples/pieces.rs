//! The pieces of `decide_json` natively, on the host bench's 13-observation mix
//! (a profiling aid; figures are printed, never asserted):
//!
//! ```text
//! cargo build --release -p agent-recovery-policy --example pieces
//! target/release/examples/pieces 20000        # wall time of each piece, per call
//! valgrind --tool=callgrind target/release/examples/pieces 500 full
//! ```
//!
//! With `full` only `decide_json` runs: callgrind's total / (500 x 13) is its
//! instructions per call. The floor of any design that reads and writes JSON
//! text: `scan` only runs serde_json over each observation and context into
//! `IgnoredAny`; `write` only writes each decision's text (decided before the
//! loop, so take the difference with N = 0).
use agent_recovery_policy::*;
use std::hint::black_box;
use std::time::Instant;
// The 13-observation mix every decide_json benchmark uses (one list, three
// readers: this bench, host/examples/wasm_calls.rs, guest/examples/pieces.rs).
include!("../../tests/bench/mix.rs");

const CONTEXT: &str = r#"{"attempt":1,"elapsed_ms":1500,"seed":42}"#;

fn time<F: FnMut()>(name: &str, n: u32, mut f: F) {
    let t = Instant::now();
    for _ in 0..n {
        f();
    }
    let ns = t.elapsed().as_nanos() as f64 / f64::from(n) / MIX.len() as f64;
    println!("{name:>12}: {:.3} us/call", ns / 1000.0);
}
fn main() {
    let n: u32 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(20000);
    let only = std::env::args().nth(2);
    if only.as_deref() == Some("scan") {
        time("scan", n, || {
            for o in MIX {
                let _: serde::de::IgnoredAny = serde_json::from_str(black_box(o)).unwrap();
                let _: serde::de::IgnoredAny = serde_json::from_str(black_box(CONTEXT)).unwrap();
            }
        });
        return;
    }
    if only.as_deref() == Some("write") {
        let ctx = Context::from_json_str(CONTEXT).unwrap();
        let ds: Vec<Decision> = MIX
            .iter()
            .map(|o| decide(Observation::from_json_str(o).unwrap(), ctx.clone()).unwrap())
            .collect();
        time("write", n, || {
            for d in &ds {
                black_box(__private::json_out::decision(black_box(d)).unwrap());
            }
        });
        return;
    }
    if only.as_deref() == Some("full") {
        time("decide_json", n, || {
            for o in MIX {
                black_box(decide_json(black_box(o), CONTEXT).unwrap());
            }
        });
        return;
    }
    time("decide_json", n, || {
        for o in MIX {
            black_box(decide_json(black_box(o), CONTEXT).unwrap());
        }
    });
    time("parse_obs", n, || {
        for o in MIX {
            black_box(Observation::from_json_str(black_box(o)).unwrap());
        }
    });
    time("parse_ctx", n, || {
        for _ in MIX {
            black_box(Context::from_json_str(black_box(CONTEXT)).unwrap());
        }
    });
    let obs: Vec<Observation> = MIX
        .iter()
        .map(|o| Observation::from_json_str(o).unwrap())
        .collect();
    time("classify", n, || {
        for o in &obs {
            black_box(classify(black_box(o)).unwrap());
        }
    });
    let ctx = Context::from_json_str(CONTEXT).unwrap();
    time("decide", n, || {
        for o in &obs {
            black_box(decide(o.clone(), ctx.clone()).unwrap());
        }
    });
    time("clone", n, || {
        for o in &obs {
            black_box((o.clone(), ctx.clone()));
        }
    });
    let ds: Vec<Decision> = obs
        .iter()
        .map(|o| decide(o.clone(), ctx.clone()).unwrap())
        .collect();
    time("serialize", n, || {
        for d in &ds {
            black_box(serde_json::to_string(black_box(d)).unwrap());
        }
    });
}
