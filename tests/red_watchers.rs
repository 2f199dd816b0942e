//! Red team: attacks on watchers' checks, budgets and hooks through the real binary, each a
//! defect that was found and fixed.

mod common;

use common::*;
use serde_json::Value;

/// `monitor propose ID -- WORDS...` as agent-a, with `--json` before the `--`.
fn propose(p: &Project, id: &str, words: &[&str]) -> (i32, Value) {
    let mut a = vec![
        "--json", "--agent", "agent-a", "monitor", "propose", id, "--",
    ];
    a.extend_from_slice(words);
    let r = p.run(&a);
    let v = parse_json(&r, "monitor propose");
    (r.code, v)
}

/// A recurring todo with a proposed check, as agent-a.
fn watcher(p: &Project, words: &[&str]) -> (String, i32, Value) {
    let id = p.add("watch", &["--every", "1h"]);
    let (code, v) = propose(p, &id, words);
    (id, code, v)
}

#[test]
fn a_check_that_shows_other_text_than_it_runs_is_refused() {
    let p = Project::new("red-newline");
    // `monitor list` shows a newline as `\n`: the owner would read `true #\ntouch pwned` as one
    // comment, but `sh -c` runs `touch pwned` on the second line.
    let (_, code, v) = watcher(&p, &["true #\ntouch pwned"]);
    assert_eq!(code, 2, "{v}");
    assert_err(&v, "usage");
    // The same text written into the todo file by hand is never approved nor run.
    let (id2, code, _) = watcher(&p, &["true #XXtouch pwned2"]);
    assert_eq!(code, 0);
    let path = p.lx(&format!("todos/{id2}.toml"));
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.contains("#XX"), "{text}");
    std::fs::write(&path, text.replace("#XX", "#\\n")).unwrap();
    let (code, v) = p.json(&["monitor", "approve", &id2]);
    assert_ne!(
        code, 0,
        "the owner approved a text with a hidden newline: {v}"
    );
    p.ok_as("poller", &["monitor", "poll"]);
    assert!(!p.root().join("pwned2").exists(), "a hidden line ran");
    // A tab, an escape and a bidi override are refused too; so are spaces the shell does not
    // split on (`x=1<NBSP>#;touch pwned` reads as a comment but runs `touch pwned`) and
    // invisible characters. Plain text is not.
    let (_, code, v) = watcher(&p, &["x=1\u{a0}#;touch pwned3"]);
    assert_eq!(code, 2, "{v}");
    for bad in [
        "true\tx",
        "true \u{1b}[8m x",
        "true \u{202e} x",
        "true\u{2003}x",
        "true\u{3000}x",
        "true\u{200b}x",
        "true\u{feff}x",
        "true\u{ad}x",
    ] {
        let (_, code, v) = watcher(&p, &[bad]);
        assert_eq!(code, 2, "{bad:?}: {v}");
    }
    let (_, code, v) = watcher(&p, &["gh pr view 12 --json state | jq -r .state"]);
    assert_eq!(code, 0, "{v}");
    // Any other character is refused too: the rule is printable ASCII (tests/hidden_text.rs).
    let (_, code, v) = watcher(&p, &["test -f \"résumé.txt\""]);
    assert_eq!(code, 2, "{v}");
}

#[test]
fn the_owner_s_sha_prefix_is_too_long_to_forge() {
    let p = Project::new("red-sha");
    let (id, code, v) = watcher(&p, &["touch ran.txt"]);
    assert_eq!(code, 0, "{v}");
    let sha = v["check"]["sha256"].as_str().unwrap().to_string();
    // 8 or 12 hex digits are 32 or 48 bits: an agent finds another text with the same prefix
    // (minutes on one core for 8) and swaps it in before the owner approves.
    for short in [&sha[..8], &sha[..12], &sha[..15]] {
        let (code, v) = p.json(&["monitor", "approve", &id, "--sha", short]);
        assert_eq!(code, 2, "{short}: {v}");
        assert_err(&v, "usage");
    }
    let r = p.run_as("agent-a", &["monitor", "list"]);
    assert!(r.stdout.contains(&sha[..16]), "{}", r.stdout);
    p.ok(&["monitor", "approve", &id, "--sha", &sha[..16]]);
}

#[test]
fn a_cost_budget_below_a_millionth_is_refused() {
    let p = Project::new("red-cost");
    // Costs are summed in millionths of a dollar: a smaller budget is 0, a paused goal.
    for tiny in ["0.0000001", "1e-9", "0.0000009"] {
        let (code, v) = p.json(&["quota", "set", "--cost-usd", tiny]);
        assert_eq!(code, 2, "{tiny}: {v}");
    }
    p.ok(&["quota", "set", "--cost-usd", "0.000001"]);
    p.add("work", &[]);
    let (code, v) = p.json_as("agent-a", &["quota", "should-run"]);
    assert_eq!((code, &v["decision"]), (0, &Value::from("run")), "{v}");
}

