#!/usr/bin/env bash
# The web face (issue 40) with a real browser: page weight, a gate on a 390x844 Chromium page
# after an agent's `gate open` exits (median of RUNS), a decision's round trip from the click to
# the server's answer (median of RUNS), and VmRSS/VmHWM of `loopx web` with PHONES phones signed in,
# each holding /api/events open (benches/web.mjs does the measuring).
# usage: benches/web.sh     (builds --release; needs node, LOOPX_CHROMIUM and LOOPX_PLAYWRIGHT
#                            as .ci/run sets them; RUNS=20 PHONES=50 by default)
set -euo pipefail
cd "$(dirname "$0")/.."
: "${LOOPX_CHROMIUM:?set LOOPX_CHROMIUM (see .ci/run)}" "${LOOPX_PLAYWRIGHT:?set LOOPX_PLAYWRIGHT (see .ci/run)}"
cargo build --release --quiet
LOOPX_BIN=${LOOPX:-${CARGO_TARGET_DIR:-$PWD/target}/release/loopx}
bench=$PWD/benches/web.mjs
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# A home of its own: the owner key and the pairing channel are the run's.
export HOME="$work/home" LOOPX_OWNER_KEY="$work/home/owner.key" LOOPX_BIN
unset XDG_STATE_HOME XDG_CONFIG_HOME LOOPX_DIR LOOPX_AGENT LOOPX_STORE
mkdir -p "$HOME" "$work/shop"
cd "$work/shop"
"$LOOPX_BIN" start-goal --goal-text "bench the web face" >/dev/null
"$LOOPX_BIN" owner init >/dev/null
"$LOOPX_BIN" --version
node "$bench"
