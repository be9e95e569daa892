//! [`FallbackStore`]: a primary store (Redis) with a local one (a SQLite
//! spool file) that serves while the primary is unavailable, spools what
//! must not be lost, and flushes it back once the primary answers again
//! (docs/store.md, "When Redis is down").

use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::{Cas, Store, StoreError, StoreErrorKind, Versioned};

/// The spool stream in the local store.
pub const SPOOL_STREAM: &str = "agent-recovery/spool";
/// The entry holding how far the spool was flushed (`{"seq":N}`).
pub const SPOOL_CURSOR: &str = "agent-recovery/spool/cursor";
/// The lease a process takes to flush (so two local processes don't).
pub const SPOOL_LEASE: &str = "agent-recovery/spool/lease";
/// The key the generic probe reads from the primary.
pub const PROBE_KEY: &str = "agent-recovery/ping";
/// How long a flush lease lasts.
const LEASE_MS: u64 = 30_000;
/// Entries under these prefixes are spooled when written while degraded.
const SPOOLED_PREFIXES: [&str; 2] = ["agent-recovery/journal/", "agent-recovery/dead-letter/"];
/// How many times a flushed `set` retries on a conflict (last writer wins).
const SET_RETRIES: usize = 16;

/// A listener for the wrapper's events: one JSON object text per call.
pub type Listener = Arc<dyn Fn(&str) + Send + Sync>;

/// Listeners of a [`FallbackStore`]; more can be added after it was opened
/// (a Runtime built on the store adds its `on_event`).
#[derive(Clone, Default)]
pub struct Listeners(Arc<Mutex<Vec<Listener>>>);

impl std::fmt::Debug for Listeners {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Listeners")
    }
}

impl Listeners {
    /// Adds a listener.
    pub fn subscribe(&self, f: Listener) {
        self.lock().push(f);
    }
    fn lock(&self) -> MutexGuard<'_, Vec<Listener>> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
    fn emit(&self, event: &Value) {
        let text = event.to_string();
        let listeners: Vec<Listener> = self.lock().clone();
        for f in listeners {
            f(&text);
        }
    }
}

/// The options of a [`FallbackStore`].
#[derive(Clone, Debug)]
pub struct FallbackOptions {
    /// How the primary is named in events (a URL without its password).
    pub name: String,
    /// While degraded, try the primary again at most this often (ms of the
    /// `now_ms` passed in). Default 1000.
    pub probe_ms: u64,
    /// Who hears `store_degraded` / `store_restored`.
    pub listeners: Listeners,
}

impl Default for FallbackOptions {
    fn default() -> Self {
        FallbackOptions {
            name: "primary".to_owned(),
            probe_ms: 1000,
            listeners: Listeners::default(),
        }
    }
}

#[derive(Debug, Default)]
struct State {
    /// `Some(since_ms)` while degraded.
    degraded: Option<u64>,
    last_probe: u64,
    last_now: u64,
    /// A spool left by an earlier process is flushed at the first healthy call.
    startup_checked: bool,
}

/// A store over a primary and a local fallback; see the module docs.
pub struct FallbackStore {
    primary: Arc<dyn Store>,
    local: Arc<dyn Store>,
    options: FallbackOptions,
    state: Mutex<State>,
}

impl std::fmt::Debug for FallbackStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FallbackStore")
            .field("primary", &self.options.name)
            .finish()
    }
}

enum Route {
    Primary,
    Local,
}

impl FallbackStore {
    /// Wraps `primary` with `local` as the fallback and spool.
    pub fn new(primary: Arc<dyn Store>, local: Arc<dyn Store>, options: FallbackOptions) -> Self {
        FallbackStore {
            primary,
            local,
            options,
            state: Mutex::new(State::default()),
        }
    }

    /// Whether calls are served locally now.
    pub fn is_degraded(&self) -> bool {
        self.lock().degraded.is_some()
    }

