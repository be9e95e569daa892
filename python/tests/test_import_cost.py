"""`import agent_recovery` brings only what loading a policy needs (a
process that only decides stays small: docs/benchmarks.md); the runtime, stores, adapters
and retry load on first use, and every public name still resolves to what it
named when the package imported everything eagerly."""

from __future__ import annotations

import json
import subprocess
import sys

HEAVY = ("asyncio", "sqlite3", "socket", "concurrent.futures", "agent_recovery.runtime", "agent_recovery.store")


def run(code: str) -> str:
    return subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout


def test_deciding_does_not_import_the_runtime() -> None:
    out = run(
        "import sys, json\n"
        "from agent_recovery import Policy\n"
        "Policy.load().decide_json('{\"source\":\"http\",\"status\":503}', '{}')\n"
        f"print(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))\n"
    )
    assert json.loads(out) == []


def test_every_public_name_resolves_lazily() -> None:
    import agent_recovery
    from agent_recovery import runtime, scenario, store

    assert agent_recovery.Runtime is runtime.Runtime
    assert agent_recovery.VirtualClock is runtime.VirtualClock
    assert agent_recovery.SqliteStore is store.SqliteStore
    assert agent_recovery.run_scenario is scenario.run_scenario
    for name in agent_recovery.__all__:
        assert getattr(agent_recovery, name) is not None
    assert set(agent_recovery.__all__) <= set(dir(agent_recovery))


def test_retry_stays_the_function_after_its_module_is_imported() -> None:
    out = run(
        "import agent_recovery.retry\n"
        "import agent_recovery\n"
        "from agent_recovery import retry\n"
        "print(callable(retry), retry is agent_recovery.retry.__globals__['retry'], retry.__module__)\n"
    )
    assert out.split() == ["True", "True", "agent_recovery.retry"]


def test_unknown_name_is_an_attribute_error() -> None:
    import agent_recovery

    try:
        agent_recovery.no_such_name  # noqa: B018
    except AttributeError as e:
        assert "no_such_name" in str(e)
    else:
        raise AssertionError("no AttributeError")
