//! One store operation in the JSON form of `tests/store/operations.json`,
//! shared by the vector tests and the `store_worker` example (which the
//! cross-process tests drive over stdin/stdout).

use agent_recovery::store::{Cas, Store, StoreError};
use serde_json::{Value, json};

fn str_of<'a>(op: &'a Value, field: &str) -> &'a str {
    op[field]
        .as_str()
        .unwrap_or_else(|| panic!("op {op} has no string {field}"))
}

fn u64_of(op: &Value, field: &str) -> u64 {
    op[field]
        .as_u64()
        .unwrap_or_else(|| panic!("op {op} has no integer {field}"))
}

fn opt_u64(op: &Value, field: &str) -> Option<u64> {
    op[field].as_u64()
}

fn outcome<T>(r: Result<T, StoreError>, ok: impl FnOnce(T) -> Value) -> Value {
    match r {
        Ok(v) => ok(v),
        Err(e) => {
            assert!(
                e.message().contains(';'),
                "error message without a hint: {e}"
            );
            json!({ "error": e.kind().as_str() })
        }
    }
}

fn versioned(v: Option<agent_recovery::store::Versioned>) -> Value {
    v.map_or(
        Value::Null,
        |v| json!({"value": v.value, "version": v.version}),
    )
}

/// Run one op; returns what it gave, as the vectors write it.
pub fn apply(
    store: &dyn Store,
    purge: &dyn Fn(u64) -> Result<usize, StoreError>,
    op: &Value,
) -> Value {
    match str_of(op, "op") {
        "get" => outcome(
            store.get(str_of(op, "key"), u64_of(op, "now_ms")),
            versioned,
        ),
        "cas" => outcome(
            store.compare_and_set(
                str_of(op, "key"),
                opt_u64(op, "expected"),
                str_of(op, "value"),
                opt_u64(op, "ttl_ms"),
                u64_of(op, "now_ms"),
            ),
            |cas| match cas {
                Cas::Written { version } => json!({"written": {"version": version}}),
                Cas::Conflict { current } => json!({"conflict": {"current": versioned(current)}}),
            },
        ),
        "append" => outcome(
            store.append(
                str_of(op, "stream"),
                str_of(op, "record"),
                u64_of(op, "now_ms"),
            ),
            |seq| json!(seq),
        ),
        "read" => outcome(
            store.read(
                str_of(op, "stream"),
                u64_of(op, "after"),
                usize::try_from(u64_of(op, "limit")).expect("limit fits usize"),
            ),
            |records| json!(records),
        ),
        "delete" => outcome(store.delete(str_of(op, "key")), |b| json!(b)),
        "keys" => outcome(
            store.keys(str_of(op, "prefix"), u64_of(op, "now_ms")),
            |k| json!(k),
        ),
        "purge_expired" => outcome(purge(u64_of(op, "now_ms")), |n| json!(n)),
        other => panic!("unknown op {other:?} in {op}"),
    }
}

/// The cases of the shared store vectors (`tests/store/operations.json`).
#[allow(dead_code)] // not every test target that includes this module runs the vectors
pub fn vectors() -> Vec<Value> {
    let path =
        std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/store/operations.json");
    let text = std::fs::read_to_string(&path).expect("read tests/store/operations.json");
    let doc: Value = serde_json::from_str(&text).expect("operations.json is JSON");
    doc["cases"].as_array().expect("cases").clone()
}

/// Runs every op of one case on `store`, pushing each mismatch (case, op,
/// expected and got side by side) to `failures`.
#[allow(dead_code)]
pub fn run_case(
    backend: &str,
    case: &Value,
    store: &dyn Store,
    purge: &dyn Fn(u64) -> Result<usize, StoreError>,
    failures: &mut Vec<String>,
) {
    let name = case["name"].as_str().unwrap_or("?");
    for (i, op) in case["ops"].as_array().expect("ops").iter().enumerate() {
        let got = apply(store, purge, op);
        if got != op["expect"] {
            failures.push(format!(
                "{backend}: case {name:?} op {i} {}\n  expected: {}\n  got:      {got}",
                op["op"], op["expect"]
            ));
        }
    }
}
