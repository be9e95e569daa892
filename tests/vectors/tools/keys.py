"""An independent implementation of the documented idempotency key, which
writes tests/vectors/keys/keys.json (run it from the repository root):

    python3 tests/vectors/tools/keys.py           # write it
    python3 tests/vectors/tools/keys.py --check   # fail if it is not what this writes

The README and guest/src/idempotency.rs document the key as

    key = hex(sha256(canonical_json([run_id, step_id, tool, args])))

where canonical JSON sorts object keys by their UTF-8 bytes, has no
whitespace, and writes integral numbers below 2^53 without a fraction. This is
the Python standard library's reading of that text: `hashlib.sha256` and
`json.dumps(sort_keys=True, separators=(",", ":"), ensure_ascii=False)`
(`sort_keys` orders by code point, which is UTF-8 byte order), after turning
integral floats below 2^53 into ints. It shares no code with the policy.

It is **not** RFC 8785 (JCS): RFC 8785 orders keys by UTF-16 code units (a
key at U+1F600 sorts before one at U+E000 there, after it here) and writes
numbers as ECMAScript does. The vectors stick to numbers both forms write the
same way (integers, integral floats, short decimals), and one case pins the
UTF-8 key order. Every host (Rust, Node, Python) compares its `key` with these.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path
from typing import Any

LIMIT = 2**53

CASES = [
    ("empty args", "run-1", "step-1", "search", "{}"),
    ("args are empty text: null", "run-1", "step-1", "search", ""),
    ("key order does not matter", "run-1", "step-2", "charge", '{"b":1,"a":2}'),
    ("key order does not matter (reversed)", "run-1", "step-2", "charge", '{"a":2,"b":1}'),
    ("integral float is an integer", "run-1", "step-2", "charge", '{"a":2.0,"b":1e0}'),
    ("nested objects and arrays", "r", "s", "t", '{"z":[3,{"y":null,"x":true}],"a":{"c":"d","b":[]}}'),
    ("whitespace does not matter", "r", "s", "t", ' { "q" : [ 1 , 2 ] } '),
    ("negative zero is 0", "r", "s", "t", '{"n":-0.0}'),
    ("short decimals", "r", "s", "t", '{"price":12.5,"rate":0.25,"neg":-3.75}'),
    ("integer beyond 2^53 written exactly", "r", "s", "t", '{"id":18446744073709551615}'),
    ("large integral float below 2^53", "r", "s", "t", '{"big":9007199254740991.0}'),
    ("escapes", "r", "s", "t", '{"text":"line\\nbreak \\"quoted\\" back\\\\slash tab\\t \\u0001"}'),
    ("non-ASCII kept as UTF-8", "r", "s", "t", '{"name":"Zoë","city":"東京"}'),
    ("keys sorted by UTF-8 bytes, not UTF-16 (not RFC 8785)", "r", "s", "t", '{"\\ud83d\\ude00":1,"\\ue000":2,"a":3}'),
    ("a JSON string as args", "r", "s", "t", '"just text"'),
    ("an array as args", "r", "s", "t", "[1,2,3]"),
    ("parts are not concatenated (ab, c)", "ab", "c", "t", "{}"),
    ("parts are not concatenated (a, bc)", "a", "bc", "t", "{}"),
    ("non-ASCII ids", "run-é", "步骤", "tool/ü", '{"k":"v"}'),
]


def normalize(v: Any) -> Any:
    """Integral floats below 2^53 become ints; everything else is kept."""
    if isinstance(v, float) and v.is_integer() and abs(v) < LIMIT:
        return int(v)
    if isinstance(v, dict):
        return {k: normalize(x) for k, x in v.items()}
    if isinstance(v, list):
        return [normalize(x) for x in v]
    return v


def canonical(v: Any) -> str:
    return json.dumps(normalize(v), sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def key(run_id: str, step_id: str, tool: str, args_json: str) -> tuple[str, str]:
    args = None if args_json.strip() == "" else json.loads(args_json)
    text = canonical([run_id, step_id, tool, args])
    return hashlib.sha256(text.encode("utf-8")).hexdigest(), text


def main() -> None:
    out = []
    for name, run_id, step_id, tool, args_json in CASES:
        digest, text = key(run_id, step_id, tool, args_json)
        out.append(
            {
                "name": name,
                "run_id": run_id,
                "step_id": step_id,
                "tool": tool,
                "args_json": args_json,
                "canonical": text,
                "key": digest,
            }
        )
    path = Path("tests/vectors/keys/keys.json")
    text = json.dumps(out, indent=1, ensure_ascii=False) + "\n"
    if "--check" in sys.argv[1:]:
        if not path.is_file() or path.read_text(encoding="utf-8") != text:
            sys.exit(f"{path} is stale: run python3 tests/vectors/tools/keys.py")
        print(f"{path}: {len(out)} keys, up to date")
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    print(f"wrote {len(out)} keys to {path}")


if __name__ == "__main__":
    main()
