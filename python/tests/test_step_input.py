"""A step's loop input: `Step.spec_text()` writes the common case directly, and
must give exactly the bytes (or the error) of the checked encoder,
`_strict_json.dumps(step.spec(), "step")`, for every kind of field value."""

from __future__ import annotations

from typing import Any, Dict

import pytest

from agent_recovery import Step
from agent_recovery._strict_json import dumps


def _op(call: Any) -> Any:
    return None


CASES: Dict[str, Dict[str, Any]] = {
    "defaults": {},
    "every option": {
        "call": "llm",
        "args": {"q": [1, 2.5, "x", None, True], "n": {"deep": [{}]}},
        "target": "t/2",
        "fallbacks": ["a", "b"],
        "side_effect": True,
        "idempotent": False,
        "compensate": _op,
        "checkpoint": lambda: True,
    },
    "escapes in names": {"target": 'q"\\\n\u2028\u0001é😀', "fallbacks": ["\u007f", "</script>"]},
    "a float and a big integer in args": {"args": [1e300, -0.0, 2**63, 10.0]},
    "idempotent true": {"idempotent": True},
    "side_effect not a bool": {"side_effect": 1},
    "idempotent not a bool": {"idempotent": "yes"},
    "call not a str": {"call": 3},
    "fallbacks a tuple": {"fallbacks": ("a",)},
    "a lone surrogate in args": {"args": "\ud800"},
    "a lone surrogate in the target": {"target": "t\udc00"},
    "NaN in args": {"args": [float("nan")]},
    "colliding keys in args": {"args": {1: "a", "1": "b"}},
    "an integer past 2**64 in args": {"args": 2**64},
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_spec_text_is_the_checked_encoders_bytes(name: str) -> None:
    step = Step("s-1", "search", _op, **CASES[name])
    try:
        expected: Any = dumps(step.spec(), "step")
    except ValueError as e:
        expected = (type(e), str(e))
    try:
        got: Any = step.spec_text()
    except ValueError as e:
        got = (type(e), str(e))
    assert got == expected, f"{name}:\nexpected {expected!r}\ngot      {got!r}"
