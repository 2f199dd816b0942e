//! Devices the owner enrolls (`loopx web pair`, `loopx owner devices`), and what a device's
//! decision counts for: the real binary pairs and revokes; the phone's side is simulated here
//! with its own Ed25519 key (tests/web.rs drives it over HTTP, tests/web_browser.rs in Chromium).

mod common;

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdout, Stdio};

use common::*;
use ed25519_dalek::{Signer, SigningKey};
use loopx::kernel::authority::to_hex;
use loopx::kernel::device::{Decided, DeviceKey, gate_digest};
use loopx::kernel::ops::DeviceDecision;
use loopx::kernel::{GateStatus, Ts};
use loopx::runtime::pairing;
use loopx::store::{FileStore, Store};
use serde_json::Value;

fn state_dir(p: &Project) -> PathBuf {
    p.home.path.join(".local/state/loopx/web")
}

/// `web pair --json` started; its first line is read.
struct Pairing {
    child: Child,
    out: BufReader<ChildStdout>,
    token: String,
}

fn start_pair(p: &Project, name: &str) -> Pairing {
    let mut c = p.cmd(&[
        "web",
        "pair",
        "--url",
        "http://127.0.0.1:9",
        "--name",
        name,
        "--json",
    ]);
    c.env_remove("XDG_STATE_HOME")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped());
    let mut child = c.spawn().expect("loopx web pair starts");
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let first = line(&mut out);
    let url = first["url"]
        .as_str()
        .expect("the first line has the url")
        .to_string();
    assert!(url.starts_with("http://127.0.0.1:9/pair#t="), "{url}");
    let token = url.rsplit("#t=").next().unwrap().to_string();
    Pairing { child, out, token }
}

fn line(out: &mut BufReader<ChildStdout>) -> Value {
    let mut l = String::new();
    out.read_line(&mut l).expect("a line");
    serde_json::from_str(&l).unwrap_or_else(|e| panic!("not JSON ({e}): {l:?}"))
}

fn phone(seed: u8) -> SigningKey {
    SigningKey::from_bytes(&[seed; 32])
}

fn hex_of(k: &SigningKey) -> String {
    to_hex(k.verifying_key().as_bytes())
}

/// Pairs `k` as `name`, answering `answer` in the terminal; returns the exit code and output.
fn pair(p: &Project, name: &str, k: &SigningKey, answer: &str) -> (i32, Value) {
    let mut pr = start_pair(p, name);
    let sent = pairing::submit(
        &state_dir(p),
        &pr.token,
        &hex_of(k),
        Some("Test phone"),
        Ts::now(),
    )
    .expect("the phone's key is taken");
    assert_eq!(sent.state, pairing::State::Submitted);
    let ask = line(&mut pr.out);
    let fp = DeviceKey::parse(&hex_of(k)).unwrap().fingerprint();
    assert_eq!(
        ask["fingerprint"],
        fp.as_str(),
        "the terminal shows the phone's fingerprint"
    );
    let mut stdin = pr.child.stdin.take().unwrap();
    writeln!(stdin, "{answer}").unwrap();
    drop(stdin);
    let last = line(&mut pr.out);
    let code = pr.child.wait().unwrap().code().unwrap_or(-1);
    // A reused URL is refused once the pairing was answered.
    let again = pairing::submit(&state_dir(p), &pr.token, &hex_of(k), None, Ts::now());
    assert_eq!(again.unwrap_err().code, loopx::kernel::Code::Denied);
    (code, last)
}

fn decide(p: &Project, name: &str, k: &SigningKey, gate: &str) -> loopx::kernel::Result<()> {
    let store = FileStore::at(p.root());
    let snap = store.load()?;
    let digest = gate_digest(&snap.gates[gate]);
    let now = Ts::now();
    let d = Decided {
        goal: &snap.config.goal.id,
        gate,
        digest: &digest,
        status: GateStatus::Approved,
        option: "",
        reason: "",
        at_ms: now.0,
        device: name,
    };
    let dd = DeviceDecision {
        device: name.into(),
        gate: gate.into(),
        status: GateStatus::Approved,
        option: None,
        reason: None,
        digest: digest.clone(),
        at_ms: now.0,
        signature: to_hex(&k.sign(&d.message()).to_bytes()),
    };
    loopx::flows::device::decide(&store, &dd, now).map(|_| ())
}