    /// The listeners (add one with [`Listeners::subscribe`]).
    pub fn listeners(&self) -> &Listeners {
        &self.options.listeners
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Decides where a call goes; while degraded, probes and flushes when due.
    fn route(&self, now: Option<u64>) -> Route {
        let (due_at, startup) = {
            let mut st = self.lock();
            let now = now.unwrap_or(st.last_now).max(st.last_now);
            st.last_now = now;
            match st.degraded {
                None if st.startup_checked => return Route::Primary,
                None => {
                    st.startup_checked = true;
                    (now, true)
                }
                Some(_) if now >= st.last_probe.saturating_add(self.options.probe_ms) => {
                    st.last_probe = now;
                    (now, false)
                }
                Some(_) => return Route::Local,
            }
        };
        if startup {
            // Leftover spool from an earlier process: flush it now (a
            // failure here degrades like any other).
            if self.spool_pending() {
                match self.flush(due_at) {
                    // As in Node and Python: the flush of an earlier process's
                    // spool is reported, with `degraded_ms` 0 (this process was
                    // never degraded).
                    Ok(flushed) if flushed > 0 => {
                        self.options.listeners.emit(&json!({
                            "event": "store_restored",
                            "store": self.options.name,
                            "at_ms": due_at,
                            "degraded_ms": 0,
                            "flushed": flushed,
                        }));
                    }
                    Ok(_) => {}
                    Err(e) if e.kind() == StoreErrorKind::Unavailable => {
                        self.degrade(due_at, &e);
                        return Route::Local;
                    }
                    Err(_) => {}
                }
            }
            return Route::Primary;
        }
        if let Err(e) = self.primary.get(PROBE_KEY, due_at) {
            let _ = e;
            return Route::Local;
        }
        match self.flush(due_at) {
            Ok(flushed) => {
                let since = {
                    let mut st = self.lock();
                    st.degraded.take()
                };
                if let Some(since) = since {
                    self.options.listeners.emit(&json!({
                        "event": "store_restored",
                        "store": self.options.name,
                        "at_ms": due_at,
                        "degraded_ms": due_at.saturating_sub(since),
                        "flushed": flushed,
                    }));
                }
                Route::Primary
            }
            Err(_) => Route::Local,
        }
    }

    fn spool_pending(&self) -> bool {
        let after = self.cursor().map_or(0, |(seq, _)| seq);
        self.local
            .read(SPOOL_STREAM, after, 1)
            .is_ok_and(|r| !r.is_empty())
    }

    fn cursor(&self) -> Result<(u64, Option<u64>), StoreError> {
        Ok(match self.local.get(SPOOL_CURSOR, 0)? {
            None => (0, None),
            Some(v) => {
                let seq = serde_json::from_str::<Value>(&v.value)
                    .ok()
                    .and_then(|j| j.get("seq").and_then(Value::as_u64))
                    .unwrap_or(0);
                (seq, Some(v.version))
            }
        })
    }

    fn degrade(&self, now: u64, e: &StoreError) {
        let fresh = {
            let mut st = self.lock();
            let fresh = st.degraded.is_none();
            if fresh {
                st.degraded = Some(now);
                st.last_probe = now;
            }
            fresh
        };
        if fresh {
            self.options.listeners.emit(&json!({
                "event": "store_degraded",
                "store": self.options.name,
                "at_ms": now,
                "kind": e.kind().as_str(),
                "message": e.message(),
            }));
        }
    }

    /// Applies the spool after the cursor to the primary; returns how many
    /// records it applied.
    fn flush(&self, now: u64) -> Result<u64, StoreError> {
        let lease = json!({"pid": std::process::id(), "at_ms": now}).to_string();
        let lease_version = match self.local.compare_and_set(
            SPOOL_LEASE,
            None,
            &lease,
            Some(LEASE_MS),
            now,
        )? {
            Cas::Written { version } => version,
            Cas::Conflict { .. } => {
                return Err(StoreError::new(
                    StoreErrorKind::Unavailable,
                    "another process is flushing the spool; this one stays degraded until its next probe",
                ));
            }
        };
        let result = self.flush_held();
        if let Ok(Some(live)) = self.local.get(SPOOL_LEASE, now)
            && live.version == lease_version
        {
            let _ = self.local.delete(SPOOL_LEASE);
        }
        result
    }

    fn flush_held(&self) -> Result<u64, StoreError> {
        let (mut seq, mut cursor_version) = self.cursor()?;
        let mut flushed = 0;
        loop {
            let batch = self.local.read(SPOOL_STREAM, seq, 256)?;
            if batch.is_empty() {
                return Ok(flushed);
            }
            for (n, record) in batch {
                self.apply(&record)?;
                let value = json!({ "seq": n }).to_string();
                cursor_version = match self.local.compare_and_set(
                    SPOOL_CURSOR,
                    cursor_version,
                    &value,
                    None,
                    0,
                )? {
                    Cas::Written { version } => Some(version),
                    Cas::Conflict { .. } => {
                        return Err(StoreError::new(
                            StoreErrorKind::Unavailable,
                            "the spool cursor moved under this flush (another process flushed); will probe again",
                        ));
                    }
                };
                seq = n;
                flushed += 1;
            }
        }
    }

    fn apply(&self, record: &str) -> Result<(), StoreError> {
        let bad = || {
            StoreError::new(
                StoreErrorKind::Corrupt,
                format!(
                    "spool record {record:?} is not a spool operation; the spool file is damaged"
                ),
            )
        };
        let r: Value = serde_json::from_str(record).map_err(|_| bad())?;
        let s = |k: &str| r.get(k).and_then(Value::as_str).ok_or_else(bad);
        let now = r.get("now_ms").and_then(Value::as_u64).unwrap_or(0);
        match s("op")? {
            "append" => {
                self.primary.append(s("stream")?, s("record")?, now)?;
            }
            "delete" => {
                self.primary.delete(s("key")?)?;
            }
            "set" => {
                let key = s("key")?;
                let value = s("value")?;
                let ttl = r.get("ttl_ms").and_then(Value::as_u64);
                let mut expected = self.primary.get(key, now)?.map(|v| v.version);
                for _ in 0..SET_RETRIES {
                    match self
                        .primary
                        .compare_and_set(key, expected, value, ttl, now)?
                    {
                        Cas::Written { .. } => return Ok(()),
                        Cas::Conflict { current } => expected = current.map(|v| v.version),
                    }
                }
                return Err(StoreError::new(
                    StoreErrorKind::Unavailable,
                    format!(
                        "{key:?} kept changing while the spool was flushed; will try again at the next probe"
                    ),
                ));
            }
            _ => return Err(bad()),
        }
        Ok(())
    }

    fn spool(&self, op: Value, now: u64) -> Result<(), StoreError> {
        self.local.append(SPOOL_STREAM, &op.to_string(), now)?;
        Ok(())
    }

    /// Runs `f` on the primary (or locally when degraded); an `unavailable`
    /// from the primary degrades the wrapper and reruns `f` locally.
    fn call<T>(
        &self,
        now: Option<u64>,
        f: impl Fn(&dyn Store) -> Result<T, StoreError>,
        on_local: impl FnOnce(&T) -> Result<(), StoreError>,
    ) -> Result<T, StoreError> {
        if let Route::Primary = self.route(now) {
            match f(self.primary.as_ref()) {
                Err(e) if e.kind() == StoreErrorKind::Unavailable => {
                    let at = now.unwrap_or_else(|| self.lock().last_now);
                    self.degrade(at, &e);
                }
                other => return other,
            }
        }
        let out = f(self.local.as_ref())?;
        on_local(&out)?;
        Ok(out)
    }
}

fn spooled(key: &str) -> bool {
    SPOOLED_PREFIXES.iter().any(|p| key.starts_with(p))
}

impl Store for FallbackStore {
    fn get(&self, key: &str, now_ms: u64) -> Result<Option<Versioned>, StoreError> {
        self.call(Some(now_ms), |s| s.get(key, now_ms), |_| Ok(()))
    }

