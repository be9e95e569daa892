//! The recovery runtime: carries out every decision, with the loop written
//! once in the component.
//!
//! The loop (retries, fallbacks past open breakers, restores, compensations,
//! dead letters, budgets, the idempotency cache) is the reference component's
//! `agent:recovery/runtime@0.3.0` export (typed inputs and effects), a sans-I/O
//! state machine. This
//! module only does I/O: it calls your operation, sleeps on a [`Clock`], asks
//! the active policy to decide (any 0.1 component: the reference, payments-policy,
//! a [`PolicyHandle`] that hot-swaps) and reads and writes a [`Store`]. The
//! protocol is specified in `docs/runtime.md`.
//!
//! ```
//! use std::sync::Arc;
//! use agent_recovery::runtime::{Clock, Outcome, Runtime, Step, VirtualClock};
//!
//! let clock = Arc::new(VirtualClock::new(1_767_225_600_000));
//! let runtime = Runtime::builder().clock(clock.clone()).seed(7).build()?;
//! let mut run = runtime.run("run-1")?;
//! let report = run.step(
//!     Step::new("charge", "payments.charge", |call| {
//!         // call.key is the same on every attempt; call.target is the target or a fallback
//!         if call.attempt == 1 {
//!             Outcome::Failed(r#"{"source":"http","status":503}"#.into())
//!         } else {
//!             Outcome::Ok(serde_json::json!({"id": "ch_1"}))
//!         }
//!     })
//!     .call("tool")
//!     .args(serde_json::json!({"amount": 10})),
//! )?;
//! assert_eq!(report.outcome, "ok");
//! assert_eq!(report.result, Some(serde_json::json!({"id": "ch_1"})));
//! assert!(clock.now_ms() > 1_767_225_600_000); // slept on the virtual clock
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod clock;
mod component;
pub mod deadletters;
mod decision_log;
mod driver;
#[cfg(feature = "tokio")]
mod driver_async;
mod durable;
mod effects;
mod interrupt;
mod names;
mod run;
pub mod scenario;
mod step;
mod telemetry;

use std::sync::Arc;

use serde_json::{Value, json};

pub use clock::{Clock, SystemClock, VirtualClock};
pub use deadletters::{DeadLetterError, DeadLetters, Item, ListOptions, ReplayTicket};
pub use decision_log::{DecisionLog, ROTATE_BYTES};
pub(crate) use driver::Lent;
pub use durable::{
    JOURNAL_PREFIX, JournalEntry, Operations, RECOVERING_PREFIX, RecoverOptions, RecoverReport,
    journal_entries,
};
pub use interrupt::interruptible;
pub use names::MAX_ID_BYTES;
pub use run::{Run, RuntimeError, StepReport};
pub use step::{Call, Outcome, Step};
pub use telemetry::{SCOPE_NAME, Telemetry};

use crate::retry::Decide;
use crate::store::{MemoryStore, Store};
use crate::{Limits, Loader, Policy, PolicyHandle, PolicyId};
use component::LoopComponent;

/// Callback for each event (the component's JSON text of the event).
type OnEvent = Arc<dyn Fn(&str) + Send + Sync>;

