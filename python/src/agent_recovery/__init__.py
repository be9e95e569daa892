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

from .errors import PolicyError, PolicyRuntimeError, SwapError
from .handle import PolicyHandle
from .adapters import observation_from
from .limits import Limits
from .observe import Failure, from_exception, from_response, from_rpc
from .policy import Policy, reference_path
from .retry import RecoveryError, retry, retry_sync
from .runtime import (
    Call,
    Clock,
    Failed,
    Response,
    Run,
    Runtime,
    Step,
    StepReport,
    SystemClock,
    VirtualClock,
)
from .scenario import ScenarioError, ScenarioOutput, run_scenario
from .store import MemoryStore, SqliteStore, StoreError
from .types import CodeInfo, Context, Decision, Envelope, PolicyConfig, PolicyInfo

__all__ = [
    "Call",
    "Clock",
    "Failed",
    "Response",
    "Run",
    "Runtime",
    "ScenarioError",
    "ScenarioOutput",
    "Step",
    "StepReport",
    "SystemClock",
    "VirtualClock",
    "run_scenario",
    "CodeInfo",
    "Context",
    "Decision",
    "Envelope",
    "Failure",
    "Limits",
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
    "reference_path",
    "retry",
    "retry_sync",
]
