#!/usr/bin/env bash
# What PostgreSQL itself does on this machine, for scale beside benches/pg.sh: pgbench's own
# write test (-N), and a bare claim (benches/pg_floor/bare_claim.sql: the lock, the lease and
# its chained journal line, with none of loopx's rules and no client work, durable before it is
# answered as loopx's claim is), planned once per connection (prepared) and planned each time
# (simple), and with a plain synchronous COMMIT (sync_claim.sql); CLIENTS clients for SECONDS
# each, on a throwaway server with fsync on.
# With PAIRS > 0, then PAIRS times: loopx's own claims (benches/pg_claims.rs, claims only over
# 4,000 todos, CLIENTS clients, each with its own connection and agent login) and right after
# the prepared bare claim on the same server, with loopx's share of it.
# usage: benches/pg_floor.sh [CLIENTS] [SECONDS] [PAIRS]   (needs pgbench: Debian's postgresql-client;
#        PAIRS builds the bench profile of benches/pg_claims.rs)
set -euo pipefail
cd "$(dirname "$0")/.."
clients=${1:-8}
secs=${2:-5}
pairs=${3:-0}
srv=$(mktemp -d)
trap 'scripts/pg-throwaway stop "$srv" >/dev/null 2>&1 || true' EXIT
url=$(scripts/pg-throwaway start "$srv")
tps() { grep -oE 'tps = [0-9.]+' | head -1 | cut -d' ' -f3; }
bare() { pgbench -n -c "$clients" -j 2 -T "$secs" -M "$1" -f "benches/pg_floor/$2" "$url" 2>/dev/null | tps; }
pgbench -q -i -s 8 "$url" >/dev/null 2>&1
printf 'pgbench -N (its simple-update test): %s tps\n' \
  "$(pgbench -n -N -c "$clients" -j 2 -T "$secs" -M prepared "$url" 2>/dev/null | tps)"
psql -X -q "$url" -f benches/pg_floor/setup.sql
for mode in prepared simple; do
  printf 'bare claim, %s: %s claims/s\n' "$mode" "$(bare "$mode" bare_claim.sql)"
done
printf 'bare claim, prepared, synchronous COMMIT under the lock: %s claims/s\n' \
  "$(bare prepared sync_claim.sql)"
[ "$pairs" -gt 0 ] || exit 0
cargo bench -q --bench pg_claims --no-run 2>/dev/null
for i in $(seq 1 "$pairs"); do
  lx=$(LOOPX_BENCH_PG=$url cargo bench -q --bench pg_claims -- "$clients" "$secs" 4000 claims 2>/dev/null |
    grep -oE '[0-9]+ claims/s' | head -1 | cut -d' ' -f1)
  b=$(bare prepared bare_claim.sql)
  awk -v l="$lx" -v b="$b" -v i="$i" \
    'BEGIN { printf "pair %d: loopx %d claims/s, bare claim %.0f claims/s: %.0f%%\n", i, l, b, 100 * l / b }'
done
