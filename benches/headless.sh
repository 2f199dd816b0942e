#!/usr/bin/env bash
# Headless speed and memory: should-run, claim and update at several project sizes (release build).
# usage: cargo build --release && benches/headless.sh      (needs hyperfine, python3, GNU time)
set -euo pipefail
cd "$(dirname "$0")/.."
L=$PWD/target/release/loopx
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export LOOPX_OWNER_KEY="$work/owner.key"

median() { # command... -> median ms
  hyperfine -N --warmup 3 --runs "${RUNS:-40}" --export-json "$work/h.json" "$@" >/dev/null 2>&1
  python3 -c 'import json,sys; r=json.load(open(sys.argv[1]))["results"][0]; print("%.2f" % (r["median"]*1000))' "$work/h.json"
}
peak() { # command... -> peak RSS in MB
  /usr/bin/time -f "%M" "$@" 2>&1 >/dev/null | tail -1 | awk '{ printf "%.1f", $1 / 1024 }'
}

row() { # name dir
  local name=$1 d=$2
  local t
  t=$("$L" --dir "$d" --agent holder todo claim --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["todo"]["id"])')
  local sr cl up size mem
  sr=$(median "$L --dir $d --agent reader quota should-run")
  cl=$(median "$L --dir $d --agent claimer todo claim --ttl 1s")
  up=$(median "$L --dir $d --agent holder todo update $t --evidence step")
  size=$("$L" --dir "$d" --agent reader quota should-run --json | wc -c || true)
  mem=$(peak "$L" --dir "$d" --agent claimer2 todo claim --ttl 1s)
  printf "| %s | %s | %s | %s | %s | %s |\n" "$name" "$sr" "$cl" "$up" "$size" "$mem"
}

echo "| project | should-run ms | claim ms | update ms | should-run bytes | claim peak MB |"
echo "| --- | --- | --- | --- | --- | --- |"
for n in 100 1000 10000; do
  python3 benches/gen.py "$work/p$n" --loopx "$L" --open "$n" >/dev/null
  "$L" --dir "$work/p$n" status >/dev/null   # first load writes the cache
  RUNS=$([ "$n" = 10000 ] && echo 15 || echo 40) row "$n open" "$work/p$n"
done
python3 benches/gen.py "$work/ow" --loopx "$L" --open 100 --owner >/dev/null
"$L" --dir "$work/ow" status >/dev/null
row "100 open, an owner key (the seal checked on every load)" "$work/ow"
python3 benches/gen.py "$work/ev" --loopx "$L" --open 100 --evidence 10000 >/dev/null
row "100 open, 10,000 evidence on the held todo" "$work/ev"
python3 benches/gen.py "$work/ar" --loopx "$L" --open 100 --archived 100000 >/dev/null
row "100 open, 100,000 archived" "$work/ar"
