//! The shared store vectors (`tests/store/operations.json`) against
//! `MemoryStore` and `SqliteStore` (a fresh file per case).
//!
//! Every op of every case runs; each mismatch is reported with the case, the
//! op and expected and got side by side. The Python and Node suites run the
//! same file against their stores.

use std::path::PathBuf;

mod store_ops;

use agent_recovery::store::{MemoryStore, SqliteStore, Store, StoreError};
use serde_json::Value;
use store_ops::apply;

fn vectors() -> Vec<Value> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/store/operations.json");
    let text = std::fs::read_to_string(&path).expect("read tests/store/operations.json");
    let doc: Value = serde_json::from_str(&text).expect("operations.json is JSON");
    doc["cases"].as_array().expect("cases").clone()
}

fn run_case(
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

#[test]
fn memory_store_passes_the_shared_vectors() {
    let mut failures = Vec::new();
    let cases = vectors();
    assert!(cases.len() >= 10, "too few cases: {}", cases.len());
    for case in &cases {
        let store = MemoryStore::new();
        run_case(
            "memory",
            case,
            &store,
            &|now| store.purge_expired(now),
            &mut failures,
        );
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn sqlite_store_passes_the_shared_vectors() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut failures = Vec::new();
    for (n, case) in vectors().iter().enumerate() {
        let store = SqliteStore::open(dir.path().join(format!("case-{n}.db"))).expect("open");
        run_case(
            "sqlite",
            case,
            &store,
            &|now| store.purge_expired(now),
            &mut failures,
        );
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
