//! The dead-letter queue as an operable thing (`docs/durability.md` §3):
//! list, show, replay, request a replay, purge, depth, on any store.
//!
//! The records live in the stream `agent-recovery/dead-letter` (append-only;
//! a record's id is its sequence number). Each record's status lives in
//! `agent-recovery/dead-letter/item/<id>` (absent: `open`), and the count of
//! records replayed successfully or purged in `agent-recovery/dead-letter/closed`;
//! both change by compare-and-set only, so two operators or workers never
//! lose each other's change.
//!
//! Every rule (the item status state machine, the replay entry and its key,
//! the replay step, record ids, the depth and its event, the compare-and-set
//! round cap, the errors) is the component's (`agent:recovery/dead-letters@0.3.0`,
//! called through `bindgen!` types); this file reads and writes the store.

use std::fmt;

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::Runtime;
use super::driver::json_str;
use super::durable::{Operations, RecoverReport, drop_lease, take_lease};
use super::run::RuntimeError;
use super::scenario::DEAD_LETTER_STREAM;
use crate::store::{Cas, Store, StoreError, StoreErrorKind};

/// Prefix of the item status keys: `agent-recovery/dead-letter/item/<id>`.
pub const ITEM_PREFIX: &str = "agent-recovery/dead-letter/item/";
/// The key of the closed count: `{"count": N}`.
pub const CLOSED_KEY: &str = "agent-recovery/dead-letter/closed";

/// Why a dead-letter operation failed.
#[derive(Debug)]
pub enum DeadLetterError {
    /// The id is not a record id (a decimal sequence number from 1).
    BadId(String),
    /// No record has this id.
    NotFound(String),
    /// The record cannot be replayed in its status (purged, already replayed).
    Closed {
        /// The record id.
        id: String,
        /// Its status.
        status: String,
    },
    /// Another operator or worker got there first: a replay request is
    /// pending, another worker runs this replay, or the record was replayed.
    Conflict {
        /// The record id.
        id: String,
        /// What is in the way.
        reason: String,
    },
    /// The record cannot be replayed: it has no `input` (written before
    /// record format 1) or its input is a fan-out, not a step.
    InvalidRecord {
        /// The record id.
        id: String,
        /// Why.
        reason: String,
    },
    /// The store or the loop failed.
    Runtime(RuntimeError),
}

impl fmt::Display for DeadLetterError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DeadLetterError::BadId(id) => write!(
                f,
                "dead-letter id {id:?} is not a record id; ids are the decimal sequence numbers `dlq list` prints (1, 2, ..)"
            ),
            DeadLetterError::NotFound(id) => write!(
                f,
                "no dead-letter record has id {id}; run `dlq list --all` to see the ids"
            ),
            DeadLetterError::Closed { id, status } => write!(
                f,
                "dead-letter record {id} is {status}; only open records are replayed"
            ),
            DeadLetterError::Conflict { id, reason } => {
                write!(f, "dead-letter record {id}: {reason}")
            }
            DeadLetterError::InvalidRecord { id, reason } => write!(
                f,
                "dead-letter record {id} cannot be replayed: {reason}; replay its step by hand"
            ),
            DeadLetterError::Runtime(e) => write!(f, "{e}"),
        }
    }
}

impl DeadLetterError {
    /// The kind, as Node's and Python's `DeadLetterError.kind` name it:
    /// `invalid_argument` (a bad id), `not_found`, `conflict` (the record is
    /// closed, a replay is pending or running elsewhere), `invalid_record`;
    /// and `runtime` for [`DeadLetterError::Runtime`] (a store or loop error,
    /// which Node and Python raise as the store's or the runtime's own error).
    /// Stable: kinds are added, never renamed.
    pub fn kind(&self) -> &'static str {
        match self {
            DeadLetterError::BadId(_) => "invalid_argument",
            DeadLetterError::NotFound(_) => "not_found",
            DeadLetterError::Closed { .. } | DeadLetterError::Conflict { .. } => "conflict",
            DeadLetterError::InvalidRecord { .. } => "invalid_record",
            DeadLetterError::Runtime(_) => "runtime",
        }
    }
}

