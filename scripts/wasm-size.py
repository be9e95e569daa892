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

With the `name` section it also prints, per exported interface, the code
reachable from its functions through direct calls (any function of the table
counts as called by every `call_indirect`) and the part that nothing else
exported reaches: what the interface alone costs.

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
    exports, table, code = [], set(), {}
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
        if sid == 7:  # exports: (name, function index)
            count, q = leb(p, 0)
            for _ in range(count):
                name, q = string(p, q)
                kind, q = p[q], q + 1
                idx, q = leb(p, q)
                if kind == 0:
                    exports.append((name, idx))
        if sid == 9:  # element segments of the form rustc emits (flags 0)
            count, q = leb(p, 0)
            for _ in range(count):
                flags, q = leb(p, q)
                if flags != 0:
                    break
                q = p.index(0x0B, q) + 1  # the offset expression
                n, q = leb(p, q)
                for _ in range(n):
                    idx, q = leb(p, q)
                    table.add(idx)
        if sid == 10:
            count, q = leb(p, 0)
            for k in range(count):
                n, q2 = leb(p, q)
                bodies.append((imported + k, n))
                code[imported + k] = p[q2:q2 + n]
                q = q2 + n
    return sizes, bodies, names, (exports, table, code)


def sleb(b, i):
    value = shift = 0
    while True:
        x = b[i]
        i += 1
        value |= (x & 0x7F) << shift
        shift += 7
        if x < 0x80:
            return value - (1 << shift) if x & 0x40 else value, i


def callees(body):
    """The functions a body calls directly, and whether it calls indirectly."""
    out, indirect = set(), False
    i = leb(body, 0)[1]
    count, i = leb(body, 0)
    for _ in range(count):  # locals
        i = leb(body, i)[1] + 1
    while i < len(body):
        op = body[i]
        i += 1
        if op in (0x02, 0x03, 0x04):  # block type: empty, a value type or a type index
            i = i + 1 if body[i] == 0x40 or body[i] >= 0x6F else sleb(body, i)[1]
        elif op == 0x0E:  # br_table
            n, i = leb(body, i)
            for _ in range(n + 1):
                i = leb(body, i)[1]
        elif op == 0x10:
            callee, i = leb(body, i)
            out.add(callee)
        elif op == 0x11:
            indirect = True
            i = leb(body, leb(body, i)[1])[1]
        elif op in (0x0C, 0x0D, 0xD2) or 0x20 <= op <= 0x26:
            i = leb(body, i)[1]
        elif op == 0x1C:  # select with types
            n, i = leb(body, i)
            i += n
        elif 0x28 <= op <= 0x3E:  # memory access: align, offset
            i = leb(body, leb(body, i)[1])[1]
        elif op in (0x3F, 0x40, 0xD0):
            i += 1
        elif op in (0x41, 0x42):
            i = sleb(body, i)[1]
        elif op == 0x43:
            i += 4
        elif op == 0x44:
            i += 8
        elif op == 0xFC:
            sub, i = leb(body, i)
            immediates = {8: 1, 9: 1, 10: 0, 11: 0, 12: 2, 13: 1, 14: 2, 15: 1, 16: 1, 17: 1}.get(sub, 0)
            for _ in range(immediates):
                i = leb(body, i)[1]
            i += {8: 1, 10: 2, 11: 1}.get(sub, 0)  # memory index bytes
        elif op == 0xFD:
            raise ValueError("SIMD code is not read")
    return out, indirect


def by_export(exports, table, code):
    """(reachable, reachable from this interface alone, interface) code bytes."""
    graph = {f: callees(body) for f, body in code.items()}

    def reach(roots):
        seen, todo, through_table = set(), list(roots), False
        while todo:
            f = todo.pop()
            if f in seen or f not in graph:
                continue
            seen.add(f)
            calls, indirect = graph[f]
            todo.extend(calls)
            if indirect and not through_table:
                through_table = True
                todo.extend(table)
        return seen

    groups = collections.defaultdict(list)
    for name, idx in exports:
        groups[name.split("#")[0]].append(idx)
    reached = {g: reach(ids) for g, ids in groups.items()}
    def size(functions):
        return sum(len(code[f]) for f in functions)

    rows = []
    for g, seen in reached.items():
        others = set().union(*(s for k, s in reached.items() if k != g))
        rows.append((size(seen), size(seen - others), g))
    return sorted(rows, reverse=True)


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
        sizes, bodies, names, graph = core_module(p)
        print(f"core module: {len(p)} bytes: " + ", ".join(f"{k} {v}" for k, v in sizes.most_common()))
        if names and bodies:
            by = collections.Counter()
            for idx, n in bodies:
                by[owner(names.get(idx, ""))] += n
            total = sum(by.values())
            print(f"  code by owner ({total} bytes):")
            for k, v in by.most_common():
                print(f"  {v:9d} {100 * v / total:5.1f}%  {k}")
            print("  code reachable from each exported interface / from it alone:")
            for size, alone, name in by_export(*graph):
                if not name.startswith("cabi_"):
                    print(f"  {size:9d} {alone:9d}  {name}")


if __name__ == "__main__":
    main()
