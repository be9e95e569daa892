"""What the Python template costs next to the reference, in the Python host.

    python examples/policy-python/measure.py target/policy-python/policy_python.wasm

Prints, for the reference and the template: the size, the time of
`Policy.load` (compiling; set AGENT_RECOVERY_COMPILE_CACHE=0 for a cold
compile), and the time per `decide_json` over examples/observations/ (best
of 5 rounds of 10 passes).
"""

import json
import pathlib
import sys
import time

from agent_recovery import Policy

ROOT = pathlib.Path(__file__).resolve().parents[2]


def main() -> None:
    observations = [p.read_text() for p in sorted((ROOT / "examples" / "observations").glob("*.json"))]
    context = json.dumps({"attempt": 1, "seed": 7})
    for name, source in [("reference", None), ("template", sys.argv[1])]:
        start = time.perf_counter()
        policy = Policy.load(source)
        load_ms = (time.perf_counter() - start) * 1000
        for obs in observations:  # warm up
            policy.decide_json(obs, context)
        rounds = []
        for _ in range(5):
            start = time.perf_counter()
            for _ in range(10):
                for obs in observations:
                    policy.decide_json(obs, context)
            rounds.append(time.perf_counter() - start)
        per_call_us = min(rounds) / (10 * len(observations)) * 1e6
        size = policy.describe()["size"]
        print(f"{name}: {size} bytes, load {load_ms:.0f} ms, {per_call_us:.0f} us per decide_json "
              f"({len(observations)} observations)")


if __name__ == "__main__":
    main()
