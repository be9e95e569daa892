//! [`FallbackStore`]: a primary store (Redis) with a local one (a SQLite
//! spool file) that serves while the primary is unavailable, spools what
//! must not be lost, and flushes it back once the primary answers again
//! (docs/store.md, "When Redis is down"). The probe and the flush run on a
//! background thread, never in a caller's store call.

mod flush;

use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::{Cas, Store, StoreError, StoreErrorKind, Versioned};
use flush::mirrored;

/// The spool stream in the local store.
pub const SPOOL_STREAM: &str = "agent-recovery/spool";
/// The entry holding how far the spool was flushed (`{"seq":N}`).
pub const SPOOL_CURSOR: &str = "agent-recovery/spool/cursor";
/// The lease a process takes to flush (so two local processes don't).
pub const SPOOL_LEASE: &str = "agent-recovery/spool/lease";
/// The key the generic probe reads from the primary.
pub const PROBE_KEY: &str = "agent-recovery/ping";
/// The name of the thread that probes the primary and flushes the spool.
pub const FLUSH_THREAD: &str = "agent-recovery-spool-flush";
/// Entries under these prefixes are copied to the local store while healthy
/// (so they are honoured while degraded) and spooled when written while
/// degraded (so they reach the primary again): idempotency entries, run
/// journals, dead-letter items.
pub const MIRRORED_PREFIXES: [&str; 3] = [
    "agent-recovery/idem/",
    "agent-recovery/journal/",
    "agent-recovery/dead-letter/",
];
/// How long a flush lease lasts (renewed at each batch), so a process that
/// died while flushing holds the others back this long at most.
const LEASE_MS: u64 = 5_000;

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
    /// A spool left by an earlier process is looked for at the first call.
    startup_checked: bool,
    /// Degraded only because an earlier process left a spool to flush.
    startup_spool: bool,
    /// The background thread is probing or flushing.
    reconnecting: bool,
    /// The last spool record this process wrote.
    spool_end: u64,
    /// How many probes of the primary were started.
    probes: u64,
}

/// What the wrapper and its background thread share.
struct Inner {
    primary: Arc<dyn Store>,
    local: Arc<dyn Store>,
    options: FallbackOptions,
    state: Mutex<State>,
}

