//! `SqliteStore` on real files: durability across reopen, the schema on
//! disk, refusal of foreign, newer and damaged files, lock contention, and
//! concurrent compare-and-set from several connections.

use std::sync::{Arc, Barrier};
use std::time::Duration;

use agent_recovery::store::{
    APPLICATION_ID, Cas, SCHEMA_SQL, SCHEMA_VERSION, SqliteOptions, SqliteStore, Store,
    StoreErrorKind, Synchronous,
};
use rusqlite::Connection;

const T: u64 = 1_700_000_000_000;

fn written(cas: Cas) -> u64 {
    match cas {
        Cas::Written { version } => version,
        other => panic!("expected a write, got {other:?}"),
    }
}

#[test]
fn data_and_versions_survive_reopening() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.db");
    {
        let s = SqliteStore::open(&path).unwrap();
        assert_eq!(
            written(s.compare_and_set("a", None, "1", None, T).unwrap()),
            1
        );
        assert_eq!(
            written(s.compare_and_set("b", None, "2", Some(10), T).unwrap()),
            2
        );
        assert!(s.delete("a").unwrap());
        assert_eq!(s.append("j", r#"{"n":1}"#, T).unwrap(), 1);
    }
    let s = SqliteStore::open(&path).unwrap();
    assert_eq!(s.path(), path);
    assert_eq!(s.get("a", T).unwrap(), None);
    assert_eq!(s.get("b", T + 9).unwrap().unwrap().version, 2);
    assert_eq!(s.get("b", T + 10).unwrap(), None);
    // The revision counter is in the file: the deleted key's version 1 and
    // version 2 are never issued again.
    assert_eq!(
        written(s.compare_and_set("a", None, "3", None, T).unwrap()),
        3
    );
    assert_eq!(s.append("j", r#"{"n":2}"#, T).unwrap(), 2);
    assert_eq!(s.read("j", 0, 10).unwrap().len(), 2);
}

#[test]
fn the_file_has_the_documented_schema_and_pragmas() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.db");
    drop(SqliteStore::open(&path).unwrap());
    let raw = Connection::open(&path).unwrap();
    let pragma = |name: &str| -> String {
        raw.query_row(&format!("PRAGMA {name}"), [], |r| {
            r.get::<_, rusqlite::types::Value>(0)
        })
        .map(|v| format!("{v:?}"))
        .unwrap()
    };
    assert_eq!(pragma("journal_mode"), "Text(\"wal\")");
    assert_eq!(
        pragma("application_id"),
        format!("Integer({APPLICATION_ID})")
    );
    assert_eq!(pragma("user_version"), format!("Integer({SCHEMA_VERSION})"));
    assert_eq!(APPLICATION_ID, i64::from_be_bytes(*b"\0\0\0\0ARST"));
    // Every table and index of the file is created by schema.sql, verbatim.
    let mut stmt = raw
        .prepare("SELECT name, sql FROM sqlite_master ORDER BY name")
        .unwrap();
    let objects: Vec<(String, String)> = stmt
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let names: Vec<&str> = objects.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        ["ar_entries", "ar_entries_expiry", "ar_meta", "ar_records"]
    );
    for (name, sql) in &objects {
        assert!(
            SCHEMA_SQL.contains(sql.as_str()),
            "{name}: {sql} is not in schema.sql"
        );
    }
}

#[test]
fn files_that_are_not_stores_are_refused_with_a_kind() {
    let dir = tempfile::tempdir().unwrap();
    let case = |name: &str, bytes: &[u8]| {
        let path = dir.path().join(name);
        std::fs::write(&path, bytes).unwrap();
        let err = SqliteStore::open(&path).expect_err(name);
        assert!(err.message().contains(name), "{err}");
        assert!(err.message().contains(';'), "no hint: {err}");
        err.kind()
    };
    assert_eq!(
        case("text.db", &b"hello, not a database\n".repeat(100)),
        StoreErrorKind::Corrupt
    );
    let mut header = b"SQLite format 3\0".to_vec();
    header.extend(std::iter::repeat_n(0xA5, 4096));
    assert_eq!(
        case("garbage-after-header.db", &header),
        StoreErrorKind::Corrupt
    );

    let foreign = dir.path().join("foreign.db");
    Connection::open(&foreign)
        .unwrap()
        .execute_batch("CREATE TABLE users (id INTEGER PRIMARY KEY)")
        .unwrap();
    let err = SqliteStore::open(&foreign).unwrap_err();
    assert_eq!(err.kind(), StoreErrorKind::Incompatible, "{err}");

    let other_app = dir.path().join("other-app.db");
    Connection::open(&other_app)
        .unwrap()
        .execute_batch("PRAGMA application_id = 42")
        .unwrap();
    let err = SqliteStore::open(&other_app).unwrap_err();
    assert_eq!(err.kind(), StoreErrorKind::Incompatible, "{err}");
    assert!(err.message().contains("application_id 42"), "{err}");

    let newer = dir.path().join("newer.db");
    drop(SqliteStore::open(&newer).unwrap());
    Connection::open(&newer)
        .unwrap()
        .execute_batch("PRAGMA user_version = 2")
        .unwrap();
    let err = SqliteStore::open(&newer).unwrap_err();
    assert_eq!(err.kind(), StoreErrorKind::Incompatible, "{err}");
    assert!(err.message().contains("schema version 2"), "{err}");
    assert!(err.message().contains("upgrade"), "{err}");

    let err = SqliteStore::open(dir.path().join("no/such/dir/store.db")).unwrap_err();
    assert_eq!(err.kind(), StoreErrorKind::Io, "{err}");
    let err = SqliteStore::open(dir.path()).unwrap_err();
    assert_eq!(err.kind(), StoreErrorKind::Io, "a directory: {err}");
}

#[test]
fn synchronous_is_full_unless_asked_otherwise() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.db");
    let s = SqliteStore::open(&path).unwrap();
    assert_eq!(s.synchronous().unwrap(), Synchronous::Full);
    let normal = SqliteOptions {
        synchronous: Synchronous::Normal,
        ..SqliteOptions::default()
    };
    let fast = SqliteStore::open_with(&path, &normal).unwrap();
    assert_eq!(fast.synchronous().unwrap(), Synchronous::Normal);
    // A per-connection setting: the first connection keeps FULL.
    assert_eq!(s.synchronous().unwrap(), Synchronous::Full);
    written(fast.compare_and_set("k", None, "1", None, T).unwrap());
    assert_eq!(s.get("k", T).unwrap().unwrap().version, 1);
}

