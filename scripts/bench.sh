#!/usr/bin/env bash
# Run the benchmarks of all three runtimes and print one table, then the retry
# libraries side by side, the degraded store's step cost and the outage harness
# (`--no-outage` skips it); the last line is `bench: host_vs_native=.. host_us=..
# native_us=.. node_us=.. python_us=.. wasm_kb=..` and the new figures (scripts/bench.py).
# Sets up what it needs like scripts/test-all.sh: the wasm target, the release
# build, node/node_modules, .venv with the Python package.
set -euo pipefail
cd "$(dirname "$0")/.."
rustup target add wasm32-wasip2 >/dev/null
cargo build --release --quiet -p agent-recovery-cli
[ -d node/node_modules/@bytecodealliance/jco-transpile ] && [ -d node/node_modules/p-retry ] && [ -d node/node_modules/cockatiel ] || (cd node && npm ci --no-audit --no-fund --loglevel=error)
(cd node && node scripts/build.mjs >/dev/null 2>&1)
if [ ! -x .venv/bin/python ]; then python3 -m venv .venv; fi
# The package and the retry libraries the side-by-side figures compare with (its `bench` extra).
.venv/bin/python -c "import agent_recovery, tenacity, stamina" 2>/dev/null || .venv/bin/pip install --quiet './python[bench]'
exec python3 scripts/bench.py "$@"
