//! Recovery of interrupted runs from the journal (`docs/durability.md` §2).
//!
//! The loop writes `agent-recovery/journal/<run_id>` before every side effect
//! and deletes it when the run ends. [`Runtime::recover`] finds the entries a
//! dead worker left, takes a lease per run so two recovering workers never
//! drive the same run, and feeds the journaled state the `recover` input with
//! the [`Operations`] of the tools. Nothing here decides: the loop resumes the
//! step with the same key, completes the compensation chain in reverse order
//! and writes the dead-letter record.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

use serde::Deserialize;
use serde_json::Value;
use serde_json::value::RawValue;

use super::Runtime;
use super::driver::{call_result, json_str};
use super::run::{Run, RuntimeError};
use super::step::{Call, Outcome, Step};
use crate::component::gen_::runtime::typed::CallResult;
use crate::store::{Cas, Store, StoreError};

/// Prefix of the journal keys: `agent-recovery/journal/<run_id>`.
pub const JOURNAL_PREFIX: &str = "agent-recovery/journal/";
/// Prefix of the recovery leases: `agent-recovery/recovering/<run_id>`.
pub const RECOVERING_PREFIX: &str = "agent-recovery/recovering/";
/// The run configuration's default `in_flight_ttl_ms`.
pub(super) const IN_FLIGHT_TTL_MS: u64 = 300_000;

type Shared<'a> = Arc<Mutex<Box<dyn FnMut(&Call) -> Outcome + Send + 'a>>>;
type SharedHook<'a> = Arc<Mutex<Box<dyn FnMut() -> bool + Send + 'a>>>;

struct Tool<'a> {
    operation: Shared<'a>,
    compensate: Option<Shared<'a>>,
    checkpoint: Option<SharedHook<'a>>,
}

/// The operations of the tools, by tool name, for [`Runtime::recover`] and
/// [`DeadLetters::replay`](super::DeadLetters::replay): a recovered or
/// replayed run finds a step's operation, compensation and checkpoint hook
/// by the step's `tool`.
///
/// Register a [`Step`] per tool: its operation, compensation and checkpoint
/// closures are the ones used (its id, args and targets are not: those come
/// from the journal or the dead-letter record).
///
/// ```
/// use agent_recovery::runtime::{Call, Operations, Outcome, Step};
/// let ops = Operations::new()
///     .with(Step::new("_", "payments.charge", |_: &Call| Outcome::Ok(serde_json::json!({})))
///         .compensate(|_: &Call| Outcome::Ok(serde_json::Value::Null)));
/// assert!(ops.has("payments.charge"));
/// ```
#[derive(Default)]
pub struct Operations<'a> {
    tools: BTreeMap<String, Tool<'a>>,
}

impl std::fmt::Debug for Operations<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Operations")
            .field("tools", &self.tools.keys().collect::<Vec<_>>())
            .finish()
    }
}

fn call_shared(f: &Shared<'_>, call: &Call) -> Outcome {
    let mut guard = f.lock().unwrap_or_else(PoisonError::into_inner);
    (*guard)(call)
}

impl<'a> Operations<'a> {
    /// No tools.
    pub fn new() -> Self {
        Operations::default()
    }

    /// Registers `step`'s operation (and compensation and checkpoint hook,
    /// when it has them) under its tool name; a second step of the same tool
    /// replaces the first.
    pub fn with(mut self, step: Step<'a>) -> Self {
        self.insert(step);
        self
    }

    /// [`with`](Self::with) in place.
    pub fn insert(&mut self, step: Step<'a>) {
        let tool = Tool {
            operation: Arc::new(Mutex::new(step.operation)),
            compensate: step.compensate.map(|c| Arc::new(Mutex::new(c))),
            checkpoint: step.checkpoint.map(|c| Arc::new(Mutex::new(c))),
        };
        self.tools.insert(step.tool, tool);
    }

    /// Is `tool` registered?
    pub fn has(&self, tool: &str) -> bool {
        self.tools.contains_key(tool)
    }

    /// Step `id` of `tool` with the registered closures (an unknown tool's
    /// calls are answered `unknown-tool`, not made).
    pub(crate) fn step(&self, id: &str, tool: &str) -> Step<'a> {
        let Some(t) = self.tools.get(tool) else {
            let mut step = Step::new(id, tool, |_: &Call| Outcome::Ok(Value::Null));
            step.unknown_tool = true;
            return step;
        };
        let op = Arc::clone(&t.operation);
        let mut step = Step::new(id, tool, move |call: &Call| call_shared(&op, call));
        if let Some(c) = &t.compensate {
            let c = Arc::clone(c);
            step = step.compensate(move |call: &Call| call_shared(&c, call));
        }
        if let Some(h) = &t.checkpoint {
            let h = Arc::clone(h);
            step = step.checkpoint(move || (*h.lock().unwrap_or_else(PoisonError::into_inner))());
        }
        step
    }

    /// Calls `tool`'s operation, or its compensation for a `compensation`
    /// call: an unknown tool is answered `unknown-tool`, a known one without
    /// a compensation `no-compensation` (as in a run); the loop makes the
    /// failure.
    pub(crate) fn call(&self, tool: &str, call: &Call) -> CallResult {
        match self.tools.get(tool) {
            None => CallResult::UnknownTool,
            Some(t) if call.kind == "compensation" => match &t.compensate {
                Some(f) => call_result(call_shared(f, call)),
                None => CallResult::NoCompensation,
            },
            Some(t) => call_result(call_shared(&t.operation, call)),
        }
    }
}

