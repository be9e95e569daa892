"""`python -m agent_recovery.simulate`: the scenario batch driver of the
cross-runtime conformance check (tests/conformance/run.py, phase 3).

Reads stdin, one JSON array of scenarios per line; runs that line's scenarios
in order against one fresh `MemoryStore`; prints one line per scenario: the
output of `run_scenario` (`ScenarioOutput.to_json()`, the component's bytes),
or `{"error":"invalid"}` / `{"error":"runtime"}` (the `ScenarioError` kind).
A line that is not a JSON array stops it with exit status 2. The Rust
(`host/examples/simulate_batch.rs`) and Node (`node/scripts/scenarios.mjs`)
drivers speak the same protocol.
"""

from __future__ import annotations

import sys

from .scenario import main

__all__ = ["main"]

if __name__ == "__main__":
    sys.exit(main())
