//! The no-progress breaker through the real binary: turns that leave nothing behind park their
//! todo behind a gate to the owner, a failing todo backs off so others run, and only the owner
//! sets the number.

mod common;

use common::*;
use serde_json::Value;

/// A turn of `cmd` (`sh -c`) by agent-a, once should-run says run (a todo without progress
/// backs off a second, then two); its exit code and answer.
fn turn(p: &Project, cmd: &str) -> (i32, Value) {
    wait_for("should-run to say run", || {
        let a = should_run(p);
        (a["decision"] == "run" || a["decision"] == "ask").then_some(())
    });
    let mut c = p.cmd(&[
        "--agent", "agent-a", "--json", "turn", "--", "sh", "-c", cmd,
    ]);
    c.env("LX", bin());
    let r = run_cmd(&mut c);
    let v = parse_json(&r, cmd);
    (r.code, v)
}

fn should_run(p: &Project) -> Value {
    p.json_as("agent-a", &["quota", "should-run"]).1
}

/// The pending gate the breaker opened for `id`.
fn breaker_gate(p: &Project, id: &str) -> Option<Value> {
    let (_, v) = p.json(&["gate", "list", "--pending"]);
    v["gates"]
        .as_array()?
        .iter()
        .find(|g| {
            g["blocks"]
                .as_array()
                .is_some_and(|b| b.iter().any(|x| x == id))
        })
        .cloned()
}

#[test]
fn three_turns_without_progress_park_the_todo_and_ask_the_owner() {
    let p = Project::new("breaker-park");
    let id = p.add("spin", &[]);
    for n in 1..=2 {
        let (code, v) = turn(&p, "true");
        assert_eq!(code, 0, "{v}");
        assert_eq!(p.show(&id)["stall"]["turns"], n, "{}", p.show(&id));
        assert!(breaker_gate(&p, &id).is_none());
    }
    turn(&p, "true");
    let t = p.show(&id);
    let g = breaker_gate(&p, &id).expect("the third turn opens a gate");
    assert_eq!(t["stall"]["parked"], g["id"], "{t}");
    let q = g["question"].as_str().unwrap();
    assert!(
        q.contains(&id) && q.contains("no progress in 3 turns"),
        "{q}"
    );
    assert_eq!(
        g["options"],
        serde_json::json!(["retry", "rewrite", "drop"])
    );
    // Parked: not offered; the only work waits on the owner.
    let a = should_run(&p);
    assert_eq!(a["decision"], "ask", "{a}");
    p.fails_as("agent-a", &["todo", "claim", &id], "not_ready");
    // No agent can decide it.
    let gid = g["id"].as_str().unwrap().to_string();
    let (code, _) = p.no_key(&["gate", "approve", &gid, "--option", "retry"]);
    assert_ne!(code, 0);
    // The owner's `retry` offers it again, with a clean count.
    p.ok(&["gate", "approve", &gid, "--option", "retry"]);
    assert!(p.show(&id).get("stall").is_none(), "{}", p.show(&id));
    assert_eq!(should_run(&p)["decision"], "run");
}

#[test]
fn the_owner_may_drop_or_ask_for_a_rewrite() {
    let p = Project::new("breaker-drop");
    p.ok(&["quota", "set", "--breaker", "1"]);
    let a = p.add("first", &["--priority", "P0"]);
    let b = p.add("second", &["--priority", "P1"]);
    turn(&p, "true");
    let ga = breaker_gate(&p, &a).expect("one turn parks at --breaker 1");
    turn(&p, "true");
    let gb = breaker_gate(&p, &b).expect("then the next todo runs, and parks");
    p.ok(&[
        "gate",
        "approve",
        ga["id"].as_str().unwrap(),
        "--option",
        "drop",
    ]);
    let t = p.show(&a);
    assert_eq!(t["status"], "cancelled", "{t}");
    p.ok(&[
        "gate",
        "approve",
        gb["id"].as_str().unwrap(),
        "--option",
        "rewrite",
    ]);
    let t = p.show(&b);
    assert_eq!(t["status"], "blocked", "{t}");
    assert!(t["reason"].as_str().unwrap().contains("rewrite"), "{t}");
    // An owner's block: the agent cannot reopen it.
    let (code, v) = p.no_key(&["--agent", "agent-a", "todo", "reopen", &b]);
    assert_ne!(code, 0, "{v}");
}

