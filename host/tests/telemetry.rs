//! Telemetry through the real component, the real runtime and the real
//! OpenTelemetry SDK (its in-memory span and metric exporters).
//!
//! The expectations come from `docs/telemetry.md` (which span, which
//! attribute, which metric) and from the loop rules of `docs/runtime.md` with
//! the delays of `tests/vectors/tools/jitter.py` (seed 7, tool calls: 53, 152,
//! 3, 672 ms after attempts 1 to 4), as in the loop vector
//! `compensation-reverse-order`; nothing here was recorded from a run.

use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};

use agent_recovery::runtime::{Outcome, Runtime, Step, Telemetry, VirtualClock};
use opentelemetry::logs::{AnyValue, Severity};
use opentelemetry::trace::{SpanId, Status};
use opentelemetry::{KeyValue, Value};
use opentelemetry_sdk::logs::{InMemoryLogExporter, SdkLoggerProvider};
use opentelemetry_sdk::metrics::data::{AggregatedMetrics, MetricData, ResourceMetrics};
use opentelemetry_sdk::metrics::{InMemoryMetricExporter, PeriodicReader, SdkMeterProvider};
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider, SpanData};
use sha2::{Digest, Sha256};

const T0: u64 = 1_767_225_600_000;

struct Sdk {
    spans: InMemorySpanExporter,
    metrics: InMemoryMetricExporter,
    logs: InMemoryLogExporter,
    tracer: SdkTracerProvider,
    meter: SdkMeterProvider,
    logger: SdkLoggerProvider,
}

impl Sdk {
    fn new() -> Sdk {
        let spans = InMemorySpanExporter::default();
        let metrics = InMemoryMetricExporter::default();
        let tracer = SdkTracerProvider::builder()
            .with_simple_exporter(spans.clone())
            .build();
        let meter = SdkMeterProvider::builder()
            .with_reader(PeriodicReader::builder(metrics.clone()).build())
            .build();
        let logs = InMemoryLogExporter::default();
        let logger = SdkLoggerProvider::builder()
            .with_simple_exporter(logs.clone())
            .build();
        Sdk {
            spans,
            metrics,
            logs,
            tracer,
            meter,
            logger,
        }
    }

    fn telemetry(&self) -> Telemetry {
        Telemetry::with_logs(&self.tracer, &self.meter, &self.logger)
    }

    fn spans(&self) -> Vec<SpanData> {
        self.tracer.force_flush().unwrap();
        self.spans.get_finished_spans().unwrap()
    }

    fn metrics(&self) -> ResourceMetrics {
        self.meter.force_flush().unwrap();
        let mut all = self.metrics.get_finished_metrics().unwrap();
        all.pop().expect("one collection")
    }
}

fn attr<'a>(attrs: &'a [KeyValue], key: &str) -> Option<&'a Value> {
    attrs
        .iter()
        .find(|kv| kv.key.as_str() == key)
        .map(|kv| &kv.value)
}

fn s(span: &SpanData, key: &str) -> Option<String> {
    attr(&span.attributes, key).map(|v| v.as_str().into_owned())
}

fn i(span: &SpanData, key: &str) -> Option<i64> {
    match attr(&span.attributes, key) {
        Some(Value::I64(n)) => Some(*n),
        _ => None,
    }
}

fn at(ms: u64) -> std::time::SystemTime {
    UNIX_EPOCH + Duration::from_millis(ms)
}

