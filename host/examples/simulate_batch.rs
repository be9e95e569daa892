//! The Rust side of the cross-runtime loop conformance check.
//!
//! Reads stdin, one JSON array of scenarios per line; runs that line's
//! scenarios in order against one fresh `MemoryStore` (so a later scenario
//! sees an earlier one's breakers, attempt counts and cache), and prints one
//! line per scenario: `ScenarioOutput::to_json` (the component's bytes), or
//! `{"error":"invalid"}` / `{"error":"runtime"}` when the scenario fails. The
//! Node (`node/scripts/scenarios.mjs`) and Python (`python -m
//! agent_recovery.simulate`) drivers speak the same protocol;
//! `tests/conformance/run.py` compares the three byte for byte.

use std::io::{BufRead, Write};
use std::sync::Arc;

use agent_recovery::Loader;
use agent_recovery::runtime::scenario::{self, ScenarioError};
use agent_recovery::store::{MemoryStore, Store};
use serde_json::Value;

fn main() -> std::process::ExitCode {
    let stdin = std::io::stdin();
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    for line in stdin.lock().lines() {
        let Ok(line) = line else {
            return std::process::ExitCode::from(2);
        };
        let scenarios: Vec<Value> = match serde_json::from_str(&line) {
            Ok(v) => v,
            Err(e) => {
                eprintln!("simulate_batch: a line is not a JSON array of scenarios: {e}");
                return std::process::ExitCode::from(2);
            }
        };
        let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
        for s in scenarios {
            let text =
                match scenario::run(&s.to_string(), Arc::clone(&store), None, Loader::default()) {
                    Ok(o) => o.to_json(),
                    Err(ScenarioError::Invalid(_)) => r#"{"error":"invalid"}"#.to_owned(),
                    Err(ScenarioError::Runtime(_)) => r#"{"error":"runtime"}"#.to_owned(),
                };
            if writeln!(out, "{text}").is_err() {
                return std::process::ExitCode::from(1);
            }
        }
    }
    if out.flush().is_err() {
        return std::process::ExitCode::from(1);
    }
    std::process::ExitCode::SUCCESS
}