/// Runs steps under the recovery loop. Build it once, share it (`Send + Sync`).
pub struct Runtime {
    looper: Arc<LoopComponent>,
    decider: Arc<dyn Decide + Send + Sync>,
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    seed: Option<u64>,
    config: String,
    on_event: Option<OnEvent>,
    telemetry: telemetry::Bound,
    /// The run configuration's `in_flight_ttl_ms` (the recovery lease's TTL
    /// and the default age of a journal entry `recover` takes).
    in_flight_ttl_ms: u64,
    /// The run configuration's `dead_letter.depth_threshold`.
    depth_threshold: Option<u64>,
    /// Where the decision log's lines go, and who decides (its `policy`).
    decision_log: Option<(DecisionLog, decision_log::LogPolicy)>,
    /// The loop accepted the run configuration (a run started): later runs
    /// send their `run` input with their first step.
    config_checked: std::sync::atomic::AtomicBool,
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime")
            .field("seed", &self.seed)
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl Runtime {
    /// Options; see [`RuntimeBuilder`] for every default.
    pub fn builder() -> RuntimeBuilder {
        RuntimeBuilder::default()
    }

    /// Starts a run. Its retry budget, compensations and cancellation span
    /// its steps; breakers, attempt counts and the idempotency cache live in
    /// the store and span runs. The run counts its time (deadline, retry
    /// budget, events' `t_ms`) from this call; the loop hears of it with its
    /// first step (one loop call fewer), except for the runtime's first run,
    /// which checks the configuration here.
    pub fn run(&self, run_id: &str) -> Result<Run<'_, '_>, RuntimeError> {
        Run::start(self, run_id)
    }

    /// A run of one step (a door's call, a retry): its `run` input is sent
    /// with the step and `end` by [`Run::step_then_end`], in one `advance`.
    pub(crate) fn run_of_one_step(&self, run_id: &str) -> Result<Run<'_, '_>, RuntimeError> {
        Run::start_with_step(self, run_id)
    }

    /// Was this outcome (an observation-shaped JSON text) a failure? The
    /// failure's envelope (JSON text), or `None` for a success. The component
    /// decides: a 200 carrying a refusal is a failure, a 304 is not.
    pub fn check_outcome(&self, outcome: &str) -> Result<Option<String>, RuntimeError> {
        Ok(self.looper.check_outcome(outcome)?)
    }

    /// Renders an envelope (JSON text, as printed by `classify`) in the format
    /// named `format`: every `render-format` name and the formats added since
    /// 0.1 (`ag-ui-run-error`, an AG-UI `RUN_ERROR` event), through the
    /// reference component's `render-named`. `options` is JSON text or empty.
    pub fn render_named(
        &self,
        envelope: &str,
        format: &str,
        options: &str,
    ) -> Result<String, RuntimeError> {
        Ok(self.looper.render_named(envelope, format, options)?)
    }

    /// Whether an awaited step needs a tokio runtime: a real clock's sleeps
    /// are tokio's, a store that may block is called on its blocking pool.
    #[cfg(feature = "tokio")]
    pub(crate) fn needs_tokio(&self) -> bool {
        !self.clock.is_virtual() || self.store.may_block()
    }

    /// The dead-letter queue of this runtime's store (`docs/durability.md` §3):
    /// list, show, replay, request a replay, purge, depth.
    pub fn dead_letters(&self) -> DeadLetters<'_> {
        DeadLetters::new(self)
    }

    /// Finishes the interrupted runs in the journal and carries out pending
    /// replay requests (`docs/durability.md` §2); one report per run.
    pub fn recover(
        &self,
        operations: &Operations<'_>,
        options: RecoverOptions,
    ) -> Result<Vec<RecoverReport>, RuntimeError> {
        durable::recover(self, operations, options)
    }
}

/// Options of a [`Runtime`].
///
/// # Default
///
/// | option | default |
/// | --- | --- |
/// | [`policy`](Self::policy) / [`handle`](Self::handle) | the embedded reference policy decides |
/// | [`store`](Self::store) | a fresh [`MemoryStore`] |
/// | [`clock`](Self::clock) | [`SystemClock`] (real time, real sleeps) |
/// | [`seed`](Self::seed) | none: jitter drawn from WASI random |
/// | [`attempt_budget`](Self::attempt_budget) | 5 calls per idempotency key, persisted |
/// | [`breaker`](Self::breaker) | none: the active policy's thresholds (each decision's `breaker`; the reference: 3 consecutive transient failures open a target, for a window of 250 ms that grows with the outage up to 30 000 ms) |
/// | [`idempotency_ttl_ms`](Self::idempotency_ttl_ms) | 86 400 000 (24 h) |
/// | [`in_flight_ttl_ms`](Self::in_flight_ttl_ms) | 300 000 (5 min) |
/// | [`attempt_timeout_ms`](Self::attempt_timeout_ms) | none |
/// | [`deadline_ms`](Self::deadline_ms) | none |
/// | [`policy_config`](Self::policy_config) | none: the policy's defaults (run retry budget 60 000 ms) |
/// | [`limits`](Self::limits) | [`Limits::default()`] for the loop component |
/// | [`loader`](Self::loader) | [`Loader::default()`] (no compile cache) |
/// | [`dead_letter`](Self::dead_letter) | owner, runbook and depth threshold all unset |
/// | [`telemetry`](Self::telemetry) | [`Telemetry::global()`]: the global OpenTelemetry providers when built (no-ops unless installed) |
/// | [`decision_log`](Self::decision_log) | none: no decision log (docs/decision-logs.md) |
#[derive(Default)]
pub struct RuntimeBuilder {
    decider: Option<Arc<dyn Decide + Send + Sync>>,
    store: Option<Arc<dyn Store>>,
    clock: Option<Arc<dyn Clock>>,
    store_clock: Option<Arc<dyn Clock>>,
    store_listeners: Option<crate::store::Listeners>,
    seed: Option<u64>,
    config: serde_json::Map<String, Value>,
    raw_config: Option<Value>,
    on_event: Option<OnEvent>,
    limits: Option<Limits>,
    loader: Option<Loader>,
    telemetry: Option<Telemetry>,
    policy_handle: Option<PolicyHandle>,
    fixed_policy: Option<Arc<Policy>>,
    decision_log: Option<DecisionLog>,
}

