//! Helpers for `loopx web` tests: the real server on a free port, hand-written HTTP/1.1, and a
//! phone simulated with its own Ed25519 key (paired through `loopx web pair --json`).

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Stdio};
use std::time::Duration;

use ed25519_dalek::{Signer, SigningKey};
use loopx::kernel::authority::to_hex;
use loopx::kernel::device::{Decided, gate_digest, session_message};
use loopx::kernel::{GateStatus, Ts};
use loopx::store::{FileStore, Store};
use serde_json::{Value, json};

use super::Project;

/// A running `loopx web`, stopped on drop.
pub struct Server {
    pub child: Child,
    /// `127.0.0.1:PORT`.
    pub addr: String,
}

impl Server {
    /// `loopx web --listen 127.0.0.1:0 --json` in the project, with `extra` flags.
    pub fn start(p: &Project, extra: &[&str]) -> Server {
        let mut args = vec!["web", "--listen", "127.0.0.1:0", "--json"];
        args.extend_from_slice(extra);
        Server::start_with(p.cmd(&args))
    }

    /// `loopx web ...` as `c` runs it (its first line of output is `{"url": ...}`).
    pub fn start_with(mut c: std::process::Command) -> Server {
        c.env_remove("XDG_STATE_HOME")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        let mut child = c.spawn().expect("loopx web starts");
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let mut l = String::new();
        out.read_line(&mut l).expect("loopx web prints its URL");
        let v: Value = serde_json::from_str(&l).unwrap_or_else(|e| panic!("{e}: {l:?}"));
        let url = v["url"].as_str().expect("url").to_string();
        let addr = url.split_once("://").expect("a URL").1.to_string();
        Server { child, addr }
    }

