"""Scenarios for the loop phase of the conformance check.

Every loop vector (`tests/loops/*.json`, its runs as one line) plus `count`
random scenarios drawn with a fixed seed: steps on a small pool of targets (so
breakers open and half-open across steps and scenarios), fallback chains,
compensations, checkpoints, fan-outs, attempt budgets, breaker thresholds,
deadlines and cancellations, with outcomes taken from the example observations
(real provider payloads), a few inline ones and "ok". The expected output is
not computed here: run.py only checks that Rust, Node and Python print the
same bytes for each scenario.
"""

import json
import pathlib
import random

ROOT = pathlib.Path(__file__).resolve().parents[2]

INLINE = [
    {"source": "http", "status": 503},
    {"source": "http", "status": 500},
    {"source": "http", "status": 429, "headers": {"retry-after": "1"}},
    {"source": "http", "status": 400},
    {"source": "http", "status": 404},
    {"source": "http", "status": 409},
    {"source": "http", "status": 304},
    {"source": "http", "status": 200, "body": {"ok": True}},
    {"source": "network", "code": "ECONNRESET"},
    {"source": "timeout", "phase": "total", "after_ms": 30000},
]


def observations():
    obs = [json.loads(p.read_text()) for p in sorted((ROOT / "examples" / "observations").glob("*.json"))]
    return obs + INLINE


def vector_lines():
    for p in sorted((ROOT / "tests" / "loops").glob("*.json")):
        v = json.loads(p.read_text())
        yield [r["scenario"] for r in v["runs"]]


def _outcomes(rng, pool, n):
    return [("ok" if rng.random() < 0.3 else rng.choice(pool)) for _ in range(n)]


def _step(rng, pool, sid, branch=False):
    s = {"id": sid, "tool": rng.choice(["search", "payments.charge", "llm.chat", "crm.update"]),
         "target": rng.choice(["a", "b", "c", "d"]), "outcomes": _outcomes(rng, pool, rng.randint(2, 8))}
    if rng.random() < 0.7:
        s["call"] = rng.choice(["tool", "llm", "agent"])
    if rng.random() < 0.5:
        s["args"] = {"n": rng.randint(0, 3)}
    if rng.random() < 0.4:
        s["fallbacks"] = [{"target": t, "outcomes": _outcomes(rng, pool, rng.randint(1, 4))}
                          for t in rng.sample(["e", "f", "g"], rng.randint(1, 2))]
    if rng.random() < 0.4:
        s["side_effect"] = True
        if rng.random() < 0.8:
            s["compensation"] = {"outcomes": _outcomes(rng, pool, rng.randint(1, 4))}
    if rng.random() < 0.2:
        s["checkpoint"] = rng.random() < 0.7
    if rng.random() < 0.2:
        s["idempotent"] = rng.random() < 0.5
    return s


def _scenario(rng, pool, run_id, now):
    cfg = {}
    if rng.random() < 0.5:
        cfg["breaker"] = {"failure_threshold": rng.randint(1, 4), "open_ms": rng.choice([1000, 5000, 30000])}
    if rng.random() < 0.3:
        cfg["attempt_budget"] = rng.randint(1, 6)
    if rng.random() < 0.15:
        cfg["deadline_ms"] = rng.choice([100, 2000, 20000])
    if rng.random() < 0.15:
        cfg["attempt_timeout_ms"] = rng.choice([10, 1000])
    steps, n = [], 0
    for _ in range(rng.randint(1, 4)):
        n += 1
        if rng.random() < 0.2:
            k = rng.randint(2, 3)
            branches = [_step(rng, pool, f"s{n}-b{i}") for i in range(k)]
            steps.append({"id": f"s{n}", "fanout": {"min_results": rng.randint(1, k), "branches": branches}})
        else:
            steps.append(_step(rng, pool, f"s{n}"))
    s = {"run_id": run_id, "seed": rng.randint(0, 2**32), "now_ms": now, "config": cfg, "steps": steps}
    if rng.random() < 0.1:
        s["cancel_at_ms"] = rng.choice([0, 50, 400])
    return s


def generated_lines(count, seed):
    rng = random.Random(seed)
    pool = observations()
    for i in range(count):
        now = 1767225600000 + i * 1000
        runs = [_scenario(rng, pool, f"g{i}", now)]
        if rng.random() < 0.3:
            runs.append(_scenario(rng, pool, f"g{i}b", now + rng.choice([500, 10000, 60000])))
        yield runs
