#!/usr/bin/env bash
# The git evidence of `todo update` (no evidence flags), side by side for two builds: a
# repository of FILES tracked files with three changes, 60 open todos, one claimed.
#   bash benches/git_evidence.sh OLD_LOOPX NEW_LOOPX [FILES...]   (default: 200 2000)
# Needs hyperfine and git. Prints hyperfine's summary for each size.
set -euo pipefail
old=$(realpath "$1"); new=$(realpath "$2"); shift 2
sizes=("${@:-200 2000}")
[ $# -gt 0 ] || sizes=(200 2000)
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
export LOOPX_AGENT=bench LOOPX_OWNER_KEY="$work/no-key"
for n in "${sizes[@]}"; do
  p="$work/p$n"
  python3 "$here/gen.py" "$p" --loopx "$new" --open 60 --gates 0 >/dev/null
  git -C "$p" init -q
  for i in $(seq 1 "$n"); do
    d="$p/src/d$((i % 40))"; mkdir -p "$d"; echo "line $i" > "$d/f$i.txt"
  done
  git -C "$p" add src
  git -C "$p" -c user.name=b -c user.email=b@example.invalid commit -qm init
  echo "changed" >> "$p/src/d1/f1.txt"; echo new > "$p/new.txt"; rm "$p/src/d2/f2.txt"
  id=$("$new" --dir "$p" --json todo claim | python3 -c 'import json,sys; print(json.load(sys.stdin)["todo"]["id"])')
  echo "== $n tracked files, 3 changes"
  hyperfine -N --warmup 5 -r 40 \
    -n "old (git status)" "$old --dir $p todo update $id" \
    -n "new (libgit2)" "$new --dir $p todo update $id" \
    -n "no git (--evidence)" "$new --dir $p todo update $id --evidence step" 2>&1 |
    grep -E '^Benchmark|Time \(mean'
done
