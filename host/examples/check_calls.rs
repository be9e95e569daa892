//! Instructions per output check, for callgrind: the decisions of the
//! bench's 13-observation mix checked N times by `check_decision_json` (the
//! scan, serde when it is unsure) or by serde alone (the check without the
//! scan):
//!
//! ```text
//! cargo build --release -p agent-recovery --example check_calls
//! valgrind --tool=callgrind target/release/examples/check_calls scan|serde COMPONENT.wasm CACHE_DIR 0
//! valgrind --tool=callgrind target/release/examples/check_calls scan|serde COMPONENT.wasm CACHE_DIR 100
//! ```
//!
//! (total at 100 - total at 0) / (100 x 13) is one check.

use std::error::Error;
use std::hint::black_box;

use agent_recovery::Policy;

// The 13-observation mix every decide_json benchmark uses.
include!("../../tests/bench/mix.rs");

const CONTEXT: &str = r#"{"attempt":1,"elapsed_ms":1500,"seed":42}"#;

fn main() -> Result<(), Box<dyn Error>> {
    let mut args = std::env::args().skip(1);
    let (Some(how), Some(wasm), Some(cache), Some(n)) =
        (args.next(), args.next(), args.next(), args.next())
    else {
        return Err("usage: check_calls scan|serde COMPONENT.wasm CACHE_DIR MIXES".into());
    };
    let n: usize = n.parse()?;
    let policy = Policy::loader().cache_dir(cache).file(wasm)?;
    let decisions = MIX
        .iter()
        .map(|obs| policy.decide_json(obs, CONTEXT))
        .collect::<Result<Vec<_>, _>>()?;
    for _ in 0..n {
        for text in &decisions {
            let text = black_box(text.as_str());
            let ok = match how.as_str() {
                "serde" => agent_recovery::check_decision_json_serde(text).is_ok(),
                _ => agent_recovery::check_decision_json(text).is_ok(),
            };
            assert!(black_box(ok));
        }
    }
    Ok(())
}