/// True when one of the answer's `owner_notes` (or an adopt's `differences`) shows `text`.
fn notes_show(v: &Value, text: &str) -> bool {
    let notes = v["owner_notes"].as_array().into_iter().flatten();
    let diffs = v["seal"]["differences"].as_array().into_iter().flatten();
    notes
        .chain(diffs)
        .any(|n| n.as_str().is_some_and(|n| n.contains(text)))
}

#[test]
fn the_owner_sees_a_hand_added_hook_s_text_before_and_when_adopting_it() {
    let p = Project::new("red-adopt");
    // An agent adds a hook by hand and breaks the seal: loopx tells the owner to adopt.
    let cfg = p.lx("loopx.toml");
    let mut text = std::fs::read_to_string(&cfg).unwrap();
    text.push_str("\n[hooks]\n\"gate.decided\" = \"touch evil.txt\"\n");
    std::fs::write(&cfg, text).unwrap();
    let (code, v) = p.no_key(&["status"]);
    assert_eq!(code, 0, "{v}");
    assert!(notes_show(&v, "touch evil.txt"), "{v}");
    let mut seal = std::fs::read_to_string(p.lx("owner.seal")).unwrap();
    seal.push_str("junk\n");
    std::fs::write(p.lx("owner.seal"), seal).unwrap();
    let (_, v) = p.no_key(&["status"]);
    assert!(
        notes_show(&v, "touch evil.txt"),
        "with a broken seal nothing shows the hook the adopt will seal: {v}"
    );
    // The adopt says what it sealed.
    let v = p.ok(&["owner", "seal", "--adopt"]);
    assert!(notes_show(&v, "touch evil.txt"), "{v}");
}

#[test]
fn a_hook_that_shows_other_text_than_it_runs_is_refused() {
    let p = Project::new("red-hook-newline");
    let r = p.run(&[
        "--json",
        "hook",
        "set",
        "gate.opened",
        "--",
        "true #\ntouch evil.txt",
    ]);
    assert_eq!(r.code, 2, "{}", r.stdout);
    // Added by hand, it is never shown to the owner for adoption as one comment.
    let cfg = p.lx("loopx.toml");
    let mut text = std::fs::read_to_string(&cfg).unwrap();
    text.push_str("\n[hooks]\n\"gate.opened\" = \"true #\\ntouch evil.txt\"\n");
    std::fs::write(&cfg, text).unwrap();
    let (code, v) = p.json(&["owner", "seal", "--adopt"]);
    assert_eq!(code, 6, "{v}");
    p.run_as("agent-a", &["gate", "open", "ship?"]);
    assert!(!p.root().join("evil.txt").exists());
}

