//! The typed loop (`runtime@0.3.0`) is the JSON loop (`runtime@0.2.0`) with
//! other shapes: every loop vector of `tests/loops/` is driven through the
//! JSON `advance` (by a small scenario driver, checked against the vector's
//! expected outcome, events and dead-letter records), and every one of its
//! calls is made again through `typed::advance` with the input converted to
//! the typed one: the state must be the same bytes and the effects, read back
//! as JSON, the same values.

use std::collections::BTreeMap;
use std::path::Path;

use agent_recovery_policy::typed::{self, Effect, InputKind};
use agent_recovery_policy::{CallKind, advance, decide_json};
use serde_json::{Value, json};

const JOURNAL: &str = "agent-recovery/journal/";
const DEAD_LETTER: &str = "agent-recovery/dead-letter";

// ---- JSON input -> typed input (independent of the guest's own reader) ----

fn text(v: &Value) -> String {
    v.to_string()
}

fn opt_text(v: Option<&Value>) -> Option<String> {
    v.filter(|v| !v.is_null()).map(text)
}

fn step_of(s: &Value) -> typed::StepSpec {
    typed::StepSpec {
        id: s["id"].as_str().unwrap().to_owned(),
        tool: s["tool"].as_str().unwrap().to_owned(),
        call: s["call"].as_str().map(|c| CallKind::parse(c).unwrap()),
        args: s.get("args").map_or_else(|| "null".to_owned(), text),
        target: s["target"].as_str().map(str::to_owned),
        fallbacks: s["fallbacks"]
            .as_array()
            .map(|a| a.iter().map(|f| f.as_str().unwrap().to_owned()).collect())
            .unwrap_or_default(),
        side_effect: s["side_effect"].as_bool().unwrap_or(false),
        compensation: s["compensation"].as_bool().unwrap_or(false),
        checkpoint: s["checkpoint"].as_bool().unwrap_or(false),
        idempotent: s["idempotent"].as_bool(),
        replay_of: s
            .get("replay_of")
            .filter(|r| !r.is_null())
            .map(|r| typed::ReplayOf {
                key: r["key"].as_str().unwrap().to_owned(),
                n: r["n"].as_u64().unwrap(),
                id: r["id"].as_str().unwrap().to_owned(),
            }),
    }
}

fn typed_input(i: &Value) -> typed::Input {
    let kind = match i["input"].as_str().unwrap() {
        "run" => InputKind::Run(typed::RunStart {
            run_id: i["run_id"].as_str().unwrap().to_owned(),
            seed: i["seed"].as_u64(),
            config: opt_text(i.get("config")),
            first: i.get("step").map(|s| typed::FirstStep {
                step: step_of(s),
                end: i["end"].as_bool().unwrap_or(false),
            }),
            started_ms: i["started_ms"].as_u64(),
        }),
        "step" => InputKind::Step(step_of(&i["step"])),
        "fanout" => InputKind::Fanout(typed::FanoutSpec {
            id: i["fanout"]["id"].as_str().unwrap().to_owned(),
            min_results: u32::try_from(i["fanout"]["min_results"].as_u64().unwrap()).unwrap(),
            branches: i["fanout"]["branches"]
                .as_array()
                .unwrap()
                .iter()
                .map(step_of)
                .collect(),
        }),
        "joined" => InputKind::Joined(
            i["states"]
                .as_array()
                .unwrap()
                .iter()
                .map(|s| s.as_str().unwrap().to_owned())
                .collect(),
        ),
        "read" => InputKind::Read(
            i["values"]
                .as_object()
                .unwrap()
                .iter()
                .map(|(k, v)| typed::StoredValue {
                    key: k.clone(),
                    value: opt_text(Some(v)),
                    version: i["versions"][k].as_u64(),
                })
                .collect(),
        ),
        "swapped" => InputKind::Swapped(typed::Swapped {
            ok: i["ok"].as_bool().unwrap(),
            current: opt_text(i.get("current")),
            version: i["version"].as_u64(),
        }),
        "claimed" => InputKind::Claimed(typed::Claimed {
            ok: i["ok"].as_bool().unwrap(),
            current: opt_text(i.get("current")),
        }),
        "attempt" => {
            let r = &i["result"];
            InputKind::Attempt(typed::CallEnded {
                result: if r == "timed_out" {
                    typed::CallResult::TimedOut
                } else if let Some(v) = r.get("ok") {
                    typed::CallResult::Ok(text(v))
                } else if let Some(v) = r.get("failed") {
                    typed::CallResult::Failed(text(v))
                } else {
                    typed::CallResult::Response(text(&r["response"]))
                },
                took_ms: i["took_ms"].as_u64(),
            })
        }
        "decision" => InputKind::Decision(typed::Decision {
            decision: text(&i["decision"]),
            policy: None,
        }),
        "slept" => InputKind::Slept,
        "restored" => InputKind::Restored(i["ok"].as_bool().unwrap()),
        "cancel" => InputKind::Cancel,
        "end" => InputKind::End,
        "recover" => InputKind::Recover,
        other => panic!("no typed twin for input {other}"),
    };
    typed::Input {
        now_ms: i["now_ms"].as_u64().unwrap(),
        kind,
    }
}

