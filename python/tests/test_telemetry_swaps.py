"""A `PolicyHandle`'s swaps and refusals as OpenTelemetry span events on the
caller's span and the `agent_recovery.policy.swaps` counter, through the real
components and the real OpenTelemetry SDK (its in-memory exporters).

Expected values come from elsewhere than the code under test: names and
versions from each component's own `meta.info`, sha256 computed here from the
files, error codes from docs/hosts.md (another world is `incompatible`, bytes
that are not wasm `load`), names and attribute sets from the table of
docs/telemetry.md, "Policy swaps", which the Rust and Node suites read too.
"""

from __future__ import annotations

import hashlib
import re
import threading
from pathlib import Path
from typing import Any, Dict, List, Tuple

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from agent_recovery import Policy, PolicyError, PolicyHandle, SwapError
from agent_recovery.telemetry import Telemetry

from .conftest import artifact, repo_root

JUNK = b"not a component"


class Sdk:
    """The real SDK: an in-memory span exporter and an in-memory metric reader."""

    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        self.tracer_provider = TracerProvider()
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.reader = InMemoryMetricReader()
        self.meter_provider = MeterProvider(metric_readers=[self.reader])

    def telemetry(self) -> Telemetry:
        return Telemetry(tracer_provider=self.tracer_provider, meter_provider=self.meter_provider)

    def span(self) -> Any:
        """An active span named `request` (a context manager)."""
        return self.tracer_provider.get_tracer("caller").start_as_current_span("request")

    def spans(self) -> List[ReadableSpan]:
        return list(self.exporter.get_finished_spans())

    def swaps(self) -> List[Tuple[List[Tuple[str, str]], int]]:
        """The data points of `agent_recovery.policy.swaps` as (sorted attributes, value)."""
        out = []
        data = self.reader.get_metrics_data()
        for rm in data.resource_metrics if data else []:
            for sm in rm.scope_metrics:
                assert sm.scope.name == "agent-recovery"
                for m in sm.metrics:
                    if m.name != "agent_recovery.policy.swaps":
                        continue
                    assert m.unit == "{swap}"
                    assert m.data.is_monotonic
                    for dp in m.data.data_points:
                        assert isinstance(dp.value, int)
                        out.append((sorted((k, str(v)) for k, v in dp.attributes.items()), dp.value))
        return sorted(out)


def identity(path: Path) -> Tuple[str, str, str]:
    """name, version (the component's own meta.info) and sha256 (of the file)."""
    info = Policy.load(path).info()
    return info["name"], info["version"], hashlib.sha256(path.read_bytes()).hexdigest()


def prefixed(prefix: str, ident: Tuple[str, str, str]) -> Dict[str, str]:
    return dict(zip((f"{prefix}.name", f"{prefix}.version", f"{prefix}.sha256"), ident, strict=True))


def doc_table() -> Dict[str, Tuple[str, List[str]]]:
    """docs/telemetry.md, "Policy swaps": span event -> (hosts, sorted attributes)."""
    text = (repo_root() / "docs" / "telemetry.md").read_text(encoding="utf-8")
    section = text[text.index("\n## Policy swaps\n"):]
    lines = section.split("\n")
    start = next(i for i, line in enumerate(lines) if line.startswith("|"))
    rows = {}
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        cells = line[1:-1].split(" | ")
        names = lambda cell: re.findall(r"`([^` ]+\.[^` ]+)`", cell)  # noqa: E731
        rows[names(cells[0])[0]] = (cells[2].strip(), sorted(names(cells[3])))
    return rows


