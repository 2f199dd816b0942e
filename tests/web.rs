//! `loopx web` through the real binary: its guards (Host, Origin, size, session, headers), a
//! phone paired with `loopx web pair` reading and deciding, each replay refused, revocation,
//! pairing URLs reused or guessed, and the event streams bounded.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use common::web::*;
use common::*;
use ed25519_dalek::SigningKey;
use loopx::kernel::device::{Decided, gate_digest};
use loopx::kernel::{GateStatus, Ts};
use loopx::store::{FileStore, Store};
use serde_json::{Value, json};

/// A device's decision of `gate` as the page posts it, signed by `k` over the gate as it is.
fn decision(p: &Project, gate: &str, name: &str, k: &SigningKey, status: GateStatus) -> Value {
    let snap = FileStore::at(p.root()).load().unwrap();
    let digest = gate_digest(&snap.gates[gate]);
    let at = Ts::now().0;
    let reason = if status == GateStatus::Rejected {
        "not now"
    } else {
        ""
    };
    let d = Decided {
        gate,
        digest: &digest,
        status,
        option: "",
        reason,
        at_ms: at,
        device: name,
    };
    json!({"device": name, "status": status.as_str(), "option": "", "reason": reason,
           "digest": digest, "decided_at": at, "signature": sig(k, &d.message())})
}

fn open_gate(p: &Project, question: &str) -> String {
    let v = p.ok_as("agent-1", &["gate", "open", question]);
    v["gate"]["id"].as_str().expect("gate id").to_string()
}

/// The project's name as the server shows it (its directory's).
fn name_of(p: &Project) -> String {
    p.root().file_name().unwrap().to_string_lossy().into_owned()
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
fn a_non_loopback_address_without_tls_is_refused() {
    let p = Project::new("web-listen");
    let r = p.run(&["web", "--listen", "0.0.0.0:0"]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("TLS"), "{}", r.stderr);
    assert!(r.stderr.contains("ssh -L"), "{}", r.stderr);
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

/// Runs curl against the TLS server, trusting only `ca`; the answer's head and body.
fn curl_tls(ca: &std::path::Path, url: &str) -> String {
    let out = std::process::Command::new("curl")
        .args(["-sS", "-i", "--max-time", "10", "--cacert"])
        .arg(ca)
        .arg(url)
        .output()
        .expect("curl runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn tls_serves_with_the_given_certificate_on_any_address() {
    let p = Project::new("web-tls");
    let (cert, key) = (p.home.path.join("cert.pem"), p.home.path.join("key.pem"));
    let made = std::process::Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
        ])
        .args(["-nodes", "-days", "1", "-subj", "/CN=localhost"])
        .args(["-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"])
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .output()
        .expect("openssl makes a certificate");
    assert!(
        made.status.success(),
        "{}",
        String::from_utf8_lossy(&made.stderr)
    );
    let (c, k) = (cert.to_str().unwrap(), key.to_str().unwrap());
    let s = Server::start(&p, &["--tls-cert", c, "--tls-key", k]);
    let port = s.addr.rsplit(':').next().unwrap();
    let head = curl_tls(&cert, &format!("https://localhost:{port}/api/challenge"));
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(head.contains("content-security-policy"), "{head}");
    // Plain HTTP on the TLS port gets no answer.
    let r = http(
        &s.addr,
        "GET",
        "/api/challenge",
        &[("Host", s.addr.as_str())],
        None,
    );
    assert_ne!(r.status, 200);
    // Any address is allowed with TLS; a key that is not PEM is refused.
    let r = p.run(&[
        "web",
        "--listen",
        "0.0.0.0:0",
        "--tls-cert",
        c,
        "--tls-key",
        c,
    ]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("key"), "{}", r.stderr);
}

#[test]
fn every_project_of_the_list_each_device_seeing_its_own() {
    let a = Project::new("web-all-a");
    let b = Project::new("web-all-b");
    a.ok(&["projects", "add"]);
    a.ok(&["projects", "add", b.root().to_str().unwrap()]);
    let s = Server::start(&a, &["--all"]);
    let (phone_k, tablet_k) = (phone(11), phone(12));
    pair(&a, &s, "phone", &phone_k);
    let mut in_b = b.cmd(&["web", "pair", "--name", "tablet", "--json"]);
    in_b.env("HOME", &a.home.path);
    pair_with(in_b, &s, "tablet", &tablet_k);
    let gb = b.ok_as("agent-1", &["gate", "open", "Only B?"])["gate"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let shown = |k: &SigningKey, name: &str| -> Vec<Value> {
        let c = sign_in(&s, name, k).expect("signed in");
        let st = s.req("GET", "/api/state", Some(&c), None).json();
        st["projects"].as_array().unwrap().clone()
    };
    let pa = shown(&phone_k, "phone");
    assert_eq!(pa.len(), 1, "{pa:?}");
    assert_eq!(pa[0]["name"], name_of(&a).as_str());
    let pb = shown(&tablet_k, "tablet");
    assert_eq!(pb.len(), 1, "{pb:?}");
    assert_eq!(pb[0]["name"], name_of(&b).as_str());
    assert_eq!(pb[0]["gates"][0]["id"], gb.as_str());
    // The phone cannot decide the other project's gate.
    let c = sign_in(&s, "phone", &phone_k).unwrap();
    let d = decision(&b, &gb, "phone", &phone_k, GateStatus::Approved);
    let r = s.req(
        "POST",
        &format!("/api/gates/{}/{gb}/decide", name_of(&b)),
        Some(&c),
        Some(&d),
    );
    assert_eq!(r.status, 404, "{}", r.body);
    let c = sign_in(&s, "tablet", &tablet_k).unwrap();
    let d = decision(&b, &gb, "tablet", &tablet_k, GateStatus::Approved);
    let r = s.req(
        "POST",
        &format!("/api/gates/{}/{gb}/decide", name_of(&b)),
        Some(&c),
        Some(&d),
    );
    assert_eq!(r.status, 200, "{}", r.body);
}
