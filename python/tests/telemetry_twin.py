"""The Python twin of `agent-recovery simulate SCENARIO --trace-out FILE`.

    python telemetry_twin.py GROUPS.json

As the Rust CLI does, installs the OpenTelemetry SDK as the **global** tracer
provider (resource `service.name` = `agent-recovery`), then runs each scenario
of the JSON array of groups (arrays of scenarios whose runs share one
`MemoryStore`, as the CLI's `--store` file) with `run_scenario` (whose
`Runtime` takes the default telemetry: the global providers) and prints one
line per scenario:
`{"outcome", "events", "spans"}`, the spans as the real SDK ended them (see
`span_record`). Run in its own process by test_telemetry.py, because the
global providers can be set once per process.

Before that, a `Runtime` built while no provider is installed runs a step,
and again once the SDK is installed: the last line, `{"late": [n, m]}`, has
the number of step spans each of its runs ended (docs: a provider installed
later is used from the next run on).
"""

from __future__ import annotations

import json
import sys
from typing import Any, Dict

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter


def _hex_trace(n: int) -> str:
    return format(n, "032x")


def _hex_span(n: int) -> str:
    return format(n, "016x")


def span_record(s: ReadableSpan) -> Dict[str, Any]:
    """A span as plain JSON: ids in hex, times in ns, attributes as a dict."""
    assert s.context is not None
    return {
        "name": s.name,
        "kind": s.kind.name,
        "trace": _hex_trace(s.context.trace_id),
        "id": _hex_span(s.context.span_id),
        "parent": _hex_span(s.parent.span_id) if s.parent is not None else None,
        "start": s.start_time,
        "end": s.end_time,
        "attributes": dict(s.attributes or {}),
        "events": [[e.name, e.timestamp, dict(e.attributes or {})] for e in s.events],
        "links": [
            [_hex_trace(link.context.trace_id), _hex_span(link.context.span_id), dict(link.attributes or {})]
            for link in s.links
        ],
        "status": [s.status.status_code.name, s.status.description or ""],
        "scope": [s.instrumentation_scope.name, s.instrumentation_scope.version] if s.instrumentation_scope else None,
        "resource": dict(s.resource.attributes),
    }


def main() -> int:
    from agent_recovery import Runtime, VirtualClock
    from agent_recovery.scenario import run_scenario
    from agent_recovery.store import MemoryStore

    early = Runtime(clock=VirtualClock(1_767_225_600_000), seed=7)
    early.run("before").step(id="s", tool="t", operation=lambda c: None)

    spans = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource({"service.name": "agent-recovery"}))
    provider.add_span_processor(SimpleSpanProcessor(spans))
    trace.set_tracer_provider(provider)
    before = len(spans.get_finished_spans())
    early.run("after").step(id="s", tool="t", operation=lambda c: None)
    late = [before, len([s for s in spans.get_finished_spans() if s.name == "agent_recovery.step"])]

    with open(sys.argv[1], encoding="utf-8") as f:
        groups = json.load(f)
    for scenario, store in ((s, store) for group in groups for store in [MemoryStore()] for s in group):
        spans.clear()
        out = run_scenario(scenario, store)
        provider.force_flush()
        print(
            json.dumps(
                {
                    "outcome": out.outcome,
                    "events": [json.loads(e) for e in out.events],
                    "spans": [span_record(s) for s in spans.get_finished_spans()],
                }
            )
        )
    print(json.dumps({"late": late}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
