//! The shared scenario vectors (`tests/scenarios/`): every invalid scenario
//! gives its message byte for byte, every valid one its plan.

use agent_recovery_policy::scenario::{self, Outcome, Plan, PlanStep, Step};
use serde_json::{Value, json};

fn vectors(name: &str) -> Vec<Value> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/scenarios/");
    let text = std::fs::read_to_string(format!("{path}{name}")).unwrap();
    serde_json::from_str(&text).unwrap()
}

fn outcomes(o: &[Outcome]) -> Value {
    o.iter()
        .map(|o| match o {
            Outcome::Ok => json!("ok"),
            Outcome::Observation(t) => json!({ "observation": t }),
        })
        .collect()
}

fn step(s: &Step) -> Value {
    json!({
        "id": s.id, "tool": s.tool, "call": s.call, "target": s.target, "args": s.args,
        "side_effect": s.side_effect, "idempotent": s.idempotent, "checkpoint": s.checkpoint,
        "outcomes": outcomes(&s.outcomes),
        "fallbacks": s.fallbacks.iter().map(|f| json!({"target": f.target, "outcomes": outcomes(&f.outcomes)})).collect::<Vec<_>>(),
        "compensation": s.compensation.as_deref().map(outcomes),
        "replay_of": s.replay_of,
    })
}

/// The plan in the vectors' notation (`tests/scenarios/README.md`).
fn plan(p: &Plan) -> Value {
    let steps: Vec<Value> = p
        .steps
        .iter()
        .map(|s| match s {
            PlanStep::Step(s) => json!({ "step": step(s) }),
            PlanStep::Fanout(f) => json!({ "fanout": {
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
fn invalid_scenarios_give_their_messages() {
    let all = vectors("invalid.json");
    assert!(all.len() >= 30);
    for v in all {
        let got = scenario::parse(v["text"].as_str().unwrap());
        let want = v["message"].as_str().unwrap();
        match got {
            Err(m) => assert_eq!(m, want, "{}", v["name"]),
            Ok(p) => panic!("{}: parsed as {p:?}, expected {want}", v["name"]),
        }
    }
}

#[test]
fn valid_scenarios_give_their_plans() {
    let all = vectors("valid.json");
    assert!(all.len() >= 5);
    for v in all {
        let got = scenario::parse(v["text"].as_str().unwrap())
            .unwrap_or_else(|m| panic!("{}: {m}", v["name"]));
        assert_eq!(plan(&got), v["plan"], "{}", v["name"]);
    }
}
