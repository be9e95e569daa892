//! [`RedisStore`]: the store on Redis 7, through the Lua scripts of
//! `host/src/store/redis/` (embedded verbatim; layout in their README).
//!
//! One synchronous connection (to one server, or a cluster connection for
//! `redis+cluster://`), behind a mutex, with connect, read and write
//! timeouts: a call never waits longer than `timeout_ms` (plus
//! `connect_timeout_ms` when it must reconnect; on a cluster, plus the
//! redirects and retries of a migrating slot). A connection that failed is
//! dropped and the next call reconnects.

mod conn;
mod layout;

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use redis::{ErrorKind, RedisError, Script, ServerErrorKind, Value};

use conn::{Client, Conn};
use layout::Layout;

use super::{Cas, Store, StoreError, StoreErrorKind, Versioned, check};
use crate::runtime::Clock;

const GET_LUA: &str = include_str!("redis/get.lua");
const CAS_LUA: &str = include_str!("redis/cas.lua");
const APPEND_LUA: &str = include_str!("redis/append.lua");
const PURGE_LUA: &str = include_str!("redis/purge.lua");
const OPEN_LUA: &str = include_str!("redis/open.lua");

/// The schema version the scripts implement (`open.lua` checks `{P}:meta`):
/// 2 is the layout with a hash tag per entry and per stream.
pub const REDIS_SCHEMA: u32 = 2;

/// How often the server clock re-samples `TIME`.
const CLOCK_RESAMPLE: Duration = Duration::from_secs(10);

/// The option names a store URL accepts (docs/store.md, "The Redis backend").
pub const URL_OPTIONS: &[&str] = &[
    "prefix",
    "timeout_ms",
    "connect_timeout_ms",
    "fallback",
    "spool",
    "probe_ms",
    "grace_ms",
];

/// What to do when Redis is unreachable (URL option `fallback`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fallback {
    /// Serve from a local SQLite spool ([`FallbackStore`](super::FallbackStore)); the default.
    Local,
    /// No wrapper: `unavailable` reaches the caller.
    None,
}

/// The options of a Redis store URL, with their defaults.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RedisOptions {
    /// The URL given to the client: no query string, password included.
    pub url: String,
    /// Whether the URL names a Redis Cluster (`redis+cluster://`).
    pub cluster: bool,
    /// The `redis://` URL of each node given (one for a single server; the
    /// seed nodes of a cluster), password included.
    pub nodes: Vec<String>,
    /// The URL without its password, for messages and events.
    pub display: String,
    /// `prefix` (default `ar`): keys are `{prefix}:...` and `{prefix:<tag>}:...`
    /// (cluster hash tags; layout in `host/src/store/redis/README.md`).
    pub prefix: String,
    /// `timeout_ms` (default 1000): every command's response timeout.
    pub timeout_ms: u64,
    /// `connect_timeout_ms` (default 1000).
    pub connect_timeout_ms: u64,
    /// `fallback` (default `local`).
    pub fallback: Fallback,
    /// `spool` (default: under `$XDG_STATE_HOME/agent-recovery/`, see
    /// [`default_spool_path`](super::fallback::default_spool_path)).
    pub spool: Option<String>,
    /// `probe_ms` (default 1000): how often a degraded wrapper tries Redis again.
    pub probe_ms: u64,
    /// `grace_ms` (default 60000): Redis drops an entry's hash `ttl + grace` after the write.
    pub grace_ms: u64,
}

impl RedisOptions {
    /// The store this URL names, the same text in Rust, Node and Python
    /// (docs/store.md, "URL"): `redis://<host>:<port>/<db>?prefix=<prefix>`,
    /// the host lowercased (an IPv6 address stays in brackets), port 6379 and
    /// db 0 when left out; no credentials, no other option. The default spool
    /// file is named after it, so workers of any language on one machine that
    /// name one store share one spool.
    ///
    /// A cluster's identity is `redis+cluster://<host>:<port>,..?prefix=<prefix>`
    /// with the seed nodes lowercased and sorted.
    pub fn identity(&self) -> String {
        if self.cluster {
            let mut seeds: Vec<String> = self
                .nodes
                .iter()
                .map(|n| {
                    let rest = n.strip_prefix("redis://").unwrap_or(n);
                    let rest = rest.rsplit_once('@').map_or(rest, |(_, r)| r);
                    rest.to_lowercase()
                })
                .collect();
            seeds.sort();
            return format!("redis+cluster://{}?prefix={}", seeds.join(","), self.prefix);
        }
        let rest = self.url.strip_prefix("redis://").unwrap_or(&self.url);
        let rest = rest.rsplit_once('@').map_or(rest, |(_, r)| r);
        let (hostport, db) = rest.split_once('/').unwrap_or((rest, ""));
        let db = db.parse::<u64>().unwrap_or(0);
        let (host, port) = match hostport.rsplit_once(':') {
            // `[::1]` alone: the colon is inside the brackets.
            Some((h, p)) if !p.contains(']') => (h, p.parse::<u16>().unwrap_or(6379)),
            _ => (hostport, 6379),
        };
        format!(
            "redis://{}:{port}/{db}?prefix={}",
            host.to_lowercase(),
            self.prefix
        )
    }

