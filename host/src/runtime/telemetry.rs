//! OpenTelemetry spans and metrics of the recovery runtime.
//!
//! Telemetry observes; it never decides. It sees what the driver does (each
//! `call` effect's start and end on the runtime's clock, each `decide`
//! answer, each `append`) and the component's events, and turns them into
//! the spans, attributes and metrics specified in `docs/telemetry.md` (the
//! schema every runtime follows). Only the OpenTelemetry **API** is used: with
//! no provider installed the global providers are no-ops.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use opentelemetry::Value;
use opentelemetry::global::{self, BoxedTracer};
use opentelemetry::logs::{AnyValue, LogRecord as _, Logger as _, LoggerProvider, Severity};
use opentelemetry::metrics::{Counter, Gauge, Histogram, Meter, MeterProvider};
use opentelemetry::trace::{
    SpanContext, SpanKind, Status, TraceContextExt, Tracer as _, TracerProvider,
};
use opentelemetry::{Context, InstrumentationScope, KeyValue};

use super::component::LoopComponent;
use super::step::Call;
use crate::component::gen_::runtime::tele;
use crate::component::gen_::runtime::typed::{CallRole, StepOutcome};
use crate::{PolicyHandle, PolicyId};

/// Whether `provider` is the API's no-op meter provider (the global one
/// until an SDK is installed). The API gives no way to ask; the no-op
/// provider is the only one with no state at all (a zero-sized type), where
/// an SDK's holds its pipeline.
fn is_noop_meter_provider(provider: &(dyn MeterProvider + Send + Sync)) -> bool {
    std::mem::size_of_val(provider) == 0
}

/// Whether `tracer` is the API's no-op tracer. A span started under a
/// remote parent that is not sampled: the no-op tracer hands back the
/// parent's own span context, an SDK's tracer a span of its own (not
/// recorded under the SDK's default, parent-based sampler). Should a
/// sampler that ignores the parent record it, the probe is leaked rather
/// than ended, so that it is never exported.
fn is_noop_tracer(tracer: &BoxedTracer) -> bool {
    use opentelemetry::trace::{Span as _, SpanId, TraceFlags, TraceId, TraceState};
    let parent = SpanContext::new(
        TraceId::from(1_u128),
        SpanId::from(1_u64),
        TraceFlags::default(),
        true,
        TraceState::default(),
    );
    let cx = Context::new().with_remote_span_context(parent.clone());
    let span = tracer.start_with_context("agent_recovery.probe", &cx);
    let noop = span.span_context() == &parent;
    if span.is_recording() {
        std::mem::forget(span);
    }
    noop
}

/// The instrumentation scope of every span and instrument.
pub const SCOPE_NAME: &str = "agent-recovery";

/// Where a [`Runtime`](super::Runtime) sends its spans and metrics.
///
/// The default, [`Telemetry::global`], uses the global OpenTelemetry
/// providers as they are when the runtime is built: no-ops until your program
/// installs an SDK (`opentelemetry::global::set_tracer_provider`,
/// `set_meter_provider`). [`Telemetry::new`] takes explicit providers;
/// [`Telemetry::off`] records nothing and skips even the no-op calls.
#[derive(Clone)]
pub struct Telemetry {
    inner: Option<Arc<Instruments>>,
}

impl std::fmt::Debug for Telemetry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Telemetry")
            .field("on", &self.inner.is_some())
            .finish()
    }
}

impl Default for Telemetry {
    fn default() -> Self {
        Telemetry::global()
    }
}

impl Telemetry {
    /// The global tracer and meter providers (no-ops unless installed).
    ///
    /// While both are still the API's no-ops (no SDK installed when the
    /// runtime is built), this is [`Telemetry::off`]: nothing could record,
    /// so the runtime does not map its runs to spans at all.
    pub fn global() -> Telemetry {
        let scope = scope();
        let tracer = global::tracer_provider().tracer_with_scope(scope.clone());
        let meters = global::meter_provider();
        if is_noop_meter_provider(&*meters) && is_noop_tracer(&tracer) {
            return Telemetry::off();
        }
        let meter = meters.meter_with_scope(scope);
        Telemetry::from_parts(tracer, &meter)
    }

