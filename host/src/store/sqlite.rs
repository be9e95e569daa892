//! [`SqliteStore`]: the embedded, durable store in one SQLite file.
//!
//! The schema (`schema.sql`, documented in `docs/store.md`) is shared with
//! the Python and Node stores, so processes in any of the three languages can
//! use one file at once. Every write runs in a `BEGIN IMMEDIATE` transaction,
//! so a compare-and-set is atomic across processes; reads never block in WAL
//! mode.

use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use rusqlite::{Connection, ErrorCode, OptionalExtension, TransactionBehavior, params};

use super::{Cas, Store, StoreError, StoreErrorKind, Versioned, check, is_live};

/// The schema version this build reads and writes (`PRAGMA user_version`).
pub const SCHEMA_VERSION: i64 = 1;

/// `PRAGMA application_id` of a store file: `'ARST'` as a big-endian integer.
pub const APPLICATION_ID: i64 = 0x4152_5354;

/// The schema of version [`SCHEMA_VERSION`], run on a file with no tables.
pub const SCHEMA_SQL: &str = include_str!("schema.sql");

/// How many expired entries a write removes on its way (see
/// [`SqliteStore::purge_expired`] to remove them all).
const PURGE_BATCH: i64 = 64;

/// How hard a commit pushes to disk (`PRAGMA synchronous`).
///
/// Both survive a killed process; they differ on a power cut or OS crash.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Synchronous {
    /// `FULL`: a committed write survives a power cut (one fsync per commit).
    #[default]
    Full,
    /// `NORMAL`: a power cut may lose the last commits (never corrupts the
    /// file); much faster writes (no fsync per commit in WAL mode).
    Normal,
}

impl Synchronous {
    /// The pragma value: `FULL` or `NORMAL`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Full => "FULL",
            Self::Normal => "NORMAL",
        }
    }
}

/// How [`SqliteStore::open_with`] sets up its connection.
///
/// # Default
///
/// | Setting | Value | Why |
/// |---|---|---|
/// | [`busy_timeout`](Self::busy_timeout) | 5 s | a writer waits this long for another process's lock, then [`StoreErrorKind::Unavailable`] |
/// | [`synchronous`](Self::synchronous) | [`Synchronous::Full`] | a committed write survives a power cut, not only a killed process |
///
/// `journal_mode` is always `WAL`: readers never block the writer, nor the
/// writer readers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SqliteOptions {
    /// How long a write waits for the write lock held by another connection.
    pub busy_timeout: Duration,
    /// How hard a commit pushes to disk.
    pub synchronous: Synchronous,
}

impl Default for SqliteOptions {
    fn default() -> Self {
        SqliteOptions {
            busy_timeout: Duration::from_secs(5),
            synchronous: Synchronous::Full,
        }
    }
}

/// A [`Store`] in one SQLite file (rusqlite with its bundled SQLite).
///
/// [`open`](Self::open) uses [`SqliteOptions::default`]: WAL, `synchronous =
/// FULL`, a 5 s busy timeout.
///
/// The file must be on a local disk (WAL needs shared memory between the
/// processes that use it); the `-wal` and `-shm` files next to it are part of
/// the store.
#[derive(Debug)]
pub struct SqliteStore {
    conn: Mutex<Connection>,
    path: PathBuf,
}

