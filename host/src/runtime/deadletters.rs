//! The dead-letter queue as an operable thing (`docs/durability.md` §3):
//! list, show, replay, request a replay, purge, depth, on any store.
//!
//! The records live in the stream `agent-recovery/dead-letter` (append-only;
//! a record's id is its sequence number). Each record's status lives in
//! `agent-recovery/dead-letter/item/<id>` (absent: `open`), and the count of
//! records replayed successfully or purged in `agent-recovery/dead-letter/closed`;
//! both change by compare-and-set only, so two operators or workers never
//! lose each other's change.

use std::fmt;

use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

use super::Runtime;
use super::driver::{json_str, missing_compensation};
use super::durable::{Operations, RecoverReport, drop_lease, take_lease};
use super::run::RuntimeError;
use super::scenario::DEAD_LETTER_STREAM;
use crate::store::{Cas, Store, StoreError, StoreErrorKind};

/// Prefix of the item status keys: `agent-recovery/dead-letter/item/<id>`.
pub const ITEM_PREFIX: &str = "agent-recovery/dead-letter/item/";
/// The key of the closed count: `{"count": N}`.
pub const CLOSED_KEY: &str = "agent-recovery/dead-letter/closed";

/// Compare-and-set rounds before an update gives up (a contended store).
const CAS_ROUNDS: usize = 64;

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
/// `hex(sha256(canonical_json(["agent-recovery/replay", key, n])))`.
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

/// The item status value (`{"status","replays","purged_ms"?}`).
#[derive(Clone, Debug, Default)]
struct Status {
    status: String,
    replays: Vec<Value>,
    purged_ms: Option<u64>,
}

impl Status {
    fn parse(text: Option<&str>) -> Status {
        let v: Value = text
            .and_then(|t| serde_json::from_str(t).ok())
            .unwrap_or(Value::Null);
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
    fn text(&self) -> String {
        let mut o = Map::new();
        o.insert("status".into(), json!(self.status));
        o.insert("replays".into(), json!(self.replays));
        if let Some(ms) = self.purged_ms {
            o.insert("purged_ms".into(), json!(ms));
        }
        Value::Object(o).to_string()
    }
    fn closed(&self) -> bool {
        self.status == "replayed" || self.status == "purged"
    }
}

/// The seq of a record id, or `BadId`.
fn parse_id(id: &str) -> Result<u64, DeadLetterError> {
    let bad = || DeadLetterError::BadId(id.chars().take(40).collect());
    if id.is_empty()
        || id.len() > 19
        || !id.bytes().all(|b| b.is_ascii_digit())
        || id.starts_with('0')
    {
        return Err(bad());
    }
    id.parse::<u64>().map_err(|_| bad())
}

/// Compare-and-set loop on `key`: `f` edits the current value (None when
/// absent) into the one to write, or returns None to write nothing.
fn update<T>(
    store: &dyn Store,
    key: &str,
    now: u64,
    mut f: impl FnMut(Option<&str>) -> Result<Option<(String, T)>, DeadLetterError>,
) -> Result<Option<T>, DeadLetterError> {
    for _ in 0..CAS_ROUNDS {
        let current = store.get(key, now)?;
        let Some((value, out)) = f(current.as_ref().map(|c| c.value.as_str()))? else {
            return Ok(None);
        };
        match store.compare_and_set(key, current.map(|c| c.version), &value, None, now)? {
            Cas::Written { .. } => return Ok(Some(out)),
            Cas::Conflict { .. } => continue,
        }
    }
    Err(StoreError::new(
        StoreErrorKind::Unavailable,
        format!("could not update {key}: {CAS_ROUNDS} compare-and-set conflicts in a row; retry"),
    )
    .into())
}

fn closed_count(store: &dyn Store, now: u64) -> Result<u64, StoreError> {
    Ok(store
        .get(CLOSED_KEY, now)?
        .and_then(|v| serde_json::from_str::<Value>(&v.value).ok())
        .and_then(|v| v.get("count").and_then(Value::as_u64))
        .unwrap_or(0))
}

fn close_one(store: &dyn Store, now: u64) -> Result<(), DeadLetterError> {
    update(store, CLOSED_KEY, now, |cur| {
        let n = cur
            .and_then(|t| serde_json::from_str::<Value>(t).ok())
            .and_then(|v| v.get("count").and_then(Value::as_u64))
            .unwrap_or(0);
        Ok(Some((
            json!({"count": n.saturating_add(1)}).to_string(),
            (),
        )))
    })?;
    Ok(())
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

/// The dead-letter queue's depth as [`DeadLetters::depth`] reads it.
pub(super) fn depth_of(store: &dyn Store, now: u64) -> Result<u64, StoreError> {
    Ok(stream_count(store)?.saturating_sub(closed_count(store, now)?))
}

/// The runtime's `dead_letter_depth` event after it appended record `seq`
/// and the queue is `depth` deep, when the depth crossed `threshold` (the
/// append effect's: the loop's choice, the run configuration's, else the
/// policy document's; else the runtime's).
pub(super) fn depth_event(
    threshold: u64,
    depth: u64,
    t_ms: u64,
    seq: u64,
    record: &str,
) -> Option<String> {
    if depth < threshold || depth.saturating_sub(1) >= threshold {
        return None;
    }
    let step = serde_json::from_str::<Value>(record)
        .ok()
        .and_then(|r| r.get("step_id").and_then(Value::as_str).map(json_str))
        .unwrap_or_else(|| "null".to_owned());
    Some(format!(
        r#"{{"t_ms":{t_ms},"event":"dead_letter_depth","step":{step},"target":null,"depth":{depth},"threshold":{threshold},"id":"{seq}"}}"#
    ))
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

    fn record(&self, seq: u64) -> Result<Option<Value>, StoreError> {
        Ok(self
            .rt
            .store
            .read(DEAD_LETTER_STREAM, seq.saturating_sub(1), 1)?
            .into_iter()
            .find(|(s, _)| *s == seq)
            .map(|(_, r)| serde_json::from_str(&r).unwrap_or(Value::String(r))))
    }

    fn status(&self, seq: u64) -> Result<Status, StoreError> {
        let v = self
            .rt
            .store
            .get(&format!("{ITEM_PREFIX}{seq}"), self.now())?;
        Ok(Status::parse(v.as_ref().map(|v| v.value.as_str())))
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
                let st = self.status(seq)?;
                let shown = match &options.status {
                    Some(s) => *s == st.status,
                    None => options.all || st.status != "purged",
                };
                if !shown {
                    continue;
                }
                out.push(Item {
                    id: seq.to_string(),
                    status: st.status,
                    record: serde_json::from_str(&text).unwrap_or(Value::String(text)),
                    replays: st.replays,
                    purged_ms: st.purged_ms,
                });
                if options.limit.is_some_and(|l| out.len() >= l) {
                    return Ok(out);
                }
            }
        }
        Ok(out)
    }

