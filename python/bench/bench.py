"""Benchmark the Python host: per-call cost of the JSON entry points, and load time.

    python python/bench/bench.py [--iterations 5000] [--profile]

For each observation of a realistic mix it times, per call (median over many
iterations, after a warmup):

- `public`  wasmtime-py's public API, `Func.__call__` on a cached `Func`
            (the "before": type lookups and conversions on every call);
- `json`    `Policy.classify_json` / `decide_json` (the "after": the fast path,
            fuel metering and the lock included);
- `dict`    `Policy.classify` / `decide` (plus `json.dumps` / `json.loads`);
- `naive`   a new store and instance per call, exports looked up each time;
- `floor`   only `wasmtime_component_func_call` (+ fuel, + freeing the result) on
            prebuilt arguments: the wasm work plus wasmtime's C API, which no
            Python code can remove.

It also reports the cold compile, the instantiation, and with `--profile` where
the time of one `decide_json` goes.
"""

from __future__ import annotations

import argparse
import cProfile
import ctypes
import json
import pstats
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable, Dict, List

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from wasmtime import Store, WasiConfig  # noqa: E402

from agent_recovery import Policy, _abi, reference_path  # noqa: E402
from agent_recovery._component import compile_component, engine_and_linker  # noqa: E402
from agent_recovery._sandbox import Sandbox  # noqa: E402

