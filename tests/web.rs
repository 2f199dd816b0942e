//! `loopx web` through the real binary: its guards (Host, Origin, size, session, headers), a
//! phone paired with `loopx web pair` reading and deciding, each replay refused, revocation,
//! pairing URLs reused, expired or guessed, and the event streams bounded.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use common::web::*;
use common::*;
use loopx::kernel::{GateStatus, Ts};
use serde_json::{Value, json};

fn open_gate(p: &Project, question: &str) -> String {
    let v = p.ok_as("agent-1", &["gate", "open", question]);
    v["gate"]["id"].as_str().expect("gate id").to_string()
}

#[test]
fn the_guards_refuse_before_any_handler() {
    let p = Project::new("web-guards");
    let s = Server::start(&p, &[]);
    let origin = s.origin();
    // A wrong Host (DNS rebinding) is refused.
    let r = http(
        &s.addr,
        "GET",
        "/api/challenge",
        &[("Host", "evil.example:80")],
        None,
    );
    assert_eq!(r.status, 421, "{}", r.body);
    // A cross-site POST, and a POST without Origin.
    let body = r#"{"device":"x","challenge":"y","signature":"z"}"#;
    for o in ["http://evil.example", "null"] {
        let h = [("Host", s.addr.as_str()), ("Origin", o)];
        let r = http(&s.addr, "POST", "/api/session", &h, Some(body));
        assert_eq!(r.status, 403, "Origin {o}: {}", r.body);
    }
    let r = http(
        &s.addr,
        "POST",
        "/api/session",
        &[("Host", s.addr.as_str())],
        Some(body),
    );
    assert_eq!(r.status, 403, "{}", r.body);
    // An oversized body.
    let big = format!(
        r#"{{"token":"{}","key":"","label":""}}"#,
        "a".repeat(17 * 1024)
    );
    let h = [("Host", s.addr.as_str()), ("Origin", origin.as_str())];
    let r = http(&s.addr, "POST", "/api/pair", &h, Some(&big));
    assert_eq!(r.status, 413, "{}", r.body);
    // No session: nothing to read, no stream.
    for path in ["/api/state", "/api/events"] {
        assert_eq!(s.req("GET", path, None, None).status, 401, "{path}");
    }
    let forged = Some("ab".repeat(32));
    assert_eq!(
        s.req("GET", "/api/state", forged.as_deref(), None).status,
        401
    );
    // Every answer carries the headers.
    for path in ["/", "/pair", "/app.js", "/api/challenge", "/nowhere"] {
        let r = s.req("GET", path, None, None);
        let csp = r.headers.get("content-security-policy").expect("a CSP");
        assert!(
            csp.contains("default-src 'none'") && csp.contains("script-src 'self'"),
            "{csp}"
        );
        assert!(csp.contains("frame-ancestors 'none'"), "{csp}");
        assert_eq!(r.headers["x-content-type-options"], "nosniff", "{path}");
        assert_eq!(r.headers["referrer-policy"], "no-referrer", "{path}");
        if path.starts_with("/api/") {
            assert_eq!(r.headers["cache-control"], "no-store", "{path}");
        }
    }
}

#[test]
fn the_page_never_writes_html_from_data_and_weighs_little() {
    let js = include_str!("../src/web/assets/app.js");
    for bad in [
        "innerHTML",
        "outerHTML",
        "insertAdjacentHTML",
        "document.write",
        "eval(",
    ] {
        assert!(!js.contains(bad), "app.js uses {bad}");
    }
    let html = include_str!("../src/web/assets/index.html");
    assert!(
        !html.contains("<script>") && !html.contains("style="),
        "inline script or style"
    );
    for contract in [
        "data-gate",
        "dataset.gate",
        "dataset.action",
        "dataset.option",
    ] {
        assert!(
            js.contains(contract) || html.contains(contract),
            "{contract}"
        );
    }
    let p = Project::new("web-weight");
    let s = Server::start(&p, &[]);
    let total: usize = ["/", "/app.js", "/app.css"]
        .iter()
        .map(|path| s.req("GET", path, None, None).body.len())
        .sum();
    println!("page weight: {total} bytes (/, /app.js, /app.css)");
    assert!(total < 100 * 1024, "{total} bytes");
}