    /// Parses `redis://[user:pass@]host[:port][/db][?opts]`, or
    /// `redis+cluster://[user:pass@]host:port[,host:port..][?opts]` for a
    /// Redis Cluster (the seed nodes: any reachable one gives the others).
    ///
    /// `rediss://` (TLS) is refused with a hint: this build has no TLS
    /// client. Unknown or malformed options are `invalid-argument`.
    pub fn parse(url: &str) -> Result<Self, StoreError> {
        if let Some(rest) = url.strip_prefix("redis+cluster://") {
            let (base, query) = url.split_once('?').unwrap_or((url, ""));
            let rest = rest.split_once('?').map_or(rest, |(r, _)| r);
            let rest = rest.strip_suffix('/').unwrap_or(rest);
            let display = redact(base);
            let (userinfo, hosts) = match rest.rsplit_once('@') {
                Some((u, h)) => (format!("{u}@"), h),
                None => (String::new(), rest),
            };
            if hosts.is_empty() || hosts.contains('/') {
                return Err(StoreError::invalid(format!(
                    "{display}: a cluster URL names host:port seed nodes and no database; pass redis+cluster://host1:port1,host2:port2"
                )));
            }
            let nodes = hosts
                .split(',')
                .map(|h| format!("redis://{userinfo}{h}"))
                .collect();
            let mut o = Self::parse("redis://127.0.0.1/0")?;
            o.url = base.to_owned();
            o.display = display;
            o.cluster = true;
            o.nodes = nodes;
            o.apply_query(query)?;
            return Ok(o);
        }
        if url.starts_with("rediss://") {
            return Err(StoreError::invalid(format!(
                "{}: rediss:// (TLS) is not supported by this build; reach Redis over a TLS tunnel (stunnel, a service mesh) and pass redis://",
                redact(url)
            )));
        }
        if !url.starts_with("redis://") {
            return Err(StoreError::invalid(format!(
                "{}: not a redis:// URL; pass redis://[user:pass@]host[:port][/db][?options] or redis+cluster://host:port,host:port[?options]",
                redact(url)
            )));
        }
        let (base, query) = url.split_once('?').unwrap_or((url, ""));
        let display = redact(base);
        let mut o = RedisOptions {
            url: base.to_owned(),
            cluster: false,
            nodes: vec![base.to_owned()],
            display,
            prefix: "ar".to_owned(),
            timeout_ms: 1000,
            connect_timeout_ms: 1000,
            fallback: Fallback::Local,
            spool: None,
            probe_ms: 1000,
            grace_ms: 60_000,
        };
        o.apply_query(query)?;
        Ok(o)
    }

    /// Applies the options of a URL's query string.
    fn apply_query(&mut self, query: &str) -> Result<(), StoreError> {
        let display = self.display.clone();
        let o = self;
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            let ms = |v: &str| -> Result<u64, StoreError> {
                match v.parse::<u64>() {
                    Ok(n) if (1..=check::MAX_INTEGER).contains(&n) => Ok(n),
                    _ => Err(StoreError::invalid(format!(
                        "{display}: option {k}={v:?} is not a positive integer of milliseconds; pass e.g. {k}=1000"
                    ))),
                }
            };
            match k {
                "prefix" => {
                    if v.is_empty() || v.contains(['{', '}', ':']) {
                        return Err(StoreError::invalid(format!(
                            "{display}: option prefix={v:?} must be non-empty without '{{', '}}' or ':'; pass e.g. prefix=ar"
                        )));
                    }
                    o.prefix = v.to_owned();
                }
                "timeout_ms" => o.timeout_ms = ms(v)?,
                "connect_timeout_ms" => o.connect_timeout_ms = ms(v)?,
                "probe_ms" => o.probe_ms = ms(v)?,
                "grace_ms" => o.grace_ms = ms(v)?,
                "fallback" => {
                    o.fallback = match v {
                        "local" => Fallback::Local,
                        "none" => Fallback::None,
                        _ => {
                            return Err(StoreError::invalid(format!(
                                "{display}: option fallback={v:?} is not local or none; pass fallback=local (spool locally while Redis is down) or fallback=none"
                            )));
                        }
                    }
                }
                "spool" => {
                    if v.is_empty() {
                        return Err(StoreError::invalid(format!(
                            "{display}: option spool is empty; pass spool=/path/to/spool.sqlite or leave it out"
                        )));
                    }
                    o.spool = Some(v.to_owned());
                }
                _ => {
                    return Err(StoreError::invalid(format!(
                        "{display}: unknown option {k:?}; the known options are {}",
                        URL_OPTIONS.join(", ")
                    )));
                }
            }
        }
        Ok(())
    }
}