    /// One record with its status.
    pub fn show(&self, id: &str) -> Result<Item, DeadLetterError> {
        let seq = parse_id(id)?;
        let record = self
            .record(seq)?
            .ok_or_else(|| DeadLetterError::NotFound(id.to_owned()))?;
        let st = self.status(seq)?;
        Ok(Item {
            id: seq.to_string(),
            status: st.status,
            record,
            replays: st.replays,
            purged_ms: st.purged_ms,
        })
    }

    /// Records in the stream minus those replayed successfully or purged.
    pub fn depth(&self) -> Result<u64, DeadLetterError> {
        let count = stream_count(&*self.rt.store)?;
        Ok(count.saturating_sub(closed_count(&*self.rt.store, self.now())?))
    }

    /// Marks the record purged (`list` hides it; the stream keeps it) and
    /// counts it closed. Purging a purged record changes nothing.
    pub fn purge(&self, id: &str) -> Result<Item, DeadLetterError> {
        let seq = parse_id(id)?;
        if self.record(seq)?.is_none() {
            return Err(DeadLetterError::NotFound(id.to_owned()));
        }
        let now = self.now();
        let key = format!("{ITEM_PREFIX}{seq}");
        let newly_closed = update(&*self.rt.store, &key, now, |cur| {
            let mut st = Status::parse(cur);
            match st.status.as_str() {
                "purged" => return Ok(None),
                "replayed" => {
                    return Err(DeadLetterError::Conflict {
                        id: seq.to_string(),
                        reason: "it was replayed successfully (closed); nothing to purge".into(),
                    });
                }
                _ => {}
            }
            st.status = "purged".into();
            st.purged_ms = Some(now);
            Ok(Some((st.text(), true)))
        })?;
        if newly_closed == Some(true) {
            close_one(&*self.rt.store, now)?;
            record_depth(self.rt, None);
        }
        self.show(id)
    }

