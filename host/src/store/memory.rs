//! [`MemoryStore`]: the store in process memory, for tests and `simulate`.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Mutex, MutexGuard};

use super::{Cas, Store, StoreError, StoreErrorKind, Versioned, check, is_live};

/// A [`Store`] in process memory: same semantics as the SQLite store, nothing
/// survives the process. Cheap to create; share it behind an `Arc`.
///
/// # Default
///
/// Empty; the first write gets version 1.
#[derive(Debug, Default)]
pub struct MemoryStore {
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    entries: BTreeMap<String, Entry>,
    /// (expires_at_ms, key) of every entry with a TTL, to purge in order.
    expiries: BTreeSet<(u64, String)>,
    streams: HashMap<String, Vec<String>>,
    /// The last version issued (0 before the first write).
    revision: u64,
}

#[derive(Debug)]
struct Entry {
    value: String,
    version: u64,
    expires_at_ms: Option<u64>,
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// Remove every entry expired at `now_ms`; returns how many were removed.
    pub fn purge_expired(&self, now_ms: u64) -> Result<usize, StoreError> {
        check::integer("now_ms", now_ms)?;
        Ok(self.lock().purge(now_ms))
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // Nothing panics while the lock is held, so a poisoned lock still
        // guards consistent data.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Inner {
    fn purge(&mut self, now_ms: u64) -> usize {
        let mut removed = 0;
        while let Some((at, key)) = self.expiries.first().cloned() {
            if now_ms < at {
                break;
            }
            self.expiries.pop_first();
            self.entries.remove(&key);
            removed += 1;
        }
        removed
    }

    fn live(&self, key: &str, now_ms: u64) -> Option<Versioned> {
        self.entries
            .get(key)
            .filter(|e| is_live(e.expires_at_ms, now_ms))
            .map(|e| Versioned {
                value: e.value.clone(),
                version: e.version,
            })
    }

    fn remove(&mut self, key: &str) -> bool {
        match self.entries.remove(key) {
            Some(old) => {
                if let Some(at) = old.expires_at_ms {
                    self.expiries.remove(&(at, key.to_owned()));
                }
                true
            }
            None => false,
        }
    }
}

impl Store for MemoryStore {
    /// Never: its lock is held only for a map operation.
    fn may_block(&self) -> bool {
        false
    }

    fn get(&self, key: &str, now_ms: u64) -> Result<Option<Versioned>, StoreError> {
        check::name("key", key)?;
        check::integer("now_ms", now_ms)?;
        Ok(self.lock().live(key, now_ms))
    }

    fn compare_and_set(
        &self,
        key: &str,
        expected: Option<u64>,
        value: &str,
        ttl_ms: Option<u64>,
        now_ms: u64,
    ) -> Result<Cas, StoreError> {
        let expires_at_ms = check::cas(key, expected, value, ttl_ms, now_ms)?;
        let mut inner = self.lock();
        let current = inner.live(key, now_ms);
        if current.as_ref().map(|c| c.version) != expected {
            return Ok(Cas::Conflict { current });
        }
        // Like the SQLite store: a write (not a conflict) purges on its way.
        inner.purge(now_ms);
        if inner.revision >= check::MAX_INTEGER {
            return Err(StoreError::new(
                StoreErrorKind::Unavailable,
                format!(
                    "the store has issued {} versions, the most it can; copy the live entries to a new store",
                    inner.revision
                ),
            ));
        }
        inner.revision += 1;
        let version = inner.revision;
        inner.remove(key);
        if let Some(at) = expires_at_ms {
            inner.expiries.insert((at, key.to_owned()));
        }
        inner.entries.insert(
            key.to_owned(),
            Entry {
                value: value.to_owned(),
                version,
                expires_at_ms,
            },
        );
        Ok(Cas::Written { version })
    }

