#!/usr/bin/env bash
# Issue fix: an issue becomes a todo with a link; a fixer fixes it on a branch (its own git
# worktree); a reviewer tests the exact commit the fixer's evidence names; the merge and the
# push wait on a gate that holds that exact command; the owner approves its digest, and
# `run-approved` runs it once. A local bare repository stands in for the forge.
source "$(dirname "$0")/../lib.sh"
command -v git >/dev/null || {
	echo "example $example: needs git" >&2
	exit 2
}

# git, the same on every machine: no user or system config, a fixed identity.
export GIT_CONFIG_GLOBAL=/dev/null GIT_CONFIG_NOSYSTEM=1
export GIT_AUTHOR_NAME=example GIT_AUTHOR_EMAIL=example@localhost
export GIT_COMMITTER_NAME=example GIT_COMMITTER_EMAIL=example@localhost

# The project: stats.py with a bug, a test that shows it, pushed to a bare "origin".
make_repository() {
	git init -q --bare -b main "$work/origin.git"
	git init -q -b main "$work/app"
	cd "$work/app"
	printf 'def mean(xs):\n    return sum(xs) / (len(xs) + 1)\n' >stats.py
	printf 'python3 -c "from stats import mean; assert mean([1, 2, 3]) == 2, mean([1, 2, 3])"\n' >test.sh
	git add stats.py test.sh
	git commit -q -m "stats: mean"
	git remote add origin "$work/origin.git"
	git push -q origin main
}

# The issue tracker: a file per issue.
file_issue() {
	mkdir "$work/issues"
	printf '# mean([1, 2, 3]) is 1.5, not 2\n\nstats.mean divides by one too many.\n' >"$work/issues/7.md"
}

# The fixer: claims the fix with a worktree of its own (branch loopx/ID), fixes the bug,
# records what git says before and after its commit, and finishes the todo.
fix() {
	local tree
	tree=$(loopx --agent fixer --json todo claim "$fix" --worktree | jget worktree)
	sed -i 's/(len(xs) + 1)/len(xs)/' "$tree/stats.py"
	loopx --agent fixer todo update "$fix" >/dev/null # git's facts: HEAD and the changed file
	git -C "$tree" commit -q -am "stats: mean divides by len(xs) (fixes #7)"
	loopx --agent fixer todo update "$fix" --status done >/dev/null # the new HEAD; done
	say "fixer: committed on loopx/$fix"
}

# The reviewer: the claim of its review carries the fix's evidence; it checks out the commit
# that evidence names, runs the test there, and passes the review.
review() {
	local claim commit
	claim=$(loopx --agent reviewer --json todo claim "$review")
	commit=$(jlist reviews_evidence commit <<<"$claim" | tail -1) # git's HEAD at the fix's done
	git worktree add -q --detach "$work/review" "$commit"
	(cd "$work/review" && sh test.sh) || fail "the test fails at the fix's commit $commit"
	git worktree remove "$work/review"
	loopx --agent reviewer todo update "$review" --evidence "test.sh passes at $commit" \
		--status done >/dev/null
	say "reviewer: test.sh passes at ${commit:0:12}"
}

step "A repository with a bug, its bare remote, and an issue"
make_repository
file_issue
loopx start-goal --goal-text "Fix the reported bugs in stats" >/dev/null
loopx owner init >/dev/null
expect "the test before the fix" "$(sh test.sh 2>/dev/null && echo passes || echo fails)" fails

step "Triage turns the issue into a todo with a link, and asks for a review of it"
fix=$(loopx --agent triage todo add "Fix #7: mean([1, 2, 3]) is 1.5" \
	--body-file "$work/issues/7.md" --link "file://$work/issues/7.md")
review=$(loopx --agent triage todo add "Review the fix of #7" --reviews "$fix")
expect "the todo's link" "$(loopx --json todo show "$fix" | jget todo.links.0)" \
	"file://$work/issues/7.md"

step "The fixer fixes it on a branch; git's facts become evidence"
fix
expect "the evidence's commit" \
	"$(loopx --json evidence list --todo "$fix" --kind auto | jget entries.0.commit)" \
	"$(git rev-parse "loopx/$fix")"
loopx evidence list --todo "$fix"
refused "the fixer claims the review of its own fix" not_ready --agent fixer todo claim "$review"

step "The reviewer tests the exact commit"
review

step "The merge waits on a gate that holds the exact command"
merge=(sh -c "git merge -q --no-ff -m 'Merge the fix of #7' loopx/$fix && git push -q origin main")
gate=$(loopx --agent reviewer gate open "Merge loopx/$fix (reviewed) into main and push it?" \
	--action-cmd -- "${merge[@]}")
refused "run-approved before the owner decides" not_ready --agent reviewer run-approved "$gate"

step "The owner reads the command, computes its digest, and approves that digest"
loopx gate show "$gate"
sha=$(printf '%s\0' "${merge[@]}" | sha256sum | cut -d' ' -f1)
loopx gate approve "$gate" --sha "$sha" --reason "reviewed, test passes" >/dev/null

step "The approved merge runs once"
loopx --agent reviewer run-approved "$gate"
refused "a second run" already_used --agent reviewer run-approved "$gate"

step "The bare remote's main has the fix"
git clone -q "$work/origin.git" "$work/check"
(cd "$work/check" && sh test.sh) || fail "the test fails on origin's main"
fixed=$(git rev-parse "loopx/$fix")
expect "origin's main holds the fix's commit" \
	"$(git -C "$work/check" merge-base --is-ancestor "$fixed" HEAD && echo yes)" yes
expect "todos left open" "$(loopx --json todo list | jget todos)" "[]"
git -C "$work/check" log --oneline --graph
