#!/usr/bin/env bash
# 8 agents (processes) race to claim every todo of a project; prints claims/s and checks no double claim.
# usage: benches/claim_race.sh [AGENTS] [TODOS]   (uses target/release/loopx)
set -euo pipefail
cd "$(dirname "$0")/.."
agents=${1:-8}
todos=${2:-400}
L=$PWD/target/release/loopx
dir=$(mktemp -d)
python3 benches/gen.py "$dir" --loopx "$L" --open "$todos" --gates 0 >/dev/null
start=$(date +%s.%N)
for a in $(seq 1 "$agents"); do
  (
    while "$L" --dir "$dir" --agent "agent-$a" todo claim --json >>"$dir/claims-$a.jsonl" 2>/dev/null; do :; done
  ) &
done
wait
end=$(date +%s.%N)
claims=$(cat "$dir"/claims-*.jsonl | grep -c '"ok":true' || true)
distinct=$(cat "$dir"/claims-*.jsonl | grep '"ok":true' | grep -o '"id":"t-[a-z2-7]*"' | sort -u | wc -l)
journal=$(grep -c '"action":"todo.claim"' "$dir/.loopx/journal.jsonl")
"$L" --dir "$dir" log --verify >/dev/null
echo "agents=$agents todos=$todos claims=$claims distinct=$distinct journal_claims=$journal"
awk -v c="$claims" -v s="$start" -v e="$end" 'BEGIN { printf "wall %.2f s, %.0f claims/s\n", e - s, c / (e - s) }'
[ "$claims" = "$todos" ] && [ "$distinct" = "$todos" ] && [ "$journal" = "$todos" ] || { echo "MISMATCH"; exit 1; }
rm -rf "$dir"