    /// These providers (e.g. an SDK `SdkTracerProvider` and `SdkMeterProvider`).
    pub fn new<P, T, S, M>(tracer_provider: &P, meter_provider: &M) -> Telemetry
    where
        P: TracerProvider<Tracer = T>,
        T: opentelemetry::trace::Tracer<Span = S> + Send + Sync + 'static,
        S: opentelemetry::trace::Span + Send + Sync + 'static,
        M: MeterProvider,
    {
        let scope = scope();
        let tracer = BoxedTracer::new(Box::new(tracer_provider.tracer_with_scope(scope.clone())));
        let meter = meter_provider.meter_with_scope(scope);
        Telemetry::from_parts(tracer, &meter)
    }

    /// These providers, and a log record per dead-letter write through
    /// `logger_provider` (e.g. an SDK `SdkLoggerProvider`): event name
    /// `agent_recovery.dead_letter`, severity `WARN`, the full record as the
    /// body, in the step span's trace (docs/telemetry.md, "The dead-letter
    /// record"). The `opentelemetry` API has no global logger provider, so
    /// [`Telemetry::global`] and [`Telemetry::new`] emit no log records.
    pub fn with_logs<P, T, S, M, L>(
        tracer_provider: &P,
        meter_provider: &M,
        logger_provider: &L,
    ) -> Telemetry
    where
        P: TracerProvider<Tracer = T>,
        T: opentelemetry::trace::Tracer<Span = S> + Send + Sync + 'static,
        S: opentelemetry::trace::Span + Send + Sync + 'static,
        M: MeterProvider,
        L: LoggerProvider,
        L::Logger: Send + Sync + 'static,
    {
        let mut t = Telemetry::new(tracer_provider, meter_provider);
        if let Some(inner) = t.inner.as_mut().and_then(Arc::get_mut) {
            inner.log = Some(dead_letter_logger(logger_provider));
        }
        t
    }

    /// No spans, no metrics, no calls into OpenTelemetry at all.
    pub fn off() -> Telemetry {
        Telemetry { inner: None }
    }

    fn from_parts(tracer: BoxedTracer, meter: &Meter) -> Telemetry {
        Telemetry {
            inner: Some(Arc::new(Instruments {
                tracer,
                log: None,
                meter: meter.clone(),
                attempts: meter
                    .u64_counter("agent_recovery.attempts")
                    .with_unit("{attempt}")
                    .with_description("Calls made: operation, fallback and compensation attempts")
                    .build(),
                decisions: meter
                    .u64_counter("agent_recovery.decisions")
                    .with_unit("{decision}")
                    .with_description("Decisions on failures, by code and action")
                    .build(),
                retry_delay: meter
                    .u64_histogram("agent_recovery.retry.delay")
                    .with_unit("ms")
                    .with_description("Waits before the next call")
                    .build(),
                breaker: meter
                    .u64_counter("agent_recovery.breaker.transitions")
                    .with_unit("{transition}")
                    .with_description("Circuit breaker state changes, by target and new state")
                    .build(),
                short_circuits: meter
                    .u64_counter("agent_recovery.short_circuits")
                    .with_unit("{call}")
                    .with_description("Calls not made because the target's breaker was open")
                    .build(),
                dead_letters: meter
                    .u64_counter("agent_recovery.dead_letters")
                    .with_unit("{record}")
                    .with_description("Dead-letter records written, by code")
                    .build(),
                compensations: meter
                    .u64_counter("agent_recovery.compensations")
                    .with_unit("{compensation}")
                    .with_description("Compensations started, and those that still failed")
                    .build(),
                dead_letter_depth: meter
                    .u64_gauge("agent_recovery.dead_letter.depth")
                    .with_unit("{record}")
                    .with_description(
                        "Dead-letter records not yet closed (replayed successfully or purged)",
                    )
                    .build(),
                steps: meter
                    .u64_counter("agent_recovery.steps")
                    .with_unit("{step}")
                    .with_description("Steps and fan-outs ended, by outcome")
                    .build(),
            })),
        }
    }

    /// The meter, unless [`Telemetry::off`] (a policy handle's swap counter).
    pub(crate) fn meter(&self) -> Option<&Meter> {
        self.inner.as_deref().map(|i| &i.meter)
    }

    /// Does it record anything (not [`Telemetry::off`])?
    pub(super) fn is_on(&self) -> bool {
        self.inner.is_some()
    }

    /// This telemetry, for a runtime whose policy is `policy`.
    pub(super) fn bind(self, policy: PolicySource, looper: &Arc<LoopComponent>) -> Bound {
        Bound {
            inner: self.inner,
            policy: Arc::new(policy),
            looper: Arc::clone(looper),
        }
    }
}

