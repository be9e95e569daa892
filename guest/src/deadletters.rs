//! The dead-letter queue's lifecycle rules, sans I/O (docs/durability.md,
//! "The dead-letter queue"; WIT `agent:recovery/dead-letters@0.3.0`).
//!
//! A host reads the record, the item value (`agent-recovery/dead-letter/item/<id>`)
//! and the closed count (`agent-recovery/dead-letter/closed`), calls a function
//! here with what it read, and writes what it gets back by compare-and-set,
//! reading again and calling again on a conflict, at most [`CAS_ROUNDS`] times.
//! The item status state machine:
//!
//! ```text
//! open ──request/take──▶ replay_requested ──finish ok──▶ replayed (closed)
//!  ▲                          │ finish failed
//!  └──────────────────────────┘
//! open / replay_requested / replayed ──purge──▶ purged (closed; `replayed` was closed already)
//! ```
//!
//! Item values are written as `{"status","replays","purged_ms"?}`, replay
//! entries as `{"n","key","run_id","requested_ms"}` (+ `"outcome","finished_ms"`
//! once run), members in that order, in every language.

use serde_json::Value;
use serde_json::value::RawValue;
use std::collections::BTreeMap;

/// Compare-and-set rounds on one key before an update gives up.
pub const CAS_ROUNDS: u32 = 64;

/// The largest record id (2^53 - 1: an id is exact in every language).
pub const MAX_ID: u64 = (1 << 53) - 1;

/// Why an operation on the queue is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    /// Not a record id.
    InvalidArgument,
    /// No record has this id.
    NotFound,
    /// The item is `replayed` or `purged`.
    Closed,
    /// A replay request is pending.
    Conflict,
    /// The record has no step a replay can run.
    InvalidRecord,
}

impl ErrorKind {
    /// The kind as Node's and Python's `DeadLetterError.kind` name it.
    pub fn name(self) -> &'static str {
        match self {
            ErrorKind::InvalidArgument => "invalid_argument",
            ErrorKind::NotFound => "not_found",
            ErrorKind::Closed | ErrorKind::Conflict => "conflict",
            ErrorKind::InvalidRecord => "invalid_record",
        }
    }
}

/// A refused operation: its kind, the id, the detail (status or reason) and
/// the whole message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error {
    /// Why.
    pub kind: ErrorKind,
    /// The record id as given (truncated to 40 characters for a bad id).
    pub id: String,
    /// `Closed`: the status; `Conflict`, `InvalidRecord`: the reason.
    pub detail: String,
    /// The message, ending with a hint.
    pub message: String,
}

fn error(kind: ErrorKind, id: &str, detail: &str) -> Error {
    let message = match kind {
        ErrorKind::InvalidArgument => format!(
            "dead-letter id {} is not a record id; ids are the decimal sequence numbers `dlq list` prints (1, 2, ..)",
            quote(id)
        ),
        ErrorKind::NotFound => {
            format!("no dead-letter record has id {id}; run `dlq list --all` to see the ids")
        }
        ErrorKind::Closed => {
            format!("dead-letter record {id} is {detail}; only open records are replayed")
        }
        ErrorKind::Conflict => format!("dead-letter record {id}: {detail}"),
        ErrorKind::InvalidRecord => {
            format!("dead-letter record {id} cannot be replayed: {detail}; replay its step by hand")
        }
    };
    Error {
        kind,
        id: id.to_owned(),
        detail: detail.to_owned(),
        message,
    }
}

/// What an operator or a worker does to an item.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// Give up on it.
    Purge,
    /// Ask for a replay; a pending one is a conflict.
    Request,
    /// Ask for a replay, or take the pending one.
    Take,
}

/// What to write.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Change {
    /// The item's next value; none: write nothing.
    pub item: Option<String>,
    /// `closed.count + 1` once written.
    pub closes: bool,
    /// The replay entry made or found pending (`Request`, `Take`).
    pub entry: Option<String>,
}

fn quote(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_default()
}

/// The message of an update that lost [`CAS_ROUNDS`] rounds in a row.
pub fn cas_exhausted(key: &str) -> String {
    format!("could not update {key}: {CAS_ROUNDS} compare-and-set conflicts in a row; retry")
}

/// A record id as its sequence number.
pub fn parse_id(id: &str) -> Result<u64, Error> {
    let bad = || {
        error(
            ErrorKind::InvalidArgument,
            &id.chars().take(40).collect::<String>(),
            "",
        )
    };
    if id.is_empty()
        || id.len() > 16
        || !id.bytes().all(|b| b.is_ascii_digit())
        || id.starts_with('0')
    {
        return Err(bad());
    }
    match id.parse::<u64>() {
        Ok(n) if n <= MAX_ID => Ok(n),
        _ => Err(bad()),
    }
}

