//! The telemetry mapping's shared vectors (`tests/telemetry-map/lanes.json`,
//! also run by the guest, Node and Python) through the embedded reference
//! component's typed `agent:recovery/telemetry@0.3.0` `map-lane`, with
//! `bindgen!` types as the runtime uses them: each observation built as a WIT
//! value from the vector's JSON, each instruction written back as JSON and
//! compared with the vector, value for value.

use agent_recovery::Policy;
use serde_json::{Value, json};
use wasmtime::component::{Component, Linker, ResourceTable};
use wasmtime::{Engine, Store};
use wasmtime_wasi::{WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};

mod gen_ {
    wasmtime::component::bindgen!({
        inline: "package test:telemetry; world mapper { export agent:recovery/telemetry@0.3.0; }",
        path: [
            "../wit/agent-recovery@0.1.0",
            "../wit/agent-recovery@0.2.0",
            "../wit/agent-recovery@0.3.0",
        ],
        world: "test:telemetry/mapper",
    });
}

use gen_::agent::recovery0_3_0::runtime as rw;
use gen_::exports::agent::recovery0_3_0::telemetry as w;

struct Host {
    ctx: WasiCtx,
    table: ResourceTable,
}

impl WasiView for Host {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.ctx,
            table: &mut self.table,
        }
    }
}

fn s(v: &Value) -> String {
    v.as_str().expect("a string").to_owned()
}

fn opt_s(v: &Value) -> Option<String> {
    v.as_str().map(str::to_owned)
}

fn policy(v: &Value) -> Option<rw::PolicyIdentity> {
    v.as_object().map(|p| rw::PolicyIdentity {
        name: s(&p["name"]),
        version: s(&p["version"]),
        digest: s(&p["sha256"]),
    })
}

fn observation(o: &Value) -> w::Observation {
    use w::ObservationKind as K;
    let now_ms = o["now_ms"].as_u64().expect("now_ms");
    let kind = match &o["kind"] {
        Value::String(k) if k == "call_end" => K::CallEnd,
        Value::String(k) if k == "abandon" => K::Abandon,
        Value::Object(m) => {
            let (tag, x) = m.iter().next().expect("one member");
            match tag.as_str() {
                "lane" => K::Lane(w::LaneStart {
                    run_id: s(&x["run_id"]),
                    kind: match &x["kind"] {
                        Value::String(b) if b == "bare" => w::LaneKind::Bare,
                        k if k.get("step").is_some() => w::LaneKind::Step(w::StepLane {
                            id: s(&k["step"]["id"]),
                            tool: s(&k["step"]["tool"]),
                            target: opt_s(&k["step"]["target"]),
                        }),
                        k => w::LaneKind::Fanout(w::FanoutLane {
                            id: s(&k["fanout"]["id"]),
                            min_results: k["fanout"]["min_results"].as_u64().expect("u32") as u32,
                            branches: k["fanout"]["branches"].as_u64().expect("u32") as u32,
                        }),
                    },
                    policy: policy(&x["policy"]),
                }),
                "call_start" => K::CallStart(w::CallStart {
                    role: match x["role"].as_str() {
                        Some("fallback") => rw::CallRole::Fallback,
                        Some("compensation") => rw::CallRole::Compensation,
                        _ => rw::CallRole::Operation,
                    },
                    step: s(&x["step"]),
                    target: s(&x["target"]),
                    key: s(&x["key"]),
                    attempt: x["attempt"].as_u64().expect("attempt") as u32,
                    timeout_ms: x["timeout_ms"].as_u64(),
                }),
                "decided" => K::Decided(w::Decided {
                    decision: s(&x["decision"]),
                    policy: policy(&x["policy"]),
                }),
                "event" => K::Event(s(x)),
                "append" => K::Append(w::Appended {
                    stream: s(&x["stream"]),
                    record: s(&x["record"]),
                }),
                "finish" => K::Finish(w::Finished {
                    outcome: match x["outcome"].as_str().expect("outcome") {
                        "ok" => rw::StepOutcome::Ok,
                        "failed" => rw::StepOutcome::Failed,
                        "escalated" => rw::StepOutcome::Escalated,
                        "replan" => rw::StepOutcome::Replan,
                        "awaiting_input" => rw::StepOutcome::AwaitingInput,
                        "dead_lettered" => rw::StepOutcome::DeadLettered,
                        "cancelled" => rw::StepOutcome::Cancelled,
                        "in_flight" => rw::StepOutcome::InFlight,
                        "interrupted" => rw::StepOutcome::Interrupted,
                        other => panic!("outcome {other}"),
                    },
                    envelope: opt_s(&x["envelope"]),
                }),
                other => panic!("observation {other}"),
            }
        }
        other => panic!("observation kind {other}"),
    };
    w::Observation { now_ms, kind }
}

fn key(k: w::SpanKey) -> Value {
    json!(match k {
        w::SpanKey::Lane => "lane",
        w::SpanKey::Chain => "chain",
        w::SpanKey::Attempt => "attempt",
    })
}