/// The URL without its password (`redis://user:***@host`).
pub(crate) fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(authority_end);
    match authority.rsplit_once('@') {
        Some((userinfo, host)) => {
            let user = userinfo.split_once(':').map_or(userinfo, |(u, _)| u);
            if userinfo.contains(':') {
                format!("{scheme}://{user}:***@{host}{tail}")
            } else {
                format!("{scheme}://{user}@{host}{tail}")
            }
        }
        None => url.to_owned(),
    }
}

struct Scripts {
    get: Script,
    cas: Script,
    append: Script,
    purge: Script,
    open: Script,
}

struct Inner {
    client: Client,
    conn: Mutex<Option<Conn>>,
    options: RedisOptions,
    prefix: String,
    layout: Layout,
    scripts: Scripts,
    clock: Mutex<ClockState>,
}

/// The store on Redis or a Redis Cluster (docs/store.md, "The Redis backend").
///
/// ```no_run
/// use agent_recovery::store::{RedisStore, Store};
/// let store = RedisStore::open("redis://127.0.0.1:6379/0?prefix=ar&fallback=none")?;
/// store.append("journal/run-1", r#"{"step":"charge"}"#, 1_700_000_000_000)?;
/// let cluster = RedisStore::open("redis+cluster://10.0.0.1:7000,10.0.0.2:7000?fallback=none")?;
/// # Ok::<(), agent_recovery::store::StoreError>(())
/// ```
#[derive(Clone)]
pub struct RedisStore {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for RedisStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisStore")
            .field("url", &self.inner.options.display)
            .field("prefix", &self.inner.prefix)
            .finish()
    }
}

impl RedisStore {
    /// Connects to the URL and checks (or claims) the store's metadata.
    pub fn open(url: &str) -> Result<Self, StoreError> {
        Self::with_options(RedisOptions::parse(url)?)
    }

    /// Like [`open`](Self::open) with parsed options; connects at once.
    pub fn with_options(options: RedisOptions) -> Result<Self, StoreError> {
        let store = Self::lazy(options)?;
        store.check_meta()?;
        Ok(store)
    }

    /// Builds the client without connecting; the metadata is checked on the
    /// first call that connects.
    pub(crate) fn lazy(options: RedisOptions) -> Result<Self, StoreError> {
        let client = Client::new(
            &options.nodes,
            options.cluster,
            Duration::from_millis(options.timeout_ms),
        )
        .map_err(|e| {
            StoreError::invalid(format!(
                "{}: not a valid Redis URL ({e}); pass redis://[user:pass@]host[:port][/db] or redis+cluster://host:port,host:port",
                options.display
            ))
        })?;
        Ok(RedisStore {
            inner: Arc::new(Inner {
                client,
                conn: Mutex::new(None),
                prefix: format!("{{{}}}", options.prefix),
                layout: Layout::new(&options.prefix),
                options,
                scripts: Scripts {
                    get: Script::new(GET_LUA),
                    cas: Script::new(CAS_LUA),
                    append: Script::new(APPEND_LUA),
                    purge: Script::new(PURGE_LUA),
                    open: Script::new(OPEN_LUA),
                },
                clock: Mutex::new(ClockState::new()),
            }),
        })
    }

    /// The options this store was opened with.
    pub fn options(&self) -> &RedisOptions {
        &self.inner.options
    }

    /// Connects when there is no connection (which runs `open.lua`).
    fn check_meta(&self) -> Result<(), StoreError> {
        self.with_conn(|_| Ok(()))
    }

