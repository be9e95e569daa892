#!/usr/bin/env python3
"""Time the SQLite store in Rust, Python and Node, with synchronous FULL and NORMAL.

Each language's store worker (the same ones the cross-process tests drive)
opens a fresh file and answers one `bench` op: ROUNDS read-then-compare-and-set
increments of one key, then ROUNDS reads; it reports the mean microseconds of
each. Prints a Markdown table.

    cargo build --release -p agent-recovery --example store_worker
    (cd node && npm ci)
    .venv/bin/python tests/store/measure.py [--rounds 2000]

Run from the repository root, with the Python package importable (the venv
of scripts/test-all.sh, or PYTHONPATH=python/src).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def command(language: str, path: Path, synchronous: str) -> list[str]:
    if language == "rust":
        target = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
        return [str(target / "release" / "examples" / "store_worker"), str(path), synchronous]
    if language == "python":
        return [sys.executable, str(ROOT / "python" / "tests" / "store_worker.py"), str(path), synchronous]
    return [shutil.which("node") or "node", str(ROOT / "node" / "test" / "store_worker.mjs"), str(path), synchronous]


def bench(language: str, synchronous: str, rounds: int, workdir: Path) -> dict[str, float]:
    path = workdir / f"{language}-{synchronous}.db"
    op = json.dumps({"op": "bench", "rounds": rounds})
    proc = subprocess.run(command(language, path, synchronous), input=op + "\n", capture_output=True, text=True, check=True)
    lines = proc.stdout.splitlines()
    if len(lines) != 2 or json.loads(lines[0]) != {"ready": True}:
        raise SystemExit(f"{language} worker: unexpected output {proc.stdout!r} {proc.stderr!r}")
    answer: dict[str, float] = json.loads(lines[1])
    if "error" in answer:
        raise SystemExit(f"{language} worker: {answer}")
    return answer


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2000)
    args = parser.parse_args()
    print("| language | synchronous | compare-and-set (get + CAS), mean | get, mean |")
    print("|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for synchronous in ("full", "normal"):
            for language in ("rust", "python", "node"):
                r = bench(language, synchronous, args.rounds, Path(tmp))
                print(f"| {language} | {synchronous.upper()} | {r['cas_us']:.0f} µs | {r['get_us']:.1f} µs |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
