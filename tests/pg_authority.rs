//! The database itself refuses an agent's login the owner's acts and other agents' work: real
//! SQL through psql, and loopx with the owner's key in an agent's hands; the owner's login may.

mod common;

use common::backend::{Backend, Lab, Who};
use common::pg;
use serde_json::Value;

/// A project on a database: a2 holds `leased`, a1 holds `held`, `free` is free; `decided` is
/// approved by the owner and `pending` waits.
struct Scene {
    lab: Lab,
    leased: String,
    held: String,
    free: String,
    decided: String,
    pending: String,
}

impl Scene {
    fn new(tag: &str) -> Option<Scene> {
        let lab = Lab::new(Backend::Db, tag, 2, 3)?;
        let (a1, a2) = (lab.agent(1), lab.agent(2));
        let [leased, held, free] = [0, 1, 2].map(|i| lab.todos[i].clone());
        lab.ok(Who::Agent(a2), &["todo", "claim", &leased]);
        lab.ok(Who::Agent(a1), &["todo", "claim", &held]);
        let gate = |q: &str| {
            let v = lab.ok(Who::Agent(a1), &["gate", "open", q]);
            v["gate"]["id"].as_str().expect("a gate id").to_string()
        };
        let (decided, pending) = (gate("Ship it?"), gate("Merge it?"));
        lab.ok(Who::Owner, &["gate", "approve", &decided]);
        Some(Scene {
            lab,
            leased,
            held,
            free,
            decided,
            pending,
        })
    }

    fn a1(&self) -> &str {
        self.lab.agent(1)
    }

    fn a2(&self) -> &str {
        self.lab.agent(2)
    }

    /// The login URL of `who`.
    fn url(&self, who: Who<'_>) -> String {
        self.lab.login(who).expect("a database lab")
    }
}

/// `sql` run by `url` in a transaction that is rolled back: (exit code, stdout, stderr).
fn try_sql(url: &str, sql: &str) -> (i32, String, String) {
    pg::psql(url, &format!("BEGIN;\n{sql};\nROLLBACK;"))
}

/// Asserts the database refuses `sql` to `url`, saying `says`.
#[track_caller]
fn refused(url: &str, sql: &str, says: &str) {
    let (code, out, err) = try_sql(url, sql);
    assert_ne!(code, 0, "the database allowed: {sql}\n{out}");
    assert!(err.contains(says), "{sql}\nexpected {says:?}, got: {err}");
}

/// Asserts the database takes `sql` from `url` (then rolls it back): the refusals are the rules'.
#[track_caller]
fn allowed(url: &str, sql: &str) {
    let (code, _, err) = try_sql(url, sql);
    assert_eq!(code, 0, "the database refused: {sql}\n{err}");
}

/// SQL setting `path` of todo `id`'s body to the JSON `value`.
fn set_todo(id: &str, path: &str, value: &str) -> String {
    format!(
        "UPDATE loopx.todos SET body = jsonb_set(body, '{{{path}}}', '{value}') WHERE id = '{id}'"
    )
}

/// A lease for `holder`, an hour long, as JSON.
fn lease_for(holder: &str) -> String {
    format!(
        r#"{{"holder": "{holder}", "fence": 9, "acquired_at": "2026-01-01T00:00:00.000Z", "expires_at": "2999-01-01T00:00:00.000Z"}}"#
    )
}

/// SQL appending the next journal line (chained) with `actor`.
fn journal_line(actor: &str) -> String {
    pg::next_line(actor, "gate.approve", "g-aaaaaa")
}

const DENIED: &str = "permission denied for table";

