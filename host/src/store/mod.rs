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
//! The interface is small on purpose: the Redis backend ([`RedisStore`])
//! maps it onto a hash per entry and a Redis stream per stream through Lua
//! scripts, and [`FallbackStore`] keeps a fleet working on a local spool while
//! Redis is down; [`open`] builds either from a spec. See `docs/store.md`.
//!
//! [`MemoryStore`] is always there; [`SqliteStore`] needs the crate's
//! `sqlite` feature and [`RedisStore`] its `redis` feature (both default
//! features, so `default-features = false` leaves the memory store alone).
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
pub mod fallback;
mod memory;
#[cfg(feature = "redis")]
mod redis;
#[cfg(feature = "sqlite")]
mod sqlite;

use std::sync::Arc;

use crate::runtime::Clock;

pub use check::{MAX_INTEGER, MAX_NAME_BYTES, MAX_VALUE_BYTES};
pub use error::{StoreError, StoreErrorKind};
pub use fallback::{FallbackOptions, FallbackStore, Listener, Listeners};
pub use memory::MemoryStore;
#[cfg(feature = "redis")]
pub use redis::{Fallback, REDIS_SCHEMA, RedisOptions, RedisStore, ServerClock, URL_OPTIONS};
#[cfg(feature = "sqlite")]
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
/// [`MemoryStore`], [`SqliteStore`], [`RedisStore`] and the
/// [`FallbackStore`] wrapper ([`open`] picks one from a spec).
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

    /// Whether a call may block its thread (on I/O, or a lock held across
    /// I/O): the runtime's async driver then makes it on tokio's blocking
    /// pool, never on an event loop. Default: true; the memory store: false.
    fn may_block(&self) -> bool {
        true
    }
}

/// A store opened from a spec by [`open_with`].
pub struct OpenedStore {
    /// The store.
    pub store: Arc<dyn Store>,
    /// The Redis server's clock, for a `redis://` spec.
    pub clock: Option<Arc<dyn Clock>>,
    /// Who hears `store_degraded` / `store_restored` (a `redis://` spec with
    /// `fallback=local`); a Runtime built on it adds its `on_event`.
    pub listeners: Option<Listeners>,
}

impl std::fmt::Debug for OpenedStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenedStore")
            .field("server_clock", &self.clock.is_some())
            .finish()
    }
}

/// Opens a store from a spec: a `redis://` or `redis+cluster://` URL
/// (docs/store.md, "The Redis backend") gives a [`FallbackStore`] over a `RedisStore` and its local
/// spool (or the bare `RedisStore` with `fallback=none`); anything else is
/// the path of a `SqliteStore` file (created when missing).
///
/// The Redis backend needs the crate's `redis` feature and SQLite files
/// (the store, or the spool of `fallback=local`) its `sqlite` feature; both
/// are on by default. A spec this build cannot open is an
/// [`InvalidArgument`](StoreErrorKind::InvalidArgument) naming the feature.
pub fn open(spec: &str) -> Result<Arc<dyn Store>, StoreError> {
    Ok(open_with(spec, None)?.store)
}

/// [`open`], with an event listener for the fallback wrapper's events, and
/// the server clock returned alongside.
///
/// With `fallback=local` the Redis connection is made lazily: opening never
/// fails because Redis is down (the first call degrades instead).
pub fn open_with(
    spec: &str,
    on_event: Option<fallback::Listener>,
) -> Result<OpenedStore, StoreError> {
    if !spec.starts_with("redis://")
        && !spec.starts_with("rediss://")
        && !spec.starts_with("redis+cluster://")
    {
        if let Some((scheme, _)) = spec.split_once("://") {
            return Err(StoreError::invalid(format!(
                "store {spec:?}: {scheme}:// is not a store kind; pass redis://host:port/db or the path of a SQLite store file"
            )));
        }
        return Ok(OpenedStore {
            store: open_sqlite(std::path::Path::new(spec))?,
            clock: None,
            listeners: None,
        });
    }
    open_redis(spec, on_event)
}