// ---- typed effect -> the JSON effect's value ----

fn parse(t: &str) -> Value {
    serde_json::from_str(t).unwrap()
}

fn parse_opt(t: &Option<String>) -> Value {
    t.as_deref().map_or(Value::Null, parse)
}

fn step_json(s: &typed::StepSpec) -> Value {
    let mut v = json!({
        "id": s.id, "tool": s.tool, "call": s.call.map(CallKind::as_str), "args": parse(&s.args),
        "target": s.target, "fallbacks": s.fallbacks, "side_effect": s.side_effect,
        "compensation": s.compensation, "checkpoint": s.checkpoint, "idempotent": s.idempotent,
    });
    if let Some(r) = &s.replay_of {
        v["replay_of"] = json!({"key": r.key, "n": r.n, "id": r.id});
    }
    v
}

fn effect_json(e: &Effect) -> Value {
    match e {
        Effect::Read(keys) => json!({"effect": "read", "keys": keys}),
        Effect::ReadOrStop(keys) => {
            json!({"effect": "read", "keys": keys, "go_on_if_absent": true})
        }
        Effect::Write(w) => {
            json!({"effect": "write", "key": w.key, "value": parse(&w.value), "ttl_ms": w.ttl_ms})
        }
        Effect::Claim(w) => {
            json!({"effect": "claim", "key": w.key, "value": parse(&w.value), "ttl_ms": w.ttl_ms})
        }
        Effect::Swap(s) => json!({"effect": "swap", "key": s.key, "expected": s.expected,
            "value": parse(&s.value), "ttl_ms": s.ttl_ms}),
        Effect::Delete(k) => json!({"effect": "delete", "key": k}),
        Effect::Call(c) => json!({"effect": "call", "call": match c.role {
                typed::CallRole::Operation => "operation",
                typed::CallRole::Fallback => "fallback",
                typed::CallRole::Compensation => "compensation",
            }, "step": c.step, "target": c.target, "key": c.key, "attempt": c.attempt,
            "timeout_ms": c.timeout_ms, "tool": c.tool}),
        Effect::Decide(d) => {
            json!({"effect": "decide", "observation": d.observation, "context": d.context})
        }
        Effect::Sleep(s) => json!({"effect": "sleep", "ms": s.ms, "cancellable": s.cancellable}),
        Effect::Restore(s) => json!({"effect": "restore", "step": s}),
        Effect::Fork(f) => json!({"effect": "fork", "fanout": f.fanout, "branches":
            f.branches.iter().map(|b| json!({"state": b.state, "step": step_json(&b.step)})).collect::<Vec<_>>()}),
        Effect::Emit(e) => json!({"effect": "emit", "event": parse(e)}),
        Effect::Append(a) => {
            let mut v = json!({"effect": "append", "stream": a.stream, "record": parse(&a.record)});
            if let Some(d) = a.depth_threshold {
                v["depth_threshold"] = json!(d);
            }
            v
        }
        Effect::Log(l) => json!({"effect": "log", "line": l}),
        Effect::Finish(f) => {
            json!({"effect": "finish", "step": f.step, "outcome": f.outcome.as_str(),
            "run_finished": f.run_finished, "result": parse_opt(&f.result),
            "envelope": parse_opt(&f.envelope), "rendered": parse_opt(&f.rendered), "token": f.token})
        }
    }
}

// ---- the scenario driver (JSON path) ----

#[derive(Default)]
struct World {
    /// Key -> (value text, version, expiry in Unix ms).
    kv: BTreeMap<String, (String, u64, Option<u64>)>,
    version: u64,
    dead_letters: Vec<Value>,
    /// Calls compared between the two paths.
    compared: usize,
}