fn pending(p: &Project) -> Vec<String> {
    let v = p.ok(&["gate", "list", "--pending"]);
    let ids = v["gates"].as_array().expect("gates").iter();
    ids.map(|g| g["id"].as_str().unwrap().to_string()).collect()
}

#[test]
fn the_owner_enrolls_a_phone_it_decides_and_a_revoke_ends_it() {
    let p = Project::new("devices-pair");
    let k = phone(9);
    let (code, out) = pair(&p, "phone", &k, "y");
    assert_eq!(code, 0, "{out}");
    assert_eq!(out["device"]["name"], "phone", "{out}");
    let listed = p.ok(&["owner", "devices"]);
    assert_eq!(listed["devices"][0]["name"], "phone", "{listed}");
    assert_eq!(listed["devices"][0]["key"], hex_of(&k).as_str());

    let gate = p.gate("Deploy to production?", &[]);
    decide(&p, "phone", &k, &gate).expect("an enrolled phone decides");
    let g = p.ok(&["gate", "show", &gate]);
    assert_eq!(g["gate"]["status"], "approved", "{g}");
    assert_eq!(g["gate"]["decided_by"], "device:phone");
    assert!(!pending(&p).contains(&gate));
    let line = p
        .journal()
        .into_iter()
        .find(|e| e["action"] == "gate.approve")
        .expect("the decision is journaled");
    assert_eq!(line["actor"], "device:phone");
    assert!(
        line["data"]["signature"]
            .as_str()
            .is_some_and(|s| s.len() == 128)
    );
    let (code, doc) = p.json(&["doctor"]);
    assert_eq!(code, 0, "doctor is healthy with a device's decision: {doc}");

    // The same decision again, and a gate decided already.
    assert_eq!(
        decide(&p, "phone", &k, &gate).unwrap_err().code,
        loopx::kernel::Code::AlreadyDecided
    );
    p.ok(&["owner", "devices", "revoke", "phone"]);
    assert!(
        pending(&p).contains(&gate),
        "a revoked device's decision counts as pending"
    );
    let other = p.gate("Another question?", &[]);
    assert_eq!(
        decide(&p, "phone", &k, &other).unwrap_err().code,
        loopx::kernel::Code::Denied
    );
    let (code, doc) = p.json(&["doctor"]);
    assert_eq!(code, 0, "a revoked device's decision is a warning: {doc}");
    assert!(doc.to_string().contains("revoked"), "{doc}");
    // The revoked key is never enrolled again, so its old decision stays void.
    let (code, out) = pair(&p, "phone", &k, "y");
    assert_eq!(code, exit_of("denied"), "{out}");
    assert!(pending(&p).contains(&gate));
}

#[test]
fn pairing_needs_the_owner_and_a_yes() {
    let p = Project::new("devices-no");
    let (code, out) = pair(&p, "phone", &phone(4), "n");
    assert_eq!(code, exit_of("denied"), "{out}");
    assert_eq!(
        p.ok(&["owner", "devices"])["devices"],
        serde_json::json!([])
    );

    let mut c = p.cmd(&["web", "pair", "--url", "http://127.0.0.1:9", "--json"]);
    c.env("LOOPX_OWNER_KEY", p.home.path.join("no-such-key"));
    let r = run_cmd(&mut c);
    assert_eq!(r.code, exit_of("denied"), "{}", r.stderr);
}

