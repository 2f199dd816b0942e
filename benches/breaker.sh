#!/usr/bin/env bash
# What the no-progress breaker adds to `loopx turn -- /bin/true`: the same binary with the
# breaker off (`quota set --breaker 0`: nothing measured) and on (the default: the work tree's
# HEAD and changed files read before and after the command, and the todo's last evidence), at
# 1,000 open todos, outside git and in a repository of FILES tracked files with three changes.
#   bash benches/breaker.sh [LOOPX] [FILES]      (default: target/release/loopx, 2000)
# Needs hyperfine, git and python3. Prints hyperfine's summary for each pair.
set -euo pipefail
bin=$(realpath "${1:-target/release/loopx}"); files=${2:-2000}
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
export LOOPX_AGENT=bench LOOPX_OWNER_KEY="$work/owner.key"
for where in plain git; do
  for b in 0 3; do
    p="$work/$where-$b"
    python3 "$here/gen.py" "$p" --loopx "$bin" --open 1000 --gates 0 --owner >/dev/null
    # Slots enough for every run; the breaker off or on (3: the default).
    "$bin" --dir "$p" quota set --slots 100000 --window 2s --breaker "$b" >/dev/null
    if [ "$where" = git ]; then
      git -C "$p" init -q
      echo ".loopx/" > "$p/.gitignore"
      for i in $(seq 1 "$files"); do
        d="$p/src/d$((i % 40))"; mkdir -p "$d"; echo "line $i" > "$d/f$i.txt"
      done
      git -C "$p" add .gitignore src
      git -C "$p" -c user.name=b -c user.email=b@example.invalid commit -qm init
      echo "changed" >> "$p/src/d1/f1.txt"; echo new > "$p/new.txt"; rm "$p/src/d2/f2.txt"
    fi
  done
  if [ "$where" = git ]; then what=", in git with $files tracked files"; else what=", outside git"; fi
  echo "== 1,000 open todos$what"
  hyperfine -N --warmup 5 -r 60 \
    -n "breaker off" "$bin --dir $work/$where-0 turn -- /bin/true" \
    -n "breaker on (3)" "$bin --dir $work/$where-3 turn -- /bin/true" 2>&1 |
    grep -E '^Benchmark|Time \(mean'
done