struct Run<'s> {
    world: &'s mut World,
    now: u64,
    cancel_at: Option<u64>,
    kill_after: Option<u64>,
    calls: u64,
    killed: bool,
    events: Vec<Value>,
    queues: BTreeMap<(String, String), Vec<Value>>,
    /// Scenario steps by id (checkpoint hooks, compensations) and by tool.
    steps: BTreeMap<String, Value>,
    by_tool: BTreeMap<String, String>,
    recovering: bool,
}

impl World {
    /// The live value of `key` at `now` (an expired one is dropped).
    fn get(&mut self, key: &str, now: u64) -> Option<(String, u64)> {
        if self
            .kv
            .get(key)
            .is_some_and(|v| v.2.is_some_and(|t| t <= now))
        {
            self.kv.remove(key);
        }
        self.kv.get(key).map(|v| (v.0.clone(), v.1))
    }

    fn cas(
        &mut self,
        key: &str,
        expected: Option<u64>,
        value: &Value,
        ttl: Option<u64>,
        now: u64,
    ) -> Result<u64, ()> {
        if self.get(key, now).map(|v| v.1) != expected {
            return Err(());
        }
        self.version += 1;
        let expiry = ttl.map(|t| now + t);
        self.kv
            .insert(key.to_owned(), (value.to_string(), self.version, expiry));
        Ok(self.version)
    }
}