impl std::error::Error for DeadLetterError {}

impl From<RuntimeError> for DeadLetterError {
    fn from(e: RuntimeError) -> Self {
        DeadLetterError::Runtime(e)
    }
}

impl From<StoreError> for DeadLetterError {
    fn from(e: StoreError) -> Self {
        DeadLetterError::Runtime(RuntimeError::Store(e))
    }
}

/// One record of the queue with its status.
#[derive(Clone, Debug, PartialEq)]
pub struct Item {
    /// The record's id: its sequence number in the stream, decimal.
    pub id: String,
    /// `open`, `replay_requested`, `replayed` or `purged`.
    pub status: String,
    /// The record as the loop wrote it.
    pub record: Value,
    /// `{"n","key","run_id","requested_ms","outcome"?,"finished_ms"?}` per replay.
    pub replays: Vec<Value>,
    /// When it was purged.
    pub purged_ms: Option<u64>,
}

impl Item {
    /// `{"id","status","record","replays"}` (+ `purged_ms` when purged).
    pub fn to_json(&self) -> Value {
        let mut v = json!({
            "id": self.id,
            "status": self.status,
            "record": self.record,
            "replays": self.replays,
        });
        if let (Some(ms), Some(o)) = (self.purged_ms, v.as_object_mut()) {
            o.insert("purged_ms".into(), json!(ms));
        }
        v
    }
}

/// What [`DeadLetters::list`] returns.
///
/// # Default
///
/// | option | default |
/// | --- | --- |
/// | `status` | any status but `purged` (with `all`: any) |
/// | `all` | false |
/// | `after` | 0: from the first record |
/// | `limit` | none |
#[derive(Clone, Debug, Default)]
pub struct ListOptions {
    /// Only records in this status.
    pub status: Option<String>,
    /// Purged records too.
    pub all: bool,
    /// Only records with an id greater than this.
    pub after: u64,
    /// At most this many.
    pub limit: Option<usize>,
}

/// A replay: requested, or run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReplayTicket {
    /// The record's id.
    pub id: String,
    /// The replay's number (1 for the first replay of the record).
    pub n: u64,
    /// The replay's idempotency key ([`replay_key`]).
    pub key: String,
    /// The replay's run id: `<original run_id>/replay/<n>`.
    pub run_id: String,
    /// The replayed step's outcome (none for a request not carried out yet).
    pub outcome: Option<String>,
}

impl ReplayTicket {
    /// `{"id","n","key","run_id","outcome"}` (outcome null when not run yet).
    pub fn to_json(&self) -> Value {
        json!({"id": self.id, "n": self.n, "key": self.key, "run_id": self.run_id, "outcome": self.outcome})
    }
}

