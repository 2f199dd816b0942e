//! Teams, part C, through the real binary: capabilities and routing, separation of duties for
//! review todos and excluded agents, per-agent slot caps, and the owner's sealed agent facts.

mod common;

use common::*;
use serde_json::Value;

fn should_run(p: &Project, agent: &str) -> (i32, Value) {
    p.json_as(agent, &["quota", "should-run"])
}

fn declare(p: &Project, agent: &str, caps: &[&str]) {
    let mut a = vec!["agent", "set"];
    for c in caps {
        a.push("--capability");
        a.push(c);
    }
    p.ok_as(agent, &a);
}

fn finish(p: &Project, agent: &str, id: &str, evidence: &str) {
    p.ok_as(
        agent,
        &[
            "todo",
            "update",
            id,
            "--status",
            "done",
            "--evidence",
            evidence,
        ],
    );
}

#[test]
fn a_proposer_an_executor_and_an_evaluator_each_get_only_their_work() {
    let p = Project::new("route-team");
    declare(&p, "proposer", &["plan"]);
    declare(&p, "executor", &["code", "code.rust"]);
    declare(&p, "evaluator", &["review"]);
    let design = p.add("design the parser", &["--requires", "plan"]);
    let build = p.add("build the parser", &["--requires", "code", "-p", "P1"]);
    let review = p.add("review the parser", &["--reviews", &build]);
    assert_eq!(p.show(&review)["reviews"], build.as_str());
    assert_eq!(p.show(&review)["depends_on"][0], build.as_str());

    // Each is offered only its own work.
    let (code, a) = should_run(&p, "proposer");
    assert_eq!((code, a["decision"].as_str()), (0, Some("run")), "{a}");
    assert_eq!(a["todo"]["id"], design.as_str());
    let (_, a) = should_run(&p, "executor");
    assert_eq!(a["todo"]["id"], build.as_str(), "{a}");
    // The evaluator's only work waits on the build (no `ask`, no other agents' work).
    let (code, a) = should_run(&p, "evaluator");
    assert_eq!((code, a["decision"].as_str()), (3, Some("wait")), "{a}");

    // Claim by id of another agent's work: not ready (exit 3), saying why.
    let v = p.fails_as("executor", &["todo", "claim", &design], "not_ready");
    let msg = v["error"]["message"].as_str().unwrap_or_default();
    assert!(msg.contains("plan"), "{v}");
    // A bare claim gives each its own.
    let v = p.ok_as("proposer", &["todo", "claim"]);
    assert_eq!(v["todo"]["id"], design.as_str());
    let v = p.ok_as("executor", &["todo", "claim"]);
    assert_eq!(v["todo"]["id"], build.as_str());
    p.fails_as("evaluator", &["todo", "claim"], "nothing_ready");

    // The executor finishes the build: its review is never the executor's.
    finish(&p, "executor", &build, "parser builds, 12 tests pass");
    assert_eq!(p.show(&review)["exclude_agents"][0], "executor");
    p.fails_as("executor", &["todo", "claim", &review], "not_ready");
    let (code, a) = should_run(&p, "executor");
    assert_eq!(code, 3);
    assert_eq!(a["decision"], "idle");
    assert_eq!(a["reason"], "no_work_for_you", "{a}");
    // Not even after the owner gives the lease away and it lapses: the exclusion stays.
    p.fails_as("executor", &["todo", "claim"], "nothing_ready");

    // The evaluator claims it and sees the build's evidence.
    let v = p.ok_as("evaluator", &["todo", "claim"]);
    assert_eq!(v["todo"]["id"], review.as_str());
    let ev = v["reviews_evidence"].as_array().expect("reviews_evidence");
    assert!(
        ev.iter()
            .any(|e| e["summary"] == "parser builds, 12 tests pass"),
        "{v}"
    );
    let shown = p.ok(&["todo", "show", &review]);
    assert!(shown["reviews_evidence"].is_array(), "{shown}");
    let r = p.run(&["todo", "show", &review]);
    assert!(r.stdout.contains("parser builds"), "{}", r.stdout);
}

