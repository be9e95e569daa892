"""Write tests/equivalence/payments.json: the grid on which the payments policy
document (examples/payments-policy/policy.yaml) and the compiled payments
policy (examples/payments-policy/src/lib.rs) must decide byte for byte alike.

    python3 tests/equivalence/generate.py

The grid is every observation of the shared vectors (tests/vectors/*.json) and
of examples/observations/, plus a few of the policy's own, times a set of
decide contexts. It holds no decisions: the Rust, Node and Python suites load
both policies and compare what they decide, live. A test fails when a vector
was added and the grid was not written again.
"""

import json
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[2]
OUT = ROOT / "tests" / "equivalence" / "payments.json"

# The payments policy's own inputs: its 409, its 503 and its Retry-After.
EXTRA = [
    {"source": "http", "status": 409},
    {"source": "http", "status": 503},
    {"source": "http", "status": 429, "headers": {"retry-after": "25"}},
    {"source": "timeout", "phase": "read"},
]

# Every context sets a seed, so that the jitter is the same in both policies.
CONTEXTS = [
    {"attempt": 1, "seed": 11},
    {"attempt": 1, "seed": 1, "idempotent": True},
    {"call": "llm", "attempt": 1, "seed": 3, "idempotent": True},
    {"call": "llm", "attempt": 2, "seed": 3, "idempotent": True},
    {"call": "agent", "attempt": 2, "seed": 9, "idempotent": True, "elapsed_ms": 19000},
    {"call": "tool", "attempt": 3, "seed": 7, "idempotent": False, "compensations_pending": 1},
    {"attempt": 1, "seed": 1, "idempotent": True,
     "config": {"retry_budget_ms": 600000, "tool": {"max_attempts": 50}}},
    {"attempt": 1, "seed": 7, "config": {"breaker": {"failure_threshold": 5, "open_ms": 1000}}},
    {"attempt": 1, "seed": 7, "config": {"breaker": {"failure_threshold": 1, "open_ms": 120000}}},
    {"attempt": 1, "seed": 4, "config": {"breaker": {"failure_threshold": 0}}},
    {"attempt": 2, "seed": 5, "idempotent": True,
     "config": {"llm": {"base_ms": 10, "cap_ms": 100}, "retry_budget_ms": 500}},
    {"attempt": 1, "seed": 2, "fallback_available": False, "checkpoint_available": False,
     "now_ms": 1700000000000},
]


def observations():
    out = list(EXTRA)
    for folder in ["tests/vectors", "examples/observations"]:
        for path in sorted((ROOT / folder).glob("*.json")):
            v = json.loads(path.read_text(encoding="utf-8"))
            if isinstance(v, list):
                out.extend(case.get("observation") for case in v)
            else:
                out.append(v)
    return out


def main():
    vector = json.loads((ROOT / "tests/vectors/documents/payments.json").read_text(encoding="utf-8"))
    grid = {
        "name": "payments: the policy document against the compiled policy",
        "source": "python3 tests/equivalence/generate.py; the document is examples/payments-policy/policy.yaml, "
        "the compiled policy the package payments-policy (artifacts.json)",
        "document": vector["document"],
        "compiled": "payments-policy",
        "contexts": CONTEXTS,
        "observations": observations(),
    }
    OUT.write_text(json.dumps(grid, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"{OUT.relative_to(ROOT)}: {len(grid['observations'])} observations x {len(CONTEXTS)} contexts")


if __name__ == "__main__":
    main()
