#!/usr/bin/env bash
# What PostgreSQL itself does on this machine, for scale beside benches/pg.sh: pgbench's own
# write test (-N), and a bare claim (benches/pg_floor/bare_claim.sql: the lock, the lease and
# its chained journal line, with none of loopx's rules and no client work), planned once per
# connection (prepared) and planned each time (simple), CLIENTS clients for SECONDS each.
# usage: benches/pg_floor.sh [CLIENTS] [SECONDS]   (needs pgbench: Debian's postgresql-client)
set -euo pipefail
cd "$(dirname "$0")/.."
clients=${1:-8}
secs=${2:-5}
srv=$(mktemp -d)
trap 'scripts/pg-throwaway stop "$srv" >/dev/null 2>&1 || true' EXIT
url=$(scripts/pg-throwaway start "$srv")
tps() { grep -oE 'tps = [0-9.]+' | head -1 | cut -d' ' -f3; }
pgbench -q -i -s 8 "$url" >/dev/null 2>&1
printf 'pgbench -N (its simple-update test): %s tps\n' \
  "$(pgbench -n -N -c "$clients" -j 2 -T "$secs" -M prepared "$url" 2>/dev/null | tps)"
psql -X -q "$url" -f benches/pg_floor/setup.sql
for mode in prepared simple; do
  printf 'bare claim, %s: %s claims/s\n' "$mode" \
    "$(pgbench -n -c "$clients" -j 2 -T "$secs" -M "$mode" -f benches/pg_floor/bare_claim.sql "$url" 2>/dev/null | tps)"
done