    fn lock(&self) -> MutexGuard<'_, Option<Conn>> {
        self.inner
            .conn
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Runs `f` on the connection, connecting first when there is none; a
    /// connection-level failure drops the connection.
    fn with_conn<T>(
        &self,
        mut f: impl FnMut(&mut Conn) -> Result<T, RedisError>,
    ) -> Result<T, StoreError> {
        let mut guard = self.lock();
        let mut fresh = false;
        if guard.is_none() {
            *guard = Some(self.connect()?);
            fresh = true;
        }
        let Some(conn) = guard.as_mut() else {
            return Err(self.unavailable("no connection"));
        };
        let mut result = f(conn);
        if let Err(e) = &result
            && conn.is_cluster()
            && matches!(
                e.kind(),
                ErrorKind::Server(ServerErrorKind::Moved | ServerErrorKind::Ask)
            )
        {
            // The client's slot map stayed stale through its redirects (a slot
            // that just moved): a new connection reads the cluster's map again.
            // A MOVED or ASK answer means the command did not run.
            *conn = self.connect()?;
            result = f(conn);
        }
        match result {
            Ok(v) => {
                if fresh {
                    drop(guard);
                    // A new connection may reach a server restarted empty:
                    // claim the metadata again (cheap, idempotent).
                    self.check_meta_quiet()?;
                }
                Ok(v)
            }
            Err(e) => {
                let err = self.map_err(&e);
                if err.kind() == StoreErrorKind::Unavailable || !conn.is_open() {
                    *guard = None;
                }
                Err(err)
            }
        }
    }

    fn check_meta_quiet(&self) -> Result<(), StoreError> {
        let mut guard = self.lock();
        let Some(conn) = guard.as_mut() else {
            return Ok(());
        };
        let reply: Result<Value, RedisError> = self
            .inner
            .scripts
            .open
            .key(self.inner.layout.meta())
            .arg(REDIS_SCHEMA)
            .invoke(conn.like());
        drop(guard);
        match reply {
            Ok(reply) => {
                let items = array(&reply, "open", &self.inner.options.display)?;
                if int(items.first()) == Some(1) {
                    return Ok(());
                }
                drop(self.lock().take());
                let field = |i: usize| items.get(i).map(text).unwrap_or_default();
                Err(StoreError::new(
                    StoreErrorKind::Incompatible,
                    format!(
                        "{}: prefix {} holds app {:?} schema {:?}, not agent-recovery schema {REDIS_SCHEMA}; use another prefix=, or drain a store of another schema with the agent-recovery version that wrote it",
                        self.inner.options.display,
                        self.inner.prefix,
                        field(1),
                        field(2)
                    ),
                ))
            }
            Err(e) => {
                let err = self.map_err(&e);
                if err.kind() == StoreErrorKind::Unavailable {
                    drop(self.lock().take());
                }
                Err(err)
            }
        }
    }

    fn connect(&self) -> Result<Conn, StoreError> {
        let o = &self.inner.options;
        self.inner
            .client
            .connect(
                Duration::from_millis(o.connect_timeout_ms),
                Duration::from_millis(o.timeout_ms),
            )
            .map_err(|e| self.map_err(&e))
    }

    fn unavailable(&self, what: &str) -> StoreError {
        StoreError::new(
            StoreErrorKind::Unavailable,
            format!(
                "{}: {what}; check that Redis is running and reachable, or keep fallback=local",
                self.inner.options.display
            ),
        )
    }

