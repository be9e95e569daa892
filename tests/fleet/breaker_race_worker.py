"""A worker of the breaker race (tests/fleet/breaker_race.py):

    python breaker_race_worker.py STORE DIR INDEX TRIALS

opens the runtime on STORE (a redis:// URL or an SQLite file) with the system
clock and, for each trial T in 0..TRIALS, runs one step on the target
`race-T` (threshold 3, one attempt per key, `on_open: fail`). Its operation
is called once the step has read the breaker and passed its gate; it then
creates `DIR/T.INDEX.reached` and waits until `DIR/T.go` exists (the worker
with INDEX 8 waits for `DIR/T.late` instead), and fails with a 503. After the
step it creates `DIR/T.INDEX.done`. It prints one JSON line:
`{"outcomes": [..]}`, each step's outcome.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any, List

from agent_recovery.runtime import Call, Failed, Runtime, Step, SystemClock
from agent_recovery.store import SqliteStore, open_store

#: The worker whose failure arrives after the others finished.
LATE = 8


def wait_for(path: Path) -> None:
    while not path.exists():  # waiting for the harness, not timing
        time.sleep(0.002)


def main(argv: List[str]) -> int:
    if len(argv) != 5:
        print("usage: breaker_race_worker.py STORE DIR INDEX TRIALS", file=sys.stderr)
        return 2
    _, where, directory, index_text, trials_text = argv
    base, index, trials = Path(directory), int(index_text), int(trials_text)
    store: Any = open_store(where) if where.startswith("redis://") else SqliteStore(where, busy_timeout_s=10.0)
    runtime = Runtime(
        store=store,
        clock=SystemClock(),
        seed=index,
        config={"attempt_budget": 1, "journal": False, "breaker": {"failure_threshold": 3}},
    )
    outcomes = []
    for t in range(trials):
        go = base / (f"{t}.late" if index == LATE else f"{t}.go")

        def operation(c: Call, t: int = t, go: Path = go) -> Any:
            (base / f"{t}.{index}.reached").touch()
            wait_for(go)
            return Failed({"source": "http", "status": 503})

        run = runtime.run(f"race-{t}-{index}")
        report = run.step(Step(f"s{index}", "race.tool", operation, args={"w": index, "t": t}, target=f"race-{t}"))
        outcomes.append(report.outcome)
        (base / f"{t}.{index}.done").touch()
    print(json.dumps({"outcomes": outcomes}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