/// The idempotency key of the `n`-th replay of a record whose key is `key`:
/// `hex(sha256(canonical_json(["agent-recovery/replay", key, n])))`. The
/// component derives the key a replay runs under (and writes it in the item);
/// this function computes it without a runtime, to print or check it.
///
/// ```
/// // sha256 of the 31 bytes ["agent-recovery/replay","abc",1]
/// let k = agent_recovery::runtime::deadletters::replay_key("abc", 1);
/// assert_eq!(k.len(), 64);
/// ```
pub fn replay_key(key: &str, n: u64) -> String {
    let text = format!(r#"["agent-recovery/replay",{},{n}]"#, json_str(key));
    Sha256::digest(text.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The dead-letter rules of the component (`dead-letters@0.3.0`): every
/// transition, check, key and message comes from there; this file only reads
/// and writes the store.
struct Core<'r>(&'r Runtime);

impl Core<'_> {
    fn call<R>(
        &self,
        what: &str,
        bytes: usize,
        f: impl FnOnce(
            &mut wasmtime::Store<crate::component::sandbox::Sandbox>,
            &DlGuest,
        ) -> wasmtime::Result<R>,
    ) -> Result<R, DeadLetterError> {
        self.0
            .looper
            .dead_letters(what, bytes, f)
            .map_err(|e| DeadLetterError::Runtime(e.into()))
    }

    fn cas_rounds(&self) -> Result<u32, DeadLetterError> {
        self.call("cas-rounds", 0, |s, g| g.call_cas_rounds(s))
    }

    fn cas_exhausted(&self, key: &str) -> Result<String, DeadLetterError> {
        self.call("cas-exhausted", key.len(), |s, g| {
            g.call_cas_exhausted(s, key)
        })
    }

    fn parse_id(&self, id: &str) -> Result<u64, DeadLetterError> {
        self.call("parse-id", id.len(), |s, g| g.call_parse_id(s, id))?
            .map_err(error)
    }

    fn not_found(&self, id: &str) -> DeadLetterError {
        match self.call("not-found", id.len(), |s, g| g.call_not_found(s, id)) {
            Ok(e) => error(e),
            Err(e) => e,
        }
    }

    fn item(&self, current: Option<&str>) -> Result<Status, DeadLetterError> {
        let text = self.call("item", current.map_or(0, str::len), |s, g| {
            g.call_item(s, current)
        })?;
        Ok(Status::parse(&text))
    }

    fn apply(
        &self,
        action: dl::Action,
        seq: u64,
        record: &str,
        current: Option<&str>,
        now: u64,
    ) -> Result<dl::Change, DeadLetterError> {
        let bytes = record.len() + current.map_or(0, str::len);
        self.call("apply", bytes, |s, g| {
            g.call_apply(s, action, seq, record, current, now)
        })?
        .map_err(error)
    }

    fn finish(
        &self,
        current: Option<&str>,
        n: u64,
        outcome: &str,
        now: u64,
    ) -> Result<dl::Change, DeadLetterError> {
        self.call("finish", current.map_or(0, str::len), |s, g| {
            g.call_finish(s, current, n, outcome, now)
        })
    }

    fn pending(&self, current: Option<&str>) -> Result<Option<ReplayTicket>, DeadLetterError> {
        let entry = self.call("pending", current.map_or(0, str::len), |s, g| {
            g.call_pending(s, current)
        })?;
        Ok(entry.as_deref().and_then(ticket_of))
    }

    fn replay_step(&self, seq: u64, record: &str, n: u64) -> Result<Value, DeadLetterError> {
        let text = self
            .call("replay-step", record.len(), |s, g| {
                g.call_replay_step(s, seq, record, n)
            })?
            .map_err(error)?;
        Ok(serde_json::from_str(&text).unwrap_or(Value::Null))
    }

    /// `closed.count + 1`, by compare-and-set.
    fn close_one(&self, now: u64) -> Result<(), DeadLetterError> {
        update(self, CLOSED_KEY, now, |cur| {
            let next = self.call("close-one", 16, |s, g| g.call_close_one(s, cur))?;
            Ok(Some((next, ())))
        })?;
        Ok(())
    }
}

use crate::component::gen_::runtime::dead_letters::{self as dl, Guest as DlGuest};

/// The component's error as the Rust API's.
fn error(e: dl::DeadLetterError) -> DeadLetterError {
    match e.kind {
        dl::ErrorKind::InvalidArgument => DeadLetterError::BadId(e.id),
        dl::ErrorKind::NotFound => DeadLetterError::NotFound(e.id),
        dl::ErrorKind::Closed => DeadLetterError::Closed {
            id: e.id,
            status: e.detail,
        },
        dl::ErrorKind::Conflict => DeadLetterError::Conflict {
            id: e.id,
            reason: e.detail,
        },
        dl::ErrorKind::InvalidRecord => DeadLetterError::InvalidRecord {
            id: e.id,
            reason: e.detail,
        },
    }
}

/// An item value as the component shows it (`{"status","replays","purged_ms"?}`).
#[derive(Clone, Debug, Default)]
struct Status {
    status: String,
    replays: Vec<Value>,
    purged_ms: Option<u64>,
}

impl Status {
    fn parse(text: &str) -> Status {
        let v: Value = serde_json::from_str(text).unwrap_or(Value::Null);
        Status {
            status: v
                .get("status")
                .and_then(Value::as_str)
                .unwrap_or("open")
                .to_owned(),
            replays: v
                .get("replays")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default(),
            purged_ms: v.get("purged_ms").and_then(Value::as_u64),
        }
    }
}

/// Compare-and-set loop on `key`: `f` turns the current value (None when
/// absent) into the one to write, or returns None to write nothing; at most
/// the component's `cas-rounds` rounds.
fn update<T>(
    core: &Core<'_>,
    key: &str,
    now: u64,
    mut f: impl FnMut(Option<&str>) -> Result<Option<(String, T)>, DeadLetterError>,
) -> Result<Option<T>, DeadLetterError> {
    let store = &*core.0.store;
    for _ in 0..core.cas_rounds()? {
        let current = store.get(key, now)?;
        let Some((value, out)) = f(current.as_ref().map(|c| c.value.as_str()))? else {
            return Ok(None);
        };
        match store.compare_and_set(key, current.map(|c| c.version), &value, None, now)? {
            Cas::Written { .. } => return Ok(Some(out)),
            Cas::Conflict { .. } => continue,
        }
    }
    Err(StoreError::new(StoreErrorKind::Unavailable, core.cas_exhausted(key)?).into())
}

/// Records the `agent_recovery.dead_letter.depth` gauge, when telemetry is
/// on, after the runtime appended a record or an item closed: the depth is
/// read as [`DeadLetters::depth`] does. Telemetry never fails the operation
/// it observes: a store error here records nothing.
pub(super) fn record_depth(rt: &Runtime, _seq: Option<u64>) {
    if !rt.telemetry.is_on() {
        return;
    }
    let depth = DeadLetters::new(rt).depth().ok();
    if let Some(depth) = depth {
        rt.telemetry.dead_letter_depth(depth);
    }
}

/// How many records the dead-letter stream holds, read a page at a time.
/// Sequence numbers increase but need not start at 1 or be dense (the Redis
/// store starts a stream at its clock), so the count is not the last number.
fn stream_count(store: &dyn Store) -> Result<u64, StoreError> {
    let (mut count, mut after) = (0u64, 0u64);
    loop {
        let page = store.read(DEAD_LETTER_STREAM, after, 4096)?;
        match page.last() {
            Some((seq, _)) => {
                count += page.len() as u64;
                after = *seq;
            }
            None => return Ok(count),
        }
    }
}

/// What the depth is computed from: the records in the stream and the
/// `closed` value (the component's `depth`).
pub(super) fn depth_reads(
    store: &dyn Store,
    now: u64,
) -> Result<(u64, Option<String>), StoreError> {
    Ok((
        stream_count(store)?,
        store.get(CLOSED_KEY, now)?.map(|v| v.value),
    ))
}

/// The depth from [`depth_reads`], by the component's rule.
pub(super) fn depth_of(
    rt: &Runtime,
    records: u64,
    closed: Option<&str>,
) -> Result<u64, RuntimeError> {
    Ok(rt
        .looper
        .dead_letters("depth", 16, |s, g| g.call_depth(s, records, closed))?)
}

/// The runtime's `dead_letter_depth` event after it appended record `seq`
/// and the queue is `depth` deep, when the depth crossed `threshold` (the
/// append effect's: the loop's choice, the run configuration's, else the
/// policy document's; else the runtime's): the component's `depth-event`.
pub(super) fn depth_event(
    rt: &Runtime,
    threshold: u64,
    depth: u64,
    t_ms: u64,
    seq: u64,
    record: &str,
) -> Result<Option<String>, RuntimeError> {
    Ok(rt
        .looper
        .dead_letters("depth-event", record.len(), |s, g| {
            g.call_depth_event(s, threshold, depth, t_ms, seq, record)
        })?)
}

/// The dead-letter queue of a runtime's store; see the [module docs](self).
#[derive(Clone, Copy, Debug)]
pub struct DeadLetters<'r> {
    rt: &'r Runtime,
}