    /// Records a replay request for any worker's `recover` to carry out:
    /// status `replay_requested` and a `replays` entry without an outcome.
    /// A record whose request is pending is a [`DeadLetterError::Conflict`].
    pub fn request_replay(&self, id: &str) -> Result<ReplayTicket, DeadLetterError> {
        let (seq, record) = self.open_record(id)?;
        replay_input(id, &record)?;
        let now = self.now();
        self.add_replay(seq, &record, now, true)
    }

    /// Replays the record now: its step runs again as the run
    /// `<run_id>/replay/<n>` with the replay key, with these operations; the
    /// item records the replay (status `replayed` when the step ended `ok`,
    /// else `open`, and the failed replay is a new record with `replay_of`).
    /// A pending request is carried out (same `n`, same key) rather than
    /// adding another.
    pub fn replay(&self, id: &str, ops: &Operations<'_>) -> Result<ReplayTicket, DeadLetterError> {
        let (seq, record) = self.open_record(id)?;
        replay_input(id, &record)?;
        let now = self.now();
        let mut ticket = self.add_replay(seq, &record, now, false)?;
        if !take_lease(self.rt, &ticket.run_id, now)? {
            return Err(DeadLetterError::Conflict {
                id: id.to_owned(),
                reason: format!(
                    "another worker is running its replay {} (lease agent-recovery/recovering/{})",
                    ticket.n, ticket.run_id
                ),
            });
        }
        let result = run_replay(self.rt, ops, &ticket, &record);
        drop_lease(self.rt, &ticket.run_id)?;
        let report = result?;
        ticket.outcome = Some(report.outcome);
        Ok(ticket)
    }

    fn open_record(&self, id: &str) -> Result<(u64, Value), DeadLetterError> {
        let seq = parse_id(id)?;
        let record = self
            .record(seq)?
            .ok_or_else(|| DeadLetterError::NotFound(id.to_owned()))?;
        let st = self.status(seq)?;
        if st.closed() {
            return Err(DeadLetterError::Closed {
                id: id.to_owned(),
                status: st.status,
            });
        }
        Ok((seq, record))
    }

    /// Appends the next replay entry; a pending request is a conflict for
    /// `request_replay` and is the replay to run for `replay`.
    fn add_replay(
        &self,
        seq: u64,
        record: &Value,
        now: u64,
        request: bool,
    ) -> Result<ReplayTicket, DeadLetterError> {
        let key = record
            .get("key")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned();
        let run_id = record
            .get("run_id")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned();
        let item_key = format!("{ITEM_PREFIX}{seq}");
        let mut pending = None;
        let written = update(&*self.rt.store, &item_key, now, |cur| {
            let mut st = Status::parse(cur);
            if st.closed() {
                return Err(DeadLetterError::Closed {
                    id: seq.to_string(),
                    status: st.status.clone(),
                });
            }
            if st.status == "replay_requested" {
                pending = st.replays.last().and_then(ticket_of);
                if pending.is_some() {
                    if request {
                        return Err(DeadLetterError::Conflict {
                            id: seq.to_string(),
                            reason:
                                "a replay request is pending; a worker's recover carries it out"
                                    .into(),
                        });
                    }
                    return Ok(None);
                }
            }
            let n = st.replays.len() as u64 + 1;
            let t = ReplayTicket {
                id: seq.to_string(),
                n,
                key: replay_key(&key, n),
                run_id: format!("{run_id}/replay/{n}"),
                outcome: None,
            };
            st.replays
                .push(json!({"n": n, "key": t.key, "run_id": t.run_id, "requested_ms": now}));
            st.status = "replay_requested".into();
            Ok(Some((st.text(), t)))
        })?;
        match (written, pending) {
            (Some(t), _) => Ok(t),
            (None, Some(mut t)) => {
                t.id = seq.to_string();
                Ok(t)
            }
            (None, None) => Err(DeadLetterError::NotFound(seq.to_string())),
        }
    }
}