/// Emits one log record (an `emit-log` instruction).
type LogEmitter = Box<dyn Fn(&LogLine<'_>) + Send + Sync>;

/// A log record to emit.
struct LogLine<'a> {
    event_name: &'a str,
    time_ms: u64,
    severity_number: u8,
    severity_text: &'a str,
    body: &'a str,
    attributes: Vec<KeyValue>,
    span: Option<SpanContext>,
}

fn dead_letter_logger<L>(provider: &L) -> LogEmitter
where
    L: LoggerProvider,
    L::Logger: Send + Sync + 'static,
{
    let logger = provider.logger_with_scope(scope());
    Box::new(move |l: &LogLine<'_>| {
        let mut r = logger.create_log_record();
        r.set_event_name(intern(l.event_name));
        r.set_timestamp(at(l.time_ms));
        r.set_severity_number(severity(l.severity_number));
        r.set_severity_text(intern(l.severity_text));
        r.set_body(AnyValue::String(l.body.to_owned().into()));
        for kv in &l.attributes {
            r.add_attribute(kv.key.clone(), any(&kv.value));
        }
        if let Some(sc) = l.span.as_ref().filter(|sc| sc.is_valid()) {
            r.set_trace_context(sc.trace_id(), sc.span_id(), Some(sc.trace_flags()));
        }
        logger.emit(r);
    })
}

/// An attribute's value as a log record's.
fn any(v: &Value) -> AnyValue {
    match v {
        Value::Bool(b) => AnyValue::Boolean(*b),
        Value::I64(n) => AnyValue::Int(*n),
        Value::F64(f) => AnyValue::Double(*f),
        other => AnyValue::String(other.as_str().into_owned().into()),
    }
}

/// The API takes `&'static str` event names and severity texts: the few the
/// mapping uses, and any other leaked once.
fn intern(s: &str) -> &'static str {
    match s {
        "agent_recovery.dead_letter" => "agent_recovery.dead_letter",
        "WARN" => "WARN",
        other => {
            static SEEN: Mutex<Vec<&'static str>> = Mutex::new(Vec::new());
            let mut seen = SEEN.lock().unwrap_or_else(PoisonError::into_inner);
            if let Some(s) = seen.iter().find(|s| **s == other) {
                return s;
            }
            let leaked: &'static str = Box::leak(other.to_owned().into_boxed_str());
            seen.push(leaked);
            leaked
        }
    }
}

/// A severity number of the log data model as the API's enum.
fn severity(n: u8) -> Severity {
    use Severity as S;
    const ALL: [Severity; 24] = [
        S::Trace,
        S::Trace2,
        S::Trace3,
        S::Trace4,
        S::Debug,
        S::Debug2,
        S::Debug3,
        S::Debug4,
        S::Info,
        S::Info2,
        S::Info3,
        S::Info4,
        S::Warn,
        S::Warn2,
        S::Warn3,
        S::Warn4,
        S::Error,
        S::Error2,
        S::Error3,
        S::Error4,
        S::Fatal,
        S::Fatal2,
        S::Fatal3,
        S::Fatal4,
    ];
    ALL[usize::from(n.clamp(1, 24) - 1)]
}

fn scope() -> InstrumentationScope {
    InstrumentationScope::builder(SCOPE_NAME)
        .with_version(env!("CARGO_PKG_VERSION"))
        .build()
}

struct Instruments {
    tracer: BoxedTracer,
    /// A log record per dead-letter write, when a logger provider was given.
    log: Option<LogEmitter>,
    /// For instruments made elsewhere (a policy handle's swap counter).
    meter: Meter,
    attempts: Counter<u64>,
    decisions: Counter<u64>,
    retry_delay: Histogram<u64>,
    breaker: Counter<u64>,
    short_circuits: Counter<u64>,
    dead_letters: Counter<u64>,
    compensations: Counter<u64>,
    dead_letter_depth: Gauge<u64>,
    steps: Counter<u64>,
}

/// Which policy decides, for the `agent_recovery.policy.*` attributes.
pub(super) enum PolicySource {
    /// Not known (a custom [`Decide`](crate::retry::Decide)).
    Unknown,
    /// One policy for the runtime's life.
    Fixed(PolicyId),
    /// The handle's active policy when asked (hot swaps show).
    Handle(PolicyHandle),
}