/// The error for an id the stream does not hold.
pub fn not_found(id: &str) -> Error {
    error(ErrorKind::NotFound, id, "")
}

/// The key of the `n`-th replay of a record whose key is `key`.
pub fn replay_key(key: &str, n: u64) -> String {
    crate::idempotency::replay_key(key, n)
}

/// An item value, read.
struct Item {
    status: &'static str,
    /// Each entry's raw JSON text (objects only).
    replays: Vec<String>,
    purged_ms: Option<u64>,
}

const STATUSES: [&str; 4] = ["open", "replay_requested", "replayed", "purged"];

impl Item {
    fn read(current: Option<&str>) -> Item {
        #[derive(serde::Deserialize)]
        struct Stored<'a> {
            #[serde(borrow, default)]
            status: Option<&'a RawValue>,
            #[serde(borrow, default)]
            replays: Option<Vec<&'a RawValue>>,
            #[serde(borrow, default)]
            purged_ms: Option<&'a RawValue>,
        }
        let stored = current.and_then(|t| serde_json::from_str::<Stored<'_>>(t).ok());
        let Some(s) = stored else {
            return Item {
                status: "open",
                replays: Vec::new(),
                purged_ms: None,
            };
        };
        let status = s
            .status
            .and_then(|r| serde_json::from_str::<String>(r.get()).ok())
            .and_then(|t| STATUSES.iter().find(|s| **s == t).copied())
            .unwrap_or("open");
        let replays = s
            .replays
            .unwrap_or_default()
            .into_iter()
            .map(|r| r.get().trim())
            .filter(|t| t.starts_with('{'))
            .map(str::to_owned)
            .collect();
        let purged_ms = s
            .purged_ms
            .and_then(|r| serde_json::from_str::<u64>(r.get()).ok());
        Item {
            status,
            replays,
            purged_ms,
        }
    }

