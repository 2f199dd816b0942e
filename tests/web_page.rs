//! The page's script builds the very bytes the kernel verifies: `app.js` run under Node (its
//! WebCrypto) on gates with awkward text, its digests, messages and Ed25519 signatures checked
//! against `kernel::device`.

mod common;

use std::process::Command;

use common::TempDir;
use loopx::kernel::device::{Decided, DeviceKey, gate_digest, session_message};
use loopx::kernel::{Gate, GateStatus};
use serde_json::{Value, json};

/// Loads app.js with a stand-in page, and prints what it computes for the case on stdin.
const HARNESS: &str = r#"
const fs = require("fs");
globalThis.window = globalThis;
if (!globalThis.crypto) globalThis.crypto = require("crypto").webcrypto; // Node 18
globalThis.document = { getElementById: () => ({}) };
globalThis.location = { hash: "", pathname: "/", origin: "http://127.0.0.1:1" };
const src = fs.readFileSync(process.argv[2], "utf8");
const m = new Function(src + "\nreturn { fields, hex, gateDigest, decidedMessage, sessionMessage, actionDigest };")();
(async () => {
  const c = JSON.parse(fs.readFileSync(0, "utf8"));
  const digest = await m.gateDigest(c.gate);
  const d = { ...c.decided, digest };
  const msg = m.decidedMessage(d);
  const keys = await crypto.subtle.generateKey({ name: "Ed25519" }, false, ["sign", "verify"]);
  const raw = await crypto.subtle.exportKey("raw", keys.publicKey);
  const sig = await crypto.subtle.sign({ name: "Ed25519" }, keys.privateKey, msg);
  const session = m.sessionMessage(c.challenge, c.origin, c.decided.device);
  const action = c.gate.action ? await m.actionDigest(c.gate.action) : null;
  console.log(JSON.stringify({ digest, message: m.hex(msg), key: m.hex(raw),
    signature: m.hex(sig), session: m.hex(session), action }));
})().catch((e) => { console.error(e); process.exit(1); });
"#;

fn hex(b: &[u8]) -> String {
    loopx::kernel::authority::to_hex(b)
}

/// What app.js computes for `case`.
fn run_page(case: &Value) -> Value {
    let tmp = TempDir::new("web-page");
    let h = tmp.path.join("harness.js");
    std::fs::write(&h, HARNESS).unwrap();
    let js = concat!(env!("CARGO_MANIFEST_DIR"), "/src/web/assets/app.js");
    let mut child = Command::new("node")
        .arg(&h)
        .arg(js)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("node runs (Debian's nodejs)");
    use std::io::Write as _;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(case.to_string().as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "node failed");
    let text = String::from_utf8(out.stdout).unwrap();
    serde_json::from_str(text.lines().last().unwrap()).unwrap()
}

#[test]
fn the_page_signs_the_bytes_the_kernel_verifies() {
    let cases = [
        json!({"id": "g-abc234", "question": "Ship <b>it</b>? ünïcödé 🚀\n\"quoted\"",
               "options": ["yes", "no, later", ""], "blocks": ["t-aaaaaa", "t-bbbbbb"],
               "global": false, "action": null}),
        json!({"id": "g-zz2222", "question": "", "options": [], "blocks": [], "global": true,
               "action": {"kind": "cmd", "sha256": "ab".repeat(32),
                          "argv": ["sh", "-c", "echo 'ünï' > out.txt", ""]}}),
        json!({"id": "g-pp3333", "question": "Post it?", "options": [], "blocks": [],
               "global": false, "action": {"kind": "payload", "sha256": "cd".repeat(32),
                          "text": "héllo\nwörld\u{0}"}}),
    ];
    for g in cases {
        let mut gate = Gate::pending("x", String::new(), "agent", loopx::kernel::Ts(0));
        gate.id = g["id"].as_str().unwrap().into();
        gate.question = g["question"].as_str().unwrap().into();
        gate.options = serde_json::from_value(g["options"].clone()).unwrap();
        gate.blocks = serde_json::from_value(g["blocks"].clone()).unwrap();
        gate.global = g["global"].as_bool().unwrap();
        if !g["action"].is_null() {
            gate.action = Some(serde_json::from_value(g["action"].clone()).unwrap());
        }
        let decided = json!({"goal": "goal-x7k2qq", "gate": gate.id, "status": "rejected", "option": "no, later",
                             "reason": "wait — for Monday ✓", "decided_at": 1_765_000_000_123_i64,
                             "device": "phone-2"});
        let case = json!({"gate": g, "decided": decided, "challenge": "c0ffee",
                          "origin": "http://127.0.0.1:1"});
        let out = run_page(&case);
        let digest = gate_digest(&gate);
        assert_eq!(out["digest"], digest.as_str(), "the digest of {}", gate.id);
        if let Some(a) = &gate.action {
            // The page refuses to sign an approval whose shown action hashes otherwise.
            assert_eq!(
                out["action"],
                a.digest().as_str(),
                "the action digest of {}",
                gate.id
            );
        }
        let d = Decided {
            goal: "goal-x7k2qq",
            gate: &gate.id,
            digest: &digest,
            status: GateStatus::Rejected,
            option: "no, later",
            reason: "wait — for Monday ✓",
            at_ms: 1_765_000_000_123,
            device: "phone-2",
        };
        assert_eq!(out["message"], hex(&d.message()).as_str());
        let s = session_message("c0ffee", "http://127.0.0.1:1", "phone-2");
        assert_eq!(out["session"], hex(&s).as_str());
        let key = DeviceKey::parse(out["key"].as_str().unwrap()).expect("a raw Ed25519 key");
        assert!(
            key.verify(&d.message(), out["signature"].as_str().unwrap()),
            "WebCrypto's signature verifies strictly"
        );
    }
}
