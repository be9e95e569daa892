//! A claim in the call's batch, and a step's first read with it
//! (docs/runtime.md, "A claim in the call's batch"): when the host's `read`
//! answer says it stops a batch at a `claim` that fails
//! (`claim_stops_batch`, always so in runtime@0.3.0), a step whose call
//! would follow its claim at once gets the claim and the call in one batch;
//! when its `step` input says it stops a batch at a `read` that found a
//! value (`read_stops_batch`), the step's first read goes in that batch too.
//! Each case here drives the same runs both ways on stores of their own and
//! compares every effect the host carried out, the store, the final state
//! and the outcome byte for byte: the only difference is one `advance`
//! fewer for each answer the host did not send.

use agent_recovery_policy::{ErrorKind, advance, decide_json};
use serde_json::{Value, json};

mod common;
use common::Store;

const T0: u64 = 1_767_225_600_000;

/// Drives runs on its own store; keeps the bytes of every effect it
/// carried out and counts the `advance` calls.
struct Driver {
    store: Store,
    now: u64,
    /// The host stops a batch at a failed claim and says so in `read`.
    stops: bool,
    /// Put under the step's idempotency key right before its first claim
    /// is carried out: another worker's mark that won the race.
    race: Option<Value>,
    outcomes: Vec<Value>,
    carried: Vec<String>,
    advances: usize,
    /// Answers not sent: a claim that succeeded and a read that found
    /// nothing, each followed by the rest of its batch.
    saved: usize,
}

impl Driver {
    fn new(stops: bool, race: Option<Value>, outcomes: &[Value]) -> Self {
        Driver {
            store: Store::default(),
            now: T0,
            stops,
            race,
            outcomes: outcomes.to_vec(),
            carried: Vec::new(),
            advances: 0,
            saved: 0,
        }
    }

    /// A run of `step` sent with `end`: its outcome and final state.
    fn run(&mut self, run_id: &str, config: &Value, step: &Value) -> (String, String) {
        let mut input = json!({"input":"run","now_ms":self.now,"run_id":run_id,"seed":7,
            "config":config,"step":step,"end":true});
        if self.stops {
            input["read_stops_batch"] = json!(true);
        }
        let mut state = String::new();
        loop {
            let r = advance(&state, &input.to_string()).unwrap();
            self.advances += 1;
            state = r.state;
            let fx: Vec<Value> = serde_json::from_str(&r.effects).unwrap();
            let mut answer = None;
            for (i, f) in fx.iter().enumerate() {
                if f["effect"] == "finish" && f["run_finished"] == true {
                    let outcome = f["outcome"].as_str().unwrap().to_owned();
                    self.carried.push(f.to_string());
                    return (outcome, state);
                }
                // The same effect but for the read's mark.
                let mut carried = f.clone();
                carried.as_object_mut().unwrap().remove("go_on_if_absent");
                self.carried.push(carried.to_string());
                answer = self.carry(f);
                if f["go_on_if_absent"] == true {
                    assert!(
                        self.stops,
                        "a read that goes on for a host that does not stop: {f}"
                    );
                    let read = answer.as_ref().unwrap();
                    let found = read["values"]
                        .as_object()
                        .unwrap()
                        .values()
                        .any(|v| !v.is_null());
                    if found {
                        break;
                    }
                    answer = None;
                    self.saved += 1;
                    continue;
                }
                if f["effect"] == "claim" && i + 1 < fx.len() {
                    assert!(
                        self.stops,
                        "a claim before other effects for a host that does not stop: {f}"
                    );
                    if answer.as_ref().is_some_and(|a| a["ok"] == false) {
                        break;
                    }
                    self.saved += 1;
                }
            }
            input = answer.expect("a batch ends with an effect to answer");
        }
    }

    fn carry(&mut self, fx: &Value) -> Option<Value> {
        let key = fx["key"].as_str().unwrap_or("");
        if fx["effect"] == "claim"
            && key.starts_with("agent-recovery/idem/")
            && let Some(mark) = self.race.take()
        {
            self.store.put(key, mark.to_string());
        }
        if let Some(answer) = self.store.carry(fx, self.now) {
            return answer.map(|mut a| {
                if a["input"] == "read" && self.stops {
                    a["claim_stops_batch"] = json!(true);
                }
                a
            });
        }
        common::answer(fx, &mut self.now, &mut self.outcomes)
    }
}