impl SqliteStore {
    /// Open the store file at `path`, creating it (and its schema) if absent.
    ///
    /// # Errors
    ///
    /// [`StoreErrorKind::Corrupt`] for a file that is not an SQLite database
    /// or is damaged, [`StoreErrorKind::Incompatible`] for an SQLite database
    /// of another application or of a newer schema version,
    /// [`StoreErrorKind::Io`] when the file cannot be opened or created,
    /// [`StoreErrorKind::Unavailable`] when another process holds the lock
    /// past the busy timeout.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, StoreError> {
        Self::open_with(path, &SqliteOptions::default())
    }

    /// [`open`](Self::open) with other [`SqliteOptions`].
    pub fn open_with(path: impl AsRef<Path>, options: &SqliteOptions) -> Result<Self, StoreError> {
        let path = path.as_ref().to_path_buf();
        let mut conn = Connection::open(&path).map_err(|e| sql_error(&path, "opening", e))?;
        init(&mut conn, &path, options)?;
        Ok(SqliteStore {
            conn: Mutex::new(conn),
            path,
        })
    }

    /// The path this store was opened with.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The `synchronous` setting of the connection, as SQLite reports it
    /// (`FULL` or `NORMAL`).
    pub fn synchronous(&self) -> Result<Synchronous, StoreError> {
        let level: i64 = self
            .lock()
            .pragma_query_value(None, "synchronous", |r| r.get(0))
            .map_err(|e| self.error("reading synchronous", e))?;
        Ok(if level >= 2 {
            Synchronous::Full
        } else {
            Synchronous::Normal
        })
    }

    /// Remove every entry expired at `now_ms`; returns how many were removed.
    /// (Writes also remove up to 64 expired entries each, on their way.)
    pub fn purge_expired(&self, now_ms: u64) -> Result<usize, StoreError> {
        check::integer("now_ms", now_ms)?;
        let conn = self.lock();
        conn.execute(
            "DELETE FROM ar_entries WHERE expires_at_ms <= ?1",
            params![now_ms as i64],
        )
        .map_err(|e| self.error("purging expired entries", e))
    }

    fn lock(&self) -> MutexGuard<'_, Connection> {
        // A panic cannot happen while the lock is held; a poisoned lock still
        // guards a usable connection (SQLite rolls back an open transaction
        // when its Transaction is dropped).
        self.conn.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn error(&self, what: &str, e: rusqlite::Error) -> StoreError {
        sql_error(&self.path, what, e)
    }

    fn cas(
        &self,
        key: &str,
        expected: Option<u64>,
        value: &str,
        expires_at_ms: Option<u64>,
        now_ms: u64,
    ) -> Result<Cas, rusqlite::Error> {
        let mut conn = self.lock();
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let current = live_entry(&tx, key, now_ms)?;
        if current.as_ref().map(|c| c.version) != expected {
            return Ok(Cas::Conflict { current });
        }
        tx.prepare_cached(
            "DELETE FROM ar_entries WHERE key IN (SELECT key FROM ar_entries \
             WHERE expires_at_ms <= ?1 ORDER BY expires_at_ms LIMIT ?2)",
        )?
        .execute(params![now_ms as i64, PURGE_BATCH])?;
        tx.prepare_cached("UPDATE ar_meta SET value = value + 1 WHERE name = 'revision'")?
            .execute([])?;
        let version: i64 = tx
            .prepare_cached("SELECT value FROM ar_meta WHERE name = 'revision'")?
            .query_row([], |r| r.get(0))?;
        let version = stored_integer(version, 0)?;
        tx.prepare_cached(
            "INSERT OR REPLACE INTO ar_entries (key, value, version, expires_at_ms, updated_at_ms) \
             VALUES (?1, ?2, ?3, ?4, ?5)",
        )?
        .execute(params![
            key,
            value,
            version as i64,
            expires_at_ms.map(|at| at as i64),
            now_ms as i64
        ])?;
        tx.commit()?;
        Ok(Cas::Written { version })
    }

    fn append_tx(&self, stream: &str, record: &str, now_ms: u64) -> Result<u64, rusqlite::Error> {
        let mut conn = self.lock();
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let last: i64 = tx
            .prepare_cached("SELECT COALESCE(MAX(seq), 0) FROM ar_records WHERE stream = ?1")?
            .query_row(params![stream], |r| r.get(0))?;
        let seq = stored_integer(last, 1)? + 1;
        tx.prepare_cached(
            "INSERT INTO ar_records (stream, seq, record, appended_at_ms) VALUES (?1, ?2, ?3, ?4)",
        )?
        .execute(params![stream, seq as i64, record, now_ms as i64])?;
        tx.commit()?;
        Ok(seq)
    }
}

impl Store for SqliteStore {
    fn get(&self, key: &str, now_ms: u64) -> Result<Option<Versioned>, StoreError> {
        check::name("key", key)?;
        check::integer("now_ms", now_ms)?;
        live_entry(&self.lock(), key, now_ms).map_err(|e| self.error("reading an entry", e))
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
        self.cas(key, expected, value, expires_at_ms, now_ms)
            .map_err(|e| self.error("compare-and-set", e))
    }

    fn append(&self, stream: &str, record: &str, now_ms: u64) -> Result<u64, StoreError> {
        check::name("stream", stream)?;
        check::integer("now_ms", now_ms)?;
        check::json("record", stream, record)?;
        self.append_tx(stream, record, now_ms)
            .map_err(|e| self.error("appending a record", e))
    }

