//! What the loop asks the host to do, and the events of the timeline.

use serde::Serialize;
use serde_json::Value;
use serde_json::value::RawValue;

use super::input::StepSpec;

/// Store key prefix of a target's breaker.
pub const BREAKER_PREFIX: &str = "agent-recovery/breaker/";
/// Store key prefix of an input's attempt count.
pub const ATTEMPTS_PREFIX: &str = "agent-recovery/attempts/";
/// Store key prefix of an idempotency cache entry.
pub const IDEM_PREFIX: &str = "agent-recovery/idem/";
/// Store key prefix of a run's journal entry (docs/durability.md §1).
pub const JOURNAL_PREFIX: &str = "agent-recovery/journal/";
/// Store key prefix of a fan-out branch's journal entry
/// (`agent-recovery/branch/<run_id>/<hex>`, docs/durability.md §2).
pub const BRANCH_PREFIX: &str = "agent-recovery/branch/";
/// Store key prefix of a target's half-open probe lease.
pub const PROBE_PREFIX: &str = "agent-recovery/probe/";
/// Store key prefix of a fleet retry quota (`{"tokens":N}`).
pub const QUOTA_PREFIX: &str = "agent-recovery/quota/";
/// The dead-letter stream.
pub const DEAD_LETTER_STREAM: &str = "agent-recovery/dead-letter";

/// A store value's JSON text, written as is in the batch (as `serde_json`
/// writes a `RawValue`): a value the loop writes in one piece, the bytes
/// `serde_json` writes for the same `Value`, without building that `Value`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RawJson(pub String);

impl RawJson {
    /// The JSON text of `value`, as `serde_json::to_string` writes it.
    pub fn of(value: &Value) -> Self {
        RawJson(super::json_write::to_string(value, 64).unwrap_or_else(|_| value.to_string()))
    }
}

impl Serialize for RawJson {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let token = super::json_write::RAW_TOKEN;
        let mut raw = serializer.serialize_struct(token, 1)?;
        raw.serialize_field(token, self.0.as_str())?;
        raw.end()
    }
}

/// One event of the timeline (`emit`). `step` and `target` are always present.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Event {
    /// Virtual time since the run started, ms.
    pub t_ms: u64,
    /// `attempt`, `ok`, `decision`, `sleep`, `breaker`, `short_circuit`,
    /// `fallback`, `restore`, `cached`, `in_flight`, `compensate`,
    /// `dead_letter`, `cancelled`, `fanout`, `outcome`, `recover`.
    pub event: &'static str,
    /// Step id.
    pub step: Option<String>,
    /// Target.
    pub target: Option<String>,
    /// Call number of the key (from 1).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub attempt: Option<u32>,
    /// `operation`, `fallback` or `compensation` (on `attempt`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub call: Option<&'static str>,
    /// Idempotency key.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// The decision's action.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub action: Option<String>,
    /// Envelope code.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    /// Delay.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delay_ms: Option<u64>,
    /// Breaker state, or a step's / run's outcome.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
}