    fn compare_and_set(
        &self,
        key: &str,
        expected: Option<u64>,
        value: &str,
        ttl_ms: Option<u64>,
        now_ms: u64,
    ) -> Result<Cas, StoreError> {
        self.call(
            Some(now_ms),
            |s| s.compare_and_set(key, expected, value, ttl_ms, now_ms),
            |out| match out {
                Cas::Written { .. } if spooled(key) => self.spool(
                    json!({"op":"set","key":key,"value":value,"ttl_ms":ttl_ms,"now_ms":now_ms}),
                    now_ms,
                ),
                _ => Ok(()),
            },
        )
    }

    fn append(&self, stream: &str, record: &str, now_ms: u64) -> Result<u64, StoreError> {
        self.call(
            Some(now_ms),
            |s| s.append(stream, record, now_ms),
            |_| {
                self.spool(
                    json!({"op":"append","stream":stream,"record":record,"now_ms":now_ms}),
                    now_ms,
                )
            },
        )
    }

    fn read(
        &self,
        stream: &str,
        after: u64,
        limit: usize,
    ) -> Result<Vec<(u64, String)>, StoreError> {
        self.call(None, |s| s.read(stream, after, limit), |_| Ok(()))
    }

    fn delete(&self, key: &str) -> Result<bool, StoreError> {
        self.call(
            None,
            |s| s.delete(key),
            |_| {
                if spooled(key) {
                    let now = self.lock().last_now;
                    self.spool(json!({"op":"delete","key":key}), now)
                } else {
                    Ok(())
                }
            },
        )
    }

    fn keys(&self, prefix: &str, now_ms: u64) -> Result<Vec<String>, StoreError> {
        self.call(Some(now_ms), |s| s.keys(prefix, now_ms), |_| Ok(()))
    }
}

/// The default spool file for a store URL:
/// `$XDG_STATE_HOME/agent-recovery/spool-<h>.sqlite` (else
/// `~/.local/state/agent-recovery/...`), `<h>` = the first 16 hex digits of
/// the SHA-256 of the store's identity ([`RedisOptions::identity`](super::RedisOptions::identity):
/// the same text in Rust, Node and Python).
pub fn default_spool_path(display_url: &str) -> Result<PathBuf, StoreError> {
    let base = match std::env::var_os("XDG_STATE_HOME").filter(|v| !v.is_empty()) {
        Some(dir) => PathBuf::from(dir),
        None => match std::env::var_os("HOME").filter(|v| !v.is_empty()) {
            Some(home) => PathBuf::from(home).join(".local/state"),
            None => {
                return Err(StoreError::new(
                    StoreErrorKind::Io,
                    format!(
                        "{display_url}: neither XDG_STATE_HOME nor HOME is set, so there is no default spool file; pass spool=/path/to/spool.sqlite in the URL"
                    ),
                ));
            }
        },
    };
    let digest = Sha256::digest(display_url.as_bytes());
    let hex: String = digest.iter().take(8).map(|b| format!("{b:02x}")).collect();
    Ok(base
        .join("agent-recovery")
        .join(format!("spool-{hex}.sqlite")))
}
