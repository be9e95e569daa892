//! A `run` input that carries the run's first step (`step`, and `end`
//! optionally; docs/runtime.md, "Inputs"): exactly `run`, then that `step`
//! input at the same `now_ms`, in one `advance`. Each case here feeds both
//! forms and compares the new state and the effects byte for byte; the
//! drives carry on to the run's end (a store answering every effect) and
//! compare every effect, one `advance` fewer for the fused form.

use agent_recovery_policy::typed::{self, InputKind};
use agent_recovery_policy::{Advanced, ErrorKind, advance};
use serde_json::{Value, json};

mod common;
use common::Store;

const T0: u64 = 1_767_225_600_000;

fn run_input(config: &Value) -> Value {
    json!({"input":"run","now_ms":T0,"run_id":"r1","seed":7,"config":config})
}

/// The `run` input carrying `step` (and `end` when given).
fn fused_input(config: &Value, step: &Value, end: Option<bool>) -> Value {
    let mut i = run_input(config);
    i["step"] = step.clone();
    if let Some(end) = end {
        i["end"] = json!(end);
    }
    i
}

fn step_input(step: &Value, end: Option<bool>) -> Value {
    let mut i = json!({"input":"step","now_ms":T0,"step":step});
    if let Some(end) = end {
        i["end"] = json!(end);
    }
    i
}

/// `run` then the `step` input: the second call's answer.
fn two_calls(config: &Value, step: &Value, end: Option<bool>) -> Advanced {
    let run = advance("", &run_input(config).to_string()).unwrap();
    advance(&run.state, &step_input(step, end).to_string()).unwrap()
}

fn fused(config: &Value, step: &Value, end: Option<bool>) -> Advanced {
    advance("", &fused_input(config, step, end).to_string()).unwrap()
}

fn steps() -> Vec<Value> {
    vec![
        json!({"id":"s1","tool":"search"}),
        json!({"id":"s1","tool":"search","call":"tool","args":{"q":"acme","n":[1,2.5,null]}}),
        json!({"id":"pay","tool":"payments.charge","call":"tool","target":"psp",
               "fallbacks":["psp-b","psp-c"],"side_effect":true,"compensation":true,
               "checkpoint":true,"idempotent":false,"args":{"cents":1200}}),
        json!({"id":"ask","tool":"llm.chat","call":"llm","idempotent":true}),
        json!({"id":"again","tool":"search","replay_of":{"key":"ab".repeat(32),"n":2,"id":"17-0"}}),
    ]
}

fn configs() -> Vec<Value> {
    vec![
        json!({}),
        json!({"journal": false}),
        json!({"decision_log": {}, "deadline_ms": 5000, "breaker": {"failure_threshold": 2}}),
    ]
}

#[test]
fn the_first_batch_is_the_run_then_the_step_byte_for_byte() {
    let mut cases = 0;
    for keep in [true, false] {
        agent_recovery_policy::__private::keep_state(keep);
        for config in configs() {
            for step in steps() {
                for end in [None, Some(false), Some(true)] {
                    let a = two_calls(&config, &step, end);
                    let b = fused(&config, &step, end);
                    assert_eq!(b, a, "{config} {step} end {end:?}");
                    cases += 1;
                }
            }
        }
    }
    agent_recovery_policy::__private::keep_state(true);
    assert_eq!(cases, 2 * 3 * 5 * 3);
}

/// Drives a run to its end on its own store; counts the `advance` calls
/// and keeps every effect's bytes.
struct Driver {
    store: Store,
    now: u64,
    outcomes: Vec<Value>,
    effects: Vec<String>,
    advances: usize,
}

impl Driver {
    fn new(outcomes: &[Value]) -> Self {
        Driver {
            store: Store::default(),
            now: T0,
            outcomes: outcomes.to_vec(),
            effects: Vec::new(),
            advances: 0,
        }
    }

