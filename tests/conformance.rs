//! One suite for both stores: every case runs on the files and on a database (agents logged in as
//! themselves, the owner as the owner's login), with the same assertions.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::Duration;

use common::backend::{Backend, Db, Lab, Who};
use common::{TempDir, parse_json, pg, run_cmd};
use serde_json::Value;

/// Each case as two tests: `CASE::files` and `CASE::db`.
macro_rules! on_both {
    ($($case:ident),* $(,)?) => {$(
        mod $case {
            #[test]
            fn files() {
                super::$case(super::Backend::Files)
            }
            #[test]
            fn db() {
                super::$case(super::Backend::Db)
            }
        }
    )*};
}

on_both!(
    claim_race,
    lease_expiry,
    owner_signatures,
    round_trip,
    refusals,
    monitor_checks,
    proven_done,
    archived_references,
    breaker_parks,
    action_gate_once,
    reservation_race
);

/// Todos and racing agents in the claim race.
const RACE_TODOS: usize = 40;
const RACERS: usize = 8;

/// A todo's id and fence, from a `todo` answer.
fn id_fence(v: &Value) -> (String, u64) {
    let t = &v["todo"];
    let id = t["id"].as_str().expect("a todo id").to_string();
    (id, t["fence"].as_u64().expect("a fence"))
}

/// Agent `agent` claims until nothing is ready (exit 3); the (id, fence) of each claim.
fn claim_until_none(lab: &Lab, agent: &str) -> Vec<(String, u64)> {
    let mut got = Vec::new();
    loop {
        let (code, v) = lab.json(Who::Agent(agent), &["todo", "claim"]);
        match code {
            0 => {
                assert_eq!(v["todo"]["lease"]["holder"], agent, "{v}");
                got.push(id_fence(&v));
            }
            3 => return got,
            _ => panic!("{agent}: claim exited {code} on {:?}: {v}", lab.backend),
        }
        assert!(
            got.len() <= RACE_TODOS,
            "{agent} claimed more todos than there are"
        );
    }
}

