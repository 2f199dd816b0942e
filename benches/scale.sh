#!/usr/bin/env bash
# The plain load at scale (issue 39): `quota should-run` and `todo claim` at 40, 1,000 and
# 10,000 open todos, an old loopx beside this one in one hyperfine run, as ratios to each
# binary's own cost at 40 (and again interleaved); the peak RSS of should-run at 40; and the
# floor of one stat per todo file, in a fresh process and warm. Each binary runs on its own copy of each project, its caches
# written by two `status`.
# A claim's todo is released before each run (not timed), so every run claims.
# usage: OLD=/path/to/old/loopx benches/scale.sh      (needs hyperfine, python3, GNU time;
#        release builds: cargo build --release)
set -euo pipefail
cd "$(dirname "$0")/.."
NEW=${NEW:-$PWD/target/release/loopx}
OLD=${OLD:?set OLD to an older loopx binary}
RUNS=${RUNS:-60}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export LOOPX_OWNER_KEY="$work/owner.key"
sizes=(40 1000 10000)

for n in "${sizes[@]}"; do
  python3 benches/gen.py "$work/p$n" --loopx "$NEW" --open "$n" --owner >/dev/null
  for b in old new; do
    bin=$OLD; [ $b = new ] && bin=$NEW
    cp -a "$work/p$n" "$work/$b$n"
    rm -rf "$work/$b$n/.loopx/cache"
    "$bin" --dir "$work/$b$n" status >/dev/null
    sleep 0.1   # past the racy window, so the second load writes the rows
    "$bin" --dir "$work/$b$n" status >/dev/null
    "$bin" --dir "$work/$b$n" --agent claimer todo claim >/dev/null   # held: released first
  done
done

run() { # name args...: one hyperfine run, both binaries, every size; prints name, size, medians
  local name=$1; shift
  local cmds=() prep=()
  for b in old new; do
    bin=$OLD; [ $b = new ] && bin=$NEW
    for n in "${sizes[@]}"; do
      cmds+=("$bin --dir $work/$b$n $*")
      prep+=(--prepare "$bin --dir $work/$b$n --agent claimer todo release")
    done
  done
  local p=(); [ "$name" = claim ] && p=("${prep[@]}")
  hyperfine -N --warmup 5 --runs "$RUNS" "${p[@]}" --export-json "$work/$name.json" "${cmds[@]}" \
    >"$work/$name.log" 2>&1 || { cat "$work/$name.log" >&2; exit 1; }
  python3 - "$work/$name.json" "$name" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))["results"]
m = [x["median"] * 1000 for x in r]
for i, b in enumerate(["old", "new"]):
    a = m[3 * i:3 * i + 3]
    print("| %s, %s | %.2f | %.2f (%.2fx) | %.2f (%.2fx) |"
          % (sys.argv[2], b, a[0], a[1], a[1] / a[0], a[2], a[2] / a[0]))
PY
}

echo "| median ms | 40 open | 1,000 open (x of 40) | 10,000 open (x of 40) |"
echo "| --- | --- | --- | --- |"
run should-run --agent reader quota should-run
run claim --agent claimer todo claim
# The same commands again, one run of each in turn (wall / CPU ms): on a shared machine the
# load moves while hyperfine runs one command's runs after another.
sr=() cl=()
for b in old new; do
  bin=$OLD; [ $b = new ] && bin=$NEW
  for n in "${sizes[@]}"; do
    sr+=("$bin --dir $work/$b$n --agent reader quota should-run")
    cl+=("$bin --dir $work/$b$n --agent claimer todo release ;; $bin --dir $work/$b$n --agent claimer todo claim")
  done
done
python3 benches/interleave.py "$RUNS" should-run "${sr[@]}"
python3 benches/interleave.py "$RUNS" claim "${cl[@]}"
for b in old new; do
  bin=$OLD; [ $b = new ] && bin=$NEW
  kb=$( { /usr/bin/time -f "%M" "$bin" --dir "$work/${b}40" --agent reader quota should-run >/dev/null; } 2>&1 | tail -1)
  echo "peak RSS, should-run at 40, $b: $((kb / 1024)).$(( (kb % 1024) * 10 / 1024 )) MB"
done
# The floor: a fresh process that stats every todo file once (on two threads), beside one that
# only lists them; the difference is what the stats cost a command. Then the same stats repeated
# in one process, warm in the CPU's caches, which costs less than a command pays.
fl=$(cargo bench --bench stat_floor --no-run 2>&1 | sed -n 's/.*(\(.*stat_floor-[^)]*\))$/\1/p' | tail -1)
fc=()
for mode in --list-only "--once --two"; do
  for n in "${sizes[@]}"; do fc+=("$fl $mode $work/p$n/.loopx/todos"); done
done
LABELS="list only,list and stat" python3 benches/interleave.py "$RUNS" floor "${fc[@]}"
"$fl" "$work/p1000/.loopx/todos" "$work/p10000/.loopx/todos"
