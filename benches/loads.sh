#!/usr/bin/env bash
# Loads side by side (issue 24): an old loopx against this one in one run, on the same projects.
# should-run at 1,000 and 10,000 open, `monitor poll` with nothing due at 1,000, and what
# `turn -- true` adds at 1,000 (breaker off). Each binary gets its own caches: they are
# deleted before each switch, then one `status` writes them.
# usage: OLD=/path/to/old/loopx benches/loads.sh      (needs hyperfine, python3; release builds)
set -euo pipefail
cd "$(dirname "$0")/.."
NEW=${NEW:-$PWD/target/release/loopx}
OLD=${OLD:?set OLD to an older loopx binary}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export LOOPX_OWNER_KEY="$work/owner.key"

median() { # command... -> median ms
  hyperfine -N --warmup 5 --runs "${RUNS:-40}" --export-json "$work/h.json" "$@" >"$work/h.log" 2>&1 || { cat "$work/h.log" >&2; exit 1; }
  python3 -c 'import json,sys; r=json.load(open(sys.argv[1]))["results"][0]; print("%.2f" % (r["median"]*1000))' "$work/h.json"
}
fresh() { # binary dir: the caches that binary writes
  rm -rf "$2/.loopx/cache"
  "$1" --dir "$2" status >/dev/null
  "$1" --dir "$2" status >/dev/null
}

for n in 1000 10000; do
  python3 benches/gen.py "$work/p$n" --loopx "$NEW" --open "$n" --owner >/dev/null
done
m=$work/mon
python3 benches/gen.py "$m" --loopx "$NEW" --open 990 --owner >/dev/null
for i in $(seq 1 10); do
  id=$("$NEW" --dir "$m" todo add "watch $i" --every 1h)
  "$NEW" --dir "$m" monitor propose "$id" -- echo "$i" >/dev/null
  "$NEW" --dir "$m" monitor approve "$id" >/dev/null
done
"$NEW" --dir "$m" monitor poll >/dev/null   # each check runs once: nothing is due after
t=$work/turn
python3 benches/gen.py "$t" --loopx "$NEW" --open 1000 --gates 0 --owner >/dev/null
"$NEW" --dir "$t" quota set --slots 100000 --window 2s --breaker 0 >/dev/null

echo "| median ms | old | new | target |"
echo "| --- | --- | --- | --- |"
row() { # label target dir args...
  local label=$1 target=$2 dir=$3; shift 3
  fresh "$OLD" "$dir"; local o; o=$(median "$OLD --dir $dir $*")
  fresh "$NEW" "$dir"; local w; w=$(median "$NEW --dir $dir $*")
  printf "| %s | %s | %s | %s |\n" "$label" "$o" "$w" "$target"
}
row "should-run, 1,000 open" "under 3" "$work/p1000" quota should-run
row "should-run, 10,000 open" "under 6" "$work/p10000" quota should-run
row "monitor poll, nothing due, 1,000" "under 3" "$m" monitor poll
base=$(median /bin/true)
fresh "$OLD" "$t"; ot=$(median "$OLD --dir $t --agent runner turn -- /bin/true")
fresh "$NEW" "$t"; nt=$(median "$NEW --dir $t --agent runner turn -- /bin/true")
python3 -c "import sys; b,o,n=map(float,sys.argv[1:]); print('| turn -- true, added, 1,000 | %.2f | %.2f | under 6 |' % (o-b, n-b))" "$base" "$ot" "$nt"
