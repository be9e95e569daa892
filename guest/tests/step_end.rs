//! A `step` input with `"end": true` (docs/runtime.md, "Inputs"): the run
//! ends when the step finishes, in the same `advance`. Every one-step run
//! here is driven twice on its own store, once as a step then `end` (the
//! `end` sent only when the step ended `ok`, as a host does) and once fused;
//! the effects (events, store writes and deletes, journal entries,
//! dead-letter records, decision-log lines, finishes) must be the same
//! bytes in the same order, and the fused run must take one `advance` less
//! when the step ended `ok`, the same number otherwise.

use std::collections::BTreeMap;

use agent_recovery_policy::{ErrorKind, advance, decide_json};
use serde_json::value::RawValue;
use serde_json::{Value, json};

mod common;
use common::Store;

const T0: u64 = 1_767_225_600_000;

/// What the driver answers besides the store.
#[derive(Clone, Default)]
struct Script {
    /// Outcomes of successive calls by target (`"ok"` or a failure
    /// observation); none left: `{"ok": {"target": ..}}`.
    outcomes: BTreeMap<String, Vec<Value>>,
    /// Answer the first cancellable `sleep` with `cancel`.
    cancel_on_sleep: bool,
}

struct Driver {
    now: u64,
    store: Store,
    script: Script,
    /// Every effect carried out, its bytes as the component wrote them.
    effects: Vec<String>,
    advances: usize,
    state: String,
}

impl Driver {
    fn new(script: &Script) -> Self {
        Driver {
            now: T0,
            store: Store::default(),
            script: script.clone(),
            effects: Vec::new(),
            advances: 0,
            state: String::new(),
        }
    }

    fn start(&mut self, run_id: &str, config: &Value) {
        let r = advance(
            "",
            &json!({"input":"run","now_ms":self.now,"run_id":run_id,"seed":7,"config":config})
                .to_string(),
        )
        .unwrap();
        self.state = r.state;
    }

    /// Feeds `input` and every answer up to a batch that ends with
    /// `finish`; returns the finishes of the batches carried out.
    fn drive(&mut self, mut input: Value) -> Vec<Value> {
        let mut finishes = Vec::new();
        loop {
            let r = advance(&self.state, &input.to_string())
                .unwrap_or_else(|e| panic!("{input}: {:?} {}", e.kind, e.message));
            self.advances += 1;
            self.state = r.state;
            let raw: Vec<Box<RawValue>> = serde_json::from_str(&r.effects).unwrap();
            let mut answer = None;
            let mut last_finish = false;
            for text in raw {
                self.effects.push(text.get().to_owned());
                let fx: Value = serde_json::from_str(text.get()).unwrap();
                last_finish = fx["effect"] == "finish";
                answer = self.carry(&fx);
                if last_finish {
                    finishes.push(fx);
                }
            }
            if last_finish {
                return finishes;
            }
            input = answer.expect("a batch ends with an effect to answer");
        }
    }

    fn carry(&mut self, fx: &Value) -> Option<Value> {
        let now = self.now;
        if let Some(answer) = self.store.carry(fx, now) {
            return answer;
        }
        match fx["effect"].as_str().unwrap() {
            "emit" | "append" | "log" | "finish" => None,
            "call" => {
                let target = fx["target"].as_str().unwrap();
                let next = self
                    .script
                    .outcomes
                    .get_mut(target)
                    .and_then(|o| (!o.is_empty()).then(|| o.remove(0)));
                let result = match next {
                    None => json!({"ok": {"target": target}}),
                    Some(o) if o == "ok" => json!("ok"),
                    Some(obs) => json!({ "failed": obs }),
                };
                self.now += 40;
                Some(json!({"input":"attempt","now_ms":self.now,"result":result}))
            }
            "decide" => {
                let d = decide_json(
                    fx["observation"].as_str().unwrap(),
                    fx["context"].as_str().unwrap(),
                )
                .unwrap();
                Some(json!({"input":"decision","now_ms":now,"decision":d,
                    "policy":{"name":"reference","version":"0","digest":"d"}}))
            }
            "sleep" => {
                if self.script.cancel_on_sleep && fx["cancellable"] == json!(true) {
                    self.script.cancel_on_sleep = false;
                    return Some(json!({"input":"cancel","now_ms":now}));
                }
                self.now += fx["ms"].as_u64().unwrap();
                Some(json!({"input":"slept","now_ms":self.now}))
            }
            "restore" => Some(json!({"input":"restored","now_ms":now,"ok":true})),
            other => panic!("unknown effect {other}"),
        }
    }

    /// One step, then `end` when it ended `ok` (the host's way).
    fn step_then_end(&mut self, step: &Value) {
        let finishes = self.drive(json!({"input":"step","now_ms":self.now,"step":step}));
        assert_eq!(finishes.len(), 1);
        if finishes[0]["outcome"] == "ok" {
            let end = self.drive(json!({"input":"end","now_ms":self.now}));
            assert_eq!(end.len(), 1);
        }
    }

