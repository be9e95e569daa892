//! `advance` keeps the state it returned parsed and skips parsing it when
//! the next call passes the same bytes back. That must change nothing a host
//! sees: runs of every kind (successes, retries, fallbacks, an opening
//! breaker, compensations, a restore, a cancel, a fan-out whose branches
//! interleave with the run, a recovered run) are driven with the kept state,
//! every call recorded, and every call is then made again with nothing kept
//! (`keep_state(false)`): the effects and states must be the same bytes.

use std::collections::BTreeMap;

use agent_recovery_policy::__private::keep_state;
use agent_recovery_policy::{advance, decide_json};
use serde_json::{Value, json};

mod common;
use common::Store;

/// One `advance` call and its answer (or error message).
type Call = (String, String, Result<(String, String), String>);

struct Driver {
    now: u64,
    store: Store,
    calls: Vec<Call>,
    /// Outcomes by target, consumed in order; exhausted: "ok".
    script: BTreeMap<String, Vec<Value>>,
    /// Stop (a killed worker) after this many operation calls.
    kill_after: Option<usize>,
    made: usize,
    /// The `result` a compensation call is answered with (none: the script's).
    comp_answer: Option<Value>,
}

impl Driver {
    fn new(script: &[(&str, Vec<Value>)]) -> Self {
        Driver {
            now: 1_767_225_600_000,
            store: Store::default(),
            calls: Vec::new(),
            script: script
                .iter()
                .map(|(t, o)| ((*t).to_owned(), o.clone()))
                .collect(),
            kill_after: None,
            made: 0,
            comp_answer: None,
        }
    }

    fn adv(&mut self, state: &str, input: Value) -> Result<(String, Vec<Value>), String> {
        let input = input.to_string();
        let out = advance(state, &input)
            .map(|a| (a.state, a.effects))
            .map_err(|e| e.message);
        self.calls
            .push((state.to_owned(), input.clone(), out.clone()));
        let (state, effects) = out?;
        Ok((state, serde_json::from_str(&effects).unwrap()))
    }

    /// Drives `input` to the lane's `finish`; returns the final state and
    /// the finish effect (None: killed).
    fn drive(&mut self, mut state: String, mut input: Value) -> (String, Option<Value>) {
        loop {
            let (next, effects) = match self.adv(&state, input) {
                Ok(x) => x,
                Err(e) => panic!("advance refused an input: {e}"),
            };
            state = next;
            let mut answer = None;
            for fx in effects {
                let now = self.now;
                if let Some(store_answer) = self.store.carry(&fx, now) {
                    if store_answer.is_some() {
                        answer = store_answer;
                    }
                    continue;
                }
                match fx["effect"].as_str().unwrap() {
                    "emit" | "append" => {}
                    "call" => {
                        self.made += 1;
                        if self.kill_after == Some(self.made) {
                            return (state, None);
                        }
                        if let (Some(result), "compensation") =
                            (&self.comp_answer, fx["call"].as_str().unwrap())
                        {
                            answer =
                                Some(json!({"input":"attempt","now_ms":self.now,"result":result}));
                            continue;
                        }
                        let target = fx["target"].as_str().unwrap();
                        let next = self
                            .script
                            .get_mut(target)
                            .and_then(|o| (!o.is_empty()).then(|| o.remove(0)));
                        let result = match next {
                            None => json!({"ok": {"target": target}}),
                            Some(obs) => json!({ "failed": obs }),
                        };
                        self.now += 40;
                        answer = Some(json!({"input":"attempt","now_ms":self.now,"result":result}));
                    }
                    "decide" => {
                        let d = decide_json(
                            fx["observation"].as_str().unwrap(),
                            fx["context"].as_str().unwrap(),
                        )
                        .unwrap();
                        answer = Some(json!({"input":"decision","now_ms":now,"decision":d}));
                    }
                    "sleep" => {
                        self.now += fx["ms"].as_u64().unwrap();
                        answer = Some(json!({"input":"slept","now_ms":self.now}));
                    }
                    "restore" => answer = Some(json!({"input":"restored","now_ms":now,"ok":true})),
                    "fork" => {
                        // Branches one after another, each its own lane: the
                        // kept state changes hands at every switch.
                        let mut states = Vec::new();
                        for b in fx["branches"].as_array().unwrap() {
                            let (s, _) = self.drive(
                                b["state"].as_str().unwrap().to_owned(),
                                json!({"input":"step","now_ms":now,"step":b["step"]}),
                            );
                            states.push(s);
                        }
                        answer = Some(json!({"input":"joined","now_ms":self.now,"states":states}));
                    }
                    "finish" => return (state, Some(fx)),
                    other => panic!("unknown effect {other}"),
                }
            }
            input = answer.expect("a batch ends with an effect to answer");
        }
    }