fn http(status: u16) -> Value {
    json!({"source":"http","status":status})
}

fn steps() -> Vec<Value> {
    vec![
        json!({"id":"s1","tool":"search","call":"tool","args":{"q":"acme"}}),
        json!({"id":"pay","tool":"payments.charge","call":"tool","target":"psp",
               "fallbacks":["psp-b"],"side_effect":true,"compensation":true,
               "checkpoint":true,"args":{"cents":1200}}),
        json!({"id":"again","tool":"search","replay_of":{"key":"ab".repeat(32),"n":2,"id":"17-0"}}),
    ]
}

fn configs() -> Vec<Value> {
    vec![
        json!({}),
        json!({"journal": false}),
        json!({"decision_log": {}, "deadline_ms": 5000, "breaker": {"failure_threshold": 2}}),
        json!({"in_flight_wait_ms": 600, "retry_quota": {}}),
    ]
}

/// What two runs on one store give: the second run (another run id, the
/// same targets) meets what the first left, an open breaker among it.
fn drive(
    stops: bool,
    race: Option<Value>,
    config: &Value,
    step: &Value,
    outcomes: &[Value],
) -> Driver {
    let mut d = Driver::new(stops, race, outcomes);
    let first = d.run("r1", config, step);
    let second = d.run("r2", config, step);
    d.carried.push(format!("{first:?} {second:?}"));
    d
}

#[test]
fn the_host_carries_out_the_same_effects_with_one_advance_fewer_per_claim() {
    let races = [
        None,
        Some(json!({"since_ms": T0, "status": "in_flight"})),
        Some(json!({"at_ms": T0, "result": {"x": 1}, "status": "done", "target": "search"})),
    ];
    let outcomes = [
        vec![],
        vec![http(503), json!("ok")],
        vec![http(400)],
        vec![http(503); 12],
        vec![
            json!({"source":"http","status":429,"headers":{"retry-after":"1"}}),
            json!("ok"),
        ],
    ];
    let (mut cases, mut fused) = (0, 0);
    for config in configs() {
        for step in steps() {
            for out in &outcomes {
                for race in &races {
                    let plain = drive(false, race.clone(), &config, &step, out);
                    let stops = drive(true, race.clone(), &config, &step, out);
                    let what = format!("{config} {step} {out:?} race {race:?}");
                    assert_eq!(stops.carried, plain.carried, "{what}");
                    assert_eq!(stops.store.kv, plain.store.kv, "{what}");
                    assert_eq!(plain.saved, 0, "{what}");
                    assert_eq!(stops.advances + stops.saved, plain.advances, "{what}");
                    cases += 1;
                    fused += usize::from(stops.saved > 0);
                }
            }
        }
    }
    assert_eq!(cases, 4 * 3 * 5 * 3);
    // Every run whose first read lets the call through fuses: all but the
    // ones another worker's `done` mark answers from the cache at once.
    assert!(fused >= cases * 2 / 3, "{fused} of {cases}");
}

