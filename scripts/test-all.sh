#!/usr/bin/env bash
# Set up and run every test: Rust (policy, host, CLI, fixtures, example policy),
# Node (jco), Python (wasmtime-py), the cross-runtime conformance check and the
# examples. Installs what it needs: the wasm32-wasip2 target, npm packages (in
# node/node_modules) and pip packages (in .venv).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
step() { printf '\n==> %s\n' "$*"; }

step "toolchain"
rustup target add wasm32-wasip2 >/dev/null
command -v node >/dev/null || { echo "node 20+ is required (https://nodejs.org)"; exit 2; }
command -v python3 >/dev/null || { echo "python 3.11+ is required"; exit 2; }

step "vectors: the independently computed idempotency keys are up to date"
python3 tests/vectors/tools/keys.py --check

step "rust: format and lints"
cargo fmt --all --check
cargo clippy --release --workspace --all-targets --quiet -- -D warnings

step "rust: tests (release profile, one build for tests, CLI and benches)"
cargo test --release --workspace
cargo build --release --quiet -p agent-recovery --example conformance
# The fixtures the Node and Python tests load (target/wasm-policies/artifacts.json);
# already built as a dev-dependency of the host, named here so the order is explicit.
cargo build --release --quiet -p agent-recovery -p agent-recovery-test-artifacts

step "node: install, build and test"
(cd node && npm ci --no-audit --no-fund --loglevel=error && npm test)

step "python: install and test"
python3 -m venv .venv
.venv/bin/pip install --quiet --upgrade pip
.venv/bin/pip install --quiet "./python[test]"
.venv/bin/python -m pytest -q python/tests

step "conformance: rust, node and python give byte-identical output"
PATH="$ROOT/.venv/bin:$PATH" .venv/bin/python tests/conformance/run.py --count 3000

step "examples"
node examples/node/agent-loop.mjs >/dev/null
.venv/bin/python examples/python/agent_loop.py >/dev/null
echo "examples ran"

printf '\nall tests passed\n'