#[test]
fn an_agent_login_cannot_touch_the_owners_facts() {
    let Some(s) = Scene::new("pg-auth-owner") else {
        return;
    };
    let a1 = s.url(Who::Agent(s.a1()));
    for path in ["goal,status", "quota,slots", "hooks"] {
        let value = if path == "hooks" {
            r#"{"pre_claim": "true"}"#
        } else {
            r#""x""#
        };
        refused(
            &a1,
            &format!("UPDATE loopx.config SET body = jsonb_set(body, '{{{path}}}', '{value}')"),
            &format!("{DENIED} config"),
        );
    }
    refused(&a1, "DELETE FROM loopx.config", &format!("{DENIED} config"));
    // Gates: a decided one may not be added, and none changed.
    let copy = |id: &str, status: &str| {
        format!(
            "INSERT INTO loopx.gates (id, body, seq) SELECT 'g-zzzzzz', jsonb_set(jsonb_set(body, \
             '{{id}}', '\"g-zzzzzz\"'), '{{status}}', '\"{status}\"'), seq FROM loopx.gates \
             WHERE id = '{id}'"
        )
    };
    refused(
        &a1,
        &copy(&s.decided, "approved"),
        "only the owner decides gate g-zzzzzz",
    );
    refused(
        &a1,
        &copy(&s.pending, "rejected"),
        "only the owner decides gate g-zzzzzz",
    );
    refused(
        &a1,
        &copy(&s.decided, "pending"),
        "only the owner decides gate g-zzzzzz",
    );
    allowed(&a1, &copy(&s.pending, "pending"));
    for (id, status) in [(&s.pending, "approved"), (&s.decided, "pending")] {
        let sql = format!(
            "UPDATE loopx.gates SET body = jsonb_set(body, '{{status}}', '\"{status}\"') WHERE id = '{id}'"
        );
        // Schema 3 lets an agent update a gate only to add its own `used`: the trigger says so.
        refused(
            &a1,
            &sql,
            &format!("an agent only records the one use of gate {id}"),
        );
    }
    // The owner's documents.
    refused(
        &a1,
        "UPDATE loopx.docs SET body = body || 'x' WHERE name = 'owner.seal'",
        &format!("{DENIED} docs"),
    );
    refused(
        &a1,
        "INSERT INTO loopx.docs (name, body, seq) VALUES ('owner.proofs', '', 1)",
        &format!("{DENIED} docs"),
    );
    refused(&a1, "DELETE FROM loopx.docs", &format!("{DENIED} docs"));
    // The owner's login may do each of these.
    let owner = s.url(Who::Owner);
    allowed(
        &owner,
        "UPDATE loopx.config SET body = jsonb_set(body, '{goal,status}', '\"paused\"')",
    );
    allowed(&owner, &copy(&s.pending, "approved"));
    allowed(
        &owner,
        "UPDATE loopx.docs SET body = body || 'x' WHERE name = 'owner.seal'",
    );
}

#[test]
fn nobody_changes_the_journal_and_an_agent_writes_only_its_own_lines() {
    let Some(s) = Scene::new("pg-auth-journal") else {
        return;
    };
    let (a1, owner) = (s.url(Who::Agent(s.a1())), s.url(Who::Owner));
    for url in [&a1, &owner] {
        refused(
            url,
            "UPDATE loopx.journal SET line = line WHERE seq = 1",
            &format!("{DENIED} journal"),
        );
        refused(
            url,
            "DELETE FROM loopx.journal WHERE seq = 1",
            &format!("{DENIED} journal"),
        );
        refused(url, "TRUNCATE loopx.journal", &format!("{DENIED} journal"));
        refused(
            url,
            "UPDATE loopx.evidence SET body = body",
            &format!("{DENIED} evidence"),
        );
        refused(
            url,
            "DELETE FROM loopx.evidence",
            &format!("{DENIED} evidence"),
        );
    }
    refused(
        &a1,
        &journal_line("owner"),
        "only the owner writes the owner's journal lines",
    );
    refused(
        &a1,
        &journal_line("Owner"),
        "only the owner writes the owner's journal lines",
    );
    let other = format!("you are connected as {}, not {}", s.a1(), s.a2());
    refused(&a1, &journal_line(s.a2()), &other);
    allowed(&a1, &journal_line(s.a1()));
    allowed(&owner, &journal_line("owner"));
    // A line out of the chain is refused to anyone.
    let bad = "INSERT INTO loopx.journal (seq, line) VALUES (1000, '{\"seq\": 1000}')";
    refused(&owner, bad, "does not follow");
}

