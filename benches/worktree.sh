#!/usr/bin/env bash
# What `--worktree` costs a claim: `todo claim ID` against `todo claim ID --worktree` (the
# worktree made afresh each run: checked out from the branch, FILES files) in a repository of
# FILES tracked files, and a done that removes a clean worktree against a plain done.
#   bash benches/worktree.sh [LOOPX] [FILES]      (default: target/release/loopx, 1000)
# Needs hyperfine and git. Prints hyperfine's summary for each case.
set -euo pipefail
bin=$(realpath "${1:-target/release/loopx}"); files=${2:-1000}
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
export LOOPX_AGENT=bench
p="$work/p"; mkdir -p "$p"
git -C "$p" init -q
for i in $(seq 1 "$files"); do d="$p/src/d$((i % 40))"; mkdir -p "$d"; echo "line $i" > "$d/f$i.txt"; done
echo ".loopx/" > "$p/.gitignore"
git -C "$p" add . && git -C "$p" -c user.name=b -c user.email=b@example.invalid commit -qm init
"$bin" --dir "$p" start-goal --goal-text bench >/dev/null
id=$("$bin" --dir "$p" todo add "bench work")
free="sh -c '$bin --dir $p todo release $id >/dev/null 2>&1; rm -rf $p/.loopx/worktrees/$id; git -C $p worktree prune'"
echo "== claim, $files tracked files"
hyperfine -N --warmup 3 -r 30 \
  -p "$free" -n "claim ID" "$bin --dir $p todo claim $id" \
  -p "$free" -n "claim ID --worktree" "$bin --dir $p todo claim $id --worktree" \
  2>&1 | grep -E "^Benchmark|Time \\(mean"
"$bin" --dir "$p" todo release "$id" >/dev/null 2>&1 || true
# A done of the todo the agent holds (a new one each run, made and claimed before it).
plain="sh -c '$bin --dir $p todo claim \$($bin --dir $p todo add w) >/dev/null'"
tree="sh -c '$bin --dir $p todo claim \$($bin --dir $p todo add w) --worktree >/dev/null'"
echo "== done, $files tracked files"
hyperfine -N --warmup 3 -r 30 \
  -p "$plain" -n "done" "$bin --dir $p todo update --status done" \
  -p "$tree" -n "done, removing a clean worktree" "$bin --dir $p todo update --status done" \
  2>&1 | grep -E "^Benchmark|Time \\(mean"