#[test]
fn a_failed_claim_in_the_call_batch_leaves_the_state_of_a_failed_claim() {
    // The same inputs up to the claim's answer, then `claimed` (not ok):
    // the new state and effects are exactly those of the plain exchange.
    for race in [
        json!({"since_ms": T0, "status": "in_flight"}),
        json!({"at_ms": T0, "result": {"x": 1}, "status": "done", "target": "search"}),
    ] {
        for config in configs() {
            let step = json!({"id":"s1","tool":"search","call":"tool"});
            let run = json!({"input":"run","now_ms":T0,"run_id":"r1","seed":7,"config":config,"step":step});
            let first = advance("", &run.to_string()).unwrap();
            let fx: Vec<Value> = serde_json::from_str(&first.effects).unwrap();
            let keys = fx[0]["keys"].as_array().unwrap();
            let values: serde_json::Map<String, Value> = keys
                .iter()
                .map(|k| (k.as_str().unwrap().to_owned(), Value::Null))
                .collect();
            let read = |stops: bool| {
                json!({"input":"read","now_ms":T0,"values":values,"claim_stops_batch":stops})
                    .to_string()
            };
            let plain = advance(&first.state, &read(false)).unwrap();
            let fused = advance(&first.state, &read(true)).unwrap();
            let plain_fx: Vec<Value> = serde_json::from_str(&plain.effects).unwrap();
            let fused_fx: Vec<Value> = serde_json::from_str(&fused.effects).unwrap();
            assert_eq!(plain_fx.len(), 1, "{config}");
            assert_eq!(fused_fx[0], plain_fx[0], "{config}");
            assert_eq!(fused_fx.last().unwrap()["effect"], "call", "{config}");
            let refused =
                json!({"input":"claimed","now_ms":T0 + 5,"ok":false,"current":race}).to_string();
            let a = advance(&plain.state, &refused).unwrap();
            let b = advance(&fused.state, &refused).unwrap();
            assert_eq!(b, a, "{config} {race}");
        }
    }
}

#[test]
fn claimed_while_calling_is_refused_unless_it_is_the_batch_claim_failing() {
    let step = json!({"id":"s1","tool":"search","call":"tool"});
    let run = json!({"input":"run","now_ms":T0,"run_id":"r1","seed":7,"step":step});
    let first = advance("", &run.to_string()).unwrap();
    let fx: Vec<Value> = serde_json::from_str(&first.effects).unwrap();
    let values: serde_json::Map<String, Value> = fx[0]["keys"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| (k.as_str().unwrap().to_owned(), Value::Null))
        .collect();
    let read = |stops: Value| {
        json!({"input":"read","now_ms":T0,"values":values,"claim_stops_batch":stops}).to_string()
    };
    let err = advance(&first.state, &read(json!("yes"))).unwrap_err();
    assert_eq!(err.kind, ErrorKind::InvalidArgument);
    assert!(err.message.contains("claim_stops_batch"), "{}", err.message);
    // Null is no answer: the plain exchange.
    let plain = advance(&first.state, &read(Value::Null)).unwrap();
    assert_eq!(
        serde_json::from_str::<Vec<Value>>(&plain.effects)
            .unwrap()
            .len(),
        1
    );

    let calling = advance(&first.state, &read(json!(true))).unwrap();
    // A claim that succeeded is not answered: the batch went on to the call.
    let ok = json!({"input":"claimed","now_ms":T0,"ok":true}).to_string();
    let err = advance(&calling.state, &ok).unwrap_err();
    assert_eq!(err.kind, ErrorKind::InvalidArgument);
    assert!(err.message.contains("claimed"), "{}", err.message);
    // A retry's call has no claim in its batch.
    let failed = json!({"input":"attempt","now_ms":T0,"result":{"failed":http(503)}}).to_string();
    let mut r = advance(&calling.state, &failed).unwrap();
    let mut retried = false;
    for _ in 0..8 {
        let fx: Vec<Value> = serde_json::from_str(&r.effects).unwrap();
        let last = fx.last().unwrap();
        let input = match last["effect"].as_str().unwrap() {
            "decide" => {
                let d = decide_json(
                    last["observation"].as_str().unwrap(),
                    last["context"].as_str().unwrap(),
                )
                .unwrap();
                json!({"input":"decision","now_ms":T0,"decision":d}).to_string()
            }
            "swap" => json!({"input":"swapped","now_ms":T0,"ok":true,"version":1}).to_string(),
            "sleep" => json!({"input":"slept","now_ms":T0 + 100}).to_string(),
            "read" => {
                json!({"input":"read","now_ms":T0 + 100,"values":{},"claim_stops_batch":true})
                    .to_string()
            }
            "call" => {
                assert!(
                    fx.iter().all(|f| f["effect"] != "claim"),
                    "a retry claims nothing: {fx:?}"
                );
                retried = true;
                break;
            }
            other => panic!("{other}: {fx:?}"),
        };
        r = advance(&r.state, &input).unwrap();
    }
    assert!(retried);
    let state = r.state;
    let refused = json!({"input":"claimed","now_ms":T0,"ok":false,"current":null}).to_string();
    let err = advance(&state, &refused).unwrap_err();
    assert_eq!(err.kind, ErrorKind::InvalidArgument, "{}", err.message);
}

