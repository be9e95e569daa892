//! Instructions per successful `Runtime` step, for callgrind (load-independent):
//!
//! ```text
//! cargo build --release -p agent-recovery --example step_instructions
//! valgrind --tool=callgrind --callgrind-out-file=A target/release/examples/step_instructions 1000
//! valgrind --tool=callgrind --callgrind-out-file=B target/release/examples/step_instructions 6000
//! python3 scripts/callgrind-diff.py A B 5000      # per step, by object and by function
//! ```
//!
//! Runs N one-step runs (`Runtime::run` then one successful `step`) on a
//! `MemoryStore` and a virtual clock; the difference of two runs divided by
//! the difference of N is the cost of one, whatever the start-up (compiling
//! or loading the component) costs. The twin of
//! `python/bench/step_instructions.py` and `node/bench/step_instructions.mjs`.

use std::sync::Arc;

use agent_recovery::runtime::{Call, Outcome, Runtime, Step, VirtualClock};
use agent_recovery::store::MemoryStore;
use serde_json::json;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let n: u32 = std::env::args()
        .nth(1)
        .ok_or("usage: step_instructions N")?
        .parse()?;
    let runtime = Runtime::builder()
        .clock(Arc::new(VirtualClock::new(1_767_225_600_000)))
        .store(Arc::new(MemoryStore::new()))
        .seed(7)
        .build()?;
    for i in 0..n {
        let mut run = runtime.run(&format!("r{i}"))?;
        let report = run.step(
            Step::new("search", "search", |_: &Call| {
                Outcome::Ok(json!({"hits": 1}))
            })
            .call("tool"),
        )?;
        assert_eq!(report.outcome, "ok");
    }
    Ok(())
}
