//! The run's state: plain data the host stores between calls (JSON text).

use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

use super::breaker::Breaker;
use super::config::RunConfig;
use super::input::StepSpec;

/// How many of the run's latest step ids the loop remembers to refuse a repeat.
pub const RECENT_IDS: usize = 64;

/// A step id as the state remembers it: 16 hex digits of its sha256, so an
/// entry has one size whatever the id's length.
pub fn id_digest(id: &str) -> String {
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(id.as_bytes());
    crate::idempotency::lower_hex(digest.get(..8).unwrap_or_default())
}

/// A part of the state kept with its JSON text: written on the first
/// serialization and reused, as long as the part is unchanged, by the next
/// ones (the state the component keeps between calls is serialized once per
/// call; the run's configuration, its step ids and the step as given change
/// far less often). Reading goes through `Deref`; changing through
/// [`Texted::get_mut`], which drops the text.
#[derive(Clone, Debug, Default)]
pub struct Texted<T> {
    value: T,
    text: std::cell::OnceCell<String>,
}

impl<T> Texted<T> {
    /// `value`, its text not written yet.
    pub fn new(value: T) -> Self {
        Texted {
            value,
            text: std::cell::OnceCell::new(),
        }
    }

    /// `value` with its text already written (`text` must be what
    /// [`super::json_write::to_string`] writes for it).
    fn with_text(value: T, text: String) -> Self {
        Texted {
            value,
            text: std::cell::OnceCell::from(text),
        }
    }

    /// The value, to change: its text is written again on the next serialization.
    pub fn get_mut(&mut self) -> &mut T {
        self.text = std::cell::OnceCell::new();
        &mut self.value
    }
}

impl<T> std::ops::Deref for Texted<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.value
    }
}

impl<T: Serialize> Serialize for Texted<T> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        if self.text.get().is_none() {
            match super::json_write::to_string(&self.value, 256) {
                Ok(text) => {
                    // Kept as written (not shrunk: one reallocation less).
                    let _ = self.text.set(text);
                }
                Err(_) => return self.value.serialize(serializer),
            }
        }
        match self.text.get() {
            // Written as is, the way `serde_json`'s `RawValue` is.
            Some(text) => {
                use serde::ser::SerializeStruct;
                let token = super::json_write::RAW_TOKEN;
                let mut raw = serializer.serialize_struct(token, 1)?;
                raw.serialize_field(token, text.as_str())?;
                raw.end()
            }
            None => self.value.serialize(serializer),
        }
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Texted<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        T::deserialize(deserializer).map(Texted::new)
    }
}

std::thread_local! {
    /// The configuration of the last run started, and its text: the next
    /// run's, most often the same, reuses the text instead of writing it.
    static LAST_CONFIG: std::cell::RefCell<Option<(RunConfig, String)>> =
        const { std::cell::RefCell::new(None) };
}

/// `config` with its text: the last run's when the configuration is the
/// same, else written now (once; the state holding it is written next).
fn texted_config(config: RunConfig) -> Texted<RunConfig> {
    LAST_CONFIG.with(|last| {
        let mut last = last.borrow_mut();
        if let Some((_, text)) = last.as_ref().filter(|(c, _)| *c == config) {
            return Texted::with_text(config, text.clone());
        }
        match super::json_write::to_string(&config, 256) {
            Ok(text) => {
                *last = Some((config.clone(), text.clone()));
                Texted::with_text(config, text)
            }
            Err(_) => Texted::new(config),
        }
    })
}

fn no_ids(ids: &Texted<Vec<String>>) -> bool {
    ids.is_empty()
}

/// What the loop waits for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    /// Between steps: the next input is `step`.
    #[default]
    Idle,
    /// Waiting for `read`.
    Reading,
    /// Waiting for `claimed`.
    Claiming,
    /// Waiting for `claimed` of a target's probe lease.
    Leasing,
    /// Waiting for `swapped`: a retry quota update (a retry's take, a success's refund).
    Taking,
    /// Waiting for `attempt` (the operation, a fallback or a compensation).
    Calling,
    /// Waiting for `decision`.
    Deciding,
    /// Waiting for `slept`.
    Sleeping,
    /// Waiting for `restored`.
    Restoring,
    /// Waiting for `joined`: the fan-out's branches run.
    Joining,
    /// Waiting for `swapped`: a breaker update.
    Swapping,
    /// The run is over: no more steps.
    Finished,
}

