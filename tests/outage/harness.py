"""An outage benchmark: 16 clients, one local HTTP service down for 6 s.

A real HTTP server on 127.0.0.1 answers `GET /` with 200. Sixteen client
threads loop on calls to it for `--up` seconds, then the server is closed
(connections are refused) for `--down` seconds, then it listens again on the
same port, and the clients go on for `--after` seconds. Each mode prints:

- requests that reached the dead service, per second of the outage (every
  connection attempt made while the server was closed);
- failed calls (the call returned a failure to the client), split into the
  calls the runtime failed without calling (`runtime.circuit.open`) and the rest;
- clients back within 8 s of the service's return (their first success) and
  the median time back.

Modes: `runtime` (agent_recovery's Runtime with its defaults, one shared
MemoryStore: a fleet of 16 workers), `no-retry` (one plain call),
`tenacity` (tenacity's `retry` with exponential jittered waits, stop after
5 attempts) and `stamina` (stamina's `retry` on `OSError` with its defaults:
10 attempts, exponential jittered waits from 0.1 s, 45 s in all; its retry
hooks off, so it logs nothing), each when installed (`pip install
'./python[bench]'`). After a failed call a client pauses
50 ms (it answers its user with a fallback) before its next call, in every
mode, so a client that fails fast does not spin.

    python tests/outage/harness.py                 # every mode
    python tests/outage/harness.py --mode runtime  # one mode
    python tests/outage/harness.py --json          # one JSON document instead of the table

A benchmark, not a test: the figures depend on the machine.
"""

from __future__ import annotations

import argparse
import http.server
import json
import statistics
import threading
import time
import urllib.error
import urllib.request
from typing import Any, Callable, Dict, List, Optional

CLIENTS = 16
PAUSE_AFTER_FAILURE_S = 0.05
BACK_WITHIN_S = 8.0


