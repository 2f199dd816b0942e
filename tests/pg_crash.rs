//! A claim loopx acknowledged survives a crash of the database server: claimer processes race
//! `loopx --store URL todo claim`, each as its own agent login, while the server (a private
//! throwaway one) is stopped at once (`pg_ctl stop -m immediate`) or its postmaster killed
//! (`kill -9`) at a random moment, or right after the last answer; after each restart, every
//! claim answered with exit 0 holds its todo. A disk wait the database refuses says the change
//! is in.

mod common;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::Project;
use common::backend::Db;
use common::pg::{self, Server};
use loopx::kernel::Ts;
use loopx::kernel::ops::{self, Change, NewTodo};
use loopx::store::StoreExt;
use loopx::store::pg::PgStore;

/// Claimer processes racing in each round.
const CLAIMERS: usize = 4;
/// Rounds, each ended by a crash; the kinds of crash take turns.
const ROUNDS: usize = 9;
/// No round starts after this long (a loaded machine runs fewer), once each kind of crash ran.
const BUDGET: Duration = Duration::from_secs(40);
/// Todos added before each round: more than a round's claimers take.
const BATCH: usize = 120;
/// The longest a round's race runs after its first answer before the crash.
const RACE_MS: u32 = 700;

/// How a round ends.
#[derive(Clone, Copy, Debug)]
enum Crash {
    /// `pg_ctl stop -m immediate` while the claimers race.
    Stop,
    /// `kill -9` of the postmaster while the claimers race.
    Kill,
    /// The claimers stop; the server is stopped at once right after the last answer.
    StopAfter,
}

/// An acknowledged claim: the agent, the todo.
type Claim = (String, String);

/// A random number below `n`.
fn below(n: u32) -> u32 {
    let mut b = [0u8; 4];
    getrandom::fill(&mut b).expect("random bytes");
    u32::from_le_bytes(b) % n
}

/// Adds `n` todos numbered from `from`, in one commit, as the database's superuser.
fn add_todos(url: &str, from: usize, n: usize) {
    let store = PgStore::new(url, loopx::store::Env::default()).expect("a store");
    let now = Ts::now();
    store
        .mutate(|s| {
            let mut all = Change::default();
            for i in from..from + n {
                let new = NewTodo::new(format!("t-crash{i:05}"), format!("todo {i}"));
                let (c, _) = ops::add_todo(s, "planner", now, new)?;
                all.writes.extend(c.writes);
                all.events.extend(c.events);
            }
            Ok((all, ()))
        })
        .expect("add the round's todos");
}

/// One claim by `agent` through the binary: the todo's id when it answered exit 0.
fn claim(p: &Project, url: &str, agent: &str) -> Option<String> {
    let mut c = p.cmd(&["--json", "--store", url, "--agent", agent, "todo", "claim"]);
    c.env("LOOPX_OWNER_KEY", p.home.path.join("no-such-key"));
    let out = c.output().expect("loopx runs");
    if !out.status.success() {
        return None;
    }
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("claim's JSON");
    let id = v["todo"]["id"].as_str().expect("the claimed todo's id");
    Some(id.to_string())
}

/// Races the claimers until the crash: the claims answered with exit 0.
fn race(p: &Arc<Project>, server: &Server, logins: &[(String, String)], how: Crash) -> Vec<Claim> {
    let acked = Arc::new(Mutex::new(Vec::new()));
    let stop = Arc::new(AtomicBool::new(false));
    let threads: Vec<_> = logins
        .iter()
        .cloned()
        .map(|(agent, url)| {
            let (p, acked, stop) = (Arc::clone(p), Arc::clone(&acked), Arc::clone(&stop));
            std::thread::spawn(move || {
                while !stop.load(Ordering::SeqCst) {
                    if let Some(id) = claim(&p, &url, &agent) {
                        acked.lock().expect("claims").push((agent.clone(), id));
                    }
                }
            })
        })
        .collect();
    // The crash comes once the race is under way: after its first answer.
    let started = Instant::now();
    while acked.lock().expect("claims").is_empty() && started.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(5));
    }
    std::thread::sleep(Duration::from_millis(u64::from(below(RACE_MS))));
    let join = |threads: Vec<std::thread::JoinHandle<()>>| {
        stop.store(true, Ordering::SeqCst);
        for t in threads {
            t.join().expect("a claimer");
        }
    };
    match how {
        Crash::Stop => {
            server.crash();
            join(threads);
        }
        Crash::Kill => {
            server.kill();
            join(threads);
        }
        Crash::StopAfter => {
            join(threads);
            server.crash();
        }
    }
    acked.lock().expect("claims").clone()
}

/// The claims of `acked` the restarted database does not hold: the todo's lease is not the
/// agent's.
fn lost(db: &Db, acked: &[Claim]) -> Vec<Claim> {
    let rows =
        db.sql("SELECT id || ' ' || coalesce(body->'lease'->>'holder', '-') FROM loopx.todos");
    let holder: BTreeMap<&str, &str> = rows.lines().filter_map(|l| l.split_once(' ')).collect();
    acked
        .iter()
        .filter(|(agent, id)| holder.get(id.as_str()) != Some(&agent.as_str()))
        .cloned()
        .collect()
}

