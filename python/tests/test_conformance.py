"""The JSON Lines conformance driver: one line out per line in, the component's bytes."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import agent_recovery
from agent_recovery import Policy
from agent_recovery.conformance import run

OBS_429 = '{"source":"http","status":429,"headers":{"retry-after":"2"}}'
LINES = [
    {"op": "classify", "observation": '{"source":"http","status":503}'},
    {"op": "decide", "observation": OBS_429, "context": '{"call":"tool","attempt":1,"seed":7}'},
    {"op": "key", "run_id": "r", "step_id": "s", "tool": "t", "args": '{"b":1,"a":"é"}'},
    {"op": "backoff", "call": "tool", "attempt": 3, "seed": 7},
    {"op": "backoff", "call": "llm", "attempt": 2, "seed": "18446744073709551615"},
    {"op": "render", "envelope": '{"code":"tool.http.503_unavailable","message":"m","hint":"h"}',
     "format": "coordinator-text", "options": ""},
    {"op": "classify", "observation": "{"},
    {"op": "decide", "observation": OBS_429, "context": '{"attempt":0}'},
    {"op": "fly"},
]


def expected(policy: Policy) -> list:
    out = []
    for line in LINES:
        try:
            op = line["op"]
            if op == "classify":
                out.append(policy.classify_json(line["observation"]))
            elif op == "decide":
                out.append(policy.decide_json(line["observation"], line["context"]))
            elif op == "key":
                out.append(policy.key(line["run_id"], line["step_id"], line["tool"], line["args"]))
            elif op == "backoff":
                out.append(str(policy.backoff(line["call"], line["attempt"], int(line["seed"]))))
            elif op == "render":
                out.append(policy.render_json(line["envelope"], line["format"], line["options"]))
            else:
                out.append(None)
        except agent_recovery.PolicyError as e:
            out.append(f"ERROR {e.kind} {e.message}")
    return out


def stdin_bytes() -> bytes:
    return b"".join(json.dumps(line, ensure_ascii=False).encode() + b"\n" for line in LINES)


def check(policy: Policy, output: bytes) -> None:
    lines = output.decode("utf-8").split("\n")
    assert lines[-1] == "" and len(lines) - 1 == len(LINES)
    for want, got in zip(expected(policy), lines[:-1], strict=True):
        if want is not None:
            assert got == want
    assert lines[6].startswith("ERROR invalid_json ")
    assert lines[7].startswith("ERROR invalid_context attempt must be at least 1")
    assert lines[8].startswith("ERROR invalid_argument op 'fly'")


def test_in_process(policy: Policy) -> None:
    out = io.BytesIO()
    assert run(policy, io.BytesIO(stdin_bytes() + b"\n"), out) == len(LINES)
    check(policy, out.getvalue())


def test_as_a_command(policy: Policy) -> None:
    src = str(Path(agent_recovery.__file__).resolve().parents[1])
    env = dict(os.environ, PYTHONPATH=src + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run(
        [sys.executable, "-m", "agent_recovery.conformance"],
        input=stdin_bytes() + b"not json\n",
        capture_output=True,
        env=env,
        timeout=300,
        check=True,
    )
    lines = proc.stdout.split(b"\n")
    check(policy, b"\n".join(lines[: len(LINES)]) + b"\n")
    assert lines[len(LINES)].startswith(b"ERROR invalid_json input line 10 is not JSON")


def test_bad_component_exits_2(tmp_path: Path) -> None:
    bad = tmp_path / "bad.wasm"
    bad.write_bytes(b"nope")
    src = str(Path(agent_recovery.__file__).resolve().parents[1])
    proc = subprocess.run(
        [sys.executable, "-m", "agent_recovery.conformance", "--component", str(bad)],
        input=b"", capture_output=True, env=dict(os.environ, PYTHONPATH=src), timeout=120,
    )
    assert proc.returncode == 2 and proc.stderr.startswith(b"error: ")