class _Ok(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 (the stdlib's name)
        body = b'{"ok":true}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


class _Server(http.server.ThreadingHTTPServer):
    # Sixteen clients connect at once: a listen backlog of 5 (the default)
    # would refuse connections of a healthy service.
    request_queue_size = 128
    daemon_threads = True


class Service:
    """The service: a threading HTTP server that can be closed and reopened on one port."""

    def __init__(self) -> None:
        self.port = 0
        self.server: Optional[http.server.ThreadingHTTPServer] = None
        self.up = False
        self.start()

    def start(self) -> None:
        server = _Server(("127.0.0.1", self.port), _Ok)
        self.port = server.server_address[1]
        threading.Thread(target=server.serve_forever, daemon=True).start()
        self.server = server
        self.up = True

    def stop(self) -> None:
        self.up = False
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
            self.server = None


class Stats:
    """What the clients saw, under one lock."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.down_requests = 0
        self.down_at: List[float] = []
        self.down_since = 0.0
        self.failed_short = 0
        self.failed_other = 0
        self.ok = 0
        self.back_at: Dict[int, float] = {}


def _get(port: int, stats: Stats, service: Service) -> None:
    """One HTTP request; raises on a refused connection or a non-2xx."""
    if not service.up:
        with stats.lock:
            stats.down_requests += 1
            stats.down_at.append(time.monotonic() - stats.down_since)
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=1.0) as r:
        r.read()


def runtime_caller(stats: Stats, service: Service) -> Callable[[int, int], bool]:
    from agent_recovery.runtime import Failed, Runtime

    runtime = Runtime()  # the defaults, one MemoryStore shared by every client

    def op(call: Any) -> Any:
        try:
            _get(service.port, stats, service)
        except urllib.error.HTTPError as e:
            return Failed({"source": "http", "status": e.code})
        except OSError as e:
            return Failed({"source": "network", "code": "ECONNREFUSED", "message": str(e)})
        return {"ok": True}

    def call(client: int, n: int) -> bool:
        report = runtime.run(f"c{client}-{n}").step(id="get", tool="svc", call="tool", operation=op, args={"n": n})
        if report.outcome == "ok":
            return True
        code = (report.envelope or {}).get("code")
        with stats.lock:
            if code == "runtime.circuit.open":
                stats.failed_short += 1
            else:
                stats.failed_other += 1
        return False

    return call


def plain_caller(stats: Stats, service: Service, wrap: Callable[[Callable[[], None]], Callable[[], None]]) -> Callable[[int, int], bool]:
    def call(client: int, n: int) -> bool:
        try:
            wrap(lambda: _get(service.port, stats, service))()
            return True
        except Exception:
            with stats.lock:
                stats.failed_other += 1
            return False

    return call


def tenacity_wrap() -> Optional[Callable[[Callable[[], None]], Callable[[], None]]]:
    try:
        import tenacity
    except ImportError:
        return None

    def wrap(f: Callable[[], None]) -> Callable[[], None]:
        return tenacity.retry(
            wait=tenacity.wait_random_exponential(multiplier=0.25, max=30),
            stop=tenacity.stop_after_attempt(5),
            reraise=True,
        )(f)

    return wrap


def stamina_wrap() -> Optional[Callable[[Callable[[], None]], Callable[[], None]]]:
    try:
        import stamina
        import stamina.instrumentation
    except ImportError:
        return None
    stamina.instrumentation.set_on_retry_hooks([])

    def wrap(f: Callable[[], None]) -> Callable[[], None]:
        return stamina.retry(on=OSError)(f)

    return wrap


WRAPS = {"tenacity": tenacity_wrap, "stamina": stamina_wrap}


def measure(mode: str, up_s: float, down_s: float, after_s: float) -> Optional[Dict[str, Any]]:
    service = Service()
    stats = Stats()
    if mode == "runtime":
        call = runtime_caller(stats, service)
    elif mode == "no-retry":
        call = plain_caller(stats, service, lambda f: f)
    else:
        wrap = WRAPS[mode]()
        if wrap is None:
            return None
        call = plain_caller(stats, service, wrap)
    recovered = threading.Event()
    recovered_at = [0.0]
    end = time.monotonic() + up_s + down_s + after_s

    def client(i: int) -> None:
        n = 0
        while time.monotonic() < end:
            n += 1
            ok = call(i, n)
            now = time.monotonic()
            if ok:
                with stats.lock:
                    stats.ok += 1
                    if recovered.is_set() and i not in stats.back_at:
                        stats.back_at[i] = now - recovered_at[0]
            else:
                time.sleep(PAUSE_AFTER_FAILURE_S)

    threads = [threading.Thread(target=client, args=(i,), daemon=True) for i in range(CLIENTS)]
    for t in threads:
        t.start()
    time.sleep(up_s)
    stats.down_since = time.monotonic()
    service.stop()
    time.sleep(down_s)
    service.start()
    recovered_at[0] = time.monotonic()
    recovered.set()
    for t in threads:
        t.join()
    service.stop()
    back = sorted(t for t in stats.back_at.values() if t <= BACK_WITHIN_S)
    return {
        "mode": mode,
        "down_requests": stats.down_requests,
        "down_per_s": stats.down_requests / down_s,
        "down_by_second": [sum(1 for t in stats.down_at if s <= t < s + 1) for s in range(int(down_s))],
        "failed": stats.failed_short + stats.failed_other,
        "failed_circuit_open": stats.failed_short,
        "failed_other": stats.failed_other,
        "ok": stats.ok,
        "back": len(back),
        "median_back_ms": statistics.median(back) * 1000 if back else None,
        "back_ms": [round(t * 1000) for t in back],
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--mode", choices=["runtime", "no-retry", *WRAPS, "all"], default="all")
    p.add_argument("--up", type=float, default=2.0, help="seconds before the outage (default 2)")
    p.add_argument("--down", type=float, default=6.0, help="seconds the service is down (default 6)")
    p.add_argument("--after", type=float, default=BACK_WITHIN_S, help="seconds after it returns (default 8)")
    p.add_argument("--json", action="store_true", help="print one JSON document (every mode's figures) instead of the table")
    a = p.parse_args()
    modes = ["runtime", "no-retry", *WRAPS] if a.mode == "all" else [a.mode]
    results: List[Dict[str, Any]] = []
    skipped: List[str] = []
    if not a.json:
        print(f"{CLIENTS} clients; service up {a.up:g} s, down {a.down:g} s, then up {a.after:g} s")
        print(f"{'mode':10} {'reached dead':>12} {'per s':>6} {'failed':>7} {'circuit':>8} {'other':>6} {'ok':>6} {'back':>6} {'median back':>12}")
    for mode in modes:
        r = measure(mode, a.up, a.down, a.after)
        if r is None:
            skipped.append(mode)
            if not a.json:
                print(f"{mode:10} skipped: {mode} is not installed (pip install './python[bench]')")
            continue
        results.append(r)
        if a.json:
            continue
        median = "-" if r["median_back_ms"] is None else f"{r['median_back_ms']:.0f} ms"
        print(
            f"{mode:10} {r['down_requests']:>12} {r['down_per_s']:>6.1f} {r['failed']:>7} "
            f"{r['failed_circuit_open']:>8} {r['failed_other']:>6} {r['ok']:>6} "
            f"{r['back']:>3}/{CLIENTS} {median:>12}"
        )
        print(f"{'':10} reached the dead service in each second of the outage: {r['down_by_second']}")
    if a.json:
        doc = {"clients": CLIENTS, "up_s": a.up, "down_s": a.down, "after_s": a.after, "modes": results, "skipped": skipped}
        print(json.dumps(doc))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