    fn map_err(&self, e: &RedisError) -> StoreError {
        let url = &self.inner.options.display;
        let code = e.code().unwrap_or("");
        let kind = e.kind();
        if matches!(code, "NOAUTH" | "WRONGPASS" | "NOPERM")
            || kind == ErrorKind::AuthenticationFailed
            || kind == ErrorKind::Server(ServerErrorKind::NoPerm)
        {
            return StoreError::new(
                StoreErrorKind::Io,
                format!(
                    "{url}: Redis refused the credentials ({}); check the URL's user and password (redis://user:pass@host) and the user's ACL",
                    e.to_string().replace('\n', " ")
                ),
            );
        }
        if code == "WRONGTYPE" {
            return StoreError::new(
                StoreErrorKind::Corrupt,
                format!(
                    "{url}: a key under {} has the wrong Redis type ({e}); another program wrote there: use another prefix=",
                    self.inner.prefix
                ),
            );
        }
        if code == "CROSSSLOT" || kind == ErrorKind::Server(ServerErrorKind::CrossSlot) {
            return StoreError::new(
                StoreErrorKind::Corrupt,
                format!(
                    "{url}: Redis refused keys of one call in several slots ({e}); every key of a call shares one hash tag, so check that nothing rewrites the keys (a proxy, a key-renaming layer)"
                ),
            );
        }
        if matches!(
            code,
            "LOADING"
                | "BUSY"
                | "OOM"
                | "MASTERDOWN"
                | "TRYAGAIN"
                | "CLUSTERDOWN"
                | "MOVED"
                | "ASK"
        ) || matches!(
            kind,
            ErrorKind::Server(
                ServerErrorKind::BusyLoading
                    | ServerErrorKind::TryAgain
                    | ServerErrorKind::ClusterDown
                    | ServerErrorKind::MasterDown
                    | ServerErrorKind::Moved
                    | ServerErrorKind::Ask
                    | ServerErrorKind::ReadOnly
            ) | ErrorKind::ClusterConnectionNotFound
        ) || kind == ErrorKind::Io
            || e.is_timeout()
            || e.is_connection_dropped()
            || e.is_connection_refusal()
        {
            let what = if e.is_timeout() {
                "no answer within the timeout".to_owned()
            } else {
                format!("Redis unreachable ({e})")
            };
            return self.unavailable(&what);
        }
        if matches!(kind, ErrorKind::Parse | ErrorKind::UnexpectedReturnType) {
            return StoreError::new(
                StoreErrorKind::Corrupt,
                format!("{url}: unexpected reply ({e}); check that this is Redis 7 or newer"),
            );
        }
        StoreError::new(
            StoreErrorKind::Io,
            format!("{url}: Redis error ({e}); check the server's log"),
        )
    }

    /// Removes every entry expired at `now_ms`; returns how many.
    ///
    /// A sweep: `SCAN` finds the entries (on every primary of a cluster),
    /// `purge.lua` removes each one that has expired, atomically in its slot.
    pub fn purge_expired(&self, now_ms: u64) -> Result<usize, StoreError> {
        check::integer("now_ms", now_ms)?;
        let layout = &self.inner.layout;
        let found = self.with_conn(|c| c.scan(&layout.entry_pattern("")))?;
        let mut removed = 0;
        for redis_key in found {
            if layout.key_of(&redis_key).is_none() {
                continue;
            }
            let n: i64 = self.with_conn(|c| {
                self.inner
                    .scripts
                    .purge
                    .key(&redis_key)
                    .arg(now_ms)
                    .invoke(c.like())
            })?;
            removed += usize::try_from(n).unwrap_or(0);
        }
        Ok(removed)
    }

    /// Sends `PING` (to every node of a cluster); Ok when Redis answered.
    pub fn ping(&self) -> Result<(), StoreError> {
        self.with_conn(|c| redis::cmd("PING").query::<Value>(c.like()))
            .map(|_| ())
    }

    /// The server's clock (see [`ServerClock`]).
    pub fn server_clock(&self) -> Arc<dyn Clock> {
        Arc::new(ServerClock {
            store: self.clone(),
        })
    }

    fn server_time_ms(&self) -> Result<(u64, u64, u64), StoreError> {
        let before = local_ms();
        let (s, us): (u64, u64) = self.with_conn(|c| redis::cmd("TIME").query(c.like()))?;
        let after = local_ms();
        Ok((before, after, s * 1000 + us / 1000))
    }
}

fn local_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

fn text(v: &Value) -> String {
    match v {
        Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
        Value::SimpleString(s) => s.clone(),
        Value::Int(n) => n.to_string(),
        _ => String::new(),
    }
}

fn int(v: Option<&Value>) -> Option<i64> {
    match v? {
        Value::Int(n) => Some(*n),
        Value::BulkString(b) => std::str::from_utf8(b).ok()?.parse().ok(),
        _ => None,
    }
}

fn array<'a>(v: &'a Value, what: &str, url: &str) -> Result<&'a [Value], StoreError> {
    match v {
        Value::Array(items) => Ok(items),
        other => Err(shape(what, url, other)),
    }
}

fn shape(what: &str, url: &str, got: &Value) -> StoreError {
    StoreError::new(
        StoreErrorKind::Corrupt,
        format!(
            "{url}: the {what} script answered {got:?}, not the documented shape; check that the keys under the prefix were written by agent-recovery"
        ),
    )
}

fn version(v: Option<&Value>, what: &str, url: &str) -> Result<u64, StoreError> {
    match int(v).and_then(|n| u64::try_from(n).ok()) {
        Some(n) if n >= 1 => Ok(n),
        _ => Err(shape(what, url, v.unwrap_or(&Value::Nil))),
    }
}