#[test]
fn a_paired_phone_reads_and_decides_and_every_replay_is_refused() {
    let p = Project::new("web-decide");
    let s = Server::start(&p, &[]);
    let k = phone(7);
    pair(&p, &s, "phone", &k);
    let cookie = sign_in(&s, "phone", &k).expect("the paired phone signs in");
    let evil = "<script>alert(1)</script><img src=x onerror=alert(2)>";
    let a = open_gate(&p, evil);
    let b = open_gate(&p, "Ship it?");
    // Agent text is served only as JSON, as it is.
    let r = s.req("GET", "/api/state", Some(&cookie), None);
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(r.headers["content-type"].starts_with("application/json"));
    let st = r.json();
    let gates = st["projects"][0]["gates"].as_array().unwrap().clone();
    let ga = gates
        .iter()
        .find(|g| g["id"] == a.as_str())
        .expect("gate a shown");
    assert_eq!(ga["question"], evil);
    let proj = name_of(&p);
    let path = |g: &str| format!("/api/gates/{proj}/{g}/decide");
    // A signature for gate A posted for gate B, with B's digest: not this device's over B.
    let da = decision(&p, &a, "phone", &k, GateStatus::Approved);
    let mut wrong = da.clone();
    wrong["digest"] = decision(&p, &b, "phone", &k, GateStatus::Approved)["digest"].clone();
    let r = s.req("POST", &path(&b), Some(&cookie), Some(&wrong));
    assert_eq!(r.status, 403, "{}", r.body);
    // ... and with A's own digest: B is not the gate it was shown.
    let r = s.req("POST", &path(&b), Some(&cookie), Some(&da));
    assert_eq!(r.status, 409, "{}", r.body);
    // The decision itself, then the same decision again.
    let r = s.req("POST", &path(&a), Some(&cookie), Some(&da));
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["decided_by"], "device:phone");
    let r = s.req("POST", &path(&a), Some(&cookie), Some(&da));
    assert_eq!(r.status, 409, "{}", r.body);
    // The question changed after signing.
    let db = decision(&p, &b, "phone", &k, GateStatus::Rejected);
    let file = p.lx(&format!("gates/{b}.toml"));
    let text = std::fs::read_to_string(&file).unwrap();
    std::fs::write(&file, text.replace("Ship it?", "Delete prod?")).unwrap();
    let r = s.req("POST", &path(&b), Some(&cookie), Some(&db));
    assert_eq!(r.status, 409, "{}", r.body);
    // A session decides only with its own device.
    let mut other = decision(&p, &b, "phone", &k, GateStatus::Rejected);
    other["device"] = json!("tablet");
    let r = s.req("POST", &path(&b), Some(&cookie), Some(&other));
    assert_eq!(r.status, 403, "{}", r.body);
    // The journal holds the device's signed decision, and doctor is content.
    let v = p.ok(&["gate", "show", &a]);
    assert_eq!(v["gate"]["decided_by"], "device:phone", "{v}");
    let (code, d) = p.json(&["doctor"]);
    assert_eq!(code, 0, "{d}");
}