impl PolicySource {
    /// The identity of the policy that decides now, if known.
    fn identity(&self) -> Option<tele::PolicyIdentity> {
        let id = match self {
            PolicySource::Unknown => return None,
            PolicySource::Fixed(id) => Cow::Borrowed(id),
            PolicySource::Handle(h) => Cow::Owned((**h.active().id()).clone()),
        };
        Some(tele::PolicyIdentity {
            name: id.name.clone(),
            version: id.version.clone(),
            digest: id.sha256.clone(),
        })
    }
}

/// The runtime's telemetry, bound to its policy.
#[derive(Clone)]
pub(super) struct Bound {
    inner: Option<Arc<Instruments>>,
    policy: Arc<PolicySource>,
    /// The component whose `map-lane` maps a lane's observations.
    looper: Arc<LoopComponent>,
}

impl Bound {
    /// Does it record anything (not [`Telemetry::off`])?
    pub(super) fn is_on(&self) -> bool {
        self.inner.is_some()
    }

    /// Records the dead-letter stream's depth (the `agent_recovery.dead_letter.depth` gauge).
    pub(super) fn dead_letter_depth(&self, depth: u64) {
        if let Some(tel) = &self.inner {
            tel.dead_letter_depth.record(depth, &[]);
        }
    }
}

/// The run's telemetry: the span context of each step that ended `ok`, so a
/// compensation chain can link to the steps it undoes.
#[derive(Clone)]
pub(super) struct RunTel {
    bound: Bound,
    run_id: Arc<str>,
    done: Arc<Mutex<HashMap<String, SpanContext>>>,
}

impl RunTel {
    pub(super) fn new(bound: &Bound, run_id: &str) -> RunTel {
        RunTel {
            bound: bound.clone(),
            run_id: run_id.into(),
            done: Arc::default(),
        }
    }

    /// A lane whose spans are children of the current context (or of no span
    /// at all for a cancellation between steps, `what` = None).
    pub(super) fn lane(&self, what: Option<LaneSpan<'_>>, now_ms: u64) -> LaneTel {
        let parent = match self.bound.inner {
            Some(_) => Context::current(),
            None => Context::new(),
        };
        LaneTel::start(self.clone(), parent, what, now_ms)
    }
}

