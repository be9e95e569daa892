//! A policy handle's swaps, refusals and failed calls as OpenTelemetry span
//! events on the caller's span and the `agent_recovery.policy.swaps` counter,
//! through the real components and the real SDK (its in-memory exporters).
//!
//! Expected values come from elsewhere than the code under test: names and
//! versions from each component's own `meta.info`, sha256 computed here from
//! the files, error codes from docs/hosts.md (another world is
//! `incompatible`, bytes that are not wasm `load`, output that is not JSON
//! `invalid-output`), names and attribute sets from the table of
//! docs/telemetry.md, "Policy swaps", which the Node and Python suites read too.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::mpsc;
use std::time::Duration;

use agent_recovery::runtime::Telemetry;
use agent_recovery::{Event, FailurePolicy, Policy, PolicyHandle, SwapOptions, WatchOptions};
use opentelemetry::trace::{Tracer as _, TracerProvider as _};
use opentelemetry::{KeyValue, Value};
use opentelemetry_sdk::metrics::data::{AggregatedMetrics, MetricData, ResourceMetrics};
use opentelemetry_sdk::metrics::{InMemoryMetricExporter, PeriodicReader, SdkMeterProvider};
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider, SpanData};
use sha2::{Digest, Sha256};

const REFERENCE: &str = env!("AGENT_RECOVERY_REFERENCE_WASM");
const PAYMENTS: &str = env!("AGENT_RECOVERY_PAYMENTS_WASM");
const WRONG_WORLD: &str = env!("AGENT_RECOVERY_HOSTILE_WRONG_WORLD_WASM");
const GARBAGE: &str = env!("AGENT_RECOVERY_HOSTILE_GARBAGE_WASM");
const JUNK: &[u8] = b"not a component";

struct Sdk {
    spans: InMemorySpanExporter,
    metrics: InMemoryMetricExporter,
    tracer: SdkTracerProvider,
    meter: SdkMeterProvider,
}

impl Sdk {
    fn new() -> Sdk {
        let spans = InMemorySpanExporter::default();
        let metrics = InMemoryMetricExporter::default();
        Sdk {
            tracer: SdkTracerProvider::builder()
                .with_simple_exporter(spans.clone())
                .build(),
            meter: SdkMeterProvider::builder()
                .with_reader(PeriodicReader::builder(metrics.clone()).build())
                .build(),
            spans,
            metrics,
        }
    }

    fn telemetry(&self) -> Telemetry {
        Telemetry::new(&self.tracer, &self.meter)
    }

    /// Runs `f` inside a span named `request` of this SDK's tracer.
    fn in_span<T>(&self, f: impl FnOnce() -> T) -> T {
        self.tracer.tracer("caller").in_span("request", |_cx| f())
    }

    fn spans(&self) -> Vec<SpanData> {
        self.tracer.force_flush().unwrap();
        self.spans.get_finished_spans().unwrap()
    }

    fn metrics(&self) -> Option<ResourceMetrics> {
        self.meter.force_flush().unwrap();
        self.metrics.get_finished_metrics().unwrap().pop()
    }
}

