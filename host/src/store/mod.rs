//! The runtime's store: small, durable state shared by workers.
//!
//! A [`Store`] holds two things, and nothing else:
//!
//! - **entries**: a key mapped to a JSON value and a version, changed only by
//!   [`compare_and_set`](Store::compare_and_set) (optimistic concurrency: name
//!   the version you read, lose cleanly when someone wrote first), optionally
//!   with a time to live. Breakers, budgets, idempotency records and
//!   dead-letter items are entries.
//! - **streams**: append-only sequences of JSON records numbered from 1 per
//!   stream. Journals and event trails are streams.
//!
//! Time is always passed in (`now_ms`, Unix milliseconds), never read by the
//! store, so a virtual clock works and every backend agrees on what expired.
//! The interface is small on purpose: a Redis backend maps it onto a hash
//! per entry plus `PEXPIREAT`, and a Redis stream per stream; see
//! `docs/store.md`.
//!
//! ```
//! use agent_recovery::store::{Cas, MemoryStore, Store};
//!
//! let store = MemoryStore::new();
//! let now = 1_700_000_000_000;
//! // Create: `None` means "only if absent (or expired)".
//! let Cas::Written { version } = store.compare_and_set("breaker/api", None, r#"{"state":"open"}"#, Some(30_000), now)? else {
//!     unreachable!("the key was absent")
//! };
//! // A second writer that read nothing loses, and is told what is there now.
//! match store.compare_and_set("breaker/api", None, r#"{"state":"closed"}"#, None, now)? {
//!     Cas::Conflict { current: Some(current) } => assert_eq!(current.version, version),
//!     other => panic!("expected a conflict, got {other:?}"),
//! }
//! // The entry expires 30 s later, by the clock passed in.
//! assert!(store.get("breaker/api", now + 30_000)?.is_none());
//!
//! assert_eq!(store.append("journal/run-1", r#"{"step":"charge"}"#, now)?, 1);
//! assert_eq!(store.read("journal/run-1", 0, 10)?, vec![(1, r#"{"step":"charge"}"#.to_owned())]);
//! # Ok::<(), agent_recovery::store::StoreError>(())
//! ```
//!
//! # Versions
//!
//! A version is a store-wide revision, as in etcd: every successful
//! compare-and-set gets a version greater than every version the store issued
//! before (the first write to a fresh store is version 1). So a version names
//! one write forever: an entry that expired or was deleted and then created
//! again never reuses a version, and a stale compare-and-set cannot succeed
//! against the new entry (no ABA).
//!
//! # Limits
//!
//! Keys and stream names are 1 to [`MAX_NAME_BYTES`] bytes of UTF-8 without
//! NUL; values and records are JSON text of at most [`MAX_VALUE_BYTES`] bytes;
//! times, TTLs and versions are integers up to [`MAX_INTEGER`] (2^53 - 1, so
//! JavaScript numbers carry them exactly). Anything else is refused with
//! [`StoreErrorKind::InvalidArgument`] before the store is touched.

mod check;
mod error;
mod memory;
mod sqlite;

pub use check::{MAX_INTEGER, MAX_NAME_BYTES, MAX_VALUE_BYTES};
pub use error::{StoreError, StoreErrorKind};
pub use memory::MemoryStore;
pub use sqlite::{
    APPLICATION_ID, SCHEMA_SQL, SCHEMA_VERSION, SqliteOptions, SqliteStore, Synchronous,
};

/// A value with the version a compare-and-set must name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Versioned {
    /// The value, JSON text exactly as it was written.
    pub value: String,
    /// The version of the write that stored it (>= 1).
    pub version: u64,
}

/// Result of a compare-and-set.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Cas {
    /// The value was written; this is its new version.
    Written {
        /// The version of this write.
        version: u64,
    },
    /// The live version was not the expected one; nothing was written.
    Conflict {
        /// The live entry (`None` when absent or expired).
        current: Option<Versioned>,
    },
}

/// A small key-value and stream store shared by workers.
///
/// Every method checks its arguments first (see the [module docs](self#limits))
/// and returns a [`StoreError`] instead of panicking. Implementations:
/// [`MemoryStore`] and [`SqliteStore`].
pub trait Store: Send + Sync {
    /// The live value at `key` (None when absent or expired at `now_ms`).
    fn get(&self, key: &str, now_ms: u64) -> Result<Option<Versioned>, StoreError>;

    /// Write `value` iff the live version is `expected` (None = absent or expired).
    /// `ttl_ms`: the entry expires at now_ms + ttl_ms (None = never).
    ///
    /// An entry is live at `t` when it never expires or `t < expires_at_ms`.
    /// `expected = Some(0)` and `ttl_ms = Some(0)` are invalid arguments.
    fn compare_and_set(
        &self,
        key: &str,
        expected: Option<u64>,
        value: &str,
        ttl_ms: Option<u64>,
        now_ms: u64,
    ) -> Result<Cas, StoreError>;

    /// Append a record (JSON text) to a stream; returns its sequence number (from 1, per stream).
    fn append(&self, stream: &str, record: &str, now_ms: u64) -> Result<u64, StoreError>;

    /// Records of `stream` with sequence > `after`, oldest first, at most `limit`.
    ///
    /// An unknown stream reads as empty; `limit = 0` returns nothing.
    fn read(
        &self,
        stream: &str,
        after: u64,
        limit: usize,
    ) -> Result<Vec<(u64, String)>, StoreError>;

    /// Remove `key`; true when it existed.
    ///
    /// For an entry that has expired but was not purged yet the answer depends
    /// on the backend; do not rely on it.
    fn delete(&self, key: &str) -> Result<bool, StoreError>;

    /// Live keys starting with `prefix`, sorted (by UTF-8 bytes).
    fn keys(&self, prefix: &str, now_ms: u64) -> Result<Vec<String>, StoreError>;
}

/// Whether an entry with this expiry is live at `now_ms`.
pub(crate) fn is_live(expires_at_ms: Option<u64>, now_ms: u64) -> bool {
    expires_at_ms.is_none_or(|at| now_ms < at)
}
