//! Real processes racing on one project: no double claims, nothing lost, the chain intact.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::thread;

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_loopx")
}

fn project(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("loopx-conc-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let out = loopx(&dir, "lead", &["start-goal", "--goal-text", "race"]);
    assert!(out.status.success(), "{out:?}");
    dir
}

fn loopx(dir: &Path, agent: &str, args: &[&str]) -> Output {
    Command::new(bin())
        .arg("--dir")
        .arg(dir)
        .args(["--agent", agent, "--json"])
        .args(args)
        .env_remove("LOOPX_DIR")
        .env_remove("LOOPX_AGENT")
        .env("LOOPX_LOCK_TIMEOUT", "60")
        .output()
        .unwrap()
}

fn json(out: &Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {out:?}"))
}

fn add_todos(dir: &Path, n: usize) -> Vec<String> {
    (0..n)
        .map(|i| {
            let out = loopx(dir, "lead", &["todo", "add", &format!("todo {i}")]);
            assert!(out.status.success(), "{out:?}");
            json(&out)["todo"]["id"].as_str().unwrap().to_string()
        })
        .collect()
}

/// Every agent claims until nothing is ready; returns (agent, todo id, fence) for each claim.
fn race(dir: &Path, agents: usize, extra: &[&str]) -> Vec<(String, String, u64)> {
    let handles: Vec<_> = (0..agents)
        .map(|a| {
            let dir = dir.to_path_buf();
            let extra: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
            thread::spawn(move || {
                let agent = format!("agent-{a}");
                let mut got = Vec::new();
                loop {
                    let mut args = vec!["todo", "claim"];
                    args.extend(extra.iter().map(String::as_str));
                    let out = loopx(&dir, &agent, &args);
                    match out.status.code() {
                        Some(0) => {
                            let j = json(&out);
                            let t = &j["todo"];
                            assert_eq!(t["lease"]["holder"], agent.as_str());
                            got.push((
                                agent.clone(),
                                t["id"].as_str().unwrap().to_string(),
                                t["lease"]["fence"].as_u64().unwrap(),
                            ));
                        }
                        Some(3) => break,
                        other => panic!("claim exited {other:?}: {out:?}"),
                    }
                }
                got
            })
        })
        .collect();
    handles
        .into_iter()
        .flat_map(|h| h.join().unwrap())
        .collect()
}

fn journal_actions(dir: &Path, action: &str) -> Vec<String> {
    let text = std::fs::read_to_string(dir.join(".loopx/journal.jsonl")).unwrap();
    text.lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|v| v["action"] == action)
        .map(|v| v["target"].as_str().unwrap().to_string())
        .collect()
}

fn assert_chain_intact(dir: &Path) {
    let out = loopx(dir, "lead", &["log", "--verify"]);
    assert!(out.status.success(), "journal chain broken: {out:?}");
}

