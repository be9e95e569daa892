#!/usr/bin/env python3
"""The cost of N units of work from two callgrind runs that differ by N.

    python3 scripts/callgrind-diff.py SMALL.out LARGE.out N [TOP]

Reads both profiles with `callgrind_annotate --threshold=100`, subtracts
SMALL from LARGE function by function (start-up cancels out), divides by N,
and prints the total, the instructions by object (binary or library; `???`
is code without symbols, such as the Cranelift code of a wasm guest) and the
TOP functions (default 30).
"""

import collections
import re
import subprocess
import sys


def load(path):
    out = subprocess.run(["callgrind_annotate", "--threshold=100", path], capture_output=True, text=True, check=True).stdout
    costs = collections.Counter()
    for line in out.splitlines():
        m = re.match(r"\s*([\d,]+) \([ \d.]+%\)\s+(.*)$", line)
        if m and "PROGRAM TOTALS" not in line:
            costs[m.group(2)] += int(m.group(1).replace(",", ""))
    return costs


def main():
    if len(sys.argv) not in (4, 5):
        sys.exit(__doc__)
    small, large, n = load(sys.argv[1]), load(sys.argv[2]), int(sys.argv[3])
    top = int(sys.argv[4]) if len(sys.argv) == 5 else 30
    diff = collections.Counter({k: v - small.get(k, 0) for k, v in large.items()})
    print(f"per unit: {sum(diff.values()) / n:,.0f} instructions")
    by_object = collections.Counter()
    for name, v in diff.items():
        m = re.search(r"\[([^\]]*)\]\s*$", name)
        by_object[m.group(1) if m else "?"] += v
    print("\nby object:")
    for name, v in by_object.most_common(12):
        print(f"{v / n:>12,.0f}  {name}")
    print("\nby function:")
    for name, v in diff.most_common(top):
        print(f"{v / n:>12,.0f}  {name[-160:]}")


if __name__ == "__main__":
    main()