/// 8 agent processes claim 40 todos: each claimed once, none lost, 40 claim lines, chain intact.
fn claim_race(b: Backend) {
    let Some(lab) = Lab::new(b, "conf-race", RACERS, RACE_TODOS) else {
        return;
    };
    let claims: Vec<(String, String, u64)> = std::thread::scope(|s| {
        let racers: Vec<_> = lab
            .agents
            .iter()
            .map(|a| {
                let lab = &lab;
                s.spawn(move || {
                    let got = claim_until_none(lab, a);
                    got.into_iter()
                        .map(|(i, f)| (a.clone(), i, f))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        racers
            .into_iter()
            .flat_map(|h| h.join().expect("a racer"))
            .collect()
    });
    let ids: BTreeSet<&String> = claims.iter().map(|(_, id, _)| id).collect();
    let made: BTreeSet<&String> = lab.todos.iter().collect();
    assert_eq!(claims.len(), RACE_TODOS, "one claim per todo: {claims:?}");
    assert_eq!(ids, made, "every todo claimed, none twice: {claims:?}");
    assert!(
        claims.iter().all(|(_, _, f)| *f == 1),
        "first fences: {claims:?}"
    );
    let journaled: Vec<(String, String)> = lab
        .journal()
        .iter()
        .filter(|e| e["action"] == "todo.claim")
        .map(|e| {
            (
                e["actor"].as_str().unwrap_or("").into(),
                e["target"].as_str().unwrap_or("").into(),
            )
        })
        .collect();
    let mut want: Vec<(String, String)> = claims
        .iter()
        .map(|(a, i, _)| (a.clone(), i.clone()))
        .collect();
    let mut have = journaled.clone();
    want.sort();
    have.sort();
    assert_eq!(
        have, want,
        "exactly one claim line per claim, by its claimer"
    );
    let v = lab.ok(Who::Owner, &["log", "--verify"]);
    assert_eq!(v["torn"], false, "{v}");
    let listed = lab.ok(Who::Owner, &["log", "--limit", "1000"]);
    let n = listed["events"].as_array().map_or(0, Vec::len);
    assert_eq!(
        n,
        lab.journal().len(),
        "log shows the whole journal: {listed}"
    );
}

/// Sleeps until the wall clock is past `at` (an RFC 3339 time), by a little.
fn wait_past(at: &str) {
    let at: jiff::Timestamp = at.parse().expect("an RFC 3339 time");
    let after = at + jiff::SignedDuration::from_millis(200);
    while jiff::Timestamp::now() <= after {
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// An expired lease is taken over with the next fence; the old holder's fence is then stale.
fn lease_expiry(b: Backend) {
    let Some(lab) = Lab::new(b, "conf-lease", 2, 2) else {
        return;
    };
    let (a1, a2) = (lab.agent(1), lab.agent(2));
    let (x, y) = (&lab.todos[0], &lab.todos[1]);
    // A live lease is another's: refused without waiting on anything.
    lab.ok(Who::Agent(a1), &["todo", "claim", y]);
    let e = lab.fails(Who::Agent(a2), &["todo", "claim", y], "lease_conflict");
    assert!(e["message"].as_str().unwrap_or("").contains(a1), "{e}");
    let v = lab.ok(Who::Agent(a1), &["todo", "claim", x, "--ttl", "2s"]);
    let (_, old) = id_fence(&v);
    assert_eq!(v["todo"]["lease"]["holder"], a1, "{v}");
    wait_past(
        v["todo"]["lease"]["expires_at"]
            .as_str()
            .expect("expires_at"),
    );
    let v = lab.ok(Who::Agent(a2), &["todo", "claim", x]);
    assert_eq!(id_fence(&v), (x.clone(), old + 1), "{v}");
    assert_eq!(v["todo"]["lease"]["holder"], a2, "{v}");
    let e = lab.fails(
        Who::Agent(a1),
        &[
            "todo",
            "update",
            x,
            "--fence",
            &old.to_string(),
            "--evidence",
            "late",
        ],
        "stale_fence",
    );
    assert_eq!(e["details"]["fence"], old + 1, "{e}");
    let next = (old + 1).to_string();
    lab.ok(
        Who::Agent(a2),
        &["todo", "update", x, "--fence", &next, "--evidence", "mine"],
    );
    let ev = lab.ok(Who::Owner, &["evidence", "list", "--todo", x]);
    let said: Vec<&str> = ev["entries"]
        .as_array()
        .expect("entries")
        .iter()
        .filter_map(|e| e["summary"].as_str())
        .collect();
    assert!(said.contains(&"mine") && !said.contains(&"late"), "{ev}");
    let taken = lab
        .journal()
        .into_iter()
        .rfind(|e| e["action"] == "todo.claim" && e["target"] == x.as_str())
        .expect("the takeover's line");
    assert_eq!(taken["data"]["reclaimed_from"]["holder"], a1, "{taken}");
    assert_eq!(taken["data"]["fence"], old + 1, "{taken}");
}

/// True when `v` is `n` lowercase hex digits.
fn is_hex(v: &Value, n: usize) -> bool {
    v.as_str()
        .is_some_and(|s| s.len() == n && s.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// An agent opens a gate; without the owner's key the approval is refused; with it, the
/// decision is signed, shown, journaled and verifies in an export.
fn owner_signatures(b: Backend) {
    let Some(lab) = Lab::new(b, "conf-sign", 1, 1) else {
        return;
    };
    let a1 = lab.agent(1);
    let v = lab.ok(Who::Agent(a1), &["gate", "open", "Ship it?"]);
    let g = v["gate"]["id"].as_str().expect("a gate id").to_string();
    assert_eq!(v["gate"]["status"], "pending", "{v}");
    let pending = |lab: &Lab| -> Vec<String> {
        let s = lab.ok(Who::Agent(a1), &["status"]);
        let list = s["pending_gates"]
            .as_array()
            .expect("pending_gates")
            .clone();
        list.iter()
            .map(|p| p["id"].as_str().unwrap_or("").to_string())
            .collect()
    };
    assert_eq!(pending(&lab), vec![g.clone()]);
    let e = lab.fails(Who::OwnerNoKey, &["gate", "approve", &g], "denied");
    assert!(
        e["message"].as_str().unwrap_or("").contains("owner key"),
        "{e}"
    );
    let lines = lab.journal().len();
    lab.ok(Who::Owner, &["gate", "approve", &g]);
    let listed = lab.ok(Who::Agent(a1), &["gate", "list"]);
    let gate = &listed["gates"][0];
    assert_eq!(
        (gate["id"].as_str(), &gate["status"]),
        (Some(g.as_str()), &Value::from("approved"))
    );
    assert_eq!(gate["decided_by"], "owner", "{gate}");
    assert!(
        is_hex(&gate["signature"], 128) && is_hex(&gate["journal_head"], 64),
        "{gate}"
    );
    assert!(pending(&lab).is_empty());
    let journal = lab.journal();
    assert_eq!(journal.len(), lines + 1, "one line for the approval");
    let last = &journal[lines];
    assert_eq!(
        (&last["action"], &last["actor"]),
        (&Value::from("gate.approve"), &Value::from("owner"))
    );
    assert!(is_hex(&last["sig"], 128), "{last}");
    lab.ok(Who::Agent(a1), &["log", "--verify"]);
    // The signature verifies anywhere: doctor on an export checks it against owner.pub.
    let out = TempDir::new("conf-sign-export");
    lab.export(&out.path);
    assert_healthy(&lab, &out.path);
    let file = out.path.join(format!(".loopx/gates/{g}.toml"));
    let text = std::fs::read_to_string(&file).expect("the exported gate");
    let sig = gate["signature"].as_str().unwrap_or("");
    let forged = format!(
        "{}{}",
        if sig.starts_with('0') { "1" } else { "0" },
        &sig[1..]
    );
    std::fs::write(&file, text.replace(sig, &forged)).expect("forge the gate");
    let (code, v) = doctor(&lab, &out.path);
    assert!(
        code != 0 && v["findings"].to_string().contains("does not verify"),
        "{v}"
    );
}

/// `loopx --dir DIR doctor --json`.
fn doctor(lab: &Lab, dir: &Path) -> (i32, Value) {
    let d = dir.to_str().expect("a UTF-8 dir");
    let mut c = lab.cmd_on(Who::Owner, None, &["--dir", d, "doctor"]);
    let r = run_cmd(&mut c);
    (r.code, parse_json(&r, "doctor"))
}

#[track_caller]
fn assert_healthy(lab: &Lab, dir: &Path) {
    let (code, v) = doctor(lab, dir);
    assert_eq!(
        (code, &v["findings"]),
        (0, &Value::Array(Vec::new())),
        "{v}"
    );
}

/// The TOML records in `dir/.loopx/sub/`, by file name, parsed.
fn records(dir: &Path, sub: &str) -> BTreeMap<String, toml::Value> {
    let mut out = BTreeMap::new();
    let Ok(rd) = std::fs::read_dir(dir.join(".loopx").join(sub)) else {
        return out;
    };
    for e in rd.flatten() {
        let text = std::fs::read_to_string(e.path()).expect("read a record");
        let v: toml::Value = toml::from_str(&text).expect("a record is TOML");
        out.insert(e.file_name().to_string_lossy().into_owned(), v);
    }
    out
}

/// Every evidence line in `dir/.loopx/evidence/`, by todo, parsed.
fn evidence(dir: &Path) -> BTreeMap<String, Vec<Value>> {
    let mut out = BTreeMap::new();
    for e in std::fs::read_dir(dir.join(".loopx/evidence"))
        .expect("evidence dir")
        .flatten()
    {
        let text = std::fs::read_to_string(e.path()).expect("read evidence");
        let lines = text
            .lines()
            .map(|l| serde_json::from_str(l).expect("evidence is JSON"));
        out.insert(
            e.file_name().to_string_lossy().into_owned(),
            lines.collect(),
        );
    }
    out
}

/// A file of `dir/.loopx/`, its bytes (empty when missing).
fn bytes(dir: &Path, name: &str) -> Vec<u8> {
    std::fs::read(dir.join(".loopx").join(name)).unwrap_or_default()
}

/// `quota.toml` of `dir`, parsed.
fn quota(dir: &Path) -> toml::Value {
    let text = String::from_utf8(bytes(dir, "quota.toml")).expect("quota is UTF-8");
    toml::from_str(&text).expect("quota is TOML")
}

/// The claims, evidence, spends and a signed decision of a short run, for the round trip.
fn busy_run(lab: &Lab) {
    let (a1, a2) = (lab.agent(1), lab.agent(2));
    let (x, y) = (&lab.todos[0], &lab.todos[1]);
    let f = id_fence(&lab.ok(Who::Agent(a1), &["todo", "claim", x]))
        .1
        .to_string();
    lab.ok(
        Who::Agent(a1),
        &[
            "todo",
            "update",
            x,
            "--fence",
            &f,
            "--evidence",
            "first proof",
        ],
    );
    let f = id_fence(&lab.ok(Who::Agent(a2), &["todo", "claim", y]))
        .1
        .to_string();
    let done = [
        "todo",
        "update",
        y,
        "--fence",
        &f,
        "--evidence",
        "second proof",
        "--status",
        "done",
    ];
    lab.ok(Who::Agent(a2), &done);
    lab.ok(Who::Agent(a1), &["quota", "spend-slot"]);
    lab.ok(Who::Agent(a2), &["quota", "spend-slot"]);
    let v = lab.ok(Who::Agent(a1), &["gate", "open", "Merge it?"]);
    let g = v["gate"]["id"].as_str().expect("a gate id").to_string();
    lab.ok(
        Who::Owner,
        &["gate", "approve", &g, "--reason", "looks right"],
    );
}

/// After a run, the project exported (or copied), imported into a second database and exported
/// again: the same records, spends and evidence, the same journal and owner files byte for byte.
fn round_trip(b: Backend) {
    let Some(server) = pg::server_or_skip() else {
        return;
    };
    let Some(lab) = Lab::new(b, "conf-trip", 2, 3) else {
        return;
    };
    busy_run(&lab);
    let (first, second) = (TempDir::new("conf-trip-1"), TempDir::new("conf-trip-2"));
    lab.export(&first.path);
    let db = Db::new(server, &lab.p);
    let v = db.import(&lab.p, &first.path);
    assert_eq!(v["imported"]["spends"], 2, "{v}");
    db.export(&lab.p, &second.path);
    let (one, two) = (&first.path, &second.path);
    for sub in ["todos", "archive", "gates", "agents"] {
        assert_eq!(
            records(one, sub),
            records(two, sub),
            "{sub} after the round trip"
        );
    }
    let todos = records(one, "todos").len() + records(one, "archive").len();
    assert_eq!(
        (todos, records(one, "gates").len()),
        (3, 1),
        "the run's records"
    );
    assert_eq!(
        evidence(one),
        evidence(two),
        "evidence after the round trip"
    );
    let said: Vec<String> = evidence(one)
        .values()
        .flatten()
        .map(|e| e["summary"].to_string())
        .collect();
    assert!(said.iter().any(|s| s.contains("first proof")), "{said:?}");
    assert!(said.iter().any(|s| s.contains("second proof")), "{said:?}");
    assert_eq!(
        quota(one),
        quota(two),
        "quota and spends after the round trip"
    );
    let spends = quota(one)
        .get("spend")
        .and_then(|s| s.as_array())
        .map_or(0, Vec::len);
    assert_eq!(spends, 2, "the run's spends: {}", quota(one));
    for name in ["journal.jsonl", "owner.seal", "owner.proofs", "owner.pub"] {
        let (a, b) = (bytes(one, name), bytes(two, name));
        assert!(!a.is_empty(), "{name} is in the first export");
        assert!(
            a == b,
            "{name} is not the same byte for byte after the round trip"
        );
    }
    assert_eq!(
        String::from_utf8(bytes(one, "journal.jsonl")).expect("UTF-8"),
        lab.journal_text(),
        "the export's journal is the store's"
    );
    let cfg = |d: &Path| -> toml::Value {
        toml::from_str(&String::from_utf8(bytes(d, "loopx.toml")).expect("UTF-8")).expect("TOML")
    };
    assert_eq!(cfg(one), cfg(two), "loopx.toml after the round trip");
    assert_healthy(&lab, one);
    assert_healthy(&lab, two);
}

/// A refused connection is I/O (exit 1), a database without loopx's schema (a directory
/// without a project) is not found (exit 5); the message names it and nothing is written.
fn refusals(b: Backend) {
    let Some(lab) = Lab::new(b, "conf-refuse", 1, 1) else {
        return;
    };
    let a1 = lab.agent(1);
    let acts: [&[&str]; 4] = [
        &["todo", "claim"],
        &["todo", "add", "Another"],
        &["status"],
        &["gate", "open", "Now?"],
    ];
    let journal = lab.journal_text();
    let files = lab.p.files();
    let port1 = "postgres://nobody:pw@127.0.0.1:1/loopx";
    for (who, args) in acts
        .iter()
        .flat_map(|a| [(Who::Agent(a1), a), (Who::Owner, a)])
    {
        let r = run_cmd(&mut lab.cmd_on(who, Some(port1), args));
        let v = parse_json(&r, "on port 1");
        assert_eq!(
            (r.code, &v["error"]["code"]),
            (1, &Value::from("io")),
            "{args:?}: {v}"
        );
        let msg = v["error"]["message"].as_str().unwrap_or("");
        assert!(msg.contains("cannot connect") && msg.contains(":1/"), "{v}");
        assert!(
            !r.stdout.contains(":pw@") && !r.stderr.contains(":pw@"),
            "{r:?}"
        );
    }
    let (url, empty) = match &lab.db {
        Some(_) => (Some(pg::fresh_db(pg::server().expect("a server"))), None),
        None => (None, Some(TempDir::new("conf-refuse-empty"))),
    };
    let says = if url.is_some() {
        "no loopx schema"
    } else {
        "no .loopx/"
    };
    for (who, args) in acts
        .iter()
        .flat_map(|a| [(Who::Agent(a1), a), (Who::Owner, a)])
    {
        let mut a: Vec<&str> = Vec::new();
        if let Some(e) = &empty {
            a.extend(["--dir", e.path.to_str().expect("UTF-8")]);
        }
        a.extend_from_slice(args);
        let r = run_cmd(&mut lab.cmd_on(who, url.as_deref(), &a));
        let v = parse_json(&r, "on an empty store");
        let code = (r.code, &v["error"]["code"]);
        assert_eq!(code, (5, &Value::from("not_initialized")), "{args:?}: {v}");
        assert!(
            v["error"]["message"].as_str().unwrap_or("").contains(says),
            "{v}"
        );
    }
    if let Some(u) = &url {
        let (code, out, err) = pg::psql(
            u,
            "SELECT count(*) FROM pg_class c JOIN pg_namespace n \
             ON n.oid = c.relnamespace WHERE n.nspname NOT IN ('pg_catalog', 'information_schema', \
             'pg_toast') OR n.nspname = 'loopx'",
        );
        assert_eq!(
            (code, out.trim()),
            (0, "0"),
            "nothing made in the empty database: {err}"
        );
    }
    if let Some(e) = &empty {
        let left: Vec<_> = std::fs::read_dir(&e.path).expect("the empty dir").collect();
        assert!(
            left.is_empty(),
            "nothing made in the empty directory: {left:?}"
        );
    }
    assert_eq!(lab.journal_text(), journal, "nothing journaled");
    assert!(lab.p.files() == files, "no file written");
}

/// A watcher's check: an agent proposes it, only the owner approves and revokes it, and the
/// approval (the owner's seal) is what `monitor list` reports.
fn monitor_checks(b: Backend) {
    let Some(lab) = Lab::new(b, "conf-mon", 1, 0) else {
        return;
    };
    let a1 = lab.agent(1);
    let v = lab.ok(
        Who::Agent(a1),
        &["todo", "add", "Watch the feed", "--every", "1h"],
    );
    let id = v["todo"]["id"].as_str().expect("a todo id").to_string();
    let p = lab.ok(
        Who::Agent(a1),
        &["monitor", "propose", &id, "--", "echo", "fed"],
    );
    let sha = p["check"]["sha256"].as_str().expect("a sha").to_string();
    let approved = |lab: &Lab| {
        let l = lab.ok(Who::Agent(a1), &["monitor", "list"]);
        l["monitors"][0]["check"]["approved"].clone()
    };
    assert_eq!(approved(&lab), Value::from(false));
    lab.fails(
        Who::OwnerNoKey,
        &["monitor", "approve", &id, "--sha", &sha],
        "denied",
    );
    // On files the key is the owner's authority; a database also wants the owner's login.
    let db = matches!(b, Backend::Db);
    if db {
        lab.fails(
            Who::AgentWithKey(a1),
            &["monitor", "approve", &id, "--sha", &sha],
            "denied",
        );
    }
    lab.ok(Who::Owner, &["monitor", "approve", &id, "--sha", &sha]);
    assert_eq!(approved(&lab), Value::from(true));
    if db {
        lab.fails(Who::AgentWithKey(a1), &["monitor", "revoke", &id], "denied");
    }
    lab.ok(Who::Owner, &["monitor", "revoke", &id]);
    assert_eq!(approved(&lab), Value::from(false));
}

/// Proven work: a todo's approved check (then the owner's default) must pass before its done;
/// a failing run is recorded and the todo stays claimed (exit 9).
fn proven_done(b: Backend) {
    let Some(lab) = Lab::new(b, "conf-proof", 1, 0) else {
        return;
    };
    let a1 = lab.agent(1);
    let v = lab.ok(Who::Agent(a1), &["todo", "add", "Build it"]);
    let id = v["todo"]["id"].as_str().expect("a todo id").to_string();
    lab.ok(Who::Agent(a1), &["todo", "claim", &id]);
    let c = [
        "todo",
        "check",
        "propose",
        &id,
        "--",
        "test",
        "-f",
        "built.txt",
    ];
    lab.ok(Who::Agent(a1), &c);
    let done = ["todo", "update", &id, "--status", "done"];
    lab.fails(Who::Agent(a1), &done, "denied");
    lab.fails(
        Who::OwnerNoKey,
        &["todo", "check", "approve", &id],
        "denied",
    );
    lab.ok(Who::Owner, &["todo", "check", "approve", &id]);
    let v = lab.fails(Who::Agent(a1), &done, "check_failed");
    assert_eq!(v["details"]["evidence"]["exit_code"], 1, "{v}");
    let t = lab.ok(Who::Agent(a1), &["todo", "show", &id]);
    assert_eq!(t["todo"]["lease"]["holder"], a1, "{t}");
    std::fs::write(lab.p.root().join("built.txt"), "").expect("write");
    lab.ok(Who::Agent(a1), &done);
    let t = lab.ok(Who::Agent(a1), &["todo", "show", &id]);
    assert_eq!(t["todo"]["proof"]["tier"], "checked", "{t}");
    // The owner's default proves a todo without a check of its own.
    let d = [
        "todo",
        "check",
        "default",
        "--",
        "test",
        "-f",
        "shipped.txt",
    ];
    lab.fails(Who::OwnerNoKey, &d, "denied");
    lab.ok(Who::Owner, &d);
    let v = lab.ok(Who::Agent(a1), &["todo", "add", "Ship it"]);
    let id = v["todo"]["id"].as_str().expect("a todo id").to_string();
    lab.ok(Who::Agent(a1), &["todo", "claim", &id]);
    let done = ["todo", "update", &id, "--status", "done"];
    lab.fails(Who::Agent(a1), &done, "check_failed");
    std::fs::write(lab.p.root().join("shipped.txt"), "").expect("write");
    lab.ok(Who::Agent(a1), &done);
}

/// A todo that names archived ones (a review of a done todo, a dependency on it) is added on
/// both stores; the reviewed todo's finisher may not claim the review.
fn archived_references(b: Backend) {
    let Some(lab) = Lab::new(b, "conf-arch", 2, 0) else {
        return;
    };
    let (a1, a2) = (lab.agent(1), lab.agent(2));
    let v = lab.ok(Who::Agent(a1), &["todo", "add", "Write it"]);
    let id = v["todo"]["id"].as_str().expect("a todo id").to_string();
    lab.ok(Who::Agent(a1), &["todo", "claim", &id]);
    lab.ok(Who::Agent(a1), &["todo", "update", &id, "--status", "done"]);
    let add = [
        "todo",
        "add",
        "Review it",
        "--reviews",
        &id,
        "--depends-on",
        &id,
    ];
    let v = lab.ok(Who::Agent(a2), &add);
    let r = v["todo"]["id"].as_str().expect("a todo id").to_string();
    assert_eq!(v["todo"]["exclude_agents"][0], a1, "{v}");
    lab.fails(Who::Agent(a1), &["todo", "claim", &r], "not_ready");
    lab.ok(Who::Agent(a2), &["todo", "claim", &r]);
}

/// The no-progress breaker parks a todo behind a gate on both stores: the turns' ends write the
/// stall and open the gate as the agent; only the owner's decision offers it again.
fn breaker_parks(b: Backend) {
    let Some(lab) = Lab::new(b, "conf-breaker", 1, 0) else {
        return;
    };
    let a1 = lab.agent(1);
    lab.fails(
        Who::OwnerNoKey,
        &["quota", "set", "--breaker", "2"],
        "denied",
    );
    lab.ok(Who::Owner, &["quota", "set", "--breaker", "2"]);
    let v = lab.ok(Who::Agent(a1), &["todo", "add", "Spin"]);
    let id = v["todo"]["id"].as_str().expect("a todo id").to_string();
    for n in 1..=2 {
        lab.ok(Who::Agent(a1), &["turn", "--", "true"]);
        let t = lab.ok(Who::Agent(a1), &["todo", "show", &id]);
        assert_eq!(t["todo"]["stall"]["turns"], n, "{t}");
    }
    let t = lab.ok(Who::Agent(a1), &["todo", "show", &id]);
    let gate = t["todo"]["stall"]["parked"]
        .as_str()
        .expect("parked")
        .to_string();
    let (code, a) = lab.json(Who::Agent(a1), &["quota", "should-run"]);
    assert_eq!((code, a["decision"].as_str()), (3, Some("ask")), "{a}");
    assert_eq!(a["parked"][0], id.as_str(), "{a}");
    let approve = ["gate", "approve", &gate, "--option", "retry"];
    lab.fails(Who::OwnerNoKey, &approve, "denied");
    lab.ok(Who::Owner, &approve);
    let t = lab.ok(Who::Agent(a1), &["todo", "show", &id]);
    assert!(t["todo"].get("stall").is_none(), "{t}");
    let (code, a) = lab.json(Who::Agent(a1), &["quota", "should-run"]);
    assert_eq!((code, a["decision"].as_str()), (0, Some("run")), "{a}");
}

/// A gate's approved action runs once on both stores: the owner approves its digest, the agent
/// runs it, a second run is refused; on a database the agent's login cannot clear the use.
fn action_gate_once(b: Backend) {
    let Some(lab) = Lab::new(b, "conf-action", 1, 0) else {
        return;
    };
    let a1 = lab.agent(1);
    let out = TempDir::new("conf-action-out");
    let file = out.path.join("ran");
    let script = format!("echo x >> '{}'", file.display());
    let open = [
        "gate",
        "open",
        "Run it?",
        "--action-cmd",
        "--",
        "sh",
        "-c",
        &script,
    ];
    let v = lab.ok(Who::Agent(a1), &open);
    let id = v["gate"]["id"].as_str().expect("a gate id").to_string();
    let sha = v["gate"]["action"]["sha256"]
        .as_str()
        .expect("a sha")
        .to_string();
    let again = lab.ok(Who::Agent(a1), &open);
    assert_eq!(
        again["gate"]["id"],
        id.as_str(),
        "the same ask is the same gate"
    );
    lab.fails(Who::Agent(a1), &["run-approved", &id], "not_ready");
    lab.fails(Who::Owner, &["gate", "approve", &id], "usage");
    let approve = ["gate", "approve", &id, "--sha", &sha];
    lab.fails(Who::OwnerNoKey, &approve, "denied");
    lab.ok(Who::Owner, &approve);
    lab.ok(Who::Agent(a1), &["run-approved", &id]);
    lab.fails(Who::Agent(a1), &["run-approved", &id], "already_used");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "x\n");
    let g = lab.ok(Who::Agent(a1), &["gate", "show", &id]);
    assert_eq!(g["gate"]["used"]["by"], a1, "{g}");
    assert_eq!(g["gate"]["status"], "approved", "{g}");
    if let Some(url) = lab.login(Who::Agent(a1)) {
        let sql = format!("UPDATE loopx.gates SET body = body - 'used' WHERE id = '{id}'");
        let (code, _, err) = pg::psql(&url, &sql);
        assert_ne!(code, 0, "an agent cleared the use: {err}");
        lab.fails(Who::Agent(a1), &["run-approved", &id], "already_used");
    }
}

/// Rounds of the reservation race; in each, every racer claims a todo of its own with one glob.
const RESERVE_ROUNDS: usize = 3;

/// Racers claiming different todos with overlapping globs at once: one wins each round, the
/// others are refused with the holder named (a database orders them by the reservations' lock).
fn reservation_race(b: Backend) {
    let Some(lab) = Lab::new(b, "conf-reserve", RACERS, RACERS * RESERVE_ROUNDS) else {
        return;
    };
    for round in 0..RESERVE_ROUNDS {
        let glob = format!("round{round}/**");
        let narrow = format!("round{round}/src/x.rs");
        let start = std::sync::Barrier::new(RACERS);
        let answers: Vec<(String, i32, Value)> = std::thread::scope(|s| {
            let racers: Vec<_> = lab
                .agents
                .iter()
                .enumerate()
                .map(|(i, a)| {
                    let (lab, start) = (&lab, &start);
                    let todo = lab.todos[round * RACERS + i].clone();
                    let glob = if i % 2 == 0 { &glob } else { &narrow };
                    s.spawn(move || {
                        start.wait();
                        let args = ["todo", "claim", todo.as_str(), "--paths", glob.as_str()];
                        let (code, v) = lab.json(Who::Agent(a), &args);
                        (a.clone(), code, v)
                    })
                })
                .collect();
            racers
                .into_iter()
                .map(|h| h.join().expect("a racer"))
                .collect()
        });
        let won: Vec<&(String, i32, Value)> = answers.iter().filter(|r| r.1 == 0).collect();
        assert_eq!(
            won.len(),
            1,
            "round {round}: one reservation wins: {answers:?}"
        );
        let holder = &won[0].0;
        for (a, code, v) in &answers {
            if a == holder {
                continue;
            }
            assert_eq!(*code, 4, "round {round}, {a}: {v}");
            assert_eq!(v["error"]["code"], "lease_conflict", "{v}");
            assert_eq!(
                v["error"]["details"]["reasons"][0]["holder"],
                holder.as_str(),
                "{v}"
            );
        }
    }
    let v = lab.ok(Who::Owner, &["status"]);
    let claimed = v["claimed"].as_array().map_or(0, Vec::len);
    assert_eq!(claimed, RESERVE_ROUNDS, "one lease a round: {v}");
}