    fn text(&self) -> String {
        let mut out = format!(
            r#"{{"status":"{}","replays":[{}]"#,
            self.status,
            self.replays.join(",")
        );
        if let Some(ms) = self.purged_ms {
            out.push_str(&format!(r#","purged_ms":{ms}"#));
        }
        out.push('}');
        out
    }

    fn closed(&self) -> bool {
        self.status == "replayed" || self.status == "purged"
    }

    /// The last entry when it is a pending replay (no outcome; n, key, run_id).
    fn pending(&self) -> Option<&String> {
        if self.status != "replay_requested" {
            return None;
        }
        let last = self.replays.last()?;
        entry_fields(last).filter(|e| !e.has_outcome).map(|_| last)
    }
}

struct EntryFields {
    n: u64,
    has_outcome: bool,
}

fn entry_fields(text: &str) -> Option<EntryFields> {
    let v: BTreeMap<String, Value> = serde_json::from_str(text).ok()?;
    let n = v.get("n")?.as_u64()?;
    v.get("key")?.as_str()?;
    v.get("run_id")?.as_str()?;
    Some(EntryFields {
        n,
        has_outcome: v.contains_key("outcome"),
    })
}

/// An item value as the APIs show it.
pub fn item(current: Option<&str>) -> String {
    Item::read(current).text()
}

/// The pending replay entry of an item.
pub fn pending(current: Option<&str>) -> Option<String> {
    Item::read(current).pending().cloned()
}

/// The record's members a replay needs: its key and run id.
fn key_and_run(id: &str, record: &str) -> Result<(String, String), Error> {
    let v: Value = serde_json::from_str(record).unwrap_or(Value::Null);
    match (
        v.get("key").and_then(Value::as_str),
        v.get("run_id").and_then(Value::as_str),
    ) {
        (Some(k), Some(r)) => Ok((k.to_owned(), r.to_owned())),
        _ => Err(error(
            ErrorKind::InvalidRecord,
            id,
            "it has no key or run id",
        )),
    }
}

/// The item after `action` on record `id`.
pub fn apply(
    action: Action,
    id: u64,
    record: &str,
    current: Option<&str>,
    now_ms: u64,
) -> Result<Change, Error> {
    let rid = id.to_string();
    let mut item = Item::read(current);
    if action == Action::Purge {
        if item.status == "purged" {
            return Ok(Change::default());
        }
        let closes = item.status != "replayed";
        item.status = "purged";
        item.purged_ms = Some(now_ms);
        return Ok(Change {
            item: Some(item.text()),
            closes,
            entry: None,
        });
    }
    replay_step(id, record, 1)?;
    if item.closed() {
        return Err(error(ErrorKind::Closed, &rid, item.status));
    }
    if let Some(entry) = item.pending() {
        if action == Action::Request {
            return Err(error(
                ErrorKind::Conflict,
                &rid,
                "a replay request is pending; a worker's recover carries it out",
            ));
        }
        return Ok(Change {
            item: None,
            closes: false,
            entry: Some(entry.clone()),
        });
    }
    let (key, run_id) = key_and_run(&rid, record)?;
    let n = item.replays.len() as u64 + 1;
    let entry = format!(
        r#"{{"n":{n},"key":{},"run_id":{},"requested_ms":{now_ms}}}"#,
        quote(&replay_key(&key, n)),
        quote(&format!("{run_id}/replay/{n}"))
    );
    item.replays.push(entry.clone());
    item.status = "replay_requested";
    Ok(Change {
        item: Some(item.text()),
        closes: false,
        entry: Some(entry),
    })
}

/// The item after replay `n` ended with `outcome`.
pub fn finish(current: Option<&str>, n: u64, outcome: &str, now_ms: u64) -> Change {
    let mut item = Item::read(current);
    for entry in item.replays.iter_mut() {
        if entry_fields(entry).is_some_and(|e| e.n == n && !e.has_outcome) {
            let body = entry.trim_end();
            let body = body.strip_suffix('}').unwrap_or(body).trim_end();
            let sep = if body == "{" { "" } else { "," };
            *entry = format!(
                r#"{body}{sep}"outcome":{},"finished_ms":{now_ms}}}"#,
                quote(outcome)
            );
        }
    }
    let ok = outcome == "ok";
    let closes = ok && !item.closed();
    if !item.closed() {
        item.status = if ok { "replayed" } else { "open" };
    }
    Change {
        item: Some(item.text()),
        closes,
        entry: None,
    }
}

fn count(closed: Option<&str>) -> u64 {
    closed
        .and_then(|t| serde_json::from_str::<Value>(t).ok())
        .and_then(|v| v.get("count").and_then(Value::as_u64))
        .unwrap_or(0)
}

/// The next `closed` value after one more record closed.
pub fn close_one(closed: Option<&str>) -> String {
    format!(r#"{{"count":{}}}"#, count(closed).saturating_add(1))
}

/// Records in the stream minus `closed.count`.
pub fn depth(records: u64, closed: Option<&str>) -> u64 {
    records.saturating_sub(count(closed))
}

/// The `dead_letter_depth` event when this append made the depth cross `threshold`.
pub fn depth_event(
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
        .and_then(|r| r.get("step_id").and_then(Value::as_str).map(quote))
        .unwrap_or_else(|| "null".to_owned());
    Some(format!(
        r#"{{"t_ms":{t_ms},"event":"dead_letter_depth","step":{step},"target":null,"depth":{depth},"threshold":{threshold},"id":"{seq}"}}"#
    ))
}

/// The step input of replay `n` of record `id`: the record's `input` (its
/// members' text as recorded) plus `replay_of`.
pub fn replay_step(id: u64, record: &str, n: u64) -> Result<String, Error> {
    let rid = id.to_string();
    let invalid = |reason: &str| error(ErrorKind::InvalidRecord, &rid, reason);
    #[derive(serde::Deserialize)]
    struct Rec<'a> {
        #[serde(borrow, default)]
        input: Option<&'a RawValue>,
    }
    let input = serde_json::from_str::<Rec<'_>>(record)
        .ok()
        .and_then(|r| r.input)
        .and_then(|raw| serde_json::from_str::<BTreeMap<String, &RawValue>>(raw.get()).ok())
        .ok_or_else(|| invalid("it has no `input` (written before record format 1)"))?;
    let text = |k: &str| {
        input
            .get(k)
            .and_then(|r| serde_json::from_str::<String>(r.get()).ok())
    };
    let branches = input
        .get("args")
        .and_then(|a| serde_json::from_str::<Value>(a.get()).ok())
        .is_some_and(|a| a.get("branches").is_some());
    if text("tool").as_deref() == Some("fanout") && branches {
        return Err(invalid("its `input` is a fan-out, not a step"));
    }
    if text("id").is_none_or(|s| s.is_empty()) || text("tool").is_none_or(|s| s.is_empty()) {
        return Err(invalid("its `input` has no step id or tool"));
    }
    let (key, _) = key_and_run(&rid, record)?;
    let mut out = String::from("{");
    for (k, v) in input.iter().filter(|(k, _)| k.as_str() != "replay_of") {
        out.push_str(&quote(k));
        out.push(':');
        out.push_str(v.get());
        out.push(',');
    }
    out.push_str(&format!(
        r#""replay_of":{{"key":{},"n":{n},"id":"{rid}"}}}}"#,
        quote(&key)
    ));
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const RECORD: &str = r#"{"run_id":"r1","step_id":"s","key":"abc","input":{"id":"s","tool":"t","args":{"x":1.0}}}"#;

    #[test]
    fn a_request_then_a_failed_replay_opens_the_item_again() {
        let c = apply(Action::Request, 3, RECORD, None, 10).unwrap();
        let item = c.item.unwrap();
        assert!(
            item.starts_with(r#"{"status":"replay_requested","replays":[{"n":1,"key":""#),
            "{item}"
        );
        assert!(
            item.ends_with(r#","run_id":"r1/replay/1","requested_ms":10}]}"#),
            "{item}"
        );
        assert_eq!(
            apply(Action::Request, 3, RECORD, Some(&item), 11)
                .unwrap_err()
                .kind,
            ErrorKind::Conflict
        );
        let taken = apply(Action::Take, 3, RECORD, Some(&item), 11).unwrap();
        assert_eq!((taken.item, taken.entry), (None, c.entry));
        let done = finish(Some(&item), 1, "dead_lettered", 20);
        assert!(!done.closes);
        let open = done.item.unwrap();
        assert!(
            open.starts_with(r#"{"status":"open""#)
                && open.contains(r#""outcome":"dead_lettered","finished_ms":20}"#),
            "{open}"
        );
        let again = apply(Action::Take, 3, RECORD, Some(&open), 30).unwrap();
        assert!(again.entry.unwrap().starts_with(r#"{"n":2,"#));
    }

    #[test]
    fn purge_closes_once() {
        let c = apply(Action::Purge, 1, RECORD, None, 5).unwrap();
        assert_eq!(
            c.item.as_deref(),
            Some(r#"{"status":"purged","replays":[],"purged_ms":5}"#)
        );
        assert!(c.closes);
        assert_eq!(
            apply(Action::Purge, 1, RECORD, c.item.as_deref(), 6).unwrap(),
            Change::default()
        );
        let replayed = r#"{"status":"replayed","replays":[]}"#;
        assert!(
            !apply(Action::Purge, 1, RECORD, Some(replayed), 6)
                .unwrap()
                .closes
        );
        assert_eq!(
            apply(Action::Take, 1, RECORD, c.item.as_deref(), 7)
                .unwrap_err()
                .kind,
            ErrorKind::Closed
        );
    }

    #[test]
    fn ids_and_depth() {
        assert_eq!(parse_id("12"), Ok(12));
        for bad in [
            "",
            "0",
            "01",
            "-1",
            "x",
            "1.0",
            "9007199254740992",
            "99999999999999999999",
        ] {
            assert_eq!(
                parse_id(bad).unwrap_err().kind,
                ErrorKind::InvalidArgument,
                "{bad}"
            );
        }
        assert_eq!(parse_id("9007199254740991"), Ok(MAX_ID));
        assert_eq!(depth(5, Some(r#"{"count":2}"#)), 3);
        assert_eq!(close_one(None), r#"{"count":1}"#);
        assert!(depth_event(2, 1, 0, 1, RECORD).is_none());
        assert!(depth_event(2, 3, 0, 1, RECORD).is_none());
        assert_eq!(
            depth_event(2, 2, 7, 4, RECORD).unwrap(),
            r#"{"t_ms":7,"event":"dead_letter_depth","step":"s","target":null,"depth":2,"threshold":2,"id":"4"}"#
        );
    }

    #[test]
    fn the_replay_step_keeps_the_args_text() {
        let s = replay_step(2, RECORD, 1).unwrap();
        assert_eq!(
            s,
            r#"{"args":{"x":1.0},"id":"s","tool":"t","replay_of":{"key":"abc","n":1,"id":"2"}}"#
        );
        let fanout = r#"{"run_id":"r","key":"k","input":{"id":"f","tool":"fanout","args":{"branches":["a"]}}}"#;
        assert_eq!(
            replay_step(1, fanout, 1).unwrap_err().kind,
            ErrorKind::InvalidRecord
        );
        assert_eq!(
            replay_step(1, r#"{"run_id":"r","key":"k"}"#, 1)
                .unwrap_err()
                .kind,
            ErrorKind::InvalidRecord
        );
    }
}
