# The plumbing every example shares; each run.sh sources it first. Not a story of its own.
#
# It gives a script:
#   - `loopx ...`       the binary in $LOOPX (default: `loopx` on PATH);
#   - $work             a fresh temp directory, removed when the script ends, however it ends;
#   - LOOPX_OWNER_KEY   the owner's key inside $work: the user's real key is never touched;
#   - `step TEXT`, `say TEXT`: a heading and a line in the output, so the run reads like the story;
#   - `jget PATH`       a field of the JSON object on stdin, like `jget todo.id` (`jlist`: a list's);
#   - `decision AGENT`  should-run's decision and reason for AGENT, like `run ready_todo`;
#   - `expect WHAT GOT WANT`, `refused WHAT CODE ARGS...`, `fail TEXT`: stop with a clear
#     message when the story did not happen.
set -euo pipefail

LOOPX=${LOOPX:-loopx}
example=$(basename "$(cd "$(dirname "${BASH_SOURCE[1]}")" && pwd)")

fail() {
	echo "example $example FAILED: $*" >&2
	exit 1
}

command -v "$LOOPX" >/dev/null || {
	echo "example $example: no loopx binary ($LOOPX); set LOOPX=/path/to/loopx" >&2
	exit 2
}
command -v python3 >/dev/null || {
	echo "example $example: python3 is needed to read loopx's JSON answers" >&2
	exit 2
}

# `loopx` runs the binary under test (`command` skips this function when LOOPX is `loopx`).
loopx() { command "$LOOPX" "$@"; }

work=$(mktemp -d "${TMPDIR:-/tmp}/loopx-example-$example.XXXXXX")
trap 'rm -rf "$work"' EXIT
# Nothing from the caller's environment may point loopx at a real project, agent or key.
unset LOOPX_DIR LOOPX_AGENT LOOPX_STORE
export LOOPX_OWNER_KEY="$work/owner.key"
export XDG_CONFIG_HOME="$work/config"

step() { printf '\n== %s\n' "$*"; }

# say TEXT: a line of the story, also from a function whose output a $(...) captures.
exec 3>&1
say() { echo "   $*" >&3; }

# jget PATH: prints the field at PATH (dot-separated keys and list indexes, like `entries.0.value`)
# of the JSON object read from stdin; objects and lists as JSON, null as `null`.
jget() {
	python3 -c '
import json, sys
v = json.load(sys.stdin)
for k in sys.argv[1].split("."):
    v = v[int(k)] if isinstance(v, list) else v[k]
print(v if isinstance(v, str) else json.dumps(v))' "$1"
}

# expect WHAT GOT WANT: the story goes on only if GOT is WANT.
expect() {
	[ "$2" = "$3" ] || fail "$1: got '$2', expected '$3'"
	echo "   ok: $1 = $3"
}

# jlist PATH FIELD: FIELD of each object in the list at PATH (as jget's) that has it, one a line.
jlist() {
	python3 -c '
import json, sys
v = json.load(sys.stdin)
for k in sys.argv[1].split("."):
    v = v[int(k)] if isinstance(v, list) else v[k]
for item in v:
    if sys.argv[2] in item:
        print(item[sys.argv[2]])' "$1" "$2"
}

# decision AGENT: what `quota should-run` tells AGENT, its decision and reason: `run ready_todo`,
# `ask pending_gates`, `idle no_work_for_you`... (its exit 3, "not now", is an answer too).
decision() {
	local answer
	answer=$(loopx --agent "$1" --json quota should-run || true)
	echo "$(jget decision <<<"$answer") $(jget reason <<<"$answer")"
}

# refused WHAT CODE ARGS...: `loopx --json ARGS...` must be refused with the error code CODE.
refused() {
	local what=$1 code=$2 out
	shift 2
	out=$(loopx --json "$@" 2>/dev/null) && fail "$what: it was not refused"
	expect "$what" "$(jget error.code <<<"$out")" "$code"
	echo "      loopx: $(jget error.message <<<"$out")"
}
