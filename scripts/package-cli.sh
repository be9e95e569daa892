#!/usr/bin/env bash
# Install the CLI into PREFIX with the reference policy precompiled for this
# machine, so that its first start loads machine code instead of compiling:
#
#   PREFIX/bin/agent-recovery
#   PREFIX/lib/agent-recovery/<sha256 of the reference>.cwasm
#
# The artifact is written by the installed program itself (`agent-recovery
# precompile`), with the engine it loads with. It is for this build and this
# machine's CPU features: where they differ, wasmtime refuses it and the CLI
# compiles (and caches) as without it.
#
# usage: scripts/package-cli.sh PREFIX [--bin PATH] [--tar FILE.tar.gz]
#   --bin PATH   install this binary (default: build it, target/release/agent-recovery)
#   --tar FILE   also write a tarball of the two files, relative to PREFIX
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
prefix= bin= tarball=
while [ $# -gt 0 ]; do
  case "$1" in
    --bin) bin=${2:?--bin needs a path}; shift 2 ;;
    --tar) tarball=${2:?--tar needs a file name}; shift 2 ;;
    -h|--help) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    -*) echo "package-cli.sh: unknown option $1; see scripts/package-cli.sh --help" >&2; exit 2 ;;
    *) [ -z "$prefix" ] || { echo "package-cli.sh: one PREFIX only, got $prefix and $1" >&2; exit 2; }
       prefix=$1; shift ;;
  esac
done
[ -n "$prefix" ] || { echo "package-cli.sh: no PREFIX; usage: scripts/package-cli.sh PREFIX [--bin PATH] [--tar FILE]" >&2; exit 2; }
if [ -z "$bin" ]; then
  (cd "$root" && cargo build --release --quiet -p agent-recovery-cli)
  bin=$root/target/release/agent-recovery
fi
install -d "$prefix/bin" "$prefix/lib/agent-recovery"
install -m 0755 "$bin" "$prefix/bin/agent-recovery"
# Writes PREFIX/lib/agent-recovery/<sha256>.cwasm (the default --out of a
# program in PREFIX/bin, where it looks at start) and removes the artifacts
# of earlier builds there.
"$prefix/bin/agent-recovery" precompile
if [ -n "$tarball" ]; then
  tar -czf "$tarball" -C "$prefix" bin/agent-recovery lib/agent-recovery
  echo "wrote $tarball"
fi
