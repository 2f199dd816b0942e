//! `loopx web` served where a phone reaches it: any address but loopback only with TLS (a
//! certificate made by openssl, checked by curl), and every project of the owner's list, each
//! device seeing only the projects it is enrolled in.

mod common;

use common::web::*;
use common::*;
use ed25519_dalek::SigningKey;
use loopx::kernel::GateStatus;
use serde_json::Value;

#[test]
fn a_non_loopback_address_without_tls_is_refused() {
    let p = Project::new("web-listen");
    let r = p.run(&["web", "--listen", "0.0.0.0:0"]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("TLS"), "{}", r.stderr);
    assert!(r.stderr.contains("ssh -L"), "{}", r.stderr);
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