#[test]
fn a_truncated_store_reads_as_corrupt() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.db");
    {
        let s = SqliteStore::open(&path).unwrap();
        let value = format!("\"{}\"", "x".repeat(200));
        for i in 0..300 {
            written(
                s.compare_and_set(&format!("k{i}"), None, &value, None, T)
                    .unwrap(),
            );
        }
    } // closing the last connection checkpoints the WAL into the file
    let len = std::fs::metadata(&path).unwrap().len();
    assert!(len > 3 * 4096, "the store is only {len} bytes");
    std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(3 * 4096)
        .unwrap();
    // SQLite notices the missing pages when it reads the schema: at open.
    let err = SqliteStore::open(&path).unwrap_err();
    assert_eq!(err.kind(), StoreErrorKind::Corrupt, "{err}");
    assert!(err.message().contains("malformed"), "{err}");
}

#[test]
fn an_empty_file_becomes_a_store() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("empty.db");
    std::fs::write(&path, b"").unwrap();
    let s = SqliteStore::open(&path).unwrap();
    assert_eq!(
        written(s.compare_and_set("k", None, "1", None, T).unwrap()),
        1
    );
}

#[test]
fn rows_that_break_the_schema_read_as_corrupt() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.db");
    let s = SqliteStore::open(&path).unwrap();
    let raw = Connection::open(&path).unwrap();
    raw.execute_batch(
        "INSERT INTO ar_entries VALUES ('blob', x'00ff', 1, NULL, 0);
         INSERT INTO ar_entries VALUES ('huge', '1', 9007199254740992, NULL, 0);
         INSERT INTO ar_records VALUES ('s', 1, x'00ff', 0);",
    )
    .unwrap();
    for key in ["blob", "huge"] {
        let err = s.get(key, T).unwrap_err();
        assert_eq!(err.kind(), StoreErrorKind::Corrupt, "{key}: {err}");
    }
    assert_eq!(
        s.read("s", 0, 10).unwrap_err().kind(),
        StoreErrorKind::Corrupt
    );
    // A CAS on a damaged row fails the same way and writes nothing.
    let err = s.compare_and_set("huge", None, "2", None, T).unwrap_err();
    assert_eq!(err.kind(), StoreErrorKind::Corrupt);
    // Other keys still work.
    assert_eq!(
        written(s.compare_and_set("ok", None, "1", None, T).unwrap()),
        1
    );
}

