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


def run_case(case: Dict[str, Any], log: Any) -> None:
    runtime = Runtime(
        policy=POLICY,
        clock=VirtualClock(case["now_ms"]),
        seed=case["seed"],
        decision_log=log,
        decision_log_observation=case["observation"],
    )
    run = runtime.run(case["run_id"])
    for s in case["steps"]:
        run.step(id=s["id"], tool=s["tool"], call=s["call"], operation=operation(s["outcomes"]))


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


def test_bad_options_are_refused_with_a_hint() -> None:
    with pytest.raises(PolicyError, match="file path, a callable"):
        Runtime(decision_log=42)
    with pytest.raises(PolicyError, match='"full" or "digest"'):
        Runtime(decision_log=print, decision_log_observation="all")
    with pytest.raises(PolicyError, match=r"max_record_bytes is 100.*e\.g\. 65536"):
        Runtime(decision_log=print, decision_log_max_record_bytes=100)