#[test]
fn a_turn_that_changes_the_work_tree_or_records_a_new_best_is_progress() {
    let p = Project::new("breaker-progress");
    git(p.root(), &["init", "-q"]);
    std::fs::write(p.root().join(".gitignore"), ".loopx/\n").unwrap();
    git(p.root(), &["add", ".gitignore"]);
    git(p.root(), &["commit", "-q", "-m", "first"]);
    let id = p.add("tune", &[]);
    for n in 0..4 {
        let (code, v) = turn(&p, &format!("echo {n} >> work.txt"));
        assert_eq!(code, 0, "{v}");
        assert!(
            p.show(&id).get("stall").is_none(),
            "turn {n}: {}",
            p.show(&id)
        );
    }
    // A metric that beats every earlier value is progress; the same value again is not.
    let metric = |v: &str| format!(r#""$LX" todo update "$LOOPX_TODO_ID" --metric acc={v}"#);
    for v in ["0.5", "0.6", "0.7"] {
        turn(&p, &metric(v));
        assert!(p.show(&id).get("stall").is_none(), "{v}: {}", p.show(&id));
    }
    for n in 1..=2 {
        turn(&p, &metric("0.6"));
        assert_eq!(p.show(&id)["stall"]["turns"], n, "{}", p.show(&id));
    }
    turn(&p, &metric("0.6"));
    assert!(breaker_gate(&p, &id).is_some(), "flat metrics park it");
}

#[test]
fn a_failing_todo_backs_off_and_the_next_one_runs() {
    let p = Project::new("breaker-backoff");
    p.ok(&["quota", "set", "--breaker", "0"]);
    let bad = p.add("always fails", &["--priority", "P0"]);
    let good = p.add("other work", &["--priority", "P1"]);
    let (code, _) = turn(&p, "exit 1");
    assert_eq!(code, 1);
    // The first failure is tried again at once.
    assert_eq!(should_run(&p)["todo"]["id"], bad.as_str());
    turn(&p, "exit 1");
    let t = p.show(&bad);
    assert_eq!(t["stall"]["failures"], 2, "{t}");
    assert!(t["stall"]["retry_at"].is_string(), "{t}");
    // Backed off: the other todo is offered, though its priority is lower.
    let a = should_run(&p);
    assert_eq!(a["todo"]["id"], good.as_str(), "{a}");
    // With the breaker off, no gate opens however often it fails.
    assert!(breaker_gate(&p, &bad).is_none());
}

#[test]
fn only_the_owner_sets_the_number() {
    let p = Project::new("breaker-owner");
    let id = p.add("spin", &[]);
    // Without the key: refused.
    let (code, v) = p.no_key(&["quota", "set", "--breaker", "0"]);
    assert_ne!(code, 0, "{v}");
    // Out of bounds: a usage error.
    let r = p.run(&["quota", "set", "--breaker", "1001"]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    let r = p.run(&["quota", "set", "--breaker", "-1"]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    // An agent's hand edit turning it off does not count: the seal's 3 holds.
    let cfg = p.lx("loopx.toml");
    let text = std::fs::read_to_string(&cfg).unwrap();
    std::fs::write(&cfg, format!("{text}\n[breaker]\nturns = 0\n")).unwrap();
    for _ in 0..3 {
        turn(&p, "true");
    }
    assert!(breaker_gate(&p, &id).is_some(), "{}", p.show(&id));
    let a = should_run(&p);
    let notes = a["owner_notes"].to_string();
    assert!(notes.contains("[breaker]"), "{a}");
}

#[test]
fn turns_a_host_runs_itself_count_too() {
    let p = Project::new("breaker-steps");
    let id = p.add("spin", &[]);
    for _ in 0..3 {
        wait_for("should-run to say run", || {
            (should_run(&p)["decision"] == "run").then_some(())
        });
        let v = p.ok_as("agent-a", &["turn", "start"]);
        let t = v["turn"].as_str().unwrap().to_string();
        p.ok_as(
            "agent-a",
            &["turn", "end", "--turn", &t, "--summary", "nothing"],
        );
    }
    assert!(breaker_gate(&p, &id).is_some(), "{}", p.show(&id));
}

#[test]
fn a_stall_written_by_hand_out_of_bounds_is_named() {
    let p = Project::new("breaker-hand");
    let id = p.add("spin", &[]);
    p.write_todo(&id, "[stall]\nturns = -4\n");
    let (code, v) = p.json(&["doctor"]);
    assert_ne!(code, 0, "{v}");
    assert!(v.to_string().contains(&format!("{id}.toml")), "{v}");
}

#[test]
fn a_check_that_keeps_failing_parks_the_todo_too() {
    // A kept lease keeps its first claim's time: the earlier turns' own records must not count
    // as this turn's progress.
    for steps in [false, true] {
        let p = Project::new("breaker-check");
        let id = p.add("prove it", &[]);
        let r = p.run_as("agent-a", &["todo", "check", "propose", &id, "--", "false"]);
        assert_eq!(r.code, 0, "{r:?}");
        p.ok(&["todo", "check", "approve", &id]);
        for _ in 0..3 {
            wait_for("should-run to say run", || {
                (should_run(&p)["decision"] == "run").then_some(())
            });
            if steps {
                let v = p.ok_as("agent-a", &["turn", "start"]);
                let t = v["turn"].as_str().unwrap().to_string();
                p.fails_as(
                    "agent-a",
                    &["turn", "end", "--turn", &t, "--done", "--summary", "did it"],
                    "check_failed",
                );
            } else {
                let mut c = p.cmd(&[
                    "--agent",
                    "agent-a",
                    "--json",
                    "turn",
                    "--complete-on-success",
                    "--",
                    "true",
                ]);
                let r = run_cmd(&mut c);
                assert_eq!(r.code, 9, "{r:?}");
            }
        }
        let g = breaker_gate(&p, &id);
        assert!(g.is_some(), "steps {steps}: {}", p.show(&id));
        assert_eq!(p.show(&id)["stall"]["parked"], g.unwrap()["id"]);
    }
}

#[test]
fn work_in_a_turns_worktree_is_progress() {
    let p = common::worktrees::repo("breaker-worktree");
    let id = p.add("feature", &[]);
    let work = r#"echo "$1" >> "$LOOPX_WORKTREE/work.txt""#;
    let commit = r#"git -C "$LOOPX_WORKTREE" add work.txt && git -C "$LOOPX_WORKTREE" -c user.name=t -c user.email=t@t commit -qm w"#;
    // `turn --worktree`: a changed file, then a commit, then another change, in the worktree.
    for step in [work, commit, work] {
        let mut c = p.cmd(&[
            "--agent",
            "agent-a",
            "--json",
            "turn",
            "--worktree",
            "--",
            "sh",
            "-c",
            step,
            "x",
        ]);
        let r = run_cmd(&mut c);
        assert_eq!(r.code, 0, "{r:?}");
        let t = p.show(&id);
        assert!(t.get("stall").is_none(), "{step}: {t}");
    }
    // `turn start --worktree` and `turn end`: the same, measured in the worktree too.
    for n in 0..2 {
        let v = p.ok_as("agent-a", &["turn", "start", "--worktree"]);
        let wt = v["worktree"].as_str().expect("the worktree").to_string();
        let turn = v["turn"].as_str().unwrap().to_string();
        std::fs::write(format!("{wt}/work.txt"), format!("turn {n}\n")).unwrap();
        p.ok_as("agent-a", &["turn", "end", "--turn", &turn]);
        let t = p.show(&id);
        assert!(t.get("stall").is_none(), "step turn {n}: {t}");
    }
    // A turn that changes nothing there still counts.
    let v = p.ok_as("agent-a", &["turn", "start", "--worktree"]);
    let turn = v["turn"].as_str().unwrap().to_string();
    p.ok_as("agent-a", &["turn", "end", "--turn", &turn]);
    assert_eq!(p.show(&id)["stall"]["turns"], 1, "{}", p.show(&id));
}

#[test]
fn the_protocol_agent_prompt_teaches_is_what_the_breaker_counts() {
    let p = Project::new("breaker-prompt");
    for runtime in ["generic", "codex"] {
        let prompt = p.ok(&["agent-prompt", "--runtime", runtime])["prompt"]
            .as_str()
            .unwrap()
            .to_string();
        assert!(prompt.contains("loopx turn start"), "{runtime}: {prompt}");
        assert!(
            prompt.contains("loopx turn end --turn"),
            "{runtime}: {prompt}"
        );
        // A turn ended by a spend alone is one the breaker never sees.
        for step in ["spend-slot", "quota should-run"] {
            assert!(
                !prompt.contains(step),
                "{runtime} teaches `{step}`: {prompt}"
            );
        }
    }
    // Followed with nothing to show, it parks the todo.
    let id = p.add("spin", &[]);
    for _ in 0..3 {
        wait_for("should-run to say run", || {
            (should_run(&p)["decision"] == "run").then_some(())
        });
        let v = p.ok_as("agent-a", &["turn", "start"]);
        let t = v["turn"].as_str().unwrap().to_string();
        p.ok_as(
            "agent-a",
            &["turn", "end", "--turn", &t, "--summary", "nothing"],
        );
    }
    assert!(breaker_gate(&p, &id).is_some(), "{}", p.show(&id));
}