#[test]
fn a_pairing_url_guessed_or_expired_is_refused() {
    let p = Project::new("devices-url");
    let dir = state_dir(&p);
    let mut pr = start_pair(&p, "phone");
    let guessed = "0".repeat(32);
    let e = pairing::submit(&dir, &guessed, &hex_of(&phone(5)), None, Ts::now()).unwrap_err();
    assert_eq!(e.code, loopx::kernel::Code::NotFound);
    let e = pairing::submit(&dir, "../../etc", &hex_of(&phone(5)), None, Ts::now()).unwrap_err();
    assert_eq!(e.code, loopx::kernel::Code::NotFound);
    let later = Ts(Ts::now().0 + pairing::TTL_MS + 1);
    let e = pairing::submit(&dir, &pr.token, &hex_of(&phone(5)), None, later).unwrap_err();
    assert_eq!(e.code, loopx::kernel::Code::Denied, "{}", e.message);
    pr.child.kill().unwrap();
    pr.child.wait().unwrap();
}

#[test]
fn a_device_added_by_hand_decides_nothing() {
    let p = Project::new("devices-hand");
    let k = phone(6);
    let toml = p.lx("loopx.toml");
    let mut text = std::fs::read_to_string(&toml).unwrap();
    text.push_str(&format!(
        "\n[devices.mallory]\nkey = \"{}\"\nenrolled_at = \"2026-01-01T00:00:00Z\"\n",
        hex_of(&k)
    ));
    std::fs::write(&toml, text).unwrap();
    let gate = p.gate("Spend the budget?", &[]);
    assert_eq!(
        decide(&p, "mallory", &k, &gate).unwrap_err().code,
        loopx::kernel::Code::Denied
    );
    let v = p.ok(&["owner", "devices"]);
    assert_eq!(v["devices"], serde_json::json!([]), "{v}");
    assert!(v["owner_notes"].to_string().contains("mallory"), "{v}");
}

#[test]
fn a_key_swapped_in_after_the_owner_saw_its_fingerprint_is_not_enrolled() {
    let p = Project::new("devices-swap");
    let dir = state_dir(&p);
    let mut pr = start_pair(&p, "phone");
    pairing::submit(&dir, &pr.token, &hex_of(&phone(7)), None, Ts::now()).unwrap();
    let ask = line(&mut pr.out);
    assert!(ask["fingerprint"].as_str().is_some(), "{ask}");
    // An agent rewrites the pairing file while the owner compares fingerprints.
    let file = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|f| f.file_name().unwrap().to_str().unwrap().starts_with("p-"))
        .unwrap();
    let text = std::fs::read_to_string(&file).unwrap();
    let swapped = text.replace(&hex_of(&phone(7)), &hex_of(&phone(8)));
    assert_ne!(text, swapped);
    std::fs::write(&file, swapped).unwrap();
    let mut stdin = pr.child.stdin.take().unwrap();
    writeln!(stdin, "y").unwrap();
    drop(stdin);
    let last = line(&mut pr.out);
    let code = pr.child.wait().unwrap().code().unwrap_or(-1);
    assert_eq!(code, exit_of("changed"), "{last}");
    assert_eq!(
        p.ok(&["owner", "devices"])["devices"],
        serde_json::json!([])
    );
}

#[test]
fn a_fifo_planted_as_the_pairing_lock_fails_fast() {
    let p = Project::new("devices-fifo");
    let dir = state_dir(&p);
    std::fs::create_dir_all(&dir).unwrap();
    let made = std::process::Command::new("mkfifo")
        .arg(dir.join("lock"))
        .status()
        .unwrap();
    assert!(made.success());
    let started = std::time::Instant::now();
    let mut c = p.cmd(&["web", "pair", "--url", "http://127.0.0.1:9", "--json"]);
    c.env_remove("XDG_STATE_HOME").stdin(Stdio::null());
    let r = run_cmd(&mut c);
    assert_ne!(r.code, 0, "{}", r.stdout);
    assert!(started.elapsed() < std::time::Duration::from_secs(10));
}
