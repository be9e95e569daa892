"""scripts/frameworks_table.py: its rows are what the scripted server counted,
and rows measured elsewhere (`--rows`) are added to the table.

Expected values: the scenario's script (a 402 decline, never retried, charges
nothing), the row format the Node script shares, the policy's attempt limit
for an LLM call and the OpenAI client's own retry count.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from openai import DEFAULT_MAX_RETRIES

from agent_recovery import Policy

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


def test_under_a_persistent_429_one_layer_owns_retries() -> None:
    max_attempts = Policy.load().decide({"source": "http", "status": 429, "call": "llm"}, {"attempt": 1})["max_attempts"]
    rows = json.loads(table("--framework", "langgraph", "--scenario", "persistent_429",
                            "--scenario", "persistent_429_framework_retries_on", "--json"))
    counts = {(r["scenario"], r["mode"]): r["model_requests"] for r in rows}
    assert counts == {
        ("persistent_429", "without"): 1 + DEFAULT_MAX_RETRIES,  # the client's retries alone
        ("persistent_429", "with"): max_attempts,  # the policy's, and only the policy's
        ("persistent_429_framework_retries_on", "with"): max_attempts * (1 + DEFAULT_MAX_RETRIES),  # the product
    }
    assert {r["outcome"] for r in rows if r["mode"] == "with"} == {"raised RecoveryError (llm.http.429_rate_limited)"}


def test_a_bad_rows_file_is_refused_with_a_hint(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"framework": "x"}))
    done = subprocess.run([sys.executable, str(SCRIPT), "--framework", "langgraph", "--scenario", "declined",
                           "--rows", str(bad)], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode != 0 and "bad.json is not a JSON array of rows" in done.stderr and "--json" in done.stderr