    fn read(
        &self,
        stream: &str,
        after: u64,
        limit: usize,
    ) -> Result<Vec<(u64, String)>, StoreError> {
        check::name("stream", stream)?;
        check::integer("after", after)?;
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let conn = self.lock();
        let read = || -> Result<Vec<(u64, String)>, rusqlite::Error> {
            let mut stmt = conn.prepare_cached(
                "SELECT seq, record FROM ar_records WHERE stream = ?1 AND seq > ?2 \
                 ORDER BY seq LIMIT ?3",
            )?;
            let rows = stmt.query_map(params![stream, after as i64, limit], |r| {
                Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?))
            })?;
            rows.map(|row| {
                let (seq, record) = row?;
                Ok((stored_integer(seq, 1)?, record))
            })
            .collect()
        };
        read().map_err(|e| self.error("reading a stream", e))
    }

    fn delete(&self, key: &str) -> Result<bool, StoreError> {
        check::name("key", key)?;
        self.lock()
            .prepare_cached("DELETE FROM ar_entries WHERE key = ?1")
            .and_then(|mut stmt| stmt.execute(params![key]))
            .map(|n| n > 0)
            .map_err(|e| self.error("deleting an entry", e))
    }

    fn keys(&self, prefix: &str, now_ms: u64) -> Result<Vec<String>, StoreError> {
        check::prefix(prefix)?;
        check::integer("now_ms", now_ms)?;
        let conn = self.lock();
        let keys = || -> Result<Vec<String>, rusqlite::Error> {
            // Keys compare as UTF-8 bytes (BINARY collation): the ones with
            // the prefix are a contiguous run starting at the prefix.
            let mut stmt = conn.prepare_cached(
                "SELECT key FROM ar_entries WHERE key >= ?1 \
                 AND (expires_at_ms IS NULL OR expires_at_ms > ?2) ORDER BY key",
            )?;
            let mut rows = stmt.query(params![prefix, now_ms as i64])?;
            let mut keys = Vec::new();
            while let Some(row) = rows.next()? {
                let key: String = row.get(0)?;
                if !key.starts_with(prefix) {
                    break;
                }
                keys.push(key);
            }
            Ok(keys)
        };
        keys().map_err(|e| self.error("listing keys", e))
    }
}

/// Set the pragmas, and create the schema on a file without one.
fn init(conn: &mut Connection, path: &Path, options: &SqliteOptions) -> Result<(), StoreError> {
    let at = |what: &'static str| move |e| sql_error(path, what, e);
    conn.busy_timeout(options.busy_timeout)
        .map_err(at("setting the busy timeout"))?;
    // Reading the header first turns a non-database file into a clear error,
    // and refuses a foreign database before WAL mode touches it. The header
    // and the table list are read in one read transaction: read apart, a
    // schema another process commits between them looks like a foreign
    // database's tables under an empty header.
    let snapshot = conn
        .transaction_with_behavior(TransactionBehavior::Deferred)
        .map_err(at("reading the header"))?;
    let (app_id, version) = header(&snapshot).map_err(at("reading the header"))?;
    check_header(path, app_id, version, || has_tables(&snapshot))?;
    snapshot.commit().map_err(at("reading the header"))?;
    set_wal(conn, options.busy_timeout).map_err(at("setting WAL mode"))?;
    conn.pragma_update(None, "synchronous", options.synchronous.as_str())
        .map_err(at("setting synchronous"))?;
    if app_id != 0 {
        return Ok(());
    }
    // Another process may be creating the schema right now: decide again
    // under the write lock.
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(at("locking to create the schema"))?;
    let (app_id, version) = header(&tx).map_err(at("reading the header"))?;
    check_header(path, app_id, version, || has_tables(&tx))?;
    if app_id == 0 {
        tx.execute_batch(SCHEMA_SQL)
            .map_err(at("creating the schema"))?;
    }
    tx.commit().map_err(at("creating the schema"))
}

/// `PRAGMA journal_mode = WAL`, retried until `busy_timeout` has passed.
///
/// Switching a file into WAL mode takes the write lock while the statement
/// already holds a read lock, and SQLite answers `SQLITE_BUSY` at once,
/// without its busy handler, when another connection holds the write lock
/// (the two would otherwise wait on each other). That happens whenever
/// several processes open a new store together, so wait here instead.
fn set_wal(conn: &Connection, busy_timeout: Duration) -> Result<(), rusqlite::Error> {
    let deadline = Instant::now() + busy_timeout;
    let mut pause = Duration::from_millis(1);
    loop {
        match conn.pragma_update(None, "journal_mode", "WAL") {
            Err(e) if is_busy(&e) && Instant::now() + pause < deadline => {
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_millis(50));
            }
            other => return other,
        }
    }
}

