#!/usr/bin/env bash
# Gated release: the release todo waits on the owner's gate. While it waits, should-run and
# claim give the agent the safe work around it (changelog, docs) instead of an idle loop or a
# release nobody approved; when the safe work is done, should-run says the rest waits on the
# owner. Once the owner approves, the release is ready, and the agent ships it.
source "$(dirname "$0")/../lib.sh"

# turn: what the agent's loop does each time it wakes: ask should-run, and when it says run,
# claim the best ready todo and do it. Prints the todo it did, or should-run's decision.
turn() {
	local now id title
	now=$(decision releaser)
	if [ "$now" != "run ready_todo" ]; then
		echo "$now"
		return
	fi
	id=$(loopx --agent releaser --json todo claim | jget todo.id)
	title=$(loopx --json todo show "$id" | jget todo.title)
	work_on "$id" "$title"
	loopx --agent releaser quota spend-slot >/dev/null
	echo "$id"
}

# work_on ID TITLE: the agent's work (an LLM's, in real life), recorded as evidence.
work_on() {
	case "$2" in
	"Write the changelog"*) echo "## 1.0.0: first release" >CHANGELOG.md && set -- "$1" CHANGELOG.md ;;
	"Proofread the README"*) echo "wx: the weather, fast" >README.md && set -- "$1" README.md ;;
	"Release 1.0.0"*) tar -czf wx-1.0.0.tar.gz CHANGELOG.md README.md && set -- "$1" wx-1.0.0.tar.gz ;;
	*) fail "no work for '$2'" ;;
	esac
	loopx --agent releaser todo update "$1" --artifact "$2" --status done >/dev/null
	say "releaser: $2"
}

step "A project, the owner's key, the release and the work around it"
mkdir "$work/project" && cd "$work/project"
loopx start-goal --goal-text "Ship wx 1.0.0" --success "wx-1.0.0.tar.gz is released" >/dev/null
loopx owner init >/dev/null
release=$(loopx --agent releaser todo add "Release 1.0.0" --priority P0)
changelog=$(loopx --agent releaser todo add "Write the changelog" --priority P2)
readme=$(loopx --agent releaser todo add "Proofread the README" --priority P3)

step "The agent asks the owner; the gate blocks the release"
# No options: approving is "ship", rejecting is "hold" (an approval with any option unblocks).
gate=$(loopx --agent releaser gate open "Ship 1.0.0 to users now?" --blocks "$release")
refused "claiming the release" not_ready --agent releaser todo claim "$release"

step "While the gate waits, the agent gets the safe work, best first"
expect "the first turn did" "$(turn)" "$changelog"
expect "the second turn did" "$(turn)" "$readme"
expect "the third turn" "$(turn)" "ask pending_gates"
expect "the question should-run puts to the owner" \
	"$(loopx --agent releaser --json quota should-run | jget questions.0.gate)" "$gate"

step "The owner approves: ship"
loopx gate list --pending
loopx gate approve "$gate" --reason "changelog and README are done" >/dev/null

step "The release is ready, and the agent ships it"
expect "the next turn did" "$(turn)" "$release"
expect "the release todo" "$(loopx --json todo show "$release" | jget todo.status)" done
expect "the release's artifact" \
	"$(loopx --json evidence list --todo "$release" --kind artifact | jget entries.0.sha256)" \
	"$(sha256sum wx-1.0.0.tar.gz | cut -d' ' -f1)"
expect "the turn after" "$(turn)" "idle no_open_todos"
loopx status
