//! The Rust worker of the kill tests (`tests/durability/kill.py`), speaking
//! the worker protocol of `docs/durability.md` §5:
//!
//! `durable_worker STORE LEDGER JOB` where JOB is JSON text
//! (`{"mode":"run"|"recover"|"replay", "run_id", "seed", "kill_at", "config", "steps":[..]}`).
//! The ledger is an SQLite file standing for the external system; every
//! operation and compensation records its calls there and applies its effect
//! at most once per key. At the `kill_at`-th point of interest (before or
//! after a side effect) the worker sends itself SIGKILL.
//!
//! The fleet harness (`tests/fleet/fleet.py`) adds optional job fields, the
//! same as `python/tests/durable_worker.py` and `node/test/durable_worker.mjs`:
//! - `"clock": "virtual"`: the runtime runs on a virtual clock from the job's
//!   `now_ms` (sleeps advance it, nothing really waits); default: the system clock;
//! - `"events": true`: the printed line also carries `"events"` (every event
//!   the runtime and its store emitted, in order) and `"max_store_call_ms"`
//!   (the slowest store call, real time, in ms);
//! - `"hold_at": N, "hold_file": PATH`: at the N-th point of interest the
//!   worker creates `PATH.reached` and waits until PATH exists (the harness
//!   acts, e.g. kills Redis, at a known point of the run).
//!
//! `cargo run --release -p agent-recovery --example durable_worker -- STORE LEDGER JOB`

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use agent_recovery::Loader;
use agent_recovery::runtime::{
    Call, Clock, Operations, Outcome, RecoverOptions, Runtime, Step, SystemClock, VirtualClock,
};
use agent_recovery::store::{Cas, SqliteStore, Store, StoreError, Versioned};
use rusqlite::{Connection, params};
use serde::Deserialize;
use serde_json::{Value, json};

#[derive(Deserialize)]
struct Job {
    mode: String,
    #[serde(default)]
    run_id: String,
    #[serde(default)]
    seed: Option<u64>,
    #[serde(default)]
    kill_at: Option<u64>,
    #[serde(default)]
    config: Option<Value>,
    #[serde(default)]
    steps: Vec<JobStep>,
    /// `replay` mode: the dead-letter record to replay.
    #[serde(default)]
    id: Option<String>,
    /// The virtual clock's start (Unix ms), with `clock: "virtual"`.
    #[serde(default)]
    now_ms: Option<u64>,
    /// `"virtual"`: run on a virtual clock from `now_ms`; absent or `"system"`: real time.
    #[serde(default)]
    clock: Option<String>,
    /// Print the events and the slowest store call too.
    #[serde(default)]
    events: bool,
    /// The point of interest to hold at (with `hold_file`).
    #[serde(default)]
    hold_at: Option<u64>,
    /// Created as `<hold_file>.reached` at `hold_at`; the worker goes on once it exists.
    #[serde(default)]
    hold_file: Option<PathBuf>,
}

#[derive(Clone, Deserialize)]
struct JobStep {
    id: String,
    #[serde(default)]
    fail_times: u64,
    #[serde(default)]
    compensation: bool,
    #[serde(default)]
    comp_fail_times: u64,
    #[serde(default)]
    fail_always: bool,
    #[serde(default)]
    permanent: bool,
    /// This step is a fan-out of these branches (then only `id` counts).
    #[serde(default)]
    fanout: Option<JobFanout>,
}

/// A fan-out step of the job: `{"min_results", "branches": [step, ..]}`.
#[derive(Clone, Deserialize)]
struct JobFanout {
    min_results: u32,
    branches: Vec<JobStep>,
}

/// The job's steps and its fan-outs' branches, flat.
fn plain_steps(steps: &[JobStep]) -> impl Iterator<Item = &JobStep> {
    steps.iter().flat_map(|s| match &s.fanout {
        Some(f) => f.branches.iter().collect::<Vec<_>>(),
        None => vec![s],
    })
}

/// Points of interest reached, the one to hold at and the one to die at.
struct Points {
    reached: AtomicU64,
    kill_at: Option<u64>,
    hold: Option<(u64, PathBuf)>,
}