fn sha256_hex(text: &str) -> String {
    Sha256::digest(text.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The data points of a counter as (sorted attributes, value).
fn counter(rm: &ResourceMetrics, name: &str) -> Vec<(Vec<(String, String)>, u64)> {
    let mut out = Vec::new();
    for sm in rm.scope_metrics() {
        for m in sm.metrics().filter(|m| m.name() == name) {
            let AggregatedMetrics::U64(MetricData::Sum(sum)) = m.data() else {
                panic!("{name} is not a u64 sum");
            };
            for dp in sum.data_points() {
                let mut attrs: Vec<(String, String)> = dp
                    .attributes()
                    .map(|kv| (kv.key.to_string(), kv.value.as_str().into_owned()))
                    .collect();
                attrs.sort();
                out.push((attrs, dp.value()));
            }
        }
    }
    out.sort();
    out
}

/// The values of a u64 gauge's data points (no attributes expected).
fn gauge(rm: &ResourceMetrics, name: &str) -> Vec<u64> {
    let mut out = Vec::new();
    for sm in rm.scope_metrics() {
        for m in sm.metrics().filter(|m| m.name() == name) {
            assert_eq!(m.unit(), "{record}");
            let AggregatedMetrics::U64(MetricData::Gauge(g)) = m.data() else {
                panic!("{name} is not a u64 gauge");
            };
            for dp in g.data_points() {
                assert_eq!(dp.attributes().count(), 0, "{name} has no attributes");
                out.push(dp.value());
            }
        }
    }
    out
}

fn pairs(p: &[(&str, &str)]) -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = p
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    v.sort();
    v
}

const QUOTA: &str = r#"{"source":"http","status":429,"body":{"error":{"message":"You exceeded your current quota, please check your plan and billing details.","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}}"#;
const UNAVAILABLE: &str = r#"{"source":"http","status":503}"#;

/// Retries, a fallback, a compensation and a dead-letter write: step
/// `answer` (quota refusal on `openai`, fallback `anthropic` succeeds, has a
/// compensation), then `ship` (503 five times: four retries, then compensate
/// `answer`, then dead-letter).
#[test]
fn retries_fallback_compensation_dead_letter() {
    let sdk = Sdk::new();
    let clock = Arc::new(VirtualClock::new(T0));
    let runtime = Runtime::builder()
        .clock(clock.clone())
        .seed(7)
        .breaker(10, 30_000)
        .telemetry(sdk.telemetry())
        .build()
        .unwrap();
    let mut run = runtime.run("r-otel").unwrap();
    let answer = run
        .step(
            Step::new("answer", "llm.chat", |call| match call.target.as_str() {
                "openai" => Outcome::Response(QUOTA.into()),
                _ => Outcome::Ok(serde_json::json!({"text": "hi"})),
            })
            .call("llm")
            .target("openai")
            .fallbacks(&["anthropic"])
            .side_effect(true)
            .compensate(|_| Outcome::Ok(serde_json::Value::Null)),
        )
        .unwrap();
    assert_eq!(answer.outcome, "ok");
    let ship = run
        .step(
            Step::new("ship", "shipping.create", |_| {
                Outcome::Response(UNAVAILABLE.into())
            })
            .call("tool")
            .target("ship"),
        )
        .unwrap();
    assert_eq!(ship.outcome, "dead_lettered");

    let spans = sdk.spans();
    let named = |n: &str| -> Vec<&SpanData> { spans.iter().filter(|s| s.name == n).collect() };
    let steps = named("agent_recovery.step");
    let attempts = named("agent_recovery.attempt");
    let chains = named("agent_recovery.compensation");
    assert_eq!((steps.len(), attempts.len(), chains.len()), (2, 8, 1));
    assert_eq!(spans.len(), 11, "no other span");

    let step = |id: &str| {
        *steps
            .iter()
            .find(|s| {
                s.attributes.iter().any(|kv| {
                    kv.key.as_str() == "agent_recovery.step.id" && kv.value.as_str() == id
                })
            })
            .unwrap()
    };
    let (answer_span, ship_span) = (step("answer"), step("ship"));
    assert_eq!(
        s(answer_span, "agent_recovery.step.outcome").as_deref(),
        Some("ok")
    );
    assert_eq!(
        s(answer_span, "agent_recovery.tool").as_deref(),
        Some("llm.chat")
    );
    assert_eq!(
        s(answer_span, "agent_recovery.run.id").as_deref(),
        Some("r-otel")
    );
    assert_eq!(
        s(answer_span, "agent_recovery.policy.name").as_deref(),
        Some("agent-recovery-reference")
    );
    assert_eq!(
        s(answer_span, "agent_recovery.policy.sha256").map(|h| h.len()),
        Some(64)
    );
    assert_eq!(answer_span.status, Status::Unset);
    assert_eq!(
        s(ship_span, "agent_recovery.step.outcome").as_deref(),
        Some("dead_lettered")
    );
    assert_eq!(
        s(ship_span, "error.type").as_deref(),
        Some("tool.http.503_unavailable")
    );
    assert!(matches!(ship_span.status, Status::Error { .. }));
    // Both steps are roots of the same kind: no current span, so no parent.
    assert_eq!(answer_span.parent_span_id, SpanId::INVALID);
    // The virtual clock: `answer` at T0 with no wait, `ship` from T0 to T0+880.
    assert_eq!(
        (answer_span.start_time, answer_span.end_time),
        (at(T0), at(T0))
    );
    assert_eq!(
        (ship_span.start_time, ship_span.end_time),
        (at(T0), at(T0 + 880))
    );

    // The fallback: attempt 1 on openai fails (quota: action fallback),
    // attempt 2 (same key) on anthropic succeeds.
    let children = |parent: &SpanData| -> Vec<&SpanData> {
        let mut v: Vec<&SpanData> = attempts
            .iter()
            .copied()
            .filter(|a| a.parent_span_id == parent.span_context.span_id())
            .collect();
        v.sort_by_key(|a| (a.start_time, i(a, "agent_recovery.attempt")));
        v
    };
    let a = children(answer_span);
    assert_eq!(a.len(), 2);
    assert_eq!(
        s(a[0], "agent_recovery.call.kind").as_deref(),
        Some("operation")
    );
    assert_eq!(s(a[0], "agent_recovery.target").as_deref(), Some("openai"));
    assert_eq!(i(a[0], "agent_recovery.attempt"), Some(1));
    assert_eq!(
        s(a[0], "error.type").as_deref(),
        Some("llm.quota.exhausted")
    );
    assert_eq!(
        s(a[0], "agent_recovery.action").as_deref(),
        Some("fallback")
    );
    assert_eq!(s(a[0], "agent_recovery.class").as_deref(), Some("policy"));
    assert_eq!(
        attr(&a[0].attributes, "agent_recovery.retryable"),
        Some(&Value::Bool(false))
    );
    assert_eq!(i(a[0], "http.request.resend_count"), None, "not a resend");
    assert!(matches!(a[0].status, Status::Error { .. }));
    assert_eq!(
        s(a[1], "agent_recovery.call.kind").as_deref(),
        Some("fallback")
    );
    assert_eq!(
        s(a[1], "agent_recovery.target").as_deref(),
        Some("anthropic")
    );
    assert_eq!(i(a[1], "agent_recovery.attempt"), Some(2));
    assert_eq!(i(a[1], "http.request.resend_count"), Some(1));
    assert_eq!(s(a[1], "error.type"), None);
    assert_eq!(a[1].status, Status::Unset);
    let key = s(a[0], "agent_recovery.idempotency_key.hash").unwrap();
    assert_eq!(key.len(), 64);
    assert_eq!(
        s(a[1], "agent_recovery.idempotency_key.hash").as_deref(),
        Some(key.as_str())
    );

    // The retries: five attempts of `ship`, 503 each, four `retry` with the
    // seed-7 delays, then `compensate`; each starts after the previous wait.
    let sh = children(ship_span);
    assert_eq!(sh.len(), 5);
    let starts = [0, 53, 205, 208, 880];
    let delays = [Some(53), Some(152), Some(3), Some(672), None];
    for (n, span) in sh.iter().enumerate() {
        let attempt = i64::try_from(n).unwrap() + 1;
        assert_eq!(i(span, "agent_recovery.attempt"), Some(attempt));
        assert_eq!(
            s(span, "error.type").as_deref(),
            Some("tool.http.503_unavailable")
        );
        assert_eq!(
            s(span, "agent_recovery.class").as_deref(),
            Some("transient")
        );
        assert_eq!(
            attr(&span.attributes, "agent_recovery.retryable"),
            Some(&Value::Bool(true))
        );
        assert_eq!(
            i(span, "http.request.resend_count"),
            (attempt > 1).then_some(attempt - 1)
        );
        assert_eq!(i(span, "agent_recovery.delay_ms"), delays[n]);
        assert_eq!(span.start_time, at(T0 + starts[n]));
        let action = if n < 4 { "retry" } else { "compensate" };
        assert_eq!(s(span, "agent_recovery.action").as_deref(), Some(action));
    }
    // The key's hash, never the key: the key is sha256 of the canonical JSON
    // of [run_id, step_id, tool, args] (docs/envelope-and-decision.md), so the attribute is its sha256.
    let ship_key = sha256_hex(r#"["r-otel","ship","shipping.create",null]"#);
    assert_eq!(
        s(sh[0], "agent_recovery.idempotency_key.hash"),
        Some(sha256_hex(&ship_key))
    );

    // The compensation chain: a child of `ship`, linked to `answer`, with
    // the compensation call as its child.
    let chain = chains[0];
    assert_eq!(chain.parent_span_id, ship_span.span_context.span_id());
    assert_eq!(chain.links.links.len(), 1);
    assert_eq!(chain.links.links[0].span_context, answer_span.span_context);
    assert_eq!(i(chain, "agent_recovery.compensation.count"), Some(1));
    assert_eq!(i(chain, "agent_recovery.compensation.failed"), Some(0));
    let comp = children(chain);
    assert_eq!(comp.len(), 1);
    assert_eq!(
        s(comp[0], "agent_recovery.call.kind").as_deref(),
        Some("compensation")
    );
    assert_eq!(
        s(comp[0], "agent_recovery.step.id").as_deref(),
        Some("answer")
    );
    assert_eq!(i(comp[0], "agent_recovery.attempt"), Some(1));
    assert_eq!(comp[0].start_time, at(T0 + 880));

    // The dead-letter record, in full, as a span event of `ship`.
    let dl: Vec<_> = ship_span
        .events
        .events
        .iter()
        .filter(|e| e.name == "agent_recovery.dead_letter")
        .collect();
    assert_eq!(dl.len(), 1);
    let record = attr(&dl[0].attributes, "agent_recovery.dead_letter.record")
        .unwrap()
        .as_str();
    let record: serde_json::Value = serde_json::from_str(&record).unwrap();
    assert_eq!(record["step_id"], "ship");
    assert_eq!(record["attempts"], 5);
    assert_eq!(record["compensations"][0]["step"], "answer");
    assert_eq!(
        attr(&dl[0].attributes, "error.type")
            .map(|v| v.as_str().into_owned())
            .as_deref(),
        Some("tool.http.503_unavailable")
    );
    assert_eq!(dl[0].timestamp, at(T0 + 880));

    // And one log record for it, with the same record as its body, in the
    // `ship` span's trace (docs/telemetry.md, "The dead-letter record").
    let logs = sdk.logs.get_emitted_logs().unwrap();
    assert_eq!(logs.len(), 1, "one log record per dead-letter write");
    let log = &logs[0].record;
    assert_eq!(logs[0].instrumentation.name(), "agent-recovery");
    assert_eq!(log.event_name(), Some("agent_recovery.dead_letter"));
    assert_eq!(log.severity_number(), Some(Severity::Warn));
    assert_eq!(log.severity_text(), Some("WARN"));
    assert_eq!(log.timestamp(), Some(at(T0 + 880)));
    let Some(AnyValue::String(body)) = log.body() else {
        panic!("the body is the record's JSON text, got {:?}", log.body());
    };
    let body: serde_json::Value = serde_json::from_str(body.as_str()).unwrap();
    assert_eq!(
        body, record,
        "the body is the record the span event carries"
    );
    let log_attrs: Vec<(String, String)> = log
        .attributes_iter()
        .map(|(k, v)| match v {
            AnyValue::String(s) => (k.to_string(), s.as_str().to_owned()),
            other => panic!("{k}: {other:?}"),
        })
        .collect();
    assert_eq!(
        log_attrs,
        vec![
            ("agent_recovery.run.id".into(), "r-otel".into()),
            ("agent_recovery.step.id".into(), "ship".into()),
            ("error.type".into(), "tool.http.503_unavailable".into()),
        ]
    );
    let tc = log.trace_context().expect("in the step's trace");
    assert_eq!(
        (tc.trace_id, tc.span_id),
        (
            ship_span.span_context.trace_id(),
            ship_span.span_context.span_id()
        )
    );

    // Metrics.
    let rm = sdk.metrics();
    let op503 = |action| {
        pairs(&[
            ("agent_recovery.call.kind", "operation"),
            ("error.type", "tool.http.503_unavailable"),
            ("agent_recovery.action", action),
        ])
    };
    let mut expected = vec![
        (
            pairs(&[
                ("agent_recovery.call.kind", "operation"),
                ("error.type", "llm.quota.exhausted"),
                ("agent_recovery.action", "fallback"),
            ]),
            1,
        ),
        (pairs(&[("agent_recovery.call.kind", "fallback")]), 1),
        (op503("retry"), 4),
        (op503("compensate"), 1),
        (pairs(&[("agent_recovery.call.kind", "compensation")]), 1),
    ];
    expected.sort();
    assert_eq!(counter(&rm, "agent_recovery.attempts"), expected);
    let mut expected = vec![
        (
            pairs(&[
                ("error.type", "llm.quota.exhausted"),
                ("agent_recovery.action", "fallback"),
            ]),
            1,
        ),
        (
            pairs(&[
                ("error.type", "tool.http.503_unavailable"),
                ("agent_recovery.action", "retry"),
            ]),
            4,
        ),
        (
            pairs(&[
                ("error.type", "tool.http.503_unavailable"),
                ("agent_recovery.action", "compensate"),
            ]),
            1,
        ),
    ];
    expected.sort();
    assert_eq!(counter(&rm, "agent_recovery.decisions"), expected);
    assert_eq!(
        counter(&rm, "agent_recovery.dead_letters"),
        vec![(pairs(&[("error.type", "tool.http.503_unavailable")]), 1)]
    );
    assert_eq!(
        counter(&rm, "agent_recovery.compensations"),
        vec![(
            pairs(&[("agent_recovery.compensation.state", "started")]),
            1
        )]
    );
    let mut expected = vec![
        (pairs(&[("agent_recovery.step.outcome", "ok")]), 1),
        (
            pairs(&[("agent_recovery.step.outcome", "dead_lettered")]),
            1,
        ),
    ];
    expected.sort();
    assert_eq!(counter(&rm, "agent_recovery.steps"), expected);
    // The quota refusal the step fell back from opened openai's breaker (a sticky fallback).
    assert_eq!(
        counter(&rm, "agent_recovery.breaker.transitions"),
        vec![(
            pairs(&[
                ("agent_recovery.breaker.state", "open"),
                ("agent_recovery.target", "openai"),
            ]),
            1
        )]
    );
    // One record written, none closed yet: the depth is 1.
    assert_eq!(gauge(&rm, "agent_recovery.dead_letter.depth"), vec![1]);
    // Purging it closes it: the gauge is recorded again, at 0.
    let dl = runtime.dead_letters();
    let items = dl.list(&Default::default()).unwrap();
    assert_eq!(items.len(), 1);
    dl.purge(&items[0].id).unwrap();
    assert_eq!(
        gauge(&sdk.metrics(), "agent_recovery.dead_letter.depth"),
        vec![0]
    );
    // The retry waits: 53 + 152 + 3 + 672 ms.
    let delay = rm
        .scope_metrics()
        .flat_map(|sm| sm.metrics())
        .find(|m| m.name() == "agent_recovery.retry.delay")
        .expect("retry delay histogram");
    assert_eq!(delay.unit(), "ms");
    let AggregatedMetrics::U64(MetricData::Histogram(h)) = delay.data() else {
        panic!("retry delay is not a u64 histogram");
    };
    let dp: Vec<_> = h.data_points().collect();
    assert_eq!(dp.len(), 1);
    assert_eq!(
        (dp[0].count(), dp[0].sum(), dp[0].min(), dp[0].max()),
        (4, 880, Some(3), Some(672))
    );
}

/// A fan-out span with its branches' step spans as children; a breaker that
/// opens shows as a transition and the next call as a short-circuit.
#[test]
fn fanout_breaker_and_short_circuit() {
    let sdk = Sdk::new();
    let clock = Arc::new(VirtualClock::new(T0));
    let runtime = Runtime::builder()
        .clock(clock.clone())
        .seed(7)
        .breaker(1, 30_000)
        .telemetry(sdk.telemetry())
        .build()
        .unwrap();
    let mut run = runtime.run("r-fan").unwrap();
    let report = run
        .fanout(
            "quotes",
            1,
            vec![
                Step::new("q-a", "quote", |_| Outcome::Ok(serde_json::json!(1))).target("a"),
                Step::new("q-b", "quote", |_| Outcome::Ok(serde_json::json!(2))).target("b"),
            ],
        )
        .unwrap();
    assert_eq!(report.outcome, "ok");
    // One transient failure opens `flaky` (threshold 1); the retry finds it open.
    let report = run
        .step(
            Step::new("poll", "status", |_| Outcome::Response(UNAVAILABLE.into()))
                .call("tool")
                .target("flaky"),
        )
        .unwrap();
    assert_ne!(report.outcome, "ok");

    let spans = sdk.spans();
    let fan: Vec<_> = spans
        .iter()
        .filter(|s| s.name == "agent_recovery.fanout")
        .collect();
    assert_eq!(fan.len(), 1);
    assert_eq!(i(fan[0], "agent_recovery.fanout.min_results"), Some(1));
    assert_eq!(i(fan[0], "agent_recovery.fanout.branches"), Some(2));
    assert_eq!(
        s(fan[0], "agent_recovery.step.outcome").as_deref(),
        Some("ok")
    );
    let mut branches: Vec<String> = spans
        .iter()
        .filter(|s| {
            s.name == "agent_recovery.step" && s.parent_span_id == fan[0].span_context.span_id()
        })
        .map(|s| {
            s.attributes
                .iter()
                .find(|kv| kv.key.as_str() == "agent_recovery.step.id")
                .unwrap()
                .value
                .as_str()
                .into_owned()
        })
        .collect();
    branches.sort();
    assert_eq!(branches, ["q-a", "q-b"]);
    // Every branch step span is in the fan-out's trace.
    assert!(
        spans
            .iter()
            .filter(|s| s.name == "agent_recovery.step"
                && s.parent_span_id == fan[0].span_context.span_id())
            .all(|s| s.span_context.trace_id() == fan[0].span_context.trace_id())
    );

    let rm = sdk.metrics();
    // The retry finds `flaky` open and, with on_open "fail" (the default), the
    // step ends at once (docs/fallbacks-and-breakers.md): one opening, no probe.
    let transitions = counter(&rm, "agent_recovery.breaker.transitions");
    let count = |state: &str| {
        transitions
            .iter()
            .find(|(a, _)| {
                a == &pairs(&[
                    ("agent_recovery.target", "flaky"),
                    ("agent_recovery.breaker.state", state),
                ])
            })
            .map_or(0, |(_, n)| *n)
    };
    assert_eq!(count("open"), 1, "{transitions:?}");
    assert_eq!(count("half_open"), 0, "{transitions:?}");
    assert_eq!(transitions.len(), 1, "only open: {transitions:?}");
    // While open, the calls were short-circuited, and only on `flaky`.
    let shorts = counter(&rm, "agent_recovery.short_circuits");
    assert_eq!(shorts.len(), 1, "{shorts:?}");
    assert_eq!(shorts[0].0, pairs(&[("agent_recovery.target", "flaky")]));
    assert!(shorts[0].1 >= 1);
    // The breaker event is on the step span as `agent_recovery.breaker`.
    let poll = spans
        .iter()
        .find(|s| {
            s.name == "agent_recovery.step"
                && s.attributes.iter().any(|kv| kv.value.as_str() == "poll")
        })
        .unwrap();
    assert!(
        poll.events
            .events
            .iter()
            .any(|e| e.name == "agent_recovery.breaker")
    );
    assert!(
        poll.events
            .events
            .iter()
            .any(|e| e.name == "agent_recovery.short_circuit")
    );
}

/// `Telemetry::off()` and the default (no-op global providers) change nothing
/// in what the run does.
#[test]
fn off_and_noop_global_give_the_same_events() {
    let events = |t: Option<Telemetry>| {
        let clock = Arc::new(VirtualClock::new(T0));
        let mut b = Runtime::builder().clock(clock).seed(7);
        if let Some(t) = t {
            b = b.telemetry(t);
        }
        let runtime = b.build().unwrap();
        let mut run = runtime.run("r").unwrap();
        let mut n = 0;
        run.step(Step::new("s", "t", move |_| {
            n += 1;
            if n < 3 {
                Outcome::Response(UNAVAILABLE.into())
            } else {
                Outcome::Ok(serde_json::Value::Null)
            }
        }))
        .unwrap();
        run.events().to_vec()
    };
    let off = events(Some(Telemetry::off()));
    assert_eq!(off, events(None));
    // 3 attempts, 2 decisions, 2 sleeps, ok, outcome.
    assert_eq!(off.len(), 9, "{off:?}");
}

/// A cancellation between steps: its compensation chain has no step span of
/// its own (no current context here, so it is a root), links the step it
/// undoes, holds the compensation call, and is no step in the metrics.
#[test]
fn cancel_between_steps_is_a_linked_compensation_chain() {
    let sdk = Sdk::new();
    let clock = Arc::new(VirtualClock::new(T0));
    let runtime = Runtime::builder()
        .clock(clock)
        .seed(7)
        .telemetry(sdk.telemetry())
        .build()
        .unwrap();
    let mut run = runtime.run("r-cancel").unwrap();
    let report = run
        .step(
            Step::new("reserve", "inventory.reserve", |_| {
                Outcome::Ok(serde_json::Value::Null)
            })
            .side_effect(true)
            .compensate(|_| Outcome::Ok(serde_json::Value::Null)),
        )
        .unwrap();
    assert_eq!(report.outcome, "ok");
    assert_eq!(run.cancel().unwrap().outcome, "cancelled");

    let spans = sdk.spans();
    let step: Vec<_> = spans
        .iter()
        .filter(|s| s.name == "agent_recovery.step")
        .collect();
    let chain: Vec<_> = spans
        .iter()
        .filter(|s| s.name == "agent_recovery.compensation")
        .collect();
    assert_eq!((step.len(), chain.len()), (1, 1));
    assert_eq!(chain[0].parent_span_id, SpanId::INVALID);
    assert_eq!(chain[0].links.links.len(), 1);
    assert_eq!(chain[0].links.links[0].span_context, step[0].span_context);
    assert_eq!(i(chain[0], "agent_recovery.compensation.count"), Some(1));
    let comp: Vec<_> = spans
        .iter()
        .filter(|s| {
            s.name == "agent_recovery.attempt"
                && s.parent_span_id == chain[0].span_context.span_id()
        })
        .collect();
    assert_eq!(comp.len(), 1);
    assert_eq!(
        s(comp[0], "agent_recovery.call.kind").as_deref(),
        Some("compensation")
    );
    assert_eq!(
        s(comp[0], "agent_recovery.step.id").as_deref(),
        Some("reserve")
    );

    let rm = sdk.metrics();
    assert_eq!(
        counter(&rm, "agent_recovery.steps"),
        vec![(pairs(&[("agent_recovery.step.outcome", "ok")]), 1)]
    );
    assert_eq!(
        counter(&rm, "agent_recovery.compensations"),
        vec![(
            pairs(&[("agent_recovery.compensation.state", "started")]),
            1
        )]
    );
}