#[test]
fn eight_processes_never_claim_one_todo_twice() {
    let dir = project("claim");
    let ids = add_todos(&dir, 48);
    let claims = race(&dir, 8, &[]);
    let mut per_todo: HashMap<&str, usize> = HashMap::new();
    for (_, id, fence) in &claims {
        *per_todo.entry(id.as_str()).or_default() += 1;
        assert_eq!(*fence, 1, "first grant of {id} has fence 1");
    }
    assert_eq!(
        claims.len(),
        ids.len(),
        "every todo claimed once: {per_todo:?}"
    );
    for id in &ids {
        assert_eq!(
            per_todo.get(id.as_str()),
            Some(&1),
            "{id} claimed {per_todo:?}"
        );
    }
    // The files agree with what each winner was told.
    for (agent, id, _) in &claims {
        let text = std::fs::read_to_string(dir.join(format!(".loopx/todos/{id}.toml"))).unwrap();
        assert!(
            text.contains(&format!("holder = \"{agent}\"")),
            "{id}: {text}"
        );
    }
    let journaled = journal_actions(&dir, "todo.claim");
    assert_eq!(journaled.len(), ids.len());
    assert_chain_intact(&dir);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn expired_leases_are_reclaimed_once_with_a_new_fence() {
    let dir = project("reclaim");
    let ids = add_todos(&dir, 16);
    // Each by its id: on a loaded machine an early lease may lapse before the last claim, and a
    // claim of "the best ready todo" would then take that one again.
    for id in &ids {
        let out = loopx(&dir, "sleeper", &["todo", "claim", id, "--ttl", "1s"]);
        assert!(out.status.success(), "{out:?}");
    }
    thread::sleep(std::time::Duration::from_millis(1200));
    let claims = race(&dir, 8, &[]);
    assert_eq!(claims.len(), ids.len());
    let mut seen = std::collections::HashSet::new();
    for (agent, id, fence) in &claims {
        assert!(seen.insert(id.clone()), "{id} reclaimed twice");
        assert_eq!(*fence, 2, "{id} reclaimed by {agent} with fence {fence}");
    }
    // The sleeper's old fence is stale now: its write is refused and changes nothing.
    let id = &ids[0];
    let path = dir.join(format!(".loopx/todos/{id}.toml"));
    let before = std::fs::read(&path).unwrap();
    let out = loopx(
        &dir,
        "sleeper",
        &["todo", "update", id, "--fence", "1", "--evidence", "late"],
    );
    assert_eq!(out.status.code(), Some(4), "{out:?}");
    assert_eq!(json(&out)["error"]["code"], "stale_fence");
    assert_eq!(std::fs::read(&path).unwrap(), before);
    assert!(!dir.join(format!(".loopx/evidence/{id}.jsonl")).exists());
    assert_chain_intact(&dir);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn processes_killed_mid_mutation_leave_every_file_parseable() {
    let dir = project("kill");
    add_todos(&dir, 4);
    for round in 0..12u64 {
        let mut children: Vec<_> = (0..4)
            .map(|a| {
                Command::new(bin())
                    .arg("--dir")
                    .arg(&dir)
                    .args([
                        "--agent",
                        &format!("k{a}"),
                        "todo",
                        "add",
                        &format!("killed {round} {a}"),
                    ])
                    .env_remove("LOOPX_DIR")
                    .env_remove("LOOPX_AGENT")
                    .stdout(std::process::Stdio::null())
                    .stderr(std::process::Stdio::null())
                    .spawn()
                    .unwrap()
            })
            .collect();
        thread::sleep(std::time::Duration::from_micros(500 + round * 700));
        for c in &mut children {
            let _ = c.kill();
        }
        for c in &mut children {
            let _ = c.wait();
        }
    }
    // Whatever was cut short, doctor --fix leaves a healthy project and every command works.
    let fixed = loopx(&dir, "lead", &["doctor", "--fix"]);
    assert!(fixed.status.success(), "{fixed:?}");
    let doc = loopx(&dir, "lead", &["doctor"]);
    assert!(doc.status.success(), "{doc:?}");
    let status = loopx(&dir, "lead", &["status"]);
    assert!(status.status.success(), "{status:?}");
    assert_chain_intact(&dir);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_cache_never_hides_a_hand_edit() {
    let dir = project("cache");
    let ids = add_todos(&dir, 40);
    // Let the files settle, then load twice so the cache is written and used.
    thread::sleep(std::time::Duration::from_millis(60));
    for _ in 0..2 {
        assert!(loopx(&dir, "a", &["status"]).status.success());
    }
    assert!(
        dir.join(".loopx/cache/todos.bin").is_file(),
        "the cache was written"
    );
    let id = &ids[7];
    let path = dir.join(format!(".loopx/todos/{id}.toml"));
    let before = std::fs::read_to_string(&path).unwrap();
    let old_mtime = std::fs::metadata(&path).unwrap().modified().unwrap();
    // The same size, in place (same inode), with the old mtime put back: only ctime differs.
    let edited = before.replace("title = \"todo 7\"", "title = \"todo X\"");
    assert_ne!(edited, before);
    assert_eq!(edited.len(), before.len());
    std::fs::write(&path, &edited).unwrap();
    std::fs::File::options()
        .write(true)
        .open(&path)
        .unwrap()
        .set_modified(old_mtime)
        .unwrap();
    let shown = json(&loopx(&dir, "a", &["todo", "show", id]));
    assert_eq!(shown["todo"]["title"], "todo X", "{shown}");
    // A hand edit that makes the file invalid is seen at once too.
    std::fs::write(
        &path,
        before.replace("status = \"open\"", "status = \"wip!\""),
    )
    .unwrap();
    // The todo is quarantined at once: named by should-run, the others still offered.
    let out = loopx(&dir, "a", &["quota", "should-run"]);
    let v = json(&out);
    assert!(v["problems"].to_string().contains(id.as_str()), "{v}");
    assert_ne!(v["todo"]["id"], id.as_str(), "{v}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_archived_count_follows_every_archive() {
    let dir = project("count");
    let ids = add_todos(&dir, 4);
    for (n, id) in ids.iter().enumerate() {
        thread::sleep(std::time::Duration::from_millis(40));
        // Twice: the first status may write the count's cache, the second reads it.
        for _ in 0..2 {
            let st = json(&loopx(&dir, "a", &["status"]));
            assert_eq!(st["archived"], n, "{st}");
        }
        assert!(loopx(&dir, "a", &["todo", "claim", id]).status.success());
        let done = loopx(&dir, "a", &["todo", "update", id, "--status", "done"]);
        assert!(done.status.success(), "{done:?}");
    }
    // A file dropped into archive/ by hand counts too.
    let extra = dir.join(".loopx/archive/t-zzzzzz.toml");
    std::fs::copy(dir.join(format!(".loopx/archive/{}.toml", ids[0])), &extra).unwrap();
    let st = json(&loopx(&dir, "a", &["status"]));
    assert_eq!(st["archived"], 5, "{st}");
    let _ = std::fs::remove_dir_all(&dir);
}
