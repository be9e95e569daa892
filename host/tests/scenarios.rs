//! The shared scenario vectors (`tests/scenarios/`, README.md there): the
//! component parses and checks every scenario; each invalid one gives its
//! message byte for byte (through `scenario::run`, as
//! `ScenarioError::Invalid`), each valid one its plan (the `bindgen!` types,
//! in the vectors' notation).

use std::sync::Arc;

use agent_recovery::Loader;
use agent_recovery::runtime::scenario::{self, ScenarioError, plan};
use agent_recovery::store::MemoryStore;
use serde_json::{Value, json};

fn vectors(name: &str) -> Vec<Value> {
    let path = format!("{}/../tests/scenarios/{name}", env!("CARGO_MANIFEST_DIR"));
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn outcomes(o: &[plan::Outcome]) -> Value {
    o.iter()
        .map(|o| match o {
            plan::Outcome::Ok => json!("ok"),
            plan::Outcome::Observation(t) => json!({ "observation": t }),
        })
        .collect()
}

fn step(s: &plan::Step) -> Value {
    json!({
        "id": s.id, "tool": s.tool, "call": s.call, "target": s.target, "args": s.args,
        "side_effect": s.side_effect, "idempotent": s.idempotent, "checkpoint": s.checkpoint,
        "outcomes": outcomes(&s.outcomes),
        "fallbacks": s.fallbacks.iter().map(|f| json!({"target": f.target, "outcomes": outcomes(&f.outcomes)})).collect::<Vec<_>>(),
        "compensation": s.compensation.as_deref().map(outcomes),
        "replay_of": s.replay_of,
    })
}

fn notation(p: &plan::Plan) -> Value {
    let steps: Vec<Value> = p
        .steps
        .iter()
        .map(|s| match s {
            plan::PlanStep::Step(s) => json!({ "step": step(s) }),
            plan::PlanStep::Fanout(f) => json!({ "fanout": {
                "id": f.id, "min_results": f.min_results,
                "branches": f.branches.iter().map(step).collect::<Vec<_>>(),
            }}),
        })
        .collect();
    json!({
        "run_id": p.run_id, "seed": p.seed, "now_ms": p.now_ms, "config": p.config,
        "cancel_at_ms": p.cancel_at_ms, "kill_after_calls": p.kill_after_calls,
        "recover": p.recover, "steps": steps,
    })
}

#[test]
fn every_invalid_scenario_gives_its_message() {
    let all = vectors("invalid.json");
    assert!(all.len() >= 30);
    for v in all {
        let text = v["text"].as_str().unwrap();
        let got = scenario::run(text, Arc::new(MemoryStore::new()), None, Loader::default());
        match got {
            Err(ScenarioError::Invalid(m)) => assert_eq!(m, v["message"], "{}", v["name"]),
            Err(e) => panic!("{}: {e}", v["name"]),
            Ok(out) => panic!("{}: ran: {}", v["name"], out.to_json()),
        }
    }
}

#[test]
fn every_valid_scenario_gives_its_plan() {
    let all = vectors("valid.json");
    assert!(all.len() >= 5);
    for v in all {
        let p = scenario::parse(v["text"].as_str().unwrap(), &Loader::default())
            .unwrap_or_else(|e| panic!("{}: {e}", v["name"]));
        // serde_json writes both sides with sorted members: the same text.
        assert_eq!(
            notation(&p).to_string(),
            v["plan"].to_string(),
            "{}",
            v["name"]
        );
    }
}
