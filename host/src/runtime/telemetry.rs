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

use opentelemetry::global::{self, BoxedTracer};
use opentelemetry::logs::{AnyValue, LogRecord as _, Logger as _, LoggerProvider, Severity};
use opentelemetry::metrics::{Counter, Gauge, Histogram, Meter, MeterProvider};
use opentelemetry::trace::{
    SpanContext, SpanKind, Status, TraceContextExt, Tracer as _, TracerProvider,
};
use opentelemetry::{Context, InstrumentationScope, KeyValue};
use serde::Deserialize;
use sha2::{Digest, Sha256};

use super::step::Call;
use crate::{PolicyHandle, PolicyId};

/// The instrumentation scope of every span and instrument.
pub const SCOPE_NAME: &str = "agent-recovery";

// The dead-letter stream's appends become `agent_recovery.dead_letter` span events.
use super::scenario::DEAD_LETTER_STREAM;

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
    pub fn global() -> Telemetry {
        let scope = scope();
        let tracer = global::tracer_provider().tracer_with_scope(scope.clone());
        let meter = global::meter_provider().meter_with_scope(scope);
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
    pub(super) fn bind(self, policy: PolicySource) -> Bound {
        Bound {
            inner: self.inner,
            policy: Arc::new(policy),
        }
    }
}

/// Emits the log record of one dead-letter write.
type DeadLetterLog = Box<dyn Fn(&DeadLetterLine<'_>) + Send + Sync>;

/// What the log record of a dead-letter write says.
struct DeadLetterLine<'a> {
    record: &'a str,
    code: Option<&'a str>,
    run_id: &'a str,
    step_id: Option<&'a str>,
    now_ms: u64,
    span: Option<SpanContext>,
}

fn dead_letter_logger<L>(provider: &L) -> DeadLetterLog
where
    L: LoggerProvider,
    L::Logger: Send + Sync + 'static,
{
    let logger = provider.logger_with_scope(scope());
    Box::new(move |l: &DeadLetterLine<'_>| {
        let mut r = logger.create_log_record();
        r.set_event_name("agent_recovery.dead_letter");
        r.set_timestamp(at(l.now_ms));
        r.set_severity_number(Severity::Warn);
        r.set_severity_text("WARN");
        r.set_body(AnyValue::String(l.record.to_owned().into()));
        r.add_attribute("agent_recovery.run.id", l.run_id.to_owned());
        if let Some(step) = l.step_id {
            r.add_attribute("agent_recovery.step.id", step.to_owned());
        }
        if let Some(code) = l.code {
            r.add_attribute("error.type", code.to_owned());
        }
        if let Some(sc) = l.span.as_ref().filter(|sc| sc.is_valid()) {
            r.set_trace_context(sc.trace_id(), sc.span_id(), Some(sc.trace_flags()));
        }
        logger.emit(r);
    })
}

fn scope() -> InstrumentationScope {
    InstrumentationScope::builder(SCOPE_NAME)
        .with_version(env!("CARGO_PKG_VERSION"))
        .build()
}

struct Instruments {
    tracer: BoxedTracer,
    /// A log record per dead-letter write, when a logger provider was given.
    log: Option<DeadLetterLog>,
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
    fn attributes(&self, out: &mut Vec<KeyValue>) {
        let id = match self {
            PolicySource::Unknown => return,
            PolicySource::Fixed(id) => Cow::Borrowed(id),
            PolicySource::Handle(h) => Cow::Owned((**h.active().id()).clone()),
        };
        out.push(KeyValue::new("agent_recovery.policy.name", id.name.clone()));
        out.push(KeyValue::new(
            "agent_recovery.policy.version",
            id.version.clone(),
        ));
        out.push(KeyValue::new(
            "agent_recovery.policy.sha256",
            id.sha256.clone(),
        ));
    }
}

/// The runtime's telemetry, bound to its policy.
#[derive(Clone)]
pub(super) struct Bound {
    inner: Option<Arc<Instruments>>,
    policy: Arc<PolicySource>,
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
        LaneTel::start(self.clone(), &parent, what, now_ms)
    }
}

