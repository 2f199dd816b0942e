#!/usr/bin/env bash
# What hostile reservations cost one command, for two builds side by side: HOLDERS live leases
# and OPEN open todos, each with a 140-character glob whose every comparison with another is a
# full table (they differ only in the last letter), written as hand-made files. Times
# `todo list --ready`, `quota should-run` and `status` with each binary, in one hyperfine run.
#   bash benches/hostile_globs.sh OLD NEW [HOLDERS] [OPEN] [RUNS]   (default: 300 300 3)
# Needs hyperfine and python3.
set -euo pipefail
old=$(realpath "$1"); new=$(realpath "$2"); holders=${3:-300}; open=${4:-300}; runs=${5:-3}
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
p="$work/p"; mkdir -p "$p"
"$new" --dir "$p" start-goal --project "$p" --goal-text "hostile globs" >/dev/null
python3 - "$p/.loopx/todos" "$holders" "$open" <<'PY'
import sys
d, holders, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
h = "*a" * 68
head = ('schema_version = 1\nid = "{id}"\ntitle = "{id}"\nrole = "agent"\npriority = "P2"\n'
        'status = "open"\ncreated_by = "bench"\ncreated_at = "2020-01-01T00:00:00.000Z"\n'
        'updated_at = "2020-01-01T00:00:00.000Z"\nfence = 0\n')
for i in range(holders):
    i_d = f"t-lease{i:04}"
    g = f'd{i}/{h}b'
    open(f"{d}/{i_d}.toml", "w").write(head.format(id=i_d) + f'paths = ["{g}"]\n[lease]\n'
        f'holder = "a{i}"\nfence = 1\nacquired_at = "2020-01-01T00:00:00.000Z"\n'
        f'expires_at = "2999-01-01T00:00:00.000Z"\npaths = ["{g}"]\n')
for i in range(n):
    i_d = f"t-open{i:04}"
    open(f"{d}/{i_d}.toml", "w").write(head.format(id=i_d) + f'paths = ["*/{h}c{i}"]\n')
PY
echo "== $holders live leases, $open open todos, hostile globs"
for cmd in "todo list --ready" "quota should-run" "status"; do
  hyperfine -N -i -r "$runs" \
    -n "old $cmd" "$old --dir $p --agent newcomer $cmd" \
    -n "new $cmd" "$new --dir $p --agent newcomer $cmd" 2>&1 |
    grep -E "^Benchmark|Time \\(|faster" || true
done