/// What the host must do. Only the last effect of a batch waits for an answer.
#[derive(Clone, Debug, Serialize)]
#[serde(tag = "effect", rename_all = "snake_case")]
pub enum Effect {
    /// Read these store keys; answer `read`.
    Read {
        /// Keys.
        keys: Vec<String>,
        /// The batch goes on when every key is absent (nothing answers the
        /// read); otherwise the host answers `read` and stops the batch.
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        go_on_if_absent: bool,
    },
    /// Write (put) a value.
    Write {
        /// Key.
        key: String,
        /// Value (its JSON text).
        value: RawJson,
        /// Expiry, ms from now; null: never.
        ttl_ms: Option<u64>,
    },
    /// Create `key` only if it is absent (compare-and-set with no version):
    /// the idempotency key's in-flight mark, a target's probe lease; answer `claimed`.
    Claim {
        /// Key.
        key: String,
        /// Value (its JSON text).
        value: RawJson,
        /// Expiry, ms from now.
        ttl_ms: Option<u64>,
    },
    /// Compare-and-set: write `value` under `key` if its store version is
    /// still `expected` (null: only if the key is absent); answer `swapped`.
    /// The breaker and retry quota updates: on a conflict the loop applies
    /// the same change to the value `swapped` returns and swaps again.
    Swap {
        /// Key.
        key: String,
        /// The version the value must still have; null: the key must be absent.
        expected: Option<u64>,
        /// Value.
        value: Value,
        /// Expiry, ms from now; null: never.
        ttl_ms: Option<u64>,
    },
    /// Delete a key.
    Delete {
        /// Key.
        key: String,
    },
    /// Call the operation, a fallback target or a compensation; answer `attempt`.
    Call {
        /// `operation`, `fallback` or `compensation`.
        call: &'static str,
        /// Step id.
        step: String,
        /// Target.
        target: String,
        /// Idempotency key to pass to the callee.
        key: String,
        /// Call number of this key (from 1).
        attempt: u32,
        /// Give up after this long (a `timeout` observation); null: no limit.
        timeout_ms: Option<u64>,
        /// The step's tool (for a compensation, the compensated step's): how
        /// `recover` finds the operation of a step it did not start.
        tool: String,
    },
    /// Ask the active policy: `decide-json(observation, context)`; answer `decision`.
    Decide {
        /// Observation, JSON text.
        observation: String,
        /// Context, JSON text.
        context: String,
    },
    /// Sleep; answer `slept`.
    Sleep {
        /// How long.
        ms: u64,
        /// False between compensation attempts: compensations always run, so
        /// the host must not answer `cancel` instead.
        cancellable: bool,
    },
    /// Run the step's checkpoint hook; answer `restored`.
    Restore {
        /// Step id.
        step: String,
    },
    /// Run every branch of a fan-out (concurrently where the host can) as
    /// its own run, from `state` with a `step` input, up to its `finish`;
    /// answer `joined` with the branches' final states, in order.
    Fork {
        /// The fan-out's id.
        fanout: String,
        /// The branches, in order.
        branches: Vec<Branch>,
    },
    /// Report a timeline event.
    Emit {
        /// The event.
        event: Event,
    },
    /// The journal entry, a `write` (`"effect":"write"` on the wire): `advance`
    /// fills `value.state` with the state it returns, serialized once. A
    /// fan-out branch writes its own entry under `agent-recovery/branch/`.
    #[serde(rename = "write")]
    Journal {
        /// `agent-recovery/journal/<run_id>`, or a branch's key.
        key: String,
        /// `{"run_id","state","v","written_ms"}`.
        value: JournalEntry,
        /// Always null: the entry lives until the run ends.
        ttl_ms: Option<u64>,
    },
    /// Append a record to a stream (the dead-letter record).
    Append {
        /// Stream.
        stream: &'static str,
        /// Record.
        record: Value,
        /// The depth at which the host reports `dead_letter_depth` when this
        /// append crosses it: the run configuration's, else the policy
        /// document's for the step's tool (absent: none set).
        #[serde(skip_serializing_if = "Option::is_none")]
        depth_threshold: Option<u64>,
    },
    /// Append `line` (one JSON object, no newline) and a newline to the
    /// decision log; no answer. Only when the run configuration sets
    /// `decision_log` (docs/decision-logs.md).
    Log {
        /// The line.
        line: String,
    },
    /// The step is over; the next input is `step` (unless the run finished).
    Finish {
        /// Step id.
        step: String,
        /// `ok`, `failed`, `escalated`, `replan`, `awaiting_input`,
        /// `dead_lettered`, `cancelled`, `in_flight`, `interrupted`; `completed`
        /// for the `end` input.
        outcome: String,
        /// The run is over (no more steps).
        run_finished: bool,
        /// For `ok`: the operation's value (or the cached one).
        result: Option<Value>,
        /// The last failure's envelope, if any.
        envelope: Option<Value>,
        /// For `replan`: the envelope rendered `model-tool-result`.
        rendered: Option<Value>,
        /// For `awaiting_input`: what to resume with (the step's key).
        token: Option<String>,
    },
}

/// One branch of a `fork`.
#[derive(Clone, Debug, Serialize)]
pub struct Branch {
    /// The branch's initial state, JSON text: the first `advance` of the branch.
    pub state: String,
    /// Its step: send `{"input":"step","now_ms":..,"step":<this>}` with `state`.
    pub step: StepSpec,
}

/// The value of a journal entry (`agent-recovery/journal/<run_id>`).
#[derive(Clone, Debug, Serialize)]
pub struct JournalEntry {
    /// The run id.
    pub run_id: String,
    /// The run's state, the same bytes `advance` returns (filled by `advance`).
    pub state: Option<Box<RawValue>>,
    /// Entry format version (1).
    pub v: u32,
    /// When it was written (the input's `now_ms`).
    pub written_ms: u64,
}