/// What a lane's own span stands for.
pub(super) enum LaneSpan<'s> {
    /// `agent_recovery.step`: id, tool, target.
    Step(&'s str, &'s str, Option<&'s str>),
    /// `agent_recovery.fanout`: id, min_results, number of branches.
    Fanout(&'s str, u32, usize),
}

/// One lane's spans: the step (or fan-out) span, an open compensation chain,
/// and the attempt whose span waits for its `ok` or `decision` event.
pub(super) struct LaneTel {
    run: RunTel,
    /// The lane's step or fan-out span (the parent context when none).
    cx: Context,
    /// Is `cx`'s span the lane's own (never end or annotate the caller's)?
    own: bool,
    /// Are the lane's spans recorded? Not under a non-recording step span (the
    /// no-op providers, or sampled out): then no attempt or chain span is
    /// built, no key hashed, no decision parsed; the metrics still count.
    recording: bool,
    step_id: Option<String>,
    chain: Option<Chain>,
    attempt: Option<Pending>,
    /// `class` and `retryable` of the last decision's envelope.
    decided: Option<(String, Option<bool>)>,
}

struct Chain {
    cx: Context,
    started: i64,
    failed: i64,
}

struct Pending {
    /// The attempt span (none when the lane is not recording).
    cx: Option<Context>,
    end_ms: u64,
    kind: String,
}

/// An event of the component (docs/runtime.md, "Events").
#[derive(Deserialize)]
struct Ev<'a> {
    #[serde(borrow)]
    event: Cow<'a, str>,
    #[serde(borrow, default)]
    step: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    target: Option<Cow<'a, str>>,
    attempt: Option<u64>,
    #[serde(borrow, default)]
    call: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    key: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    action: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    code: Option<Cow<'a, str>>,
    delay_ms: Option<u64>,
    #[serde(borrow, default)]
    state: Option<Cow<'a, str>>,
}

impl Ev<'_> {
    /// The event's members as span-event attributes (the key only as its hash).
    fn attributes(&self) -> Vec<KeyValue> {
        let mut a = Vec::with_capacity(8);
        let s = |k: &'static str, v: &Option<Cow<'_, str>>, a: &mut Vec<KeyValue>| {
            if let Some(v) = v {
                a.push(KeyValue::new(k, v.to_string()));
            }
        };
        s("agent_recovery.step.id", &self.step, &mut a);
        s("agent_recovery.target", &self.target, &mut a);
        if let Some(n) = self.attempt {
            a.push(KeyValue::new("agent_recovery.attempt", int(n)));
        }
        s("agent_recovery.call.kind", &self.call, &mut a);
        if let Some(k) = &self.key {
            a.push(key_hash(k));
        }
        s("agent_recovery.action", &self.action, &mut a);
        s("error.type", &self.code, &mut a);
        if let Some(d) = self.delay_ms {
            a.push(KeyValue::new("agent_recovery.delay_ms", int(d)));
        }
        s("agent_recovery.state", &self.state, &mut a);
        a
    }
}

/// The part of a decision the attempt span reports.
#[derive(Deserialize)]
struct Decided<'a> {
    #[serde(borrow, default)]
    envelope: Option<Env<'a>>,
}

#[derive(Deserialize)]
struct Env<'a> {
    #[serde(borrow, default)]
    class: Option<Cow<'a, str>>,
    retryable: Option<bool>,
    #[serde(borrow, default)]
    code: Option<Cow<'a, str>>,
}

/// A dead-letter record's code.
#[derive(Deserialize)]
struct Record<'a> {
    #[serde(borrow, default)]
    last_envelope: Option<Env<'a>>,
}

fn at(ms: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_millis(ms)
}

