//! Red-team cases on the database store: an agent's login writing rows by hand, values that
//! could break the one-round-trip commit's quoting, and claim races cut short by SIGKILL.

mod common;

use std::collections::BTreeMap;
use std::process::Stdio;

use common::backend::{Lab, Who};
use common::{parse_json, pg};
use serde_json::Value;

/// `sql` run by `url` as one transaction that is committed: (exit code, stderr).
fn commit_sql(url: &str, sql: &str) -> (i32, String) {
    let (code, _, err) = pg::psql(url, &format!("BEGIN;\n{sql};\nCOMMIT;"));
    (code, err)
}

/// The next journal line (chained) by `actor`, as SQL.
fn journal_line(actor: &str) -> String {
    pg::next_line(actor, "todo.update", "t-x")
}

/// The `seq` the next journal line gets, as SQL.
const NEXT: &str = "(SELECT max(seq) + 1 FROM loopx.journal)";

/// A pending gate opened by `agent`, written at `seq` (SQL), as an INSERT.
fn pending_gate(agent: &str, id: &str, seq: &str) -> String {
    format!(
        "INSERT INTO loopx.gates (id, body, seq) VALUES ('{id}', json_build_object('id', '{id}', \
         'question', 'q?', 'opened_by', '{agent}', 'opened_at', '2026-01-01T00:00:00.000Z', \
         'status', 'pending')::jsonb, {seq})"
    )
}

/// Asserts the database refused `sql` from `url` at its COMMIT, saying `says`.
#[track_caller]
fn refused(url: &str, sql: &str, says: &str) {
    let (code, err) = commit_sql(url, sql);
    assert_ne!(code, 0, "the database took: {sql}");
    assert!(err.contains(says), "{sql}\nexpected {says:?}, got: {err}");
}

#[test]
fn an_agents_row_without_its_journal_line_is_refused_and_stalls_no_one() {
    let Some(lab) = Lab::new(common::backend::Backend::Db, "red-seq", 2, 3) else {
        return;
    };
    let (a1, a2) = (lab.agent(1), lab.agent(2));
    let url = lab.login(Who::Agent(a1)).expect("a database lab");
    let needs = "needs its journal line";
    // A row past the journal's head would make every later commit see a change it never can
    // catch up with; one at a past seq would hide from every client's cache.
    refused(&url, &pending_gate(a1, "g-aaaaaa", "1000000000"), needs);
    refused(&url, &pending_gate(a1, "g-bbbbbb", NEXT), needs);
    refused(&url, &pending_gate(a1, "g-cccccc", "1"), needs);
    let retitle = format!(
        "UPDATE loopx.todos SET body = jsonb_set(body, '{{title}}', '\"x\"') WHERE id = '{}'",
        lab.todos[0]
    );
    refused(&url, &retitle, needs);
    // Its journal line written first by another transaction does not count.
    refused(
        &url,
        &format!(
            "{}; COMMIT; BEGIN; {}",
            journal_line(a1),
            pending_gate(a1, "g-dddddd", "(SELECT max(seq) FROM loopx.journal)")
        ),
        needs,
    );
    // With its line, in the same transaction, it is an agent's change like loopx's.
    let (code, err) = commit_sql(
        &url,
        &format!(
            "{}; {}",
            pending_gate(a1, "g-eeeeee", NEXT),
            journal_line(a1)
        ),
    );
    assert_eq!(code, 0, "{err}");
    // Nothing stalls: the other agent claims, and the owner decides the gate.
    let v = lab.ok(Who::Agent(a2), &["todo", "claim", &lab.todos[1]]);
    assert_eq!(v["todo"]["lease"]["holder"], a2, "{v}");
    lab.ok(
        Who::Owner,
        &["gate", "reject", "g-eeeeee", "--reason", "no"],
    );
    lab.ok(Who::Owner, &["log", "--verify"]);
}

