#!/usr/bin/env bash
# Set up and run the agent-recovery CLI. With no arguments, walk through the
# examples: classify each observation and decide what to do after attempt 1.
#   scripts/run.sh                                  # the walkthrough
#   scripts/run.sh decide examples/observations/openai-429-rate-limit.json --attempt 2 --seed 7
set -euo pipefail
cd "$(dirname "$0")/.."
rustup target add wasm32-wasip2 >/dev/null
cargo build --release --quiet -p agent-recovery
BIN=target/release/agent-recovery
if [ $# -gt 0 ]; then
    exec "$BIN" "$@"
fi
for f in examples/observations/*.json; do
    echo "== $f"
    "$BIN" classify "$f"
    "$BIN" decide "$f" --attempt 1 --seed 42
done
