//! `agent-recovery dlq list|show|replay|purge|depth` and `agent-recovery
//! recover` (docs/durability.md §2-3): the dead-letter queue and the journal
//! of a store file, whoever wrote it.
//!
//! JSON when `--json` is given or stdout is not a terminal (`list` and
//! `recover`: one object per line); a table with `--human` or on a terminal.
//! Errors (no such id, a bad id, a file that is not a store) are one line on
//! stderr with exit status 2. The CLI has no tools: `dlq replay` records a
//! replay request (a worker's `recover` carries it out) and prints its key;
//! `recover` lists what a worker's `recover` would do.

use std::path::Path;
use std::sync::Arc;

use agent_recovery::Loader;
use agent_recovery::runtime::deadletters::DeadLetterError;
use agent_recovery::runtime::{Clock, ListOptions, Runtime, SystemClock, journal_entries};
use agent_recovery::store::{SqliteStore, Store};
use serde_json::{Value, json};

use crate::Usage;
use crate::args::{Dlq, DlqAction, Global, Recover, StoreArg};
use crate::commands::print;
use crate::style::{Output, Paint};

/// The default age of a journal entry `recover` takes (the run
/// configuration's default `in_flight_ttl_ms`).
const DEFAULT_OLDER_THAN_MS: u64 = 300_000;

/// Opens `--store`: a `redis://` URL, or an existing SQLite store file
/// (never creates one).
fn open(arg: &StoreArg) -> anyhow::Result<Arc<dyn Store>> {
    let s = arg.store.as_str();
    if s.contains("://") {
        let shown = agent_recovery::store::RedisOptions::parse(s)
            .map_or_else(|_| s.to_owned(), |o| o.display);
        return agent_recovery::store::open(s)
            .map_err(|e| Usage(format!("--store {shown}: {e}")).into());
    }
    let path = Path::new(s);
    if !path.is_file() {
        return Err(Usage(format!(
            "--store {s}: no such file; pass the SQLite store file a worker writes (SqliteStore) or a redis:// URL"
        ))
        .into());
    }
    let store = SqliteStore::open(path).map_err(|e| Usage(format!("--store {s}: {e}")))?;
    Ok(Arc::new(store))
}

fn runtime(store: Arc<dyn Store>, loader: Loader) -> anyhow::Result<Runtime> {
    Ok(Runtime::builder()
        .store(store)
        .loader(loader)
        .telemetry(agent_recovery::runtime::Telemetry::off())
        .build()?)
}

fn dl_error(e: DeadLetterError) -> anyhow::Error {
    match e {
        DeadLetterError::Runtime(r) => anyhow::Error::new(Usage(r.to_string())),
        other => anyhow::Error::new(Usage(other.to_string())),
    }
}

/// `dlq ...`.
pub fn dlq(g: &Global, a: Dlq, loader: Loader) -> anyhow::Result<()> {
    let out = Output::new(g);
    let (store_arg, id) = match &a.action {
        DlqAction::List { store, .. } | DlqAction::Depth { store } => (store, None),
        DlqAction::Show { id, store }
        | DlqAction::Replay { id, store }
        | DlqAction::Purge { id, store } => (store, Some(id.as_str())),
    };
    let rt = runtime(open(store_arg)?, loader)?;
    let dl = rt.dead_letters();
    let id = id.unwrap_or_default();
    match a.action {
        DlqAction::List { all, .. } => {
            let items = dl
                .list(&ListOptions {
                    all,
                    ..ListOptions::default()
                })
                .map_err(dl_error)?;
            if out.human {
                return print(&list_table(&items, out.paint));
            }
            let lines: Vec<String> = items.iter().map(|i| i.to_json().to_string()).collect();
            if lines.is_empty() {
                return Ok(());
            }
            print(&lines.join("\n"))
        }
        DlqAction::Show { .. } => {
            let item = dl.show(id).map_err(dl_error)?;
            if out.human {
                return print(&show_text(&item, out.paint));
            }
            print(&item.to_json().to_string())
        }
        DlqAction::Purge { .. } => {
            let item = dl.purge(id).map_err(dl_error)?;
            if out.human {
                return print(&format!("record {} purged", item.id));
            }
            print(&item.to_json().to_string())
        }
        DlqAction::Replay { .. } => {
            let t = dl.request_replay(id).map_err(dl_error)?;
            if out.human {
                return print(&format!(
                    "replay {} of record {} requested: a worker's recover runs it as {} with key {}",
                    t.n, t.id, t.run_id, t.key
                ));
            }
            print(&t.to_json().to_string())
        }
        DlqAction::Depth { .. } => {
            let depth = dl.depth().map_err(dl_error)?;
            if out.human {
                return print(&format!("depth: {depth}"));
            }
            print(&json!({ "depth": depth }).to_string())
        }
    }
}

