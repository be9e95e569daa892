//! Runs the bench's 13-observation mix through `Policy::decide_json` N times,
//! for counting instructions per call with callgrind (the machine is shared,
//! so wall time is noisy; instruction counts are not):
//!
//! ```text
//! cargo build --release -p agent-recovery --example wasm_calls
//! valgrind --tool=callgrind target/release/examples/wasm_calls COMPONENT.wasm CACHE_DIR 0
//! valgrind --tool=callgrind target/release/examples/wasm_calls COMPONENT.wasm CACHE_DIR 200
//! ```
//!
//! (total at 200 - total at 0) / (200 x 13) is the cost of one call, host
//! and guest. The first run fills the compile cache in CACHE_DIR.

use agent_recovery::Policy;
use std::error::Error;
use std::hint::black_box;

// The 13-observation mix every decide_json benchmark uses (one list, three
// readers: this bench, host/examples/wasm_calls.rs, guest/examples/pieces.rs).
include!("../../tests/bench/mix.rs");

const CONTEXT: &str = r#"{"attempt":1,"elapsed_ms":1500,"seed":42}"#;

fn main() -> Result<(), Box<dyn Error>> {
    let mut args = std::env::args().skip(1);
    let (Some(wasm), Some(cache), Some(n)) = (args.next(), args.next(), args.next()) else {
        return Err("usage: wasm_calls COMPONENT.wasm CACHE_DIR MIXES".into());
    };
    let n: u32 = n.parse()?;
    let policy = Policy::loader().cache_dir(cache).file(wasm)?;
    // One warm-up mix (pool, lazy registry), counted in both runs.
    for obs in MIX {
        black_box(policy.decide_json(obs, CONTEXT)?);
    }
    for _ in 0..n {
        for obs in MIX {
            black_box(policy.decide_json(black_box(obs), CONTEXT)?);
        }
    }
    Ok(())
}