    /// Feeds `input` and every answer until a batch ends with `finish`;
    /// returns the state and the last finish's outcome.
    fn drive(&mut self, mut state: String, mut input: Value) -> (String, String) {
        loop {
            let r = advance(&state, &input.to_string()).unwrap();
            self.advances += 1;
            state = r.state;
            let fx: Vec<Value> = serde_json::from_str(&r.effects).unwrap();
            self.effects.extend(fx.iter().map(Value::to_string));
            let last = fx.last().unwrap().clone();
            let mut answer = None;
            for f in &fx {
                answer = self.carry(f);
            }
            if last["effect"] == "finish" {
                return (state, last["outcome"].as_str().unwrap().to_owned());
            }
            input = answer.expect("a batch ends with an effect to answer");
        }
    }

    fn carry(&mut self, fx: &Value) -> Option<Value> {
        if let Some(answer) = self.store.carry(fx, self.now) {
            return answer;
        }
        common::answer(fx, &mut self.now, &mut self.outcomes)
    }

    /// A run of `step` (sent with `end`), ended when it ended `ok` and
    /// `end` was not sent; `fuse`: the `run` input carries the step.
    fn run(&mut self, config: &Value, step: &Value, end: bool, fuse: bool) -> String {
        let (state, outcome) = if fuse {
            self.drive(String::new(), fused_input(config, step, Some(end)))
        } else {
            let run = advance("", &run_input(config).to_string()).unwrap();
            self.advances += 1;
            self.drive(run.state, step_input(step, Some(end)))
        };
        if outcome == "ok" && !end {
            let (_, done) = self.drive(state, json!({"input":"end","now_ms":self.now}));
            return done;
        }
        outcome
    }
}

fn http(status: u16) -> Value {
    json!({"source":"http","status":status})
}

#[test]
fn whole_runs_give_the_same_effects_with_one_advance_fewer() {
    // The expected outcome where it does not depend on the configuration.
    let cases = [
        (vec![], Some("completed")),
        (vec![http(503), http(503), json!("ok")], Some("completed")),
        (vec![http(400)], Some("failed")),
        (vec![http(503); 10], None),
    ];
    for config in configs() {
        for step in steps() {
            for (outcomes, want) in &cases {
                for end in [false, true] {
                    let mut plain = Driver::new(outcomes);
                    let mut one = Driver::new(outcomes);
                    // Twice on one store: the second run meets the first's
                    // breaker, attempt counts and idempotency cache.
                    for _ in 0..2 {
                        let a = plain.run(&config, &step, end, false);
                        let b = one.run(&config, &step, end, true);
                        assert_eq!(a, b);
                    }
                    let first = plain.effects.len();
                    assert!(first > 0);
                    assert_eq!(one.effects, plain.effects, "{config} {step} {outcomes:?}");
                    assert_eq!(one.store.kv, plain.store.kv);
                    assert_eq!(one.advances + 2, plain.advances);
                    let mut again = Driver::new(outcomes);
                    let got = again.run(&config, &step, end, true);
                    if let Some(want) = want
                        && step["fallbacks"].is_null()
                        && config["breaker"].is_null()
                    {
                        assert_eq!(got, *want, "{config} {step}");
                    }
                }
            }
        }
    }
}

/// The `run` input sent late, with the first step: `started_ms` is when
/// the run started, `now_ms` when the step starts.
fn late_input(config: &Value, step: &Value, end: Option<bool>, later: u64) -> Value {
    let mut i = fused_input(config, step, end);
    i["now_ms"] = json!(T0 + later);
    i["started_ms"] = json!(T0);
    i
}