    /// The page's origin.
    pub fn origin(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The server's resident memory in KiB (VmRSS).
    pub fn rss_kib(&self) -> u64 {
        let s = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap();
        let line = s.lines().find(|l| l.starts_with("VmRSS:")).expect("VmRSS");
        line.split_whitespace().nth(1).unwrap().parse().unwrap()
    }

    /// A request with the server's own Host (and Origin on a POST).
    pub fn req(
        &self,
        method: &str,
        path: &str,
        cookie: Option<&str>,
        body: Option<&Value>,
    ) -> Resp {
        let origin = self.origin();
        let mut h = vec![("Host", self.addr.as_str())];
        if method == "POST" {
            h.push(("Origin", origin.as_str()));
        }
        let c = cookie.map(|c| format!("loopx_session={c}"));
        if let Some(c) = &c {
            h.push(("Cookie", c.as_str()));
        }
        let b = body.map(|b| b.to_string());
        http(&self.addr, method, path, &h, b.as_deref())
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// An answer: status, headers (lower-case names), body.
#[derive(Debug)]
pub struct Resp {
    pub status: u16,
    pub headers: BTreeMap<String, String>,
    pub body: String,
}

impl Resp {
    /// The body as JSON.
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("{e}: {}", self.body))
    }
}

/// Writes a request (headers as given, `Connection: close`) and reads the whole answer.
pub fn http(addr: &str, method: &str, path: &str, h: &[(&str, &str)], body: Option<&str>) -> Resp {
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut req = format!("{method} {path} HTTP/1.1\r\nConnection: close\r\n");
    for (k, v) in h {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    if let Some(b) = body {
        req.push_str(&format!(
            "Content-Type: application/json\r\nContent-Length: {}\r\n",
            b.len()
        ));
    }
    req.push_str("\r\n");
    req.push_str(body.unwrap_or(""));
    s.write_all(req.as_bytes()).expect("write");
    let mut raw = Vec::new();
    let _ = s.read_to_end(&mut raw);
    parse(&String::from_utf8_lossy(&raw))
}

/// Splits an answer into status, headers and body.
pub fn parse(raw: &str) -> Resp {
    let (head, body) = raw.split_once("\r\n\r\n").unwrap_or((raw, ""));
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    Resp {
        status,
        headers,
        body: body.to_string(),
    }
}

/// A phone's key from a seed.
pub fn phone(seed: u8) -> SigningKey {
    SigningKey::from_bytes(&[seed; 32])
}

/// A key's public half as hex.
pub fn key_hex(k: &SigningKey) -> String {
    to_hex(k.verifying_key().as_bytes())
}

/// A signature as hex.
pub fn sig(k: &SigningKey, msg: &[u8]) -> String {
    to_hex(&k.sign(msg).to_bytes())
}

/// Pairs phone `k` as `name` through the server: `loopx web pair --json` prints the URL, the
/// phone posts its key to the server, the terminal answers `y`. Returns the token.
pub fn pair(p: &Project, s: &Server, name: &str, k: &SigningKey) -> String {
    pair_with(
        p.cmd(&["web", "pair", "--name", name, "--json"]),
        s,
        name,
        k,
    )
}

/// `pair` with the `web pair` command given (another project's, with this server's home).
pub fn pair_with(mut c: std::process::Command, s: &Server, name: &str, k: &SigningKey) -> String {
    c.env_remove("XDG_STATE_HOME")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped());
    let mut child = c.spawn().expect("loopx web pair starts");
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let first = read_json(&mut out);
    let url = first["url"].as_str().expect("url");
    assert!(url.starts_with(&format!("{}/pair#t=", s.origin())), "{url}");
    let token = url.rsplit("#t=").next().unwrap().to_string();
    let body = json!({"token": token, "key": key_hex(k), "label": "test phone"});
    let r = s.req("POST", "/api/pair", None, Some(&body));
    assert_eq!(r.status, 200, "{}", r.body);
    let ask = read_json(&mut out);
    assert_eq!(
        ask["fingerprint"],
        r.json()["fingerprint"],
        "both screens show one fingerprint"
    );
    writeln!(child.stdin.take().unwrap(), "y").unwrap();
    let done = read_json(&mut out);
    assert_eq!(child.wait().unwrap().code(), Some(0), "{done}");
    let st = s.req("GET", &format!("/api/pair/status?t={token}"), None, None);
    assert_eq!(st.json()["state"], "enrolled", "{}", st.body);
    assert_eq!(st.json()["device"], name);
    token
}

fn read_json(out: &mut impl BufRead) -> Value {
    let mut l = String::new();
    out.read_line(&mut l).expect("a line");
    serde_json::from_str(&l).unwrap_or_else(|e| panic!("not JSON ({e}): {l:?}"))
}

/// Signs in as device `name` with key `k`: the session cookie, or the refusal's status.
pub fn sign_in(s: &Server, name: &str, k: &SigningKey) -> Result<String, u16> {
    let c = s.req("GET", "/api/challenge", None, None).json()["challenge"]
        .as_str()
        .unwrap()
        .to_string();
    let msg = session_message(&c, &s.origin(), name);
    let body = json!({"device": name, "challenge": c, "signature": sig(k, &msg)});
    let r = s.req("POST", "/api/session", None, Some(&body));
    if r.status != 200 {
        return Err(r.status);
    }
    let set = r.headers.get("set-cookie").expect("a session cookie");
    for part in ["HttpOnly", "SameSite=Strict", "Path=/"] {
        assert!(set.contains(part), "{set}");
    }
    let v = set.split(';').next().unwrap();
    Ok(v.trim_start_matches("loopx_session=").to_string())
}

/// A device's decision of `gate` as the page posts it, signed by `k` over the gate as it is.
pub fn decision(p: &Project, gate: &str, name: &str, k: &SigningKey, status: GateStatus) -> Value {
    let snap = FileStore::at(p.root()).load().unwrap();
    let digest = gate_digest(&snap.gates[gate]);
    let at = Ts::now().0;
    let reason = if status == GateStatus::Rejected {
        "not now"
    } else {
        ""
    };
    let d = Decided {
        goal: &snap.config.goal.id,
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

/// The project's name as the server shows it (its directory's).
pub fn name_of(p: &Project) -> String {
    p.root().file_name().unwrap().to_string_lossy().into_owned()
}