/// The whole state of a run.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct State {
    /// State format version (1).
    pub v: u32,
    /// The run id.
    pub run_id: String,
    /// Seed of every decision's jitter; none draws from WASI random.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    /// When the run started (Unix ms): `t_ms` of events counts from here.
    pub started_ms: u64,
    /// The latest `now_ms` seen.
    pub now_ms: u64,
    /// The run's configuration.
    pub config: Texted<RunConfig>,
    /// Retry delay spent by the whole run (all steps): `elapsed_ms` of decisions.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub retry_spent_ms: u64,
    /// Completed steps with a side effect and a compensation, oldest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub done: Vec<DoneStep>,
    /// What the loop waits for.
    pub phase: Phase,
    /// The step in progress.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step: Option<StepState>,
    /// Compensations in progress.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comp: Option<CompState>,
    /// The caller cancelled the run.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cancelled: bool,
    /// The run's outcome once finished.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<String>,
    /// In a fan-out branch's state: the fan-out's id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub branch: Option<String>,
    /// In a fan-out branch's state, once its step ended: `{"outcome","result","envelope"}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last: Option<Value>,
    /// The fan-out whose branches run (phase `joining`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fanout: Option<FanoutState>,
    /// Digests of the step ids used by the run's last [`RECENT_IDS`] steps
    /// (steps, fan-outs and their branches), oldest first: an id names one
    /// step in events, keys and dead letters. Bounded, so the state (and the
    /// cost of a step) does not grow with the length of the run.
    #[serde(default, skip_serializing_if = "no_ids")]
    pub ids: Texted<Vec<String>>,
    /// The run was resumed from its journal by `recover` (docs/durability.md §2).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub recovering: bool,
    /// In a recovering run: the outcome its resumed step reached, once it
    /// did (the record's `step_outcome`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step_outcome: Option<String>,
    /// In a fan-out branch's state: its position among the fan-out's
    /// branches (its journal key derives from it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub branch_index: Option<u32>,
    /// The branch journal keys of this run's fan-outs: deleted when the run ends.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub branch_keys: Vec<String>,
    /// A recovered fan-out while its branches are settled (docs/durability.md §2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fan_recovery: Option<FanRecovery>,
    /// The fan-out's branches and their outcomes, once known: the
    /// dead-letter record's `branches`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fan_branches: Option<Vec<Value>>,
    /// The retry quota's bucket as the run last saw it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quota: Option<super::quota::QuotaSeen>,
    /// The decision asked for, while the decision log is on: what its line needs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending_log: Option<super::decision_log::PendingLog>,
    /// The step in progress came with `end`: the run ends when it finishes.
    /// Kept last: the journal holds the state without it
    /// ([`END_AFTER_STEP_TAIL`]), the bytes a step then `end` journals.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub end_after_step: bool,
}

/// How the state's text ends when `end_after_step` is set (the member is
/// the last one written, after at least `v`).
pub const END_AFTER_STEP_TAIL: &str = r#","end_after_step":true}"#;

impl State {
    /// A new run, idle, started at `now_ms`.
    pub fn new(run_id: String, seed: Option<u64>, config: RunConfig, now_ms: u64) -> Self {
        State {
            v: 1,
            run_id,
            seed,
            started_ms: now_ms,
            now_ms,
            config: texted_config(config),
            retry_spent_ms: 0,
            done: Vec::new(),
            phase: Phase::Idle,
            step: None,
            comp: None,
            cancelled: false,
            outcome: None,
            branch: None,
            last: None,
            fanout: None,
            ids: Texted::default(),
            recovering: false,
            step_outcome: None,
            branch_index: None,
            branch_keys: Vec::new(),
            fan_recovery: None,
            fan_branches: None,
            quota: None,
            pending_log: None,
            end_after_step: false,
        }
    }

    /// The initial state of a branch of fan-out `fanout`: the same run (id,
    /// seed, start, configuration, retry spend so far), nothing else.
    pub fn branch_of(&self, fanout: &str) -> Self {
        State {
            started_ms: self.started_ms,
            retry_spent_ms: self.retry_spent_ms,
            branch: Some(fanout.to_owned()),
            ..State::new(
                self.run_id.clone(),
                self.seed,
                RunConfig::clone(&self.config),
                self.now_ms,
            )
        }
    }
}

/// A fan-out waiting for its branches.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct FanoutState {
    /// The fan-out's id.
    pub id: String,
    /// Branches that must end `ok`.
    pub min_results: u32,
    /// The branches' step ids, in order.
    pub branches: Vec<String>,
}

/// A recovered fan-out: what each branch's journal entry said, and the
/// branches in a call when the worker died, resumed one after another.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct FanRecovery {
    /// One `{"id","key","outcome"}` per branch, in order (the record's `branches`).
    pub outcomes: Vec<Value>,
    /// Each branch's completed compensable steps, in branch order.
    pub done: Vec<Vec<DoneStep>>,
    /// Branches still to resume, in order.
    pub pending: Vec<ResumedBranch>,
    /// The branch being resumed now (its effects are this lane's).
    pub current: Option<ResumedBranch>,
}

/// A fan-out branch resumed by `recover`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ResumedBranch {
    /// Its position among the fan-out's branches.
    pub index: usize,
    /// Its state.
    pub state: Box<State>,
}

/// A completed, compensable step.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct DoneStep {
    /// Step id.
    pub id: String,
    /// Tool.
    pub tool: String,
    /// Call kind, if given.
    pub call: Option<String>,
    /// Arguments.
    pub args: Value,
    /// The target that succeeded.
    pub target: String,
}

