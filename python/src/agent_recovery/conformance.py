"""Conformance driver: JSON Lines in, the component's own text out.

    python -m agent_recovery.conformance [--component PATH] < cases.jsonl

One input line, one output line, in order:

    {"op":"classify","observation":"<json text>"}
    {"op":"decide","observation":"<text>","context":"<text>"}
    {"op":"key","run_id":"..","step_id":"..","tool":"..","args":"<text>"}
    {"op":"backoff","call":"tool","attempt":1,"seed":7}          (optional "config": {..})
    {"op":"render","envelope":"<text>","format":"jsonrpc-error","options":"<text>"}

Output: the component's output text unchanged (for `backoff`, the delay in
decimal), or `ERROR <kind> <message>` when the policy (or the host, for a bad
line) refuses the input, or `ERROR runtime_<kind> <message>` when the component
itself fails (`runtime_trap`, `runtime_out_of_fuel`, ...), as the Rust driver
does. Written as UTF-8 bytes with `\\n`, so the output of the
Rust, Node and Python drivers compares byte for byte. Exit status 0 when every
line was answered (errors included), 2 when the component cannot be loaded.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import IO, Any, Dict, List, Optional

from .errors import PolicyError, PolicyRuntimeError
from .policy import Policy


def _text(line: Dict[str, Any], name: str, default: Optional[str] = None) -> str:
    value = line.get(name, default)
    if isinstance(value, str):
        return value
    if value is None:
        raise PolicyError("invalid_argument", f"member {name!r} is missing; add it as JSON text")
    raise PolicyError(
        "invalid_argument",
        f"member {name!r} must be JSON text (a string), got {type(value).__name__}; encode it",
    )


def answer(policy: Policy, line: Dict[str, Any]) -> str:
    """The output line (without newline) for one parsed input line."""
    op = line.get("op")
    if op == "classify":
        return policy.classify_json(_text(line, "observation"))
    if op == "decide":
        return policy.decide_json(_text(line, "observation"), _text(line, "context", "{}"))
    if op == "key":
        return policy.key(
            _text(line, "run_id"), _text(line, "step_id"), _text(line, "tool"), _text(line, "args")
        )
    if op == "backoff":
        config = line.get("config")
        if isinstance(config, str):
            config = json.loads(config) if config.strip() else None
        return str(policy.backoff(line.get("call"), line.get("attempt"), line.get("seed"), config))  # type: ignore[arg-type]
    if op == "render":
        return policy.render_json(
            _text(line, "envelope"), _text(line, "format"), _text(line, "options", "")
        )
    raise PolicyError(
        "invalid_argument",
        f"op {op!r} is not one of classify, decide, key, backoff, render; use one of those",
    )


def run(policy: Policy, stdin: IO[bytes], stdout: IO[bytes]) -> int:
    """Answer every line of `stdin` on `stdout`; return how many lines were read."""
    count = 0
    for number, raw in enumerate(stdin, start=1):
        if not raw.strip():
            continue
        count += 1
        try:
            try:
                line = json.loads(raw)
            except ValueError as e:
                raise PolicyError(
                    "invalid_json", f"input line {number} is not JSON ({e}); send one object per line"
                ) from None
            if not isinstance(line, dict):
                raise PolicyError(
                    "invalid_json", f"input line {number} is not a JSON object; send one object per line"
                )
            out = answer(policy, line)
        except PolicyError as e:
            out = f"ERROR {e.kind} {e.message}"
        except PolicyRuntimeError as e:  # the component failed, not the input
            out = f"ERROR runtime_{e.kind} {e.message}"
        except ValueError as e:  # a `config` member that is not JSON
            out = f"ERROR invalid_config {e}"
        stdout.write(out.encode("utf-8") + b"\n")
        stdout.flush()
    return count


def main(argv: Optional[List[str]] = None) -> int:
    """Entry point of `python -m agent_recovery.conformance`."""
    parser = argparse.ArgumentParser(
        prog="python -m agent_recovery.conformance",
        description="Answer JSON Lines conformance cases with a policy component.",
    )
    parser.add_argument("--component", help="a component file (default: the packaged reference)")
    args = parser.parse_args(argv)
    try:
        policy = Policy.load(args.component)
    except PolicyRuntimeError as e:
        print(f"error: {e.message}", file=sys.stderr)
        return 2
    run(policy, sys.stdin.buffer, sys.stdout.buffer)
    return 0


if __name__ == "__main__":
    sys.exit(main())