impl Points {
    fn hit(&self) {
        let n = self.reached.fetch_add(1, Ordering::SeqCst) + 1;
        if let Some((at, file)) = &self.hold
            && *at == n
        {
            let mut reached = file.clone().into_os_string();
            reached.push(".reached");
            if let Err(e) = std::fs::write(&reached, b"") {
                eprintln!("durable_worker: cannot create {reached:?}: {e}");
            }
            while !file.exists() {
                // Waiting for the harness to act, not timing.
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        if self.kill_at == Some(n) {
            // A real SIGKILL: no destructor, no flush, no `end`.
            let _ = rustix::process::kill_process(
                rustix::process::getpid(),
                rustix::process::Signal::KILL,
            );
            // Not reached; if the signal failed, die without cleanup anyway.
            std::process::abort();
        }
    }
}

/// The external system: `applied` (one row per key that took effect) and
/// `calls` (every call).
struct Ledger {
    conn: Mutex<Connection>,
}

impl Ledger {
    /// Opens (and on first use creates) the ledger. Workers start together
    /// on a new file: switching it to WAL can answer "database is locked"
    /// at once, without waiting out the busy timeout, so that is retried
    /// (every 20 ms, for at most 10 s).
    fn open(path: &str) -> rusqlite::Result<Ledger> {
        let mut tries = 0;
        loop {
            match Ledger::try_open(path) {
                Err(rusqlite::Error::SqliteFailure(e, _))
                    if tries < 500
                        && matches!(
                            e.code,
                            rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked
                        ) =>
                {
                    tries += 1;
                    std::thread::sleep(std::time::Duration::from_millis(20));
                }
                other => return other,
            }
        }
    }

    fn try_open(path: &str) -> rusqlite::Result<Ledger> {
        let conn = Connection::open(path)?;
        conn.busy_timeout(std::time::Duration::from_secs(10))?;
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.execute_batch(
            "CREATE TABLE IF NOT EXISTS applied(key TEXT PRIMARY KEY, step TEXT, kind TEXT, seq INTEGER);
             CREATE TABLE IF NOT EXISTS calls(n INTEGER PRIMARY KEY AUTOINCREMENT, step TEXT, kind TEXT,
                                              key TEXT, attempt INTEGER, pid INTEGER, applied INTEGER);",
        )?;
        Ok(Ledger {
            conn: Mutex::new(conn),
        })
    }

    /// One call of step `s` (`kind` operation or compensation), §5 steps 2-3.
    fn call(&self, s: &JobStep, kind: &str, call: &Call) -> rusqlite::Result<Outcome> {
        let mut conn = self.conn.lock().unwrap_or_else(PoisonError::into_inner);
        let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        let k: i64 = tx.query_row(
            "SELECT COUNT(*) FROM calls WHERE key = ?1 AND kind = ?2",
            params![call.key, kind],
            |r| r.get(0),
        )?;
        let fail_times = if kind == "operation" {
            s.fail_times
        } else {
            s.comp_fail_times
        };
        let pid = std::process::id();
        if (kind == "operation" && s.fail_always) || u64::try_from(k).unwrap_or(0) < fail_times {
            tx.execute(
                "INSERT INTO calls(step, kind, key, attempt, pid, applied) VALUES (?1, ?2, ?3, ?4, ?5, 0)",
                params![s.id, kind, call.key, call.attempt, pid],
            )?;
            tx.commit()?;
            let status = if s.permanent { 400 } else { 503 };
            return Ok(Outcome::Failed(
                json!({"source": "http", "status": status}).to_string(),
            ));
        }
        let added = tx.execute(
            "INSERT OR IGNORE INTO applied(key, step, kind, seq) \
             VALUES (?1, ?2, ?3, (SELECT COALESCE(MAX(seq), 0) + 1 FROM applied))",
            params![call.key, s.id, kind],
        )?;
        tx.execute(
            "INSERT INTO calls(step, kind, key, attempt, pid, applied) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            params![s.id, kind, call.key, call.attempt, pid, i64::from(added == 1)],
        )?;
        tx.commit()?;
        Ok(Outcome::Ok(json!({"step": s.id})))
    }
}

/// The operation (or compensation) of step `s`, §5.
fn op(
    s: &JobStep,
    kind: &'static str,
    ledger: &Arc<Ledger>,
    points: &Arc<Points>,
) -> impl FnMut(&Call) -> Outcome + Send + 'static {
    let (s, ledger, points) = (s.clone(), Arc::clone(ledger), Arc::clone(points));
    move |call: &Call| {
        points.hit();
        let outcome = match ledger.call(&s, kind, call) {
            Ok(o) => o,
            Err(e) => {
                return Outcome::Failed(
                    json!({"source": "exception", "type": "ledger.Error", "message": e.to_string()})
                        .to_string(),
                );
            }
        };
        if matches!(outcome, Outcome::Ok(_)) {
            points.hit();
        }
        outcome
    }
}

/// The store with the slowest call's real duration recorded (`events: true`).
struct TimedStore {
    inner: Arc<dyn Store>,
    /// The slowest call so far, in µs.
    max_us: AtomicU64,
}

impl TimedStore {
    fn timed<T>(&self, f: impl FnOnce(&dyn Store) -> T) -> T {
        let start = Instant::now();
        let out = f(self.inner.as_ref());
        let us = u64::try_from(start.elapsed().as_micros()).unwrap_or(u64::MAX);
        self.max_us.fetch_max(us, Ordering::SeqCst);
        out
    }