fn utf8(v: Option<&Value>, what: &str, url: &str) -> Result<String, StoreError> {
    match v {
        Some(Value::BulkString(b)) => String::from_utf8(b.clone()).map_err(|_| {
            StoreError::new(
                StoreErrorKind::Corrupt,
                format!("{url}: a {what} value is not UTF-8; the data under the prefix is damaged"),
            )
        }),
        other => Err(shape(what, url, other.unwrap_or(&Value::Nil))),
    }
}

impl RedisStore {
    /// The cas script on one key; `version` is "" (the script takes the
    /// next revision itself, one server), "?" (check only) or a revision.
    fn cas_script(
        &self,
        c: &mut Conn,
        entry: &str,
        args: &CasArgs<'_>,
        version: &str,
    ) -> Result<Value, RedisError> {
        let mut inv = self.inner.scripts.cas.key(entry);
        if version.is_empty() {
            inv.key(self.inner.layout.rev());
        }
        inv.arg(args.expected.map_or(String::new(), |v| v.to_string()))
            .arg(args.value)
            .arg(args.ttl_ms.map_or(String::new(), |v| v.to_string()))
            .arg(args.now_ms)
            .arg(self.inner.options.grace_ms)
            .arg(version)
            .invoke(c.like())
    }

    /// A compare-and-set on a cluster: the entry's slot checks, the
    /// revision's slot issues the version, the entry's slot checks again and
    /// writes. A version taken by a write that then lost the race is skipped,
    /// never reused.
    fn cas_cluster(
        &self,
        c: &mut Conn,
        entry: &str,
        args: &CasArgs<'_>,
    ) -> Result<Value, RedisError> {
        let first = self.cas_script(c, entry, args, "?")?;
        if !matches!(&first, Value::Array(items) if items.len() == 1 && int(items.first()) == Some(2))
        {
            return Ok(first);
        }
        let n: i64 = redis::cmd("INCR")
            .arg(self.inner.layout.rev())
            .query(c.like())?;
        self.cas_script(c, entry, args, &n.to_string())
    }
}

/// The arguments of one compare-and-set.
struct CasArgs<'a> {
    expected: Option<u64>,
    value: &'a str,
    ttl_ms: Option<u64>,
    now_ms: u64,
}

impl Store for RedisStore {
    fn get(&self, key: &str, now_ms: u64) -> Result<Option<Versioned>, StoreError> {
        check::name("key", key)?;
        check::integer("now_ms", now_ms)?;
        let entry = self.inner.layout.entry(key);
        let reply: Value = self.with_conn(|c| {
            self.inner
                .scripts
                .get
                .key(&entry)
                .arg(now_ms)
                .invoke(c.like())
        })?;
        let url = &self.inner.options.display;
        let items = array(&reply, "get", url)?;
        if items.is_empty() {
            return Ok(None);
        }
        Ok(Some(Versioned {
            value: utf8(items.first(), "get", url)?,
            version: version(items.get(1), "get", url)?,
        }))
    }

    fn compare_and_set(
        &self,
        key: &str,
        expected: Option<u64>,
        value: &str,
        ttl_ms: Option<u64>,
        now_ms: u64,
    ) -> Result<Cas, StoreError> {
        check::cas(key, expected, value, ttl_ms, now_ms)?;
        let entry = self.inner.layout.entry(key);
        let args = CasArgs {
            expected,
            value,
            ttl_ms,
            now_ms,
        };
        let reply: Value = self.with_conn(|c| {
            if c.is_cluster() {
                self.cas_cluster(c, &entry, &args)
            } else {
                self.cas_script(c, &entry, &args, "")
            }
        })?;
        let url = &self.inner.options.display;
        let items = array(&reply, "cas", url)?;
        match (int(items.first()), items.len()) {
            (Some(1), 2) => Ok(Cas::Written {
                version: version(items.get(1), "cas", url)?,
            }),
            (Some(0), 1) => Ok(Cas::Conflict { current: None }),
            (Some(0), 3) => Ok(Cas::Conflict {
                current: Some(Versioned {
                    value: utf8(items.get(1), "cas", url)?,
                    version: version(items.get(2), "cas", url)?,
                }),
            }),
            _ => Err(shape("cas", url, &reply)),
        }
    }

