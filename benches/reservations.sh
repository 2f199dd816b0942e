#!/usr/bin/env bash
# What reservations cost a claim, at 1,000 open todos with HOLDERS live reservations held by
# other agents (each `area<i>/**`): a named claim without paths, the same with `--paths`
# (checked against every live reservation), and a bare claim that must skip todos whose own
# paths overlap a live reservation. Each run is released again before the next (not timed).
#   bash benches/reservations.sh [LOOPX] [HOLDERS]      (default: target/release/loopx, 50;
#   0 gives the plain claim to compare with)
# Needs hyperfine and python3. Prints hyperfine's summary for each case.
set -euo pipefail
bin=$(realpath "${1:-target/release/loopx}"); holders=${2:-50}
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
export LOOPX_AGENT=bench
p="$work/p"
python3 "$here/gen.py" "$p" --loopx "$bin" --open 1000 --gates 0 >/dev/null
for i in $(seq 1 "$holders"); do
  "$bin" --dir "$p" --agent "holder$i" todo claim --ttl 7d --paths "area$i/**" >/dev/null
done
# The best six todos left, by the kernel's order: the first five get their own paths inside
# holder1's reservation, so a bare claim skips them and takes the sixth, the named claims' one.
mapfile -t ready < <("$bin" --dir "$p" --json todo list --ready |
  python3 -c 'import json,sys; [print(t["id"]) for t in json.load(sys.stdin)["todos"][:6]]')
id=${ready[5]}
for t in "${ready[@]:0:5}"; do
  python3 - "$p/.loopx/todos/$t.toml" <<'PY'
import sys
f = sys.argv[1]
s = open(f).read()
open(f, "w").write('paths = ["area1/src/x.rs"]\n' + s)
PY
done
rel="$bin --dir $p todo release"
# A release that finds nothing to give back (the first run) is fine.
pre="sh -c '$rel $id >/dev/null 2>&1 || true'"
echo "== 1,000 open todos, $holders live reservations"
hyperfine -N --warmup 5 -r 100 \
  -p "$pre" -n "claim ID" "$bin --dir $p todo claim $id" \
  -p "$pre" -n "claim ID --paths" "$bin --dir $p todo claim $id --paths free/**" \
  2>&1 | grep -E "^Benchmark|Time \\(mean"
$rel "$id" >/dev/null
# The bare claim takes the first todo it may: a bare release gives back whichever that was.
hyperfine -N --warmup 5 -r 100 \
  -p "sh -c '$rel >/dev/null 2>&1 || true'" -n "bare claim, 5 best skipped" "$bin --dir $p todo claim" \
  2>&1 | grep -E "^Benchmark|Time \\(mean"