impl super::driver::ToolSet for Operations<'_> {
    fn call(&self, tool: &str, call: &Call) -> CallResult {
        Operations::call(self, tool, call)
    }

    fn checkpoint(&self, tool: &str) -> bool {
        self.tools
            .get(tool)
            .and_then(|t| t.checkpoint.as_ref())
            .is_some_and(|h| (*h.lock().unwrap_or_else(PoisonError::into_inner))())
    }
}

/// Options of [`Runtime::recover`].
///
/// # Default
///
/// | option | default |
/// | --- | --- |
/// | `older_than_ms` | the run configuration's `in_flight_ttl_ms` (300 000): a live worker's call in progress is not stolen; a restarted single worker passes 0 |
#[derive(Clone, Copy, Debug, Default)]
pub struct RecoverOptions {
    /// Take only journal entries written at least this long ago.
    pub older_than_ms: Option<u64>,
}

impl RecoverOptions {
    /// Entries written at least `ms` ago.
    pub fn older_than_ms(ms: u64) -> Self {
        RecoverOptions {
            older_than_ms: Some(ms),
        }
    }
}

/// How one recovered run (or carried-out replay request) ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecoverReport {
    /// The run id.
    pub run_id: String,
    /// The run's outcome: `interrupted` or `dead_lettered` for a recovered
    /// run; the step's outcome (or `completed`) for a replay.
    pub outcome: String,
    /// The step that was in progress (none when the run was between steps
    /// or in a compensation chain only).
    pub step: Option<String>,
    /// The outcome the resumed step reached.
    pub step_outcome: Option<String>,
    /// The dead-letter record the run wrote (its sequence number, decimal).
    pub dead_letter_id: Option<String>,
    /// Every event of the recovery, the component's JSON text.
    pub events: Vec<String>,
    /// Outcome `error`: why the loop refused the journaled state (the entry
    /// stays in the journal; the other runs are recovered).
    pub error: Option<String>,
}