    fn append(&self, stream: &str, record: &str, now_ms: u64) -> Result<u64, StoreError> {
        check::name("stream", stream)?;
        check::json("record", stream, record)?;
        check::integer("now_ms", now_ms)?;
        let key = self.inner.layout.stream(stream);
        let n: Value = self.with_conn(|c| {
            self.inner
                .scripts
                .append
                .key(&key)
                .arg(record)
                .arg(now_ms)
                .invoke(c.like())
        })?;
        version(Some(&n), "append", &self.inner.options.display)
    }

    fn read(
        &self,
        stream: &str,
        after: u64,
        limit: usize,
    ) -> Result<Vec<(u64, String)>, StoreError> {
        check::name("stream", stream)?;
        check::integer("after", after)?;
        if limit == 0 {
            return Ok(Vec::new());
        }
        let key = self.inner.layout.stream(stream);
        let reply: Value = self.with_conn(|c| {
            redis::cmd("XRANGE")
                .arg(&key)
                .arg(format!("({after}-0"))
                .arg("+")
                .arg("COUNT")
                // Redis takes a signed 64-bit count; usize::MAX means "all".
                .arg(
                    u64::try_from(limit)
                        .unwrap_or(u64::MAX)
                        .min(i64::MAX as u64),
                )
                .query(c.like())
        })?;
        let url = &self.inner.options.display;
        let mut out = Vec::new();
        for entry in array(&reply, "XRANGE", url)? {
            let parts = array(entry, "XRANGE", url)?;
            let id = text(parts.first().unwrap_or(&Value::Nil));
            let seq = id
                .split('-')
                .next()
                .and_then(|s| s.parse::<u64>().ok())
                .ok_or_else(|| shape("XRANGE", url, entry))?;
            let fields = array(parts.get(1).unwrap_or(&Value::Nil), "XRANGE", url)?;
            let mut record = None;
            for pair in fields.chunks(2) {
                if pair.first().map(text).as_deref() == Some("r") {
                    record = Some(utf8(pair.get(1), "XRANGE", url)?);
                }
            }
            let record = record.ok_or_else(|| shape("XRANGE", url, entry))?;
            out.push((seq, record));
        }
        Ok(out)
    }

    fn delete(&self, key: &str) -> Result<bool, StoreError> {
        check::name("key", key)?;
        let entry = self.inner.layout.entry(key);
        let n: i64 = self.with_conn(|c| redis::cmd("DEL").arg(&entry).query(c.like()))?;
        Ok(n > 0)
    }

    /// A sweep: `SCAN` (on every primary of a cluster) for the entries whose
    /// key starts with `prefix`, then each one's liveness, in UTF-8 byte order.
    fn keys(&self, prefix: &str, now_ms: u64) -> Result<Vec<String>, StoreError> {
        check::prefix(prefix)?;
        check::integer("now_ms", now_ms)?;
        let layout = &self.inner.layout;
        let found = self.with_conn(|c| c.scan(&layout.entry_pattern(prefix)))?;
        let mut out = Vec::new();
        for redis_key in &found {
            let Some(key) = layout.key_of(redis_key) else {
                continue;
            };
            if key.starts_with(prefix) && self.get(key, now_ms)?.is_some() {
                out.push(key.to_owned());
            }
        }
        out.sort();
        Ok(out)
    }
}

struct ClockState {
    /// Local monotonic base: this instant is `base_ms` local Unix ms.
    base: Instant,
    base_ms: u64,
    offset_ms: i64,
    sampled: Option<Instant>,
    /// A re-sample is in progress on the background thread.
    sampling: bool,
    last: u64,
}

impl ClockState {
    fn new() -> Self {
        ClockState {
            base: Instant::now(),
            base_ms: local_ms(),
            offset_ms: 0,
            sampled: None,
            sampling: false,
            last: 0,
        }
    }
    fn local(&self) -> u64 {
        let elapsed = u64::try_from(self.base.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.base_ms.saturating_add(elapsed)
    }
    /// Sets the offset from a `TIME` sample: (local before, local after,
    /// server), ms.
    fn apply(&mut self, (before, after, server): (u64, u64, u64)) {
        let mid = before / 2 + after / 2;
        self.offset_ms =
            i64::try_from(server).unwrap_or(i64::MAX) - i64::try_from(mid).unwrap_or(i64::MAX);
    }
}

/// The name of the thread a [`ServerClock`] re-samples `TIME` on.
const CLOCK_THREAD: &str = "agent-recovery-clock";

/// The Redis server's clock, as seen from this process
/// ([`RedisStore::server_clock`]).
///
/// It samples `TIME` on first use (in that call) and every 10 s after, on a
/// background thread: offset = server time minus the midpoint of the local
/// round trip; now = the local monotonic time plus that offset, never going
/// backwards within the process. A re-sample never runs in a caller's
/// `now_ms`: the call answers at once with the offset it has, and the new
/// offset applies when the sample is back. While Redis is unreachable it
/// keeps the last offset (0 before the first sample). Sleeps are real.
/// Workers using it agree on breakers' `since_ms`, leases and TTLs within
/// half a round trip, whatever their own clocks say.
pub struct ServerClock {
    store: RedisStore,
}

impl ServerClock {
    fn state(&self) -> std::sync::MutexGuard<'_, ClockState> {
        lock_clock(&self.store)
    }