    fn append(&self, stream: &str, record: &str, now_ms: u64) -> Result<u64, StoreError> {
        check::name("stream", stream)?;
        check::integer("now_ms", now_ms)?;
        check::json("record", stream, record)?;
        let mut inner = self.lock();
        let records = inner.streams.entry(stream.to_owned()).or_default();
        records.push(record.to_owned());
        Ok(records.len() as u64)
    }

    fn read(
        &self,
        stream: &str,
        after: u64,
        limit: usize,
    ) -> Result<Vec<(u64, String)>, StoreError> {
        check::name("stream", stream)?;
        check::integer("after", after)?;
        let inner = self.lock();
        let Some(records) = inner.streams.get(stream) else {
            return Ok(Vec::new());
        };
        let skip = usize::try_from(after).unwrap_or(usize::MAX);
        Ok(records
            .iter()
            .enumerate()
            .skip(skip)
            .take(limit)
            .map(|(i, r)| (i as u64 + 1, r.clone()))
            .collect())
    }

    fn delete(&self, key: &str) -> Result<bool, StoreError> {
        check::name("key", key)?;
        Ok(self.lock().remove(key))
    }

    fn keys(&self, prefix: &str, now_ms: u64) -> Result<Vec<String>, StoreError> {
        check::prefix(prefix)?;
        check::integer("now_ms", now_ms)?;
        let inner = self.lock();
        Ok(inner
            .entries
            .range::<str, _>((
                std::ops::Bound::Included(prefix),
                std::ops::Bound::Unbounded,
            ))
            .take_while(|(k, _)| k.starts_with(prefix))
            .filter(|(_, e)| is_live(e.expires_at_ms, now_ms))
            .map(|(k, _)| k.clone())
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: u64 = 1_700_000_000_000;

    fn written(cas: Cas) -> u64 {
        match cas {
            Cas::Written { version } => version,
            other => panic!("expected a write, got {other:?}"),
        }
    }

    #[test]
    fn create_update_and_conflict() {
        let s = MemoryStore::new();
        assert_eq!(s.get("k", T).unwrap(), None);
        assert_eq!(
            written(s.compare_and_set("k", None, "1", None, T).unwrap()),
            1
        );
        // A second create loses and sees the winner.
        assert_eq!(
            s.compare_and_set("k", None, "2", None, T).unwrap(),
            Cas::Conflict {
                current: Some(Versioned {
                    value: "1".into(),
                    version: 1
                })
            }
        );
        // A stale version loses; the right one wins with the next revision.
        assert!(matches!(
            s.compare_and_set("k", Some(7), "2", None, T).unwrap(),
            Cas::Conflict { .. }
        ));
        assert_eq!(
            written(s.compare_and_set("k", Some(1), "2", None, T).unwrap()),
            2
        );
        assert_eq!(s.get("k", T).unwrap().unwrap().value, "2");
        // Expecting a version of an absent key is a conflict with no current value.
        assert_eq!(
            s.compare_and_set("other", Some(2), "3", None, T).unwrap(),
            Cas::Conflict { current: None }
        );
    }

    #[test]
    fn versions_are_store_wide_and_never_reused() {
        let s = MemoryStore::new();
        assert_eq!(
            written(s.compare_and_set("a", None, "1", None, T).unwrap()),
            1
        );
        assert_eq!(
            written(s.compare_and_set("b", None, "1", None, T).unwrap()),
            2
        );
        assert!(s.delete("a").unwrap());
        assert!(!s.delete("a").unwrap());
        // Recreated: a new version, so a CAS naming the old one fails.
        assert_eq!(
            written(s.compare_and_set("a", None, "1", None, T).unwrap()),
            3
        );
        assert!(matches!(
            s.compare_and_set("a", Some(1), "\"x\"", None, T).unwrap(),
            Cas::Conflict { .. }
        ));
    }

    #[test]
    fn ttl_expires_at_now_plus_ttl() {
        let s = MemoryStore::new();
        written(
            s.compare_and_set("lease", None, "{}", Some(100), T)
                .unwrap(),
        );
        assert!(s.get("lease", T + 99).unwrap().is_some());
        assert_eq!(s.get("lease", T + 100).unwrap(), None);
        assert_eq!(s.keys("", T + 99).unwrap(), vec!["lease".to_owned()]);
        assert!(s.keys("", T + 100).unwrap().is_empty());
        // Expired counts as absent for CAS: None wins, Some(old) loses.
        assert!(matches!(
            s.compare_and_set("lease", Some(1), "{}", None, T + 100)
                .unwrap(),
            Cas::Conflict { current: None }
        ));
        assert_eq!(
            written(
                s.compare_and_set("lease", None, "{}", None, T + 100)
                    .unwrap()
            ),
            2
        );
        // No TTL: never expires.
        assert!(s.get("lease", super::check::MAX_INTEGER).unwrap().is_some());
    }

    #[test]
    fn purge_removes_only_expired() {
        let s = MemoryStore::new();
        written(s.compare_and_set("a", None, "1", Some(10), T).unwrap());
        written(s.compare_and_set("b", None, "1", Some(20), T).unwrap());
        written(s.compare_and_set("c", None, "1", None, T).unwrap());
        assert_eq!(s.purge_expired(T + 10).unwrap(), 1);
        assert_eq!(s.purge_expired(T + 10).unwrap(), 0);
        assert_eq!(s.purge_expired(T + 1_000).unwrap(), 1);
        assert_eq!(s.keys("", T).unwrap(), vec!["c".to_owned()]);
        // A rewrite replaces the old expiry: "c" now expires, once.
        written(s.compare_and_set("c", Some(3), "2", Some(5), T).unwrap());
        written(s.compare_and_set("c", Some(4), "3", Some(50), T).unwrap());
        assert_eq!(s.purge_expired(T + 10).unwrap(), 0);
        assert_eq!(s.purge_expired(T + 50).unwrap(), 1);
    }

    #[test]
    fn keys_by_prefix_sorted_by_bytes() {
        let s = MemoryStore::new();
        for k in ["b/2", "b/1", "a", "b", "c", "b/\u{10000}", "b/\u{ffff}"] {
            written(s.compare_and_set(k, None, "0", None, T).unwrap());
        }
        assert_eq!(
            s.keys("b/", T).unwrap(),
            vec!["b/1", "b/2", "b/\u{ffff}", "b/\u{10000}"]
        );
        assert_eq!(s.keys("", T).unwrap().len(), 7);
        assert!(s.keys("z", T).unwrap().is_empty());
    }

    #[test]
    fn streams_number_from_one_per_stream() {
        let s = MemoryStore::new();
        assert_eq!(s.append("j/1", r#"{"n":1}"#, T).unwrap(), 1);
        assert_eq!(s.append("j/1", r#"{"n":2}"#, T).unwrap(), 2);
        assert_eq!(s.append("j/2", r#"{"n":1}"#, T).unwrap(), 1);
        assert_eq!(s.append("j/1", r#"{"n":3}"#, T).unwrap(), 3);
        assert_eq!(
            s.read("j/1", 1, 1).unwrap(),
            vec![(2, r#"{"n":2}"#.to_owned())]
        );
        assert_eq!(s.read("j/1", 0, 100).unwrap().len(), 3);
        assert!(s.read("j/1", 3, 100).unwrap().is_empty());
        assert!(s.read("j/1", 0, 0).unwrap().is_empty());
        assert!(s.read("nope", 0, 10).unwrap().is_empty());
    }

    #[test]
    fn bad_arguments_are_refused_and_change_nothing() {
        let s = MemoryStore::new();
        let long = "k".repeat(MAX + 1);
        const MAX: usize = super::check::MAX_NAME_BYTES;
        let big = super::check::MAX_INTEGER + 1;
        let cases: Vec<Result<Cas, StoreError>> = vec![
            s.compare_and_set("", None, "1", None, T),
            s.compare_and_set(&long, None, "1", None, T),
            s.compare_and_set("a\0b", None, "1", None, T),
            s.compare_and_set("k", None, "not json", None, T),
            s.compare_and_set("k", None, "", None, T),
            s.compare_and_set("k", None, "{} {}", None, T),
            s.compare_and_set("k", Some(0), "1", None, T),
            s.compare_and_set("k", None, "1", Some(0), T),
            s.compare_and_set("k", None, "1", None, big),
            s.compare_and_set("k", None, "1", Some(big), T),
            s.compare_and_set("k", None, "1", Some(u64::MAX), T),
            s.compare_and_set("k", Some(u64::MAX), "1", None, T),
            // now + ttl past 2^53 - 1
            s.compare_and_set("k", None, "1", Some(super::check::MAX_INTEGER), T),
        ];
        for (i, case) in cases.into_iter().enumerate() {
            let err = case.expect_err(&format!("case {i} was accepted"));
            assert_eq!(
                err.kind(),
                StoreErrorKind::InvalidArgument,
                "case {i}: {err}"
            );
            assert!(err.message().contains(';'), "case {i} has no hint: {err}");
        }
        assert_eq!(
            s.append("", "1", T).unwrap_err().kind(),
            StoreErrorKind::InvalidArgument
        );
        assert_eq!(
            s.append("s", "{", T).unwrap_err().kind(),
            StoreErrorKind::InvalidArgument
        );
        assert_eq!(
            s.read("s", big, 1).unwrap_err().kind(),
            StoreErrorKind::InvalidArgument
        );
        assert_eq!(
            s.get("", T).unwrap_err().kind(),
            StoreErrorKind::InvalidArgument
        );
        assert_eq!(
            s.get("k", big).unwrap_err().kind(),
            StoreErrorKind::InvalidArgument
        );
        assert_eq!(
            s.keys("a\0", T).unwrap_err().kind(),
            StoreErrorKind::InvalidArgument
        );
        assert_eq!(
            s.delete("").unwrap_err().kind(),
            StoreErrorKind::InvalidArgument
        );
        assert!(s.keys("", T).unwrap().is_empty());
        assert!(s.read("s", 0, 10).unwrap().is_empty());
        // Nothing was written, so the first write is still version 1.
        assert_eq!(
            written(s.compare_and_set("k", None, "1", None, T).unwrap()),
            1
        );
    }

    #[test]
    fn values_come_back_byte_for_byte() {
        let s = MemoryStore::new();
        let value = "{ \"b\" : 1.50, \"a\":\"\\u00e9\u{1F600}\" }";
        written(s.compare_and_set("k", None, value, None, T).unwrap());
        assert_eq!(s.get("k", T).unwrap().unwrap().value, value);
    }

    #[test]
    fn one_winner_per_version_across_threads() {
        let s = std::sync::Arc::new(MemoryStore::new());
        written(s.compare_and_set("n", None, "0", None, T).unwrap());
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let s = s.clone();
                std::thread::spawn(move || {
                    let mut wins = Vec::new();
                    for _ in 0..200 {
                        let cur = s.get("n", T).unwrap().unwrap();
                        let n: u64 = cur.value.parse().unwrap();
                        if let Cas::Written { .. } = s
                            .compare_and_set("n", Some(cur.version), &(n + 1).to_string(), None, T)
                            .unwrap()
                        {
                            wins.push(n);
                        }
                    }
                    wins
                })
            })
            .collect();
        let mut wins: Vec<u64> = threads
            .into_iter()
            .flat_map(|t| t.join().unwrap())
            .collect();
        wins.sort_unstable();
        let n: u64 = s.get("n", T).unwrap().unwrap().value.parse().unwrap();
        // Every increment was won exactly once: 0, 1, ..., n-1.
        assert_eq!(wins, (0..n).collect::<Vec<_>>());
    }
}
