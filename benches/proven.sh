#!/usr/bin/env bash
# What a checked done adds over a plain done: `todo update ID --status done` on a claimed todo,
# without a check and with an approved check of `true`; then `sh -c true` alone, the check's own
# cost, to subtract. Each run gets a fresh claimed todo (hyperfine --prepare).
#   bash benches/proven.sh [LOOPX] [OPEN_TODOS]     (default: target/release/loopx, 100)
set -euo pipefail
bin=$(realpath "${1:-target/release/loopx}"); open=${2:-100}
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
export LOOPX_AGENT=bench LOOPX_OWNER_KEY="$work/owner.key"
p="$work/p"
python3 "$here/gen.py" "$p" --loopx "$bin" --open "$open" --gates 0 >/dev/null
"$bin" --dir "$p" owner init >/dev/null
git -C "$p" init -q
echo ".loopx/" > "$p/.gitignore"
git -C "$p" add .gitignore
git -C "$p" -c user.name=b -c user.email=b@example.invalid commit -qm init
# A fresh claimed todo; with "check", an approved check of `true`. Its id goes to $work/id.
cat > "$work/prep.sh" <<PREP
#!/bin/sh
set -e
id=\$("$bin" --dir "$p" --json todo add "bench done" -p P0 | python3 -c 'import json,sys; print(json.load(sys.stdin)["todo"]["id"])')
"$bin" --dir "$p" todo claim "\$id" >/dev/null
if [ "\$1" = check ]; then
  "$bin" --dir "$p" todo check propose "\$id" -- true >/dev/null
  "$bin" --dir "$p" todo check approve "\$id" >/dev/null
fi
echo "\$id" > "$work/id"
PREP
chmod +x "$work/prep.sh"
hyperfine -N --warmup 3 -r 30 \
  --prepare "$work/prep.sh plain" -n "plain done" "sh -c '$bin --dir $p todo update \$(cat $work/id) --status done'" \
  --prepare "$work/prep.sh check" -n "checked done (check: true)" "sh -c '$bin --dir $p todo update \$(cat $work/id) --status done'" \
  --prepare true -n "the check alone (sh -c true)" "sh -c true" 2>&1 | grep -E '^Benchmark|Time \(mean'
