//! `loopx web` measured through the real binary: the page's weight, a gate on the page after an
//! agent opens it (commit to `/api/state` holding it, heard through the event stream), a
//! decision's round trip, and the server's memory with 50 phones' sessions and streams open.
//!
//! usage: cargo bench --bench web

#[path = "../tests/common/mod.rs"]
mod common;

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use common::Project;
use common::web::*;
use loopx::kernel::device::{Decided, gate_digest};
use loopx::kernel::{GateStatus, Ts};
use loopx::store::{FileStore, Store};
use serde_json::json;

const RUNS: usize = 20;

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// An event stream held open with `cookie`.
fn stream(s: &Server, cookie: &str) -> BufReader<TcpStream> {
    let mut t = TcpStream::connect(&s.addr).unwrap();
    let req = format!(
        "GET /api/events HTTP/1.1\r\nHost: {}\r\nCookie: loopx_session={cookie}\r\n\r\n",
        s.addr
    );
    t.write_all(req.as_bytes()).unwrap();
    t.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    BufReader::new(t)
}

fn until_change(r: &mut BufReader<TcpStream>) {
    let mut l = String::new();
    loop {
        l.clear();
        assert!(r.read_line(&mut l).unwrap() > 0, "the stream ended");
        if l.trim_end() == "event: change" {
            return;
        }
    }
}

fn main() {
    let p = Project::new("bench-web");
    let s = Server::start(&p, &[]);
    let k = phone(1);
    pair(&p, &s, "phone", &k);
    let cookie = sign_in(&s, "phone", &k).unwrap();
    let weight: usize = ["/", "/app.js", "/app.css"]
        .iter()
        .map(|path| s.req("GET", path, None, None).body.len())
        .sum();
    println!("page weight: {weight} bytes (/, /app.js, /app.css)");

    let mut ev = stream(&s, &cookie);
    let mut seen = Vec::new();
    let mut gates = Vec::new();
    for i in 0..RUNS {
        let v = p.ok_as("agent-1", &["gate", "open", &format!("Gate {i}?")]);
        let id = v["gate"]["id"].as_str().unwrap().to_string();
        let opened: Ts = serde_json::from_value(v["gate"]["opened_at"].clone()).unwrap();
        loop {
            until_change(&mut ev);
            let st = s.req("GET", "/api/state", Some(&cookie), None).json();
            let gs = st["projects"][0]["gates"].as_array().unwrap().clone();
            if gs.iter().any(|g| g["id"] == id.as_str()) {
                seen.push((now_ms() - opened.0) as f64);
                break;
            }
        }
        gates.push(id);
    }
    println!(
        "a gate in /api/state after its commit, heard on the stream: median {} ms over {RUNS}",
        median(seen)
    );

    let proj = p.root().file_name().unwrap().to_string_lossy().into_owned();
    let mut trips = Vec::new();
    for g in &gates {
        let snap = FileStore::at(p.root()).load().unwrap();
        let digest = gate_digest(&snap.gates[g]);
        let at = Ts::now().0;
        let d = Decided {
            goal: &snap.config.goal.id,
            gate: g,
            digest: &digest,
            status: GateStatus::Approved,
            option: "",
            reason: "",
            at_ms: at,
            device: "phone",
        };
        let body = json!({"device": "phone", "status": "approved", "option": "", "reason": "",
                          "digest": digest, "decided_at": at, "signature": sig(&k, &d.message())});
        let t0 = Instant::now();
        let r = s.req(
            "POST",
            &format!("/api/gates/{proj}/{g}/decide"),
            Some(&cookie),
            Some(&body),
        );
        trips.push(t0.elapsed().as_secs_f64() * 1000.0);
        assert_eq!(r.status, 200, "{}", r.body);
    }
    println!(
        "a decision's round trip (POST to its commit's answer): median {:.1} ms over {RUNS}",
        median(trips)
    );

    let idle = s.rss_kib();
    let mut phones = Vec::new();
    for _ in 0..50 {
        let c = sign_in(&s, "phone", &k).unwrap();
        assert_eq!(s.req("GET", "/api/state", Some(&c), None).status, 200);
        phones.push(stream(&s, &c));
    }
    std::thread::sleep(Duration::from_millis(300));
    println!(
        "VmRSS: {idle} KiB with one page; {} KiB with 50 more sessions, each with its event stream open",
        s.rss_kib()
    );
}