/// `recover`: what a worker's `recover` would do.
pub fn recover(g: &Global, a: Recover, loader: Loader) -> anyhow::Result<()> {
    let out = Output::new(g);
    let store = open(&a.store)?;
    let now = SystemClock.now_ms();
    let older = a.older_than_ms.unwrap_or(DEFAULT_OLDER_THAN_MS);
    let mut lines = Vec::new();
    for e in journal_entries(&*store, now)? {
        if e.written_ms.saturating_add(older) > now {
            continue;
        }
        lines.push(json!({
            "kind": "run",
            "run_id": e.run_id,
            "step": e.step(),
            "phase": e.phase(),
            "written_ms": e.written_ms,
            "age_ms": now.saturating_sub(e.written_ms),
        }));
    }
    let rt = runtime(store, loader)?;
    let pending = rt
        .dead_letters()
        .list(&ListOptions {
            status: Some("replay_requested".into()),
            ..ListOptions::default()
        })
        .map_err(dl_error)?;
    for item in pending {
        if let Some(r) = item.replays.last() {
            lines.push(json!({
                "kind": "replay",
                "id": item.id,
                "n": r.get("n"),
                "run_id": r.get("run_id"),
                "key": r.get("key"),
                "requested_ms": r.get("requested_ms"),
            }));
        }
    }
    if out.human {
        return print(&recover_table(&lines, out.paint));
    }
    if lines.is_empty() {
        return Ok(());
    }
    print(
        &lines
            .iter()
            .map(Value::to_string)
            .collect::<Vec<_>>()
            .join("\n"),
    )
}

fn text(v: Option<&Value>) -> String {
    match v {
        None | Some(Value::Null) => "-".to_owned(),
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
    }
}

fn list_table(items: &[agent_recovery::runtime::Item], paint: Paint) -> String {
    let mut out = paint.dim(&format!(
        "{:>5}  {:<17} {:<13} {:<18} {:<12} {:<18} {:>3}  {}",
        "id", "status", "outcome", "run", "step", "tool", "n", "code"
    ));
    for i in items {
        let r = &i.record;
        out.push('\n');
        out.push_str(&format!(
            "{:>5}  {:<17} {:<13} {:<18} {:<12} {:<18} {:>3}  {}",
            i.id,
            i.status,
            text(r.get("outcome")),
            text(r.get("run_id")),
            text(r.get("step_id")),
            text(r.get("tool")),
            text(r.get("attempts")),
            text(r.pointer("/last_envelope/code")),
        ));
    }
    out.push_str(&format!("\n{} record(s)", items.len()));
    out
}

fn show_text(item: &agent_recovery::runtime::Item, paint: Paint) -> String {
    let r = &item.record;
    let mut out = format!(
        "{} {}\n",
        paint.bold(&format!("record {}", item.id)),
        item.status
    );
    for k in [
        "outcome",
        "run_id",
        "step_id",
        "tool",
        "target",
        "key",
        "attempts",
        "owner",
        "runbook",
        "step_outcome",
        "recovered",
        "started_ms",
        "dead_lettered_ms",
    ] {
        out.push_str(&format!("{:<17}{}\n", paint.dim(k), text(r.get(k))));
    }
    out.push_str(&format!(
        "{:<17}{}\n",
        paint.dim("code"),
        text(r.pointer("/last_envelope/code"))
    ));
    out.push_str(&format!(
        "{:<17}{}\n",
        paint.dim("args"),
        text(r.get("args"))
    ));
    for c in r
        .get("compensations")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        out.push_str(&format!(
            "{:<17}{} {}\n",
            paint.dim("compensation"),
            text(c.get("step")),
            text(c.get("outcome"))
        ));
    }
    for p in &item.replays {
        out.push_str(&format!(
            "{:<17}{} {} {}\n",
            paint.dim("replay"),
            text(p.get("n")),
            text(p.get("run_id")),
            text(p.get("outcome"))
        ));
    }
    out.trim_end().to_owned()
}

fn recover_table(lines: &[Value], paint: Paint) -> String {
    let mut out = paint.dim(&format!(
        "{:<7} {:<24} {:<14} {:<10} {:>10}",
        "kind", "run", "step / id", "phase", "age_ms"
    ));
    for l in lines {
        out.push('\n');
        let kind = text(l.get("kind"));
        let (step, phase, age) = if kind == "run" {
            (
                text(l.get("step")),
                text(l.get("phase")),
                text(l.get("age_ms")),
            )
        } else {
            (text(l.get("id")), "replay".to_owned(), "-".to_owned())
        };
        out.push_str(&format!(
            "{:<7} {:<24} {:<14} {:<10} {:>10}",
            kind,
            text(l.get("run_id")),
            step,
            phase,
            age
        ));
    }
    out.push_str(&format!(
        "\n{} to recover; a worker's runtime.recover(operations) finishes them",
        lines.len()
    ));
    out
}
