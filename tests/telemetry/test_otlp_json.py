"""`agent-recovery simulate --trace-out`: an independent OTLP JSON parser
(protobuf's `json_format.Parse` into the `opentelemetry-proto` package's
`ExportTraceServiceRequest`, which rejects unknown members and wrong types)
reads every line, and finds one span per attempt with `error.type` and the
attempt number (docs/telemetry.md).

Needs target/release/agent-recovery (scripts/test-all.sh builds it first).
"""

import json
import pathlib
import subprocess

from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
)

ROOT = pathlib.Path(__file__).resolve().parents[2]
CLI = ROOT / "target" / "release" / "agent-recovery"

# Two 503s then a success, then a step that keeps failing (seed 7, docs/runtime.md:
# tool retries wait 53, 152, 3, 672 ms): 3 + 5 attempts, the second step dead-lettered.
SCENARIO = {
    "run_id": "r-py",
    "seed": 7,
    "now_ms": 1767225600000,
    "config": {"breaker": {"failure_threshold": 10, "open_ms": 30000}},
    "steps": [
        {
            "id": "charge",
            "tool": "payments.charge",
            "call": "tool",
            "target": "api.pay",
            "side_effect": True,
            "outcomes": [{"source": "http", "status": 503}] * 2 + ["ok"],
            "compensation": {"outcomes": ["ok"]},
        },
        {
            "id": "ship",
            "tool": "shipping.create",
            "call": "tool",
            "target": "ship",
            "outcomes": [{"source": "http", "status": 503}] * 5,
        },
    ],
}


def attrs(span):
    out = {}
    for kv in span.attributes:
        kind = kv.value.WhichOneof("value")
        out[kv.key] = getattr(kv.value, kind)
    return out


def test_trace_out_is_otlp_json(tmp_path):
    scenario = tmp_path / "scenario.json"
    scenario.write_text(json.dumps(SCENARIO))
    out = tmp_path / "trace.jsonl"
    run = subprocess.run(
        [str(CLI), "simulate", str(scenario), "--json", "--trace-out", str(out)],
        capture_output=True,
        check=True,
    )
    assert json.loads(run.stdout)["outcome"] == "dead_lettered"
    lines = out.read_text().splitlines()
    assert len(lines) == 1
    request = json_format.Parse(lines[0], ExportTraceServiceRequest())
    spans = [
        s
        for rs in request.resource_spans
        for ss in rs.scope_spans
        for s in ss.spans
    ]
    names = sorted(s.name for s in spans)
    assert names.count("agent_recovery.step") == 2
    assert names.count("agent_recovery.compensation") == 1
    attempts = [s for s in spans if s.name == "agent_recovery.attempt"]
    # 3 + 5 operation calls and the compensation of `charge`.
    assert len(attempts) == 9
    by_step = {}
    for s in attempts:
        a = attrs(s)
        by_step.setdefault((a["agent_recovery.step.id"], a["agent_recovery.call.kind"]), []).append(a)
    charge = sorted(by_step[("charge", "operation")], key=lambda a: a["agent_recovery.attempt"])
    assert [a["agent_recovery.attempt"] for a in charge] == [1, 2, 3]
    assert [a.get("error.type") for a in charge] == [
        "tool.http.503_unavailable",
        "tool.http.503_unavailable",
        None,
    ]
    ship = sorted(by_step[("ship", "operation")], key=lambda a: a["agent_recovery.attempt"])
    assert [a["agent_recovery.attempt"] for a in ship] == [1, 2, 3, 4, 5]
    assert all(a["error.type"] == "tool.http.503_unavailable" for a in ship)
    assert [a["agent_recovery.action"] for a in ship] == ["retry"] * 4 + ["compensate"]
    assert [a.get("agent_recovery.delay_ms") for a in ship] == [53, 152, 3, 672, None]
    assert [a.get("http.request.resend_count") for a in ship] == [None, 1, 2, 3, 4]
    assert len(by_step[("charge", "compensation")]) == 1
    # Times on the virtual clock, in ns: the run starts at now_ms.
    assert min(s.start_time_unix_nano for s in spans) == 1767225600000 * 1_000_000