fn is_busy(e: &rusqlite::Error) -> bool {
    matches!(
        e,
        rusqlite::Error::SqliteFailure(f, _)
            if matches!(f.code, ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked)
    )
}

/// The live entry at `key`, if any.
fn live_entry(
    conn: &Connection,
    key: &str,
    now_ms: u64,
) -> Result<Option<Versioned>, rusqlite::Error> {
    let row = conn
        .prepare_cached("SELECT value, version, expires_at_ms FROM ar_entries WHERE key = ?1")?
        .query_row(params![key], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, i64>(1)?,
                r.get::<_, Option<i64>>(2)?,
            ))
        })
        .optional()?;
    let Some((value, version, expires_at_ms)) = row else {
        return Ok(None);
    };
    let version = stored_integer(version, 1)?;
    let expires_at_ms = expires_at_ms.map(|at| stored_integer(at, 2)).transpose()?;
    Ok(is_live(expires_at_ms, now_ms).then_some(Versioned { value, version }))
}

/// An integer read from the file: 0..=2^53-1, or the file is corrupt.
fn stored_integer(n: i64, column: usize) -> Result<u64, rusqlite::Error> {
    u64::try_from(n)
        .ok()
        .filter(|n| *n <= check::MAX_INTEGER)
        .ok_or(rusqlite::Error::IntegralValueOutOfRange(column, n))
}

fn header(conn: &Connection) -> Result<(i64, i64), rusqlite::Error> {
    let app_id = conn.pragma_query_value(None, "application_id", |r| r.get(0))?;
    let version = conn.pragma_query_value(None, "user_version", |r| r.get(0))?;
    Ok((app_id, version))
}

fn has_tables(conn: &Connection) -> Result<bool, rusqlite::Error> {
    conn.query_row(
        "SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table')",
        [],
        |r| r.get(0),
    )
}

/// Refuse a file that is not (and cannot become) a store of this version.
fn check_header(
    path: &Path,
    app_id: i64,
    version: i64,
    has_tables: impl FnOnce() -> Result<bool, rusqlite::Error>,
) -> Result<(), StoreError> {
    let incompatible = |why: String| {
        Err(StoreError::new(
            StoreErrorKind::Incompatible,
            format!("{}: {why}", path.display()),
        ))
    };
    if app_id == APPLICATION_ID {
        return match version {
            SCHEMA_VERSION => Ok(()),
            v if v > SCHEMA_VERSION => incompatible(format!(
                "the store has schema version {v}, newer than version {SCHEMA_VERSION} that this build reads; upgrade agent-recovery"
            )),
            v => incompatible(format!(
                "the store has schema version {v}, which never existed; the file was changed by another program, move it aside"
            )),
        };
    }
    if app_id != 0 {
        return incompatible(format!(
            "an SQLite database of another application (application_id {app_id}); give the store a file of its own"
        ));
    }
    match has_tables() {
        Ok(false) => Ok(()),
        Ok(true) => incompatible(
            "an SQLite database with tables that is not an agent-recovery store; give the store a file of its own".to_owned(),
        ),
        Err(e) => Err(sql_error(path, "reading the schema", e)),
    }
}

fn sql_error(path: &Path, what: &str, e: rusqlite::Error) -> StoreError {
    let code = match &e {
        rusqlite::Error::SqliteFailure(f, _) => Some(f.code),
        _ => None,
    };
    let (kind, hint) = match code {
        Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked) => (
            StoreErrorKind::Unavailable,
            "another process held the write lock past the busy timeout; retry later or raise the timeout",
        ),
        Some(ErrorCode::NotADatabase | ErrorCode::DatabaseCorrupt) => (
            StoreErrorKind::Corrupt,
            "the file is not an SQLite database or is damaged; move it aside and start a new store",
        ),
        _ if is_conversion(&e) || code == Some(ErrorCode::ConstraintViolation) => (
            StoreErrorKind::Corrupt,
            "a row breaks the store's schema (written by another program?); move the file aside and start a new store",
        ),
        _ => (
            StoreErrorKind::Io,
            "check that the directory exists, the file is writable and the disk has space",
        ),
    };
    StoreError::new(
        kind,
        format!(
            "sqlite store {}: {what} failed ({e}); {hint}",
            path.display()
        ),
    )
}

fn is_conversion(e: &rusqlite::Error) -> bool {
    matches!(
        e,
        rusqlite::Error::FromSqlConversionFailure(..)
            | rusqlite::Error::InvalidColumnType(..)
            | rusqlite::Error::IntegralValueOutOfRange(..)
    )
}