/// The project for the race on `server`, imported into a fresh database, and the claimers'
/// agent logins (agent, URL).
fn setup(server: &Server) -> (Arc<Project>, Db, Vec<(String, String)>) {
    // After a crash the server fsyncs its data directory before recovery: one `syncfs` instead
    // of a walk that fsyncs each file (seconds on a busy disk).
    let (code, _, err) = pg::psql(
        &server.url,
        "ALTER SYSTEM SET recovery_init_sync_method = syncfs",
    );
    assert_eq!(code, 0, "{err}");
    let p = Project::new("pg-crash");
    let db = Db::new(server, &p);
    db.import(&p, p.root());
    // From here the database is the project.
    std::fs::rename(p.lx(""), p.home.path.join("imported.loopx")).expect("move .loopx");
    let tail = db.name.trim_start_matches("loopx_t_").to_string();
    let logins = (1..=CLAIMERS)
        .map(|i| {
            let agent = format!("c{i}_{tail}");
            let url = db.agent_login(&agent);
            (agent, url)
        })
        .collect();
    (Arc::new(p), db, logins)
}

#[test]
fn every_claim_answered_with_exit_0_survives_a_crash_of_the_server() {
    let Some(server) = pg::private_or_skip("crash") else {
        return;
    };
    let started = Instant::now();
    let (p, db, logins) = setup(&server);
    let (mut acked, mut missing) = (0, Vec::new());
    let mut per_kind = BTreeMap::new();
    let mut rounds = 0;
    for round in 0..ROUNDS {
        if round >= 3 && started.elapsed() > BUDGET {
            break;
        }
        rounds += 1;
        add_todos(&db.admin, round * BATCH, BATCH);
        let how = [Crash::Stop, Crash::Kill, Crash::StopAfter][round % 3];
        let claims = race(&p, &server, &logins, how);
        server.resume();
        let gone = lost(&db, &claims);
        let e = per_kind.entry(format!("{how:?}")).or_insert((0, 0));
        *e = (e.0 + claims.len(), e.1 + gone.len());
        acked += claims.len();
        missing.extend(gone);
    }
    eprintln!(
        "{rounds} rounds in {:.1} s: {acked} claims answered with exit 0, {} lost; \
         (answered, lost) by crash: {per_kind:?}",
        started.elapsed().as_secs_f64(),
        missing.len()
    );
    assert!(
        acked >= rounds,
        "only {acked} claims answered in {rounds} rounds: the race did not run"
    );
    assert!(
        missing.is_empty(),
        "{} of {acked} claims answered with exit 0 were gone after a restart \
         ((answered, lost) by crash: {per_kind:?}): {missing:?}",
        missing.len()
    );
    // The journal's chain is whole after every crash.
    let v = db.sql("SELECT count(*) FROM loopx.journal");
    assert!(v.trim().parse::<usize>().is_ok_and(|n| n > acked), "{v}");
    let mut verify = p.cmd(&["--json", "--store", &db.owner, "log", "--verify"]);
    let out = verify.output().expect("loopx runs");
    assert!(
        out.status.success(),
        "log --verify: {}",
        String::from_utf8_lossy(&out.stdout)
    );
}

/// A role that may not call the disk wait's function: the claim and the owner's approval are
/// committed, and loopx says so (exit 1), instead of "refused" with nothing in.
#[test]
fn a_refused_disk_wait_says_the_change_is_in() {
    use common::backend::{Backend, Lab, Who};
    let Some(lab) = Lab::new(Backend::Db, "pg-wait", 1, 1) else {
        return;
    };
    let db = lab.db.as_ref().expect("a database");
    let a1 = lab.agent(1);
    let v = lab.ok(Who::Agent(a1), &["gate", "open", "Ship it?"]);
    let gate = v["gate"]["id"].as_str().expect("a gate id").to_string();
    let f = "FUNCTION pg_logical_emit_message(boolean, text, text)";
    db.sql(&format!("REVOKE EXECUTE ON {f} FROM PUBLIC"));
    for (who, args) in [
        (Who::Agent(a1), &["todo", "claim"][..]),
        (Who::Owner, &["gate", "approve", &gate]),
    ] {
        let (code, v) = lab.json(who, args);
        assert_eq!(code, 1, "{args:?}: {v}");
        let msg = v["error"]["message"].as_str().unwrap_or_default();
        assert!(msg.contains("was committed"), "{args:?}: {v}");
    }
    db.sql(&format!("GRANT EXECUTE ON {f} TO PUBLIC"));
    let todo = &lab.todos[0];
    let v = lab.ok(Who::Owner, &["todo", "show", todo]);
    assert_eq!(v["todo"]["lease"]["holder"], a1, "{v}");
    let v = lab.ok(Who::Owner, &["gate", "list"]);
    let approved = v["gates"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|g| g["id"] == gate.as_str() && g["status"] == "approved");
    assert!(approved, "{v}");
}