#[test]
fn a_run_sent_late_is_the_run_at_its_start_then_the_step() {
    // `run` at T0, then the step `later` ms on: the deadline, the retry
    // budget and every event's `t_ms` count from T0 in both forms.
    let mut cases = 0;
    for config in configs() {
        for step in steps() {
            for end in [None, Some(true)] {
                for later in [0, 1, 4_999, 6_000] {
                    let run = advance("", &run_input(&config).to_string()).unwrap();
                    let mut second = step_input(&step, end);
                    second["now_ms"] = json!(T0 + later);
                    let a = advance(&run.state, &second.to_string()).unwrap();
                    let b =
                        advance("", &late_input(&config, &step, end, later).to_string()).unwrap();
                    assert_eq!(b, a, "{config} {step} end {end:?} later {later}");
                    cases += 1;
                }
            }
        }
    }
    assert_eq!(cases, 3 * 5 * 2 * 4);
    // With a 5 s deadline, a step that fails once 6 s after the start finds
    // it spent, as the two calls do; sent at the start, it is retried.
    let config = json!({"deadline_ms": 5000});
    let outcomes = [http(503), json!("ok")];
    let mut late = Driver::new(&outcomes);
    late.now = T0 + 6_000;
    let (_, late_outcome) =
        late.drive(String::new(), late_input(&config, &steps()[0], None, 6_000));
    let mut two = Driver::new(&outcomes);
    let run = advance("", &run_input(&config).to_string()).unwrap();
    two.now = T0 + 6_000;
    let mut second = step_input(&steps()[0], None);
    second["now_ms"] = json!(T0 + 6_000);
    let (_, two_outcome) = two.drive(run.state, second);
    assert_eq!((&late_outcome, &late.effects), (&two_outcome, &two.effects));
    let mut fresh = Driver::new(&outcomes);
    let (_, fresh_outcome) = fresh.drive(String::new(), fused_input(&config, &steps()[0], None));
    assert_eq!(fresh_outcome, "ok");
    assert_ne!(late_outcome, "ok");
    // Sent alone, it is the run at `started_ms` byte for byte.
    let mut alone = run_input(&json!({}));
    alone["now_ms"] = json!(T0 + 9);
    alone["started_ms"] = json!(T0);
    let plain = advance("", &run_input(&json!({})).to_string()).unwrap();
    assert_eq!(advance("", &alone.to_string()).unwrap(), plain);
}

#[test]
fn what_started_ms_refuses_and_what_it_clamps() {
    let step = json!({"id":"s1","tool":"search"});
    for started in [json!("soon"), json!(-1), json!(1.5)] {
        for with_step in [false, true] {
            let mut i = if with_step {
                fused_input(&json!({}), &step, None)
            } else {
                run_input(&json!({}))
            };
            i["started_ms"] = started.clone();
            let e = advance("", &i.to_string()).unwrap_err();
            assert_eq!(e.kind, ErrorKind::InvalidArgument);
            assert!(
                e.message
                    .contains("`started_ms` must be a non-negative integer"),
                "{}",
                e.message
            );
        }
    }
    // A start after `now_ms` (a wall clock that stepped back between the
    // start and the first step) is `now_ms`; `null` is no start given.
    for started in [json!(T0 + 1), json!(u64::MAX), Value::Null] {
        let mut i = fused_input(&json!({}), &step, None);
        i["started_ms"] = started;
        assert_eq!(
            advance("", &i.to_string()).unwrap(),
            fused(&json!({}), &step, None)
        );
    }
}

#[test]
fn a_door_run_is_one_call_fewer_than_before() {
    // The success path of a run of one step: `run` with the step and `end`,
    // `read`, `claimed`, `attempt` (four calls, five as `run` then `step`).
    let mut d = Driver::new(&[]);
    let outcome = d.run(&json!({}), &steps()[1], true, true);
    assert_eq!(outcome, "completed");
    assert_eq!(d.advances, 4);
}

#[test]
fn what_the_fused_form_refuses() {
    let step = json!({"id":"s1","tool":"search"});
    let refuse = |input: Value| advance("", &input.to_string()).unwrap_err();
    // `end` needs a step.
    let mut i = run_input(&json!({}));
    i["end"] = json!(true);
    let e = refuse(i);
    assert_eq!(e.kind, ErrorKind::InvalidArgument);
    assert!(
        e.message.contains("`end` goes with a `step`"),
        "{}",
        e.message
    );
    // `end` is a boolean.
    let e = refuse(fused_input(&json!({}), &step, None).tap_end(json!("yes")));
    assert!(e.message.contains("`end` is a boolean"), "{}", e.message);
    // A bad step is refused as the `step` input refuses it.
    for bad in [
        json!({"id":"","tool":"search"}),
        json!({"id":"s1","tool":"search","call":"robot"}),
        json!({"id":"s1","tool":"search","unknown":1}),
        json!({"id":"s1","tool":"x".repeat(600)}),
    ] {
        let run = advance("", &run_input(&json!({})).to_string()).unwrap();
        let a = advance(&run.state, &step_input(&bad, None).to_string()).unwrap_err();
        let b = refuse(fused_input(&json!({}), &bad, None));
        assert_eq!((a.kind, a.message), (b.kind, b.message), "{bad}");
    }
    // A bad configuration is refused before the step.
    let e = refuse(fused_input(
        &json!({"in_flight_wait_ms": u64::MAX}),
        &step,
        None,
    ));
    assert_eq!(e.kind, ErrorKind::InvalidConfig);
    // A run that started already refuses a `run`, with a step or not.
    let run = advance("", &run_input(&json!({})).to_string()).unwrap();
    let e = advance(
        &run.state,
        &fused_input(&json!({}), &step, None).to_string(),
    )
    .unwrap_err();
    assert!(
        e.message.contains("the run already started"),
        "{}",
        e.message
    );
    // `"step": null` is no step.
    let mut i = run_input(&json!({}));
    i["step"] = Value::Null;
    let plain = advance("", &run_input(&json!({})).to_string()).unwrap();
    assert_eq!(advance("", &i.to_string()).unwrap(), plain);
}

