//! A project that starts in the database: the owner's login starts the goal and installs the
//! owner key there; an agent's login can do neither; an export of it verifies on files.

mod common;

use std::process::Command;

use common::{TempDir, bin, parse_json, pg, run_cmd};
use serde_json::Value;

/// Runs loopx with `--store url --json` and the owner key file `key`; (exit, answer).
fn lx(url: &str, key: &std::path::Path, args: &[&str]) -> (i32, Value) {
    let mut c = Command::new(bin());
    c.arg("--store").arg(url).args(args).arg("--json");
    c.env_remove("LOOPX_STORE")
        .env_remove("LOOPX_DIR")
        .env("LOOPX_OWNER_KEY", key)
        .env("HOME", key.parent().expect("a home"));
    let r = run_cmd(&mut c);
    let v = parse_json(&r, &args.join(" "));
    (r.code, v)
}

#[test]
fn the_owner_starts_a_goal_and_installs_the_key_in_the_database() {
    let Some(server) = pg::server_or_skip() else {
        return;
    };
    let url = pg::fresh_db(server);
    let home = TempDir::new("pg-start-home");
    let key = home.path.join("owner.key");
    let db = url.rsplit('/').next().expect("a database name").to_string();
    let (code, v) = lx(&url, &key, &["store", "migrate", "--roles", &db]);
    assert_eq!(code, 0, "{v}");
    let agent = format!("{db}_a1");
    let (code, _, err) = pg::psql(
        &url,
        &format!("CREATE ROLE {agent} LOGIN IN ROLE {db}_agent"),
    );
    assert_eq!(code, 0, "{err}");
    let as_agent = pg::with_user(&url, &agent, "");
    // The goal is the owner's: an agent's login is refused by the database itself.
    let (code, v) = lx(
        &as_agent,
        &key,
        &["start-goal", "--goal-text", "From the database"],
    );
    assert_eq!(code, 7, "{v}");
    let (code, v) = lx(
        &url,
        &key,
        &["start-goal", "--goal-text", "From the database"],
    );
    assert_eq!(code, 0, "{v}");
    let (code, v) = lx(&url, &key, &["start-goal", "--goal-text", "Again"]);
    assert_eq!(
        (code, v["error"]["code"].as_str()),
        (4, Some("goal_exists")),
        "{v}"
    );
    let (code, v) = lx(&as_agent, &key, &["owner", "init"]);
    assert_eq!(
        code, 7,
        "an agent's login cannot install the owner key: {v}"
    );
    let (code, v) = lx(&url, &key, &["owner", "init"]);
    assert_eq!(code, 0, "{v}");
    let (code, v) = lx(&url, &key, &["owner", "show"]);
    assert_eq!(
        (code, &v["owner"]["matches"]),
        (0, &Value::from(true)),
        "{v}"
    );
    let (code, v) = lx(
        &as_agent,
        &key,
        &["--agent", &agent, "gate", "open", "Ship?"],
    );
    assert_eq!(code, 0, "{v}");
    let g = v["gate"]["id"].as_str().expect("a gate id").to_string();
    let (code, v) = lx(&url, &key, &["gate", "approve", &g]);
    assert_eq!(code, 0, "{v}");
    // The export verifies on files: the owner's seal, the signed decision, the chain.
    let out = TempDir::new("pg-start-export");
    let dest = out.path.display().to_string();
    let (code, v) = lx(&url, &key, &["store", "export", "--to", &dest]);
    assert_eq!(code, 0, "{v}");
    let mut c = Command::new(bin());
    c.args(["--dir", &dest, "doctor", "--json"])
        .env("LOOPX_OWNER_KEY", &key)
        .env("HOME", &home.path);
    let r = run_cmd(&mut c);
    let v = parse_json(&r, "doctor");
    assert_eq!(
        (r.code, &v["findings"]),
        (0, &Value::Array(Vec::new())),
        "{v}"
    );
}
