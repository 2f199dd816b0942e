#!/usr/bin/env bash
# Auto-research: a proposer, an executor and an evaluator tune a k-NN classifier on iris.
#
# The proposer adds one todo per k; the executor runs each (5-fold cross-validation) and records
# its accuracy as metric evidence, with the run's result file as an artifact; the evaluator
# audits every run's record. `evidence list --best max` names the winner, the evaluator
# reproduces it, and promoting it waits on the owner's gate. Shell functions stand in for the
# three LLM agents.
source "$(dirname "$0")/../lib.sh"

PY=${LOOPX_EXAMPLES_PYTHON:-python3}
"$PY" -c 'import sklearn' 2>/dev/null || {
	echo "example $example: needs scikit-learn in $PY" \
		"(pip install scikit-learn, or set LOOPX_EXAMPLES_PYTHON)" >&2
	exit 2
}

KS=(1 5 7 11 25 51) # the values of k the proposer tries

# cv_accuracy K FILE: the mean 5-fold cross-validated accuracy of k-NN with K neighbours on
# scikit-learn's bundled iris data (no download), rounded to 4 places; also written to FILE.
cv_accuracy() {
	"$PY" - "$1" "$2" <<'EOF'
import json, sys
from sklearn.datasets import load_iris
from sklearn.model_selection import cross_val_score
from sklearn.neighbors import KNeighborsClassifier
k, out = int(sys.argv[1]), sys.argv[2]
X, y = load_iris(return_X_y=True)
folds = cross_val_score(KNeighborsClassifier(n_neighbors=k), X, y, cv=5)
accuracy = round(float(folds.mean()), 4)
with open(out, "w") as f:
    json.dump({"k": k, "accuracy": accuracy, "folds": [float(a) for a in folds]}, f)
print(accuracy)
EOF
}

# The proposer: one todo per k. The evaluator adds the review of each at once; a review is
# ready when its run is done, and never offered to the agent that finished the run.
propose() {
	local k run
	for k in "${KS[@]}"; do
		run=$(loopx --agent proposer todo add "Evaluate k-NN with k=$k" \
			--body "5-fold cross-validated accuracy on iris with n_neighbors=$k")
		loopx --agent evaluator todo add "Review the run of k=$k" --reviews "$run" >/dev/null
		say "proposer: $run k=$k"
	done
}

# The executor: while should-run says run, claim the best ready todo, run it, record the
# accuracy and the result file, and spend a slot. Its own results go to $work/results too.
execute() {
	local todo id k acc
	while [ "$(decision executor)" = "run ready_todo" ]; do
		todo=$(loopx --agent executor --json todo claim)
		id=$(jget todo.id <<<"$todo")
		k=$(jget todo.title <<<"$todo")
		k=${k##*k=}
		acc=$(cv_accuracy "$k" "runs/k$k.json")
		loopx --agent executor todo update "$id" --evidence "5-fold CV accuracy $acc with k=$k" \
			--metric "accuracy=$acc" --artifact "runs/k$k.json" --status done >/dev/null
		loopx --agent executor quota spend-slot >/dev/null
		echo "$k $acc $id" >>"$work/results"
		say "executor: $id k=$k accuracy=$acc"
	done
}

# audit CLAIM: the evaluator's check of one run's record, from the run's evidence that the
# claim of its review carries: the result file still has the hash recorded, five folds, and a
# mean that is the accuracy recorded. Prints the file and the accuracy, or says what is wrong.
audit() {
	python3 - "$1" <<'EOF'
import hashlib, json, sys
evidence = json.loads(sys.argv[1])["reviews_evidence"]
art = next(e for e in evidence if e["kind"] == "artifact")
acc = next(e["value"] for e in evidence if e.get("name") == "accuracy")
raw = open(art["path"], "rb").read()
run = json.loads(raw)
if hashlib.sha256(raw).hexdigest() != art["sha256"]:
    sys.exit(f"{art['path']} changed since the run")
if len(run["folds"]) != 5 or round(sum(run["folds"]) / 5, 4) != acc or run["accuracy"] != acc:
    sys.exit(f"{art['path']} does not give the accuracy {acc}")
print(art["path"], acc)
EOF
}

# The evaluator: claim each review, audit the run's record, and pass it.
review() {
	local todo id record
	while [ "$(decision evaluator)" = "run ready_todo" ]; do
		todo=$(loopx --agent evaluator --json todo claim)
		id=$(jget todo.id <<<"$todo")
		record=$(audit "$todo") || fail "review $id: the run's record does not hold"
		loopx --agent evaluator todo update "$id" --evidence "audited $record" \
			--status done >/dev/null
		say "evaluator: $id audited $record"
	done
}

step "A goal and the owner's key (kept in $work, not in the agents' reach)"
mkdir "$work/project" && cd "$work/project" && mkdir runs
loopx start-goal --goal-text "Tune a k-NN classifier on iris" \
	--success "the best k is found, reviewed and promoted" >/dev/null
loopx owner init >/dev/null

step "The proposer adds a run per k; the evaluator adds a review of each"
propose

step "The executor runs every k; the reviews are not its work"
execute
expect "the executor's should-run once the runs are done" "$(decision executor)" \
	"idle no_work_for_you"

step "The evaluator reproduces every run"
review
expect "todos left open" "$(loopx --json todo list | jget todos)" "[]"

step "The winner, by the evidence"
best=$(loopx --json evidence list --metric accuracy --best max)
winner=$(jget best.todo <<<"$best")
acc=$(jget best.value <<<"$best")
# What the executor computed: the highest accuracy; among equals the earliest run, as loopx.
read -r want_k want_acc want_id < <(sort -s -k2,2gr "$work/results" | head -1)
expect "the best accuracy" "$acc" "$want_acc"
expect "the winning todo" "$winner" "$want_id"
say "best: k=$want_k accuracy=$acc ($winner)"

step "The evaluator reproduces the winner before the owner is asked"
again=$(cv_accuracy "$want_k" "$work/again.json")
expect "the winner's accuracy computed again" "$again" "$acc"

step "Promoting it is the owner's decision: a gate blocks the promote todo"
promote=$(loopx --agent evaluator todo add "Promote k=$want_k as the model")
# No options: approving is yes, rejecting is no (an approval with any option unblocks).
gate=$(loopx --agent evaluator gate open "Promote k-NN with k=$want_k (accuracy $acc)?" \
	--blocks "$promote")
expect "the executor's should-run while the gate waits" "$(decision executor)" "ask pending_gates"
loopx gate approve "$gate" --reason "best of ${#KS[@]} runs, reproduced" >/dev/null

step "The executor promotes the model"
expect "the executor's should-run after the approval" "$(decision executor)" "run ready_todo"
loopx --agent executor todo claim "$promote" >/dev/null
mkdir model && cp "runs/k$want_k.json" model/promoted.json
loopx --agent executor todo update "$promote" --artifact model/promoted.json \
	--evidence "promoted k=$want_k, approved in $gate" --status done >/dev/null
expect "the promoted model's k" "$(jget k <model/promoted.json)" "$want_k"
expect "the promote todo" "$(loopx --json todo show "$promote" | jget todo.status)" done
loopx goal complete --reason "k=$want_k promoted" >/dev/null
expect "the goal" "$(loopx --json goal show | jget goal.status)" complete

step "The story happened"
loopx evidence list --metric accuracy --limit "${#KS[@]}"