trait TapEnd {
    fn tap_end(self, end: Value) -> Value;
}

impl TapEnd for Value {
    fn tap_end(mut self, end: Value) -> Value {
        self["end"] = end;
        self
    }
}

fn typed_step(s: &Value) -> typed::StepSpec {
    typed::StepSpec {
        id: s["id"].as_str().unwrap().to_owned(),
        tool: s["tool"].as_str().unwrap().to_owned(),
        call: None,
        args: s
            .get("args")
            .map_or_else(|| "null".to_owned(), Value::to_string),
        target: s["target"].as_str().map(str::to_owned),
        fallbacks: Vec::new(),
        side_effect: false,
        compensation: false,
        checkpoint: false,
        idempotent: None,
        replay_of: None,
    }
}

#[test]
fn the_typed_run_with_its_first_step_is_the_json_one() {
    let step = json!({"id":"s1","tool":"search","args":{"q":"acme"},"target":"api"});
    for end in [false, true] {
        // A 0.3 step input says `read_stops_batch` (the contract says so).
        let mut input = fused_input(&json!({}), &step, Some(end));
        input["read_stops_batch"] = json!(true);
        let json_out = advance("", &input.to_string()).unwrap();
        let typed_out = typed::advance(
            "",
            typed::Input {
                now_ms: T0,
                kind: InputKind::Run(typed::RunStart {
                    run_id: "r1".into(),
                    seed: Some(7),
                    config: Some("{}".into()),
                    first: Some(typed::FirstStep {
                        step: typed_step(&step),
                        end,
                    }),
                    started_ms: None,
                }),
            },
        )
        .unwrap();
        assert_eq!(typed_out.state, json_out.state);
        let fx: Vec<Value> = serde_json::from_str(&json_out.effects).unwrap();
        assert_eq!(typed_out.effects.len(), fx.len());
        assert!(matches!(
            typed_out.effects.first(),
            Some(typed::Effect::ReadOrStop(_))
        ));
        assert!(matches!(
            typed_out.effects.last(),
            Some(typed::Effect::Call(_))
        ));
    }
    // A bad first step is refused as the typed `step` input refuses it.
    let mut bad = typed_step(&step);
    bad.args = "{".into();
    let run = typed::advance(
        "",
        typed::Input {
            now_ms: T0,
            kind: InputKind::Run(typed::RunStart {
                run_id: "r1".into(),
                seed: Some(7),
                config: None,
                first: None,
                started_ms: None,
            }),
        },
    )
    .unwrap();
    let a = typed::advance(
        &run.state,
        typed::Input {
            now_ms: T0,
            kind: InputKind::Step(bad.clone()),
        },
    )
    .unwrap_err();
    let b = typed::advance(
        "",
        typed::Input {
            now_ms: T0,
            kind: InputKind::Run(typed::RunStart {
                run_id: "r1".into(),
                seed: Some(7),
                config: None,
                first: Some(typed::FirstStep {
                    step: bad,
                    end: true,
                }),
                started_ms: None,
            }),
        },
    )
    .unwrap_err();
    assert_eq!((a.kind, a.message), (b.kind, b.message));
}
