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

/// A Redis stream starts at the server's clock in microseconds, not at 1
/// (`host/src/store/redis/append.lua`): 2001-09-09 in microseconds.
#[allow(dead_code)]
pub const TIME_FLOOR: u64 = 1_000_000_000_000_000;

/// A Redis store seen through the vectors' numbering: each stream's numbers
/// relative to its first, which must be a time floor (>= [`TIME_FLOOR`]).
#[allow(dead_code)]
pub struct Rebased<'a> {
    /// The store under test.
    pub inner: &'a dyn Store,
    seqs: std::sync::Mutex<std::collections::HashMap<String, u64>>,
}

#[allow(dead_code)]
impl<'a> Rebased<'a> {
    /// Wraps `inner`.
    pub fn new(inner: &'a dyn Store) -> Self {
        Rebased {
            inner,
            seqs: std::sync::Mutex::default(),
        }
    }

    fn base(&self, stream: &str) -> u64 {
        self.seqs.lock().unwrap().get(stream).copied().unwrap_or(0)
    }
}

impl Store for Rebased<'_> {
    fn get(
        &self,
        key: &str,
        now_ms: u64,
    ) -> Result<Option<agent_recovery::store::Versioned>, StoreError> {
        self.inner.get(key, now_ms)
    }
    fn compare_and_set(
        &self,
        key: &str,
        expected: Option<u64>,
        value: &str,
        ttl_ms: Option<u64>,
        now_ms: u64,
    ) -> Result<Cas, StoreError> {
        self.inner
            .compare_and_set(key, expected, value, ttl_ms, now_ms)
    }
    fn append(&self, stream: &str, record: &str, now_ms: u64) -> Result<u64, StoreError> {
        let n = self.inner.append(stream, record, now_ms)?;
        let mut seqs = self.seqs.lock().unwrap();
        let base = *seqs.entry(stream.to_owned()).or_insert_with(|| {
            assert!(
                n >= TIME_FLOOR,
                "the first number of stream {stream} is {n}, not a time floor"
            );
            n - 1
        });
        Ok(n - base)
    }
    fn read(
        &self,
        stream: &str,
        after: u64,
        limit: usize,
    ) -> Result<Vec<(u64, String)>, StoreError> {
        let base = self.base(stream);
        let after = if base == 0 || after == 0 {
            after
        } else {
            (after + base).min(agent_recovery::store::MAX_INTEGER)
        };
        Ok(self
            .inner
            .read(stream, after, limit)?
            .into_iter()
            .map(|(n, r)| (n - base, r))
            .collect())
    }
    fn delete(&self, key: &str) -> Result<bool, StoreError> {
        self.inner.delete(key)
    }
    fn keys(&self, prefix: &str, now_ms: u64) -> Result<Vec<String>, StoreError> {
        self.inner.keys(prefix, now_ms)
    }
}