def test_a_swap_and_two_refusals_inside_a_span_are_its_events_and_are_counted() -> None:
    sdk = Sdk()
    reference_path, payments_path = artifact("agent-recovery-policy"), artifact("payments-policy")
    reference, payments = identity(reference_path), identity(payments_path)
    assert payments[0] == "payments-strict"
    handle = PolicyHandle.load(reference_path, telemetry=sdk.telemetry())
    errors = []
    with sdk.span():
        handle.swap(payments_path)
        for candidate in (artifact("hostile-wrong-world"), JUNK):
            with pytest.raises(SwapError) as refused:
                handle.swap(candidate)
            errors.append(refused.value)
    assert [e.code for e in errors] == ["incompatible", "load"], "docs/hosts.md: another world, not wasm"

    spans = sdk.spans()
    assert [s.name for s in spans] == ["request"], "no span of its own: events on the caller's"
    events = [(e.name, dict(e.attributes or {})) for e in spans[0].events]

    def refusal(code: str, message: str) -> Tuple[str, Dict[str, str]]:
        attrs = prefixed("agent_recovery.policy", payments)
        attrs.update({"error.type": code, "agent_recovery.policy.error.message": message})
        return "agent_recovery.policy.refused", attrs

    assert events == [
        (
            "agent_recovery.policy.swapped",
            {**prefixed("agent_recovery.policy", payments), **prefixed("agent_recovery.swap.from", reference)},
        ),
        refusal("incompatible", errors[0].message),
        refusal("load", errors[1].message),
    ]

    # The attribute sets are those of docs/telemetry.md (as in Rust and Node).
    table = doc_table()
    for name, attrs in events:
        hosts, documented = table[name]
        assert sorted(attrs) == documented, name
        assert "Python" in hosts

    assert sdk.swaps() == [
        ([("agent_recovery.swap.result", "refused"), ("error.type", "incompatible")], 1),
        ([("agent_recovery.swap.result", "refused"), ("error.type", "load")], 1),
        ([("agent_recovery.swap.result", "swapped")], 1),
    ]


def test_a_swap_with_no_current_span_is_counted_only() -> None:
    """A swap from a thread with no span (a watcher's): only the counter sees it."""
    sdk = Sdk()
    handle = PolicyHandle.load(artifact("agent-recovery-policy"), telemetry=sdk.telemetry())
    handle.swap(artifact("payments-policy"))
    assert sdk.spans() == []
    assert sdk.swaps() == [([("agent_recovery.swap.result", "swapped")], 1)]


def test_a_swap_on_another_thread_is_not_on_this_threads_span() -> None:
    """The current span is per thread (contextvars): a swap run by a worker
    thread while this one has a span open is counted, with no span event."""
    sdk = Sdk()
    handle = PolicyHandle.load(artifact("agent-recovery-policy"), telemetry=sdk.telemetry())
    with sdk.span():
        worker = threading.Thread(target=handle.swap, args=(artifact("payments-policy"),))
        worker.start()
        worker.join()
    assert handle.policy.name == "payments-strict"
    (span,) = sdk.spans()
    assert list(span.events) == []
    assert sdk.swaps() == [([("agent_recovery.swap.result", "swapped")], 1)]


def test_off_records_nothing_and_with_no_sdk_nothing_breaks() -> None:
    sdk = Sdk()
    reference_path, payments_path = artifact("agent-recovery-policy"), artifact("payments-policy")
    off = PolicyHandle.load(reference_path, telemetry=Telemetry.off())
    with sdk.span():
        assert off.swap(payments_path)["name"] == "payments-strict"
        with pytest.raises(SwapError) as refused:
            off.swap(artifact("hostile-wrong-world"))
        assert refused.value.code == "incompatible"
    assert list(sdk.spans()[0].events) == []
    assert off.policy.name == "payments-strict"
    # The default: the global providers (whatever this process installed, if anything).
    handle = PolicyHandle(Policy.load(reference_path))
    assert handle.swap(payments_path)["name"] == "payments-strict"
    with pytest.raises(SwapError) as refused:
        handle.swap(JUNK)
    assert refused.value.code == "load"
    assert handle.policy.name == "payments-strict"


def test_a_bad_telemetry_option_is_refused() -> None:
    with pytest.raises(PolicyError, match="telemetry must be a Telemetry"):
        PolicyHandle.load(artifact("agent-recovery-policy"), telemetry="on")  # type: ignore[arg-type]


def test_the_table_has_the_four_events_swapped_and_refused_in_every_host() -> None:
    table = doc_table()
    assert sorted(table) == [
        "agent_recovery.policy.failed",
        "agent_recovery.policy.fell_back",
        "agent_recovery.policy.refused",
        "agent_recovery.policy.swapped",
    ]
    for name in ("agent_recovery.policy.swapped", "agent_recovery.policy.refused"):
        assert table[name][0] == "Rust, Node, Python"
