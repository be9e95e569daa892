#!/usr/bin/env python3
"""One table of the decision path's figures (docs/benchmarks.md), measured in one run on this machine.

    scripts/bench.sh            (builds what it needs, then runs this)

- Rust: `cargo bench -p agent-recovery --bench decide` (criterion): decide_json
  over its 13-observation mix through wasmtime and natively, in the same run,
  so the ratio is fair even on a loaded machine.
- Node and Python: decide_json over the 14 example observations
  (examples/observations/), best of 7 rounds, in one process each.
- Cold start: process start to the first decision (the CLI, Node, Python),
  with each host's compile cache cold and warm, and the CLI installed by
  scripts/package-cli.sh (the reference precompiled beside it).
- Sizes: the reference component, Node's installed production dependencies,
  Python's RSS with the policy loaded.
- Retry, side by side: agent-recovery's small door next to backon (Rust),
  p-retry and cockatiel (Node), tenacity and stamina (Python) on one no-op
  operation, succeeding at once and failing once then succeeding (medians of
  5 rounds; host/examples/retry_compare.rs, node/bench/retry-compare.mjs,
  python/bench/retry_compare.py), and a step's cost while the Redis store is
  unreachable (each language's default store, served by its local spool).
- Outage: tests/outage/harness.py --json (16 clients, a service down 6 s),
  unless `--no-outage`.

The last line is machine-readable:
`bench: host_vs_native=<ratio> host_us=<x> native_us=<y> node_us=<z> python_us=<w> wasm_kb=<n> `
followed by the CLI's cold starts (`cli_cold_ms=`, `cli_packaged_ms=`), the side-by-side figures (`<library>_<ok|retry>_<lang>_us=`, `degraded_step_<lang>_ms=`)
and the outage's (`outage_<mode>_per_s=`, `outage_<mode>_back=`, `outage_<mode>_median_back_ms=`).
"""

import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
TARGET = pathlib.Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
PY = str(ROOT / ".venv" / "bin" / "python")
OBS = sorted((ROOT / "examples" / "observations").glob("*.json"))
ROUNDS, PER = 7, 100


def sh(cmd, **kw):
    return subprocess.run(cmd, check=True, capture_output=True, text=True, cwd=kw.pop("cwd", ROOT), **kw)


def per_call_us(unit_value, unit):
    return float(unit_value) * {"ns": 1e-3, "µs": 1.0, "us": 1.0, "ms": 1e3, "s": 1e6}[unit]


def rust():
    out = sh(["cargo", "bench", "-q", "-p", "agent-recovery", "--bench", "decide", "--", "decide_json_mix"]).stdout
    res = {}
    # criterion: "<group>/<name>  time: [a u b u c u]  thrpt: [x Kelem/s y Kelem/s z Kelem/s]"
    for name in ("host_wasmtime", "native"):
        m = re.search(rf"decide_json_mix/{name}\s+time:.*?\n\s*thrpt:\s*\[\S+ \S+ (\S+) (\S+)", out)
        if not m:
            sys.exit(f"bench: could not read criterion's {name} line:\n{out}")
        value, unit = float(m.group(1)), m.group(2)
        scale = {"elem/s": 1, "Kelem/s": 1e3, "Melem/s": 1e6, "Gelem/s": 1e9}[unit]
        res[name] = 1e6 / (value * scale)
    return res


NODE_MIX = """
import { readFileSync } from 'node:fs';
import { Policy } from './src/index.js';
const files = JSON.parse(process.argv[1]);
const obs = files.map((f) => readFileSync(f, 'utf8'));
const ctx = '{"attempt":1,"seed":7}';
const p = await Policy.load();
let best = Infinity;
for (let r = 0; r < %d; r++) {
  const t = process.hrtime.bigint();
  for (let i = 0; i < %d; i++) for (const o of obs) p.decideJson(o, ctx);
  best = Math.min(best, Number(process.hrtime.bigint() - t) / 1e3 / (%d * obs.length));
}
console.log(best.toFixed(2));
""" % (ROUNDS, PER, PER)

PY_MIX = """
import json, sys, time
from agent_recovery import Policy
obs = [open(f).read() for f in json.loads(sys.argv[1])]
ctx = '{"attempt":1,"seed":7}'
p = Policy.load()
best = 1e9
for _ in range(%d):
    t = time.perf_counter()
    for _ in range(%d):
        for o in obs:
            p.decide_json(o, ctx)
    best = min(best, (time.perf_counter() - t) * 1e6 / (%d * len(obs)))
print(f"{best:.2f}")
""" % (ROUNDS, PER, PER)