/// name, version (the component's own `meta.info`) and sha256 (of the file).
fn identity(path: &str) -> [String; 3] {
    let info = Policy::from_file(path).unwrap().info().unwrap();
    let bytes = std::fs::read(path).unwrap();
    let sha: String = Sha256::digest(&bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    [info.name, info.version, sha]
}

fn with_prefix(prefix: &str, id: &[String; 3]) -> Vec<(String, String)> {
    ["name", "version", "sha256"]
        .iter()
        .zip(id)
        .map(|(k, v)| (format!("{prefix}.{k}"), v.clone()))
        .collect()
}

fn string(v: &Value) -> String {
    v.as_str().into_owned()
}

/// One span event as (name, attributes by key).
fn events(span: &SpanData) -> Vec<(String, BTreeMap<String, String>)> {
    span.events
        .iter()
        .map(|e| {
            let attrs = e
                .attributes
                .iter()
                .map(|kv: &KeyValue| (kv.key.to_string(), string(&kv.value)))
                .collect();
            (e.name.to_string(), attrs)
        })
        .collect()
}

/// docs/telemetry.md, "Policy swaps": span event -> its attribute set.
fn doc_table() -> BTreeMap<String, BTreeSet<String>> {
    let doc =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/telemetry.md"))
            .unwrap();
    let at = doc.find("\n## Policy swaps\n").expect("the section");
    let mut rows = BTreeMap::new();
    let mut lines = doc[at..].lines().skip_while(|l| !l.starts_with('|'));
    lines.next();
    lines.next();
    for line in lines.take_while(|l| l.starts_with('|')) {
        let cells: Vec<&str> = line.split(" | ").collect();
        let names = |cell: &str| -> Vec<String> {
            cell.split('`')
                .skip(1)
                .step_by(2)
                .filter(|n| n.contains('.') && !n.contains(' '))
                .map(str::to_owned)
                .collect()
        };
        let event = names(cells[0]).remove(0);
        rows.insert(event, names(cells[3]).into_iter().collect());
    }
    rows
}

fn keys(attrs: &BTreeMap<String, String>) -> BTreeSet<String> {
    attrs.keys().cloned().collect()
}

/// The data points of `agent_recovery.policy.swaps` as (sorted attributes, value).
fn swaps(rm: Option<&ResourceMetrics>) -> Vec<(Vec<(String, String)>, u64)> {
    let mut out = Vec::new();
    for sm in rm.into_iter().flat_map(ResourceMetrics::scope_metrics) {
        assert_eq!(sm.scope().name(), "agent-recovery");
        for m in sm
            .metrics()
            .filter(|m| m.name() == "agent_recovery.policy.swaps")
        {
            assert_eq!(m.unit(), "{swap}", "the unit of docs/telemetry.md");
            let AggregatedMetrics::U64(MetricData::Sum(sum)) = m.data() else {
                panic!("agent_recovery.policy.swaps is not a u64 sum");
            };
            assert!(sum.is_monotonic());
            for dp in sum.data_points() {
                let mut attrs: Vec<(String, String)> = dp
                    .attributes()
                    .map(|kv| (kv.key.to_string(), string(&kv.value)))
                    .collect();
                attrs.sort();
                out.push((attrs, dp.value()));
            }
        }
    }
    out.sort();
    out
}

fn point(attrs: &[(&str, &str)], n: u64) -> (Vec<(String, String)>, u64) {
    let mut a: Vec<(String, String)> = attrs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    a.sort();
    (a, n)
}

#[test]
fn a_swap_and_two_refusals_inside_a_span_are_its_events_and_are_counted() {
    let sdk = Sdk::new();
    let handle = PolicyHandle::builder()
        .telemetry(sdk.telemetry())
        .file(REFERENCE, &SwapOptions::default())
        .unwrap();
    let (swapped, wrong_world, junk) = sdk.in_span(|| {
        (
            handle.swap_file(PAYMENTS, &SwapOptions::default()),
            handle.swap_file(WRONG_WORLD, &SwapOptions::default()),
            handle.swap_bytes(JUNK, &SwapOptions::default()),
        )
    });
    swapped.expect("payments-policy passes its checks");
    let wrong_world = wrong_world.expect_err("another world is refused");
    let junk = junk.expect_err("bytes that are not wasm are refused");

    let spans = sdk.spans();
    assert_eq!(spans.len(), 1, "no span of its own: events on the caller's");
    let got = events(&spans[0]);
    let reference = identity(REFERENCE);
    let payments = identity(PAYMENTS);
    assert_eq!(payments[0], "payments-strict");

    let mut swapped_attrs = with_prefix("agent_recovery.policy", &payments);
    swapped_attrs.extend(with_prefix("agent_recovery.swap.from", &reference));
    let refused = |code: &str, message: &str| {
        let mut a = with_prefix("agent_recovery.policy", &payments);
        a.push(("error.type".into(), code.into()));
        a.push(("agent_recovery.policy.error.message".into(), message.into()));
        a.into_iter().collect::<BTreeMap<_, _>>()
    };
    assert_eq!(
        got,
        vec![
            (
                "agent_recovery.policy.swapped".to_owned(),
                swapped_attrs.into_iter().collect()
            ),
            (
                "agent_recovery.policy.refused".to_owned(),
                refused("incompatible", wrong_world.message())
            ),
            (
                "agent_recovery.policy.refused".to_owned(),
                refused("load", junk.message())
            ),
        ]
    );
    assert!(!junk.message().is_empty());

    // The attribute sets are those of docs/telemetry.md (as in Node and Python).
    let table = doc_table();
    for (name, attrs) in &got {
        assert_eq!(Some(&keys(attrs)), table.get(name), "{name}");
    }

    assert_eq!(
        swaps(sdk.metrics().as_ref()),
        vec![
            point(
                &[
                    ("agent_recovery.swap.result", "refused"),
                    ("error.type", "incompatible")
                ],
                1
            ),
            point(
                &[
                    ("agent_recovery.swap.result", "refused"),
                    ("error.type", "load")
                ],
                1
            ),
            point(&[("agent_recovery.swap.result", "swapped")], 1),
        ]
    );
}

#[test]
fn a_swap_with_no_span_is_counted_only() {
    // A file watcher's thread has no span: the counter still sees the swap.
    let sdk = Sdk::new();
    let handle = PolicyHandle::builder()
        .telemetry(sdk.telemetry())
        .reference()
        .unwrap();
    handle
        .swap_file(PAYMENTS, &SwapOptions::default())
        .expect("activated");
    assert!(sdk.spans().is_empty());
    assert_eq!(
        swaps(sdk.metrics().as_ref()),
        vec![point(&[("agent_recovery.swap.result", "swapped")], 1)]
    );
}

#[test]
fn a_file_watchers_swap_and_refusal_are_counted_but_not_on_the_callers_span() {
    // The watcher swaps on its own thread, which has no span: the span open on
    // this thread meanwhile gets no event, the counter sees both.
    let sdk = Sdk::new();
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("telemetry-swaps-watch");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("policy.wasm");
    std::fs::write(&path, std::fs::read(REFERENCE).unwrap()).unwrap();
    let replace = |bytes: &[u8]| {
        let tmp = path.with_extension("tmp");
        std::fs::write(&tmp, bytes).unwrap();
        std::fs::rename(&tmp, &path).unwrap();
    };
    let (tx, rx) = mpsc::channel();
    let tx = Mutex::new(tx);
    let handle = PolicyHandle::builder()
        .telemetry(sdk.telemetry())
        .on_event(move |e| {
            let _ = tx.lock().map(|tx| tx.send(e.clone()));
        })
        .file(&path, &SwapOptions::default())
        .unwrap();
    let interval = WatchOptions::default()
        .interval(Duration::from_millis(20))
        .unwrap();
    let watcher = handle.watch(&path, interval).unwrap();
    // Waits are for the handle's events (sent after they are counted), with a deadline.
    let next = || rx.recv_timeout(Duration::from_secs(60)).expect("an event");
    sdk.in_span(|| {
        replace(&std::fs::read(PAYMENTS).unwrap());
        assert!(matches!(next(), Event::Swapped { .. }));
        replace(JUNK);
        assert!(matches!(next(), Event::Refused { .. }));
    });
    drop(watcher);
    let spans = sdk.spans();
    assert_eq!(spans.len(), 1);
    assert!(spans[0].events.is_empty(), "{:?}", spans[0].events);
    assert_eq!(
        swaps(sdk.metrics().as_ref()),
        vec![
            point(
                &[
                    ("agent_recovery.swap.result", "refused"),
                    ("error.type", "load")
                ],
                1
            ),
            point(&[("agent_recovery.swap.result", "swapped")], 1),
        ]
    );
}

#[test]
fn failed_calls_and_fallbacks_are_span_events_with_the_documented_attributes() {
    let garbage = identity(GARBAGE);
    let reference = identity(REFERENCE);
    let unchecked = SwapOptions::default().verify(false);
    let table = doc_table();
    for (failure_policy, name) in [
        (FailurePolicy::FailClosed, "agent_recovery.policy.failed"),
        (
            FailurePolicy::FallbackToReference,
            "agent_recovery.policy.fell_back",
        ),
    ] {
        let sdk = Sdk::new();
        let handle = PolicyHandle::builder()
            .failure_policy(failure_policy)
            .telemetry(sdk.telemetry())
            .file(REFERENCE, &SwapOptions::default())
            .unwrap();
        handle.swap_file(GARBAGE, &unchecked).expect("unchecked");
        let answer = sdk.in_span(|| handle.decide_json(r#"{"source":"http","status":503}"#, "{}"));
        let message = match (&answer, failure_policy) {
            (Err(e), FailurePolicy::FailClosed) => e.message().to_owned(),
            (Ok(a), FailurePolicy::FallbackToReference) => {
                a.fallback.as_ref().unwrap().message().to_owned()
            }
            other => panic!("unexpected {other:?}"),
        };
        let spans = sdk.spans();
        let got = events(&spans[0]);
        let mut want = with_prefix("agent_recovery.policy", &garbage);
        want.push(("error.type".into(), "invalid-output".into()));
        want.push(("agent_recovery.policy.error.message".into(), message));
        if failure_policy == FailurePolicy::FallbackToReference {
            want.extend(with_prefix("agent_recovery.policy.reference", &reference));
        }
        assert_eq!(got, vec![(name.to_owned(), want.into_iter().collect())]);
        assert_eq!(Some(&keys(&got[0].1)), table.get(name), "{name}");
        // Not swaps: the counter saw only the unchecked swap (outside the span).
        assert_eq!(
            swaps(sdk.metrics().as_ref()),
            vec![point(&[("agent_recovery.swap.result", "swapped")], 1)]
        );
    }
}

#[test]
fn the_table_has_the_four_events() {
    let table = doc_table();
    assert_eq!(
        table.keys().map(String::as_str).collect::<Vec<_>>(),
        [
            "agent_recovery.policy.failed",
            "agent_recovery.policy.fell_back",
            "agent_recovery.policy.refused",
            "agent_recovery.policy.swapped",
        ]
    );
    assert!(
        table
            .values()
            .all(|a| a.contains("agent_recovery.policy.sha256"))
    );
}

#[test]
fn with_no_sdk_or_telemetry_off_swaps_work_the_same() {
    // The default (global providers, nothing installed) and off: no panic, no
    // change to what the handle does or reports.
    for builder in [
        PolicyHandle::builder(),
        PolicyHandle::builder().telemetry(Telemetry::off()),
    ] {
        let handle = builder.reference().unwrap();
        let id = handle.swap_file(PAYMENTS, &SwapOptions::default()).unwrap();
        assert_eq!(id.name, "payments-strict");
        let err = handle
            .swap_file(WRONG_WORLD, &SwapOptions::default())
            .unwrap_err();
        assert_eq!(err.kind().as_str(), "incompatible");
        let stats = handle.stats();
        assert_eq!((stats.swaps, stats.refusals), (1, 1));
        assert_eq!(handle.active().id().name, "payments-strict");
    }
}
