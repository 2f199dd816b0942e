#!/usr/bin/env bash
# Monitor: "check the queue depth every 3 seconds". A recurring todo (`--every`) carries a
# check an agent proposes and the owner approves; `monitor poll` (cron's job) runs it, and
# only a changed result wakes an agent. The owner's hooks turn a change and an overdue monitor
# into alerts; a monitor left unhandled is marked overdue until an agent deals with it.
source "$(dirname "$0")/../lib.sh"

EVERY=3 # seconds between checks: short, so the story takes seconds

# poll: what cron would run; the poller needs no owner key and spends no quota.
poll() { loopx --agent poller --json monitor poll; }

# seen: what the check saw the last time its result changed (the output in its evidence).
seen() {
	loopx --json evidence list --todo "$watch" --kind command --limit 1 | jget entries.0.output
}

# drain: the on-call agent's work (an LLM's, in real life): drain the queue if it was high.
drain() {
	if [ "$(seen)" = high ]; then echo 3 >queue_depth && echo "queue drained"; else echo "queue fine"; fi
}

# handle: one turn of the on-call agent: should-run, claim the monitor, run `drain`, done
# (which schedules the next check). `drain` runs in a bash that loopx starts: export it.
handle() {
	export -f drain seen jget loopx
	export LOOPX watch
	loopx --agent oncall turn --complete-on-success -- bash -c drain
}

# alerts EVENT: how many alerts of EVENT the hooks wrote; waits up to 10 s for at least $2
# (hooks run detached, after the change that fires them commits).
alerts() {
	local n i
	for i in $(seq 100); do
		n=$(grep -c "\"event\":\"$1\"" alerts.jsonl 2>/dev/null || true)
		[ "${n:-0}" -ge "$2" ] && break
		sleep 0.1
	done
	echo "${n:-0}"
}

# overdue: the ids status lists as overdue, one a line.
overdue() { loopx --json status | jlist overdue id; }

step "A project, the owner's key, and the metric: a file holding the queue's depth"
mkdir "$work/project" && cd "$work/project"
loopx start-goal --goal-text "Keep the job queue short" >/dev/null
loopx owner init >/dev/null
echo 12 >queue_depth

step "An agent adds the monitor and proposes its check"
watch=$(loopx --agent oncall todo add "Watch the queue depth" --every "${EVERY}s" --priority P1)
check="awk '{ print (\$1 > 100) ? \"high\" : \"ok\" }' queue_depth" # "high" above 100, else "ok"
loopx --agent oncall monitor propose "$watch" -- "$check"
expect "a poll before the owner approves runs" "$(poll | jget ran)" "[]"

step "The owner reads the check, approves its exact text, and sets the alert hooks"
loopx monitor list
sha=$(loopx --json monitor list | jget monitors.0.check.sha256)
loopx monitor approve "$watch" --sha "${sha:0:16}" >/dev/null
# The event's JSON comes on stdin as one line: appended, the alerts are a JSON Lines log.
loopx hook set monitor.changed -- 'cat >>alerts.jsonl' >/dev/null
loopx hook set monitor.overdue -- 'cat >>alerts.jsonl' >/dev/null
loopx hook list

step "The first poll: a first result is a change; the on-call agent looks, all is fine"
expect "the poll's result" "$(poll | jget ran.0.result)" changed
expect "alerts of a change" "$(alerts monitor.changed 1)" 1
handle
expect "a poll right after" "$(poll | jget ran)" "[]"

step "The queue grows; the next poll sees it; the agent is away"
echo 150 >queue_depth
sleep "$EVERY"
expect "the poll's result" "$(poll | jget ran.0.result)" changed
expect "alerts of a change" "$(alerts monitor.changed 2)" 2
expect "what the check saw" "$(seen)" high

step "Nobody handles it: a period later it is overdue, and the overdue hook alerts"
sleep "$EVERY"
expect "overdue noted by the poll" "$(poll | jget overdue_noted.0)" "$watch"
expect "alerts of an overdue monitor" "$(alerts monitor.overdue 1)" 1
expect "overdue in status" "$(overdue)" "$watch"
expect "overdue in should-run" \
	"$(loopx --agent oncall --json quota should-run | jget overdue.0)" "$watch"

step "The agent comes back: the overdue monitor is taken first, and the queue drained"
handle
expect "the queue's depth" "$(cat queue_depth)" 3
expect "overdue in status" "$(overdue)" ""
loopx status
cat alerts.jsonl
