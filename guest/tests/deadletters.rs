//! The dead-letter lifecycle vectors (`tests/deadletters/*.json`) through the
//! guest's own functions; the hosts run the same files through the component.

use agent_recovery_policy::deadletters as d;
use serde_json::{Value, json};
use std::path::Path;

fn s(v: &Value) -> &str {
    v.as_str().unwrap_or_else(|| panic!("{v} is not a string"))
}

fn opt(v: &Value) -> Option<&str> {
    v.as_str()
}

fn n(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("{v} is not a u64"))
}

fn error(e: d::Error) -> Value {
    let kind = match e.kind {
        d::ErrorKind::InvalidArgument => "invalid-argument",
        d::ErrorKind::NotFound => "not-found",
        d::ErrorKind::Closed => "closed",
        d::ErrorKind::Conflict => "conflict",
        d::ErrorKind::InvalidRecord => "invalid-record",
    };
    json!({"kind": kind, "id": e.id, "detail": e.detail, "message": e.message})
}

fn change(c: d::Change) -> Value {
    json!({"item": c.item, "closes": c.closes, "entry": c.entry})
}

fn result<T>(r: Result<T, d::Error>, ok: impl FnOnce(T) -> Value) -> Value {
    match r {
        Ok(v) => json!({"ok": ok(v)}),
        Err(e) => json!({"err": error(e)}),
    }
}

/// One case's answer as `{"ok": ..}` or `{"err": ..}`.
fn call(name: &str, a: &[Value]) -> Value {
    match name {
        "apply" => {
            let action = match s(&a[0]) {
                "purge" => d::Action::Purge,
                "request" => d::Action::Request,
                "take" => d::Action::Take,
                other => panic!("unknown action {other}"),
            };
            result(
                d::apply(action, n(&a[1]), s(&a[2]), opt(&a[3]), n(&a[4])),
                change,
            )
        }
        "finish" => json!({"ok": change(d::finish(opt(&a[0]), n(&a[1]), s(&a[2]), n(&a[3])))}),
        "pending" => json!({"ok": d::pending(opt(&a[0]))}),
        "item" => json!({"ok": d::item(opt(&a[0]))}),
        "parse-id" => result(d::parse_id(s(&a[0])), |v| json!(v)),
        "not-found" => json!({"ok": error(d::not_found(s(&a[0])))}),
        "cas-rounds" => json!({"ok": d::CAS_ROUNDS}),
        "cas-exhausted" => json!({"ok": d::cas_exhausted(s(&a[0]))}),
        "replay-key" => json!({"ok": d::replay_key(s(&a[0]), n(&a[1]))}),
        "replay-step" => result(d::replay_step(n(&a[0]), s(&a[1]), n(&a[2])), |v| json!(v)),
        "depth" => json!({"ok": d::depth(n(&a[0]), opt(&a[1]))}),
        "close-one" => json!({"ok": d::close_one(opt(&a[0]))}),
        "depth-event" => {
            json!({"ok": d::depth_event(n(&a[0]), n(&a[1]), n(&a[2]), n(&a[3]), s(&a[4]))})
        }
        other => panic!("unknown call {other}"),
    }
}

#[test]
fn every_dead_letter_vector() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/deadletters");
    let mut count = 0;
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    for path in files
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
    {
        let file: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        for case in file["cases"].as_array().unwrap() {
            let got = call(s(&case["call"]), case["args"].as_array().unwrap());
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
