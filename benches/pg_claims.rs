//! Claims on the PostgreSQL store through the library: N clients, each with its own connection
//! and its own agent login role, claim a todo and release it, as fast as they can, for a few
//! seconds; then the journal is read back to prove no todo was ever claimed twice at once.
//!
//! With `claims` after the numbers, each client only claims (no release), until the time is up
//! or no todo is free: each claim is then one commit.
//!
//! usage: LOOPX_BENCH_PG=postgres://postgres@127.0.0.1:PORT/postgres \
//!        cargo bench --bench pg_claims -- [CLIENTS] [SECONDS] [TODOS] [cycle|claims]
//! (benches/pg.sh starts a throwaway server and runs this). With LOOPX_BENCH_SQL=FILE, FILE's
//! SQL runs on the new database after the schema: an experiment, such as
//! `benches/pg_experiments/no_rules.sql`.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use loopx::kernel::ops::{self, NewTodo};
use loopx::kernel::{Code, Config, Dur, Ts};
use loopx::store::Env;
use loopx::store::pg::{PgStore, roles::Roles};
use loopx::store::{FileStore, StoreExt};

fn arg(n: usize, default: u64) -> u64 {
    std::env::args()
        .filter(|a| !a.starts_with('-'))
        .nth(n)
        .and_then(|a| a.parse().ok())
        .unwrap_or(default)
}

