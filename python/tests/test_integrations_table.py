"""scripts/frameworks_table.py: its rows are what the scripted server counted,
and rows measured elsewhere (`--rows`) are added to the table.

Expected values: the scenario's script (a 402 decline, never retried, charges
nothing) and the row format the Node script shares.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "frameworks_table.py"
NODE_ROW = {"framework": "vercel-ai", "scenario": "declined", "mode": "with", "model_requests": 2,
            "tool_requests": 1, "side_effects": 0, "outcome": "completed, model told the charge failed"}


def table(*args: str) -> str:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, check=True,
                          cwd=ROOT).stdout


def test_a_decline_row_per_mode_and_rows_from_elsewhere(tmp_path: Path) -> None:
    extra = tmp_path / "node.json"
    extra.write_text(json.dumps([NODE_ROW]))
    rows = json.loads(table("--framework", "langgraph", "--scenario", "declined", "--json", "--rows", str(extra)))
    without, with_, node = rows
    assert without == {"framework": "langgraph", "scenario": "declined", "mode": "without", "model_requests": 1,
                       "tool_requests": 1, "side_effects": 0, "outcome": "raised HTTPStatusError"}
    assert with_ == {"framework": "langgraph", "scenario": "declined", "mode": "with", "model_requests": 2,
                     "tool_requests": 1, "side_effects": 0, "outcome": "completed, model told the charge failed"}
    assert node == NODE_ROW


def test_the_markdown_table_has_the_shared_columns(tmp_path: Path) -> None:
    extra = tmp_path / "node.json"
    extra.write_text(json.dumps([NODE_ROW]))
    lines = table("--framework", "langgraph", "--scenario", "declined", "--rows", str(extra)).splitlines()
    assert lines[0] == "| framework | scenario | mode | model_requests | tool_requests | side_effects | outcome |"
    assert lines[-1] == "| vercel-ai | declined | with | 2 | 1 | 0 | completed, model told the charge failed |"
    assert len(lines) == 5


def test_a_bad_rows_file_is_refused_with_a_hint(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"framework": "x"}))
    done = subprocess.run([sys.executable, str(SCRIPT), "--framework", "langgraph", "--scenario", "declined",
                           "--rows", str(bad)], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode != 0 and "bad.json is not a JSON array of rows" in done.stderr and "--json" in done.stderr