    /// The slowest call so far, in ms.
    fn max_ms(&self) -> f64 {
        // µs counts of a worker's calls are far below 2^52: exact in an f64.
        #[allow(clippy::cast_precision_loss)]
        let us = self.max_us.load(Ordering::SeqCst) as f64;
        us / 1000.0
    }
}

impl Store for TimedStore {
    fn get(&self, key: &str, now_ms: u64) -> Result<Option<Versioned>, StoreError> {
        self.timed(|s| s.get(key, now_ms))
    }
    fn compare_and_set(
        &self,
        key: &str,
        expected: Option<u64>,
        value: &str,
        ttl_ms: Option<u64>,
        now_ms: u64,
    ) -> Result<Cas, StoreError> {
        self.timed(|s| s.compare_and_set(key, expected, value, ttl_ms, now_ms))
    }
    fn append(&self, stream: &str, record: &str, now_ms: u64) -> Result<u64, StoreError> {
        self.timed(|s| s.append(stream, record, now_ms))
    }
    fn read(
        &self,
        stream: &str,
        after: u64,
        limit: usize,
    ) -> Result<Vec<(u64, String)>, StoreError> {
        self.timed(|s| s.read(stream, after, limit))
    }
    fn delete(&self, key: &str) -> Result<bool, StoreError> {
        self.timed(|s| s.delete(key))
    }
    fn keys(&self, prefix: &str, now_ms: u64) -> Result<Vec<String>, StoreError> {
        self.timed(|s| s.keys(prefix, now_ms))
    }
}

fn step(s: &JobStep, ledger: &Arc<Ledger>, points: &Arc<Points>) -> Step<'static> {
    let mut st = Step::new(
        &s.id,
        &format!("t.{}", s.id),
        op(s, "operation", ledger, points),
    )
    .args(json!({"step": s.id}))
    .side_effect(true);
    if s.compensation {
        st = st.compensate(op(s, "compensation", ledger, points));
    }
    st
}

