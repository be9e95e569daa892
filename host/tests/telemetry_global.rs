//! `Telemetry::global()` reads the global OpenTelemetry providers when a
//! runtime is built: while both are the API's no-ops it maps nothing (as
//! `Telemetry::off()`), and as soon as an SDK's tracer or meter provider is
//! installed it records through it. A process of its own, because it
//! installs global providers.

use std::sync::Arc;

use agent_recovery::runtime::{Call, Outcome, Runtime, Step, Telemetry, VirtualClock};
use agent_recovery::store::MemoryStore;
use opentelemetry::global;
use opentelemetry::metrics::noop::NoopMeterProvider;
use opentelemetry::trace::noop::NoopTracerProvider;
use opentelemetry_sdk::metrics::data::ResourceMetrics;
use opentelemetry_sdk::metrics::{InMemoryMetricExporter, PeriodicReader, SdkMeterProvider};
use opentelemetry_sdk::trace::{InMemorySpanExporter, Sampler, SdkTracerProvider};
use serde_json::Value;

fn records(t: &Telemetry) -> bool {
    format!("{t:?}").contains("on: true")
}

/// One successful one-step run on a runtime built now with `Telemetry::global()`.
fn one_step() {
    let runtime = Runtime::builder()
        .clock(Arc::new(VirtualClock::new(1_767_225_600_000)))
        .store(Arc::new(MemoryStore::new()))
        .telemetry(Telemetry::global())
        .build()
        .expect("runtime");
    let mut run = runtime.run("r").expect("run");
    let out = run
        .step(Step::new("s", "quote", |_: &Call| Outcome::Ok(Value::Null)))
        .expect("step");
    assert_eq!(out.outcome, "ok");
}

fn tracer_sdk(sampler: Sampler) -> (SdkTracerProvider, InMemorySpanExporter) {
    let spans = InMemorySpanExporter::default();
    let provider = SdkTracerProvider::builder()
        .with_sampler(sampler)
        .with_simple_exporter(spans.clone())
        .build();
    (provider, spans)
}

fn span_names(spans: &InMemorySpanExporter) -> Vec<String> {
    let mut names: Vec<String> = spans
        .get_finished_spans()
        .expect("spans")
        .iter()
        .map(|s| s.name.to_string())
        .collect();
    names.sort();
    names
}

#[test]
fn global_records_only_once_an_sdk_is_installed() {
    // Nothing installed: the API's no-ops, so nothing is mapped.
    assert!(!records(&Telemetry::global()));
    one_step();

    // An SDK tracer (its default sampler, parent-based): on, and the probe
    // that told it from the no-op tracer is not exported.
    let (provider, spans) = tracer_sdk(Sampler::ParentBased(Box::new(Sampler::AlwaysOn)));
    global::set_tracer_provider(provider.clone());
    assert!(records(&Telemetry::global()));
    one_step();
    let names = span_names(&spans);
    assert!(
        names.contains(&"agent_recovery.step".to_owned()),
        "{names:?}"
    );
    assert!(!names.iter().any(|n| n.contains("probe")), "{names:?}");

    // A sampler that ignores the parent records the probe: it is still not exported.
    let (provider, spans) = tracer_sdk(Sampler::AlwaysOn);
    global::set_tracer_provider(provider.clone());
    assert!(records(&Telemetry::global()));
    provider.force_flush().expect("flush");
    assert!(span_names(&spans).is_empty(), "{:?}", span_names(&spans));

    // Only a meter provider installed: on, and the step's metrics are recorded.
    global::set_tracer_provider(NoopTracerProvider::new());
    let metrics = InMemoryMetricExporter::default();
    let meter = SdkMeterProvider::builder()
        .with_reader(PeriodicReader::builder(metrics.clone()).build())
        .build();
    global::set_meter_provider(meter.clone());
    assert!(records(&Telemetry::global()));
    one_step();
    meter.force_flush().expect("flush");
    let exported: Vec<ResourceMetrics> = metrics.get_finished_metrics().expect("metrics");
    let names: Vec<String> = exported
        .iter()
        .flat_map(|rm| rm.scope_metrics())
        .flat_map(|sm| sm.metrics())
        .map(|m| m.name().to_owned())
        .collect();
    assert!(
        names.contains(&"agent_recovery.steps".to_owned()),
        "{names:?}"
    );

    // Both back to the no-ops: off again.
    global::set_meter_provider(NoopMeterProvider::new());
    assert!(!records(&Telemetry::global()));
}