OPENAI_429 = {
    "error": {
        "message": "Rate limit reached for gpt-4o in organization org-x on requests per min (RPM): "
        "Limit 500, Used 500, Requested 1.",
        "type": "requests",
        "param": None,
        "code": "rate_limit_exceeded",
    }
}
MIX: Dict[str, Dict[str, Any]] = {
    "http 429 retry-after": {"source": "http", "status": 429, "headers": {"retry-after": "2"}},
    "openai 429 x-ratelimit": {
        "source": "http",
        "status": 429,
        "headers": {
            "x-ratelimit-limit-requests": "500",
            "x-ratelimit-remaining-requests": "0",
            "x-ratelimit-reset-requests": "120ms",
            "x-request-id": "req_abc123",
        },
        "body": json.dumps(OPENAI_429),
        "call": "llm",
    },
    "openai 400 context length": {
        "source": "http",
        "status": 400,
        "body": {
            "error": {
                "message": "This model's maximum context length is 128000 tokens.",
                "type": "invalid_request_error",
                "param": "messages",
                "code": "context_length_exceeded",
            }
        },
        "call": "llm",
    },
    "anthropic 529 overloaded": {
        "source": "http",
        "status": 529,
        "headers": {"request-id": "req_011CS"},
        "body": {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
        "call": "llm",
    },
    "anthropic 429 rate limit": {
        "source": "http",
        "status": 429,
        "headers": {"retry-after": "7", "anthropic-ratelimit-requests-remaining": "0"},
        "body": {"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}},
        "call": "llm",
    },
    "mcp isError result": {
        "source": "mcp",
        "message": {
            "jsonrpc": "2.0",
            "id": 3,
            "result": {
                "content": [{"type": "text", "text": "Upstream API returned 503"}],
                "isError": True,
            },
        },
    },
    "a2a failed task": {
        "source": "a2a",
        "message": {
            "jsonrpc": "2.0",
            "id": 9,
            "result": {
                "id": "task-1",
                "contextId": "ctx-1",
                "kind": "task",
                "status": {
                    "state": "failed",
                    "message": {
                        "role": "agent",
                        "parts": [{"kind": "text", "text": "backend unavailable"}],
                    },
                },
            },
        },
    },
    "network ECONNRESET": {"source": "network", "code": "ECONNRESET", "message": "socket hang up"},
    "httpx.ReadTimeout": {"source": "exception", "type": "httpx.ReadTimeout", "message": "timed out"},
    "http 503 html body": {
        "source": "http",
        "status": 503,
        "headers": {"content-type": "text/html"},
        "body": "<html><body><h1>503 Service Temporarily Unavailable</h1></body></html>",
    },
}
CONTEXT = json.dumps({"attempt": 2, "seed": 42, "elapsed_ms": 1500})


def median_ns(fn: Callable[[], Any], iterations: int, warmup: int) -> float:
    for _ in range(warmup):
        fn()
    samples: List[int] = []
    clock = time.perf_counter_ns
    for _ in range(iterations):
        t = clock()
        fn()
        samples.append(clock() - t)
    return statistics.median(samples)


def swallow(fn: Callable[[], Any]) -> Callable[[], Any]:
    def run() -> Any:
        try:
            return fn()
        except Exception:  # a policy error is an answer too
            return None

    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--iterations", type=int, default=5000)
    parser.add_argument("--warmup", type=int, default=300)
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    n, w = args.iterations, args.warmup

    wasm = reference_path().read_bytes()
    engine_and_linker()
    t = time.perf_counter_ns()
    compiled = compile_component(wasm)
    compile_ms = (time.perf_counter_ns() - t) / 1e6
    t = time.perf_counter_ns()
    policy = Policy.load()  # cached compile: instantiate + type checks + info()
    load_ms = (time.perf_counter_ns() - t) / 1e6
    inst_us = median_ns(lambda: Sandbox(compiled, policy.limits), 200, 10) / 1e3

    sandbox = policy._live_sandbox()
    store = sandbox.store
    classify_func = sandbox._funcs["classify-json"]
    decide_func = sandbox._funcs["decide-json"]
    engine, linker = engine_and_linker()

    def floor(name: str, *texts: str) -> Callable[[], Any]:
        data = [t.encode() for t in texts]
        params = _abi._ARRAYS[len(data)](*[_abi._Arg(_abi.KIND_STRING, len(d), d) for d in data])
        ref, ctx = ctypes.byref(sandbox._funcs[name]._func), sandbox._ctx

        def run() -> None:
            result = _abi._Val()
            _abi.set_fuel(ctx, 10**9)
            _abi._func_call(ref, ctx, params, len(data), ctypes.byref(result), 1)
            _abi._val_delete(ctypes.byref(result))

        return run

    def naive_call(name: str, *texts: str) -> Any:
        st = Store(engine)
        st.set_wasi(WasiConfig())
        st.set_fuel(10**8)
        inst = linker.instantiate(st, compiled.component)
        iface = compiled.component.get_export_index(f"agent:recovery/{name.split('-')[0]}@0.1.0")
        func = inst.get_func(st, compiled.component.get_export_index(name, iface))
        return func(st, *texts)

    def cells_for(op: str, obs: Any, text: str, ctx: Any) -> Dict[str, Callable[[], Any]]:
        """The calls measured for one observation: each cell binds its inputs here."""
        if op == "classify":
            return {
                "public": lambda: classify_func(store, text),
                "json": swallow(lambda: policy.classify_json(text)),
                "dict": swallow(lambda: policy.classify(obs)),
                "naive": lambda: naive_call("classify-json", text),
                "floor": floor("classify-json", text),
            }
        return {
            "public": lambda: decide_func(store, text, CONTEXT),
            "json": swallow(lambda: policy.decide_json(text, CONTEXT)),
            "dict": swallow(lambda: policy.decide(obs, ctx)),
            "naive": lambda: naive_call("decide-json", text, CONTEXT),
            "floor": floor("decide-json", text, CONTEXT),
        }

    print(f"component: {reference_path()} ({len(wasm)} bytes, sha256 {policy.sha256[:12]})")
    print(f"cold compile: {compile_ms:.0f} ms   Policy.load (cached compile): {load_ms:.1f} ms   "
          f"instantiate: {inst_us:.0f} us (median)")
    print(f"iterations per cell: {n} (warmup {w}); medians in microseconds per call\n")
    header = (f"{'observation':28} {'op':9} {'naive':>8} {'public':>8} {'json':>8} "
              f"{'dict':>8} {'floor':>8}")
    print(header)
    print("-" * len(header))
    totals: Dict[str, List[float]] = {"naive": [], "public": [], "json": [], "dict": [], "floor": []}
    for label, obs in MIX.items():
        text = json.dumps(obs)
        ctx = json.loads(CONTEXT)
        for op in ("classify", "decide"):
            cells = cells_for(op, obs, text, ctx)
            row = {}
            for name, fn in cells.items():
                if name == "public":
                    store.set_fuel(10**12)
                iters = max(n // 20, 20) if name == "naive" else n
                row[name] = median_ns(fn, iters, min(w, iters)) / 1e3
                totals[name].append(row[name])
            print(f"{label:28} {op:9} " + " ".join(f"{row[k]:8.1f}" for k in totals))
    print("-" * len(header))
    print(f"{'median of the mix':38} " + " ".join(
        f"{statistics.median(v):8.1f}" for v in totals.values()))

    if args.profile:
        text = json.dumps(MIX["openai 429 x-ratelimit"])
        prof = cProfile.Profile()
        prof.enable()
        for _ in range(n):
            policy.decide_json(text, CONTEXT)
        prof.disable()
        print(f"\nprofile of {n} decide_json calls (openai 429):")
        pstats.Stats(prof).sort_stats("tottime").print_stats(8)


if __name__ == "__main__":
    main()
