#!/usr/bin/env bash
# What a sealed hook adds to the command that fires it: `gate open` with no hook against
# `gate open` with a `gate.opened` hook (`true`), which starts a detached `loopx hook run` and
# returns; and should-run with and without budgets (release build).
# usage: cargo build --release && benches/hooks.sh      (needs hyperfine, python3)
set -euo pipefail
cd "$(dirname "$0")/.."
L=${LOOPX:-$PWD/target/release/loopx}
work=$(mktemp -d)
trap 'sleep 2; rm -rf "$work"' EXIT
export LOOPX_OWNER_KEY="$work/owner.key"

median() { # command... -> median ms
  hyperfine -N -i --warmup 5 --runs "${RUNS:-100}" --export-json "$work/h.json" "$@" >"$work/h.log" 2>&1 || { cat "$work/h.log" >&2; exit 1; }
  python3 -c 'import json,sys; r=json.load(open(sys.argv[1]))["results"][0]; print("%.2f" % (r["median"]*1000))' "$work/h.json"
}

for p in plain hooked; do
  mkdir -p "$work/$p"
  (cd "$work/$p" && "$L" start-goal --goal-text bench >/dev/null && "$L" owner init >/dev/null && "$L" todo add work >/dev/null)
done
"$L" --dir "$work/hooked" hook set gate.opened -- true >/dev/null
"$L" --dir "$work/hooked" quota set --tokens 1000000 --cost-usd 100 >/dev/null
echo "| measure | no hook, no budget ms | hook / budgets ms |"
echo "| --- | --- | --- |"
printf "| gate open | %s | %s |\n" "$(median "$L --dir $work/plain gate open q")" "$(median "$L --dir $work/hooked gate open q")"
printf "| quota should-run | %s | %s |\n" "$(median "$L --dir $work/plain quota should-run")" "$(median "$L --dir $work/hooked quota should-run")"
fails=$(grep -c '"hook.fail"' "$work/hooked/.loopx/journal.jsonl" || true)
echo "hook.fail lines: $fails"