#[test]
fn an_agent_cannot_drop_a_todos_fence() {
    let Some(lab) = Lab::new(common::backend::Backend::Db, "red-fence", 1, 1) else {
        return;
    };
    let a1 = lab.agent(1);
    let id = lab.todos[0].clone();
    lab.ok(Who::Agent(a1), &["todo", "claim", &id]);
    lab.ok(Who::Agent(a1), &["todo", "release", &id]);
    let url = lab.login(Who::Agent(a1)).expect("a database lab");
    // Without a fence, the next write could set any fence: a stale holder's would pass again.
    let drop = format!(
        "UPDATE loopx.todos SET body = body - 'fence', seq = {NEXT} WHERE id = '{id}'; {}",
        journal_line(a1)
    );
    refused(&url, &drop, "may not go back");
    let null = format!(
        "UPDATE loopx.todos SET body = jsonb_set(body, '{{fence}}', 'null'), seq = {NEXT} \
         WHERE id = '{id}'; {}",
        journal_line(a1)
    );
    refused(&url, &null, "may not go back");
}

#[test]
fn an_agent_writes_no_loopx_line_but_loopxs_own() {
    let Some(lab) = Lab::new(common::backend::Backend::Db, "red-actor", 1, 0) else {
        return;
    };
    let url = lab.login(Who::Agent(lab.agent(1))).expect("a database lab");
    // A line "by loopx" would speak for no one: an owner's act dressed as the system's.
    for action in [
        "gate.approve",
        "goal.complete",
        "todo.reassign",
        "todo.claim",
    ] {
        let line = pg::next_line("loopx", action, "t-x");
        refused(&url, &line, "loopx does not write");
    }
    let fail = pg::next_line("loopx", "hook.fail", "t-x");
    let (code, err) = commit_sql(&url, &fail);
    assert_eq!(code, 0, "{err}");
    lab.ok(Who::Owner, &["log", "--verify"]);
}

#[test]
fn an_agent_cannot_write_a_huge_row_or_line() {
    let Some(lab) = Lab::new(common::backend::Backend::Db, "red-big", 1, 1) else {
        return;
    };
    let url = lab.login(Who::Agent(lab.agent(1))).expect("a database lab");
    // Random text does not compress: every client would load 2 MB more on each read.
    let huge = "md5(g::text)";
    let big = format!(
        "UPDATE loopx.todos SET body = jsonb_set(body, '{{title}}', to_jsonb((SELECT \
         string_agg({huge}, '') FROM generate_series(1, 65536) g))), seq = {NEXT} \
         WHERE id = '{}'; {}",
        lab.todos[0],
        journal_line(lab.agent(1))
    );
    refused(&url, &big, "over 1048576 bytes");
    let line = journal_line(lab.agent(1)).replace(
        "'data', '{}'::json",
        &format!("'data', (SELECT string_agg({huge}, '') FROM generate_series(1, 65536) g)"),
    );
    refused(&url, &line, "over 1048576 bytes");
}

