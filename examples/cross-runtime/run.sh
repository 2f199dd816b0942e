#!/usr/bin/env bash
# Cross-runtime review: Claude Code implements a todo, Codex CLI reviews it. Both are the real
# CLIs, run headless (`claude -p`, `codex exec`) in a project wired by `loopx setup claude` and
# `loopx setup codex`, and both work through `loopx mcp`. In place of a model each talks to the
# tests' scripted model on 127.0.0.1 (tests/hosts/model.py), which makes the tool calls a model
# would. loopx records who held what and the evidence of both; Claude, having finished the
# work, is refused its own review.
source "$(dirname "$0")/../lib.sh"

hosts=${LOOPX_HOSTS_BIN:-}
[ -n "$hosts" ] && [ -x "$hosts/claude" ] && [ -x "$hosts/codex" ] || {
	echo "example $example: set LOOPX_HOSTS_BIN to a directory with claude and codex" \
		"(.ci/run installs them from npm)" >&2
	exit 2
}
model_py="$(cd "$(dirname "$0")/../../tests/hosts" && pwd)/model.py"
bin=$(command -v "$LOOPX")
models=()
trap 'kill "${models[@]}" 2>/dev/null; rm -rf "$work"' EXIT

# model NAME STEPS: starts the scripted model on STEPS (its JSON list of tool calls and a final
# text), logging into $work/NAME; sets $port.
model() {
	local dir="$work/$1"
	mkdir -p "$dir" && printf '%s' "$2" >"$dir/script.json"
	python3 "$model_py" "$dir/script.json" "$dir" >"$dir/port" &
	models+=($!)
	for _ in $(seq 100); do [ -s "$dir/port" ] && break; sleep 0.1; done
	port=$(cat "$dir/port")
	[ -n "$port" ] || fail "the scripted model did not start"
}

# offline VAR=VALUE... CMD...: CMD, stopped after 90 s, with only PATH and HOME from here and
# the VARs; whatever it would send beyond 127.0.0.1 goes to a port nobody listens on.
offline() {
	local vars=()
	while [[ $1 == *=* ]]; do vars+=("$1") && shift; done
	env -i PATH="$PATH" HOME="$work/home" HTTPS_PROXY=http://127.0.0.1:9 \
		HTTP_PROXY=http://127.0.0.1:9 NO_PROXY=127.0.0.1,localhost "${vars[@]}" \
		timeout 90 "$@" </dev/null
}

# claude PROMPT: one headless Claude Code session in the project, on the model at $port.
claude() {
	offline ANTHROPIC_BASE_URL="http://127.0.0.1:$port" ANTHROPIC_API_KEY=scripted \
		DISABLE_TELEMETRY=1 DISABLE_AUTOUPDATER=1 CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 \
		"$hosts/claude" -p "$1" --output-format stream-json --verbose >>"$work/claude.log" 2>&1 ||
		fail "claude -p failed: $(tail -5 "$work/claude.log")"
}

# codex PROMPT: one `codex exec` in the project, the model at $port its provider.
codex() {
	cat >"$work/home/codex/config.toml" <<-EOF
		model = "scripted"
		model_provider = "scripted"
		[model_providers.scripted]
		name = "scripted"
		base_url = "http://127.0.0.1:$port/v1"
		wire_api = "responses"
		env_key = "SCRIPTED_API_KEY"
		[projects."$project"]
		trust_level = "trusted"
	EOF
	offline CODEX_HOME="$work/home/codex" SCRIPTED_API_KEY=scripted \
		"$hosts/codex" exec "$1" >>"$work/codex.log" 2>&1 ||
		fail "codex exec failed: $(tail -5 "$work/codex.log")"
}

step "A project in git, wired for both hosts"
mkdir -p "$work/project" "$work/home/codex" && cd "$work/project"
project=$(pwd -P)
git init -q
loopx start-goal --goal-text "Add a --units flag to wx" >/dev/null
loopx --agent claude setup claude --bin "$bin" >/dev/null
loopx --agent codex setup codex --bin "$bin" >/dev/null
# The first interactive `claude` here would ask to trust the folder; this home says yes.
printf '{"projects":{"%s":{"hasTrustDialogAccepted":true}}}' "$project" >"$work/home/.claude.json"
say "claude: .mcp.json and .claude/settings.json; codex: AGENTS.md and .codex/config.toml"

step "The lead adds the work, and its review by someone else"
impl=$(loopx --agent lead todo add "Implement --units" --priority P1)
review=$(loopx --agent lead todo add "Review --units" --reviews "$impl")

step "Claude Code implements it: turn_start, evidence, turn_end"
model claude-impl '[
 {"tool": "turn_start", "args": {}},
 {"tool": "todo_update", "args": {"id": "$todo", "fence": "$fence",
  "evidence": ["units.py: --units metric|imperial, metric by default; 4 tests pass"]}},
 {"tool": "turn_end", "args": {"turn": "$turn", "todo": "$todo", "fence": "$fence",
  "done": true, "summary": "--units implemented"}},
 {"text": "Implemented --units."}]'
claude "Run one loopx turn."
expect "the implementation's status" "$(loopx --json todo show "$impl" | jget todo.status)" done
expect "finished by" "$(loopx --json todo show "$impl" | jget todo.status_by)" claude

step "Claude Code asks for its own review, and is refused"
model claude-review "[{\"tool\": \"todo_claim\", \"args\": {\"id\": \"$review\"}},
 {\"text\": \"I may not review my own work.\"}]"
claude "Claim $review."
# What the tool answered Claude, as Claude sent it on to the model.
refusal=$(grep -o "$review is not ready: [^\\\"]*" "$work/claude-review/requests.jsonl" | head -1)
[[ $refusal == *"separation of duties"* ]] || fail "claude's claim of its own review was not refused"
say "loopx to claude: $refusal"
expect "the review's status" "$(loopx --json todo show "$review" | jget todo.status)" open
expect "claude, with only its own review left" "$(decision claude)" "idle no_work_for_you"

step "Codex CLI reviews it: it claims the review and reads Claude's evidence"
model codex-review '[
 {"tool": "turn_start", "args": {}},
 {"tool": "todo_show", "args": {"id": "$todo"}},
 {"tool": "turn_end", "args": {"turn": "$turn", "todo": "$todo", "fence": "$fence",
  "done": true, "summary": "reviewed --units: both values tested, the default is metric"}},
 {"text": "Reviewed."}]'
codex "Run one loopx turn."
grep -q '4 tests pass' "$work/codex-review/requests.jsonl" ||
	fail "the review did not show codex the implementation's evidence"
expect "the review's status" "$(loopx --json todo show "$review" | jget todo.status)" done
expect "reviewed by" "$(loopx --json todo show "$review" | jget todo.status_by)" codex

step "Who held what, and the evidence of both"
loopx --json log | python3 -c '
import json, sys
for e in json.load(sys.stdin)["events"]:
    if e["action"] in ("todo.claim", "todo.done"):
        print("  ", e["actor"], e["action"], e["target"])'
for id in "$impl" "$review"; do
	loopx --json evidence list --todo "$id" | jlist entries summary | sed "s/^/   $id: /"
done
expect "claude's evidence" "$(loopx --json evidence list --todo "$impl" --by claude |
	jget total)" 2
expect "codex's evidence" "$(loopx --json evidence list --todo "$review" --by codex |
	jget total)" 1