fn main() -> ExitCode {
    match run() {
        Ok(line) => {
            println!("{line}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("durable_worker: {e}");
            ExitCode::from(2)
        }
    }
}

fn run() -> Result<String, Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [store, ledger, job] = args.as_slice() else {
        return Err("usage: durable_worker STORE LEDGER JOB".into());
    };
    let job: Job = serde_json::from_str(job)?;
    let ledger = Arc::new(Ledger::open(ledger)?);
    let hold = match (job.hold_at, &job.hold_file) {
        (Some(at), Some(file)) => Some((at, file.clone())),
        (Some(_), None) => return Err("hold_at needs hold_file".into()),
        _ => None,
    };
    let points = Arc::new(Points {
        reached: AtomicU64::new(0),
        kill_at: job.kill_at,
        hold,
    });
    let clock: Arc<dyn Clock> = match job.clock.as_deref() {
        Some("virtual") => Arc::new(VirtualClock::new(
            job.now_ms
                .ok_or("clock \"virtual\" needs the job's now_ms")?,
        )),
        None | Some("system") => Arc::new(SystemClock),
        Some(other) => {
            return Err(format!("unknown clock {other:?}; use \"virtual\" or \"system\"").into());
        }
    };
    // Short-lived processes: compiled components are cached on disk.
    let mut loader = Loader::default();
    if let Some(dir) = std::env::var_os("AGENT_RECOVERY_CACHE_DIR").filter(|d| !d.is_empty()) {
        loader = loader.cache_dir(dir);
    }
    let events: Arc<Mutex<Vec<String>>> = Arc::default();
    // A redis:// URL opens the Redis store over its local spool (its events,
    // store_degraded and store_restored, join the runtime's with `events`);
    // a path opens the SQLite file directly.
    let store: Arc<dyn Store> =
        if store.starts_with("redis://") || store.starts_with("redis+cluster://") {
            let sink = Arc::clone(&events);
            let listener: agent_recovery::store::Listener = Arc::new(move |text: &str| {
                sink.lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push(text.to_owned());
            });
            agent_recovery::store::open_with(store, job.events.then_some(listener))?.store
        } else {
            Arc::new(SqliteStore::open(store)?)
        };
    let timed = Arc::new(TimedStore {
        inner: store,
        max_us: AtomicU64::new(0),
    });
    let mut builder = Runtime::builder()
        .store(timed.clone())
        .clock(clock)
        .loader(loader)
        .config_json(job.config.clone().unwrap_or_else(|| json!({})));
    if let Some(seed) = job.seed {
        builder = builder.seed(seed);
    }
    if job.events {
        let events = Arc::clone(&events);
        builder = builder.on_event(move |text| {
            events
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(text.to_owned());
        });
    }
    let runtime = builder.build()?;
    let operations = || {
        let mut ops = Operations::new();
        for s in plain_steps(&job.steps) {
            ops.insert(step(s, &ledger, &points));
        }
        ops
    };
    // With `events: true`, the line's object also carries the events (their
    // JSON texts as the runtime gave them) and the slowest store call.
    let finish = |line: String| -> String {
        if !job.events {
            return line;
        }
        let events = events.lock().unwrap_or_else(PoisonError::into_inner);
        let head = line.strip_suffix('}').unwrap_or(&line);
        format!(
            r#"{head},"events":[{}],"max_store_call_ms":{}}}"#,
            events.join(","),
            json!(timed.max_ms())
        )
    };
    match job.mode.as_str() {
        "run" => {
            let mut run = runtime.run(&job.run_id)?;
            let mut outcome = "completed".to_owned();
            for s in &job.steps {
                let report = match &s.fanout {
                    Some(f) => {
                        let branches = f
                            .branches
                            .iter()
                            .map(|b| step(b, &ledger, &points))
                            .collect();
                        run.fanout(&s.id, f.min_results, branches)?
                    }
                    None => run.step(step(s, &ledger, &points))?,
                };
                if report.outcome != "ok" {
                    outcome = report.outcome;
                    break;
                }
            }
            if outcome == "completed" {
                run.end()?;
            }
            Ok(finish(
                json!({"outcome": outcome, "points": points.reached.load(Ordering::SeqCst)})
                    .to_string(),
            ))
        }
        "recover" => {
            let reports = runtime.recover(&operations(), RecoverOptions::older_than_ms(0))?;
            let reports: Vec<String> = reports.iter().map(|r| r.to_json()).collect();
            Ok(finish(format!(r#"{{"reports":[{}]}}"#, reports.join(","))))
        }
        "replay" => {
            let id = job.id.as_deref().ok_or("replay: the job has no `id`")?;
            let ticket = runtime.dead_letters().replay(id, &operations())?;
            Ok(finish(json!({"replay": ticket.to_json()}).to_string()))
        }
        other => Err(format!("unknown mode {other:?}; use run, recover or replay").into()),
    }
}