PY_PHASES = """
import sys, time
t0 = time.perf_counter()
import wasmtime
t1 = time.perf_counter()
from agent_recovery import Policy
t2 = time.perf_counter()
p = Policy.load()
t3 = time.perf_counter()
p.decide_json(open(sys.argv[1]).read(), '{}')
t4 = time.perf_counter()
print(*(f"{(b - a) * 1e3:.1f}" for a, b in ((t0, t1), (t1, t2), (t2, t3), (t3, t4))))
"""


def node_call():
    files = json.dumps([str(p) for p in OBS])
    return float(sh(["node", "--input-type=module", "-e", NODE_MIX, files], cwd=ROOT / "node").stdout.split()[-1])


def python_call():
    files = json.dumps([str(p) for p in OBS])
    return float(sh([PY, "-c", PY_MIX, files]).stdout.split()[-1])


def wall(cmd, env=None, cwd=ROOT, runs=3):
    best = 1e9
    for _ in range(runs):
        t = time.perf_counter()
        subprocess.run(cmd, check=True, capture_output=True, cwd=cwd, env=env)
        best = min(best, time.perf_counter() - t)
    return best * 1000


def cold_starts():
    obs = str(ROOT / "examples" / "observations" / "openai-429-rate-limit.json")
    res = {}
    cli = str(TARGET / "release" / "agent-recovery")
    with tempfile.TemporaryDirectory() as d:
        env = dict(os.environ, AGENT_RECOVERY_CACHE_DIR="")
        res["cli_cold"] = wall([cli, "decide", obs, "--json"], env=env)
        env = dict(os.environ, AGENT_RECOVERY_CACHE_DIR=d)
        subprocess.run([cli, "decide", obs, "--json"], check=True, capture_output=True, env=env)
        res["cli_warm"] = wall([cli, "decide", obs, "--json"], env=env)
    with tempfile.TemporaryDirectory() as prefix:
        # installed by scripts/package-cli.sh: the reference precompiled beside it, no cache
        subprocess.run(["bash", str(ROOT / "scripts" / "package-cli.sh"), prefix, "--bin", cli],
                       check=True, capture_output=True)
        env = dict(os.environ, AGENT_RECOVERY_CACHE_DIR="")
        res["cli_packaged"] = wall([str(pathlib.Path(prefix) / "bin" / "agent-recovery"), "decide", obs, "--json"], env=env)
    node = ("import { readFileSync } from 'node:fs'; import { Policy } from './src/index.js';"
            f"const p = await Policy.load(); p.decideJson(readFileSync({json.dumps(obs)}, 'utf8'), '{{}}');")
    res["node"] = wall(["node", "--input-type=module", "-e", node], cwd=ROOT / "node")
    pyc = ("from agent_recovery import Policy; import resource, sys;"
           f"Policy.load().decide_json(open({obs!r}).read(), '{{}}');"
           "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)")
    with tempfile.TemporaryDirectory() as d:
        env = dict(os.environ, XDG_CACHE_HOME=d, AGENT_RECOVERY_COMPILE_CACHE="0", AGENT_RECOVERY_PRECOMPILED="0")
        res["python_cold"] = wall([PY, "-c", pyc], env=env)
        # a first-ever start (empty cache) with the precompiled reference pip installed
        env = dict(os.environ, XDG_CACHE_HOME=d, AGENT_RECOVERY_COMPILE_CACHE="0")
        res["python_shipped"] = wall([PY, "-c", pyc], env=env)
        out = subprocess.run([PY, "-c", pyc], check=True, capture_output=True, text=True, env=env)
        res["python_shipped_rss_mb"] = int(out.stdout.split()[-1]) / 1024
        env = dict(os.environ, XDG_CACHE_HOME=d, AGENT_RECOVERY_PRECOMPILED="0")
        subprocess.run([PY, "-c", pyc], check=True, capture_output=True, env=env)  # fills the cache
        res["python_warm"] = wall([PY, "-c", pyc], env=env)
        out = subprocess.run([PY, "-c", pyc], check=True, capture_output=True, text=True, env=env)
        res["python_rss_mb"] = int(out.stdout.split()[-1]) / 1024
        # where a start goes on the default path: best of 3 of each phase, in-process clocks
        env = dict(os.environ, XDG_CACHE_HOME=d)
        phases = [1e9] * 4
        for _ in range(3):
            out = subprocess.run([PY, "-c", PY_PHASES, obs], check=True, capture_output=True, text=True, env=env)
            phases = [min(a, float(b)) for a, b in zip(phases, out.stdout.split())]
        res["python_phases"] = phases
    return res


