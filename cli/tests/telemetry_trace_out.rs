//! `agent-recovery simulate SCENARIO --trace-out FILE`: the real binary
//! writes the run's spans as OTLP JSON, one `ExportTraceServiceRequest` per
//! line; the `opentelemetry-proto` types read it back (an OTLP JSON parser),
//! and the spans are those of `docs/telemetry.md` on the virtual clock.

mod common;

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value as Any;
use opentelemetry_proto::tonic::trace::v1::Span;

use common::cli::{fails, ok, path_str, run, scratch};

/// Two 503s then a success (seed 7: waits of 53 and 152 ms, as in
/// `tests/cli_simulate.rs` and docs/runtime.md).
const SCENARIO: &str = r#"{"run_id": "r1", "seed": 7, "now_ms": 1767225600000, "config": {},
 "steps": [
   {"id": "charge", "tool": "payments.charge", "call": "tool", "target": "api.pay",
    "args": {"amount": 10}, "side_effect": true,
    "outcomes": [{"source":"http","status":503}, {"source":"http","status":503}, "ok"],
    "compensation": {"outcomes": ["ok"]}}]}"#;

const T0_NS: u64 = 1_767_225_600_000 * 1_000_000;

fn attr<'a>(span: &'a Span, key: &str) -> Option<&'a Any> {
    span.attributes
        .iter()
        .find(|kv| kv.key == key)
        .and_then(|kv| kv.value.as_ref())
        .and_then(|v| v.value.as_ref())
}

fn text(span: &Span, key: &str) -> Option<String> {
    match attr(span, key) {
        Some(Any::StringValue(s)) => Some(s.clone()),
        _ => None,
    }
}

fn int(span: &Span, key: &str) -> Option<i64> {
    match attr(span, key) {
        Some(Any::IntValue(n)) => Some(*n),
        _ => None,
    }
}

fn trace_of(name: &str) -> (String, Vec<Span>) {
    let scenario = scratch(&format!("{name}.json"), SCENARIO.as_bytes());
    let out = scratch(&format!("{name}.otlp.jsonl"), b"");
    ok(&run(
        &[
            "simulate",
            path_str(&scenario),
            "--json",
            "--trace-out",
            path_str(&out),
        ],
        b"",
    ));
    let file = std::fs::read_to_string(&out).unwrap();
    let lines: Vec<&str> = file.lines().collect();
    assert_eq!(lines.len(), 1, "one ExportTraceServiceRequest per line");
    let request: ExportTraceServiceRequest =
        serde_json::from_str(lines[0]).expect("OTLP JSON ExportTraceServiceRequest");
    let spans = request
        .resource_spans
        .into_iter()
        .flat_map(|r| r.scope_spans)
        .inspect(|s| {
            assert_eq!(
                s.scope.as_ref().map(|s| s.name.as_str()),
                Some("agent-recovery")
            )
        })
        .flat_map(|s| s.spans)
        .collect();
    (file, spans)
}

#[test]
fn one_span_per_attempt_with_error_type_and_attempt_number() {
    let (file, spans) = trace_of("trace-out");
    let mut attempts: Vec<&Span> = spans
        .iter()
        .filter(|s| s.name == "agent_recovery.attempt")
        .collect();
    attempts.sort_by_key(|s| int(s, "agent_recovery.attempt"));
    assert_eq!(attempts.len(), 3);
    let steps: Vec<&Span> = spans
        .iter()
        .filter(|s| s.name == "agent_recovery.step")
        .collect();
    assert_eq!(steps.len(), 1);
    assert_eq!(spans.len(), 4);
    let starts = [0u64, 53, 205];
    for (n, span) in attempts.iter().enumerate() {
        let attempt = i64::try_from(n).unwrap() + 1;
        assert_eq!(int(span, "agent_recovery.attempt"), Some(attempt));
        assert_eq!(span.parent_span_id, steps[0].span_id);
        assert_eq!(span.trace_id, steps[0].trace_id);
        assert_eq!(span.start_time_unix_nano, T0_NS + starts[n] * 1_000_000);
        let expected = (n < 2).then(|| "tool.http.503_unavailable".to_owned());
        assert_eq!(text(span, "error.type"), expected);
        assert_eq!(
            int(span, "http.request.resend_count"),
            (attempt > 1).then_some(attempt - 1)
        );
    }
    assert_eq!(
        text(steps[0], "agent_recovery.step.outcome").as_deref(),
        Some("ok")
    );
    assert_eq!(steps[0].end_time_unix_nano, T0_NS + 205 * 1_000_000);
    // OTLP JSON (not the protobuf field names): camelCase, hex ids, int64 as strings.
    assert!(file.contains("\"resourceSpans\""), "{file}");
    assert!(
        file.contains("\"startTimeUnixNano\":\"1767225600000000000\""),
        "{file}"
    );
    // Same scenario, same bytes (ids from a counter, times from the virtual clock).
    assert_eq!(file, trace_of("trace-out-again").0);
}

#[test]
fn an_unwritable_trace_out_is_a_usage_error() {
    let scenario = scratch("trace-out-bad.json", SCENARIO.as_bytes());
    let err = fails(
        &run(
            &[
                "simulate",
                path_str(&scenario),
                "--trace-out",
                "/nonexistent-dir/x.jsonl",
            ],
            b"",
        ),
        2,
    );
    assert!(err.contains("--trace-out"), "{err}");
}