impl Run<'_> {
    /// One call, through both paths; returns the JSON path's answer.
    fn adv(&mut self, state: &str, input: &Value) -> (String, Vec<Value>) {
        // A 0.3 host stops a batch at a `read-or-stop` that found a value:
        // the JSON input says so on every step.
        let mut said = input.clone();
        if input.get("step").is_some() {
            said["read_stops_batch"] = json!(true);
        }
        let input_text = said.to_string();
        let json_out = advance(state, &input_text)
            .unwrap_or_else(|e| panic!("advance refused {input_text}: {}", e.message));
        let typed_out = typed::advance(state, typed_input(input))
            .unwrap_or_else(|e| panic!("typed advance refused {input_text}: {}", e.message));
        assert_eq!(
            typed_out.state, json_out.state,
            "the typed path's state differs after {input_text}"
        );
        let json_fx: Vec<Value> = serde_json::from_str(&json_out.effects).unwrap();
        let typed_fx: Vec<Value> = typed_out.effects.iter().map(effect_json).collect();
        assert_eq!(
            typed_fx, json_fx,
            "the typed path's effects differ after {input_text}"
        );
        self.world.compared += 1;
        (json_out.state, json_fx)
    }

    fn cancelled(&self) -> bool {
        self.cancel_at.is_some_and(|t| self.now >= t)
    }

    fn cancel(&self) -> Value {
        json!({"input": "cancel", "now_ms": self.now})
    }

    fn outcome(&mut self, step: &str, target: &str) -> Value {
        let q = self
            .queues
            .entry((step.to_owned(), target.to_owned()))
            .or_default();
        assert!(!q.is_empty(), "no outcome left for {step} on {target}");
        let v = q.remove(0);
        if v.as_str() == Some("ok") {
            json!({"ok": null})
        } else {
            json!({"response": v})
        }
    }

    /// The scripted answer to a call of `step`.
    fn answer(&mut self, kind: &str, step: &str, target: &str) -> Value {
        if kind != "compensation" {
            return self.outcome(step, target);
        }
        if self
            .steps
            .get(step)
            .is_some_and(|s| s.get("compensation").is_some())
        {
            self.outcome(step, "\u{0}compensation")
        } else {
            json!({"failed": {"source": "exception", "type": "agent_recovery.MissingCompensation",
                "message": format!("no compensation registered for step {step}")}})
        }
    }

    /// Drives a lane to its finish; `None` when killed.
    fn drive(&mut self, mut state: String, mut input: Value) -> (String, Option<Value>) {
        loop {
            let (next, effects) = self.adv(&state, &input);
            state = next;
            let mut answer = None;
            for fx in effects {
                let now = self.now;
                match fx["effect"].as_str().unwrap() {
                    "emit" => self.events.push(fx["event"].clone()),
                    "read" => {
                        let mut values = serde_json::Map::new();
                        let mut versions = serde_json::Map::new();
                        for k in fx["keys"].as_array().unwrap() {
                            let k = k.as_str().unwrap();
                            match self.world.get(k, now) {
                                Some((v, n)) => {
                                    values.insert(k.into(), parse(&v));
                                    versions.insert(k.into(), json!(n));
                                }
                                None => {
                                    values.insert(k.into(), Value::Null);
                                }
                            }
                        }
                        let found = !versions.is_empty();
                        answer = Some(
                            // A 0.3 host stops a batch at a failed claim, and says so here.
                            json!({"input": "read", "now_ms": now, "values": values, "versions": versions,
                                "claim_stops_batch": true}),
                        );
                        if fx["go_on_if_absent"] == true {
                            if found {
                                break; // a read that found a value ends its batch
                            }
                            answer = None;
                        }
                    }
                    "write" => {
                        let key = fx["key"].as_str().unwrap();
                        let cur = self.world.get(key, now).map(|v| v.1);
                        let ttl = fx["ttl_ms"].as_u64();
                        self.world.cas(key, cur, &fx["value"], ttl, now).unwrap();
                    }
                    "claim" => {
                        let key = fx["key"].as_str().unwrap();
                        let ttl = fx["ttl_ms"].as_u64();
                        answer = Some(match self.world.cas(key, None, &fx["value"], ttl, now) {
                            Ok(_) => json!({"input": "claimed", "now_ms": now, "ok": true}),
                            Err(()) => {
                                let cur = parse(&self.world.get(key, now).unwrap().0);
                                json!({"input": "claimed", "now_ms": now, "ok": false, "current": cur})
                            }
                        });
                        if answer.as_ref().is_some_and(|a| a["ok"] == false) {
                            break; // a claim that failed ends its batch
                        }
                    }
                    "swap" => {
                        let key = fx["key"].as_str().unwrap();
                        answer = Some(
                            match self.world.cas(
                                key,
                                fx["expected"].as_u64(),
                                &fx["value"],
                                fx["ttl_ms"].as_u64(),
                                now,
                            ) {
                                Ok(n) => {
                                    json!({"input": "swapped", "now_ms": now, "ok": true, "version": n})
                                }
                                Err(()) => {
                                    let (cur, n) = self
                                        .world
                                        .get(key, now)
                                        .map_or((Value::Null, Value::Null), |(v, n)| {
                                            (parse(&v), json!(n))
                                        });
                                    json!({"input": "swapped", "now_ms": now, "ok": false, "current": cur, "version": n})
                                }
                            },
                        );
                    }
                    "delete" => {
                        self.world.kv.remove(fx["key"].as_str().unwrap());
                    }
                    "append" => {
                        assert_eq!(fx["stream"], DEAD_LETTER);
                        self.world.dead_letters.push(fx["record"].clone());
                    }
                    "log" => {}
                    "decide" => {
                        let d = decide_json(
                            fx["observation"].as_str().unwrap(),
                            fx["context"].as_str().unwrap(),
                        )
                        .unwrap();
                        answer = Some(
                            json!({"input": "decision", "now_ms": now, "decision": parse(&d)}),
                        );
                    }
                    "sleep" => {
                        let ms = fx["ms"].as_u64().unwrap();
                        let cancellable = fx["cancellable"].as_bool().unwrap();
                        answer = Some(if cancellable && self.cancelled() {
                            self.cancel()
                        } else if let Some(at) =
                            self.cancel_at.filter(|at| cancellable && now + ms > *at)
                        {
                            self.now = at;
                            self.cancel()
                        } else {
                            self.now += ms;
                            json!({"input": "slept", "now_ms": self.now})
                        });
                    }
                    "restore" => {
                        let step = fx["step"].as_str().unwrap();
                        let ok = self.steps.get(step).and_then(|s| s["checkpoint"].as_bool());
                        answer = Some(
                            json!({"input": "restored", "now_ms": now, "ok": ok.unwrap_or(false)}),
                        );
                    }
                    "call" => {
                        let kind = fx["call"].as_str().unwrap();
                        if kind != "compensation" && self.cancelled() {
                            answer = Some(self.cancel());
                            continue;
                        }
                        let tool = fx["tool"].as_str().unwrap();
                        let step = if self.recovering {
                            self.by_tool.get(tool).cloned()
                        } else {
                            fx["step"].as_str().map(str::to_owned)
                        };
                        let result = if let Some(step) = step {
                            self.answer(kind, &step, fx["target"].as_str().unwrap())
                        } else {
                            json!({"failed": {"error": {"code": "runtime.recover.unknown_tool", "retryable": false,
                                "message": format!("no operation is registered for tool {tool}; pass it in the operations of recover or replay")}}})
                        };
                        self.calls += 1;
                        if self.kill_after == Some(self.calls) {
                            self.killed = true;
                            return (state, None);
                        }
                        answer =
                            Some(json!({"input": "attempt", "now_ms": self.now, "result": result}));
                    }
                    "fork" => {
                        let t0 = self.now;
                        let mut end = t0;
                        let mut states = Vec::new();
                        for b in fx["branches"].as_array().unwrap() {
                            self.now = t0;
                            let input = json!({"input": "step", "now_ms": t0, "step": b["step"]});
                            let (s, fin) =
                                self.drive(b["state"].as_str().unwrap().to_owned(), input);
                            end = end.max(self.now);
                            if fin.is_none() {
                                return (state, None);
                            }
                            states.push(s);
                        }
                        self.now = end;
                        answer = Some(json!({"input": "joined", "now_ms": end, "states": states}));
                    }
                    "finish" => return (state, Some(fx)),
                    other => panic!("unknown effect {other}"),
                }
            }
            input = answer.expect("a batch without an effect to answer");
        }
    }
}