/// The step in progress.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct StepState {
    /// The step as given.
    pub spec: Texted<StepSpec>,
    /// Its idempotency key (every attempt, every target).
    pub key: String,
    /// The chain: the target, then the fallbacks.
    pub targets: Vec<String>,
    /// The position in the chain.
    #[serde(default, skip_serializing_if = "is_zero_usize")]
    pub index: usize,
    /// Calls made for this key over its lifetime (persisted).
    #[serde(default, skip_serializing_if = "is_zero_u32")]
    pub attempts: u32,
    /// Calls made in this run of the step.
    #[serde(default, skip_serializing_if = "is_zero_u32")]
    pub calls: u32,
    /// This run of the step holds the key's in-flight mark.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub claimed: bool,
    /// When the step started.
    pub started_ms: u64,
    /// Every failure's envelope, oldest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub trail: Vec<Value>,
    /// Breakers of the chain's targets, as read and updated.
    pub breakers: BTreeMap<String, Breaker>,
    /// The call in flight is a half-open probe.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub probe: bool,
    /// The pending decision is about a short-circuit, not a call.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub short_circuit: bool,
    /// The target of the call in flight.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub calling: Option<String>,
    /// The `timeout_ms` of the step's call in flight (the attempt timeout,
    /// capped by the deadline when it was made).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    /// While a probe lease is claimed (phase `leasing`): where the chain's
    /// scan started and the shortest wait of the open targets seen so far.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease: Option<LeaseScan>,
    /// The tokens the step's last retry took from the retry quota: what
    /// its success gives back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_cost: Option<u64>,
    /// Until when (Unix ms) the step waits for its key in flight elsewhere
    /// (`in_flight_wait_ms`), once it found it so.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_flight_until: Option<u64>,
    /// The pending sleep is a poll of the key in flight: `slept` reads again.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub polling: bool,
    /// The pending read re-reads the chain's breakers after a retry sleep:
    /// `read` goes on to the next call.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub refreshing: bool,
    /// The store versions of the chain's breakers, as read and swapped (a
    /// target without one: absent, or the host gave no versions).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub versions: BTreeMap<String, u64>,
    /// The epoch of the breaker the call in flight passed the gate at.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub gate_epoch: u64,
    /// The breaker update waiting for `swapped`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub swap: Option<super::swap::PendingSwap>,
    /// The retry quota update waiting for `swapped` (phase `taking`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quota_op: Option<super::quota::PendingQuota>,
    /// The observation of the pending decision, kept while the step has no
    /// fallback of its own: a policy document's chain may give it one, and
    /// the loop then asks again (`Machine::adopt`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub asked: Option<Value>,
    /// The dead-letter owner, runbook and depth threshold the latest
    /// decision's `dead_letters` table gives the step's tool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dead_letter: Option<super::config::DeadLetterConfig>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

fn is_zero_u32(n: &u32) -> bool {
    *n == 0
}

fn is_zero_usize(n: &usize) -> bool {
    *n == 0
}

/// The chain's scan, paused while a probe lease is claimed.
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
pub struct LeaseScan {
    /// The index the scan started from (where a short-circuit decision goes back to).
    pub start: usize,
    /// The shortest time until an open target's probe, among those seen.
    pub wait: Option<u64>,
}

impl StepState {
    /// A step starting at `now_ms`, before its first read.
    pub fn new(spec: StepSpec, key: String, targets: Vec<String>, now_ms: u64) -> Self {
        StepState {
            spec: Texted::new(spec),
            key,
            targets,
            index: 0,
            attempts: 0,
            calls: 0,
            claimed: false,
            started_ms: now_ms,
            trail: Vec::new(),
            breakers: BTreeMap::new(),
            probe: false,
            short_circuit: false,
            calling: None,
            timeout_ms: None,
            lease: None,
            retry_cost: None,
            in_flight_until: None,
            polling: false,
            refreshing: false,
            versions: BTreeMap::new(),
            gate_epoch: 0,
            swap: None,
            quota_op: None,
            asked: None,
            dead_letter: None,
        }
    }
}

/// Compensations after an exhausted or cancelled step.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CompState {
    /// Left to run, next first (reverse order of completion).
    pub queue: Vec<DoneStep>,
    /// The one running.
    pub current: Option<CompCurrent>,
    /// One result per compensation run: `{"step","key","attempts","outcome","envelope"?}`.
    pub results: Vec<Value>,
    /// The run's outcome afterwards: `dead_lettered`, `cancelled` or `interrupted`.
    pub then: String,
}

/// The compensation running now.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CompCurrent {
    /// The step it undoes.
    pub step: DoneStep,
    /// Its own idempotency key.
    pub key: String,
    /// Its calls so far.
    pub attempts: u32,
    /// Its own retry delay spent (its own budget).
    pub spent_ms: u64,
    /// Its failures' envelopes.
    pub trail: Vec<Value>,
}