impl<'r> DeadLetters<'r> {
    pub(super) fn new(rt: &'r Runtime) -> Self {
        DeadLetters { rt }
    }

    fn now(&self) -> u64 {
        self.rt.clock.now_ms()
    }

    fn core(&self) -> Core<'r> {
        Core(self.rt)
    }

    /// Record `seq`'s text, if the stream holds it.
    fn record_text(&self, seq: u64) -> Result<Option<String>, StoreError> {
        Ok(self
            .rt
            .store
            .read(DEAD_LETTER_STREAM, seq.saturating_sub(1), 1)?
            .into_iter()
            .find(|(s, _)| *s == seq)
            .map(|(_, r)| r))
    }

    /// The record of id `id` (its seq and text), or `BadId` / `NotFound`.
    fn found(&self, id: &str) -> Result<(u64, String), DeadLetterError> {
        let seq = self.core().parse_id(id)?;
        match self.record_text(seq)? {
            Some(text) => Ok((seq, text)),
            None => Err(self.core().not_found(id)),
        }
    }

    fn item_value(&self, seq: u64) -> Result<Option<String>, StoreError> {
        Ok(self
            .rt
            .store
            .get(&format!("{ITEM_PREFIX}{seq}"), self.now())?
            .map(|v| v.value))
    }

    fn status(&self, seq: u64) -> Result<Status, DeadLetterError> {
        self.core().item(self.item_value(seq)?.as_deref())
    }

    fn item(&self, seq: u64, text: String) -> Result<Item, DeadLetterError> {
        let st = self.status(seq)?;
        Ok(Item {
            id: seq.to_string(),
            status: st.status,
            record: serde_json::from_str(&text).unwrap_or(Value::String(text)),
            replays: st.replays,
            purged_ms: st.purged_ms,
        })
    }

    /// The records, oldest first, with their status.
    pub fn list(&self, options: &ListOptions) -> Result<Vec<Item>, DeadLetterError> {
        let mut out = Vec::new();
        let mut after = options.after;
        loop {
            let page = self.rt.store.read(DEAD_LETTER_STREAM, after, 256)?;
            let Some((last, _)) = page.last() else {
                break;
            };
            after = *last;
            for (seq, text) in page {
                let item = self.item(seq, text)?;
                let shown = match &options.status {
                    Some(s) => *s == item.status,
                    None => options.all || item.status != "purged",
                };
                if !shown {
                    continue;
                }
                out.push(item);
                if options.limit.is_some_and(|l| out.len() >= l) {
                    return Ok(out);
                }
            }
        }
        Ok(out)
    }

    /// One record with its status.
    pub fn show(&self, id: &str) -> Result<Item, DeadLetterError> {
        let (seq, text) = self.found(id)?;
        self.item(seq, text)
    }

    /// Records in the stream minus those replayed successfully or purged.
    pub fn depth(&self) -> Result<u64, DeadLetterError> {
        let (records, closed) = depth_reads(&*self.rt.store, self.now())?;
        Ok(depth_of(self.rt, records, closed.as_deref())?)
    }

    /// Marks the record purged (`list` hides it; the stream keeps it) and
    /// counts it closed (a replayed record was counted already). Purging a
    /// purged record changes nothing.
    pub fn purge(&self, id: &str) -> Result<Item, DeadLetterError> {
        let (seq, text) = self.found(id)?;
        let now = self.now();
        let core = self.core();
        let key = format!("{ITEM_PREFIX}{seq}");
        let closes = update(&core, &key, now, |cur| {
            let c = core.apply(dl::Action::Purge, seq, &text, cur, now)?;
            Ok(c.item.map(|v| (v, c.closes)))
        })?;
        if closes == Some(true) {
            core.close_one(now)?;
            record_depth(self.rt, None);
        }
        self.item(seq, text)
    }

    /// Records a replay request for any worker's `recover` to carry out:
    /// status `replay_requested` and a `replays` entry without an outcome.
    /// A record whose request is pending is a [`DeadLetterError::Conflict`].
    pub fn request_replay(&self, id: &str) -> Result<ReplayTicket, DeadLetterError> {
        let (seq, text) = self.found(id)?;
        self.add_replay(seq, &text, dl::Action::Request)
    }

    /// Replays the record now: its step runs again as the run
    /// `<run_id>/replay/<n>` with the replay key, with these operations; the
    /// item records the replay (status `replayed` when the step ended `ok`,
    /// else `open`, and the failed replay is a new record with `replay_of`).
    /// A pending request is carried out (same `n`, same key) rather than
    /// adding another.
    pub fn replay(&self, id: &str, ops: &Operations<'_>) -> Result<ReplayTicket, DeadLetterError> {
        let (seq, text) = self.found(id)?;
        let now = self.now();
        let mut ticket = self.add_replay(seq, &text, dl::Action::Take)?;
        if !take_lease(self.rt, &ticket.run_id, now)? {
            return Err(DeadLetterError::Conflict {
                id: id.to_owned(),
                reason: format!(
                    "another worker is running its replay {} (lease agent-recovery/recovering/{})",
                    ticket.n, ticket.run_id
                ),
            });
        }
        let result = run_replay(self.rt, ops, &ticket, &text);
        drop_lease(self.rt, &ticket.run_id)?;
        let report = result?;
        ticket.outcome = Some(report.outcome);
        Ok(ticket)
    }

    /// The component's `request` or `take` on the item, written by
    /// compare-and-set: the replay entry made, or the pending one taken.
    fn add_replay(
        &self,
        seq: u64,
        record: &str,
        action: dl::Action,
    ) -> Result<ReplayTicket, DeadLetterError> {
        let now = self.now();
        let core = self.core();
        let mut entry = None;
        update(&core, &format!("{ITEM_PREFIX}{seq}"), now, |cur| {
            let c = core.apply(action, seq, record, cur, now)?;
            entry = c.entry;
            Ok(c.item.map(|v| (v, ())))
        })?;
        let mut ticket = entry
            .as_deref()
            .and_then(ticket_of)
            .ok_or_else(|| core.not_found(&seq.to_string()))?;
        ticket.id = seq.to_string();
        Ok(ticket)
    }
}

