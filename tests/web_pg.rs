//! `loopx web` on the PostgreSQL store: a phone paired through `loopx web pair`, a gate an agent
//! opens heard through the database's `LISTEN`, and the phone's decision committed there. Skips
//! with a message when PostgreSQL is absent.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::time::Duration;

use common::TempDir;
use common::pg::{self, ok, project_in};
use common::web::*;
use loopx::kernel::device::Decided;
use loopx::kernel::{GateStatus, Ts};
use serde_json::json;

#[test]
fn a_phone_decides_a_gate_heard_through_the_database() {
    let Some(server) = pg::server_or_skip() else {
        return;
    };
    let p = project_in("web-pg", &pg::fresh_db(server));
    let home = TempDir::new("web-pg-home");
    let mut c = p.cmd(&["web", "--listen", "127.0.0.1:0", "--json"]);
    c.env("HOME", &home.path);
    let s = Server::start_with(c);
    let k = phone(21);
    let mut pc = p.cmd(&["web", "pair", "--name", "phone", "--json"]);
    pc.env("HOME", &home.path);
    pair_with(pc, &s, "phone", &k);
    let cookie = sign_in(&s, "phone", &k).expect("signed in over the database");

    let mut t = TcpStream::connect(&s.addr).unwrap();
    t.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let req = format!(
        "GET /api/events HTTP/1.1\r\nHost: {}\r\nCookie: loopx_session={cookie}\r\n\r\n",
        s.addr
    );
    t.write_all(req.as_bytes()).unwrap();
    let mut ev = BufReader::new(t);
    let mut next = |name: &str| {
        let mut l = String::new();
        loop {
            l.clear();
            assert!(ev.read_line(&mut l).unwrap() > 0, "the stream ended");
            if l.trim_end() == format!("event: {name}") {
                return;
            }
        }
    };
    next("ready");
    let v = ok(
        p.lx(&[
            "--json",
            "--agent",
            "agent-y",
            "gate",
            "open",
            "Over the wire?",
        ]),
        "gate open",
    );
    let g = v["gate"]["id"].as_str().unwrap().to_string();
    next("change");
    let st = s.req("GET", "/api/state", Some(&cookie), None).json();
    let shown = st["projects"][0]["gates"].as_array().unwrap().clone();
    let gate = shown
        .iter()
        .find(|x| x["id"] == g.as_str())
        .expect("the new gate shown");
    let digest = gate["digest"].as_str().unwrap().to_string();
    let at = Ts::now().0;
    let goal = gate["goal"].as_str().expect("the gate's goal").to_string();
    let d = Decided {
        goal: &goal,
        gate: &g,
        digest: &digest,
        status: GateStatus::Approved,
        option: "",
        reason: "",
        at_ms: at,
        device: "phone",
    };
    let body = json!({"device": "phone", "status": "approved", "digest": digest,
                      "decided_at": at, "signature": sig(&k, &d.message())});
    let project = st["projects"][0]["name"].as_str().unwrap().to_string();
    let r = s.req(
        "POST",
        &format!("/api/gates/{project}/{g}/decide"),
        Some(&cookie),
        Some(&body),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let v = ok(p.lx(&["--json", "gate", "list"]), "gate list");
    let row = v["gates"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["id"] == g.as_str())
        .cloned();
    let row = row.expect("the gate listed");
    assert_eq!(row["status"], "approved", "{row}");
    assert_eq!(row["decided_by"], "device:phone", "{row}");
}