    /// The same step sent with `end`.
    fn fused(&mut self, step: &Value) {
        self.drive(json!({"input":"step","now_ms":self.now,"step":step,"end":true}));
    }
}

/// Runs `runs` one-step runs (the same run id and step each time, so a
/// later run can find the first one's cache) both ways; returns the fused
/// driver, after checking it against the other.
fn both_ways(config: Value, step: Value, script: Script, runs: usize) -> Driver {
    let mut plain = Driver::new(&script);
    let mut fused = Driver::new(&script);
    let mut oks = 0;
    for _ in 0..runs {
        plain.start("r", &config);
        fused.start("r", &config);
        let before = plain.effects.len();
        plain.step_then_end(&step);
        fused.fused(&step);
        let ended_ok = plain.effects[before..]
            .iter()
            .any(|f| f.contains(r#""outcome":"completed""#));
        oks += usize::from(ended_ok);
    }
    assert_eq!(
        fused.effects.join("\n"),
        plain.effects.join("\n"),
        "fused and step-then-end effects differ"
    );
    assert_eq!(
        fused.advances + oks,
        plain.advances,
        "one advance saved per ok run"
    );
    assert_eq!(fused.store.kv, plain.store.kv, "the stores differ");
    fused
}

fn step() -> Value {
    json!({"id":"s1","tool":"search","call":"tool","args":{"q":"acme"}})
}

fn outcomes(list: &[(&str, Vec<Value>)]) -> Script {
    Script {
        outcomes: list
            .iter()
            .map(|(t, o)| ((*t).to_owned(), o.clone()))
            .collect(),
        cancel_on_sleep: false,
    }
}

fn http(status: u16) -> Value {
    json!({"source":"http","status":status})
}

fn kinds(d: &Driver) -> Vec<String> {
    d.effects
        .iter()
        .map(|f| {
            let v: Value = serde_json::from_str(f).unwrap();
            let kind = v["effect"].as_str().unwrap().to_owned();
            match kind.as_str() {
                "finish" => format!("finish:{}", v["outcome"].as_str().unwrap()),
                "emit" => format!("emit:{}", v["event"]["event"].as_str().unwrap()),
                _ => kind,
            }
        })
        .collect()
}

#[test]
fn an_ok_step_ends_the_run_in_the_same_batch() {
    let d = both_ways(json!({}), step(), Script::default(), 1);
    let k = kinds(&d);
    // The step's finish, then the end's: the journal entry deleted, the run completed.
    assert_eq!(
        k[k.len() - 3..],
        [
            "finish:ok".to_owned(),
            "delete".into(),
            "finish:completed".into()
        ]
    );
    assert!(d.store.kv.keys().all(|k| !k.contains("/journal/")));
    let state: Value = serde_json::from_str(&d.state).unwrap();
    assert_eq!(state["phase"], "finished");
    assert_eq!(state["outcome"], "completed");
    assert!(state.get("end_after_step").is_none());
}

#[test]
fn a_failure_then_a_retry_that_succeeds() {
    let script = outcomes(&[("search", vec![http(503), http(503), json!("ok")])]);
    let d = both_ways(json!({}), step(), script, 1);
    let k = kinds(&d);
    assert_eq!(k.iter().filter(|k| *k == "emit:sleep").count(), 2);
    assert_eq!(k.last().unwrap(), "finish:completed");
}

#[test]
fn a_final_failure_ends_the_run_once() {
    let script = outcomes(&[("search", vec![http(400)])]);
    let d = both_ways(json!({}), step(), script, 1);
    let k = kinds(&d);
    assert_eq!(k.last().unwrap(), "finish:failed");
    assert!(!k.contains(&"finish:completed".to_owned()));
}

#[test]
fn dead_lettered_with_the_decision_log_on() {
    let script = outcomes(&[("search", vec![http(503); 10])]);
    let config =
        json!({"decision_log": {}, "breaker": {"failure_threshold": 10, "open_ms": 30000}});
    let d = both_ways(config, step(), script, 1);
    let k = kinds(&d);
    assert!(k.contains(&"append".to_owned()));
    assert!(k.contains(&"log".to_owned()));
    assert_eq!(k.last().unwrap(), "finish:dead_lettered");
}

#[test]
fn a_fallback_and_a_breaker_on_the_way() {
    let mut s = step();
    s["fallbacks"] = json!(["search-b"]);
    s["side_effect"] = json!(true);
    s["compensation"] = json!(true);
    let script = outcomes(&[
        ("search", vec![http(503); 10]),
        ("search-b", vec![http(503), json!("ok")]),
    ]);
    let config = json!({"breaker": {"failure_threshold": 2, "open_ms": 1000}});
    both_ways(config, s, script, 1);
}

#[test]
fn a_second_run_answered_from_the_cache() {
    let d = both_ways(json!({}), step(), Script::default(), 2);
    assert_eq!(kinds(&d).iter().filter(|k| *k == "emit:cached").count(), 1);
}

#[test]
fn cancelled_while_sleeping() {
    let mut script = outcomes(&[("search", vec![http(503)])]);
    script.cancel_on_sleep = true;
    let d = both_ways(json!({}), step(), script, 1);
    assert_eq!(kinds(&d).last().unwrap(), "finish:cancelled");
}

#[test]
fn without_the_journal() {
    let script = outcomes(&[("search", vec![http(503), json!("ok")])]);
    both_ways(json!({"journal": false}), step(), script, 1);
}

#[test]
fn the_state_carries_end_until_the_step_finishes_but_the_journal_does_not() {
    let mut d = Driver::new(&Script::default());
    d.start("r", &json!({}));
    let r = advance(
        &d.state,
        &json!({"input":"step","now_ms":T0,"step":step(),"end":true}).to_string(),
    )
    .unwrap();
    let state: Value = serde_json::from_str(&r.state).unwrap();
    assert_eq!(state["end_after_step"], true);
    assert_eq!(state["phase"], "reading");
    // Up to the call: the journal entry holds the state less `end_after_step`.
    let r = advance(
        &r.state,
        &json!({"input":"read","now_ms":T0,"values":{}}).to_string(),
    )
    .unwrap();
    let r = advance(
        &r.state,
        &json!({"input":"claimed","now_ms":T0,"ok":true}).to_string(),
    )
    .unwrap();
    let fx: Vec<Value> = serde_json::from_str(&r.effects).unwrap();
    let journal = fx
        .iter()
        .find(|f| f["key"] == "agent-recovery/journal/r")
        .unwrap();
    let mut expected: Value = serde_json::from_str(&r.state).unwrap();
    expected.as_object_mut().unwrap().remove("end_after_step");
    assert_eq!(journal["value"]["state"], expected);
    assert!(
        r.effects
            .contains(&r.state.replace(r#","end_after_step":true}"#, "}"))
    );
}

#[test]
fn end_false_is_a_plain_step_and_a_bad_end_is_refused() {
    let mut d = Driver::new(&Script::default());
    d.start("r", &json!({}));
    let plain = advance(
        &d.state,
        &json!({"input":"step","now_ms":T0,"step":step()}).to_string(),
    )
    .unwrap();
    let explicit = advance(
        &d.state,
        &json!({"input":"step","now_ms":T0,"step":step(),"end":false}).to_string(),
    )
    .unwrap();
    assert_eq!(plain, explicit);
    let e = advance(
        &d.state,
        &json!({"input":"step","now_ms":T0,"step":step(),"end":"yes"}).to_string(),
    )
    .unwrap_err();
    assert_eq!(e.kind, ErrorKind::InvalidArgument);
    assert!(e.message.contains("`end` is a boolean"), "{}", e.message);
}

/// A second `end` is refused the same way after a fused end as after an `end`.
#[test]
fn a_second_end_is_refused_as_after_an_end() {
    let mut plain = Driver::new(&Script::default());
    let mut fused = Driver::new(&Script::default());
    plain.start("r", &json!({}));
    fused.start("r", &json!({}));
    plain.step_then_end(&step());
    fused.fused(&step());
    let end = json!({"input":"end","now_ms":T0}).to_string();
    let a = advance(&plain.state, &end).unwrap_err();
    let b = advance(&fused.state, &end).unwrap_err();
    assert_eq!((a.kind, &a.message), (b.kind, &b.message));
    assert!(b.message.contains("the run is over"), "{}", b.message);
    // And after a failed fused step, as after a failed step.
    let script = outcomes(&[("search", vec![http(400)])]);
    let mut plain = Driver::new(&script);
    let mut fused = Driver::new(&script);
    plain.start("r", &json!({}));
    fused.start("r", &json!({}));
    plain.step_then_end(&step());
    fused.fused(&step());
    let a = advance(&plain.state, &end).unwrap_err();
    let b = advance(&fused.state, &end).unwrap_err();
    assert_eq!((a.kind, &a.message), (b.kind, &b.message));
}

#[test]
fn a_branch_refuses_end() {
    let mut d = Driver::new(&Script::default());
    d.start("r", &json!({}));
    let fan = json!({"input":"fanout","now_ms":T0,"fanout":{"id":"f","min_results":1,
        "branches":[{"id":"b1","tool":"t"}]}});
    let r = advance(&d.state, &fan.to_string()).unwrap();
    let fx: Vec<Value> = serde_json::from_str(&r.effects).unwrap();
    let fork = fx.iter().find(|f| f["effect"] == "fork").unwrap();
    let branch = fork["branches"][0]["state"].as_str().unwrap();
    let e = advance(
        branch,
        &json!({"input":"step","now_ms":T0,"step":{"id":"b1","tool":"t"},"end":true}).to_string(),
    )
    .unwrap_err();
    assert_eq!(e.kind, ErrorKind::InvalidArgument);
    assert!(e.message.contains("fan-out branch"), "{}", e.message);
}
