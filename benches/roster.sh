#!/bin/sh
# `loopx agents` with 50 agents and 10,000 journal lines (docs/benchmarks.md, "The roster").
# Usage: cargo build --release && benches/roster.sh [target/release/loopx]
set -eu
L=$(realpath "${1:-target/release/loopx}")
D=$(mktemp -d)
trap 'rm -rf "$D"' EXIT
export HOME="$D" LOOPX_OWNER_KEY="$D/owner.key"
mkdir "$D/p" && cd "$D/p"
"$L" start-goal --goal-text bench >/dev/null
"$L" owner init >/dev/null
for i in $(seq 1 50); do "$L" --agent "agent-$i" todo add "todo $i" >/dev/null; done
for i in $(seq 1 50); do "$L" --agent "agent-$i" todo claim >/dev/null; done
# 9,900 more lines (updates by the 50 agents), chained like loopx writes them.
python3 - <<'PY'
import hashlib, json
p = ".loopx/journal.jsonl"
lines = [l for l in open(p, "rb").read().split(b"\n") if l]
held = {json.loads(l)["actor"]: json.loads(l)["target"] for l in lines
        if json.loads(l)["action"] == "todo.claim"}
seq, prev, out = json.loads(lines[-1])["seq"], hashlib.sha256(lines[-1]).hexdigest(), []
for k in range(10_000 - len(lines)):
    seq += 1
    a = f"agent-{k % 50 + 1}"
    d = {"seq": seq, "at": "2026-12-01T07:%02d:%02d.%03dZ" % (k // 6000, (k // 100) % 60, k % 1000),
         "actor": a, "action": "todo.update", "target": held[a],
         "data": {"fence": 1, "evidence": 1}, "prev": prev}
    line = json.dumps(d, separators=(",", ":")).encode()
    prev = hashlib.sha256(line).hexdigest()
    out.append(line)
open(p, "ab").write(b"\n".join(out) + b"\n")
PY
"$L" log --verify
hyperfine -N --warmup 5 -r 200 "$L todo list" "$L agents" "$L agents --json"
