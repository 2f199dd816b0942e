#!/usr/bin/env bash
# What `loopx turn` adds to the command it runs: `true` alone against `loopx turn -- true`
# (should-run and the claim in one transaction, the run, then evidence, release and one slot in
# a second), at 1 and 1,000 open todos (release build). The breaker is off (`--breaker 0`):
# the same `true` turn again and again would park each todo after three (issue 23).
# usage: cargo build --release && benches/turn.sh      (needs hyperfine, python3)
set -euo pipefail
cd "$(dirname "$0")/.."
L=$PWD/target/release/loopx
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export LOOPX_OWNER_KEY="$work/owner.key"

median() { # command... -> median ms
  hyperfine -N --warmup 5 --runs "${RUNS:-60}" --export-json "$work/h.json" "$@" >"$work/h.log" 2>&1 || { cat "$work/h.log" >&2; exit 1; }
  python3 -c 'import json,sys; r=json.load(open(sys.argv[1]))["results"][0]; print("%.2f" % (r["median"]*1000))' "$work/h.json"
}

echo "| project | \`true\` ms | \`loopx turn -- true\` ms | added ms | one transaction (\`quota spend-slot\`) ms |"
echo "| --- | --- | --- | --- | --- |"
for n in 1 100 1000; do
  d=$work/p$n
  python3 benches/gen.py "$d" --loopx "$L" --open "$n" --gates 0 --owner >/dev/null
  # Enough slots in a short window that every run may spend one.
  "$L" --dir "$d" quota set --slots 100000 --window 2s --breaker 0 >/dev/null
  "$L" --dir "$d" status >/dev/null
  base=$(median "/bin/true")
  turn=$(median "$L --dir $d --agent runner turn -- /bin/true")
  one=$(median "$L --dir $d --agent spender quota spend-slot")
  added=$(python3 -c "print('%.2f' % ($turn - $base))")
  printf "| %s open | %s | %s | %s | %s |\n" "$n" "$base" "$turn" "$added" "$one"
done