impl RuntimeBuilder {
    /// The policy that decides (any 0.1 component).
    pub fn policy(mut self, policy: Arc<Policy>) -> Self {
        self.fixed_policy = Some(Arc::clone(&policy));
        self.decider = Some(policy);
        self
    }
    /// Anything that decides (a [`Policy`], a [`PolicyHandle`], your own [`Decide`]).
    pub fn decider(mut self, decider: Arc<dyn Decide + Send + Sync>) -> Self {
        self.decider = Some(decider);
        self
    }
    /// A handle whose active policy decides; a hot swap takes effect at the next decision.
    pub fn handle(mut self, handle: PolicyHandle) -> Self {
        self.policy_handle = Some(handle.clone());
        self.decider = Some(Arc::new(handle));
        self
    }
    /// Where breakers, attempt counts, the idempotency cache and dead letters live.
    pub fn store(mut self, store: Arc<dyn Store>) -> Self {
        self.store = Some(store);
        self.store_clock = None;
        self.store_listeners = None;
        self
    }
    /// The store opened by [`store::open_with`](crate::store::open_with):
    /// its Redis server clock is used unless [`clock`](Self::clock) is set,
    /// and the fallback wrapper's `store_degraded` / `store_restored` events
    /// reach [`on_event`](Self::on_event).
    pub fn opened_store(mut self, opened: crate::store::OpenedStore) -> Self {
        self.store = Some(opened.store);
        self.store_clock = opened.clock;
        self.store_listeners = opened.listeners;
        self
    }

