#!/usr/bin/env python3
"""Where the bytes of a wasm32-wasip2 component go.

    python3 scripts/wasm-size.py <component.wasm>

Prints the sections of each core module in the component and, when the
module still has its `name` section, its code bytes by Rust crate and, for
the policy crate, by module (a generic instantiated for a policy type counts
as the policy's). The shipped component is stripped; for the breakdown build
an unstripped copy with the same profile:

    CARGO_TARGET_DIR=/tmp/names cargo build --release --target wasm32-wasip2 \\
        --config guest/release.toml --config 'profile.release.strip=false' -p agent-recovery-policy
    python3 scripts/wasm-size.py /tmp/names/wasm32-wasip2/release/agent_recovery_policy.wasm

Only the binary format is read (no wasm tool needed).
"""

import collections
import re
import sys

SECTION = {1: "type", 2: "import", 3: "func", 4: "table", 5: "memory", 6: "global", 7: "export",
           8: "start", 9: "elem", 10: "code", 11: "data", 12: "datacount"}


def leb(b, i):
    value = shift = 0
    while True:
        x = b[i]
        i += 1
        value |= (x & 0x7F) << shift
        shift += 7
        if x < 0x80:
            return value, i


def sections(b, i=8):
    while i < len(b):
        n, j = leb(b, i + 1)
        yield b[i], b[j:j + n]
        i = j + n


def string(b, i):
    n, i = leb(b, i)
    return b[i:i + n].decode("utf-8", "replace"), i + n


def core_module(m):
    sizes, bodies, names, imported = collections.Counter(), [], {}, 0
    for sid, p in sections(m):
        if sid == 0:
            name, k = string(p, 0)
            sizes["custom " + name] += len(p)
            while name == "name" and k < len(p):
                sub, (n, k2) = p[k], leb(p, k + 1)
                if sub == 1:  # function names
                    count, q = leb(p, k2)
                    for _ in range(count):
                        idx, q = leb(p, q)
                        names[idx], q = string(p, q)
                k = k2 + n
            continue
        sizes[SECTION.get(sid, str(sid))] += len(p)
        if sid == 2:  # imports: functions come first in the index space
            count, q = leb(p, 0)
            for _ in range(count):
                _, q = string(p, q)
                _, q = string(p, q)
                kind, q = p[q], q + 1
                if kind == 0:
                    _, q = leb(p, q)
                    imported += 1
                elif kind in (1, 2):  # table / memory limits
                    if kind == 1:
                        q += 1
                    flags, q = p[q], q + 1
                    _, q = leb(p, q)
                    if flags & 1:
                        _, q = leb(p, q)
                elif kind == 3:
                    q += 2
        if sid == 10:
            count, q = leb(p, 0)
            for k in range(count):
                n, q2 = leb(p, q)
                bodies.append((imported + k, n))
                q = q2 + n
    return sizes, bodies, names


def owner(symbol):
    m = re.search(r"21agent_recovery_policy\d+([a-z_]+)|agent_recovery_policy\.\.([a-z_]+)", symbol)
    if m:
        return "policy::" + (m.group(1) or m.group(2)) + (" (serde impls)" if "serde" in symbol else "")
    for crate in ("serde_json", "serde", "dlmalloc", "sha2", "wit_bindgen"):
        if crate in symbol:
            return crate
    head = symbol[:40]
    for crate in ("core", "alloc", "std"):
        if re.search(rf"(^|\d|_ZN){crate}(\d|\.\.)", head):
            return crate
    return "other"


def main():
    b = open(sys.argv[1], "rb").read()
    print(f"component: {len(b)} bytes")
    for sid, p in sections(b):
        if sid != 1:  # core modules only
            continue
        sizes, bodies, names = core_module(p)
        print(f"core module: {len(p)} bytes: " + ", ".join(f"{k} {v}" for k, v in sizes.most_common()))
        if names and bodies:
            by = collections.Counter()
            for idx, n in bodies:
                by[owner(names.get(idx, ""))] += n
            total = sum(by.values())
            print(f"  code by owner ({total} bytes):")
            for k, v in by.most_common():
                print(f"  {v:9d} {100 * v / total:5.1f}%  {k}")


if __name__ == "__main__":
    main()
