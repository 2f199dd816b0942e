#!/usr/bin/env bash
# Writes link/hot_text.ld from what a release loopx runs for a few short commands on a project
# of 40 open todos with an owner key (valgrind's callgrind, one run each), so build.rs links that
# code together. Run again when the load path changes much, then rebuild and check the peak RSS
# (docs/benchmarks.md, "Plain loads at scale").
# With --check, writes nothing, traces should-run alone (read-only, on a settled project: the
# same code every time) and exits 1 when the code it runs lies outside `.text.hot` (CI runs it
# on the binary it installs).
# usage: cargo build --release && benches/hot_text.sh [--check] [BIN]
#        (needs valgrind, python3, nm, readelf)
set -euo pipefail
cd "$(dirname "$0")/.."
check=
[ "${1:-}" = --check ] && { check=1; shift; }
BIN=${1:-${CARGO_TARGET_DIR:-$PWD/target}/release/loopx}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export LOOPX_OWNER_KEY="$work/owner.key"
p="$work/p"
python3 benches/gen.py "$p" --loopx "$BIN" --open 40 --owner >/dev/null
"$BIN" --dir "$p" status >/dev/null
sleep 0.1   # past the racy window, so the second load writes the cache's rows
"$BIN" --dir "$p" status >/dev/null
i=0
trace() { # args...: one callgrind run of BIN
  i=$((i + 1))
  valgrind -q --tool=callgrind --dump-instr=yes --callgrind-out-file="$work/cg.$i" \
    "$BIN" --dir "$p" "$@" >/dev/null 2>&1 || true
}
trace --agent reader quota should-run
trace --agent reader quota should-run --json
[ -n "$check" ] && { python3 benches/hot_text.py --check "$BIN" "$work/cg.1" "$work/cg.2"; exit; }
trace --agent a1 todo claim
trace --agent a1 todo release
trace status
trace todo list
trace --version
python3 benches/hot_text.py "$BIN" link/hot_text.ld $(for n in $(seq 1 $i); do echo "$work/cg.$n"; done)
