"""The Python recovery runtime's overhead per step, on a virtual clock (no sleeping).

    python python/bench/runtime_bench.py [--iterations 2000] [--journal on|off] [--retry-quota on|off] [--success-only]

The twin of `cargo run --release -p agent-recovery --example runtime_overhead`:

- success: a run with one step whose operation succeeds at once
  (5 calls into the loop component: run, step, read, claimed, attempt;
  store reads and writes, the journal's among them);
- one failed attempt: the same step failing once with a 503 first
  (+1 policy decision, +2 loop calls, the breaker write);
- success, end: the same, and the run ended (`run.end()`: one more loop call,
  which deletes the run's journal entry);
- door, retry_sync: the same success through `@recover` (its runtime kept)
  and `retry_sync` (a door per call); both end the run; then the four
  success paths side by side, interleaved in rounds, with each one's
  difference to the step;
- cached: the step's key is already recorded as done (nothing is called);
- telemetry: the failed-attempt step on two runtimes with `Telemetry.off()`
  and one with the default (`Telemetry.global_()`, no SDK installed: the
  OpenTelemetry API's no-op providers), interleaved step by step (3 x
  iterations of each, the order rotating, distinct run ids), each step timed
  on CPU. The no-op minus off difference is the cost of telemetry when nobody
  configured an exporter; off minus off is what the machine cannot resolve.
  With `opentelemetry-sdk` installed, then: an `off` runtime (B) and one
  recording to the SDK's in-memory exporters, interleaved the same way (the
  cost of recording).

Each figure is per run (start a run, one step), memory store, after a warmup
of a tenth of the iterations: wall time and this thread's CPU time
(`time.thread_time_ns`, which does not count waiting for a core on a busy
machine).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable, List, Tuple

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from agent_recovery import Call, Failed, Runtime, VirtualClock, recover, retry_sync  # noqa: E402
from agent_recovery.store import MemoryStore  # noqa: E402
from agent_recovery.telemetry import Telemetry  # noqa: E402


def per_iteration(name: str, n: int, f: Callable[[int], Any]) -> float:
    """Time `f` over `n` distinct run ids; prints and returns µs on CPU per run."""
    for i in range(n // 10):
        f(-1 - i)  # warm up (distinct run ids)
    cpu = time.thread_time_ns()
    start = time.perf_counter_ns()
    for i in range(n):
        f(i)
    wall = (time.perf_counter_ns() - start) / 1e3 / n
    on_cpu = (time.thread_time_ns() - cpu) / 1e3 / n
    print(f"{name:<28} {wall:>8.1f} µs wall, {on_cpu:>8.1f} µs on CPU per run")
    return on_cpu


def side_by_side(n: int, sides: List[Tuple[str, Callable[[int], Any]]], rounds: int = 5) -> None:
    """The success path through each side, interleaved (`rounds` rounds of
    n / rounds runs each, the order rotating), each run timed on CPU: the
    median per side and its difference to the first side (the step)."""
    for k, (_, f) in enumerate(sides):
        for i in range(n // 10):
            f(-(k + 1) * 1_000_000 - i)  # warm up (distinct run ids)
    per = max(1, n // rounds)
    samples: List[List[float]] = [[] for _ in sides]
    for r in range(rounds):
        for j in range(len(sides)):
            k = (j + r) % len(sides)
            f = sides[k][1]
            t0 = time.thread_time_ns()
            for i in range(per):
                f(10_000_000 * (k + 1) + r * per + i)
            samples[k].append((time.thread_time_ns() - t0) / 1e3 / per)
    medians = [statistics.median(s) for s in samples]
    print(f"-- the success path side by side ({rounds} interleaved rounds, median µs on CPU per call)")
    for (name, _), m in zip(sides, medians, strict=True):
        print(f"{name:<28} {m:>8.1f} µs  ({m - medians[0]:+.1f} µs vs the step)")


def _sdk_telemetry() -> Any:
    """Telemetry to the OpenTelemetry SDK with in-memory exporters (spans kept,
    metrics aggregated), when `opentelemetry-sdk` is installed (the `test` extra)."""
    try:
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import InMemoryMetricReader
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    except ImportError:
        return None
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(InMemorySpanExporter()))
    meter_provider = MeterProvider(metric_readers=[InMemoryMetricReader()])
    return Telemetry(tracer_provider=tracer_provider, meter_provider=meter_provider)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=2000)
    parser.add_argument("--journal", choices=("on", "off"), default="on",
                        help="the run configuration's journal (default on: a journal write before each call)")
    parser.add_argument("--retry-quota", choices=("on", "off"), default="off",
                        help="the fleet retry quota (on: 500 tokens in the store, read with every step)")
    parser.add_argument("--success-only", action="store_true",
                        help="time only the success case (what a profiler should see)")
    args = parser.parse_args()
    n = args.iterations
    runtime = Runtime(clock=VirtualClock(1_767_225_600_000), store=MemoryStore(), seed=7,
                      journal=args.journal == "on",
                      retry_quota={"capacity": 500} if args.retry_quota == "on" else None)

    def baseline(_: int) -> None:
        call = Call("operation", "s", "t", "", 1, None, None)  # type: ignore[arg-type]
        (lambda c: None)(call)

    per_iteration("plain closure (baseline)", n, baseline)

    def success(i: int) -> None:
        run = runtime.run(f"ok-{i}")
        r = run.step(id="search", tool="search", call="tool", operation=lambda c: {"hits": 1})
        assert r.outcome == "ok"

    per_iteration("success, one step", n, success)
    if args.success_only:
        return 0

    def success_end(i: int) -> None:
        run = runtime.run(f"end-{i}")
        r = run.step(id="search", tool="search", call="tool", operation=lambda c: {"hits": 1})
        assert r.outcome == "ok"
        run.end()

    per_iteration("success, one step, end", n, success_end)

    # The door and the retry helper on the same success (each call a run of
    # one step, ended): `@recover` keeps one runtime per wrapped function,
    # `retry_sync` makes a door (so a runtime) per call.
    door = recover(lambda: {"hits": 1}, call="tool", tool="search",
                   clock=VirtualClock(1_767_225_600_000), seed=7)
    per_iteration("door (@recover), success", n, lambda _: door())

    def retried(_: int) -> None:
        retry_sync(lambda **_: {"hits": 1}, call="tool", tool="search", seed=7, sleep=lambda s: None)

    per_iteration("retry_sync, success", n, retried)
    # The acceptance figure: the door and the retry helper next to the step
    # they wrap (a door's call is a run of one step, ended: one loop call more).
    side_by_side(n, [("success, one step", success), ("success, one step, end", success_end),
                     ("door (@recover)", lambda _: door()), ("retry_sync", retried)])

    def fail_step(rt: Runtime, tag: str, i: int) -> None:
        run = rt.run(f"{tag}-{i}")
        r = run.step(
            id="search", tool="search", call="tool", target=f"t{i % 64}",
            operation=lambda c: Failed('{"source":"http","status":503}') if c.attempt == 1 else None,
        )
        assert r.outcome == "ok"

    per_iteration("one failed attempt, then ok", n, lambda i: fail_step(runtime, "fail", i))

    # Telemetry off vs. the no-op global providers (the default).
    def build(**telemetry: Any) -> Runtime:
        return Runtime(clock=VirtualClock(1_767_225_600_000), store=MemoryStore(), seed=7, **telemetry)

    def interleaved(sides: List[Tuple[str, Runtime]], tag: str) -> List[float]:
        """Mean on-CPU µs per step of each runtime, stepped one by one in turn."""
        for i in range(n // 10):
            for k, (_, rt) in enumerate(sides):
                fail_step(rt, f"{tag}warm{k}", i)
        rounds, sums = 3 * n, [0] * len(sides)
        for i in range(rounds):
            for j in range(len(sides)):
                k = (j + i) % len(sides)
                t0 = time.thread_time_ns()
                fail_step(sides[k][1], f"{tag}{k}", i)
                sums[k] += time.thread_time_ns() - t0
        mean = [s / 1e3 / rounds for s in sums]
        for (name, _), m in zip(sides, mean, strict=True):
            print(f"{name:<28} {m:>8.1f} µs on CPU per run")
        return mean

    mean = interleaved(
        [
            ("telemetry off (A)", build(telemetry=Telemetry.off())),
            ("telemetry off (A')", build(telemetry=Telemetry.off())),
            ("no-op global (default)", build()),
        ],
        "n",
    )
    print(f"{'no-op global minus off':<28} {mean[2] - mean[0]:>+8.1f} µs per step (A/A: {mean[1] - mean[0]:+.1f} µs)")
    sdk = _sdk_telemetry()
    if sdk is not None:
        # Apart: the SDK's garbage would slow whichever runtime steps after it.
        mean = interleaved([("telemetry off (B)", build(telemetry=Telemetry.off())),
                            ("SDK, in-memory exporters", build(telemetry=sdk))], "sdk")
        print(f"{'SDK minus off':<28} {mean[1] - mean[0]:>+8.1f} µs per step (3 spans, 1 span event, 5 measurements)")

    first = runtime.run("cached")
    first.step(id="search", tool="search", operation=lambda c: None)

    def unreachable(c: Call) -> Any:
        raise AssertionError("cached")

    def cached(_: int) -> None:
        run = runtime.run("cached")
        r = run.step(id="search", tool="search", operation=unreachable)
        assert r.outcome == "ok"

    per_iteration("cached (duplicate key)", n, cached)

    # One loop call alone (the `step` input of a new run), through `_abi`.
    looper = runtime._looper
    state, _ = looper.advance("", '{"input":"run","now_ms":1000,"run_id":"r1","seed":7}')
    step = '{"input":"step","now_ms":1000,"step":{"id":"s1","tool":"search","call":"tool","args":{"q":"acme"}}}'
    per_iteration("one advance (step input)", n, lambda _: looper.advance(state, step))
    return 0


if __name__ == "__main__":
    sys.exit(main())
