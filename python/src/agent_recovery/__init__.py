"""agent-recovery for Python: the recovery policy component, run by wasmtime.

```python
from agent_recovery import Policy

policy = Policy.load()
envelope = policy.classify({"source": "http", "status": 503})
assert envelope["code"] == "tool.http.503_unavailable"
```

- `Policy`: load a component and call it (`classify`, `decide`, `backoff`,
  `key`, `registry`, `render`, `info`, and the byte-exact `*_json` entry points).
- `PolicyHandle`: the active policy, hot-swappable after validation.
- `recover`: the small door, `@recover(...)` around one call or one tool.
- `retry` / `retry_sync`: run an operation and let the policy decide each retry.
- `from_exception` / `from_response` / `from_rpc`: observations from what failed.
- `observation_from`: the observation for an SDK's exception or result (OpenAI,
  Anthropic, botocore, google-api-core, google-genai, MCP, A2A), no SDK imported.
- `MemoryStore` / `SqliteStore` (module `agent_recovery.store`): the runtime's
  store, one SQLite schema shared with Rust and Node.
- `Runtime` (module `agent_recovery.runtime`): carries out every decision
  (retries, fallbacks, breakers, compensations, dead letters, fan-outs) with
  the loop written once in the component; `run_scenario` (module
  `agent_recovery.scenario`) runs a scripted run on a virtual clock.
- `runtime.recover(operations)` (module `agent_recovery.durable`) finishes
  the runs a killed worker left in the journal; `runtime.dead_letters`
  (module `agent_recovery.deadletters`) lists, shows, replays and purges the
  dead-letter queue on any store.
"""

import importlib as _importlib
import sys as _sys
import warnings as _warnings
from types import ModuleType as _ModuleType
from typing import TYPE_CHECKING, Any

# Imported with the package: what loading a policy and asking it needs.
from .errors import PolicyError, PolicyRuntimeError, SwapError
from .handle import PolicyHandle
from .limits import MAX_ID_BYTES, Limits
from .policy import Policy, reference_path
from .types import CodeInfo, Context, Decision, Envelope, PolicyConfig, PolicyInfo

# Imported on first use (PEP 562): the runtime, the stores, the adapters and
# retry bring asyncio, sqlite3, socket, concurrent.futures..., about 75 ms and
# 8 MiB of a process that only decides (docs/benchmarks.md).
_LAZY = {
    "Call": "runtime",
    "Clock": "runtime",
    "Failed": "runtime",
    "RawOutcome": "runtime",
    "Run": "runtime",
    "Runtime": "runtime",
    "Step": "runtime",
    "StepReport": "runtime",
    "SystemClock": "runtime",
    "VirtualClock": "runtime",
    "interruptible": "interrupt",
    "ScenarioError": "scenario",
    "ScenarioOutput": "scenario",
    "run_scenario": "scenario",
    "MemoryStore": "store",
    "SqliteStore": "store",
    "StoreError": "store",
    "observation_from": "adapters",
    "Failure": "observe",
    "from_exception": "observe",
    "from_response": "observe",
    "from_rpc": "observe",
    "RecoveryError": "retry",
    "retry": "retry",
    "retry_sync": "retry",
    "recover": "door",
    "KeyNotUsedWarning": "door",
}

if TYPE_CHECKING:
    from .adapters import observation_from
    from .door import KeyNotUsedWarning, recover
    from .interrupt import interruptible
    from .observe import Failure, from_exception, from_response, from_rpc
    from .retry import RecoveryError, retry, retry_sync
    from .runtime import (
        Call,
        Clock,
        Failed,
        RawOutcome,
        Response as Response,  # deprecated: the former name of RawOutcome
        Run,
        Runtime,
        Step,
        StepReport,
        SystemClock,
        VirtualClock,
    )
    from .scenario import ScenarioError, ScenarioOutput, run_scenario
    from .store import MemoryStore, SqliteStore, StoreError


def __getattr__(name: str) -> Any:
    if name == "Response":  # the former name of RawOutcome
        runtime = _importlib.import_module(".runtime", __name__)
        _warnings.warn(runtime._RESPONSE_DEPRECATED, DeprecationWarning, stacklevel=2)
        return runtime.RawOutcome
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    loaded = _importlib.import_module(f".{module}", __name__)
    for lazy, source in _LAZY.items():
        if source == module:
            globals()[lazy] = getattr(loaded, lazy)
    return globals()[name]


def __dir__() -> "list[str]":
    return sorted(set(globals()) | set(_LAZY))


class _Package(_ModuleType):
    """The package's module type: importing the submodule `agent_recovery.retry`
    (lazily, or by a caller) binds the package attribute `retry` to that module;
    keep it the function, as it was when every name was imported eagerly."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name == "retry" and isinstance(value, _ModuleType):
            value = value.retry
        super().__setattr__(name, value)


_sys.modules[__name__].__class__ = _Package


__all__ = [
    "Call",
    "Clock",
    "Failed",
    "RawOutcome",
    "Run",
    "Runtime",
    "ScenarioError",
    "ScenarioOutput",
    "Step",
    "StepReport",
    "SystemClock",
    "VirtualClock",
    "interruptible",
    "run_scenario",
    "CodeInfo",
    "Context",
    "Decision",
    "Envelope",
    "Failure",
    "KeyNotUsedWarning",
    "Limits",
    "MAX_ID_BYTES",
    "MemoryStore",
    "Policy",
    "PolicyConfig",
    "PolicyError",
    "PolicyHandle",
    "PolicyInfo",
    "PolicyRuntimeError",
    "RecoveryError",
    "SqliteStore",
    "StoreError",
    "SwapError",
    "from_exception",
    "from_response",
    "from_rpc",
    "observation_from",
    "recover",
    "reference_path",
    "retry",
    "retry_sync",
]