    /// Re-samples `TIME` on a background thread.
    fn resample(&self) {
        let store = self.store.clone();
        let spawned = std::thread::Builder::new()
            .name(CLOCK_THREAD.to_owned())
            .spawn(move || {
                let sample = store.server_time_ms().ok();
                let mut st = lock_clock(&store);
                if let Some(sample) = sample {
                    st.apply(sample);
                }
                st.sampling = false;
            });
        if spawned.is_err() {
            // No thread now: the next read of the clock after the period
            // tries again.
            self.state().sampling = false;
        }
    }
}

fn lock_clock(store: &RedisStore) -> std::sync::MutexGuard<'_, ClockState> {
    store
        .inner
        .clock
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Clock for ServerClock {
    fn now_ms(&self) -> u64 {
        let (first, due) = {
            let mut st = self.state();
            let first = st.sampled.is_none();
            let due = !st.sampling && st.sampled.is_none_or(|t| t.elapsed() >= CLOCK_RESAMPLE);
            if due {
                // A failed sample waits the full period too: an unreachable
                // Redis is not asked again on every read of the clock.
                st.sampled = Some(Instant::now());
                st.sampling = !first;
            }
            (first, due)
        };
        if due && first {
            if let Ok(sample) = self.store.server_time_ms() {
                self.state().apply(sample);
            }
        } else if due {
            self.resample();
        }
        let mut st = self.state();
        let now = st.local().saturating_add_signed(st.offset_ms);
        let now = now.max(st.last);
        st.last = now;
        now
    }

    fn sleep_ms(&self, ms: u64) {
        std::thread::sleep(Duration::from_millis(ms));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identity_is_the_stores_name_only() {
        for (url, identity) in [
            (
                "redis://user:secret@DB.example:6380/2?timeout_ms=5&prefix=x",
                "redis://db.example:6380/2?prefix=x",
            ),
            ("redis://127.0.0.1", "redis://127.0.0.1:6379/0?prefix=ar"),
            ("redis://[::1]:7000/3", "redis://[::1]:7000/3?prefix=ar"),
            ("redis://[::1]", "redis://[::1]:6379/0?prefix=ar"),
        ] {
            assert_eq!(
                RedisOptions::parse(url).unwrap().identity(),
                identity,
                "{url}"
            );
        }
    }

    #[test]
    fn redacts_the_password_only() {
        assert_eq!(
            redact("redis://u:secret@h:1/0"),
            "redis://u:***@h:1/0".to_owned()
        );
        assert_eq!(redact("redis://h:1/0"), "redis://h:1/0".to_owned());
        assert_eq!(redact("redis://:pw@h"), "redis://:***@h".to_owned());
    }

    #[test]
    fn parses_options_with_defaults_and_refuses_unknown_ones() {
        let o = RedisOptions::parse("redis://h:1/0").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            (o.prefix.as_str(), o.timeout_ms, o.probe_ms, o.grace_ms),
            ("ar", 1000, 1000, 60_000)
        );
        let o = RedisOptions::parse("redis://h/0?prefix=x&timeout_ms=5&fallback=none")
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((o.prefix.as_str(), o.timeout_ms), ("x", 5));
        assert_eq!(o.fallback, Fallback::None);
        assert_eq!(o.url, "redis://h/0");
        let e = RedisOptions::parse("redis://h/0?colour=red").err();
        assert!(
            e.as_ref()
                .is_some_and(|e| e.kind() == StoreErrorKind::InvalidArgument
                    && e.message().contains("probe_ms")),
            "{e:?}"
        );
        assert!(RedisOptions::parse("redis://h/0?timeout_ms=0").is_err());
        assert!(RedisOptions::parse("rediss://h/0").is_err());
    }
}