/// What a lane's own span stands for.
pub(super) enum LaneSpan<'s> {
    /// `agent_recovery.step`: id, tool, target.
    Step(&'s str, &'s str, Option<&'s str>),
    /// `agent_recovery.fanout`: id, min_results, number of branches.
    Fanout(&'s str, u32, usize),
}

/// One lane's telemetry: what the driver observed, mapped to instructions by
/// the component's `map-lane` (docs/telemetry.md, "The mapping"), and the
/// live spans those instructions name. Observations are kept until the lane
/// ends, forks or is dropped, then mapped in one call; every span and event
/// carries its own time, so nothing depends on when they are made.
pub(super) struct LaneTel {
    run: RunTel,
    /// The context the lane started in (a branch: its fan-out's span).
    ambient: Context,
    /// The lane's `map-lane` state.
    state: String,
    /// Observations not yet mapped.
    pending: Vec<tele::Observation>,
    /// The live spans, by key: lane, chain, attempt.
    live: [Option<Context>; 3],
    /// The clock at the last observation.
    last_ms: u64,
}

fn slot(key: tele::SpanKey) -> usize {
    match key {
        tele::SpanKey::Lane => 0,
        tele::SpanKey::Chain => 1,
        tele::SpanKey::Attempt => 2,
    }
}

fn at(ms: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_millis(ms)
}

fn attributes(attrs: Vec<tele::Attribute>) -> Vec<KeyValue> {
    attrs
        .into_iter()
        .map(|a| {
            let value = match a.value {
                tele::AttributeValue::Text(s) => Value::from(s),
                tele::AttributeValue::Int(n) => Value::I64(n),
                tele::AttributeValue::Float(f) => Value::F64(f),
                tele::AttributeValue::Flag(b) => Value::Bool(b),
            };
            KeyValue::new(a.key, value)
        })
        .collect()
}

impl LaneTel {
    fn start(run: RunTel, ambient: Context, what: Option<LaneSpan<'_>>, now_ms: u64) -> LaneTel {
        let mut lane = LaneTel {
            run,
            ambient,
            state: String::new(),
            pending: Vec::new(),
            live: [None, None, None],
            last_ms: now_ms,
        };
        if lane.run.bound.inner.is_none() {
            return lane;
        }
        let kind = match what {
            None => tele::LaneKind::Bare,
            Some(LaneSpan::Step(id, tool, target)) => tele::LaneKind::Step(tele::StepLane {
                id: id.to_owned(),
                tool: tool.to_owned(),
                target: target.map(str::to_owned),
            }),
            Some(LaneSpan::Fanout(id, min_results, branches)) => {
                tele::LaneKind::Fanout(tele::FanoutLane {
                    id: id.to_owned(),
                    min_results,
                    branches: u32::try_from(branches).unwrap_or(u32::MAX),
                })
            }
        };
        let start = tele::LaneStart {
            run_id: lane.run.run_id.to_string(),
            kind,
            policy: lane.run.bound.policy.identity(),
        };
        lane.observe(now_ms, tele::ObservationKind::Lane(start));
        lane
    }

    fn observe(&mut self, now_ms: u64, kind: tele::ObservationKind) {
        if self.run.bound.inner.is_some() {
            self.last_ms = now_ms;
            self.pending.push(tele::Observation { now_ms, kind });
        }
    }

    /// A branch of this lane's fan-out: its step span is a child of the
    /// fan-out span (map this lane first: [`LaneTel::flush`]).
    pub(super) fn branch(
        &self,
        id: &str,
        tool: &str,
        target: Option<&str>,
        now_ms: u64,
    ) -> LaneTel {
        let ambient = self.live[0].clone().unwrap_or_else(|| self.ambient.clone());
        LaneTel::start(
            self.run.clone(),
            ambient,
            Some(LaneSpan::Step(id, tool, target)),
            now_ms,
        )
    }

    /// A `call` effect starts now.
    pub(super) fn call_start(&mut self, call: &Call, now_ms: u64) {
        if self.run.bound.inner.is_none() {
            return;
        }
        let role = match call.kind.as_str() {
            "fallback" => CallRole::Fallback,
            "compensation" => CallRole::Compensation,
            _ => CallRole::Operation,
        };
        let c = tele::CallStart {
            role,
            step: call.step.clone(),
            target: call.target.clone(),
            key: call.key.clone(),
            attempt: call.attempt,
            timeout_ms: call.timeout_ms,
        };
        self.observe(now_ms, tele::ObservationKind::CallStart(c));
    }

    /// The call returned now; its span ends at this time once its `ok` or
    /// `decision` event says how it went.
    pub(super) fn call_end(&mut self, now_ms: u64) {
        self.observe(now_ms, tele::ObservationKind::CallEnd);
    }

    /// The active policy answered a `decide` effect with `decision` (JSON text).
    pub(super) fn decided(&mut self, decision: &str) {
        if self.run.bound.inner.is_none() {
            return;
        }
        let d = tele::Decided {
            decision: decision.to_owned(),
            policy: self.run.bound.policy.identity(),
        };
        self.observe(self.last_ms, tele::ObservationKind::Decided(d));
    }

    /// An `append` effect.
    pub(super) fn appended(&mut self, stream: &str, record: &str, now_ms: u64) {
        if self.run.bound.inner.is_none() {
            return;
        }
        let a = tele::Appended {
            stream: stream.to_owned(),
            record: record.to_owned(),
        };
        self.observe(now_ms, tele::ObservationKind::Append(a));
    }

    /// An event of the component (its JSON text).
    pub(super) fn event(&mut self, event: &str, now_ms: u64) {
        if self.run.bound.inner.is_none() {
            return;
        }
        self.observe(now_ms, tele::ObservationKind::Event(event.to_owned()));
    }

    /// The lane ended without a `finish` (the loop, the policy or the store
    /// failed, or a scenario killed the run): its open spans end now.
    pub(super) fn abandon(&mut self, now_ms: u64) {
        self.observe(now_ms, tele::ObservationKind::Abandon);
        self.flush();
    }

    /// The lane's `finish` effect: ends the open spans.
    pub(super) fn finish(&mut self, outcome: StepOutcome, envelope: Option<&str>, now_ms: u64) {
        let f = tele::Finished {
            outcome,
            envelope: envelope.map(str::to_owned),
        };
        self.observe(now_ms, tele::ObservationKind::Finish(f));
        self.flush();
    }

    /// Maps the observations kept so far and carries out the instructions.
    /// Telemetry never fails what it observes: a refusal maps nothing.
    pub(super) fn flush(&mut self) {
        let Some(tel) = self.run.bound.inner.clone() else {
            return;
        };
        if self.pending.is_empty() {
            return;
        }
        let mapped = self.run.bound.looper.map_lane(&self.state, &self.pending);
        self.pending.clear();
        let Ok((state, instructions)) = mapped else {
            return;
        };
        self.state = state;
        for i in instructions {
            self.apply(&tel, i);
        }
    }

    /// The live, recording span under `key`.
    fn recording(&self, key: tele::SpanKey) -> Option<&Context> {
        self.live[slot(key)]
            .as_ref()
            .filter(|cx| cx.span().is_recording())
    }

    /// Carries out one instruction (the rules are in
    /// `wit/agent-recovery@0.3.0/telemetry.wit`).
    fn apply(&mut self, tel: &Instruments, i: tele::Instruction) {
        use tele::Instruction as I;
        match i {
            I::StartSpan(s) => {
                let parent = match s.parent {
                    None => self.ambient.clone(),
                    Some(k) => match self.recording(k) {
                        Some(cx) => cx.clone(),
                        None => return,
                    },
                };
                let span = tel.tracer.build_with_context(
                    tel.tracer
                        .span_builder(s.name)
                        .with_kind(SpanKind::Internal)
                        .with_start_time(at(s.start_ms))
                        .with_attributes(attributes(s.attributes)),
                    &parent,
                );
                self.live[slot(s.key)] = Some(parent.with_span(span));
            }
            I::AddEvent(e) => {
                if let Some(cx) = self.recording(e.key) {
                    cx.span().add_event_with_timestamp(
                        e.name,
                        at(e.time_ms),
                        attributes(e.attributes),
                    );
                }
            }
            I::AddLink(l) => {
                let Some(cx) = &self.live[slot(l.key)] else {
                    return;
                };
                let linked = self
                    .run
                    .done
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .get(&l.step)
                    .cloned();
                if let Some(sc) = linked {
                    cx.span().add_link(sc, attributes(l.attributes));
                }
            }
            I::SetAttributes(a) => {
                if let Some(cx) = &self.live[slot(a.key)] {
                    cx.span().set_attributes(attributes(a.attributes));
                }
            }
            I::SetError(e) => {
                if let Some(cx) = &self.live[slot(e.key)] {
                    cx.span().set_status(Status::error(e.description));
                }
            }
            I::EndSpan(e) => {
                if let Some(cx) = self.live[slot(e.key)].take() {
                    cx.span().end_with_timestamp(at(e.end_ms));
                }
            }
            I::RememberStep(r) => {
                if let Some(cx) = &self.live[slot(r.key)] {
                    self.run
                        .done
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .insert(r.step, cx.span().span_context().clone());
                }
            }
            I::RecordMetric(m) => {
                let attrs = attributes(m.attributes);
                match m.instrument.as_str() {
                    "agent_recovery.attempts" => tel.attempts.add(m.value, &attrs),
                    "agent_recovery.decisions" => tel.decisions.add(m.value, &attrs),
                    "agent_recovery.retry.delay" => tel.retry_delay.record(m.value, &attrs),
                    "agent_recovery.breaker.transitions" => tel.breaker.add(m.value, &attrs),
                    "agent_recovery.short_circuits" => tel.short_circuits.add(m.value, &attrs),
                    "agent_recovery.dead_letters" => tel.dead_letters.add(m.value, &attrs),
                    "agent_recovery.compensations" => tel.compensations.add(m.value, &attrs),
                    "agent_recovery.steps" => tel.steps.add(m.value, &attrs),
                    "agent_recovery.dead_letter.depth" => {
                        tel.dead_letter_depth.record(m.value, &attrs);
                    }
                    _ => {}
                }
            }
            I::EmitLog(l) => {
                let Some(log) = &tel.log else {
                    return;
                };
                let cx = match l.key {
                    Some(k) => self.live[slot(k)].as_ref(),
                    None => Some(&self.ambient),
                };
                log(&LogLine {
                    event_name: &l.event_name,
                    time_ms: l.time_ms,
                    severity_number: l.severity_number,
                    severity_text: &l.severity_text,
                    body: &l.body,
                    attributes: attributes(l.attributes),
                    span: cx.map(|cx| cx.span().span_context().clone()),
                });
            }
        }
    }
}

impl Drop for LaneTel {
    /// A lane dropped before its end still maps what it observed.
    fn drop(&mut self) {
        self.flush();
    }
}