fn main() {
    let Ok(base) = std::env::var("LOOPX_BENCH_PG") else {
        eprintln!("set LOOPX_BENCH_PG to a superuser URL (benches/pg.sh does)");
        return;
    };
    let (clients, secs, todos) = (arg(1, 8), arg(2, 5), arg(3, 32));
    let only_claims = std::env::args().any(|a| a == "claims");
    let url = setup(&base, clients, todos);
    let single = single_claims(&url_as(&url, "bench_a1"), 300);
    println!(
        "single client: claim round trip median {:.2} ms, p99 {:.2} ms (300 claims)",
        ms(single[single.len() / 2]),
        ms(single[single.len() * 99 / 100])
    );
    let cpu0 = (own_cpu(), server_cpu());
    let start = Instant::now();
    let until = start + Duration::from_secs(secs);
    let handles: Vec<_> = (1..=clients)
        .map(|i| {
            let u = url_as(&url, &format!("bench_a{i}"));
            std::thread::spawn(move || run_client(&u, &format!("bench_a{i}"), until, only_claims))
        })
        .collect();
    let mut lat = Vec::new();
    let mut retries_total = 0;
    let mut last = start;
    for h in handles {
        let (l, r, end) = h.join().expect("client thread");
        lat.extend(l);
        retries_total += r;
        last = last.max(end);
    }
    // The clients' connections are closed: their server processes exit and are counted.
    std::thread::sleep(Duration::from_millis(300));
    let cpu = (own_cpu() - cpu0.0, server_cpu() - cpu0.1);
    // Claims only: up to the last claim (a client that finds nothing free stops).
    let wall = if only_claims {
        last - start
    } else {
        start.elapsed()
    }
    .as_secs_f64();
    let what = if only_claims {
        "claims only, no release"
    } else {
        "each followed by its release"
    };
    lat.sort();
    let claims = lat.len();
    println!(
        "{clients} clients, {todos} todos, {wall:.2} s: {claims} claims, {:.0} claims/s \
         ({what}), claim p50 {:.2} ms p99 {:.2} ms, {retries_total} nothing-free answers",
        claims as f64 / wall,
        ms(lat[claims / 2]),
        ms(lat[claims * 99 / 100])
    );
    if cpu.1 > 0.0 {
        println!(
            "CPU per claim: clients {:.2} ms, server {:.2} ms (all its processes; {:.2} of {} cores busy)",
            cpu.0 * 1000.0 / claims as f64,
            cpu.1 * 1000.0 / claims as f64,
            (cpu.0 + cpu.1) / wall,
            machine_cores(),
        );
    } else {
        println!(
            "CPU per claim: clients {:.2} ms (no postgres process on this machine to read)",
            cpu.0 * 1000.0 / claims as f64
        );
    }
    let (double, journal_claims) = audit(&url);
    println!("journal: {journal_claims} claims, double claims: {double}");
    assert_eq!(double, 0, "a todo was claimed twice");
    assert_eq!(
        journal_claims,
        claims + single.len(),
        "a claim is missing from the journal"
    );
    // Checked: the database goes (on a failed check it stays, to be looked at).
    let mut admin = postgres::Client::connect(&base, postgres::NoTls).expect("connect");
    admin
        .batch_execute(&format!(
            "DROP DATABASE IF EXISTS lx_bench_{}",
            std::process::id()
        ))
        .expect("dropdb");
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn url_as(url: &str, user: &str) -> String {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let host = rest.split_once('@').map_or(rest, |(_, h)| h);
    format!("postgres://{user}@{host}")
}

/// A new database with the schema, `clients` agent logins and a project of `todos` todos.
fn setup(base: &str, clients: u64, todos: u64) -> String {
    let db = format!("lx_bench_{}", std::process::id());
    let mut admin = postgres::Client::connect(base, postgres::NoTls).expect("connect");
    admin
        .batch_execute(&format!("CREATE DATABASE {db}"))
        .expect("createdb");
    let url = format!("{}/{db}", base.rsplit_once('/').expect("url").0);
    let store = PgStore::new(&url, Env::default()).expect("url");
    let roles = Roles::with_prefix("lxbench").expect("prefix");
    store.migrate(&roles).expect("migrate");
    // An experiment: SQL run on the new database after the schema (LOOPX_BENCH_SQL=FILE).
    if let Ok(f) = std::env::var("LOOPX_BENCH_SQL") {
        let sql = std::fs::read_to_string(&f).expect("LOOPX_BENCH_SQL");
        let mut c = postgres::Client::connect(&url, postgres::NoTls).expect("connect");
        c.batch_execute(&sql).expect("LOOPX_BENCH_SQL");
    }
    for i in 1..=clients {
        admin
            .batch_execute(&format!(
                "DO $$ BEGIN CREATE ROLE bench_a{i} LOGIN IN ROLE lxbench_agent; \
                 EXCEPTION WHEN duplicate_object THEN NULL; END $$"
            ))
            .expect("role");
    }
    let dir = std::env::temp_dir().join(format!("lx-bench-{}", std::process::id()));
    let files = FileStore::at(&dir);
    let now = Ts::now();
    files
        .create(&Config::new("g-bench", "bench claims", now), "planner")
        .expect("goal");
    loopx::store::port::import(&store, &files).expect("import");
    let _ = std::fs::remove_dir_all(&dir);
    for i in 0..todos {
        store
            .mutate(|s| {
                ops::add_todo(
                    s,
                    "planner",
                    now,
                    NewTodo::new(format!("t-b{i:05}"), format!("todo {i}")),
                )
            })
            .expect("add");
    }
    url
}

/// One claim through the store's API, as `todo claim` makes it (the todo locked, the lease
/// granted and journaled, retried on a conflict); None when nothing is free.
fn claim(s: &PgStore, agent: &str) -> Option<String> {
    let now = Ts::now();
    let r = s.mutate_claim(agent, now, |snap| {
        ops::claim(snap, agent, now, Dur::from_mins(5), None)
    });
    match r {
        Ok(t) => Some(t.id),
        Err(e) if e.code == Code::NothingReady => None,
        Err(e) => panic!("claim: {e:?}"),
    }
}

fn release(s: &PgStore, agent: &str, id: &str) {
    s.mutate(|snap| ops::release(snap, agent, Ts::now(), id))
        .expect("release");
}

fn single_claims(url: &str, n: usize) -> Vec<Duration> {
    let s = PgStore::new(url, Env::default()).expect("url");
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        let id = claim(&s, "bench_a1").expect("a free todo");
        out.push(t.elapsed());
        release(&s, "bench_a1", &id);
    }
    out.sort();
    out
}