#[test]
fn unknown_and_revoked_devices_read_nothing() {
    let p = Project::new("web-revoke");
    let s = Server::start(&p, &[]);
    let k = phone(3);
    // Before pairing: unknown.
    assert_eq!(sign_in(&s, "phone", &k), Err(403));
    pair(&p, &s, "phone", &k);
    // Another key under the paired name, and an unknown name.
    assert_eq!(sign_in(&s, "phone", &phone(4)), Err(403));
    assert_eq!(sign_in(&s, "tablet", &k), Err(403));
    let cookie = sign_in(&s, "phone", &k).expect("signed in");
    let g = open_gate(&p, "Deploy?");
    assert_eq!(s.req("GET", "/api/state", Some(&cookie), None).status, 200);
    let d = decision(&p, &g, "phone", &k, GateStatus::Approved);
    p.ok(&["owner", "devices", "revoke", "phone"]);
    // Revocation is immediate: the open session reads and decides nothing.
    assert_eq!(s.req("GET", "/api/state", Some(&cookie), None).status, 401);
    let r = s.req(
        "POST",
        &format!("/api/gates/{}/{g}/decide", name_of(&p)),
        Some(&cookie),
        Some(&d),
    );
    assert_eq!(r.status, 401, "{}", r.body);
    assert_eq!(sign_in(&s, "phone", &k), Err(403));
    let v = p.ok(&["gate", "show", &g]);
    assert_eq!(v["gate"]["status"], "pending", "{v}");
}

#[test]
fn a_pairing_url_reused_or_guessed_is_refused() {
    let p = Project::new("web-pairing");
    let s = Server::start(&p, &[]);
    let token = pair(&p, &s, "phone", &phone(5));
    let again = json!({"token": token, "key": key_hex(&phone(6)), "label": "thief"});
    let r = s.req("POST", "/api/pair", None, Some(&again));
    assert_eq!(r.status, 403, "reused: {}", r.body);
    for guess in [
        "00".repeat(16),
        "00".repeat(32),
        "zz".to_string(),
        String::new(),
    ] {
        let g = json!({"token": guess, "key": key_hex(&phone(6))});
        let r = s.req("POST", "/api/pair", None, Some(&g));
        assert_eq!(r.status, 404, "guessed {guess:?}: {}", r.body);
        let r = s.req("GET", &format!("/api/pair/status?t={guess}"), None, None);
        assert!(
            matches!(r.status, 404 | 400),
            "status of {guess:?}: {}",
            r.status
        );
    }
    // Expired: the pairing's deadline moved into the past before the phone sends its key.
    let mut c = p.cmd(&["web", "pair", "--name", "late", "--json"]);
    c.env_remove("XDG_STATE_HOME")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped());
    let mut child = c.spawn().unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut l = String::new();
    out.read_line(&mut l).unwrap();
    let url: Value = serde_json::from_str(&l).unwrap();
    let token = url["url"]
        .as_str()
        .unwrap()
        .rsplit("#t=")
        .next()
        .unwrap()
        .to_string();
    let dir = p.home.path.join(".local/state/loopx/web");
    let file = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|f| std::fs::read_to_string(f).is_ok_and(|t| t.contains("\"late\"")))
        .expect("the pairing's file");
    let mut v: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    v["expires_at"] = json!(Ts::now().0 - 1000);
    std::fs::write(&file, v.to_string()).unwrap();
    let late = json!({"token": token, "key": key_hex(&phone(7))});
    let r = s.req("POST", "/api/pair", None, Some(&late));
    assert_eq!(r.status, 403, "expired: {}", r.body);
    let st = s.req("GET", &format!("/api/pair/status?t={token}"), None, None);
    assert_eq!(st.json()["state"], "declined", "{}", st.body);
    assert_ne!(
        child.wait().unwrap().code(),
        Some(0),
        "web pair ends unenrolled"
    );
}

/// Opens an event stream with `cookie`; the connection (while it lasts) and its status.
fn stream(s: &Server, cookie: &str) -> (BufReader<TcpStream>, u16) {
    let mut t = TcpStream::connect(&s.addr).unwrap();
    t.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let req = format!(
        "GET /api/events HTTP/1.1\r\nHost: {}\r\nCookie: loopx_session={cookie}\r\n\r\n",
        s.addr
    );
    t.write_all(req.as_bytes()).unwrap();
    let mut r = BufReader::new(t);
    let mut l = String::new();
    r.read_line(&mut l).unwrap();
    let status = l
        .split_whitespace()
        .nth(1)
        .and_then(|x| x.parse().ok())
        .unwrap_or(0);
    (r, status)
}

