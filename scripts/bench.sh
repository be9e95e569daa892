#!/usr/bin/env bash
# Run the benchmarks of all three runtimes and print one table;
# the last line is `bench: host_vs_native=.. host_us=.. native_us=.. node_us=.. python_us=.. wasm_kb=..`.
# Sets up what it needs like scripts/test-all.sh: the wasm target, the release
# build, node/node_modules, .venv with the Python package.
set -euo pipefail
cd "$(dirname "$0")/.."
rustup target add wasm32-wasip2 >/dev/null
cargo build --release --quiet -p agent-recovery-cli
[ -d node/node_modules/@bytecodealliance/jco-transpile ] || (cd node && npm ci --no-audit --no-fund --loglevel=error)
(cd node && node scripts/build.mjs >/dev/null 2>&1)
if [ ! -x .venv/bin/python ]; then python3 -m venv .venv; fi
.venv/bin/python -c "import agent_recovery" 2>/dev/null || .venv/bin/pip install --quiet ./python
exec python3 scripts/bench.py