#[test]
fn an_agent_cannot_become_the_owner_or_commit_the_owners_rows_by_hand() {
    let Some(lab) = Lab::new(common::backend::Backend::Db, "red-role", 1, 1) else {
        return;
    };
    let a1 = lab.agent(1);
    let url = lab.login(Who::Agent(a1)).expect("a database lab");
    let name = &lab.db.as_ref().expect("a database lab").name;
    refused(&url, &format!("SET ROLE {name}_owner"), "permission denied");
    refused(
        &url,
        &format!("SET SESSION AUTHORIZATION {name}_o"),
        "permission denied",
    );
    // `is_owner` names pg_has_role: no schema an agent may create in can shadow it.
    let shadow = "CREATE FUNCTION public.pg_has_role(name, text, text) RETURNS boolean \
                  LANGUAGE sql AS 'SELECT true'";
    refused(&url, shadow, "permission denied for schema public");
    // loopx.commit by hand runs as the agent: the owner's rows stay the owner's. Its base is
    // the journal's head, so the optimistic checks pass and the privileges decide.
    let frag = format!(
        r#""at":"2026-01-01T00:00:00.000Z","actor":"{a1}","action":"todo.update","target":"t-x","data":{{}}"#
    );
    // A real pending gate: an update of a row that is not there would change nothing.
    let v = lab.ok(Who::Agent(a1), &["gate", "open", "Ship it?"]);
    let gate = v["gate"]["id"].as_str().expect("a gate id");
    let approve = format!(
        r#"{{"k":"gate","id":"{gate}","b":{{"id":"{gate}","question":"Ship it?","opened_by":"{a1}","opened_at":"2026-01-01T00:00:00.000Z","status":"approved"}}}}"#
    );
    let use_pending = format!(
        r#"{{"k":"gate","id":"{gate}","b":{{"id":"{gate}","question":"Ship it?","opened_by":"{a1}","opened_at":"2026-01-01T00:00:00.000Z","status":"pending","used":{{"at":"2026-01-01T00:00:00.000Z","by":"{a1}"}}}}}}"#
    );
    let only_use = "an agent only records the one use of gate";
    for (write, says) in [
        (
            r#"{"k":"doc","id":"owner.seal","b":"x"}"#.to_string(),
            "permission denied for table docs",
        ),
        (
            r#"{"k":"config","id":"","b":{}}"#.to_string(),
            "permission denied for table config",
        ),
        (approve, only_use),
        (use_pending, only_use),
    ] {
        let call = format!(
            "SELECT * FROM loopx.commit((SELECT max(seq) FROM loopx.journal), ARRAY[]::text[], \
             ARRAY[]::bigint[], false, \
             '[{write}]'::jsonb, ARRAY['{frag}']::text[])"
        );
        refused(&url, &call, says);
    }
}

/// Titles that could end a dollar-quoted literal or a JSON string early.
const NASTY: &[&str] = &[
    "$lx$ '); DROP TABLE loopx.journal; --",
    "$lx0011223344ff$ $$ $x$ \\ \\\\ \\' ''",
    "\"quoted\" `tick` {brace} [bracket] %s %1$s",
    "ctl \u{1}\u{7}\u{1b}[31m\u{7f} tab\there",
    "ünïcødé ✓ 𝄞 \u{200b}\u{feff}",
];

#[test]
fn a_shadowing_search_path_does_not_make_an_agent_the_owner() {
    let Some(lab) = Lab::new(common::backend::Backend::Db, "red-path", 1, 1) else {
        return;
    };
    let a1 = lab.agent(1);
    let url = lab.login(Who::Agent(a1)).expect("a database lab");
    let db = lab.db.as_ref().expect("a database lab");
    // A schema the agent may create in, as `public` is for everyone on PostgreSQL 14 and older.
    db.sql(&format!(
        "CREATE SCHEMA shadow; GRANT USAGE, CREATE ON SCHEMA shadow TO {a1}"
    ));
    let shadow = "CREATE FUNCTION shadow.pg_has_role(name, text, text) RETURNS boolean \
                  LANGUAGE sql AS 'SELECT true'";
    let (code, err) = commit_sql(&url, shadow);
    assert_eq!(code, 0, "{err}");
    let approved = pending_gate(a1, "g-shadow", NEXT).replace("'pending'", "'approved'");
    refused(
        &url,
        &format!("SET LOCAL search_path = shadow, pg_catalog; {approved}"),
        "only the owner decides gate",
    );
    let (code, out, err) = pg::psql(
        &url,
        "SET search_path = shadow, pg_catalog; SELECT loopx.is_owner()",
    );
    assert_eq!((code, out.trim()), (0, "f"), "{err}");
}