#[test]
fn an_agent_login_cannot_take_or_move_another_agents_work() {
    let Some(s) = Scene::new("pg-auth-lease") else {
        return;
    };
    let (a1, a2) = (s.a1(), s.a2());
    let url = s.url(Who::Agent(a1));
    let held_by_a2 = format!("the lease on {} is held by {a2}", s.leased);
    // a2's live lease: not taken, dropped, finished, archived or re-fenced by a1.
    refused(
        &url,
        &set_todo(&s.leased, "lease", &lease_for(a1)),
        &held_by_a2,
    );
    refused(
        &url,
        &format!(
            "UPDATE loopx.todos SET body = body - 'lease' WHERE id = '{}'",
            s.leased
        ),
        &held_by_a2,
    );
    refused(
        &url,
        &set_todo(&s.leased, "status", "\"done\""),
        &held_by_a2,
    );
    refused(&url, &set_todo(&s.leased, "fence", "99"), &held_by_a2);
    let archive = format!(
        "UPDATE loopx.todos SET archived = true WHERE id = '{}'",
        s.leased
    );
    refused(&url, &archive, &held_by_a2);
    // A lease is given by the owner only: not to a2 on a free todo, nor on one a1 holds.
    let give = format!("only the owner gives {a2} a lease on");
    refused(&url, &set_todo(&s.free, "lease", &lease_for(a2)), &give);
    refused(&url, &set_todo(&s.held, "lease", &lease_for(a2)), &give);
    allowed(&url, &set_todo(&s.free, "lease", &lease_for(a1)));
    // Fences never go back; todos are never deleted.
    let lower = format!(
        "UPDATE loopx.todos SET body = jsonb_set(body, '{{fence}}', to_jsonb((body->>'fence')::int - 1)) \
         WHERE id = '{}'",
        s.held
    );
    refused(
        &url,
        &lower,
        &format!("the fence of {} may not go back", s.held),
    );
    allowed(&url, &set_todo(&s.held, "fence", "7"));
    refused(
        &url,
        &format!("DELETE FROM loopx.todos WHERE id = '{}'", s.free),
        &format!("{DENIED} todos"),
    );
    // Spends and declarations are one's own.
    let spend = |agent: &str| {
        format!(
            "INSERT INTO loopx.spends (body, seq) VALUES ('{{\"at\": \"2026-01-01T00:00:00.000Z\", \
             \"agent\": \"{agent}\", \"slots\": 1}}', 1)"
        )
    };
    let not_a2 = format!("you are connected as {a1}, not {a2}");
    refused(&url, &spend(a2), &not_a2);
    allowed(&url, &spend(a1));
    let declare = |agent: &str| {
        format!(
            "INSERT INTO loopx.agents (id, body, seq) VALUES ('{agent}', '{{\"id\": \"{agent}\"}}', 1) \
                 ON CONFLICT (id) DO UPDATE SET body = EXCLUDED.body"
        )
    };
    refused(&url, &declare(a2), &not_a2);
    allowed(&url, &declare(a1));
    // The owner's login may move anyone's lease.
    allowed(
        &s.url(Who::Owner),
        &set_todo(&s.leased, "lease", &lease_for(a1)),
    );
}

/// The journal's length, for "nothing was written".
fn lines(lab: &Lab) -> usize {
    lab.journal().len()
}

#[test]
fn the_owners_key_in_an_agents_hands_does_not_make_it_the_owner() {
    let Some(s) = Scene::new("pg-auth-key") else {
        return;
    };
    let (lab, a1, a2) = (&s.lab, s.a1(), s.a2());
    let before = lines(lab);
    let acts: [&[&str]; 6] = [
        &["gate", "approve", &s.pending],
        &["gate", "reject", &s.pending, "--reason", "no"],
        &["goal", "pause"],
        &["quota", "set", "--slots", "3"],
        &["todo", "reassign", &s.leased, "--to", a1],
        &["todo", "release", &s.leased, "--owner"],
    ];
    for args in acts {
        let e = lab.fails(Who::AgentWithKey(a1), args, "denied");
        let msg = e["message"].as_str().unwrap_or("");
        assert!(msg.starts_with("the database refused"), "{args:?}: {e}");
    }
    // An agent's login is that agent only.
    let mut c = lab.cmd_on(
        Who::Agent(a2),
        lab.login(Who::Agent(a1)).as_deref(),
        &["todo", "claim"],
    );
    let r = common::run_cmd(&mut c);
    let v = common::parse_json(&r, "claim as another");
    assert_eq!(
        (r.code, &v["error"]["code"]),
        (7, &Value::from("denied")),
        "{v}"
    );
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap_or("")
            .contains("the database refused"),
        "{v}"
    );
    assert_eq!(lines(lab), before, "nothing journaled");
    let g = lab.ok(Who::Owner, &["gate", "list"]);
    let gate = g["gates"]
        .as_array()
        .expect("gates")
        .iter()
        .find(|x| x["id"] == s.pending.as_str());
    assert_eq!(
        gate.map(|x| &x["status"]),
        Some(&Value::from("pending")),
        "{g}"
    );
    // The owner's login, with the key, does each.
    lab.ok(
        Who::Owner,
        &["gate", "approve", &s.pending, "--reason", "fine"],
    );
    lab.ok(Who::Owner, &["goal", "pause"]);
    lab.ok(Who::Owner, &["goal", "resume"]);
    let q = lab.ok(Who::Owner, &["quota", "set", "--slots", "3"]);
    assert_eq!(
        lab.ok(Who::Agent(a1), &["quota", "show"])["quota"]["limit"],
        3,
        "{q}"
    );
    let v = lab.ok(Who::Owner, &["todo", "reassign", &s.leased, "--to", a1]);
    assert_eq!(v["todo"]["lease"]["holder"], a1, "{v}");
    let v = lab.ok(Who::Owner, &["todo", "release", &s.leased, "--owner"]);
    assert!(v["todo"]["lease"].is_null(), "{v}");
    let journal = lab.journal();
    let owners = journal[before..]
        .iter()
        .filter(|e| e["actor"] == "owner")
        .count();
    assert_eq!(owners, 6, "six owner lines, each signed");
    assert!(
        journal[before..].iter().all(|e| e["sig"].is_string()),
        "signed lines"
    );
    lab.ok(Who::Agent(a1), &["log", "--verify"]);
}

