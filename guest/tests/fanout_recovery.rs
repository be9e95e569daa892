//! Durable fan-outs (docs/durability.md §2, "Fan-outs"): each branch journals
//! its own state; `recover` of a `joining` state reads the branches' entries,
//! resumes a branch in flight like a plain step, compensates every branch
//! that ended `ok`, and lists the branches in the record. Driven natively
//! through `advance`, with hand-written answers.

use agent_recovery_policy::advance;
use serde_json::{Map, Value, json};

const T0: u64 = 1_767_225_600_000;

fn adv(state: &str, input: Value) -> (String, Vec<Value>) {
    let r = advance(state, &input.to_string())
        .unwrap_or_else(|e| panic!("{input}: {:?} {}", e.kind, e.message));
    (r.state, serde_json::from_str(&r.effects).unwrap())
}

/// `emit:<event>`, `write:<kind>`, `delete:<kind>`, `call:<call>:<step>:<attempt>`, `finish:<outcome>`.
fn label(fx: &Value) -> String {
    let kind = fx["effect"].as_str().unwrap();
    let store_kind = |k: &Value| {
        let k = k.as_str().unwrap().trim_start_matches("agent-recovery/");
        k.split('/').next().unwrap().to_owned()
    };
    match kind {
        "emit" => format!("emit:{}", fx["event"]["event"].as_str().unwrap()),
        "write" | "delete" => format!("{kind}:{}", store_kind(&fx["key"])),
        "call" => format!(
            "call:{}:{}:{}",
            fx["call"].as_str().unwrap(),
            fx["step"].as_str().unwrap(),
            fx["attempt"]
        ),
        "finish" => format!("finish:{}", fx["outcome"].as_str().unwrap()),
        other => other.to_owned(),
    }
}

fn labels(fx: &[Value]) -> Vec<String> {
    fx.iter().map(label).collect()
}

fn branch(id: &str, compensable: bool) -> Value {
    json!({"id": id, "tool": format!("t.{id}"), "args": {"step": id},
           "side_effect": true, "compensation": compensable})
}

fn ok(state: &str) -> (String, Vec<Value>) {
    adv(state, json!({"input":"attempt","now_ms":T0,"result":"ok"}))
}

/// A branch state driven from its `fork` up to its first call.
fn to_call(state: &str, step: &Value) -> (String, Vec<Value>) {
    let (s, _) = adv(state, json!({"input":"step","now_ms":T0,"step":step}));
    let (s, _) = adv(&s, json!({"input":"read","now_ms":T0,"values":{}}));
    adv(&s, json!({"input":"claimed","now_ms":T0,"ok":true}))
}

/// The branch's journal write of a batch: (key, value).
fn branch_entry(fx: &[Value]) -> (String, Value) {
    let w = fx
        .iter()
        .find(|f| label(f) == "write:branch")
        .unwrap_or_else(|| panic!("no branch journal write in {:?}", labels(fx)));
    (w["key"].as_str().unwrap().to_owned(), w["value"].clone())
}

/// A run whose charge step completed, then a fan-out of `branches`: the
/// parent's `joining` state and each branch's initial state.
fn forked(branches: &[Value], config: Value) -> (String, Vec<String>) {
    let (s, _) = adv(
        "",
        json!({"input":"run","now_ms":T0,"run_id":"r","seed":7,"config":config}),
    );
    let (s, _) = to_call(&s, &branch("charge", true));
    let (s, _) = ok(&s);
    let fan = json!({"input":"fanout","now_ms":T0,"fanout":{"id":"holds","min_results":1,"branches":branches}});
    let (s, fx) = adv(&s, fan);
    let states = fx
        .last()
        .unwrap()
        .as_object()
        .and_then(|f| f["branches"].as_array())
        .unwrap()
        .iter()
        .map(|b| b["state"].as_str().unwrap().to_owned())
        .collect();
    (s, states)
}

