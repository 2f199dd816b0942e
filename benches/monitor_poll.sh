#!/usr/bin/env bash
# monitor poll with nothing due at 1,000 todos (990 ordinary, 10 watchers with approved checks,
# each already run), beside should-run on the same project (release build).
# usage: cargo build --release && benches/monitor_poll.sh      (needs hyperfine, python3)
set -euo pipefail
cd "$(dirname "$0")/.."
L=${LOOPX:-$PWD/target/release/loopx}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export LOOPX_OWNER_KEY="$work/owner.key"
p="$work/p"
python3 benches/gen.py "$p" --loopx "$L" --open 990 --owner >/dev/null
for i in $(seq 1 10); do
  id=$("$L" --dir "$p" todo add "watch $i" --every 1h)
  "$L" --dir "$p" monitor propose "$id" -- echo "$i" >/dev/null
  "$L" --dir "$p" monitor approve "$id" >/dev/null
done
"$L" --dir "$p" monitor poll >/dev/null   # each check runs once: nothing is due after
"$L" --dir "$p" status >/dev/null         # writes the parse cache
"$L" --dir "$p" monitor poll | head -1
hyperfine -N --warmup 3 --runs "${RUNS:-40}" \
  "$L --dir $p monitor poll" "$L --dir $p quota should-run"
