//! Differential property test: random operation sequences give the same
//! answers from `MemoryStore` and `SqliteStore`, two implementations that
//! share nothing but the argument checks.

mod store_ops;

use agent_recovery::store::{MemoryStore, SqliteOptions, SqliteStore, Store, Synchronous};
use proptest::prelude::*;
use serde_json::{Value, json};
use store_ops::apply;

const KEYS: &[&str] = &["a", "b", "a/1", "a/2", "b/\u{e9}"];
const STREAMS: &[&str] = &["s", "t"];
const PREFIXES: &[&str] = &["", "a", "a/"];
const VALUES: &[&str] = &["1", "\"x\"", "{\"n\":2}", "[]", "null"];

/// Whom a compare-and-set names: nobody, the live version, or a number.
#[derive(Clone, Debug)]
enum Expect {
    Absent,
    Current,
    Number(u64),
}

#[derive(Clone, Debug)]
enum Op {
    Get(usize, u64),
    Cas(usize, Expect, usize, Option<u64>, u64),
    Append(usize, usize, u64),
    Read(usize, u64, u64),
    Delete(usize),
    Keys(usize, u64),
    Purge(u64),
}

fn op() -> impl Strategy<Value = Op> {
    let key = 0..KEYS.len();
    let now = 0u64..30; // small, so that reads often land exactly on an expiry
    let expect = prop_oneof![
        1 => Just(Expect::Absent),
        3 => Just(Expect::Current),
        1 => (1u64..40).prop_map(Expect::Number),
    ];
    let ttl = prop_oneof![Just(None), (1u64..12).prop_map(Some)];
    prop_oneof![
        1 => (key.clone(), now.clone()).prop_map(|(k, t)| Op::Get(k, t)),
        4 => (key.clone(), expect, 0..VALUES.len(), ttl, now.clone())
            .prop_map(|(k, e, v, ttl, t)| Op::Cas(k, e, v, ttl, t)),
        2 => (0..STREAMS.len(), 0..VALUES.len(), now.clone()).prop_map(|(s, v, t)| Op::Append(s, v, t)),
        1 => (0..STREAMS.len(), 0u64..6, 0u64..4).prop_map(|(s, a, l)| Op::Read(s, a, l)),
        1 => key.clone().prop_map(Op::Delete),
        1 => (0..PREFIXES.len(), now.clone()).prop_map(|(p, t)| Op::Keys(p, t)),
        1 => now.prop_map(Op::Purge),
    ]
}

/// The op in the vector format, `Expect::Current` resolved against `oracle`.
fn to_json(op: &Op, oracle: &MemoryStore) -> Value {
    match op {
        Op::Get(k, t) => json!({"op": "get", "key": KEYS[*k], "now_ms": t}),
        Op::Cas(k, e, v, ttl, t) => {
            let expected = match e {
                Expect::Absent => None,
                Expect::Current => oracle.get(KEYS[*k], *t).ok().flatten().map(|c| c.version),
                Expect::Number(n) => Some(*n),
            };
            json!({"op": "cas", "key": KEYS[*k], "expected": expected, "value": VALUES[*v], "ttl_ms": ttl, "now_ms": t})
        }
        Op::Append(s, v, t) => {
            json!({"op": "append", "stream": STREAMS[*s], "record": VALUES[*v], "now_ms": t})
        }
        Op::Read(s, a, l) => json!({"op": "read", "stream": STREAMS[*s], "after": a, "limit": l}),
        Op::Delete(k) => json!({"op": "delete", "key": KEYS[*k]}),
        Op::Keys(p, t) => json!({"op": "keys", "prefix": PREFIXES[*p], "now_ms": t}),
        Op::Purge(t) => json!({"op": "purge_expired", "now_ms": t}),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn memory_and_sqlite_agree(ops in prop::collection::vec(op(), 1..60)) {
        let dir = tempfile::tempdir().unwrap();
        let options = SqliteOptions { synchronous: Synchronous::Normal, ..SqliteOptions::default() };
        let sqlite = SqliteStore::open_with(dir.path().join("s.db"), &options).unwrap();
        let memory = MemoryStore::new();
        let mut writes = 0;
        for (i, op) in ops.iter().enumerate() {
            let op = to_json(op, &memory);
            let m = apply(&memory, &|t| memory.purge_expired(t), &op);
            let s = apply(&sqlite, &|t| sqlite.purge_expired(t), &op);
            prop_assert_eq!(&m, &s, "op {} {}", i, op);
            writes += usize::from(m.get("written").is_some());
        }
        // Versions count the writes: the last write got version `writes`.
        let max = KEYS
            .iter()
            .filter_map(|k| memory.get(k, 0).ok().flatten())
            .map(|v| v.version)
            .max()
            .unwrap_or(0);
        prop_assert!(max <= writes as u64);
    }
}
