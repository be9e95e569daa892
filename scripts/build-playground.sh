#!/usr/bin/env bash
# Build the browser playground into playground/dist/ (one command): builds the
# host when the reference component is not built yet (host/build.rs writes
# target/wasm-policies/artifacts.json), installs playground/'s npm packages when
# missing, then transpiles the component and copies the page.
#   scripts/build-playground.sh
#   python3 -m http.server --directory playground/dist 8000    # open http://localhost:8000/
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -f target/wasm-policies/artifacts.json ]; then
    rustup target add wasm32-wasip2 >/dev/null
    cargo build --release --quiet -p agent-recovery
fi
if [ ! -d playground/node_modules/@bytecodealliance/jco-transpile ]; then
    (cd playground && npm ci --no-audit --no-fund --loglevel=error)
fi
cd playground && exec node build.mjs