def node_install_mb(omit_optional):
    """What `npm ci --omit=dev` of the package brings, without or with its
    optional SQLite addon (better-sqlite3, built from source here since only
    the registry is reachable); the transpiler is an optional peer, not installed."""
    with tempfile.TemporaryDirectory() as d:
        shutil.copy(ROOT / "node" / "package.json", d)
        shutil.copy(ROOT / "node" / "package-lock.json", d)
        cmd = ["npm", "ci", "--omit=dev", "--no-audit", "--no-fund", "--loglevel=error"]
        if omit_optional:
            cmd.insert(3, "--omit=optional")
        subprocess.run(cmd, check=True, capture_output=True, cwd=d)
        files = pathlib.Path(d, "node_modules").rglob("*")
        return sum(f.lstat().st_size for f in files if f.is_file() and not f.is_symlink()) / 1e6


def last_json(cmd, cwd=ROOT):
    """The JSON object a command prints on its last line."""
    return json.loads(sh(cmd, cwd=cwd).stdout.strip().splitlines()[-1])


def side_by_side():
    rust = last_json(["cargo", "run", "--release", "-q", "-p", "agent-recovery", "--example", "retry_compare"])
    node = last_json(["node", "bench/retry-compare.mjs"], cwd=ROOT / "node")
    python = last_json([PY, "python/bench/retry_compare.py"])
    return {"rust": rust, "node": node, "python": python}


def outage():
    return last_json([PY, "tests/outage/harness.py", "--json"])