/// Waits (at most a minute) until `f` holds.
fn wait_until(what: &str, f: impl Fn() -> bool) {
    for _ in 0..1200 {
        if f() {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    panic!("gave up waiting for {what}");
}

#[test]
fn deleting_the_cache_while_a_poll_runs_does_not_let_a_second_poll_run_its_check() {
    let p = Project::new("red-cache-lock");
    let check = "echo run >> runs.txt; while [ ! -f go ]; do sleep 0.05; done";
    let (id, code, v) = watcher(&p, &[check]);
    assert_eq!(code, 0, "{v}");
    p.ok(&["monitor", "approve", &id]);
    let mut first = p.cmd(&["--agent", "poller", "monitor", "poll"]);
    let mut first = first.stdout(std::process::Stdio::null()).spawn().unwrap();
    let runs = p.root().join("runs.txt");
    wait_until("the first poll's check", || runs.exists());
    // The cache is never authoritative: docs/state-format.md says delete it at any time.
    if p.lx("cache").exists() {
        std::fs::remove_dir_all(p.lx("cache")).unwrap();
    }
    let v = p.ok_as("poller", &["monitor", "poll", "--timeout", "1s"]);
    std::fs::write(p.root().join("go"), "").unwrap();
    first.wait().unwrap();
    let n = std::fs::read_to_string(&runs).unwrap().lines().count();
    assert_eq!(n, 1, "two polls ran one check: {v}");
}

#[test]
fn a_forged_owner_line_does_not_run_the_owner_s_hook() {
    use sha2::Digest;
    use std::io::Write;
    let p = Project::new("red-forged");
    let r = p.run(&[
        "--json",
        "hook",
        "set",
        "goal.completed",
        "--",
        "touch done.txt",
    ]);
    assert_eq!(r.code, 0, "{}", r.stdout);
    // An agent appends a `goal.complete` line with the chain right but no owner signature.
    let path = p.lx("journal.jsonl");
    let text = std::fs::read_to_string(&path).unwrap();
    let last = text.lines().last().unwrap();
    let prev: Value = serde_json::from_str(last).unwrap();
    let seq = prev["seq"].as_u64().unwrap() + 1;
    let line = serde_json::json!({"seq": seq, "at": prev["at"], "actor": "owner",
        "action": "goal.complete", "target": "goal", "data": {}, "tx": seq, "files": [],
        "prev": loopx::kernel::authority::to_hex(&sha2::Sha256::digest(last.as_bytes()))});
    std::fs::write(&path, format!("{text}{line}\n")).unwrap();
    let mut c = p.cmd(&["hook", "run", "goal.completed", "--json"]);
    c.env("LOOPX_OWNER_KEY", p.home.path.join("no-such-key"))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped());
    let mut child = c.spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin
        .write_all(serde_json::json!({"seq": seq}).to_string().as_bytes())
        .unwrap();
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    let last = std::fs::read_to_string(&path).unwrap();
    assert!(
        last.ends_with(&format!("{line}\n")),
        "the forged line was cut"
    );
    assert!(
        !p.root().join("done.txt").exists(),
        "an agent's forged owner line ran the owner's hook: {}",
        String::from_utf8_lossy(&out.stdout)
    );
}

#[test]
fn doctor_fix_journals_a_hook_that_cannot_start_without_waiting_on_its_own_lock() {
    let p = Project::new("red-doctor-hook");
    let r = p.run(&["--json", "hook", "set", "lease.expired", "--", "true"]);
    assert_eq!(r.code, 0, "{}", r.stdout);
    let id = p.add("work", &[]);
    p.ok_as("agent-a", &["todo", "claim", &id, "--ttl", "1s"]);
    // Let the lease lapse (a wait for the clock, not a measure of speed).
    std::thread::sleep(std::time::Duration::from_millis(1_100));
    // No temporary directory for the event JSON: the supervisor cannot start, so doctor, which
    // committed the event, journals the failure itself (it held the store's lock meanwhile).
    let mut c = p.cmd(&["doctor", "--fix", "--json"]);
    c.env("TMPDIR", p.root().join("no-such-dir"));
    let r = run_cmd(&mut c);
    assert!(r.stdout.contains("cleared the expired lease"), "{r:?}");
    let fails = p
        .journal()
        .iter()
        .filter(|e| e["action"] == "hook.fail")
        .count();
    assert_eq!(fails, 1, "the hook's failure was lost");
}

#[test]
fn a_check_revoked_while_an_earlier_check_of_the_poll_runs_does_not_run() {
    let p = Project::new("red-revoke-race");
    let mut ids = Vec::new();
    for n in ["one", "two"] {
        let check =
            format!("touch started-{n}; while [ ! -f go ]; do sleep 0.05; done; touch ran-{n}");
        let (id, code, v) = watcher(&p, &[&check]);
        assert_eq!(code, 0, "{v}");
        p.ok(&["monitor", "approve", &id]);
        ids.push((n, id));
    }
    let mut poll = p.cmd(&["--agent", "poller", "monitor", "poll"]);
    let mut poll = poll.stdout(std::process::Stdio::null()).spawn().unwrap();
    let started = |n: &str| p.root().join(format!("started-{n}")).exists();
    wait_until("a check", || started("one") || started("two"));
    // The owner revokes the check that has not started yet; then the first one ends.
    let (later, id) = ids.iter().find(|(n, _)| !started(n)).unwrap();
    p.ok(&["monitor", "revoke", id]);
    std::fs::write(p.root().join("go"), "").unwrap();
    poll.wait().unwrap();
    assert!(
        !p.root().join(format!("ran-{later}")).exists(),
        "a check ran after the owner revoked it"
    );
}

#[test]
fn a_hand_raised_budget_is_named_before_the_owner_adopts_it() {
    let p = Project::new("red-budget-note");
    p.ok(&["quota", "set", "--tokens", "100"]);
    let cfg = p.lx("loopx.toml");
    let text = std::fs::read_to_string(&cfg).unwrap();
    assert!(text.contains("tokens = 100\n"), "{text}");
    std::fs::write(&cfg, text.replace("tokens = 100\n", "tokens = 999999\n")).unwrap();
    // The owner is told "if you made those edits yourself, run --adopt": it must see what they are.
    let v = p.ok(&["owner", "seal"]);
    assert!(notes_show(&v, "999999"), "{v}");
    let (_, v) = p.no_key(&["quota", "should-run"]);
    assert_eq!(v["quota"]["tokens"]["limit"], 100, "{v}");
}