#[test]
fn a_spend_row_that_does_not_read_stops_no_one() {
    let Some(lab) = Lab::new(common::backend::Backend::Db, "red-spend", 2, 2) else {
        return;
    };
    let (a1, a2) = (lab.agent(1), lab.agent(2));
    let url = lab.login(Who::Agent(a1)).expect("a database lab");
    // An agent's hand-made spend row: its journal line, and a body that is not a spend.
    let bad = format!(
        "{}; INSERT INTO loopx.spends (body, seq) VALUES \
         (json_build_object('agent', '{a1}', 'slots', 'many')::jsonb, \
         (SELECT max(seq) FROM loopx.journal))",
        journal_line(a1)
    );
    let (code, err) = commit_sql(&url, &bad);
    assert_eq!(code, 0, "{err}");
    for who in [Who::Agent(a1), Who::Agent(a2), Who::Owner] {
        let v = lab.ok(who, &["status"]);
        let q = v["quarantined"].to_string();
        assert!(q.contains("spends@"), "the bad row is named: {v}");
    }
    lab.ok(Who::Agent(a2), &["quota", "should-run"]);
    let v = lab.ok(Who::Agent(a2), &["todo", "claim"]);
    assert!(v["todo"]["id"].is_string(), "{v}");
}

#[test]
fn hostile_text_travels_intact_through_the_one_round_trip_commit() {
    let Some(lab) = Lab::new(common::backend::Backend::Db, "red-quote", 1, 0) else {
        return;
    };
    let a1 = lab.agent(1);
    let mut ids = Vec::new();
    for t in NASTY {
        let v = lab.ok(Who::Agent(a1), &["todo", "add", t]);
        let id = v["todo"]["id"].as_str().expect("a todo id").to_string();
        lab.ok(Who::Agent(a1), &["todo", "claim", &id]);
        lab.ok(
            Who::Agent(a1),
            &["todo", "update", &id, "--evidence", t, "--reason", t],
        );
        ids.push(id);
    }
    for (id, t) in ids.iter().zip(NASTY) {
        let v = lab.ok(Who::Owner, &["todo", "show", id]);
        assert_eq!(v["todo"]["title"], *t, "{v}");
        let esc = serde_json::to_string(t).expect("a JSON string");
        let n = v.to_string().matches(&esc[1..esc.len() - 1]).count();
        assert!(n >= 2, "the title and the evidence, intact: {v}");
    }
    lab.ok(Who::Owner, &["log", "--verify"]);
    assert_eq!(
        lab.journal()
            .iter()
            .filter(|e| e["action"] == "todo.add")
            .count(),
        NASTY.len()
    );
}

/// One claim, spawned: its stdout piped.
fn spawn_claim(mut c: std::process::Command) -> std::process::Child {
    c.stdout(Stdio::piped()).stderr(Stdio::null());
    c.spawn().expect("spawn a claim")
}

/// What a claim that exited 0 acknowledged: (agent, todo, fence); None for any other end.
fn acked(agent: &str, k: std::process::Child) -> Option<(String, String, u64)> {
    let out = k.wait_with_output().expect("a claim ends");
    if out.status.code() != Some(0) {
        return None;
    }
    let r = common::Run {
        code: 0,
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::new(),
    };
    let t = parse_json(&r, "claim")["todo"].clone();
    Some((
        agent.to_string(),
        t["id"].as_str().expect("an id").to_string(),
        t["fence"].as_u64().expect("a fence"),
    ))
}

/// Claims by 8 agent processes, every other one killed after a varying amount of work.
fn killed_round(lab: &Lab, round: u64) -> Vec<(String, String, u64)> {
    let kids: Vec<_> = lab
        .agents
        .iter()
        .map(|a| {
            (
                a.clone(),
                spawn_claim(lab.cmd(Who::Agent(a), &["todo", "claim"])),
            )
        })
        .collect();
    let mut got = Vec::new();
    for (i, (a, mut k)) in kids.into_iter().enumerate() {
        if (i as u64 + round).is_multiple_of(2) {
            let spins = (round * 7919 + i as u64 * 104_729) % 40_000_000;
            let mut x = 0u64;
            for n in 0..spins {
                x = x.wrapping_add(n ^ (x >> 3));
            }
            std::hint::black_box(x);
            let _ = k.kill();
        }
        got.extend(acked(&a, k));
    }
    got
}

