//! The dead-letter lifecycle vectors (`tests/deadletters/*.json`) through the
//! reference component's `agent:recovery/dead-letters@0.3.0`, with
//! `bindgen!` types, as the runtime calls it (`runtime/deadletters.rs`):
//! every answer byte for byte as the vectors give it.

use std::path::Path;

use agent_recovery::Policy;
use serde_json::{Value, json};
use wasmtime::component::{Component, Linker, ResourceTable};
use wasmtime::{Engine, Store};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

mod gen_ {
    wasmtime::component::bindgen!({
        inline: "package agent-recovery:dl-test; world dl { export agent:recovery/dead-letters@0.3.0; }",
        path: [
            "../wit/agent-recovery@0.1.0",
            "../wit/agent-recovery@0.2.0",
            "../wit/agent-recovery@0.3.0",
        ],
        world: "agent-recovery:dl-test/dl",
    });
}

use gen_::exports::agent::recovery0_3_0::dead_letters as dl;

struct Host {
    wasi: WasiCtx,
    table: ResourceTable,
}

impl WasiView for Host {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

fn error(e: dl::DeadLetterError) -> Value {
    let kind = match e.kind {
        dl::ErrorKind::InvalidArgument => "invalid-argument",
        dl::ErrorKind::NotFound => "not-found",
        dl::ErrorKind::Closed => "closed",
        dl::ErrorKind::Conflict => "conflict",
        dl::ErrorKind::InvalidRecord => "invalid-record",
    };
    json!({"kind": kind, "id": e.id, "detail": e.detail, "message": e.message})
}

fn change(c: dl::Change) -> Value {
    json!({"item": c.item, "closes": c.closes, "entry": c.entry})
}

fn result<T>(r: Result<T, dl::DeadLetterError>, ok: impl FnOnce(T) -> Value) -> Value {
    match r {
        Ok(v) => json!({"ok": ok(v)}),
        Err(e) => json!({"err": error(e)}),
    }
}

fn s(v: &Value) -> &str {
    v.as_str().unwrap_or_else(|| panic!("{v} is not a string"))
}

fn n(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("{v} is not a u64"))
}

fn call(store: &mut Store<Host>, g: &dl::Guest, name: &str, a: &[Value]) -> Value {
    let opt = |v: &Value| v.as_str().map(str::to_owned);
    match name {
        "apply" => {
            let action = match s(&a[0]) {
                "purge" => dl::Action::Purge,
                "request" => dl::Action::Request,
                "take" => dl::Action::Take,
                other => panic!("unknown action {other}"),
            };
            let current = opt(&a[3]);
            let r = g
                .call_apply(
                    store,
                    action,
                    n(&a[1]),
                    s(&a[2]),
                    current.as_deref(),
                    n(&a[4]),
                )
                .unwrap();
            result(r, change)
        }
        "finish" => {
            let current = opt(&a[0]);
            let c = g
                .call_finish(store, current.as_deref(), n(&a[1]), s(&a[2]), n(&a[3]))
                .unwrap();
            json!({"ok": change(c)})
        }
        "pending" => json!({"ok": g.call_pending(store, opt(&a[0]).as_deref()).unwrap()}),
        "item" => json!({"ok": g.call_item(store, opt(&a[0]).as_deref()).unwrap()}),
        "parse-id" => result(g.call_parse_id(store, s(&a[0])).unwrap(), |v| json!(v)),
        "not-found" => json!({"ok": error(g.call_not_found(store, s(&a[0])).unwrap())}),
        "cas-rounds" => json!({"ok": g.call_cas_rounds(store).unwrap()}),
        "cas-exhausted" => json!({"ok": g.call_cas_exhausted(store, s(&a[0])).unwrap()}),
        "replay-key" => json!({"ok": g.call_replay_key(store, s(&a[0]), n(&a[1])).unwrap()}),
        "replay-step" => result(
            g.call_replay_step(store, n(&a[0]), s(&a[1]), n(&a[2]))
                .unwrap(),
            |v| json!(v),
        ),
        "depth" => json!({"ok": g.call_depth(store, n(&a[0]), opt(&a[1]).as_deref()).unwrap()}),
        "close-one" => json!({"ok": g.call_close_one(store, opt(&a[0]).as_deref()).unwrap()}),
        "depth-event" => json!({"ok": g
            .call_depth_event(store, n(&a[0]), n(&a[1]), n(&a[2]), n(&a[3]), s(&a[4]))
            .unwrap()}),
        other => panic!("unknown call {other}"),
    }
}

#[test]
fn every_dead_letter_vector_through_the_component() {
    let engine = Engine::default();
    let component = Component::new(&engine, Policy::reference_bytes()).unwrap();
    let mut linker = Linker::<Host>::new(&engine);
    wasmtime_wasi::p2::add_to_linker_sync(&mut linker).unwrap();
    let mut store = Store::new(
        &engine,
        Host {
            wasi: WasiCtx::builder().build(),
            table: ResourceTable::new(),
        },
    );
    let bindings = gen_::Dl::instantiate(&mut store, &component, &linker).unwrap();
    let g = bindings.agent_recovery0_3_0_dead_letters();

    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/deadletters");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    let mut count = 0;
    for path in &files {
        let file: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        for case in file["cases"].as_array().unwrap() {
            let got = call(
                &mut store,
                g,
                s(&case["call"]),
                case["args"].as_array().unwrap(),
            );
            let want = match case.get("ok") {
                Some(ok) => json!({"ok": ok}),
                None => json!({"err": case["err"]}),
            };
            assert_eq!(got, want, "{}: {}", path.display(), case["name"]);
            count += 1;
        }
    }
    assert!(count >= 50, "only {count} cases");
}