fn int(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// `agent_recovery.idempotency_key.hash`: hex sha256 of the key, never the key.
fn key_hash(key: &str) -> KeyValue {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let digest = Sha256::digest(key.as_bytes());
    let mut hex = String::with_capacity(64);
    for b in digest {
        hex.push(char::from(HEX[usize::from(b >> 4)]));
        hex.push(char::from(HEX[usize::from(b & 0xf)]));
    }
    KeyValue::new("agent_recovery.idempotency_key.hash", hex)
}

/// Should the outcome mark the step span as an error?
fn is_error(outcome: &str) -> bool {
    matches!(outcome, "failed" | "escalated" | "dead_lettered")
}

impl LaneTel {
    fn start(run: RunTel, parent: &Context, what: Option<LaneSpan<'_>>, now_ms: u64) -> LaneTel {
        let mut lane = LaneTel {
            run,
            cx: parent.clone(),
            own: false,
            recording: true,
            step_id: None,
            chain: None,
            attempt: None,
            decided: None,
        };
        let (Some(tel), Some(what)) = (lane.run.bound.inner.clone(), what) else {
            return lane;
        };
        let mut attrs = vec![KeyValue::new(
            "agent_recovery.run.id",
            lane.run.run_id.to_string(),
        )];
        let name = match what {
            LaneSpan::Step(id, tool, target) => {
                lane.step_id = Some(id.to_owned());
                step_attrs(&mut attrs, id, tool, target.unwrap_or(tool));
                "agent_recovery.step"
            }
            LaneSpan::Fanout(id, min_results, branches) => {
                attrs.push(KeyValue::new("agent_recovery.step.id", id.to_owned()));
                attrs.push(KeyValue::new(
                    "agent_recovery.fanout.min_results",
                    i64::from(min_results),
                ));
                attrs.push(KeyValue::new(
                    "agent_recovery.fanout.branches",
                    i64::try_from(branches).unwrap_or(i64::MAX),
                ));
                "agent_recovery.fanout"
            }
        };
        lane.run.bound.policy.attributes(&mut attrs);
        let span = tel.tracer.build_with_context(
            tel.tracer
                .span_builder(name)
                .with_kind(SpanKind::Internal)
                .with_start_time(at(now_ms))
                .with_attributes(attrs),
            parent,
        );
        lane.cx = parent.with_span(span);
        lane.own = true;
        lane.recording = lane.cx.span().is_recording();
        lane
    }

    /// A branch of this lane's fan-out: its step span is a child of the fan-out span.
    pub(super) fn branch(
        &self,
        id: &str,
        tool: &str,
        target: Option<&str>,
        now_ms: u64,
    ) -> LaneTel {
        LaneTel::start(
            self.run.clone(),
            &self.cx,
            Some(LaneSpan::Step(id, tool, target)),
            now_ms,
        )
    }

    /// A `call` effect starts now.
    pub(super) fn call_start(&mut self, call: &Call, now_ms: u64) {
        let Some(tel) = self.run.bound.inner.clone() else {
            return;
        };
        self.end_attempt(&tel, None);
        if !self.recording {
            self.attempt = Some(Pending {
                cx: None,
                end_ms: now_ms,
                kind: call.kind.clone(),
            });
            return;
        }
        let parent = match (&self.chain, call.kind.as_str()) {
            (Some(chain), "compensation") => chain.cx.clone(),
            _ => self.cx.clone(),
        };
        let mut attrs = vec![
            KeyValue::new("agent_recovery.step.id", call.step.clone()),
            KeyValue::new("agent_recovery.target", call.target.clone()),
            KeyValue::new("agent_recovery.call.kind", call.kind.clone()),
            KeyValue::new("agent_recovery.attempt", i64::from(call.attempt)),
            key_hash(&call.key),
        ];
        if call.attempt > 1 {
            attrs.push(KeyValue::new(
                "http.request.resend_count",
                i64::from(call.attempt - 1),
            ));
        }
        if let Some(t) = call.timeout_ms {
            attrs.push(KeyValue::new("agent_recovery.timeout_ms", int(t)));
        }
        let span = tel.tracer.build_with_context(
            tel.tracer
                .span_builder("agent_recovery.attempt")
                .with_kind(SpanKind::Internal)
                .with_start_time(at(now_ms))
                .with_attributes(attrs),
            &parent,
        );
        self.attempt = Some(Pending {
            cx: Some(parent.with_span(span)),
            end_ms: now_ms,
            kind: call.kind.clone(),
        });
    }

    /// The call returned now; its span ends at this time once its `ok` or
    /// `decision` event says how it went.
    pub(super) fn call_end(&mut self, now_ms: u64) {
        if let Some(p) = &mut self.attempt {
            p.end_ms = now_ms;
        }
    }

    /// The active policy answered a `decide` effect with `decision` (JSON text).
    pub(super) fn decided(&mut self, decision: &str) {
        if self.run.bound.inner.is_none() || !self.recording {
            return;
        }
        self.decided = serde_json::from_str::<Decided>(decision)
            .ok()
            .and_then(|d| d.envelope)
            .map(|e| {
                (
                    e.class.map(|c| c.into_owned()).unwrap_or_default(),
                    e.retryable,
                )
            });
    }

    /// Ends the pending attempt span; `failure` is the decision event when it failed.
    fn end_attempt(&mut self, tel: &Instruments, failure: Option<&Ev<'_>>) {
        let Some(p) = self.attempt.take() else {
            return;
        };
        let mut metric = vec![KeyValue::new("agent_recovery.call.kind", p.kind)];
        if let Some(ev) = failure {
            let code = ev.code.as_deref().unwrap_or("");
            metric.push(KeyValue::new("error.type", code.to_owned()));
            if let Some(action) = &ev.action {
                metric.push(KeyValue::new("agent_recovery.action", action.to_string()));
            }
        }
        let Some(cx) = p.cx else {
            tel.attempts.add(1, &metric);
            return;
        };
        let span = cx.span();
        if let Some(ev) = failure {
            let code = ev.code.as_deref().unwrap_or("").to_owned();
            let mut attrs = vec![KeyValue::new("error.type", code.clone())];
            if let Some(action) = &ev.action {
                attrs.push(KeyValue::new("agent_recovery.action", action.to_string()));
            }
            if let Some(d) = ev.delay_ms {
                attrs.push(KeyValue::new("agent_recovery.delay_ms", int(d)));
            }
            if let Some((class, retryable)) = self.decided.take() {
                if !class.is_empty() {
                    attrs.push(KeyValue::new("agent_recovery.class", class));
                }
                if let Some(r) = retryable {
                    attrs.push(KeyValue::new("agent_recovery.retryable", r));
                }
                self.run.bound.policy.attributes(&mut attrs);
            }
            span.set_attributes(attrs);
            span.set_status(Status::error(code));
        }
        span.end_with_timestamp(at(p.end_ms));
        tel.attempts.add(1, &metric);
    }

    /// An `append` effect: a dead-letter record becomes a span event (and a
    /// log record when a logger provider was given).
    pub(super) fn appended(&mut self, stream: &str, record: &str, now_ms: u64) {
        let Some(tel) = self.run.bound.inner.clone() else {
            return;
        };
        if stream != DEAD_LETTER_STREAM {
            return;
        }
        let code = serde_json::from_str::<Record>(record)
            .ok()
            .and_then(|r| r.last_envelope)
            .and_then(|e| e.code);
        // On the step's own span (the chain's when there is none: a cancellation).
        let cx = match (&self.chain, self.own) {
            (_, true) => Some(&self.cx),
            (Some(c), false) => Some(&c.cx),
            (None, false) => None,
        };
        if let Some(log) = &tel.log {
            log(&DeadLetterLine {
                record,
                code: code.as_deref(),
                run_id: &self.run.run_id,
                step_id: self.step_id.as_deref(),
                now_ms,
                span: cx.map(|cx| cx.span().span_context().clone()),
            });
        }
        let Some(cx) = cx else {
            return;
        };
        let span = cx.span();
        if !span.is_recording() {
            return;
        }
        let mut attrs = vec![KeyValue::new(
            "agent_recovery.dead_letter.record",
            record.to_owned(),
        )];
        if let Some(code) = code {
            attrs.push(KeyValue::new("error.type", code.into_owned()));
        }
        span.add_event_with_timestamp("agent_recovery.dead_letter", at(now_ms), attrs);
    }

    /// An event of the component (its JSON text).
    pub(super) fn event(&mut self, event: &str, now_ms: u64) {
        let Some(tel) = self.run.bound.inner.clone() else {
            return;
        };
        let Ok(ev) = serde_json::from_str::<Ev>(event) else {
            return;
        };
        let code = || KeyValue::new("error.type", ev.code.as_deref().unwrap_or("").to_owned());
        let target = || {
            KeyValue::new(
                "agent_recovery.target",
                ev.target.as_deref().unwrap_or("").to_owned(),
            )
        };
        match ev.event.as_ref() {
            "attempt" | "outcome" | "fanout" => return,
            "ok" => {
                self.end_attempt(&tel, None);
                return;
            }
            "decision" => {
                let mut m = vec![code()];
                if let Some(a) = &ev.action {
                    m.push(KeyValue::new("agent_recovery.action", a.to_string()));
                }
                tel.decisions.add(1, &m);
                if self.attempt.is_some() {
                    self.end_attempt(&tel, Some(&ev));
                    return;
                }
            }
            "sleep" => tel
                .retry_delay
                .record(ev.delay_ms.unwrap_or(0), &[target()]),
            "breaker" => tel.breaker.add(
                1,
                &[
                    target(),
                    KeyValue::new(
                        "agent_recovery.breaker.state",
                        ev.state.as_deref().unwrap_or("").to_owned(),
                    ),
                ],
            ),
            "short_circuit" => tel.short_circuits.add(1, &[target()]),
            "dead_letter" => {
                tel.dead_letters.add(1, &[code()]);
                return;
            }
            "compensate" => {
                self.compensate(&tel, &ev, now_ms);
                return;
            }
            _ => {}
        }
        if let Some(span) = self.current() {
            span.add_event_with_timestamp(
                format!("agent_recovery.{}", ev.event),
                at(now_ms),
                ev.attributes(),
            );
        }
    }

    /// The span events go to: the open compensation chain, else the lane's span.
    fn current(&self) -> Option<opentelemetry::trace::SpanRef<'_>> {
        match &self.chain {
            Some(c) => Some(c.cx.span()),
            None if self.own => Some(self.cx.span()),
            None => None,
        }
        .filter(|s| s.is_recording())
    }

    fn compensate(&mut self, tel: &Instruments, ev: &Ev<'_>, now_ms: u64) {
        let failed = ev.state.as_deref() == Some("failed");
        tel.compensations.add(
            1,
            &[KeyValue::new(
                "agent_recovery.compensation.state",
                if failed { "failed" } else { "started" },
            )],
        );
        if !self.recording {
            return;
        }
        if self.chain.is_none() {
            let span = tel.tracer.build_with_context(
                tel.tracer
                    .span_builder("agent_recovery.compensation")
                    .with_kind(SpanKind::Internal)
                    .with_start_time(at(now_ms))
                    .with_attributes([KeyValue::new(
                        "agent_recovery.run.id",
                        self.run.run_id.to_string(),
                    )]),
                &self.cx,
            );
            self.chain = Some(Chain {
                cx: self.cx.with_span(span),
                started: 0,
                failed: 0,
            });
        }
        let Some(chain) = &mut self.chain else {
            return;
        };
        let span = chain.cx.span();
        if failed {
            chain.failed += 1;
        } else {
            chain.started += 1;
            let undone = ev.step.as_deref().unwrap_or("");
            let linked = self
                .run
                .done
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .get(undone)
                .cloned();
            if let Some(sc) = linked {
                span.add_link(
                    sc,
                    vec![KeyValue::new("agent_recovery.step.id", undone.to_owned())],
                );
            }
        }
        if span.is_recording() {
            span.add_event_with_timestamp("agent_recovery.compensate", at(now_ms), ev.attributes());
        }
    }

    /// The lane ended without a `finish` (the loop, the policy or the store
    /// failed, or a scenario killed the run): ends the open spans now, with
    /// no outcome and no metric: the attempt at the end of its call, the
    /// compensation chain and the lane's own span at `now_ms`.
    pub(super) fn abandon(&mut self, now_ms: u64) {
        if let Some(cx) = self
            .attempt
            .take()
            .and_then(|p| p.cx.map(|cx| (cx, p.end_ms)))
        {
            cx.0.span().end_with_timestamp(at(cx.1));
        }
        if let Some(chain) = self.chain.take() {
            chain.cx.span().end_with_timestamp(at(now_ms));
        }
        if self.own {
            self.own = false;
            self.cx.span().end_with_timestamp(at(now_ms));
        }
    }

    /// The lane's `finish` effect: ends the open spans.
    pub(super) fn finish(
        &mut self,
        outcome: &str,
        envelope: Option<&serde_json::Value>,
        now_ms: u64,
    ) {
        let Some(tel) = self.run.bound.inner.clone() else {
            return;
        };
        self.end_attempt(&tel, None);
        if let Some(chain) = self.chain.take() {
            let span = chain.cx.span();
            span.set_attributes([
                KeyValue::new("agent_recovery.compensation.count", chain.started),
                KeyValue::new("agent_recovery.compensation.failed", chain.failed),
            ]);
            if chain.failed > 0 {
                span.set_status(Status::error("agent_recovery.compensation_failed"));
            }
            span.end_with_timestamp(at(now_ms));
        }
        if !self.own {
            // A cancellation between steps: no step of its own to count or end.
            return;
        }
        tel.steps.add(
            1,
            &[KeyValue::new(
                "agent_recovery.step.outcome",
                outcome.to_owned(),
            )],
        );
        let span = self.cx.span();
        let code = envelope
            .and_then(|e| e.get("code"))
            .and_then(|c| c.as_str())
            .map(str::to_owned);
        span.set_attribute(KeyValue::new(
            "agent_recovery.step.outcome",
            outcome.to_owned(),
        ));
        if let Some(code) = &code
            && outcome != "ok"
        {
            span.set_attribute(KeyValue::new("error.type", code.clone()));
        }
        if is_error(outcome) {
            span.set_status(Status::error(code.unwrap_or_else(|| outcome.to_owned())));
        }
        if outcome == "ok"
            && let Some(id) = &self.step_id
        {
            self.run
                .done
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .insert(id.clone(), span.span_context().clone());
        }
        span.end_with_timestamp(at(now_ms));
    }
}

fn step_attrs(attrs: &mut Vec<KeyValue>, id: &str, tool: &str, target: &str) {
    attrs.push(KeyValue::new("agent_recovery.step.id", id.to_owned()));
    attrs.push(KeyValue::new("agent_recovery.tool", tool.to_owned()));
    attrs.push(KeyValue::new("agent_recovery.target", target.to_owned()));
}
