//! The recovery loop's success path natively: one run (journal on, the
//! default configuration) of N steps whose operation succeeds at once, fed
//! the answers a memory store gives (a profiling aid; figures are printed,
//! never asserted):
//!
//! ```text
//! cargo build --release -p agent-recovery-policy --example advance_success
//! target/release/examples/advance_success 20000          # µs per step and per advance
//! valgrind --tool=callgrind --toggle-collect='*runtime::advance*' \
//!     target/release/examples/advance_success 2000
//! ```
//!
//! A step is four `advance` calls (`step`, `read`, `claimed`, `attempt`):
//! callgrind's total over the collected calls / (4 x N) is the instructions
//! of one `advance`. Further arguments: `runs` makes every step a run of its
//! own (+ `run` and `end`: six calls a step); `fused` (with `runs`) sends
//! the step with `"end": true` instead of a separate `end` (five calls a
//! step); `first` (with `runs fused`) sends the step and `end` in the `run`
//! input itself (four calls a step); `stops` answers every `read` with
//! `claim_stops_batch` (the claim goes in the call's batch: one call fewer a
//! step, as every runtime does); `cold` makes every call parse its
//! state (the state kept between calls switched off). `SHOW_CALLS=1` prints
//! each call's input, state and effects sizes.
use agent_recovery_policy::advance;
use serde_json::Value;
use std::hint::black_box;
use std::time::Instant;

fn last_effect(effects: &str) -> Value {
    let mut fx: Vec<Value> = serde_json::from_str(effects).expect("effects are JSON");
    fx.pop().expect("a batch ends with an effect to answer")
}

fn main() {
    let mut args = std::env::args().skip(1);
    let n: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(10_000);
    let modes: Vec<String> = args.collect();
    if modes.iter().any(|m| m == "cold") {
        agent_recovery_policy::__private::keep_state(false);
    }
    // `runs`: every step is a run of its own (`run`, the step, `end`), as the
    // host's runtime_overhead example measures it.
    let runs = modes.iter().any(|m| m == "runs");
    let fused = runs && modes.iter().any(|m| m == "fused");
    let first = fused && modes.iter().any(|m| m == "first");
    let stops = if modes.iter().any(|m| m == "stops") {
        r#","claim_stops_batch":true"#
    } else {
        ""
    };
    let show = std::env::var_os("SHOW_CALLS").is_some();
    let now = 1_767_225_600_000u64;
    let start = |id: &str| {
        advance(
            "",
            &format!(r#"{{"input":"run","now_ms":{now},"run_id":"{id}","seed":7}}"#),
        )
        .expect("run")
        .state
    };
    let mut state = start("bench");
    let mut calls = 0u64;
    let t = Instant::now();
    for i in 0..n {
        if runs && !first {
            state = start(&format!("bench-{i}"));
            calls += 1;
        }
        let end = if fused { r#","end":true"# } else { "" };
        let head = if first {
            state.clear();
            format!(r#"{{"input":"run","now_ms":{now},"run_id":"bench-{i}","seed":7"#)
        } else {
            format!(r#"{{"input":"step","now_ms":{now}"#)
        };
        let mut input = format!(
            r#"{head},"step":{{"id":"s{i}","tool":"search","call":"tool","args":{{"q":"weather","n":{i}}}}}{end}}}"#
        );
        loop {
            let out = advance(&state, &input).expect("advance");
            calls += 1;
            if show {
                println!(
                    "input {} B, state {} B, effects {} B: {}",
                    input.len(),
                    out.state.len(),
                    out.effects.len(),
                    out.effects
                );
            }
            state = out.state;
            let fx = last_effect(&out.effects);
            input = match fx["effect"].as_str().unwrap_or("") {
                "read" => {
                    let values: serde_json::Map<String, Value> = fx["keys"]
                        .as_array()
                        .expect("keys")
                        .iter()
                        .map(|k| (k.as_str().unwrap_or("").to_owned(), Value::Null))
                        .collect();
                    format!(
                        r#"{{"input":"read","now_ms":{now},"values":{},"versions":{{}}{stops}}}"#,
                        Value::Object(values)
                    )
                }
                "claim" => format!(r#"{{"input":"claimed","now_ms":{now},"ok":true}}"#),
                "call" => format!(
                    r#"{{"input":"attempt","now_ms":{now},"result":{{"ok":{{"hits":1}}}}}}"#
                ),
                "finish" => break,
                other => panic!("unexpected effect {other} on the success path"),
            };
        }
        if runs && !fused {
            let end = format!(r#"{{"input":"end","now_ms":{now}}}"#);
            black_box(advance(&state, &end).expect("end"));
            calls += 1;
        }
        black_box(&state);
    }
    if std::env::var_os("SHOW_STATE").is_some() {
        println!("{state}");
    }
    let us = t.elapsed().as_secs_f64() * 1e6;
    println!(
        "{n} steps, {calls} advance calls: {:.2} µs per step, {:.2} µs per advance (state {} bytes)",
        us / n as f64,
        us / calls as f64,
        state.len()
    );
}
