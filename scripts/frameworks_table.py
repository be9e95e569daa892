#!/usr/bin/env python3
"""The same scripted failures, per agent framework, without and with its adapter.

    python scripts/frameworks_table.py                  # the markdown table
    python scripts/frameworks_table.py --json           # the rows, one JSON array
    python scripts/frameworks_table.py --rows node.json # add rows measured elsewhere (same format)
    python scripts/frameworks_table.py --framework langgraph --scenario quota

Each row: framework, scenario, mode ("without" | "with"; the persistent 429
with the SDK's retries left on under the adapter runs "with" only), model_requests and
tool_requests (what the scripted server received), side_effects (charges it
applied) and the run's outcome. The runs: tests/frameworks/scenarios.py, on
the scripts of tests/frameworks/scenarios.json (the Node rows' script,
node/bench/frameworks-table.mjs, runs the same ones); the server:
tests/frameworks/scripted_server.py (127.0.0.1). Runs the
frameworks that are installed (`pip install -e './python[test]'` has all but
Google ADK, which needs a venv of its own: `pip install -e
'./python[google-adk]'`, then `--framework google-adk --rows others.json`).
Real clocks: the runs wait out the scripted Retry-After and backoffs.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import sys
from pathlib import Path
from typing import Any, Dict, List

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "frameworks"))

from scenarios import FRAMEWORKS, MODES, MODULES, SCENARIOS, run  # noqa: E402
from scripted_server import ScriptedServer  # noqa: E402

COLUMNS = ["framework", "scenario", "mode", "model_requests", "tool_requests", "side_effects", "outcome"]


def table(rows: List[Dict[str, Any]]) -> str:
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    for row in rows:
        lines.append("| " + " | ".join(str(row[c]) for c in COLUMNS) + " |")
    return "\n".join(lines)


def read_rows(path: str) -> List[Dict[str, Any]]:
    rows = json.loads(Path(path).read_text())
    if not isinstance(rows, list) or not all(isinstance(r, dict) and set(COLUMNS) <= set(r) for r in rows):
        raise SystemExit(f"error: {path} is not a JSON array of rows with {', '.join(COLUMNS)}; "
                         "write it with --json (or the Node script's --json)")
    return rows


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # a parent package is missing
        return False


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print the rows as a JSON array")
    parser.add_argument("--rows", action="append", default=[], help="a JSON file of more rows (repeatable)")
    parser.add_argument("--framework", action="append", choices=sorted(FRAMEWORKS), help="only these frameworks")
    parser.add_argument("--scenario", action="append", choices=list(SCENARIOS), help="only these scenarios")
    args = parser.parse_args()
    extra = [row for path in args.rows for row in read_rows(path)]  # a bad file fails before the runs
    installed = [f for f in FRAMEWORKS if _installed(MODULES[f])]
    missing = sorted(set(args.framework or []) - set(installed))
    if missing:
        raise SystemExit(f"error: {', '.join(missing)} not installed; "
                         "pip install -e './python[<framework>]' in this venv, or leave --framework out")
    if not args.framework and len(installed) < len(FRAMEWORKS):
        print(f"note: not installed, left out: {', '.join(f for f in FRAMEWORKS if f not in installed)}",
              file=sys.stderr)
    rows: List[Dict[str, Any]] = []
    # Some frameworks print to stdout (LiteLLM's hints): keep stdout for the table.
    with ScriptedServer() as server, contextlib.redirect_stdout(sys.stderr):
        for framework in args.framework or installed:
            for scenario in args.scenario or list(SCENARIOS):
                for mode in MODES[scenario]:
                    rows.append(run(server, framework, scenario, mode))
    rows.extend(extra)
    print(json.dumps(rows, indent=1) if args.json else table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