/// Reads the stream until an event named `name`; how long it took.
fn until_event(r: &mut BufReader<TcpStream>, name: &str) -> Duration {
    let t0 = Instant::now();
    let mut l = String::new();
    loop {
        l.clear();
        assert!(r.read_line(&mut l).unwrap() > 0, "the stream ended");
        if l.trim_end() == format!("event: {name}") {
            return t0.elapsed();
        }
    }
}

#[test]
fn a_gate_an_agent_opens_is_heard_and_streams_are_bounded() {
    let p = Project::new("web-events");
    let s = Server::start(&p, &[]);
    let k = phone(8);
    pair(&p, &s, "phone", &k);
    let cookie = sign_in(&s, "phone", &k).unwrap();
    let (mut first, status) = stream(&s, &cookie);
    assert_eq!(status, 200);
    until_event(&mut first, "ready");
    let t0 = Instant::now();
    open_gate(&p, "Heard?");
    until_event(&mut first, "change");
    println!(
        "a gate opened is heard on the stream after {:?}",
        t0.elapsed()
    );
    let mut held = vec![first];
    while held.len() < 64 {
        let (r, st) = stream(&s, &cookie);
        assert_eq!(st, 200, "stream {}", held.len() + 1);
        held.push(r);
    }
    let rss_before = s.rss_kib();
    let mut refused = 0;
    for i in 0..1000 {
        let c = if i % 2 == 0 { cookie.as_str() } else { "00" };
        let (_, st) = stream(&s, c);
        assert!(matches!(st, 503 | 401), "attempt {i}: {st}");
        refused += 1;
    }
    let r = s.req("GET", "/api/challenge", None, None);
    assert_eq!(r.status, 200, "the server still answers");
    let rss = s.rss_kib();
    println!(
        "1,000 stream attempts over 64 held: {refused} refused; VmRSS {rss_before} KiB before, {rss} KiB after"
    );
    assert!(rss < 100 * 1024, "VmRSS {rss} KiB");
    drop(held);
    // The places come back once the streams close.
    std::thread::sleep(Duration::from_millis(300));
    let (_, st) = stream(&s, &cookie);
    assert_eq!(st, 200);
}

#[test]
fn a_flood_of_challenges_keeps_nobody_from_signing_in_and_a_challenge_works_once() {
    let p = Project::new("web-flood");
    let s = Server::start(&p, &[]);
    let k = phone(6);
    pair(&p, &s, "phone", &k);
    for _ in 0..2_000 {
        assert_eq!(s.req("GET", "/api/challenge", None, None).status, 200);
    }
    sign_in(&s, "phone", &k).expect("the owner signs in after 2,000 challenges");
    // A signed challenge opens one session: the same body again is refused.
    let c = s.req("GET", "/api/challenge", None, None).json()["challenge"]
        .as_str()
        .unwrap()
        .to_string();
    let msg = loopx::kernel::device::session_message(&c, &s.origin(), "phone");
    let body = serde_json::json!({"device": "phone", "challenge": c, "signature": sig(&k, &msg)});
    assert_eq!(s.req("POST", "/api/session", None, Some(&body)).status, 200);
    assert_eq!(s.req("POST", "/api/session", None, Some(&body)).status, 403);
    // A challenge made up, or with its tag changed, is refused.
    let forged = format!("{}{}", &c[..79], if c.ends_with('0') { '1' } else { '0' });
    let msg = loopx::kernel::device::session_message(&forged, &s.origin(), "phone");
    let body =
        serde_json::json!({"device": "phone", "challenge": forged, "signature": sig(&k, &msg)});
    assert_eq!(s.req("POST", "/api/session", None, Some(&body)).status, 403);
}
