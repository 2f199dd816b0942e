//! Three commands on a database, through the binary: `monitor poll` (approved checks only, one
//! poll at a time), `setup` (the wiring reaches the database through a pointer, never a
//! password), and `start-goal --replace` (the owner's alone, the old goal kept as history that
//! export and import carry); and `store migrate` upgrading a version 1 database in place.

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Stdio;

use common::backend::{Backend, Db, Lab, Who};
use common::{Project, TempDir, parse_json, pg, run_cmd};
use serde_json::Value;

/// Every file under `dir/.loopx/` but the lock, by path, with its bytes.
fn tree(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    fn walk(base: &Path, d: &Path, out: &mut BTreeMap<String, Vec<u8>>) {
        for e in std::fs::read_dir(d).expect("read a dir").flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(base, &p, out);
            } else if e.file_name() != "lock" && !p.starts_with(base.join("cache")) {
                let rel = p.strip_prefix(base).expect("below the base");
                out.insert(rel.display().to_string(), std::fs::read(&p).expect("read"));
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(&dir.join(".loopx"), &dir.join(".loopx"), &mut out);
    out
}

/// The text of a file of an exported tree.
fn text(t: &BTreeMap<String, Vec<u8>>, rel: &str) -> String {
    let b = t
        .get(rel)
        .unwrap_or_else(|| panic!("{rel} is not in {:?}", t.keys()));
    String::from_utf8(b.clone()).expect("UTF-8")
}

/// The id `todo add` gave.
fn todo_id(v: &Value) -> String {
    v["todo"]["id"].as_str().expect("a todo id").to_string()
}

/// A poll's skip reason for `id`.
fn skipped(v: &Value, id: &str) -> String {
    let list = v["skipped"].as_array().cloned().unwrap_or_default();
    let s = list.iter().find(|s| s["id"] == id);
    s.and_then(|s| s["reason"].as_str())
        .unwrap_or("")
        .to_string()
}

#[test]
fn monitor_poll_runs_approved_checks_once_on_a_database() {
    let Some(lab) = Lab::new(Backend::Db, "pgc-poll", 1, 0) else {
        return;
    };
    let a1 = lab.agent(1);
    let root = lab.p.root();
    let watch = |title: &str, cmd: &str| {
        let id = todo_id(&lab.ok(Who::Agent(a1), &["todo", "add", title, "--every", "1h"]));
        lab.ok(Who::Agent(a1), &["monitor", "propose", &id, "--", cmd]);
        id
    };
    let x = watch("Watch x", "echo x >> runs.txt; sleep 1");
    let y = watch("Watch y", "echo y >> y.txt");
    // Not approved: never run.
    let v = lab.ok(Who::Agent(a1), &["monitor", "poll"]);
    assert!(skipped(&v, &x).contains("unapproved"), "{v}");
    assert!(!root.join("runs.txt").exists() && !root.join("y.txt").exists());
    lab.ok(Who::Owner, &["monitor", "approve", &x]);
    lab.ok(Who::Owner, &["monitor", "approve", &y]);
    // y's command edited by hand in the database, without the owner's key: the seal still
    // holds the text the owner approved, so the edited command is not run.
    let db = lab.db.as_ref().expect("a database");
    db.sql(&format!(
        "UPDATE loopx.todos SET body = jsonb_set(body, '{{check,command}}', \
         '\"echo evil >> evil.txt\"') WHERE id = '{y}'"
    ));
    // Two polls at once: the check runs once, in the work dir, and is recorded once.
    let spawn = || {
        lab.cmd(Who::Agent(a1), &["monitor", "poll"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn a poll")
    };
    let polls = [spawn(), spawn()];
    let mut answers = Vec::new();
    for c in polls {
        let out = c.wait_with_output().expect("a poll ends");
        assert_eq!(out.status.code(), Some(0), "{out:?}");
        answers.push(serde_json::from_slice::<Value>(&out.stdout).expect("JSON"));
    }
    let runs = std::fs::read_to_string(root.join("runs.txt")).expect("x ran");
    assert_eq!(runs.lines().count(), 1, "x ran {runs:?}: {answers:?}");
    assert!(!root.join("evil.txt").exists(), "an unapproved command ran");
    let said = answers.iter().map(|v| skipped(v, &y)).collect::<Vec<_>>();
    assert!(said.iter().any(|s| s.contains("changed")), "{answers:?}");
    let changes = lab
        .journal()
        .iter()
        .filter(|e| e["action"] == "monitor.change")
        .count();
    assert_eq!(changes, 1, "one result recorded");
    let list = lab.ok(Who::Agent(a1), &["monitor", "list"]);
    let mons = list["monitors"].as_array().expect("monitors");
    let of_x = mons.iter().find(|m| m["id"] == x).expect("x listed");
    assert_eq!(
        (&of_x["check"]["last_exit"], &of_x["check"]["approved"]),
        (&Value::from(0), &Value::from(true))
    );
    let of_y = mons.iter().find(|m| m["id"] == y).expect("y listed");
    assert_eq!(of_y["check"]["approval"], "changed", "{of_y}");
}

/// `url` without its password (the test servers let local logins in without one).
fn no_password(url: &str) -> String {
    let (scheme, rest) = url.split_once("://").expect("a URL");
    let (auth, host) = rest.split_once('@').expect("a login");
    let user = auth.split(':').next().unwrap_or(auth);
    format!("{scheme}://{user}@{host}")
}

#[test]
fn setup_wires_a_database_through_a_pointer_without_a_password() {
    let Some(lab) = Lab::new(Backend::Db, "pgc-setup", 1, 1) else {
        return;
    };
    let a1 = lab.agent(1);
    let with_pw = lab.login(Who::Agent(a1)).expect("a login");
    let url = no_password(&with_pw);
    let work = TempDir::new("pgc-setup-work");
    let dir = work.path.to_str().expect("UTF-8");
    let setup = |url: &str, dir: &str, host: &[&str]| {
        let mut a = vec!["--json", "--store", url, "--dir", dir, "setup"];
        a.extend_from_slice(host);
        let r = run_cmd(&mut lab.p.cmd(&a));
        (r.code, parse_json(&r, "setup"))
    };
    // A URL with a password: refused, nothing written.
    let (code, v) = setup(&with_pw, dir, &["cron", "--every", "5m", "--", "true"]);
    assert_eq!(
        (code, &v["error"]["code"]),
        (2, &Value::from("usage")),
        "{v}"
    );
    assert!(!v.to_string().contains("lx-test-pw"), "{v}");
    assert_eq!(
        std::fs::read_dir(&work.path).expect("the work dir").count(),
        0
    );
    // Without one: the pointer (0600) and the crontab line, which holds no URL.
    let (code, v) = setup(&url, dir, &["cron", "--every", "5m", "--", "true"]);
    assert_eq!(code, 0, "{v}");
    let files: Vec<&str> = v["files"]
        .as_array()
        .expect("files")
        .iter()
        .filter_map(|f| f["path"].as_str())
        .collect();
    assert!(files.contains(&".loopx/loopx.toml"), "{v}");
    let pointer = work.path.join(".loopx/loopx.toml");
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&pointer)
        .expect("the pointer")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600, "the pointer is the user's only");
    let ptext = std::fs::read_to_string(&pointer).expect("the pointer");
    let back: toml::Table = toml::from_str(&ptext).expect("TOML");
    assert_eq!(back["store"]["url"].as_str(), Some(url.as_str()), "{ptext}");
    let line = v["crontab"].as_str().expect("the crontab line");
    assert!(
        !line.contains("postgres") && line.contains(&format!("--dir {dir}")),
        "{line}"
    );
    assert!(
        line.contains(&format!("--agent {a1}")),
        "the login is the agent: {line}"
    );
    // What the wiring runs reaches the database from the work dir alone.
    let mut c = lab
        .p
        .cmd(&["--json", "--dir", dir, "--agent", a1, "todo", "claim"]);
    let r = run_cmd(&mut c);
    let v = parse_json(&r, "claim through the pointer");
    assert_eq!(
        (r.code, &v["todo"]["id"]),
        (0, &Value::from(lab.todos[0].as_str())),
        "{v}"
    );
    // Claude's wiring there: no URL in its files; the pointer stays as it is.
    let (code, v) = setup(&url, dir, &["claude"]);
    assert_eq!(code, 0, "{v}");
    let pointer_action = v["files"]
        .as_array()
        .expect("files")
        .iter()
        .find(|f| f["path"] == ".loopx/loopx.toml")
        .map(|f| f["action"].clone());
    assert_eq!(pointer_action, Some(Value::from("unchanged")), "{v}");
    for f in [".mcp.json", ".claude/settings.json"] {
        let t = std::fs::read_to_string(work.path.join(f)).expect(f);
        assert!(!t.contains("postgres"), "{f}: {t}");
    }
    // Another database than the pointer's, or a project on files: refused.
    let other = format!("{}x", url);
    let (code, v) = setup(&other, dir, &["claude"]);
    assert_eq!(code, 2, "{v}");
    let files_project = Project::new("pgc-setup-files");
    let fdir = files_project.root().to_str().expect("UTF-8");
    let before = files_project.files();
    let (code, v) = setup(&url, fdir, &["claude"]);
    assert_eq!(code, 2, "{v}");
    assert!(
        before == files_project.files(),
        "nothing written beside the files"
    );
}

/// The journal of `t`'s `journal.jsonl` (or `history/GOAL/journal.jsonl`), parsed.
fn lines(text: &str) -> Vec<Value> {
    text.lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect()
}

/// Claims, evidence, a spend and a signed decision on the lab's database.
fn some_work(lab: &Lab) -> String {
    let a1 = lab.agent(1);
    let x = &lab.todos[0];
    let v = lab.ok(Who::Agent(a1), &["todo", "claim", x]);
    let fence = v["todo"]["fence"].to_string();
    let ev = [
        "todo",
        "update",
        x,
        "--fence",
        &fence,
        "--evidence",
        "proof one",
    ];
    lab.ok(Who::Agent(a1), &ev);
    lab.ok(Who::Agent(a1), &["quota", "spend-slot"]);
    let g = lab.ok(Who::Agent(a1), &["gate", "open", "Ship it?"]);
    let g = g["gate"]["id"].as_str().expect("a gate").to_string();
    lab.ok(Who::Owner, &["gate", "approve", &g]);
    g
}

#[test]
fn start_goal_replace_keeps_the_old_goal_in_the_database() {
    let Some(server) = pg::server_or_skip() else {
        return;
    };
    let Some(lab) = Lab::new(Backend::Db, "pgc-replace", 1, 2) else {
        return;
    };
    let a1 = lab.agent(1);
    let gate = some_work(&lab);
    let old = lab.ok(Who::Agent(a1), &["goal", "show"])["goal"]["id"]
        .as_str()
        .expect("a goal")
        .to_string();
    let before = lab.journal_text();
    let db = lab.db.as_ref().expect("a database");
    // An agent's login, even with the owner's key: the database itself refuses.
    let replace = ["start-goal", "--goal-text", "The next goal", "--replace"];
    let e = lab.fails(Who::AgentWithKey(a1), &replace, "denied");
    assert!(
        e["message"]
            .as_str()
            .unwrap_or("")
            .contains("database refused"),
        "{e}"
    );
    lab.fails(Who::Agent(a1), &replace, "denied");
    assert_eq!(lab.journal_text(), before, "nothing journaled");
    assert_eq!(db.sql("SELECT count(*) FROM loopx.history").trim(), "0");
    // The owner's login: one transaction.
    let v = lab.ok(Who::Owner, &replace);
    let kept = format!("database:history/{old}");
    assert_eq!(v["replaced"], kept.as_str(), "{v}");
    let new = v["goal"]["id"].as_str().expect("the new goal").to_string();
    let journal = lab.journal();
    assert_eq!(
        journal.len(),
        1,
        "the new journal starts again: {journal:?}"
    );
    assert_eq!(
        (&journal[0]["seq"], &journal[0]["action"]),
        (&Value::from(1), &Value::from("goal.start"))
    );
    assert_eq!(journal[0]["prev"], "0".repeat(64));
    assert_eq!(journal[0]["target"], new.as_str());
    let s = lab.ok(Who::Agent(a1), &["status"]);
    assert_eq!(s["goal"]["id"], new.as_str(), "{s}");
    // The agent goes on in the new goal, as the same login.
    let t = todo_id(&lab.ok(Who::Owner, &["todo", "add", "First of the new goal"]));
    let v = lab.ok(Who::Agent(a1), &["todo", "claim"]);
    assert_eq!(
        (v["todo"]["id"].as_str(), &v["todo"]["fence"]),
        (Some(t.as_str()), &Value::from(1))
    );
    lab.ok(Who::Owner, &["log", "--verify"]);
    // The export holds the old goal as history/GOAL-ID/, its journal ending in goal.replace.
    let one = TempDir::new("pgc-replace-1");
    db.export(&lab.p, &one.path);
    let t1 = tree(&one.path);
    let h = |rel: &str| format!("history/{old}/{rel}");
    let old_journal = text(&t1, &h("journal.jsonl"));
    assert!(
        old_journal.starts_with(&before),
        "the old lines, byte for byte"
    );
    let (broken, torn) = loopx::store::journal::verify(old_journal.as_bytes());
    assert!(broken.is_none() && !torn, "the old chain holds");
    let last = lines(&old_journal).pop().expect("a last line");
    assert_eq!(
        (&last["action"], &last["target"]),
        (&Value::from("goal.replace"), &Value::from(old.as_str()))
    );
    assert_eq!(last["data"]["moved_to"], kept.as_str());
    assert_eq!(
        last["sig"].as_str().map(str::len),
        Some(128),
        "signed by the owner: {last}"
    );
    for rel in ["loopx.toml", "quota.toml", "owner.seal", "owner.proofs"] {
        assert!(t1.contains_key(&h(rel)), "{rel} kept: {:?}", t1.keys());
    }
    let x = &lab.todos[0];
    assert!(text(&t1, &h(&format!("evidence/{x}.jsonl"))).contains("proof one"));
    assert!(text(&t1, &h(&format!("gates/{gate}.toml"))).contains("approved"));
    assert!(
        text(&t1, &h("quota.toml")).contains(a1),
        "the spend is kept"
    );
    assert!(t1.contains_key("owner.pub") && !t1.contains_key(&h("owner.pub")));
    let (code, v) = doctor(&lab, &one.path);
    assert_eq!(
        (code, &v["findings"]),
        (0, &Value::Array(Vec::new())),
        "{v}"
    );
    // Imported into a new database and exported again: the same files, history included.
    let second = Db::new(server, &lab.p);
    let v = second.import(&lab.p, &one.path);
    assert_eq!(
        v["imported"]["history"],
        t1.keys().filter(|k| k.starts_with("history/")).count(),
        "{v}"
    );
    let two = TempDir::new("pgc-replace-2");
    second.export(&lab.p, &two.path);
    assert!(
        t1 == tree(&two.path),
        "the round trip changed {:?}",
        diff(&t1, &tree(&two.path))
    );
    // A second replace keeps a second history.
    lab.ok(
        Who::Owner,
        &["start-goal", "--goal-text", "A third goal", "--replace"],
    );
    let goals = db.sql("SELECT count(DISTINCT goal) FROM loopx.history");
    assert_eq!(goals.trim(), "2");
}

/// The paths two trees disagree on.
fn diff(a: &BTreeMap<String, Vec<u8>>, b: &BTreeMap<String, Vec<u8>>) -> Vec<String> {
    let keys: std::collections::BTreeSet<&String> = a.keys().chain(b.keys()).collect();
    keys.into_iter()
        .filter(|k| a.get(*k) != b.get(*k))
        .cloned()
        .collect()
}

/// `loopx --dir DIR doctor --json`, where the owner's key is.
fn doctor(lab: &Lab, dir: &Path) -> (i32, Value) {
    let d = dir.to_str().expect("UTF-8");
    let r = run_cmd(&mut lab.cmd_on(Who::Owner, None, &["--dir", d, "doctor"]));
    (r.code, parse_json(&r, "doctor"))
}

#[test]
fn store_migrate_upgrades_a_version_1_database_in_place() {
    let Some(server) = pg::server_or_skip() else {
        return;
    };
    let p = Project::new("pgc-v1");
    let t = p.add("Kept through the upgrade", &[]);
    let db = Db::version_1(server);
    assert_eq!(
        db.sql("SELECT value FROM loopx.meta WHERE key = 'schema_version'")
            .trim(),
        "1"
    );
    db.import(&p, p.root());
    std::fs::rename(p.lx(""), p.root().join("imported.loopx")).expect("move .loopx");
    let owner = |args: &[&str]| {
        let mut a = vec!["--json", "--store", db.owner.as_str()];
        a.extend_from_slice(args);
        let r = run_cmd(&mut p.cmd(&a));
        (r.code, parse_json(&r, &args.join(" ")))
    };
    // Version 1 works as it did, but has nowhere to keep a replaced goal.
    let (code, v) = owner(&["todo", "show", &t]);
    assert_eq!(code, 0, "{v}");
    let (code, v) = owner(&["--agent", "lead", "todo", "claim"]);
    assert_eq!(
        (code, &v["todo"]["id"]),
        (0, &Value::from(t.as_str())),
        "{v}"
    );
    let journal = db.sql("SELECT line FROM loopx.journal ORDER BY seq");
    let (code, v) = owner(&["start-goal", "--goal-text", "Next", "--replace"]);
    assert_eq!(
        (code, &v["error"]["code"]),
        (6, &Value::from("invalid_state")),
        "{v}"
    );
    assert!(
        v["error"]["hint"]
            .as_str()
            .unwrap_or("")
            .contains("store migrate"),
        "{v}"
    );
    assert_eq!(
        db.sql("SELECT line FROM loopx.journal ORDER BY seq"),
        journal
    );
    // The administrator upgrades it in place.
    let admin = |args: &[&str]| {
        let mut a = vec!["--json", "--store", db.admin.as_str()];
        a.extend_from_slice(args);
        let r = run_cmd(&mut p.cmd(&a));
        (r.code, parse_json(&r, &args.join(" ")))
    };
    let (code, v) = admin(&["store", "migrate", "--roles", &db.name]);
    assert_eq!(
        (code, &v["migrated"]["from"], &v["migrated"]["to"]),
        (0, &Value::from(1), &Value::from(3)),
        "{v}"
    );
    let (code, v) = admin(&["store", "migrate", "--roles", &db.name]);
    assert_eq!((code, &v["migrated"]["from"]), (0, &Value::from(3)), "{v}");
    assert_eq!(
        db.sql("SELECT line FROM loopx.journal ORDER BY seq"),
        journal,
        "the journal is kept"
    );
    let (code, v) = owner(&["todo", "show", &t]);
    assert_eq!(
        (code, &v["todo"]["title"]),
        (0, &Value::from("Kept through the upgrade")),
        "{v}"
    );
    let (code, v) = owner(&["doctor"]);
    assert_eq!(
        (code, &v["findings"]),
        (0, &Value::Array(Vec::new())),
        "{v}"
    );
    let (code, v) = owner(&["start-goal", "--goal-text", "Next", "--replace"]);
    assert_eq!(code, 0, "{v}");
    let kept = db.sql("SELECT path FROM loopx.history ORDER BY path");
    assert!(
        kept.lines().any(|l| l == format!("todos/{t}.toml")),
        "{kept}"
    );
}

#[test]
fn a_client_that_read_the_old_goal_follows_the_new_one() {
    use loopx::kernel::id::Kind;
    use loopx::kernel::ops::{NewTodo, add_todo};
    use loopx::kernel::{Ts, id};
    use loopx::store::{Store, worth_retry};
    let Some(lab) = Lab::new(Backend::Db, "pgc-follow", 1, 3) else {
        return;
    };
    let a1 = lab.agent(1);
    let url = lab.login(Who::Agent(a1)).expect("a login");
    let store = loopx::store::pg::PgStore::new(&url, loopx::store::Env::default()).unwrap();
    let old = store.load().expect("the old goal");
    assert_eq!(old.todos.len(), 3);
    let head = lab.journal().len();
    // A change decided on the old goal, committed once the goal was replaced: refused, to be
    // decided again (nothing of the old goal lands in the new one).
    let fresh = store.fresh_id(Kind::Todo).unwrap();
    let new = NewTodo::new(fresh, "Decided on the old goal");
    let tx = store.begin().expect("a transaction");
    let (change, _) = add_todo(tx.snapshot(), a1, Ts::now(), new).expect("a change");
    let replace = ["start-goal", "--goal-text", "Next", "--replace"];
    let v = lab.ok(Who::Owner, &replace);
    let e = tx.commit(change).expect_err("a stale commit");
    assert!(worth_retry(&e), "{e:?}");
    // The new journal grows past where the client read the old one.
    let added: Vec<String> = (0..=head)
        .map(|i| todo_id(&lab.ok(Who::Owner, &["todo", "add", &format!("new {i}")])))
        .collect();
    let snap = store.load().expect("the new goal");
    assert_eq!(
        snap.config.goal.id,
        v["goal"]["id"].as_str().expect("an id")
    );
    let ids: Vec<String> = snap.todos.keys().cloned().collect();
    assert_eq!(ids.len(), added.len(), "only the new goal's todos: {ids:?}");
    assert!(
        ids.iter()
            .all(|t| added.contains(t) && id::is_full_id(Kind::Todo, t))
    );
}

#[test]
fn a_file_project_with_history_goes_through_a_database_unchanged() {
    let Some(server) = pg::server_or_skip() else {
        return;
    };
    let p = Project::new("pgc-fhist");
    p.add("Of the first goal", &[]);
    p.ok(&["start-goal", "--goal-text", "The second goal", "--replace"]);
    p.add("Of the second goal", &[]);
    let history = |t: &BTreeMap<String, Vec<u8>>| -> BTreeMap<String, Vec<u8>> {
        t.iter()
            .filter(|(k, _)| k.starts_with("history/"))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    };
    let kept = history(&tree(p.root()));
    assert!(
        kept.keys().any(|k| k.ends_with("/journal.jsonl")),
        "{:?}",
        kept.keys()
    );
    let from = p.root().to_str().expect("UTF-8");
    // A database of schema 1 has nowhere to keep them: refused, nothing written.
    let old = Db::version_1(server);
    let r = run_cmd(&mut p.cmd(&[
        "--json", "--store", &old.owner, "store", "import", "--from", from,
    ]));
    let v = parse_json(&r, "import into schema 1");
    assert_eq!(
        (r.code, &v["error"]["code"]),
        (6, &Value::from("invalid_state")),
        "{v}"
    );
    assert_eq!(old.sql("SELECT count(*) FROM loopx.journal").trim(), "0");
    let db = Db::new(server, &p);
    let v = db.import(&p, p.root());
    assert_eq!(v["imported"]["history"], kept.len(), "{v}");
    let out = TempDir::new("pgc-fhist-out");
    db.export(&p, &out.path);
    assert!(
        history(&tree(&out.path)) == kept,
        "{:?}",
        diff(&kept, &history(&tree(&out.path)))
    );
}