fn attrs(a: &[w::Attribute]) -> Value {
    a.iter()
        .map(|a| {
            let value = match &a.value {
                w::AttributeValue::Text(t) => json!({ "text": t }),
                w::AttributeValue::Int(n) => json!({ "int": n }),
                w::AttributeValue::Float(f) => json!({ "float": f }),
                w::AttributeValue::Flag(b) => json!({ "flag": b }),
            };
            json!({ "key": a.key, "value": value })
        })
        .collect()
}

fn instruction(i: &w::Instruction) -> Value {
    use w::Instruction as I;
    match i {
        I::StartSpan(x) => {
            assert!(matches!(x.kind, w::SpanKind::Internal));
            json!({"start_span": {"key": key(x.key), "parent": x.parent.map(key), "name": x.name,
                "start_ms": x.start_ms, "attributes": attrs(&x.attributes)}})
        }
        I::AddEvent(x) => json!({"add_event": {"key": key(x.key), "name": x.name,
            "time_ms": x.time_ms, "attributes": attrs(&x.attributes)}}),
        I::AddLink(x) => json!({"add_link": {"key": key(x.key), "step": x.step,
            "attributes": attrs(&x.attributes)}}),
        I::SetAttributes(x) => {
            json!({"set_attributes": {"key": key(x.key), "attributes": attrs(&x.attributes)}})
        }
        I::SetError(x) => json!({"set_error": {"key": key(x.key), "description": x.description}}),
        I::EndSpan(x) => json!({"end_span": {"key": key(x.key), "end_ms": x.end_ms}}),
        I::RememberStep(x) => json!({"remember_step": {"key": key(x.key), "step": x.step}}),
        I::RecordMetric(x) => json!({"record_metric": {"instrument": x.instrument,
            "value": x.value, "attributes": attrs(&x.attributes)}}),
        I::EmitLog(x) => json!({"emit_log": {"key": x.key.map(key), "event_name": x.event_name,
            "time_ms": x.time_ms, "severity_number": x.severity_number,
            "severity_text": x.severity_text, "body": x.body, "attributes": attrs(&x.attributes)}}),
    }
}

fn mapper() -> (Store<Host>, gen_::Mapper) {
    let engine = Engine::default();
    let component =
        Component::new(&engine, Policy::reference_bytes()).expect("the reference compiles");
    let mut linker = Linker::<Host>::new(&engine);
    wasmtime_wasi::p2::add_to_linker_sync(&mut linker).expect("WASI links");
    let mut store = Store::new(
        &engine,
        Host {
            ctx: WasiCtxBuilder::new().build(),
            table: ResourceTable::new(),
        },
    );
    let bindings =
        gen_::Mapper::instantiate(&mut store, &component, &linker).expect("instantiates");
    (store, bindings)
}

fn cases() -> Vec<Value> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../tests/telemetry-map/lanes.json"
    );
    let doc: Value =
        serde_json::from_str(&std::fs::read_to_string(path).expect("lanes.json")).expect("JSON");
    doc["cases"].as_array().expect("cases").clone()
}

#[test]
fn the_shared_vectors_through_the_typed_export() {
    let (mut store, bindings) = mapper();
    let cases = cases();
    assert!(cases.len() >= 7);
    for case in cases {
        let name = case["name"].as_str().unwrap_or("?");
        let obs: Vec<w::Observation> = case["observations"]
            .as_array()
            .expect("observations")
            .iter()
            .map(observation)
            .collect();
        // One call with all of them, then one call per observation (the state carried).
        let all = bindings
            .agent_recovery0_3_0_telemetry()
            .call_map_lane(&mut store, "", &obs)
            .expect("no trap")
            .expect(name);
        let got: Value = all.instructions.iter().map(instruction).collect();
        assert_eq!(
            got, case["instructions"],
            "case {name}\nexpected: {:#}\n     got: {got:#}",
            case["instructions"]
        );
        let mut state = String::new();
        let mut one_by_one = Vec::new();
        for o in &obs {
            let m = bindings
                .agent_recovery0_3_0_telemetry()
                .call_map_lane(&mut store, &state, std::slice::from_ref(o))
                .expect("no trap")
                .expect(name);
            state = m.state;
            one_by_one.extend(m.instructions.iter().map(instruction));
        }
        assert_eq!(
            Value::Array(one_by_one),
            case["instructions"],
            "case {name}, one by one"
        );
    }
}

#[test]
fn the_json_twin_agrees() {
    let (mut store, bindings) = mapper();
    for case in cases() {
        let name = case["name"].as_str().unwrap_or("?");
        let m = bindings
            .agent_recovery0_3_0_telemetry()
            .call_map_lane_json(&mut store, "", &case["observations"].to_string())
            .expect("no trap")
            .expect(name);
        let got: Value = serde_json::from_str(&m.instructions).expect("JSON");
        assert_eq!(got, case["instructions"], "case {name}");
    }
}