#[test]
fn a_review_of_a_todo_done_already_excludes_its_finisher() {
    let p = Project::new("route-done");
    let t = p.add("write the docs", &[]);
    p.ok_as("writer", &["todo", "claim", &t]);
    finish(&p, "writer", &t, "docs written");
    let review = p.add("review the docs", &["--reviews", &t]);
    assert_eq!(p.show(&review)["exclude_agents"][0], "writer");
    p.fails_as("writer", &["todo", "claim", &review], "not_ready");
    let v = p.ok_as("reader", &["todo", "claim", &review]);
    assert_eq!(v["reviews_evidence"][0]["summary"], "docs written");
    // A review's turn shows the reviewed work too.
    p.ok_as("reader", &["todo", "release", &review]);
    let v = p.ok_as("reader", &["turn", "start"]);
    assert_eq!(v["todo"]["id"], review.as_str(), "{v}");
    assert_eq!(v["reviews_evidence"][0]["summary"], "docs written", "{v}");
}

#[test]
fn an_excluded_agent_is_never_offered_the_todo() {
    let p = Project::new("route-excl");
    let t = p.add("audit", &["--exclude-agent", "bob"]);
    let v = p.fails_as("bob", &["todo", "claim", &t], "not_ready");
    assert!(
        v["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("bob may not claim")),
        "{v}"
    );
    let (_, a) = should_run(&p, "bob");
    assert_eq!(a["reason"], "no_work_for_you", "{a}");
    let (_, a) = should_run(&p, "alice");
    assert_eq!(a["decision"], "run");
    p.ok_as("alice", &["todo", "claim", &t]);
}

#[test]
fn a_capped_agent_is_throttled_while_others_run() {
    let p = Project::new("route-cap");
    p.add("one", &[]);
    p.add("two", &[]);
    let v = p.ok(&["agent", "fix", "capped", "--slots", "1"]);
    assert_eq!(v["agent"]["slots"], 1);
    p.ok_as("capped", &["quota", "spend-slot"]);
    let (code, a) = should_run(&p, "capped");
    assert_eq!(code, 3);
    assert_eq!(a["decision"], "throttled");
    assert_eq!(a["reason"], "agent_slots_spent", "{a}");
    assert!(a["retry_after_s"].as_i64().is_some_and(|s| s > 0), "{a}");
    assert_eq!(a["agent_slots"], serde_json::json!({"used": 1, "limit": 1}));
    let (code, a) = should_run(&p, "free");
    assert_eq!((code, a["decision"].as_str()), (0, Some("run")), "{a}");
    assert!(a.get("agent_slots").is_none(), "{a}");
    let r = p.run_as("capped", &["quota", "should-run"]);
    assert!(r.stdout.contains("agent_slots_spent"), "{}", r.stdout);

    // A hand edit of [agents.capped] changes nothing: the seal holds the cap.
    let cfg = std::fs::read_to_string(p.lx("loopx.toml")).expect("read config");
    assert!(cfg.contains("[agents.capped]"), "{cfg}");
    let edited = cfg.replace("slots = 1\n", "slots = 100\n")
        + "\n[agents.sneaky]\ncapabilities = [\"plan\"]\n";
    assert_ne!(cfg, edited, "the edit must change the cap");
    std::fs::write(p.lx("loopx.toml"), edited).expect("edit config");
    let (_, a) = should_run(&p, "capped");
    assert_eq!(a["reason"], "agent_slots_spent", "{a}");
    let notes = a["owner_notes"].to_string();
    assert!(notes.contains("agents.capped"), "{a}");
    assert!(notes.contains("agents.sneaky"), "{a}");
    let v = p.ok(&["agent", "show", "sneaky"]);
    assert_eq!(v["agents"][0]["capabilities"], serde_json::json!([]));

    // The owner lifts the cap.
    p.ok(&["agent", "fix", "capped", "--slots", "none"]);
    let (_, a) = should_run(&p, "capped");
    assert_eq!(a["decision"], "run", "{a}");
}

#[test]
fn owner_fixed_capabilities_override_the_agents_own() {
    let p = Project::new("route-fix");
    declare(&p, "x", &["code"]);
    let code = p.add("code it", &["--requires", "code"]);
    let docs = p.add("document it", &["--requires", "docs"]);
    let v = p.ok(&["agent", "fix", "x", "--capability", "docs"]);
    assert_eq!(v["agent"]["capabilities"], serde_json::json!(["docs"]));
    assert_eq!(v["agent"]["declared"], serde_json::json!(["code"]));
    p.fails_as("x", &["todo", "claim", &code], "not_ready");
    let v = p.ok_as("x", &["todo", "claim"]);
    assert_eq!(v["todo"]["id"], docs.as_str());
    // The agent's own declaration cannot undo it.
    declare(&p, "x", &["code", "docs"]);
    let v = p.ok(&["agent", "show", "x"]);
    assert_eq!(v["agents"][0]["capabilities"], serde_json::json!(["docs"]));
    // Dropping the fixed list: its own counts again.
    p.ok(&["agent", "fix", "x", "--clear-capabilities"]);
    p.ok_as("x", &["todo", "claim", &code]);
    let j: Vec<String> = p
        .journal()
        .iter()
        .filter_map(|l| l["action"].as_str().map(str::to_string))
        .collect();
    assert!(j.iter().any(|a| a == "agent.set"), "{j:?}");
    assert!(j.iter().any(|a| a == "agent.fix"), "{j:?}");
    assert!(p.lx("agents/x.toml").is_file());
}

#[test]
fn agent_fix_needs_the_owner_key() {
    let p = Project::new("route-key");
    let (code, v) = p.no_key(&["agent", "fix", "x", "--slots", "2"]);
    assert_eq!(code, 7, "{v}");
    assert_err(&v, "denied");
    let cfg = std::fs::read_to_string(p.lx("loopx.toml")).expect("read config");
    assert!(!cfg.contains("agents"), "{cfg}");
    // An agent's own declaration needs no key.
    let (code, v) = p.no_key(&["--agent", "x", "agent", "set", "--capability", "code"]);
    assert_eq!(code, 0, "{v}");
}

#[test]
fn bad_capability_names_and_agent_ids_exit_2() {
    let p = Project::new("route-bad");
    p.fails_as("x", &["agent", "set", "--capability", "Bad Name"], "usage");
    p.fails_as("x", &["agent", "set", "--capability", ""], "usage");
    let long = "a".repeat(65);
    p.fails_as("x", &["agent", "set", "--capability", &long], "usage");
    p.fails(&["todo", "add", "t", "--requires", "x!"], "usage");
    p.fails(&["todo", "add", "t", "--exclude-agent", "owner"], "usage");
    p.fails(&["agent", "fix", "x", "--capability", "a b"], "usage");
    p.fails(&["agent", "fix", "x", "--slots", "0"], "usage");
    p.fails(&["agent", "fix", "x"], "usage");
    p.fails_as("x", &["agent", "set"], "usage");
    let many: Vec<String> = (0..33).map(|i| format!("c{i}")).collect();
    let mut a = vec!["agent", "set"];
    for c in &many {
        a.push("--capability");
        a.push(c);
    }
    p.fails_as("x", &a, "usage");
    assert!(!p.lx("agents").exists() || !p.lx("agents/x.toml").exists());
}

#[test]
fn a_bad_agent_file_is_quarantined_and_the_rest_goes_on() {
    let p = Project::new("route-quar");
    declare(&p, "x", &["code"]);
    std::fs::write(
        p.lx("agents/x.toml"),
        "id = \"x\"\ncapabilities = [\"NO\"]\n",
    )
    .expect("write");
    let t = p.add("code", &["--requires", "code"]);
    let (_, a) = should_run(&p, "x");
    assert_eq!(a["reason"], "no_work_for_you", "{a}");
    assert!(a["problems"].to_string().contains("agents/x.toml"), "{a}");
    p.fails_as("x", &["todo", "claim", &t], "not_ready");
    let (code, _) = p.json(&["doctor"]);
    assert!(code == 0 || code == 6, "doctor runs");
}

#[test]
fn a_turn_that_finishes_a_todo_excludes_its_agent_from_the_review() {
    let p = Project::new("route-turn");
    let t = p.add("build", &[]);
    let review = p.add("review the build", &["--reviews", &t, "-p", "P0"]);
    let r = p.run_as("exec", &["turn", "--complete-on-success", "--", "true"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(p.show(&review)["exclude_agents"][0], "exec");
    let (_, a) = should_run(&p, "exec");
    assert_eq!(a["reason"], "no_work_for_you", "{a}");
    let (_, a) = should_run(&p, "other");
    assert_eq!(a["todo"]["id"], review.as_str(), "{a}");
}

#[test]
fn state_md_lists_the_reviewed_todos_evidence() {
    let p = Project::new("route-state");
    let t = p.add("build", &[]);
    let review = p.add("review", &["--reviews", &t]);
    p.ok_as("exec", &["todo", "claim", &t]);
    finish(&p, "exec", &t, "built with `make`\nline two");
    p.ok_as("eval", &["todo", "claim", &review]);
    let r = p.run_as("eval", &["refresh-state"]);
    assert_eq!(r.code, 0, "{r:?}");
    let md = std::fs::read_to_string(p.lx("STATE.md")).expect("STATE.md");
    assert!(
        md.contains(&format!("## Reviewing {t} for {review}")),
        "{md}"
    );
    assert!(md.contains("built with"), "{md}");
    assert!(
        !md.contains("\nline two"),
        "stored text stays on its line: {md}"
    );
}

#[test]
fn refresh_state_tells_an_agent_with_no_work_to_wait_not_to_add() {
    let p = Project::new("route-next");
    p.add("plan", &["--requires", "plan"]);
    let v = p.ok_as("coder", &["refresh-state"]);
    assert_eq!(v["decision"], "idle");
    let next = v["next"].as_str().unwrap_or_default();
    assert!(next.contains("agent show"), "{v}");
    assert!(!next.contains("todo add"), "{v}");
}

#[test]
fn the_owner_adopts_a_hand_edit_of_agents_with_seal_adopt() {
    let p = Project::new("route-adopt");
    p.add("one", &[]);
    let cfg = std::fs::read_to_string(p.lx("loopx.toml")).expect("read config");
    std::fs::write(
        p.lx("loopx.toml"),
        cfg + "\n[agents.capped]\nslots = 1\nnote = \"kept\"\n",
    )
    .expect("edit config");
    p.ok_as("capped", &["quota", "spend-slot"]);
    let (_, a) = should_run(&p, "capped");
    assert_eq!(a["decision"], "run", "not sealed, so ignored: {a}");
    p.ok(&["owner", "seal", "--adopt"]);
    let (_, a) = should_run(&p, "capped");
    assert_eq!(a["reason"], "agent_slots_spent", "{a}");
    assert!(a.get("owner_notes").is_none(), "{a}");
    let seal = std::fs::read_to_string(p.lx("owner.seal")).expect("seal");
    assert!(seal.contains("\nagent capped 1 -\n"), "{seal}");
    // Other keys of the table are kept through owner changes.
    p.ok(&["agent", "fix", "capped", "--capability", "ops"]);
    let cfg = std::fs::read_to_string(p.lx("loopx.toml")).expect("read config");
    assert!(cfg.contains("note = \"kept\""), "{cfg}");
    assert!(cfg.contains("slots = 1"), "{cfg}");
}

#[test]
fn the_roster_shows_each_agents_capabilities() {
    let p = Project::new("route-roster");
    p.ok_as("bob", &["agent", "set", "--capability", "code"]);
    let v = p.ok(&["agents"]);
    let bob = v["agents"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["agent"] == "bob")
        .cloned()
        .unwrap();
    assert_eq!(bob["capabilities"], serde_json::json!(["code"]), "{v}");
}

/// `todo handoff R --to A` as B, the JSON error's message.
fn handoff_refused(p: &Project, from: &str, id: &str, to: &str) -> String {
    let v = p.fails_as(from, &["todo", "handoff", id, "--to", to], "not_ready");
    let msg = v["error"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    // Refused as its claim would be: exit 3, nothing moved.
    assert_eq!(p.show(id)["lease"]["holder"], from, "{v}");
    msg
}

#[test]
fn a_handoff_to_the_finisher_of_the_reviewed_todo_is_refused() {
    let p = Project::new("route-handoff-sod");
    let t = p.add("build", &[]);
    let review = p.add("review the build", &["--reviews", &t]);
    p.ok_as("a", &["todo", "claim", &t]);
    finish(&p, "a", &t, "built");
    p.ok_as("b", &["todo", "claim", &review]);
    let msg = handoff_refused(&p, "b", &review, "a");
    assert!(
        msg.contains("cannot be handed to a") && msg.contains("separation of duties"),
        "{msg}"
    );
    // A cannot finish its own review: it holds nothing.
    let args = ["todo", "update", &review, "--status", "done"];
    p.fails_as("a", &args, "lease_conflict");
    // Another agent may take it; the owner's signed reassign still overrides.
    p.ok_as("b", &["todo", "handoff", &review, "--to", "c"]);
    p.ok(&["todo", "reassign", &review, "--to", "a"]);
    assert_eq!(p.show(&review)["lease"]["holder"], "a");
}

#[test]
fn a_handoff_needs_the_receivers_capabilities_as_the_owner_fixed_them() {
    let p = Project::new("route-handoff-cap");
    let deploy = p.add("deploy it", &["--requires", "deploy"]);
    declare(&p, "ops", &["deploy"]);
    p.ok(&["agent", "fix", "nocap", "--clear-capabilities"]);
    p.ok_as("ops", &["todo", "claim", &deploy]);
    let msg = handoff_refused(&p, "ops", &deploy, "nocap");
    assert!(
        msg.contains("nocap lacks capabilities it needs: deploy"),
        "{msg}"
    );
    p.fails_as(
        "nocap",
        &["todo", "update", &deploy, "--status", "done"],
        "lease_conflict",
    );
    // What it declares itself does not count against the owner's fixed list.
    declare(&p, "fixed", &["deploy"]);
    p.ok(&["agent", "fix", "fixed", "--capability", "docs"]);
    let msg = handoff_refused(&p, "ops", &deploy, "fixed");
    assert!(msg.contains("deploy"), "{msg}");
}

#[test]
fn a_handoff_and_a_claim_respect_the_receivers_slot_cap() {
    let p = Project::new("route-handoff-slots");
    let t = p.add("one", &[]);
    let u = p.add("two", &[]);
    p.ok(&["agent", "fix", "capped", "--slots", "1"]);
    p.ok_as("capped", &["quota", "spend-slot"]);
    p.ok_as("free", &["todo", "claim", &t]);
    let msg = handoff_refused(&p, "free", &t, "capped");
    assert!(msg.contains("capped has spent its 1 slot"), "{msg}");
    // A claim applies the same rule.
    let v = p.fails_as("capped", &["todo", "claim", &u], "not_ready");
    assert!(
        v["error"]["message"]
            .to_string()
            .contains("agent fix --slots"),
        "{v}"
    );
    p.fails_as("capped", &["todo", "claim"], "nothing_ready");
}