/// The SQLite store file at `path` (the store of a path spec, or the spool
/// of a `redis://` spec with `fallback=local`).
#[cfg(feature = "sqlite")]
fn open_sqlite(path: &std::path::Path) -> Result<Arc<dyn Store>, StoreError> {
    Ok(Arc::new(SqliteStore::open(path)?))
}

/// The spool file of a `redis://` spec with `fallback=local`: WAL with
/// `synchronous=NORMAL`, so a degraded call costs no fsync. A spooled write
/// survives a killed process (it is in the WAL when the call returns); a
/// power cut or OS crash may lose the last ones, never corrupting the file
/// (docs/store.md, "When Redis is down").
#[cfg(all(feature = "redis", feature = "sqlite"))]
fn open_spool(path: &std::path::Path) -> Result<Arc<dyn Store>, StoreError> {
    let options = SqliteOptions {
        synchronous: Synchronous::Normal,
        ..SqliteOptions::default()
    };
    Ok(Arc::new(SqliteStore::open_with(path, &options)?))
}

#[cfg(all(feature = "redis", not(feature = "sqlite")))]
fn open_spool(path: &std::path::Path) -> Result<Arc<dyn Store>, StoreError> {
    open_sqlite(path)
}

#[cfg(not(feature = "sqlite"))]
fn open_sqlite(path: &std::path::Path) -> Result<Arc<dyn Store>, StoreError> {
    Err(StoreError::invalid(format!(
        "SQLite store file {}: this build of agent-recovery has no SQLite store; enable the `sqlite` feature of the agent-recovery crate (on by default), or for a redis:// store pass fallback=none in the URL",
        path.display()
    )))
}

#[cfg(not(feature = "redis"))]
fn open_redis(spec: &str, _: Option<fallback::Listener>) -> Result<OpenedStore, StoreError> {
    // Never echo a password: keep the scheme and what follows the userinfo.
    let (scheme, rest) = spec.split_once("://").unwrap_or(("redis", spec));
    let host = rest.rsplit_once('@').map_or(rest, |(_, host)| host);
    Err(StoreError::invalid(format!(
        "store {scheme}://{host}: this build of agent-recovery has no Redis store; enable the `redis` feature of the agent-recovery crate (on by default)"
    )))
}

#[cfg(feature = "redis")]
fn open_redis(spec: &str, on_event: Option<fallback::Listener>) -> Result<OpenedStore, StoreError> {
    let options = RedisOptions::parse(spec)?;
    if options.fallback == Fallback::None {
        let redis = RedisStore::with_options(options)?;
        return Ok(OpenedStore {
            clock: Some(redis.server_clock()),
            store: Arc::new(redis),
            listeners: None,
        });
    }
    let spool = match &options.spool {
        Some(p) => std::path::PathBuf::from(p),
        None => fallback::default_spool_path(&options.identity())?,
    };
    if let Some(dir) = spool.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| {
            StoreError::new(
                StoreErrorKind::Io,
                format!(
                    "cannot create the spool directory {} ({e}); pass spool=/writable/path.sqlite in the URL",
                    dir.display()
                ),
            )
        })?;
    }
    let local = open_spool(&spool)?;
    let listeners = Listeners::default();
    if let Some(f) = on_event {
        listeners.subscribe(f);
    }
    let name = options.display.clone();
    let probe_ms = options.probe_ms;
    let redis = RedisStore::lazy(options)?;
    let clock = redis.server_clock();
    let store = FallbackStore::new(
        Arc::new(redis),
        local,
        FallbackOptions {
            name,
            probe_ms,
            listeners: listeners.clone(),
        },
    );
    Ok(OpenedStore {
        store: Arc::new(store),
        clock: Some(clock),
        listeners: Some(listeners),
    })
}

/// Whether an entry with this expiry is live at `now_ms`.
pub(crate) fn is_live(expires_at_ms: Option<u64>, now_ms: u64) -> bool {
    expires_at_ms.is_none_or(|at| now_ms < at)
}
