#!/usr/bin/env bash
# The PostgreSQL store's figures on a throwaway server of its own:
#  1. the library (benches/pg_claims.rs): a single claim's round trip, then CLIENTS clients, each
#     with its own connection and agent login, claiming and releasing for SECONDS; then claims
#     only (no release) over 4,000 todos, with the CPU each claim cost the clients and the server;
#     for scale, the same with the database's rules off, then with the server held to one core;
#  2. the CLI, one process per claim: 8 agent processes race `loopx --store URL todo claim` over
#     TODOS todos (each process connects, reads, claims and exits), beside the same race on files.
# usage: benches/pg.sh [CLIENTS] [SECONDS] [TODOS]   (builds target/release/loopx)
set -euo pipefail
cd "$(dirname "$0")/.."
clients=${1:-8}
secs=${2:-5}
todos=${3:-400}
cargo build --release -q
L=$PWD/target/release/loopx
srv=$(mktemp -d)
trap 'scripts/pg-throwaway stop "$srv" >/dev/null 2>&1 || true' EXIT
url=$(scripts/pg-throwaway start "$srv")
base=${url%/*}

echo "== library: benches/pg_claims.rs, claim then release over 32 todos"
LOOPX_BENCH_PG=$url cargo bench -q --bench pg_claims -- "$clients" "$secs" 32 2>/dev/null |
  grep -E "single|claims|journal|CPU"
echo "== library: claims only (one commit each) over 4,000 todos"
LOOPX_BENCH_PG=$url cargo bench -q --bench pg_claims -- "$clients" "$secs" 4000 claims 2>/dev/null |
  grep -E "clients|journal|CPU"

echo "== for scale: the same, with the database's rules off (benches/pg_experiments/no_rules.sql)"
LOOPX_BENCH_SQL=benches/pg_experiments/no_rules.sql LOOPX_BENCH_PG=$url \
  cargo bench -q --bench pg_claims -- "$clients" "$secs" 4000 claims 2>/dev/null | grep -E "clients|CPU"
if [ "$(nproc)" -ge 2 ] && command -v taskset >/dev/null; then
  echo "== for scale: the server on core 0 only, the clients on core 1 (what one core of the server serves)"
  pm=$(head -1 "$srv/data/postmaster.pid")
  for p in "$pm" $(pgrep -P "$pm" || true); do taskset -a -p 0x1 "$p" >/dev/null; done
  LOOPX_BENCH_PG=$url taskset -c 1 cargo bench -q --bench pg_claims -- "$clients" "$secs" 4000 claims 2>/dev/null |
    grep -E "clients|CPU"
  for p in "$pm" $(pgrep -P "$pm" || true); do taskset -a -p -c "0-$(($(nproc) - 1))" "$p" >/dev/null; done
fi

echo "== CLI: 8 processes race over $todos todos, one process per claim"
db=lx_cli_$$
psql -X -q "$url" -c "CREATE DATABASE $db"
dir=$(mktemp -d)
python3 benches/gen.py "$dir" --loopx "$L" --open "$todos" --gates 0 >/dev/null
"$L" --store "$base/$db" store migrate --roles lxcli >/dev/null
"$L" --store "$base/$db" store import --from "$dir" >/dev/null
for a in $(seq 1 8); do
  psql -X -q "$base/$db" -c "DO \$\$ BEGIN CREATE ROLE cli_a$a LOGIN IN ROLE lxcli_agent;
    EXCEPTION WHEN duplicate_object THEN NULL; END \$\$"
done
start=$(date +%s.%N)
for a in $(seq 1 8); do
  (
    u="postgres://cli_a$a@${base#postgres://*@}/$db"
    while "$L" --store "$u" --agent "cli_a$a" todo claim --json >>"$dir/claims-$a.jsonl" 2>/dev/null; do :; done
  ) &
done
wait
end=$(date +%s.%N)
claims=$(cat "$dir"/claims-*.jsonl | grep -c '"ok":true' || true)
distinct=$(cat "$dir"/claims-*.jsonl | grep '"ok":true' | grep -o '"id":"t-[a-z2-7]*"' | sort -u | wc -l)
"$L" --store "$base/$db" log --verify >/dev/null
awk -v c="$claims" -v d="$distinct" -v t="$todos" -v s="$start" -v e="$end" \
  'BEGIN { printf "database: %d claims of %d todos (%d distinct) in %.2f s: %.0f claims/s\n", c, t, d, e - s, c / (e - s) }'
[ "$claims" = "$todos" ] && [ "$distinct" = "$todos" ] || { echo "MISMATCH"; exit 1; }
echo "== the same race on files"
bash benches/claim_race.sh 8 "$todos" | tail -2
if command -v hyperfine >/dev/null; then
  echo "== one process: status on the database, then on files"
  hyperfine -N --warmup 5 --runs 100 "$L --store $base/$db status --json" "$L --dir $dir status --json" 2>/dev/null |
    grep -E "Time|±" | head -4
fi
rm -rf "$dir"