#[test]
fn a_holder_hands_its_lease_on_and_the_receiver_finishes() {
    let Some(s) = Scene::new("pg-auth-handoff") else {
        return;
    };
    let (lab, a1, a2) = (&s.lab, s.a1(), s.a2());
    // In SQL, as an upsert (a commit may write a todo so): only with a new fence.
    let url = s.url(Who::Agent(a1));
    let pass = |bump: i32| {
        let lease = lease_for(a2).replace("\"fence\": 9", &format!("\"handoff_from\": \"{a1}\""));
        format!(
            "INSERT INTO loopx.todos (id, body, seq) SELECT id, jsonb_set(jsonb_set(body, '{{lease}}', \
             '{lease}'), '{{fence}}', to_jsonb((body->>'fence')::int + {bump})), seq FROM loopx.todos \
             WHERE id = '{}' ON CONFLICT (id) DO UPDATE SET body = EXCLUDED.body",
            s.held
        )
    };
    refused(
        &url,
        &pass(0),
        &format!("only the owner gives {a2} a lease"),
    );
    allowed(&url, &pass(1));
    let v = lab.ok(
        Who::Agent(a1),
        &["todo", "handoff", &s.held, "--to", a2, "--note", "yours"],
    );
    assert_eq!(v["todo"]["lease"]["holder"], a2, "{v}");
    let fence = v["todo"]["fence"].as_u64().expect("a fence").to_string();
    // The giver can no longer move it; the receiver can.
    refused(
        &url,
        &set_todo(&s.held, "status", "\"done\""),
        &format!("is held by {a2}"),
    );
    let done = [
        "todo",
        "update",
        &s.held,
        "--fence",
        &fence,
        "--evidence",
        "ok",
        "--status",
        "done",
    ];
    lab.ok(Who::Agent(a2), &done);
    lab.ok(Who::Owner, &["log", "--verify"]);
}

#[test]
fn a_handoff_on_the_database_obeys_the_receivers_routing() {
    let Some(lab) = Lab::new(Backend::Db, "pg-handoff-route", 2, 1) else {
        return;
    };
    let (a1, a2, t) = (lab.agent(1), lab.agent(2), lab.todos[0].clone());
    // The review is added while t is open: the finisher is excluded when t is done.
    let v = lab.ok(
        Who::Agent(a2),
        &["todo", "add", "review it", "--reviews", &t],
    );
    let review = v["todo"]["id"].as_str().expect("an id").to_string();
    lab.ok(Who::Agent(a1), &["todo", "claim", &t]);
    lab.ok(Who::Agent(a1), &["todo", "update", &t, "--status", "done"]);
    lab.ok(Who::Agent(a2), &["todo", "claim", &review]);
    let v = lab.fails(
        Who::Agent(a2),
        &["todo", "handoff", &review, "--to", a1],
        "not_ready",
    );
    assert!(v.to_string().contains("separation of duties"), "{v}");
    let shown = lab.ok(Who::Agent(a2), &["todo", "show", &review]);
    assert_eq!(shown["todo"]["lease"]["holder"], a2, "{shown}");
}