impl Inner {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// A store over a primary and a local fallback; see the module docs.
///
/// Dropping it waits for a probe or flush in progress on its background
/// thread (bounded by the primary's timeouts and the spool's size), so a
/// short-lived process that started one does not leave it half done.
pub struct FallbackStore {
    inner: Arc<Inner>,
    worker: Mutex<Option<std::thread::JoinHandle<()>>>,
}

impl Drop for FallbackStore {
    fn drop(&mut self) {
        let handle = self
            .worker
            .get_mut()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        if let Some(handle) = handle {
            let _ = handle.join();
        }
    }
}

impl std::fmt::Debug for FallbackStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FallbackStore")
            .field("primary", &self.inner.options.name)
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
            inner: Arc::new(Inner {
                primary,
                local,
                options,
                state: Mutex::new(State::default()),
            }),
            worker: Mutex::new(None),
        }
    }

    /// Whether calls are served locally now.
    pub fn is_degraded(&self) -> bool {
        self.inner.lock().degraded.is_some()
    }

    /// Whether the background thread is probing the primary or flushing the
    /// spool now (calls meanwhile are served locally and do not wait for it).
    pub fn is_reconnecting(&self) -> bool {
        self.inner.lock().reconnecting
    }

    /// How many probes of the primary this store has started (each one a
    /// background thread that tries the primary and, when it answers,
    /// flushes the spool). While degraded there is at most one per
    /// `probe_ms` of the `now_ms` passed in, whatever the number of calls.
    pub fn probes(&self) -> u64 {
        self.inner.lock().probes
    }

    /// The listeners (add one with [`Listeners::subscribe`]).
    pub fn listeners(&self) -> &Listeners {
        &self.inner.options.listeners
    }

    /// Decides where a call goes; while degraded, starts the background
    /// probe and flush when one is due (this call is served locally).
    /// `key`: the entry a `get`, `compare_and_set` or `delete` names; a
    /// mirrored one is served locally while the machine's spool has records
    /// not yet in the primary (docs/store.md, "One place for mirrored keys").
    fn route(&self, now: Option<u64>, key: Option<&str>) -> Route {
        let inner = &self.inner;
        let (now, startup) = {
            let mut st = inner.lock();
            let now = now.unwrap_or(st.last_now).max(st.last_now);
            st.last_now = now;
            let startup = !st.startup_checked;
            st.startup_checked = true;
            (now, startup)
        };
        if startup && inner.spool_pending() {
            // An earlier process left a spool: served locally (where those
            // entries are) until the background flush has moved it over.
            let mut st = inner.lock();
            if st.degraded.is_none() {
                st.degraded = Some(now);
                st.startup_spool = true;
            }
            st.last_probe = now;
            drop(st);
            self.spawn_reconnect(now);
            return Route::Local;
        }
        let due = {
            let mut st = inner.lock();
            if st.degraded.is_none() {
                if !key.is_some_and(mirrored) {
                    return Route::Primary;
                }
                drop(st);
                if !inner.spool_pending() {
                    return Route::Primary;
                }
                st = inner.lock();
            }
            let due =
                !st.reconnecting && now >= st.last_probe.saturating_add(inner.options.probe_ms);
            if due {
                st.last_probe = now;
            }
            due
        };
        if due {
            self.spawn_reconnect(now);
        }
        Route::Local
    }

    fn spawn_reconnect(&self, now: u64) {
        {
            let mut st = self.inner.lock();
            if st.reconnecting {
                return;
            }
            st.reconnecting = true;
        }
        let inner = Arc::clone(&self.inner);
        let spawned = std::thread::Builder::new()
            .name(FLUSH_THREAD.to_owned())
            .spawn(move || inner.reconnect(now));
        match spawned {
            // The previous one has ended (`reconnecting` was false).
            Ok(handle) => {
                self.inner.lock().probes += 1;
                *self
                    .worker
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(handle);
            }
            // No thread now: the next due call tries again.
            Err(_) => self.inner.lock().reconnecting = false,
        }
    }

    fn degrade(&self, now: u64, e: &StoreError) {
        let fresh = {
            let mut st = self.inner.lock();
            let fresh = st.degraded.is_none();
            if fresh {
                st.degraded = Some(now);
                st.last_probe = now;
            }
            fresh
        };
        if fresh {
            self.inner.options.listeners.emit(&json!({
                "event": "store_degraded",
                "store": self.inner.options.name,
                "at_ms": now,
                "kind": e.kind().as_str(),
                "message": e.message(),
            }));
        }
    }

    fn spool(&self, op: Value, now: u64) -> Result<(), StoreError> {
        let seq = self
            .inner
            .local
            .append(SPOOL_STREAM, &op.to_string(), now)?;
        let mut st = self.inner.lock();
        st.spool_end = st.spool_end.max(seq);
        Ok(())
    }

    /// Runs `f` on the primary (then `on_primary` with its answer) or, when
    /// degraded, locally (then `on_local`); an `unavailable` from the
    /// primary degrades the wrapper and reruns `f` locally.
    fn call<T>(
        &self,
        (now, key): (Option<u64>, Option<&str>),
        f: impl Fn(&dyn Store) -> Result<T, StoreError>,
        on_primary: impl FnOnce(&T),
        on_local: impl FnOnce(&T) -> Result<(), StoreError>,
    ) -> Result<T, StoreError> {
        if let Route::Primary = self.route(now, key) {
            match f(self.inner.primary.as_ref()) {
                Err(e) if e.kind() == StoreErrorKind::Unavailable => {
                    let at = now.unwrap_or_else(|| self.inner.lock().last_now);
                    self.degrade(at, &e);
                }
                Ok(out) => {
                    on_primary(&out);
                    return Ok(out);
                }
                other => return other,
            }
        }
        let out = f(self.inner.local.as_ref())?;
        on_local(&out)?;
        Ok(out)
    }
}

impl Store for FallbackStore {
    fn get(&self, key: &str, now_ms: u64) -> Result<Option<Versioned>, StoreError> {
        self.call(
            (Some(now_ms), Some(key)),
            |s| s.get(key, now_ms),
            |_| {},
            |_| Ok(()),
        )
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
            (Some(now_ms), Some(key)),
            |s| s.compare_and_set(key, expected, value, ttl_ms, now_ms),
            |out| {
                if matches!(out, Cas::Written { .. }) && mirrored(key) {
                    self.inner.mirror_set(key, value, ttl_ms, now_ms);
                }
            },
            |out| match out {
                Cas::Written { .. } if mirrored(key) => self.spool(
                    json!({"op":"set","key":key,"value":value,"ttl_ms":ttl_ms,"now_ms":now_ms,"claim":expected.is_none()}),
                    now_ms,
                ),
                _ => Ok(()),
            },
        )
    }

    fn append(&self, stream: &str, record: &str, now_ms: u64) -> Result<u64, StoreError> {
        self.call(
            (Some(now_ms), None),
            |s| s.append(stream, record, now_ms),
            |_| {},
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
        self.call(
            (None, None),
            |s| s.read(stream, after, limit),
            |_| {},
            |_| Ok(()),
        )
    }

    fn delete(&self, key: &str) -> Result<bool, StoreError> {
        self.call(
            (None, Some(key)),
            |s| s.delete(key),
            |_| {
                if mirrored(key) {
                    self.inner.mirror_delete(key);
                }
            },
            |_| {
                if mirrored(key) {
                    let now = self.inner.lock().last_now;
                    self.spool(json!({"op":"delete","key":key}), now)
                } else {
                    Ok(())
                }
            },
        )
    }

    fn keys(&self, prefix: &str, now_ms: u64) -> Result<Vec<String>, StoreError> {
        self.call(
            (Some(now_ms), None),
            |s| s.keys(prefix, now_ms),
            |_| {},
            |_| Ok(()),
        )
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