fn spec(s: &Value) -> Value {
    let mut v = json!({
        "id": s["id"], "tool": s["tool"], "call": s["call"], "args": s.get("args").cloned().unwrap_or(Value::Null),
        "target": s["target"],
        "fallbacks": s["fallbacks"].as_array().map(|f| f.iter().map(|t| t["target"].clone()).collect::<Vec<_>>()).unwrap_or_default(),
        "side_effect": s["side_effect"].as_bool().unwrap_or(false),
        "compensation": s.get("compensation").is_some(),
        "checkpoint": s.get("checkpoint").is_some(),
        "idempotent": s["idempotent"],
    });
    if let Some(r) = s.get("replay_of") {
        v["replay_of"] = r.clone();
    }
    v
}

/// Runs one scenario against `world`: its outcome and events.
fn run_scenario(world: &mut World, sc: &Value, fuse: bool) -> (String, Vec<Value>) {
    let now = sc["now_ms"].as_u64().unwrap();
    let mut all: Vec<Value> = Vec::new();
    for s in sc["steps"].as_array().unwrap() {
        all.push(s.clone());
        if let Some(b) = s["fanout"]["branches"].as_array() {
            all.extend(b.iter().cloned());
        }
    }
    let mut queues = BTreeMap::new();
    for s in &all {
        let id = s["id"].as_str().unwrap().to_owned();
        let first = s["target"]
            .as_str()
            .or(s["tool"].as_str())
            .unwrap_or("")
            .to_owned();
        queues.insert(
            (id.clone(), first),
            s["outcomes"].as_array().cloned().unwrap_or_default(),
        );
        for fb in s["fallbacks"].as_array().into_iter().flatten() {
            queues.insert(
                (id.clone(), fb["target"].as_str().unwrap().to_owned()),
                fb["outcomes"].as_array().cloned().unwrap_or_default(),
            );
        }
        if let Some(c) = s.get("compensation") {
            queues.insert(
                (id.clone(), "\u{0}compensation".to_owned()),
                c["outcomes"].as_array().cloned().unwrap_or_default(),
            );
        }
    }
    let recovering = sc["recover"].as_bool().unwrap_or(false);
    let mut run = Run {
        world,
        now,
        cancel_at: sc["cancel_at_ms"].as_u64().map(|t| now + t),
        kill_after: sc["kill_after_calls"].as_u64(),
        calls: 0,
        killed: false,
        events: Vec::new(),
        queues,
        steps: all
            .iter()
            .map(|s| (s["id"].as_str().unwrap().to_owned(), s.clone()))
            .collect(),
        by_tool: all
            .iter()
            .filter_map(|s| Some((s["tool"].as_str()?.to_owned(), s["id"].as_str()?.to_owned())))
            .collect(),
        recovering,
    };
    if recovering {
        let entries: Vec<(String, String)> = run
            .world
            .kv
            .iter()
            .filter(|(k, _)| k.starts_with(JOURNAL))
            .map(|(k, (v, _, _))| {
                let e: BTreeMap<String, Box<serde_json::value::RawValue>> =
                    serde_json::from_str(v).unwrap();
                (k.clone(), e["state"].get().to_owned())
            })
            .collect();
        let mut outcome = "none".to_owned();
        for (_, state) in entries {
            let (_, fin) = run.drive(state, json!({"input": "recover", "now_ms": run.now}));
            outcome = fin.map_or("killed".into(), |f| {
                f["outcome"].as_str().unwrap().to_owned()
            });
        }
        return (outcome, run.events);
    }
    let start = json!({"input": "run", "now_ms": now, "run_id": sc["run_id"], "seed": sc["seed"],
        "config": sc.get("config").cloned().unwrap_or_else(|| json!({}))});
    let steps = sc["steps"].as_array().unwrap();
    // `fuse`: the `run` input carries the first step (not a fan-out).
    let fuse = fuse && steps[0].get("fanout").is_none();
    let mut state = if fuse {
        String::new()
    } else {
        run.adv("", &start).0
    };
    let mut outcome = "completed".to_owned();
    for (i, s) in steps.iter().enumerate() {
        let mut input = match s.get("fanout") {
            Some(f) => json!({"input": "fanout", "now_ms": run.now, "fanout": {
                "id": s["id"], "min_results": f["min_results"],
                "branches": f["branches"].as_array().unwrap().iter().map(spec).collect::<Vec<_>>()}}),
            None => json!({"input": "step", "now_ms": run.now, "step": spec(s)}),
        };
        if fuse && i == 0 {
            let mut first = start.clone();
            first["step"] = input["step"].take();
            input = first;
        }
        let (next, fin) = run.drive(state, input);
        state = next;
        let Some(fin) = fin else {
            return ("killed".into(), run.events);
        };
        if fin["outcome"] != "ok" {
            outcome = fin["outcome"].as_str().unwrap().to_owned();
            break;
        }
    }
    if outcome == "completed" {
        run.drive(state, json!({"input": "end", "now_ms": run.now}));
    }
    (outcome, run.events)
}

