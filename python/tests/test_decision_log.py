"""The decision log (docs/decision-logs.md) through the real component: the
shared vector tests/vectors/decision_log/lines.json byte for byte (the same
lines the Rust and Node runtimes write), the file sink, a logging.Logger,
and the option checks."""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from pathlib import Path
from typing import Any, Callable, Dict, List

import pytest

from agent_recovery import Failed, Policy, PolicyError, Runtime, VirtualClock, _decision_log

from .conftest import vectors_dir

VECTOR = json.loads((vectors_dir() / "decision_log" / "lines.json").read_text("utf-8"))
POLICY = Policy.load()


def expected(case: Dict[str, Any]) -> List[str]:
    return [line.replace("$REFERENCE", f"sha256:{POLICY.sha256}") for line in case["lines"]]


def operation(outcomes: List[Any]) -> Callable[[Any], Any]:
    def op(call: Any) -> Any:
        o = outcomes[call.attempt - 1] if call.attempt <= len(outcomes) else {"source": "http", "status": 500}
        return None if o == "ok" else Failed(o)

    return op


def runtime_for(case: Dict[str, Any], log: Any) -> Runtime:
    return Runtime(
        policy=POLICY,
        clock=VirtualClock(case["now_ms"]),
        seed=case["seed"],
        decision_log=log,
        decision_log_observation=case["observation"],
    )


def run_case(case: Dict[str, Any], log: Any) -> tuple[Runtime, List[Any]]:
    """Runs the case's steps; returns the runtime, then each step's report and the run's events."""
    runtime = runtime_for(case, log)
    run = runtime.run(case["run_id"])
    reports = []
    for s in case["steps"]:
        r = run.step(id=s["id"], tool=s["tool"], call=s["call"], operation=operation(s["outcomes"]))
        reports.append(r)
    return runtime, [reports, run.events]


@pytest.mark.parametrize("case", VECTOR["cases"], ids=lambda c: c["name"])
def test_the_shared_vector_byte_for_byte(case: Dict[str, Any]) -> None:
    lines: List[str] = []
    run_case(case, lines.append)
    assert lines == expected(case)


def test_a_file_sink_appends_the_same_lines(tmp_path: Path) -> None:
    case = VECTOR["cases"][0]
    path = tmp_path / "decisions.jsonl"
    run_case(case, str(path))
    assert path.read_text("utf-8") == "".join(f"{line}\n" for line in expected(case))


def test_step_async_writes_the_file_off_the_event_loop(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    case = VECTOR["cases"][0]
    path = tmp_path / "decisions.jsonl"
    writers: List[str] = []
    write = _decision_log.FileSink.__call__

    def recorded(self: Any, line: str) -> None:
        writers.append(threading.current_thread().name)
        write(self, line)

    monkeypatch.setattr(_decision_log.FileSink, "__call__", recorded)

    async def main() -> str:
        runtime = Runtime(
            policy=POLICY,
            clock=VirtualClock(case["now_ms"]),
            seed=case["seed"],
            decision_log=str(path),
            decision_log_observation=case["observation"],
        )
        run = runtime.run(case["run_id"])
        for s in case["steps"]:
            await run.step_async(id=s["id"], tool=s["tool"], call=s["call"], operation=operation(s["outcomes"]))
        return threading.current_thread().name

    loop_thread = asyncio.run(main())
    assert path.read_text("utf-8") == "".join(f"{line}\n" for line in expected(case))
    assert len(writers) == len(expected(case))
    assert loop_thread not in writers, writers


def test_a_logger_gets_each_line_at_info(caplog: pytest.LogCaptureFixture) -> None:
    case = VECTOR["cases"][0]
    with caplog.at_level(logging.INFO, logger="agent_recovery.decisions"):
        run_case(case, logging.getLogger("agent_recovery.decisions"))
    assert [r.getMessage() for r in caplog.records] == expected(case)


def unwritable(tmp_path: Path, kind: str) -> str:
    """A real file the log cannot write: a directory (open fails) or /dev/full (each write fails)."""
    return str(tmp_path) if kind == "directory" else "/dev/full"


@pytest.mark.parametrize("kind", ["directory", "/dev/full"])
def test_a_file_that_cannot_be_written_is_counted_and_the_run_goes_on(
    tmp_path: Path, kind: str, caplog: pytest.LogCaptureFixture
) -> None:
    case = VECTOR["cases"][0]
    path = unwritable(tmp_path, kind)
    _, reports_without_log = run_case(case, lambda line: None)
    with caplog.at_level(logging.WARNING, logger="agent_recovery"):
        runtime, reports = run_case(case, path)
    assert reports == reports_without_log
    assert runtime.decision_log is not None
    assert runtime.decision_log.failed_writes == len(expected(case))
    warnings = [r for r in caplog.records if r.name == "agent_recovery" and r.levelno == logging.WARNING]
    assert len(warnings) == 1, [r.getMessage() for r in warnings]
    assert path in warnings[0].getMessage()


def test_step_async_counts_a_failed_write_too(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    case = VECTOR["cases"][0]
    _, reports_without_log = run_case(case, lambda line: None)

    async def main() -> tuple[Runtime, List[Any]]:
        runtime = runtime_for(case, str(tmp_path))
        run = runtime.run(case["run_id"])
        reports = []
        for s in case["steps"]:
            r = await run.step_async(id=s["id"], tool=s["tool"], call=s["call"], operation=operation(s["outcomes"]))
            reports.append(r)
        return runtime, [reports, run.events]

    with caplog.at_level(logging.WARNING, logger="agent_recovery"):
        runtime, reports = asyncio.run(main())
    assert reports == reports_without_log
    assert runtime.decision_log is not None
    assert runtime.decision_log.failed_writes == len(expected(case))
    assert len([r for r in caplog.records if r.name == "agent_recovery"]) == 1


def test_a_callable_log_counts_no_failed_writes() -> None:
    lines: List[str] = []
    runtime, _ = run_case(VECTOR["cases"][0], lines.append)
    assert runtime.decision_log is not None and runtime.decision_log.failed_writes == 0
    assert Runtime().decision_log is None


def test_bad_options_are_refused_with_a_hint() -> None:
    with pytest.raises(PolicyError, match="file path, a callable"):
        Runtime(decision_log=42)
    with pytest.raises(PolicyError, match='"full" or "digest"'):
        Runtime(decision_log=print, decision_log_observation="all")
    with pytest.raises(PolicyError, match=r"max_record_bytes is 100.*e\.g\. 65536"):
        Runtime(decision_log=print, decision_log_max_record_bytes=100)
