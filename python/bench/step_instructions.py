"""Instructions per successful `Runtime` step, for callgrind (load-independent).

    valgrind --tool=callgrind --callgrind-out-file=A python python/bench/step_instructions.py 100
    valgrind --tool=callgrind --callgrind-out-file=B python python/bench/step_instructions.py 600
    python3 scripts/callgrind-diff.py A B 500      # per step, by object and by function

Runs N one-step runs (`runtime.run(id)` then one successful `step`: two
loop calls, the `run` input sent with the step, its read and claim with its
call) on a `MemoryStore` and a
virtual clock; the difference of two runs divided by the difference of N is
the cost of one, whatever the start-up (imports, compiling the component)
costs.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from agent_recovery import Runtime, VirtualClock  # noqa: E402
from agent_recovery.store import MemoryStore  # noqa: E402


def main() -> int:
    n = int(sys.argv[1])
    rt = Runtime(clock=VirtualClock(1_767_225_600_000), store=MemoryStore(), seed=7)
    for i in range(n):
        run = rt.run(f"r{i}")
        report = run.step(id="search", tool="search", call="tool", operation=lambda c: {"hits": 1})
        assert report.outcome == "ok", report
    return 0


if __name__ == "__main__":
    sys.exit(main())
