//! The shared store vectors (`tests/store/operations.json`) against
//! `MemoryStore` and `SqliteStore` (a fresh file per case).
//!
//! Every op of every case runs; each mismatch is reported with the case, the
//! op and expected and got side by side. The Python and Node suites run the
//! same file against their stores.

mod store_ops;

use agent_recovery::store::{MemoryStore, SqliteStore};
use store_ops::{run_case, vectors};

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
