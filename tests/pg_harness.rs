//! The PostgreSQL test harness itself: a server is up, fresh databases are distinct and empty,
//! roles can log in over TCP, and psql reports errors.

mod common;

use common::pg;
use postgres::{Client, NoTls};

/// A client of the `postgres` crate (the store's driver) on `url`.
fn connect(url: &str) -> Client {
    Client::connect(url, NoTls).unwrap_or_else(|e| panic!("connect to {url}: {e}"))
}

/// The one value a query gives, as text.
fn one(client: &mut Client, sql: &str) -> String {
    client.query_one(sql, &[]).expect(sql).get(0)
}

#[test]
fn the_server_answers_as_superuser_and_psql_runs() {
    let Some(server) = pg::server_or_skip() else {
        return;
    };
    let (code, out, err) = pg::psql(&server.url, "select 1");
    assert_eq!((code, out.as_str(), err.as_str()), (0, "1\n", ""));
    let mut c = connect(&server.url);
    let sql = "select rolsuper::text from pg_roles where rolname = current_user";
    assert_eq!(one(&mut c, sql), "true");
    if let Some(dir) = &server.dir {
        assert!(dir.join("data/PG_VERSION").is_file(), "{}", dir.display());
        assert_eq!(one(&mut c, "show max_connections"), "200");
        assert_eq!(one(&mut c, "show fsync"), "on");
    }
}

#[test]
fn psql_stops_at_the_first_error() {
    let Some(server) = pg::server_or_skip() else {
        return;
    };
    let (code, out, err) = pg::psql(
        &server.url,
        "select 1;\nselect * from no_such_table;\nselect 2;",
    );
    assert_eq!(code, 3, "ON_ERROR_STOP exits 3: {out} {err}");
    assert_eq!(out, "1\n");
    assert!(err.contains("no_such_table"), "{err}");
}

#[test]
fn fresh_db_twice_gives_two_empty_databases() {
    let Some(server) = pg::server_or_skip() else {
        return;
    };
    let (a, b) = (pg::fresh_db(server), pg::fresh_db(server));
    assert_ne!(a, b);
    let (mut ca, mut cb) = (connect(&a), connect(&b));
    let (na, nb) = (
        one(&mut ca, "select current_database()::text"),
        one(&mut cb, "select current_database()::text"),
    );
    let prefix = format!("loopx_t_{}_", std::process::id());
    assert!(
        na.starts_with(&prefix) && nb.starts_with(&prefix),
        "{na} {nb}"
    );
    assert_ne!(na, nb);
    let tables = "select count(*)::text from pg_tables where schemaname = 'public'";
    assert_eq!(one(&mut cb, tables), "0");
    ca.batch_execute("create table t (x int); insert into t values (7)")
        .expect("a table in the first database");
    assert_eq!(one(&mut ca, "select x::text from t"), "7");
    assert_eq!(one(&mut cb, tables), "0", "the second database stays empty");
}

#[test]
fn fresh_db_from_threads_gives_distinct_databases() {
    let Some(server) = pg::server_or_skip() else {
        return;
    };
    let urls: Vec<String> = std::thread::scope(|s| {
        let hands: Vec<_> = (0..4).map(|_| s.spawn(|| pg::fresh_db(server))).collect();
        hands
            .into_iter()
            .map(|h| h.join().expect("a fresh db"))
            .collect()
    });
    let mut names: Vec<String> = urls
        .iter()
        .map(|u| one(&mut connect(u), "select current_database()::text"))
        .collect();
    names.sort();
    names.dedup();
    assert_eq!(names.len(), 4, "{urls:?}");
}

#[test]
fn a_role_made_by_a_test_logs_in_over_tcp() {
    let Some(server) = pg::server_or_skip() else {
        return;
    };
    let db = pg::fresh_db(server);
    let role = format!("loopx_r_{}", std::process::id());
    let made = format!("drop role if exists {role}; create role {role} login password 'pw'");
    assert_eq!(pg::psql(&db, &made).0, 0);
    let who = one(
        &mut connect(&pg::with_user(&db, &role, "pw")),
        "select current_user::text",
    );
    assert_eq!(who, role);
    let (code, _, err) = pg::psql(&server.url, &format!("drop role {role}"));
    assert_eq!(code, 0, "{err}");
}

#[test]
fn with_user_replaces_only_the_login() {
    let cases = [
        ("postgres://postgres@h:5/d", "postgres://r:pw@h:5/d"),
        ("postgres://u:p@h:5?x=1", "postgres://r:pw@h:5?x=1"),
        ("postgres://h:5/d", "postgres://r:pw@h:5/d"),
    ];
    for (url, want) in cases {
        assert_eq!(pg::with_user(url, "r", "pw"), want, "{url}");
    }
}

#[test]
fn with_db_replaces_only_the_database() {
    let cases = [
        ("postgres://u:p@h:5/postgres", "postgres://u:p@h:5/d"),
        (
            "postgres://u@h:5/x?sslmode=disable",
            "postgres://u@h:5/d?sslmode=disable",
        ),
        ("postgresql://h", "postgresql://h/d"),
        ("postgres:///x?host=/tmp/s", "postgres:///d?host=/tmp/s"),
    ];
    for (url, want) in cases {
        assert_eq!(pg::with_db(url, "d"), want, "{url}");
    }
}
