#!/usr/bin/env python3
"""Lines of each host's recovery runtime, by part (what `wc -l` counts).

    python3 scripts/host-lines.py [--json]

The runtime of a host is what it runs around the loop component: the driver,
the run/step API (the door included), dead letters, journal and recover, the
telemetry glue, the retry helper and the scenario runner. Stores, policy
loading and the framework adapters are not counted. Every file of a set must
exist, so a renamed file fails the count instead of silently leaving it.
"""

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

PARTS = {
    "rust": {
        "driver": ["host/src/runtime/driver.rs", "host/src/runtime/driver_async.rs", "host/src/runtime/effects.rs",
                   "host/src/runtime/component.rs", "host/src/runtime/interrupt.rs", "host/src/runtime/clock.rs"],
        "run/step API": ["host/src/runtime/mod.rs", "host/src/runtime/run.rs", "host/src/runtime/step.rs",
                         "host/src/runtime/names.rs", "host/src/runtime/decision_log.rs", "host/src/door/*.rs"],
        "dead letters": ["host/src/runtime/deadletters.rs"],
        "journal and recover": ["host/src/runtime/durable.rs"],
        "telemetry glue": ["host/src/runtime/telemetry.rs"],
        "retry helper": ["host/src/retry.rs", "host/src/retry/*.rs"],
        "scenarios": ["host/src/runtime/scenario.rs"],
    },
    "node": {
        "driver": ["node/src/loop.js"],
        "run/step API": ["node/src/runtime.js", "node/src/run.js", "node/src/step.js", "node/src/outcome.js",
                         "node/src/recover.js"],
        "dead letters": ["node/src/deadletters.js"],
        "journal and recover": ["node/src/durable.js"],
        "telemetry glue": ["node/src/telemetry.js"],
        "retry helper": ["node/src/retry.js"],
        "scenarios": ["node/src/scenario.js"],
    },
    "python": {
        "driver": ["python/src/agent_recovery/_loop.py", "python/src/agent_recovery/_offloop.py",
                   "python/src/agent_recovery/interrupt.py"],
        "run/step API": ["python/src/agent_recovery/runtime.py", "python/src/agent_recovery/door.py",
],
        "dead letters": ["python/src/agent_recovery/deadletters.py"],
        "journal and recover": ["python/src/agent_recovery/durable.py"],
        "telemetry glue": ["python/src/agent_recovery/telemetry.py", "python/src/agent_recovery/_lanes.py"],
        "retry helper": ["python/src/agent_recovery/retry.py"],
        "scenarios": ["python/src/agent_recovery/scenario.py"],
    },
}


def files(pattern):
    found = sorted(ROOT.glob(pattern))
    if not found:
        sys.exit(f"host-lines: {pattern} matches no file; update scripts/host-lines.py")
    return found


def lines(path):
    with open(path, "rb") as f:
        return f.read().count(b"\n")


def main():
    counts = {lang: {part: sum(lines(p) for pat in pats for p in files(pat)) for part, pats in parts.items()}
              for lang, parts in PARTS.items()}
    if "--json" in sys.argv[1:]:
        print(json.dumps({lang: dict(c, total=sum(c.values())) for lang, c in counts.items()}))
        return
    names = list(next(iter(PARTS.values())))
    print("| part | " + " | ".join(PARTS) + " |")
    print("|---|" + "---:|" * len(PARTS))
    for name in names:
        print(f"| {name} | " + " | ".join(f"{counts[lang][name]:,}" for lang in PARTS) + " |")
    print("| **total** | " + " | ".join(f"**{sum(counts[lang].values()):,}**" for lang in PARTS) + " |")


if __name__ == "__main__":
    main()
