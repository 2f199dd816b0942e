#!/usr/bin/env bash
# Routing's cost: should-run and claim at 1,000 open todos, plain and with 10 capabilities (each
# todo requires one; agents cap0..cap9 declare one each), for two binaries, alternating rounds.
# usage: benches/route.sh BASE_LOOPX NEW_LOOPX [ROUNDS]   (release builds; needs hyperfine, python3)
set -euo pipefail
cd "$(dirname "$0")/.."
base=$1 new=$2 rounds=${3:-3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export LOOPX_OWNER_KEY="$work/owner.key"

median() { # command -> median ms (a non-zero exit, like should-run's 3, is not a failure here)
  hyperfine -N -i --warmup 3 --runs "${RUNS:-40}" --export-json "$work/h.json" "$1" >/dev/null 2>&1
  python3 -c 'import json,sys; r=json.load(open(sys.argv[1]))["results"][0]; print("%.2f" % (r["median"]*1000))' "$work/h.json"
}

python3 benches/gen.py "$work/plain" --loopx "$new" --open 1000 >/dev/null
python3 benches/gen.py "$work/caps" --loopx "$new" --open 1000 --caps 10 >/dev/null
echo "| round | binary | project | should-run ms (cap3) | should-run ms (no capability) | claim ms (cap3) |"
echo "| --- | --- | --- | --- | --- | --- |"
for r in $(seq "$rounds"); do
  for which in base new; do
    if [ "$which" = base ]; then L=$base; else L=$new; fi
    for p in plain caps; do
      d="$work/run-$which-$p-$r"
      cp -a "$work/$p" "$d"
      "$L" --dir "$d" status >/dev/null   # the first load writes the cache
      sr=$(median "$L --dir $d --agent cap3 quota should-run")
      nw=$(median "$L --dir $d --agent nobody quota should-run")
      cl=$(median "$L --dir $d --agent cap3 todo claim --ttl 1s")
      printf "| %s | %s | %s | %s | %s | %s |\n" "$r" "$which" "$p" "$sr" "$nw" "$cl"
      rm -rf "$d"
    done
  done
done
