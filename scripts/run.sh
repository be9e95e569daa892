#!/usr/bin/env bash
# Set up and run the agent-recovery CLI. With no arguments, walk through the
# examples: decide what to do after attempt 1 of each observation, then print
# one summary table.
#   scripts/run.sh                                  # the walkthrough
#   scripts/run.sh decide examples/observations/openai-429-rate-limit.json --attempt 2 --seed 7
#
# Setup runs once: cargo is skipped while the binary is newer than every source
# file, and its output is shown only when the build fails. Then the binary runs
# directly, with nothing else on stdout or stderr.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${CARGO_TARGET_DIR:-target}/release/agent-recovery
stale() {
    [ ! -x "$BIN" ] && return 0
    [ -n "$(find Cargo.toml Cargo.lock host cli guest wit -newer "$BIN" -type f -print -quit 2>/dev/null)" ]
}
if stale; then
    log=$(mktemp)
    trap 'rm -f "$log"' EXIT
    if ! { rustup target add wasm32-wasip2 && cargo build --release -p agent-recovery-cli; } >"$log" 2>&1; then
        cat "$log" >&2
        echo "run.sh: the build failed (output above)" >&2
        exit 2
    fi
    rm -f "$log"
    trap - EXIT
    touch "$BIN" # cargo leaves an up-to-date binary alone; mark it checked
fi
if [ $# -gt 0 ]; then
    exec "$BIN" "$@"
fi
exec "$BIN" walkthrough examples/observations --attempt 1 --seed 42