/// One client's claims: their latencies, how many found nothing free, and when the last ended.
fn run_client(url: &str, agent: &str, until: Instant, only: bool) -> (Vec<Duration>, u64, Instant) {
    let s = PgStore::new(url, Env::default()).expect("url");
    let (mut lat, mut none, mut end) = (Vec::new(), 0, Instant::now());
    while Instant::now() < until {
        let t = Instant::now();
        match claim(&s, agent) {
            Some(id) => {
                lat.push(t.elapsed());
                end = Instant::now();
                if !only {
                    release(&s, agent, &id);
                }
            }
            None if only => break,
            None => none += 1,
        }
    }
    (lat, none, end)
}

/// The machine's cores, whatever this process is pinned to (`/proc/stat`'s `cpuN` lines).
fn machine_cores() -> usize {
    std::fs::read_to_string("/proc/stat").map_or(0, |t| {
        t.lines()
            .filter(|l| l.starts_with("cpu") && l.as_bytes().get(3).is_some_and(u8::is_ascii_digit))
            .count()
    })
}

/// Seconds of CPU this process has used (Linux; 0 elsewhere).
fn own_cpu() -> f64 {
    std::fs::read_to_string("/proc/self/stat").map_or(0.0, |t| ticks(&t, &[14, 15]))
}

/// Seconds of CPU every `postgres` process on this machine has used, with the exited ones
/// the postmaster reaped (Linux; 0 elsewhere). The bench's server is the only one running.
fn server_cpu() -> f64 {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return 0.0;
    };
    let mut total = 0.0;
    for e in dir.flatten() {
        let Ok(t) = std::fs::read_to_string(e.path().join("stat")) else {
            continue;
        };
        if !t.contains("(postgres)") {
            continue;
        }
        // A postmaster's parent is not a postgres: its reaped children count too.
        let parent = fields(&t)
            .get(1)
            .and_then(|p| std::fs::read_to_string(format!("/proc/{p}/stat")).ok());
        let reaped = parent.is_none_or(|p| !p.contains("(postgres)"));
        total += ticks(&t, if reaped { &[14, 15, 16, 17] } else { &[14, 15] });
    }
    total
}

/// The fields after a `/proc/PID/stat` line's name: field 3 (state) is index 0.
fn fields(stat: &str) -> Vec<&str> {
    stat.rsplit_once(')')
        .map_or(Vec::new(), |(_, rest)| rest.split_whitespace().collect())
}

/// The sum of the clock-tick fields numbered `idx` in `man proc` (100 ticks a second), in seconds.
fn ticks(stat: &str, idx: &[usize]) -> f64 {
    let f = fields(stat);
    let n: u64 = idx
        .iter()
        .filter_map(|i| f.get(i - 3).and_then(|v| v.parse::<u64>().ok()))
        .sum();
    n as f64 / 100.0
}

/// Reads the journal: per todo, claims and releases must alternate, by the same agent.
fn audit(url: &str) -> (usize, usize) {
    let mut c = postgres::Client::connect(url, postgres::NoTls).expect("connect");
    let rows = c
        .query("SELECT line FROM loopx.journal ORDER BY seq", &[])
        .expect("journal");
    let mut holder: HashMap<String, String> = HashMap::new();
    let (mut double, mut claims) = (0, 0);
    for r in rows {
        let v: serde_json::Value = serde_json::from_str(&r.get::<_, String>(0)).expect("line");
        let (action, target, actor) = (
            v["action"].as_str().unwrap_or(""),
            v["target"].as_str().unwrap_or("").to_string(),
            v["actor"].as_str().unwrap_or("").to_string(),
        );
        match action {
            "todo.claim" => {
                claims += 1;
                if holder.insert(target, actor).is_some() {
                    double += 1;
                }
            }
            // A release by someone other than the holder is a double claim too.
            "todo.release" if holder.remove(&target).as_deref() != Some(actor.as_str()) => {
                double += 1;
            }
            _ => {}
        }
    }
    (double, claims)
}