    /// The clock to read and sleep on.
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = Some(clock);
        self
    }
    /// Seed every decision's jitter (reproducible delays).
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = Some(seed);
        self
    }
    /// Calls allowed per input (idempotency key) over its lifetime.
    pub fn attempt_budget(mut self, calls: u32) -> Self {
        self.config.insert("attempt_budget".into(), json!(calls));
        self
    }
    /// Consecutive transient failures that open a target's breaker, and how
    /// long it stays open. When set, these win over the active policy's
    /// thresholds (docs/runtime.md, "Circuit breaker").
    pub fn breaker(mut self, failure_threshold: u32, open_ms: u64) -> Self {
        self.config.insert(
            "breaker".into(),
            json!({"failure_threshold": failure_threshold, "open_ms": open_ms}),
        );
        self
    }
    /// How long a recorded success answers a duplicate idempotency key.
    pub fn idempotency_ttl_ms(mut self, ms: u64) -> Self {
        self.config.insert("idempotency_ttl_ms".into(), json!(ms));
        self
    }
    /// How long a key's in-flight mark holds (a lease), so a worker that died
    /// mid-call blocks its key this long, not for the whole TTL.
    pub fn in_flight_ttl_ms(mut self, ms: u64) -> Self {
        self.config.insert("in_flight_ttl_ms".into(), json!(ms));
        self
    }
    /// How long a step whose key is in flight in another worker waits for it
    /// (re-reading the key every 250 ms at most: `done` answers from the
    /// cache, gone or expired claims it) before ending `in_flight`. Default 0:
    /// end `in_flight` at once.
    pub fn in_flight_wait_ms(mut self, ms: u64) -> Self {
        self.config.insert("in_flight_wait_ms".into(), json!(ms));
        self
    }
    /// A call slower than this is reported as a `timeout` observation
    /// (measured on the clock when it returns; an operation wrapped in
    /// [`interruptible`] is no longer waited for after this long).
    pub fn attempt_timeout_ms(mut self, ms: u64) -> Self {
        self.config.insert("attempt_timeout_ms".into(), json!(ms));
        self
    }
    /// The run's deadline, ms after it starts: no call starts and no retry
    /// sleep ends after it (the step ends as a total timeout, exhausted), and
    /// each call gets at most the time left as its timeout.
    pub fn deadline_ms(mut self, ms: u64) -> Self {
        self.config.insert("deadline_ms".into(), json!(ms));
        self
    }
    /// The policy configuration passed to every decision (`context.config`:
    /// `{"tool":{..},"llm":{..},"agent":{..},"retry_budget_ms":..}`).
    pub fn policy_config(mut self, config: Value) -> Self {
        self.config.insert("policy".into(), config);
        self
    }
    /// The dead-letter queue's owner and runbook link (written into every
    /// record) and the depth at which the runtime emits `dead_letter_depth`
    /// (`docs/durability.md` §3).
    pub fn dead_letter(
        mut self,
        owner: Option<&str>,
        runbook: Option<&str>,
        depth_threshold: Option<u64>,
    ) -> Self {
        self.config.insert(
            "dead_letter".into(),
            json!({"owner": owner, "runbook": runbook, "depth_threshold": depth_threshold}),
        );
        self
    }
    /// The fleet retry quota (`docs/runtime.md`, "Retry quota"): a token
    /// bucket in the store, shared by every worker on it, that each retry
    /// takes from and each success refills. `quota` is the run
    /// configuration's `retry_quota` object (`{"name","capacity","retry_cost",
    /// "timeout_cost","success_refund"}`, each optional: `default`, 500, 5,
    /// 10, 1); off by default. Checked when the first run starts
    /// (`invalid-config` with a hint).
    pub fn retry_quota(mut self, quota: Value) -> Self {
        self.config.insert("retry_quota".into(), quota);
        self
    }
    /// The whole run configuration as JSON (`docs/runtime.md`, "The run
    /// configuration"); replaces the typed options above.
    pub fn config_json(mut self, config: Value) -> Self {
        self.raw_config = Some(config);
        self
    }
    /// Called with each event's JSON text as it happens.
    pub fn on_event(mut self, f: impl Fn(&str) + Send + Sync + 'static) -> Self {
        self.on_event = Some(Arc::new(f));
        self
    }
    /// Log every decision, one JSON line each (docs/decision-logs.md): to a
    /// file ([`DecisionLog::file`]) or a callback ([`DecisionLog::callback`]).
    /// Sets the run configuration's `decision_log` member.
    pub fn decision_log(mut self, log: DecisionLog) -> Self {
        self.decision_log = Some(log);
        self
    }
    /// Where spans and metrics go (`docs/telemetry.md`): [`Telemetry::global()`]
    /// by default, [`Telemetry::new`] for explicit providers, [`Telemetry::off()`].
    pub fn telemetry(mut self, telemetry: Telemetry) -> Self {
        self.telemetry = Some(telemetry);
        self
    }
    /// Limits of the loop component's calls.
    pub fn limits(mut self, limits: Limits) -> Self {
        self.limits = Some(limits);
        self
    }

    /// The loader of the loop component and of the default reference policy
    /// (e.g. one with a [`cache_dir`](Loader::cache_dir) for short-lived processes).
    pub fn loader(mut self, loader: Loader) -> Self {
        self.loader = Some(loader);
        self
    }

    /// Loads the loop (and the reference policy when no policy was given).
    pub fn build(self) -> Result<Runtime, RuntimeError> {
        let limits = self.limits.unwrap_or_default();
        let loader = self.loader.unwrap_or_default().limits(limits.clone());
        let mut fixed = self.fixed_policy;
        let decider: Arc<dyn Decide + Send + Sync> = match self.decider {
            Some(d) => d,
            None => {
                let reference = Arc::new(loader.clone().reference()?);
                fixed = Some(Arc::clone(&reference));
                reference
            }
        };
        let telemetry = self.telemetry.unwrap_or_default();
        let source = match (self.policy_handle.clone(), fixed.clone()) {
            _ if !telemetry.is_on() => telemetry::PolicySource::Unknown,
            (Some(h), _) => telemetry::PolicySource::Handle(h),
            (None, Some(p)) => PolicyId::of(&p).map_or(
                telemetry::PolicySource::Unknown,
                telemetry::PolicySource::Fixed,
            ),
            (None, None) => telemetry::PolicySource::Unknown,
        };
        let mut config = self.raw_config.unwrap_or(Value::Object(self.config));
        let decision_log = match self.decision_log {
            None => None,
            Some(log) => {
                if let Some(c) = config.as_object_mut() {
                    c.insert("decision_log".into(), log.config());
                }
                let policy = match (&self.policy_handle, &fixed) {
                    (Some(h), _) => decision_log::LogPolicy::Handle(h.clone()),
                    (None, Some(p)) => PolicyId::of(p)
                        .map_or(decision_log::LogPolicy::Unknown, |id| {
                            decision_log::LogPolicy::fixed(&id)
                        }),
                    (None, None) => decision_log::LogPolicy::Unknown,
                };
                Some((log, policy))
            }
        };
        let in_flight_ttl_ms = config
            .get("in_flight_ttl_ms")
            .and_then(Value::as_u64)
            .unwrap_or(durable::IN_FLIGHT_TTL_MS);
        if let (Some(listeners), Some(f)) = (&self.store_listeners, &self.on_event) {
            listeners.subscribe(Arc::clone(f));
        }
        let depth_threshold = config
            .pointer("/dead_letter/depth_threshold")
            .and_then(Value::as_u64);
        let looper = Arc::new(LoopComponent::reference(&loader, limits)?);
        Ok(Runtime {
            telemetry: telemetry.bind(source, &looper),
            looper,
            decider,
            store: self.store.unwrap_or_else(|| Arc::new(MemoryStore::new())),
            clock: self
                .clock
                .or(self.store_clock)
                .unwrap_or_else(|| Arc::new(SystemClock)),
            seed: self.seed,
            config: config.to_string(),
            on_event: self.on_event,
            in_flight_ttl_ms,
            depth_threshold,
            decision_log,
            config_checked: std::sync::atomic::AtomicBool::new(false),
        })
    }
}