/// `got` has every member `expected` names (arrays: the same length, item by item).
fn subset(expected: &Value, got: &Value) -> bool {
    match (expected, got) {
        (Value::Object(e), Value::Object(g)) => e
            .iter()
            .all(|(k, v)| g.get(k).is_some_and(|gv| subset(v, gv))),
        (Value::Array(e), Value::Array(g)) => {
            e.len() == g.len() && e.iter().zip(g).all(|(a, b)| subset(a, b))
        }
        _ => expected == got,
    }
}

#[test]
fn every_loop_vector_gives_the_same_states_and_effects_typed_and_as_json() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/loops");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    assert!(
        files.len() >= 40,
        "tests/loops/ has {} vectors",
        files.len()
    );
    let mut compared = 0;
    // Each vector twice: `run` then the first step, and the `run` input
    // carrying the first step (docs/runtime.md, "Inputs"): the same
    // expectations, and the same events byte for byte.
    for (file, fuse) in files.iter().flat_map(|f| [(f, false), (f, true)]) {
        let vector: Value = serde_json::from_str(&std::fs::read_to_string(file).unwrap()).unwrap();
        let name = vector["name"].as_str().unwrap();
        let mut world = World::default();
        let mut twin = World::default();
        for (i, r) in vector["runs"].as_array().unwrap().iter().enumerate() {
            let before = world.dead_letters.len();
            let (outcome, events) = run_scenario(&mut world, &r["scenario"], fuse);
            if fuse {
                let (o, e) = run_scenario(&mut twin, &r["scenario"], false);
                assert_eq!((&o, &e), (&outcome, &events), "{name} run {i}: fused");
            }
            let expect = &r["expect"];
            assert_eq!(
                outcome,
                expect["outcome"].as_str().unwrap(),
                "{name} run {i}: outcome"
            );
            let events = Value::Array(events);
            assert!(
                subset(&expect["events"], &events),
                "{name} run {i}: events\nexpected {}\n     got {events}",
                expect["events"]
            );
            let dead = Value::Array(world.dead_letters[before..].to_vec());
            assert!(
                subset(&expect["dead_letters"], &dead),
                "{name} run {i}: dead-letter records\nexpected {}\n     got {dead}",
                expect["dead_letters"]
            );
        }
        compared += world.compared;
        if fuse {
            assert_eq!(world.kv, twin.kv, "{name}: the store, fused");
            assert_eq!(world.dead_letters, twin.dead_letters, "{name}: fused");
        }
    }
    assert!(compared > 500, "only {compared} calls compared");
}