#[test]
fn a_held_write_lock_gives_unavailable_after_the_busy_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.db");
    let options = SqliteOptions {
        busy_timeout: Duration::from_millis(20),
        ..SqliteOptions::default()
    };
    let s = SqliteStore::open_with(&path, &options).unwrap();
    written(s.compare_and_set("k", None, "1", None, T).unwrap());
    let holder = Connection::open(&path).unwrap();
    holder.execute_batch("BEGIN IMMEDIATE").unwrap();
    let err = s.compare_and_set("k", Some(1), "2", None, T).unwrap_err();
    assert_eq!(err.kind(), StoreErrorKind::Unavailable, "{err}");
    assert!(err.message().contains("busy timeout"), "{err}");
    assert_eq!(
        s.append("j", "1", T).unwrap_err().kind(),
        StoreErrorKind::Unavailable
    );
    // Readers are not blocked by the writer (WAL).
    assert_eq!(s.get("k", T).unwrap().unwrap().value, "1");
    holder.execute_batch("ROLLBACK").unwrap();
    assert_eq!(
        written(s.compare_and_set("k", Some(1), "2", None, T).unwrap()),
        2
    );
}

#[test]
fn writes_purge_expired_rows_on_their_way() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.db");
    let s = SqliteStore::open(&path).unwrap();
    for i in 0..100 {
        written(
            s.compare_and_set(&format!("e/{i}"), None, "0", Some(10), T)
                .unwrap(),
        );
    }
    let raw = Connection::open(&path).unwrap();
    let rows = || -> i64 {
        raw.query_row("SELECT COUNT(*) FROM ar_entries", [], |r| r.get(0))
            .unwrap()
    };
    assert_eq!(rows(), 100);
    // One write after expiry removes a batch of 64, then writes its own row.
    written(s.compare_and_set("live", None, "1", None, T + 10).unwrap());
    assert_eq!(rows(), 100 - 64 + 1);
    assert_eq!(s.purge_expired(T + 10).unwrap(), 36);
    assert_eq!(rows(), 1);
}

#[test]
fn concurrent_cas_from_several_connections_has_one_winner_per_version() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.db");
    let first = SqliteStore::open(&path).unwrap();
    written(first.compare_and_set("n", None, "0", None, T).unwrap());
    const WORKERS: usize = 4;
    const ROUNDS: usize = 50;
    let barrier = Arc::new(Barrier::new(WORKERS));
    let threads: Vec<_> = (0..WORKERS)
        .map(|_| {
            // A connection of its own per thread, as separate processes have.
            let s = SqliteStore::open(&path).unwrap();
            let barrier = barrier.clone();
            std::thread::spawn(move || {
                barrier.wait();
                let mut wins = Vec::new();
                for _ in 0..ROUNDS {
                    let cur = s.get("n", T).unwrap().unwrap();
                    let n: u64 = cur.value.parse().unwrap();
                    let next = (n + 1).to_string();
                    if let Cas::Written { version } = s
                        .compare_and_set("n", Some(cur.version), &next, None, T)
                        .unwrap()
                    {
                        wins.push((n, version));
                    }
                }
                wins
            })
        })
        .collect();
    let mut wins: Vec<(u64, u64)> = threads
        .into_iter()
        .flat_map(|t| t.join().unwrap())
        .collect();
    wins.sort_unstable();
    let last = first.get("n", T).unwrap().unwrap();
    let n: u64 = last.value.parse().unwrap();
    // Each value was incremented by exactly one winner, and each win got
    // the next version: versions 2..=n+1 in order.
    let expected: Vec<(u64, u64)> = (0..n).map(|i| (i, i + 2)).collect();
    assert_eq!(wins, expected);
    assert_eq!(last.version, n + 1);
    assert!(
        n >= ROUNDS as u64,
        "fewer wins than one worker alone gets: {n}"
    );
}

/// Many connections opening one new file at the same moment all get the
/// store: the first creates the schema, the others must not mistake the
/// half-seen schema for a foreign database (CI saw exactly that once, from
/// six processes). Rounds make the interleaving likely without a sleep.
#[test]
fn connections_racing_to_create_the_schema_all_open_the_store() {
    const ROUNDS: usize = 60;
    const OPENERS: usize = 6;
    let dir = tempfile::tempdir().unwrap();
    for round in 0..ROUNDS {
        let path = Arc::new(dir.path().join(format!("race-{round}.db")));
        let barrier = Arc::new(Barrier::new(OPENERS));
        let handles: Vec<_> = (0..OPENERS)
            .map(|_| {
                let (path, barrier) = (Arc::clone(&path), Arc::clone(&barrier));
                std::thread::spawn(move || {
                    barrier.wait();
                    SqliteStore::open(&*path).map(|_| ())
                })
            })
            .collect();
        for h in handles {
            if let Err(e) = h.join().unwrap() {
                panic!("round {round}: an opener was refused: {e}");
            }
        }
    }
}