    fn start(&mut self, run_id: &str, config: Value) -> String {
        let input =
            json!({"input":"run","now_ms":self.now,"run_id":run_id,"seed":7,"config":config});
        self.adv("", input).unwrap().0
    }

    fn steps(&mut self, mut state: String, steps: &[Value]) -> String {
        for step in steps {
            let input = json!({"input":"step","now_ms":self.now,"step":step});
            let (next, finish) = self.drive(state, input);
            state = next;
            let Some(finish) = finish else { return state };
            if finish["run_finished"] == json!(true) {
                return state;
            }
        }
        let end = json!({"input":"end","now_ms":self.now});
        self.drive(state, end).0
    }
}

fn http(status: u16) -> Value {
    json!({"source":"http","status":status})
}

fn quota() -> Value {
    json!({"source":"http","status":429,"body":{"error":{"type":"insufficient_quota","code":"insufficient_quota"}}})
}

/// Every kind of run, driven with the kept state; the calls made.
fn every_kind() -> Vec<Call> {
    let mut calls = Vec::new();
    let mut d = Driver::new(&[]);
    let s = d.start("ok", json!({}));
    let steps: Vec<Value> = (0..70)
        .map(|i| json!({"id": format!("s{i}"), "tool":"search","call":"tool","args":{"q":"x","n":i,"f":0.1}}))
        .collect();
    d.steps(s, &steps);
    calls.append(&mut d.calls);

    let mut d = Driver::new(&[
        ("flaky", vec![http(503), http(503)]),
        ("main", vec![quota()]),
    ]);
    let s = d.start("mixed", json!({"retry_quota": {"name": "q"}}));
    d.steps(
        s,
        &[
            json!({"id":"a","tool":"charge","call":"tool","target":"flaky","side_effect":true,"compensation":true,"args":{"amount":10}}),
            json!({"id":"b","tool":"chat","call":"llm","target":"main","fallbacks":["backup"]}),
            json!({"id":"c","tool":"save","call":"tool","checkpoint":true}),
        ],
    );
    calls.append(&mut d.calls);

    let down: Vec<Value> = (0..12).map(|_| http(503)).collect();
    let mut d = Driver::new(&[("down", down), ("bad", vec![http(404)])]);
    let s = d.start("breaker", json!({"attempt_budget": 4}));
    d.steps(
        s,
        &[
            json!({"id":"a","tool":"pay","side_effect":true,"compensation":true}),
            json!({"id":"b","tool":"ship","target":"down","call":"tool"}),
        ],
    );
    calls.append(&mut d.calls);

    let mut d = Driver::new(&[("bad", vec![http(404)])]);
    let s = d.start("fan", json!({}));
    let fan = json!({"input":"fanout","now_ms":d.now,"fanout":{"id":"f","min_results":1,"branches":[
        {"id":"f1","tool":"search","target":"one"},
        {"id":"f2","tool":"search","target":"bad"},
        {"id":"f3","tool":"search","target":"three","side_effect":true,"compensation":true}]}});
    let (s, _) = d.drive(s, fan);
    d.steps(s, &[json!({"id":"after","tool":"t"})]);
    calls.append(&mut d.calls);

    let mut d = Driver::new(&[]);
    let s = d.start("cancel", json!({}));
    let s = d.steps(
        s,
        &[json!({"id":"a","tool":"pay","side_effect":true,"compensation":true})],
    );
    let _ = s;
    let s = d.start("cancel2", json!({}));
    let (s, _) = d.drive(
        s,
        json!({"input":"step","now_ms":d.now,"step":{"id":"a","tool":"pay","side_effect":true,"compensation":true}}),
    );
    d.drive(s, json!({"input":"cancel","now_ms":d.now}));
    calls.append(&mut d.calls);

    let mut d = Driver::new(&[]);
    d.kill_after = Some(2);
    let s = d.start("killed", json!({}));
    d.steps(
        s,
        &[
            json!({"id":"a","tool":"pay","side_effect":true,"compensation":true}),
            json!({"id":"b","tool":"ship"}),
        ],
    );
    let entry = d.store.kv["agent-recovery/journal/killed"].0.clone();
    let journaled: Value = serde_json::from_str(&entry).unwrap();
    d.kill_after = None;
    let state = journaled["state"].to_string();
    d.drive(state, json!({"input":"recover","now_ms":d.now}));
    calls.append(&mut d.calls);
    calls
}