#[test]
fn a_branch_in_flight_is_resumed_with_its_key_then_every_branch_is_rolled_back() {
    let steps = [branch("a", true), branch("b", true), branch("c", true)];
    let (parent, states) = forked(&steps, json!({}));
    // a ended ok (its entry says so); b was in its call when the worker died; c never started.
    let (a, _) = to_call(&states[0], &steps[0]);
    let (_, afx) = ok(&a);
    let (b, bfx) = to_call(&states[1], &steps[1]);
    assert_eq!(
        labels(&bfx),
        ["write:attempts", "write:branch", "call:operation:b:1"]
    );
    let journaled_call = bfx.last().unwrap().clone();
    let (ka, va) = branch_entry(&afx);
    let (kb, vb) = branch_entry(&bfx);
    assert_eq!(va["state"]["last"]["outcome"], "ok");
    assert_eq!(vb["state"], serde_json::from_str::<Value>(&b).unwrap());
    assert_ne!(ka, kb);

    let (s, fx) = adv(&parent, json!({"input":"recover","now_ms":T0 + 10}));
    assert_eq!(labels(&fx), ["emit:recover", "read"]);
    let keys = fx[1]["keys"].as_array().unwrap();
    assert_eq!(keys.len(), 3);
    assert_eq!(
        (keys[0].as_str(), keys[1].as_str()),
        (Some(&*ka), Some(&*kb))
    );
    let mut values = Map::new();
    values.insert(ka.clone(), va);
    values.insert(kb.clone(), vb);
    let (s, fx) = adv(&s, json!({"input":"read","now_ms":T0 + 10,"values":values}));
    // b is resumed like a plain step in flight: its idempotency entry first.
    assert_eq!(labels(&fx), ["emit:recover", "read"]);
    assert_eq!(fx[0]["event"]["step"], "b");
    let (s, fx) = adv(&s, json!({"input":"read","now_ms":T0 + 10,"values":{}}));
    assert_eq!(labels(&fx), ["write:branch", "call:operation:b:1"]);
    assert_eq!(fx[1]["key"], journaled_call["key"]);
    assert_eq!(fx[1]["target"], journaled_call["target"]);
    // The resumed branch's entry holds the branch's state, not the run's.
    assert_eq!(fx[0]["key"], kb.as_str());
    assert_eq!(fx[0]["value"]["state"]["branch"], "holds");
    // b ends ok; the fan-out cannot finish: b, a, then charge are compensated.
    let (s, fx) = ok(&s);
    let l = labels(&fx);
    assert!(!l.iter().any(|l| l.starts_with("finish")), "{l:?}");
    assert_eq!(
        l[l.len() - 3..],
        ["emit:compensate", "write:journal", "call:compensation:b:1"]
    );
    let (s, fx) = ok(&s);
    assert_eq!(label(fx.last().unwrap()), "call:compensation:a:1");
    let (s, fx) = ok(&s);
    assert_eq!(label(fx.last().unwrap()), "call:compensation:charge:1");
    let (_, fx) = ok(&s);
    let r = &fx.iter().find(|f| f["effect"] == "append").unwrap()["record"];
    assert_eq!(r["outcome"], "interrupted");
    assert_eq!(r["tool"], "fanout");
    let comps: Vec<&str> = r["compensations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["step"].as_str().unwrap())
        .collect();
    assert_eq!(comps, ["b", "a", "charge"]);
    let outcomes: Vec<(&str, &str)> = r["branches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| (b["id"].as_str().unwrap(), b["outcome"].as_str().unwrap()))
        .collect();
    assert_eq!(outcomes, [("a", "ok"), ("b", "ok"), ("c", "not_started")]);
    assert_eq!(r["branches"][1]["key"], journaled_call["key"]);
    assert_eq!(r["branches"][2]["key"], Value::Null);
    // The run ends: its journal entry, then every branch entry, is deleted.
    let l = labels(&fx);
    let deletes: Vec<&String> = l.iter().filter(|l| l.starts_with("delete")).collect();
    assert_eq!(
        deletes,
        [
            "delete:journal",
            "delete:branch",
            "delete:branch",
            "delete:branch"
        ]
    );
    assert_eq!(label(fx.last().unwrap()), "finish:interrupted");
}

#[test]
fn a_branch_in_flight_without_a_compensation_is_not_called_again() {
    let steps = [branch("a", false)];
    let (parent, states) = forked(&steps, json!({}));
    let (_, afx) = to_call(&states[0], &steps[0]);
    let (ka, va) = branch_entry(&afx);
    let (s, _) = adv(&parent, json!({"input":"recover","now_ms":T0}));
    let (s, fx) = adv(&s, json!({"input":"read","now_ms":T0,"values":{ka: va}}));
    assert_eq!(
        labels(&fx),
        [
            "emit:compensate",
            "write:journal",
            "call:compensation:charge:1"
        ]
    );
    let (_, fx) = ok(&s);
    let r = &fx.iter().find(|f| f["effect"] == "append").unwrap()["record"];
    assert_eq!(r["branches"][0]["outcome"], "interrupted");
}

#[test]
fn without_the_journal_branches_write_nothing() {
    let steps = [branch("a", true)];
    let (_, states) = forked(&steps, json!({"journal": false}));
    let (a, fx) = to_call(&states[0], &steps[0]);
    assert_eq!(labels(&fx), ["write:attempts", "call:operation:a:1"]);
    let (_, fx) = ok(&a);
    assert!(!labels(&fx).iter().any(|l| l == "write:branch"));
}

#[test]
fn a_fan_out_that_joins_keeps_its_branch_entries_until_the_run_ends() {
    let steps = [branch("a", true)];
    let (parent, states) = forked(&steps, json!({}));
    let (a, _) = to_call(&states[0], &steps[0]);
    let (a, _) = ok(&a);
    let (s, fx) = adv(&parent, json!({"input":"joined","now_ms":T0,"states":[a]}));
    assert!(!labels(&fx).iter().any(|l| l.starts_with("delete")));
    assert_eq!(label(fx.last().unwrap()), "finish:ok");
    let (_, fx) = adv(&s, json!({"input":"end","now_ms":T0}));
    assert_eq!(
        labels(&fx),
        ["delete:journal", "delete:branch", "finish:completed"]
    );
}
