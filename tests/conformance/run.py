"""Run every conformance operation through Rust (wasmtime), Node (jco) and
Python (wasmtime-py) and fail on any byte difference in the output.

    python3 tests/conformance/run.py [--count N]

Phase 1 runs the generated operations (all vectors plus N synthetic
observations, classify and decide, keys, backoff, malformed inputs). Phase 2
renders every distinct envelope of phase 1 in every format. Phase 3 runs the
recovery loop: every loop vector and --loops random scenarios (loops.py)
through each runtime's scenario runner, one store per line. Each runtime's
driver prints the component's output text unchanged, so equal bytes mean equal
JSON.
"""

import argparse
import json
import os
import pathlib
import subprocess
import sys

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE))
import generate  # noqa: E402
import loops  # noqa: E402

FORMATS = ["jsonrpc-error", "mcp-tool-result", "a2a-task-status", "problem-json", "model-tool-result",
           "coordinator-text", "downstream-wrap"]


def drivers():
    cargo_target = os.environ.get("CARGO_TARGET_DIR", str(ROOT / "target"))
    rust = pathlib.Path(cargo_target) / "release" / "examples" / "conformance"
    return {
        "rust": [str(rust)],
        "node": ["node", str(ROOT / "node" / "scripts" / "conformance.mjs")],
        "python": [sys.executable, "-m", "agent_recovery.conformance"],
    }


def loop_drivers():
    cargo_target = os.environ.get("CARGO_TARGET_DIR", str(ROOT / "target"))
    rust = pathlib.Path(cargo_target) / "release" / "examples" / "simulate_batch"
    return {
        "rust": [str(rust)],
        "node": ["node", str(ROOT / "node" / "scripts" / "scenarios.mjs")],
        "python": [sys.executable, "-m", "agent_recovery.simulate"],
    }


def run(name, cmd, data: bytes) -> list[bytes]:
    proc = subprocess.run(cmd, input=data, capture_output=True, cwd=ROOT, timeout=1800)
    if proc.returncode != 0:
        sys.exit(f"conformance: the {name} driver failed (exit {proc.returncode}): {proc.stderr.decode(errors='replace')[-2000:]}")
    return proc.stdout.split(b"\n")[:-1] if proc.stdout.endswith(b"\n") else proc.stdout.split(b"\n")


def compare(phase, ops, outputs) -> int:
    names = list(outputs)
    n = len(ops)
    for name in names:
        if len(outputs[name]) != n:
            print(f"{phase}: {name} printed {len(outputs[name])} lines for {n} operations")
            return n
    diffs = 0
    for i in range(n):
        lines = {name: outputs[name][i] for name in names}
        if len(set(lines.values())) > 1:
            diffs += 1
            if diffs <= 5:
                print(f"{phase}: operation {i} differs: {json.dumps(ops[i])[:300]}")
                for name in names:
                    print(f"  {name:6}: {lines[name][:400].decode(errors='replace')}")
    return diffs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--count", type=int, default=3000)
    ap.add_argument("--loops", type=int, default=300, help="random loop scenarios (lines) in phase 3")
    ap.add_argument("--runtimes", default="rust,node,python")
    a = ap.parse_args()
    ds = {k: v for k, v in drivers().items() if k in a.runtimes.split(",")}
    ops1 = list(generate.ops(a.count, 20261122))
    data1 = "".join(json.dumps(o) + "\n" for o in ops1).encode()
    out1 = {name: run(name, cmd, data1) for name, cmd in ds.items()}
    d1 = compare("phase 1", ops1, out1)
    first = out1[next(iter(ds))]
    envelopes = sorted({line for op, line in zip(ops1, first) if op["op"] == "classify" and line.startswith(b"{")})
    ops2 = []
    for i, env in enumerate(envelopes):
        for f in FORMATS:
            ops2.append({"op": "render", "envelope": env.decode(), "format": f,
                         "options": json.dumps({"id": i, "task_id": f"t-{i}", "downstream_agent": "sub", "current_agent": "coord"})})
    data2 = "".join(json.dumps(o) + "\n" for o in ops2).encode()
    out2 = {name: run(name, cmd, data2) for name, cmd in ds.items()}
    d2 = compare("phase 2", ops2, out2)
    lines3 = list(loops.vector_lines()) + list(loops.generated_lines(a.loops, 20261123))
    ops3 = [s for line in lines3 for s in line]
    data3 = "".join(json.dumps(line) + "\n" for line in lines3).encode()
    lds = {k: v for k, v in loop_drivers().items() if k in ds}
    out3 = {name: run(name, cmd, data3) for name, cmd in lds.items()}
    d3 = compare("phase 3", ops3, out3)
    errors = sum(1 for line in first if line.startswith(b"ERROR"))
    total = len(ops1) + len(ops2)
    print(f"conformance: {total} operations ({len(ops1)} generated incl. {errors} expected errors, "
          f"{len(ops2)} renders) and {len(ops3)} loop scenarios ({len(lines3)} stores) "
          f"through {', '.join(ds)}: {d1 + d2 + d3} differences")
    if d1 + d2 + d3:
        sys.exit(1)


if __name__ == "__main__":
    main()