#[test]
fn the_kept_state_answers_as_parsing_it_again() {
    keep_state(true);
    let calls = every_kind();
    assert!(calls.len() > 300, "only {} calls", calls.len());
    keep_state(false);
    for (i, (state, input, kept)) in calls.iter().enumerate() {
        let parsed = advance(state, input)
            .map(|a| (a.state, a.effects))
            .map_err(|e| e.message);
        assert_eq!(
            &parsed, kept,
            "call {i}: input {input}\nstate {state}\nkept (left) and parsed (right) differ"
        );
    }
    keep_state(true);
}

#[test]
fn a_state_other_than_the_kept_one_is_parsed() {
    keep_state(true);
    let run = advance("", r#"{"input":"run","now_ms":0,"run_id":"r","seed":7}"#).unwrap();
    let step = r#"{"input":"step","now_ms":0,"step":{"id":"s1","tool":"search"}}"#;
    let a = advance(&run.state, step).unwrap();
    // The same state with a space after it: other bytes, the same state.
    let spaced = format!("{} ", run.state);
    let b = advance(&spaced, step).unwrap();
    assert_eq!(a, b);
    // An older state than the kept one: its own answer, not the kept one's.
    let other = advance("", r#"{"input":"run","now_ms":5,"run_id":"q","seed":7}"#).unwrap();
    let kept = advance(&run.state, step).unwrap();
    let c = advance(&other.state, step).unwrap();
    assert_ne!(kept.state, c.state);
    assert!(c.state.contains(r#""run_id":"q""#));
    // A state that is not one: refused, whatever was kept.
    let err = advance("{\"v\":1}", step).unwrap_err();
    assert!(err.message.contains("not a state"), "{}", err.message);
}

/// A run whose step `a` (tool `pay`) is compensated when the run is
/// cancelled, each compensation call answered `result`; every call made.
fn compensated(result: Value) -> Vec<Call> {
    let mut d = Driver::new(&[]);
    d.comp_answer = Some(result);
    let s = d.start("comp", json!({}));
    let step = json!({"input":"step","now_ms":d.now,
        "step":{"id":"a","tool":"pay","side_effect":true,"compensation":true}});
    let (s, _) = d.drive(s, step);
    d.drive(s, json!({"input":"cancel","now_ms":d.now}));
    d.calls
}

#[test]
fn the_loop_makes_the_failure_of_a_call_with_nothing_to_call() {
    // The observations the runtimes wrote themselves before the loop made
    // them (docs/runtime.md, the `attempt` input): the same effects and
    // states, byte for byte, as answering `no_compensation` or `unknown_tool`.
    let cases = [
        (
            "no_compensation",
            json!({"failed": {"source": "exception", "type": "agent_recovery.MissingCompensation",
                "message": "no compensation registered for step a"}}),
        ),
        (
            "unknown_tool",
            json!({"failed": {"error": {"code": "runtime.recover.unknown_tool",
                "message": "no operation is registered for tool pay; pass it in the operations of recover or replay",
                "retryable": false}}}),
        ),
    ];
    for (answer, written) in cases {
        let by_loop = compensated(json!(answer));
        let by_host = compensated(written);
        let answered = by_loop
            .iter()
            .filter(|c| c.1.contains(&format!(r#""result":"{answer}""#)))
            .count();
        assert!(answered >= 1, "{answer}: no compensation call");
        let outs = |calls: &[Call]| calls.iter().map(|c| c.2.clone()).collect::<Vec<_>>();
        assert_eq!(outs(&by_loop), outs(&by_host), "{answer}");
        // The compensation failed on the loop's observation (every batch's text).
        let batches: String = outs(&by_loop)
            .into_iter()
            .filter_map(Result::ok)
            .map(|o| o.1)
            .collect();
        let made = if answer == "no_compensation" {
            "agent_recovery.MissingCompensation"
        } else {
            "runtime.recover.unknown_tool"
        };
        assert!(
            batches.contains(r#""event":"compensate""#)
                && batches.contains(r#""state":"failed""#)
                && batches.contains(made),
            "{answer}"
        );
    }
    // An operation call has a compensation to lack only when it is one.
    let run = advance("", r#"{"input":"run","now_ms":0,"run_id":"r","seed":7}"#).unwrap();
    let mut state = advance(
        &run.state,
        r#"{"input":"step","now_ms":0,"step":{"id":"s","tool":"t"}}"#,
    )
    .unwrap()
    .state;
    for input in [
        r#"{"input":"read","now_ms":0,"values":{}}"#,
        r#"{"input":"claimed","now_ms":0,"ok":true}"#,
    ] {
        state = advance(&state, input).unwrap().state;
    }
    let err = advance(
        &state,
        r#"{"input":"attempt","now_ms":0,"result":"no_compensation"}"#,
    )
    .unwrap_err();
    assert!(
        err.message.contains("answers a compensation call"),
        "{}",
        err.message
    );
}
