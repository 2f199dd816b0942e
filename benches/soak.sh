#!/usr/bin/env bash
# The soak (issue 13): 8 agents in `loopx heartbeat` loops on one project doing real turns (that
# succeed, fail, time out and hang), while a chaos loop SIGKILLs and restarts agents, reassigns
# leases as the owner, opens and decides gates and pauses the goal; one agent runs with its clock
# shifted by faketime. Every minute and at the end it checks the invariants (benches/soak.py),
# then prints the figures; it exits 1 on any violation.
#
# usage: cargo build --release && benches/soak.sh DURATION      (like 60, 90s, 30m, 1h)
# env:   LOOPX      the binary (default target/release/loopx, else target/debug/loopx)
#        SOAK_DIR   where the run goes (default a fresh mktemp -d; kept: out/report.json, logs)
#        SOAK_FAKETIME  install (default: apt-get it if absent), auto (use it if installed), off
#        SOAK_CHECK_EVERY  seconds between checks during the run (default 60)
# Needs bash and python3; no network unless it installs faketime. Not run by CI: tests/soak.rs
# runs the 60-second form.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
dur=${1:?usage: benches/soak.sh DURATION (like 60, 90s, 30m, 1h)}
case "$dur" in
  *h) secs=$((${dur%h} * 3600)) ;;
  *m) secs=$((${dur%m} * 60)) ;;
  *s) secs=${dur%s} ;;
  *) secs=$dur ;;
esac
[[ "$secs" =~ ^[0-9]+$ && "$secs" -gt 0 ]] || { echo "soak: DURATION must be like 60, 90s, 30m or 1h" >&2; exit 2; }

L=${LOOPX:-}
if [ -z "$L" ]; then
  for c in "$here/../target/release/loopx" "$here/../target/debug/loopx"; do
    [ -x "$c" ] && { L=$c; break; }
  done
fi
[ -n "$L" ] && [ -x "$L" ] || { echo "soak: no loopx binary; run cargo build --release or set LOOPX" >&2; exit 2; }
L=$(cd "$(dirname "$L")" && pwd)/$(basename "$L")

ft=""
mode=${SOAK_FAKETIME:-install}
if [ "$mode" != off ]; then
  if ! command -v faketime >/dev/null && [ "$mode" = install ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "soak: installing faketime (Debian package)"
    apt-get install -y -qq faketime >/dev/null 2>&1 || { apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq faketime >/dev/null 2>&1; } || true
  fi
  ft=$(command -v faketime || true)
  [ -n "$ft" ] || echo "soak: faketime is not installed: no agent runs with a shifted clock"
fi

dir=${SOAK_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/loopx-soak.XXXXXX")}
mkdir -p "$dir"
# Every process of the run carries the tag, so that whatever is left behind can be found and killed.
export SOAK_TAG=${SOAK_TAG:-soak-$$-$RANDOM}
cleanup() { python3 "$here/soak.py" reap "$SOAK_TAG" >/dev/null 2>&1 || true; }
trap cleanup EXIT
trap 'exit 130' INT TERM
echo "soak: ${secs}s, loopx $L, run in $dir (report: $dir/out/report.json)"
rc=0
python3 "$here/soak.py" run "$secs" --dir "$dir" --loopx "$L" --faketime "$ft" \
  --check-every "${SOAK_CHECK_EVERY:-60}" || rc=$?
echo "soak: exit $rc; logs in $dir/out"
exit "$rc"
