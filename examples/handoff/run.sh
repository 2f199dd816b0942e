#!/usr/bin/env bash
# Hand-off: two agents with different capabilities. The coder (`code`) and the writer (`docs`)
# are each offered only their own kind of work. The coder starts the release note, then hands
# its lease to the writer with a note; the writer picks it up from the note and finishes it,
# and the coder's late write is refused. A hand-off to an agent that may not do the work (the
# docs todo to the coder) is refused, and nothing moves.
source "$(dirname "$0")/../lib.sh"

# claim AGENT: AGENT claims the best ready todo for it; prints its id.
claim() { loopx --agent "$1" --json todo claim | jget todo.id; }

step "A project and two agents that declare what they can do"
mkdir "$work/project" && cd "$work/project"
loopx start-goal --goal-text "Add a --units flag to wx" >/dev/null
loopx owner init >/dev/null
loopx --agent coder agent set --capability code >/dev/null
loopx --agent writer agent set --capability docs >/dev/null

step "The lead adds the work: code, its docs (after the code), a release note anyone may write"
code=$(loopx --agent lead todo add "Implement --units" --requires code --priority P1)
docs=$(loopx --agent lead todo add "Document --units" --requires docs --depends-on "$code")
note=$(loopx --agent lead todo add "Write the release note for --units" --depends-on "$code" \
	--priority P3)
expect "the writer, before the code is done" "$(decision writer)" "wait waiting"

step "The coder implements the flag"
expect "the coder's claim" "$(claim coder)" "$code"
echo 'units = "metric"  # or "imperial"' >units.py
loopx --agent coder todo update "$code" --artifact units.py --status done >/dev/null
say "coder: units.py"

step "The coder starts the release note, and hands it to the writer"
expect "the coder's claim" "$(claim coder)" "$note"
echo "wx now takes --units." >NOTES.md
loopx --agent coder todo handoff "$note" --to writer \
	--note "draft in NOTES.md; it needs the flag's two values" >/dev/null
expect "the note's holder" "$(loopx --json todo show "$note" | jget todo.lease.holder)" writer
refused "the coder's late write" lease_conflict \
	--agent coder todo update "$note" --evidence "one more line"
expect "the coder, while the writer holds the note" "$(decision coder)" "wait waiting"

step "The writer holds the note first, reads the hand-off, and finishes it"
expect "the writer's should-run" "$(decision writer)" "run held_lease"
handed=$(loopx --json evidence list --todo "$note" --by coder --limit 1 | jget entries.0.summary)
say "writer reads: $handed"
[[ $handed == *"draft in NOTES.md"* ]] || fail "the hand-off note did not reach the writer"
echo "Values: metric (the default) and imperial." >>NOTES.md
loopx --agent writer todo update "$note" --artifact NOTES.md --status done >/dev/null
expect "the coder, with only docs work left" "$(decision coder)" "idle no_work_for_you"

step "The writer takes the docs; a hand-off to the coder, who lacks docs, is refused"
expect "the writer's claim" "$(claim writer)" "$docs"
refused "handing the docs to the coder" not_ready --agent writer todo handoff "$docs" --to coder
expect "the docs' holder" "$(loopx --json todo show "$docs" | jget todo.lease.holder)" writer
echo "--units metric|imperial: the units of every number wx prints" >UNITS.md
loopx --agent writer todo update "$docs" --artifact UNITS.md --status done >/dev/null

step "Everything is done, each todo by an agent that could do it"
expect "todos left open" "$(loopx --json todo list | jget todos)" "[]"
for id in "$code" "$note" "$docs"; do
	say "$id done by $(loopx --json todo show "$id" | jget todo.status_by)"
done
loopx agents
