//! `agent-recovery simulate SCENARIO`: a scripted run through the real
//! runtime on a virtual clock (nothing sleeps), printed as a timeline.
//!
//! The scenario engine is [`agent_recovery::runtime::scenario`]; this file
//! reads the file, opens the store and prints. The scenario format and the
//! output are specified in `docs/runtime.md` ("Scenarios").

use std::path::PathBuf;
use std::sync::Arc;

use agent_recovery::Loader;
use agent_recovery::runtime::RuntimeError;
use agent_recovery::runtime::scenario::{self, ScenarioError};
use agent_recovery::store::{MemoryStore, Store};
use anyhow::Context as _;
use serde_json::Value;

use crate::Usage;
use crate::trace_out::TraceOut;

/// What `simulate` runs.
#[derive(Clone, Debug)]
pub struct SimulateOptions {
    /// The scenario file, or `-` for stdin.
    pub scenario: String,
    /// Print `{"outcome","events","dead_letters"}` instead of a table.
    pub json: bool,
    /// Run against this SQLite store file instead of memory (breakers, attempt
    /// counts, the idempotency cache and dead letters persist across runs).
    pub store: Option<PathBuf>,
    /// Decide with this policy component instead of the reference (preview a
    /// policy before hot-swapping it).
    pub policy: Option<PathBuf>,
    /// With --require-signature: the keys `policy` must be signed by.
    pub trusted: Option<Vec<agent_recovery::signing::TrustedKey>>,
    /// How components are loaded (the CLI passes its cached loader).
    pub loader: Loader,
    /// Write the run's spans here as OTLP JSON (one `ExportTraceServiceRequest` line).
    pub trace_out: Option<PathBuf>,
}

/// Runs the scenario; returns what to print (JSON with `--json`, else a table).
pub fn run(opts: SimulateOptions) -> anyhow::Result<String> {
    let text = read_scenario(&opts.scenario)?;
    let store: Arc<dyn Store> = match &opts.store {
        None => Arc::new(MemoryStore::new()),
        Some(path) => open_store(path)?,
    };
    let policy = match &opts.policy {
        None => None,
        Some(path) => {
            let loader = opts.loader.clone();
            let policy = match &opts.trusted {
                Some(keys) => loader.bytes(&agent_recovery::signing::read_signed(path, keys)?),
                None => loader.file(path),
            }
            .with_context(|| format!("--policy {}", path.display()))?;
            Some(Arc::new(policy) as Arc<dyn agent_recovery::retry::Decide + Send + Sync>)
        }
    };
    let trace = opts
        .trace_out
        .as_deref()
        .map(TraceOut::install)
        .transpose()?;
    let out = match scenario::run(&text, store, policy, opts.loader) {
        Ok(out) => out,
        Err(ScenarioError::Invalid(m)) => {
            return Err(Usage(format!("{}: {m}", opts.scenario)).into());
        }
        Err(ScenarioError::Runtime(RuntimeError::Policy(e))) => return Err(e.into()),
        Err(ScenarioError::Runtime(e)) => return Err(e.into()),
    };
    if let (Some(trace), Some(path)) = (trace, &opts.trace_out) {
        trace.write(path)?;
    }
    if opts.json {
        Ok(out.to_json())
    } else {
        Ok(table(&out.outcome, &out.events, out.dead_letters.len()))
    }
}

fn read_scenario(path: &str) -> anyhow::Result<String> {
    let bytes = if path == "-" {
        let mut buf = Vec::new();
        std::io::Read::read_to_end(&mut std::io::stdin(), &mut buf)
            .map_err(|e| Usage(format!("cannot read the scenario from stdin: {e}")))?;
        buf
    } else {
        std::fs::read(path)
            .map_err(|e| Usage(format!("cannot read scenario {path}: {e}; check the path")))?
    };
    String::from_utf8(bytes).map_err(|e| {
        Usage(format!(
            "scenario {path} is not valid UTF-8 at byte {}; save it as UTF-8 JSON",
            e.utf8_error().valid_up_to()
        ))
        .into()
    })
}

/// `--store`: a `redis://` URL (docs/store.md, "The Redis backend") or a
/// SQLite store file (created when missing).
fn open_store(path: &std::path::Path) -> anyhow::Result<Arc<dyn Store>> {
    let spec = path.to_string_lossy();
    let store = agent_recovery::store::open(&spec)
        .map_err(|e| Usage(format!("--store {}: {e}", redact_spec(&spec))))?;
    Ok(store)
}

/// The spec without a URL's password, for messages.
fn redact_spec(spec: &str) -> String {
    agent_recovery::store::RedisOptions::parse(spec).map_or_else(|_| spec.to_owned(), |o| o.display)
}

/// The timeline as a table, one event per line.
fn table(outcome: &str, events: &[String], dead_letters: usize) -> String {
    let mut out = format!(
        "{:>8}  {:<13} {:<14} {:<16} {:>3}  {}\n",
        "t_ms", "event", "step", "target", "n", "detail"
    );
    for e in events {
        let v: Value = serde_json::from_str(e).unwrap_or(Value::Null);
        let s = |k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_owned();
        let mut detail = Vec::new();
        for k in ["call", "action", "code", "state"] {
            if let Some(x) = v.get(k).and_then(Value::as_str) {
                detail.push(format!("{k}={x}"));
            }
        }
        if let Some(d) = v.get("delay_ms").and_then(Value::as_u64) {
            detail.push(format!("delay_ms={d}"));
        }
        let n = v
            .get("attempt")
            .and_then(Value::as_u64)
            .map_or(String::new(), |n| n.to_string());
        out.push_str(&format!(
            "{:>8}  {:<13} {:<14} {:<16} {:>3}  {}\n",
            v.get("t_ms").and_then(Value::as_u64).unwrap_or(0),
            s("event"),
            s("step"),
            s("target"),
            n,
            detail.join(" ")
        ));
    }
    out.push_str(&format!(
        "outcome: {outcome}; dead letters written: {dead_letters}"
    ));
    out
}