/// A replay entry's ticket (its `n`, `key` and `run_id`).
fn ticket_of(entry: &str) -> Option<ReplayTicket> {
    let entry: Value = serde_json::from_str(entry).ok()?;
    Some(ReplayTicket {
        id: String::new(),
        n: entry.get("n")?.as_u64()?,
        key: entry.get("key")?.as_str()?.to_owned(),
        run_id: entry.get("run_id")?.as_str()?.to_owned(),
        outcome: None,
    })
}

/// Runs replay `ticket` of `record` (its text) and records its end on the item.
fn run_replay(
    rt: &Runtime,
    ops: &Operations<'_>,
    ticket: &ReplayTicket,
    record: &str,
) -> Result<RecoverReport, DeadLetterError> {
    let core = Core(rt);
    let seq = core.parse_id(&ticket.id)?;
    let input = core.replay_step(seq, record, ticket.n)?;
    let s = |k: &str| input.get(k).and_then(Value::as_str).map(str::to_owned);
    let id = s("id").unwrap_or_default();
    let tool = s("tool").unwrap_or_default();
    let mut step = ops
        .step(&id, &tool)
        .args(input.get("args").cloned().unwrap_or(Value::Null));
    if let Some(c) = s("call") {
        step = step.call(&c);
    }
    if let Some(t) = s("target") {
        step = step.target(&t);
    }
    if let Some(fb) = input.get("fallbacks").and_then(Value::as_array) {
        let fb: Vec<&str> = fb.iter().filter_map(Value::as_str).collect();
        step = step.fallbacks(&fb);
    }
    step = step.side_effect(
        input
            .get("side_effect")
            .and_then(Value::as_bool)
            .unwrap_or(false),
    );
    if let Some(i) = input.get("idempotent").and_then(Value::as_bool) {
        step = step.idempotent(i);
    }
    // The step as recorded: a compensation the operations lack is declared
    // all the same (so the replay's own record has the same input); its
    // calls are answered `no-compensation`.
    match input.get("compensation").and_then(Value::as_bool) {
        Some(true) => step.compensation_declared = true,
        _ => step.compensate = None,
    }
    if input.get("checkpoint").and_then(Value::as_bool) != Some(true) {
        step.checkpoint = None;
    }
    step.replay_of = input.get("replay_of").cloned();

    // The run's `run` input carries the step (one `advance` fewer).
    let mut run = rt.run_of_one_step(&ticket.run_id)?;
    let report = run.step(step)?;
    let dead_letter = run.dead_letter_seq();
    let events = run.events().to_vec();
    if report.outcome == "ok" {
        run.end()?;
    } else {
        drop(run);
    }
    let now = rt.clock.now_ms();
    let outcome = report.outcome.clone();
    let closes = update(&core, &format!("{ITEM_PREFIX}{}", ticket.id), now, |cur| {
        let c = core.finish(cur, ticket.n, &outcome, now)?;
        Ok(c.item.map(|v| (v, c.closes)))
    })?;
    if closes == Some(true) {
        core.close_one(now)?;
        record_depth(rt, None);
    }
    Ok(RecoverReport {
        run_id: ticket.run_id.clone(),
        outcome: report.outcome.clone(),
        step: Some(id),
        step_outcome: Some(report.outcome),
        dead_letter_id: dead_letter.map(|s| s.to_string()),
        events,
        error: None,
    })
}

