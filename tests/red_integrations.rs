//! Issue 10's host surfaces under attack: `turn start`/`turn end` by careless or hostile agents,
//! the MCP server's arguments, `setup`'s written files and id completion.

mod common;

use common::*;

/// The quota file's spends, as (agent, turn) pairs.
fn spends(p: &Project) -> Vec<(String, String)> {
    let text = std::fs::read_to_string(p.lx("quota.toml")).unwrap();
    let q: toml::Value = toml::from_str(&text).unwrap();
    q.get("spend")
        .and_then(|s| s.as_array())
        .map(|a| {
            a.iter()
                .map(|s| {
                    let f = |k: &str| s.get(k).and_then(|v| v.as_str()).unwrap_or("").to_string();
                    (f("agent"), f("turn"))
                })
                .collect()
        })
        .unwrap_or_default()
}

/// `turn start` as `agent` under `turn`: the todo id and fence it claimed.
fn start(p: &Project, agent: &str, turn: &str) -> (String, u64) {
    let v = p.ok_as(agent, &["turn", "start", "--turn", turn]);
    let id = v["todo"]["id"]
        .as_str()
        .expect("claimed a todo")
        .to_string();
    (id, v["fence"].as_u64().unwrap())
}

#[test]
fn another_agents_turn_cannot_be_ended_or_charged() {
    let p = Project::new("red10-other-turn");
    p.add("one", &[]);
    let (id, fence) = start(&p, "a", "T1");
    let f = fence.to_string();
    let end = ["turn", "end", "--turn", "T1", "--todo", &id, "--fence", &f];
    // Live lease: b never held fence 1, so nothing is spent or recorded for b.
    p.fails_as("b", &end, "lease_conflict");
    assert!(spends(&p).is_empty(), "b was charged a's turn");
    // a closes its todo itself during the turn; b still cannot record on it.
    p.ok_as(
        "a",
        &["todo", "update", "--status", "done", "--evidence", "x"],
    );
    p.fails_as("b", &end, "lease_conflict");
    assert!(spends(&p).is_empty(), "{:?}", spends(&p));
    assert!(p.evidence(&id).iter().all(|e| e["agent"] == "a"));
    // a's own end records the turn, once, under a.
    let v = p.ok_as("a", &["turn", "end", "--turn", "T1"]);
    assert_eq!(v["ended"], "closed", "{v}");
    assert_eq!(spends(&p), [("a".to_string(), "T1".to_string())]);
}

#[test]
fn a_turn_taken_over_ends_stale_by_its_id_alone_and_spends_once() {
    let p = Project::new("red10-taken");
    p.add("one", &[]);
    let (id, _) = start(&p, "a", "T1");
    // The owner moves the lease on: the turn's lease no longer names T1.
    p.ok(&["todo", "reassign", &id, "--to", "c"]);
    p.fails_as(
        "a",
        &["turn", "end", "--turn", "T1", "--done"],
        "stale_fence",
    );
    assert_eq!(spends(&p), [("a".to_string(), "T1".to_string())]);
    let v = p.ok_as("a", &["turn", "end", "--turn", "T1"]);
    assert_eq!(v["replayed"], true, "{v}");
    assert_eq!(spends(&p).len(), 1);
    assert_eq!(p.show(&id)["lease"]["holder"], "c");
}

#[test]
fn a_turn_whose_todo_was_closed_inside_it_ends_by_its_id() {
    let p = Project::new("red10-closed");
    p.add("one", &[]);
    let (id, _) = start(&p, "a", "T1");
    p.ok_as(
        "a",
        &["todo", "update", "--status", "done", "--evidence", "x"],
    );
    let v = p.ok_as("a", &["turn", "end", "--turn", "T1", "--summary", "fin"]);
    assert_eq!(v["ended"], "closed", "{v}");
    assert_eq!(v["todo"]["id"], id.as_str());
    assert_eq!(spends(&p), [("a".to_string(), "T1".to_string())]);
    // A turn never started is still not found, and spends nothing.
    p.fails_as("a", &["turn", "end", "--turn", "T9"], "not_found");
    assert_eq!(spends(&p).len(), 1);
}

#[test]
fn turn_end_takes_a_todo_prefix() {
    let p = Project::new("red10-prefix");
    p.add("one", &[]);
    let (id, fence) = start(&p, "a", "T1");
    p.ok(&["todo", "reassign", &id, "--to", "c"]);
    let f = fence.to_string();
    let end = [
        "turn",
        "end",
        "--turn",
        "T1",
        "--todo",
        &id[..5],
        "--fence",
        &f,
    ];
    p.fails_as("a", &end, "stale_fence");
    assert_eq!(spends(&p).len(), 1);
}

/// The candidates bash would be offered for these words.
fn complete(p: &Project, words: &[&str]) -> Vec<String> {
    let r = complete_bash(p, words, &[]);
    assert_eq!(r.code, 0, "{r:?}");
    r.stdout.lines().map(str::to_string).collect()
}

#[test]
fn completion_finds_an_id_among_more_than_it_offers() {
    let p = Project::new("red10-many");
    let letters = b"abcdefghjk";
    let mut ids = Vec::new();
    for i in 0..1000 {
        let body: String = [i / 100, i / 10 % 10, i % 10]
            .iter()
            .map(|d| letters[*d] as char)
            .collect();
        let id = format!("t-{body}zzz");
        std::fs::write(p.lx(&format!("todos/{id}.toml")), "").unwrap();
        ids.push(id);
    }
    // Past the 200 offered at once, what was typed still finds its id.
    for id in ids.iter().step_by(50) {
        assert_eq!(complete(&p, &["loopx", "todo", "show", id]), [id.as_str()]);
    }
}

#[test]
fn the_bash_script_quotes_an_odd_binary_path() {
    let p = Project::new("red10-bash");
    let dir = p.root().join("a dir $(touch pwned) `touch pwned2`");
    std::fs::create_dir(&dir).unwrap();
    let link = dir.join("loopx");
    std::os::unix::fs::symlink(bin(), &link).unwrap();
    let id = p.add("one", &[]);
    let mut c = std::process::Command::new(&link);
    c.args(["completions", "bash"]).current_dir(p.root());
    let script = run_cmd(&mut c).stdout;
    std::fs::write(p.root().join("script.bash"), &script).unwrap();
    let probe = "source ./script.bash; COMP_WORDS=(loopx todo show ''); COMP_CWORD=3; \
                 _clap_complete_loopx loopx '' show; printf '%s\\n' \"${COMPREPLY[@]}\"";
    let mut b = std::process::Command::new("bash");
    b.args(["-c", probe]).current_dir(p.root());
    let r = run_cmd(&mut b);
    assert!(
        !p.root().join("pwned").exists(),
        "the path ran as a command"
    );
    assert!(
        !p.root().join("pwned2").exists(),
        "the path ran as a command"
    );
    assert!(r.stdout.lines().any(|l| l == id), "{r:?}\n{script}");
}
