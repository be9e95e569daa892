"""Checks a host runs before it trusts a policy: its own smoke set.

A component can implement the world's types exactly and still be wrong. Its
smoke set (`meta.smoke-tests`) says what it must decide for a few observations;
running it right after loading catches a broken build or a mismatched contract
before the policy sees real traffic, which is what a hot swap needs.
"""

from __future__ import annotations

import json
from typing import Any, List

from .errors import PolicyError, PolicyRuntimeError
from .policy import Policy


def run_smoke_tests(policy: Policy) -> int:
    """Run every smoke case through `decide_json`; return how many passed.

    Each case's `expect.action` and `expect.code` (each optional) must equal the
    decision's `action` and `envelope.code`. Raises `PolicyRuntimeError("smoke_test")`
    naming every failing case.
    """
    text = policy.smoke_tests_json()
    try:
        cases = json.loads(text)
    except ValueError as e:
        raise _smoke_error(f"the smoke set is not JSON ({e})") from None
    if not isinstance(cases, list):
        raise _smoke_error("the smoke set is not a JSON array of cases")
    if not cases:
        raise _smoke_error("the smoke set is empty; a policy must ship at least one smoke case")
    failures: List[str] = []
    for i, case in enumerate(cases):
        why = _run_case(policy, case)
        if why:
            failures.append(f"case {i}: {why}")
    if failures:
        raise _smoke_error(
            f"{len(failures)} of {len(cases)} smoke cases failed ({'; '.join(failures)})"
        )
    return len(cases)


def _run_case(policy: Policy, case: Any) -> str:
    if not isinstance(case, dict) or "observation" not in case:
        return "no `observation` member"
    expect = case.get("expect")
    if not isinstance(expect, dict):
        return "no `expect` member"
    obs = json.dumps(case["observation"], separators=(",", ":"))
    ctx = json.dumps(case.get("context", {}), separators=(",", ":"))
    try:
        text = policy.decide_json(obs, ctx)
    except PolicyError as e:
        return f"decide-json failed ({e})"
    try:
        decision = json.loads(text)
    except ValueError as e:
        # The component broke the contract: reported as invalid output (as the
        # Rust and Node hosts do), not as a wrong answer.
        raise PolicyRuntimeError(
            "invalid_output",
            f"the decision is not JSON ({e}): {text[:80]!r}; the component breaks the contract",
        ) from None
    if not isinstance(decision, dict):
        raise PolicyRuntimeError(
            "invalid_output", f"the decision is not a JSON object: {text[:80]!r}"
        )
    got = {
        "action": decision.get("action"),
        "code": (decision.get("envelope") or {}).get("code"),
    }
    for field in ("action", "code"):
        if field in expect and expect[field] != got[field]:
            return f"expected {field} {expect[field]!r}, got {got[field]!r}"
    return ""


def _smoke_error(message: str) -> PolicyRuntimeError:
    return PolicyRuntimeError(
        "smoke_test",
        f"{message}; the policy does not pass its own smoke tests, do not activate it",
    )