/// The record's `input` when it is a step a replay can run.
fn replay_input<'v>(id: &str, record: &'v Value) -> Result<&'v Value, DeadLetterError> {
    let invalid = |reason: &str| DeadLetterError::InvalidRecord {
        id: id.to_owned(),
        reason: reason.to_owned(),
    };
    let input = record
        .get("input")
        .filter(|i| i.is_object())
        .ok_or_else(|| invalid("it has no `input` (written before record format 1)"))?;
    if input.get("tool").and_then(Value::as_str) == Some("fanout")
        && input.pointer("/args/branches").is_some()
    {
        return Err(invalid("its `input` is a fan-out, not a step"));
    }
    if input
        .get("id")
        .and_then(Value::as_str)
        .is_none_or(str::is_empty)
        || input
            .get("tool")
            .and_then(Value::as_str)
            .is_none_or(str::is_empty)
    {
        return Err(invalid("its `input` has no step id or tool"));
    }
    Ok(input)
}

fn ticket_of(entry: &Value) -> Option<ReplayTicket> {
    if entry.get("outcome").is_some() {
        return None;
    }
    Some(ReplayTicket {
        id: String::new(),
        n: entry.get("n")?.as_u64()?,
        key: entry.get("key")?.as_str()?.to_owned(),
        run_id: entry.get("run_id")?.as_str()?.to_owned(),
        outcome: None,
    })
}

/// Runs replay `ticket` of `record` and records its end on the item.
fn run_replay(
    rt: &Runtime,
    ops: &Operations<'_>,
    ticket: &ReplayTicket,
    record: &Value,
) -> Result<RecoverReport, DeadLetterError> {
    let input = replay_input(&ticket.id, record)?.clone();
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
    // The step as recorded: a compensation the operations lack is answered
    // `MissingCompensation` (so the replay's own record has the same input).
    match input.get("compensation").and_then(Value::as_bool) {
        Some(true) if step.compensate.is_none() => {
            let id = id.clone();
            step.compensate = Some(Box::new(move |_: &super::Call| missing_compensation(&id)));
        }
        Some(true) => {}
        _ => step.compensate = None,
    }
    if input.get("checkpoint").and_then(Value::as_bool) != Some(true) {
        step.checkpoint = None;
    }
    let original_key = record.get("key").and_then(Value::as_str).unwrap_or("");
    step.replay_of = Some(json!({"key": original_key, "n": ticket.n, "id": ticket.id}));

    let mut run = rt.run(&ticket.run_id)?;
    let report = run.step(step)?;
    let dead_letter = run.dead_letter_seq();
    let events = run.events().to_vec();
    if report.outcome == "ok" {
        run.end()?;
    } else {
        drop(run);
    }
    let now = rt.clock.now_ms();
    let ok = report.outcome == "ok";
    let n = ticket.n;
    let outcome = report.outcome.clone();
    let newly_closed = update(
        &*rt.store,
        &format!("{ITEM_PREFIX}{}", ticket.id),
        now,
        |cur| {
            let mut st = Status::parse(cur);
            let was_closed = st.closed();
            for r in st.replays.iter_mut() {
                if r.get("n").and_then(Value::as_u64) == Some(n)
                    && let Some(o) = r.as_object_mut()
                {
                    o.insert("outcome".into(), json!(outcome));
                    o.insert("finished_ms".into(), json!(now));
                }
            }
            if !was_closed {
                st.status = if ok { "replayed" } else { "open" }.into();
            }
            Ok(Some((st.text(), ok && !was_closed)))
        },
    )?;
    if newly_closed == Some(true) {
        close_one(&*rt.store, now)?;
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
    for key in store.keys(ITEM_PREFIX, rt.clock.now_ms())? {
        let Some(id) = key.strip_prefix(ITEM_PREFIX) else {
            continue;
        };
        let Ok(seq) = parse_id(id) else {
            continue;
        };
        let st = dl.status(seq)?;
        if st.status != "replay_requested" {
            continue;
        }
        let Some(mut ticket) = st.replays.last().and_then(ticket_of) else {
            continue;
        };
        ticket.id = seq.to_string();
        let Some(record) = dl.record(seq)? else {
            continue;
        };
        if !take_lease(rt, &ticket.run_id, rt.clock.now_ms())? {
            continue;
        }
        // Another worker may have carried it out between the read and the lease.
        let still = dl
            .status(seq)
            .map(|s| s.replays.last().and_then(ticket_of).map(|t| t.n) == Some(ticket.n));
        let result = match still {
            Ok(true) => run_replay(rt, ops, &ticket, &record).map(Some),
            Ok(false) => Ok(None),
            Err(e) => Err(e.into()),
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