impl RecoverReport {
    /// `{"run_id","outcome","step","step_outcome","dead_letter_id","events":[..]}`.
    pub fn to_json(&self) -> String {
        let s = |v: &Option<String>| v.as_deref().map_or_else(|| "null".to_owned(), json_str);
        let error = self
            .error
            .as_deref()
            .map_or_else(String::new, |e| format!(r#","error":{}"#, json_str(e)));
        format!(
            r#"{{"run_id":{},"outcome":{},"step":{},"step_outcome":{},"dead_letter_id":{},"events":[{}]{error}}}"#,
            json_str(&self.run_id),
            json_str(&self.outcome),
            s(&self.step),
            s(&self.step_outcome),
            s(&self.dead_letter_id),
            self.events.join(",")
        )
    }
}

/// One journal entry, as the loop wrote it.
#[derive(Clone, Debug)]
pub struct JournalEntry {
    /// The run id.
    pub run_id: String,
    /// When the loop wrote it (Unix ms).
    pub written_ms: u64,
    /// The run's state (JSON text, owned by the component).
    pub state: String,
    /// The store version of the entry.
    pub version: u64,
}

impl JournalEntry {
    /// The phase the run waits in (`calling`, `joining`, ..), for listings.
    pub fn phase(&self) -> Option<String> {
        let v: Value = serde_json::from_str(&self.state).ok()?;
        v.get("phase").and_then(Value::as_str).map(str::to_owned)
    }
    /// The step in progress (its id), for listings.
    pub fn step(&self) -> Option<String> {
        let v: Value = serde_json::from_str(&self.state).ok()?;
        v.pointer("/step/spec/id")
            .or_else(|| v.pointer("/comp/current/step/id"))
            .and_then(Value::as_str)
            .map(str::to_owned)
    }
}

#[derive(Deserialize)]
struct EntryValue<'a> {
    run_id: String,
    #[serde(borrow)]
    state: &'a RawValue,
    written_ms: u64,
}

fn parse_entry(key: &str, text: &str, version: u64) -> Option<JournalEntry> {
    let e: EntryValue = serde_json::from_str(text).ok()?;
    if key.strip_prefix(JOURNAL_PREFIX) != Some(e.run_id.as_str()) {
        return None;
    }
    Some(JournalEntry {
        run_id: e.run_id,
        written_ms: e.written_ms,
        state: e.state.get().to_owned(),
        version,
    })
}

/// The journal entries in `store` (run id order). An entry that is not in
/// the journal's format is skipped (listed by nobody, recovered by nobody).
pub fn journal_entries(store: &dyn Store, now_ms: u64) -> Result<Vec<JournalEntry>, StoreError> {
    let mut out = Vec::new();
    for key in store.keys(JOURNAL_PREFIX, now_ms)? {
        if let Some(v) = store.get(&key, now_ms)?
            && let Some(e) = parse_entry(&key, &v.value, v.version)
        {
            out.push(e);
        }
    }
    Ok(out)
}

/// Takes the recovery lease of `run_id`; false when another worker holds it.
pub(super) fn take_lease(rt: &Runtime, run_id: &str, now: u64) -> Result<bool, StoreError> {
    let value = format!(r#"{{"since_ms":{now},"pid":{}}}"#, std::process::id());
    let key = format!("{RECOVERING_PREFIX}{run_id}");
    Ok(matches!(
        rt.store
            .compare_and_set(&key, None, &value, Some(rt.in_flight_ttl_ms.max(1)), now)?,
        Cas::Written { .. }
    ))
}

pub(super) fn drop_lease(rt: &Runtime, run_id: &str) -> Result<(), StoreError> {
    rt.store.delete(&format!("{RECOVERING_PREFIX}{run_id}"))?;
    Ok(())
}

pub(super) fn recover(
    rt: &Runtime,
    ops: &Operations<'_>,
    options: RecoverOptions,
) -> Result<Vec<RecoverReport>, RuntimeError> {
    let now = rt.clock.now_ms();
    let older = options.older_than_ms.unwrap_or(rt.in_flight_ttl_ms);
    let mut reports = Vec::new();
    for entry in journal_entries(&*rt.store, now)? {
        if entry.written_ms.saturating_add(older) > now {
            continue;
        }
        if !take_lease(rt, &entry.run_id, rt.clock.now_ms())? {
            continue;
        }
        // Another worker may have finished the run between the listing and
        // the lease: drive only the entry that is still there, unchanged.
        let current = rt.store.get(
            &format!("{JOURNAL_PREFIX}{}", entry.run_id),
            rt.clock.now_ms(),
        );
        let result = match current {
            Ok(Some(v)) if v.version == entry.version => recover_one(rt, ops, &entry).map(Some),
            Ok(_) => Ok(None),
            Err(e) => Err(e.into()),
        };
        drop_lease(rt, &entry.run_id)?;
        match result {
            Ok(Some(report)) => reports.push(report),
            Ok(None) => {}
            // The loop refused the state (e.g. one from a newer loop): say so, go on.
            Err(RuntimeError::Policy(e)) => reports.push(RecoverReport {
                run_id: entry.run_id.clone(),
                outcome: "error".into(),
                step: None,
                step_outcome: None,
                dead_letter_id: None,
                events: Vec::new(),
                error: Some(e.to_string()),
            }),
            Err(e) => return Err(e),
        }
    }
    reports.extend(super::deadletters::carry_out_requests(rt, ops)?);
    Ok(reports)
}

fn recover_one(
    rt: &Runtime,
    ops: &Operations<'_>,
    entry: &JournalEntry,
) -> Result<RecoverReport, RuntimeError> {
    let state: Value = serde_json::from_str(&entry.state).unwrap_or(Value::Null);
    let started_ms = state
        .get("started_ms")
        .and_then(Value::as_u64)
        .unwrap_or(entry.written_ms);
    let mut run = Run::with_state(rt, &entry.run_id, entry.state.clone(), started_ms);
    let report = run.recover(ops)?;
    let events = run.events().to_vec();
    let resumed = events.iter().find_map(|e| {
        let v: Value = serde_json::from_str(e).ok()?;
        (v.get("event")? == "recover")
            .then(|| v.get("step").and_then(Value::as_str).map(str::to_owned))
    });
    let dead_letter_id = run.dead_letter_seq();
    let step_outcome = match dead_letter_id {
        Some(seq) => rt
            .store
            .read(super::scenario::DEAD_LETTER_STREAM, seq - 1, 1)?
            .first()
            .and_then(|(_, r)| serde_json::from_str::<Value>(r).ok())
            .and_then(|r| {
                r.get("step_outcome")
                    .and_then(Value::as_str)
                    .map(str::to_owned)
            }),
        None => None,
    }
    .or_else(|| Some(report.outcome.clone()));
    Ok(RecoverReport {
        run_id: entry.run_id.clone(),
        outcome: report.outcome,
        step: resumed.flatten(),
        step_outcome,
        dead_letter_id: dead_letter_id.map(|s| s.to_string()),
        events,
        error: None,
    })
}
