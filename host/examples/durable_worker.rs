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
//! `cargo run --release -p agent-recovery --example durable_worker -- STORE LEDGER JOB`

use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use agent_recovery::Loader;
use agent_recovery::runtime::{
    Call, Operations, Outcome, RecoverOptions, Runtime, Step, SystemClock,
};
use agent_recovery::store::SqliteStore;
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
}

/// Points of interest reached, and the one to die at.
struct Points {
    reached: AtomicU64,
    kill_at: Option<u64>,
}

impl Points {
    fn hit(&self) {
        let n = self.reached.fetch_add(1, Ordering::SeqCst) + 1;
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
    fn open(path: &str) -> rusqlite::Result<Ledger> {
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
    let points = Arc::new(Points {
        reached: AtomicU64::new(0),
        kill_at: job.kill_at,
    });
    // Short-lived processes: compiled components are cached on disk.
    let mut loader = Loader::default();
    if let Some(dir) = std::env::var_os("AGENT_RECOVERY_CACHE_DIR").filter(|d| !d.is_empty()) {
        loader = loader.cache_dir(dir);
    }
    let mut builder = Runtime::builder()
        .store(Arc::new(SqliteStore::open(store)?))
        .clock(Arc::new(SystemClock))
        .loader(loader)
        .config_json(job.config.clone().unwrap_or_else(|| json!({})));
    if let Some(seed) = job.seed {
        builder = builder.seed(seed);
    }
    let runtime = builder.build()?;
    let operations = || {
        let mut ops = Operations::new();
        for s in &job.steps {
            ops.insert(step(s, &ledger, &points));
        }
        ops
    };
    match job.mode.as_str() {
        "run" => {
            let mut run = runtime.run(&job.run_id)?;
            let mut outcome = "completed".to_owned();
            for s in &job.steps {
                let report = run.step(step(s, &ledger, &points))?;
                if report.outcome != "ok" {
                    outcome = report.outcome;
                    break;
                }
            }
            if outcome == "completed" {
                run.end()?;
            }
            Ok(
                json!({"outcome": outcome, "points": points.reached.load(Ordering::SeqCst)})
                    .to_string(),
            )
        }
        "recover" => {
            let reports = runtime.recover(&operations(), RecoverOptions::older_than_ms(0))?;
            let reports: Vec<String> = reports.iter().map(|r| r.to_json()).collect();
            Ok(format!(r#"{{"reports":[{}]}}"#, reports.join(",")))
        }
        "replay" => {
            let id = job.id.as_deref().ok_or("replay: the job has no `id`")?;
            let ticket = runtime.dead_letters().replay(id, &operations())?;
            Ok(json!({"replay": ticket.to_json()}).to_string())
        }
        other => Err(format!("unknown mode {other:?}; use run, recover or replay").into()),
    }
}
