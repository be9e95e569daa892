"""The dead-letter lifecycle vectors (`tests/deadletters/*.json`) through the
component's `agent:recovery/dead-letters@0.3.0`, as the Python runtime calls it
(`LoopComponent.dead_letters`, wasmtime-py's component API): every answer byte
for byte as the vectors give it (guest/tests/deadletters.rs runs the same)."""

from __future__ import annotations

import json
from typing import Any, Dict, List, Tuple

import pytest
from wasmtime.component import Record, Variant

from agent_recovery._loop import LoopComponent
from agent_recovery.limits import Limits
from agent_recovery.runtime import _default_loop

from .conftest import repo_root


def _cases() -> List[Tuple[str, Dict[str, Any]]]:
    files = sorted((repo_root() / "tests" / "deadletters").glob("*.json"))
    assert len(files) >= 4, "expected the dead-letter vectors in tests/deadletters"
    return [(f"{p.name}: {c['name']}", c) for p in files for c in json.loads(p.read_text(encoding="utf-8"))["cases"]]


CASES = _cases()


def _plain(v: Any) -> Any:
    """A component value as the vectors write it (records as dicts, enums as their names)."""
    if isinstance(v, Record):
        return {k: _plain(x) for k, x in vars(v).items()}
    return v


def _answer(loop: LoopComponent, name: str, args: List[Any]) -> Dict[str, Any]:
    out = loop.dead_letters(name, *args)
    if isinstance(out, Variant):
        return {out.tag: _plain(out.payload)}
    if name in ("parse-id", "replay-step", "apply") and isinstance(out, Record) and hasattr(out, "detail"):
        return {"err": _plain(out)}
    return {"ok": _plain(out)}


@pytest.mark.parametrize("case", [c for _, c in CASES], ids=[n for n, _ in CASES])
def test_dead_letter_vector(case: Dict[str, Any]) -> None:
    loop = _default_loop(Limits())
    want = {"ok": case["ok"]} if "ok" in case else {"err": case["err"]}
    assert _answer(loop, case["call"], case["args"]) == want


def test_there_are_enough_cases() -> None:
    assert len(CASES) >= 50