/// The step's first read sent with its call, when the host says
/// `read_stops_batch`: the first batch is the read, then what `read` gives
/// when nothing is stored; a `read` that found something (answered while the
/// loop waits for `attempt`) gives exactly what it gives after the plain
/// first batch, state and effects.
#[test]
fn a_first_read_that_finds_a_value_is_the_plain_read() {
    let k = |prefix: &str, key: &str| format!("agent-recovery/{prefix}/{key}");
    // The last: a wait for a key in flight elsewhere keeps the step.
    let mut configs = configs();
    configs.push(json!({"in_flight_wait_ms": 600}));
    for config in configs {
        let step = json!({"id":"s1","tool":"search","call":"tool"});
        let run =
            json!({"input":"run","now_ms":T0,"run_id":"r1","seed":7,"config":config,"step":step});
        let mut with = run.clone();
        with["read_stops_batch"] = json!(true);
        let plain = advance("", &run.to_string()).unwrap();
        let fused = advance("", &with.to_string()).unwrap();
        let plain_fx: Vec<Value> = serde_json::from_str(&plain.effects).unwrap();
        let fused_fx: Vec<Value> = serde_json::from_str(&fused.effects).unwrap();
        let keys = plain_fx[0]["keys"].as_array().unwrap().clone();
        let key = keys.last().unwrap().as_str().unwrap()["agent-recovery/idem/".len()..].to_owned();
        if config.get("retry_quota").is_some() {
            // A retry quota is read from the store: no call before the read.
            assert_eq!(fused, plain, "{config}");
            continue;
        }
        assert_eq!(fused_fx[0]["go_on_if_absent"], true, "{config}");
        assert_eq!(fused_fx[0]["keys"], plain_fx[0]["keys"], "{config}");
        let kinds: Vec<&str> = fused_fx
            .iter()
            .map(|f| f["effect"].as_str().unwrap())
            .collect();
        let journal = config.get("journal") != Some(&json!(false));
        let want: &[&str] = if journal {
            &["read", "claim", "write", "write", "call"]
        } else {
            &["read", "claim", "write", "call"]
        };
        assert_eq!(kinds, want, "{config}");
        // What the read finds: another worker's mark, a recorded outcome, an
        // open breaker, earlier attempts.
        for (found, value) in [
            (
                k("idem", &key),
                json!({"since_ms": T0, "status": "in_flight"}),
            ),
            (
                k("idem", &key),
                json!({"at_ms": T0, "result": 1, "status": "done", "target": "search"}),
            ),
            (
                k("breaker", "search"),
                json!({"state": "open", "failures": 3, "since_ms": T0}),
            ),
            (k("attempts", &key), json!({"count": 2})),
        ] {
            let mut values = serde_json::Map::new();
            for key in &keys {
                values.insert(key.as_str().unwrap().to_owned(), Value::Null);
            }
            values.insert(found.clone(), value.clone());
            let read = json!({"input":"read","now_ms":T0 + 7,"values":values,
                "versions":{&found: 3},"claim_stops_batch": true})
            .to_string();
            let a = advance(&plain.state, &read).unwrap();
            let b = advance(&fused.state, &read).unwrap();
            assert_eq!(b, a, "{config} {found} {value}");
        }
    }
    // Not a boolean: refused, as `step` or `run` input.
    let step = json!({"id":"s1","tool":"search"});
    for input in [
        json!({"input":"run","now_ms":T0,"run_id":"r1","step":step,"read_stops_batch":1}),
        json!({"input":"step","now_ms":T0,"step":step,"read_stops_batch":"yes"}),
    ] {
        let state = if input["input"] == "step" {
            advance(
                "",
                &json!({"input":"run","now_ms":T0,"run_id":"r1"}).to_string(),
            )
            .unwrap()
            .state
        } else {
            String::new()
        };
        let err = advance(&state, &input.to_string()).unwrap_err();
        assert_eq!(err.kind, ErrorKind::InvalidArgument, "{input}");
        assert!(err.message.contains("read_stops_batch"), "{}", err.message);
    }
}