def main():
    run_outage = "--no-outage" not in sys.argv[1:]
    wasm = TARGET / "wasm-guests" / "wasm32-wasip2" / "release" / "agent_recovery_policy.wasm"
    wasm_kb = wasm.stat().st_size // 1024
    r = rust()
    n, p = node_call(), python_call()
    c = cold_starts()
    npm, npm_sqlite = node_install_mb(True), node_install_mb(False)
    x = side_by_side()
    o = outage() if run_outage else None
    ratio = r["host_wasmtime"] / r["native"]
    rows = [
        ("decide_json, native Rust (criterion mix of 13)", f"{r['native']:.1f} µs"),
        ("decide_json, Rust host via wasmtime (same run)", f"{r['host_wasmtime']:.1f} µs ({ratio:.1f}× native)"),
        ("decideJson, Node (14 example observations)", f"{n:.1f} µs"),
        ("decide_json, Python (14 example observations)", f"{p:.1f} µs"),
        ("reference component", f"{wasm_kb} KB"),
        ("CLI start to first decision: no cache / packaged, no cache / warm cache",
         f"{c['cli_cold']:.0f} ms / {c['cli_packaged']:.0f} ms / {c['cli_warm']:.0f} ms"),
        ("Node start to first decision", f"{c['node']:.0f} ms"),
        ("Python start to first decision: compiling / shipped precompiled / warm cache",
         f"{c['python_cold']:.0f} ms / {c['python_shipped']:.0f} ms / {c['python_warm']:.0f} ms"),
        ("Python start by phase: import wasmtime / agent_recovery / Policy.load() / 1st call",
         " / ".join(f"{x:.0f}" for x in c["python_phases"]) + " ms"),
        ("Python peak RSS, policy loaded: shipped precompiled / warm cache",
         f"{c['python_shipped_rss_mb']:.0f} MiB / {c['python_rss_mb']:.0f} MiB"),
        ("Node install (npm ci --omit=dev): reference only / with SQLite addon", f"{npm:.1f} MB / {npm_sqlite:.0f} MB"),
    ]
    w = max(len(a) for a, _ in rows)
    print(f"{'what'.ljust(w)}  figure")
    print(f"{'-' * w}  ------")
    for a, b in rows:
        print(f"{a.ljust(w)}  {b}")
    rs, nd, py = x["rust"], x["node"], x["python"]
    print()
    print("retry, side by side (one no-op call, median of 5 rounds): success / one failure then success")
    retry_rows = [
        ("Rust: agent-recovery op.recover(&door) (blocking)", rs["door_ok_us"], rs["door_retry_us"]),
        ("Rust: backon (zero delay)", rs["backon_ok_us"], rs["backon_retry_us"]),
        ("Node: agent-recovery recover()", nd["recover_ok_us"], nd["recover_retry_us"]),
        ("Node: p-retry (minTimeout 0: no timer)", nd["p_retry_ok_us"], nd["p_retry_retry_us"]),
        ("Node: cockatiel (ConstantBackoff(0): a setTimeout(0) turn)", nd["cockatiel_ok_us"], nd["cockatiel_retry_us"]),
        ("Python: agent-recovery @recover", py["recover_ok_us"], py["recover_retry_us"]),
        ("Python: tenacity (wait_none)", py["tenacity_ok_us"], py["tenacity_retry_us"]),
        ("Python: stamina (zero waits, hooks off)", py["stamina_ok_us"], py["stamina_retry_us"]),
    ]
    w2 = max(len(a) for a, _, _ in retry_rows)

    def us(x):
        return f"{x * 1e3:.1f} ns" if x < 1 else f"{x:.1f} µs"

    for a, ok, retry in retry_rows:
        print(f"{a.ljust(w2)}  {us(ok)} / {us(retry)}")
    print(f"{'a step while Redis is unreachable (Rust / Node / Python)'.ljust(w2)}  "
          f"{rs['degraded_step_ms']:.2f} / {nd['degraded_step_ms']:.2f} / {py['degraded_step_ms']:.2f} ms")
    extra = {
        "cli_cold_ms": round(c["cli_cold"]), "cli_packaged_ms": round(c["cli_packaged"]),
        "recover_ok_rust_us": rs["door_ok_us"], "recover_retry_rust_us": rs["door_retry_us"],
        "backon_ok_rust_us": rs["backon_ok_us"], "backon_retry_rust_us": rs["backon_retry_us"],
        "recover_ok_node_us": nd["recover_ok_us"], "recover_retry_node_us": nd["recover_retry_us"],
        "p_retry_ok_node_us": nd["p_retry_ok_us"], "p_retry_retry_node_us": nd["p_retry_retry_us"],
        "cockatiel_ok_node_us": nd["cockatiel_ok_us"], "cockatiel_retry_node_us": nd["cockatiel_retry_us"],
        "recover_ok_python_us": py["recover_ok_us"], "recover_retry_python_us": py["recover_retry_us"],
        "tenacity_ok_python_us": py["tenacity_ok_us"], "tenacity_retry_python_us": py["tenacity_retry_us"],
        "stamina_ok_python_us": py["stamina_ok_us"], "stamina_retry_python_us": py["stamina_retry_us"],
        "degraded_step_rust_ms": rs["degraded_step_ms"], "degraded_step_node_ms": nd["degraded_step_ms"],
        "degraded_step_python_ms": py["degraded_step_ms"],
    }
    if o is not None:
        print()
        print(f"outage ({o['clients']} clients, service down {o['down_s']:g} s; tests/outage/harness.py)")
        print(f"{'mode':10} {'dead req/s':>10} {'failed':>7} {'back':>6} {'median back':>12}")
        for m in o["modes"]:
            median = "-" if m["median_back_ms"] is None else f"{m['median_back_ms']:.0f} ms"
            print(f"{m['mode']:10} {m['down_per_s']:>10.1f} {m['failed']:>7} {m['back']:>3}/{o['clients']} {median:>12}")
            k = m["mode"].replace("-", "_")
            extra[f"outage_{k}_per_s"] = round(m["down_per_s"], 1)
            extra[f"outage_{k}_back"] = m["back"]
            extra[f"outage_{k}_median_back_ms"] = None if m["median_back_ms"] is None else round(m["median_back_ms"])
    print(f"bench: host_vs_native={ratio:.2f} host_us={r['host_wasmtime']:.2f} native_us={r['native']:.2f} "
          f"node_us={n:.2f} python_us={p:.2f} wasm_kb={wasm_kb} "
          + " ".join(f"{k}={'-' if v is None else v}" for k, v in extra.items()))


if __name__ == "__main__":
    main()