/// Carries out every pending replay request (the `recover` of a worker).
pub(super) fn carry_out_requests(
    rt: &Runtime,
    ops: &Operations<'_>,
) -> Result<Vec<RecoverReport>, RuntimeError> {
    let store = &*rt.store;
    let mut reports = Vec::new();
    let dl = DeadLetters::new(rt);
    let core = Core(rt);
    let pending = |seq: u64| -> Result<Option<ReplayTicket>, DeadLetterError> {
        core.pending(dl.item_value(seq)?.as_deref())
    };
    let store_error = |e: DeadLetterError| match e {
        DeadLetterError::Runtime(e) => e,
        other => RuntimeError::Store(StoreError::new(
            StoreErrorKind::Unavailable,
            other.to_string(),
        )),
    };
    for key in store.keys(ITEM_PREFIX, rt.clock.now_ms())? {
        let Some(id) = key.strip_prefix(ITEM_PREFIX) else {
            continue;
        };
        let Ok(seq) = core.parse_id(id) else {
            continue;
        };
        let Some(mut ticket) = pending(seq).map_err(store_error)? else {
            continue;
        };
        ticket.id = seq.to_string();
        let Some(record) = dl.record_text(seq)? else {
            continue;
        };
        if !take_lease(rt, &ticket.run_id, rt.clock.now_ms())? {
            continue;
        }
        // Another worker may have carried it out between the read and the lease.
        let still = pending(seq).map(|t| t.map(|t| t.n) == Some(ticket.n));
        let result = match still {
            Ok(true) => run_replay(rt, ops, &ticket, &record).map(Some),
            Ok(false) => Ok(None),
            Err(e) => Err(e),
        };
        drop_lease(rt, &ticket.run_id)?;
        match result {
            Ok(Some(r)) => reports.push(r),
            Ok(None) => {}
            Err(DeadLetterError::Runtime(RuntimeError::Store(e))) => {
                return Err(RuntimeError::Store(e));
            }
            // The loop refused the replay, or the record cannot be replayed:
            // say so (the request stays pending) and go on, as for a journal entry.
            Err(e) => reports.push(RecoverReport {
                run_id: ticket.run_id.clone(),
                outcome: "error".into(),
                step: None,
                step_outcome: None,
                dead_letter_id: None,
                events: Vec::new(),
                error: Some(e.to_string()),
            }),
        }
    }
    Ok(reports)
}