/// Waits until no other session is connected to the database: a killed claimer's last message
/// may still be committing on the server, after the rows and before the journal were read.
fn settled(admin: &str) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let (code, out, err) = pg::psql(
            admin,
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() \
             AND pid <> pg_backend_pid()",
        );
        assert_eq!(code, 0, "{err}");
        if out.trim() == "0" || std::time::Instant::now() > deadline {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// On the database at `admin` (a superuser's URL): no todo claimed twice, every acknowledged
/// claim journaled by its claimer and held in its row under its fence, every claim line held.
fn no_double_no_lost(admin: &str, acked: &[(String, String, u64)]) {
    settled(admin);
    let (code, out, err) = pg::psql(
        admin,
        "SELECT id, body->'lease' FROM loopx.todos ORDER BY id",
    );
    assert_eq!(code, 0, "{err}");
    let rows: BTreeMap<String, Value> = out
        .lines()
        .filter_map(|l| l.split_once('|'))
        .map(|(i, b)| {
            (
                i.to_string(),
                serde_json::from_str(b).unwrap_or(Value::Null),
            )
        })
        .collect();
    let (code, out, err) = pg::psql(admin, "SELECT line FROM loopx.journal ORDER BY seq");
    assert_eq!(code, 0, "{err}");
    let claims: Vec<(String, String)> = out
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).expect("a journal line is JSON"))
        .filter(|e| e["action"] == "todo.claim")
        .map(|e| {
            let s = |k: &str| e[k].as_str().unwrap_or("").to_string();
            (s("actor"), s("target"))
        })
        .collect();
    let mut per_todo: BTreeMap<&str, usize> = BTreeMap::new();
    for (_, id) in &claims {
        *per_todo.entry(id).or_default() += 1;
    }
    assert!(
        per_todo.values().all(|n| *n == 1),
        "a todo claimed twice: {claims:?}"
    );
    for (a, id, fence) in acked {
        let pair = (a.clone(), id.clone());
        assert!(
            claims.contains(&pair),
            "{a} {id} acknowledged, not journaled"
        );
        assert_eq!(rows[id]["holder"], a.as_str(), "{id}: {}", rows[id]);
        assert_eq!(rows[id]["fence"], *fence, "{id}: {}", rows[id]);
    }
    let held = rows.values().filter(|l| l.is_object()).count();
    assert_eq!(
        held,
        claims.len(),
        "every journaled claim holds its row: {rows:?}"
    );
}

#[test]
fn claims_killed_mid_flight_leave_no_double_holder_and_lose_no_acknowledged_claim() {
    let Some(lab) = Lab::new(common::backend::Backend::Db, "red-kill", 8, 60) else {
        return;
    };
    let mut got = Vec::new();
    for round in 0..6 {
        got.extend(killed_round(&lab, round));
    }
    let db = lab.db.as_ref().expect("a database lab");
    no_double_no_lost(&db.admin, &got);
    let v = lab.ok(Who::Owner, &["log", "--verify"]);
    assert_eq!(v["torn"], false, "{v}");
    lab.ok(Who::Owner, &["doctor"]);
}

#[test]
fn claims_across_a_server_stop_lose_nothing_acknowledged() {
    let Some(server) = pg::private_or_skip("red-halt") else {
        return;
    };
    let url = pg::fresh_db(&server);
    let p = pg::project_in("red-halt", &url);
    for i in 0..24 {
        pg::ok(
            p.lx(&["--json", "todo", "add", &format!("t{i}")]),
            "todo add",
        );
    }
    let mut got = Vec::new();
    for round in 0..3 {
        let kids: Vec<_> = (0..8)
            .map(|i| {
                let a = format!("r{i}");
                let k = spawn_claim(p.cmd(&["--json", "--agent", &a, "todo", "claim"]));
                (a, k)
            })
            .collect();
        if round < 2 {
            server.halt();
            server.resume();
        }
        got.extend(kids.into_iter().filter_map(|(a, k)| acked(&a, k)));
    }
    no_double_no_lost(&url, &got);
    let v = pg::ok(p.lx(&["--json", "log", "--verify"]), "log --verify");
    assert_eq!(v["torn"], false, "{v}");
    pg::ok(p.lx(&["--json", "doctor"]), "doctor");
}
