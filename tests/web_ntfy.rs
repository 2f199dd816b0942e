//! The ntfy recipe of docs/integrations.md ("Told on the phone: ntfy"), as written there: the
//! owner sets it as the `gate.opened` hook, an agent opens a gate, and a stand-in ntfy server
//! gets a POST whose `Click:` header links the gate on the web face, and nothing of the question.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::Path;
use std::sync::mpsc::channel;
use std::time::Duration;

use common::*;

/// The placeholders of the recipe, put in place of a real server and a real address.
const TOPIC_URL: &str = "https://ntfy.sh/YOUR-SECRET-TOPIC";
const PUBLIC_URL: &str = "https://machine.tailnet.ts.net";

/// The hook's text, as docs/integrations.md gives it in its ntfy section.
fn recipe() -> String {
    let doc = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/integrations.md");
    let text = std::fs::read_to_string(doc).expect("read docs/integrations.md");
    let section = text
        .split("### Told on the phone: ntfy")
        .nth(1)
        .expect("the ntfy section");
    let line = section
        .lines()
        .find(|l| l.starts_with("loopx hook set gate.opened -- '"))
        .expect("the recipe's hook set line");
    let hook = line
        .trim_start_matches("loopx hook set gate.opened -- '")
        .strip_suffix('\'')
        .expect("the hook's text, in single quotes");
    assert!(!hook.contains('\''), "one single-quoted word: {hook}");
    assert!(
        hook.contains(TOPIC_URL) && hook.contains(PUBLIC_URL),
        "{hook}"
    );
    hook.to_string()
}

/// One request as the stand-in got it: the request line and headers, then the body.
struct Got {
    head: String,
    body: String,
}

impl Got {
    /// The value of header `name` (case-insensitive), if sent.
    fn header(&self, name: &str) -> Option<&str> {
        self.head.lines().skip(1).find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.trim().eq_ignore_ascii_case(name).then(|| v.trim())
        })
    }
}

/// A stand-in ntfy server on a free port: answers each request 200 and hands it over.
fn stand_in() -> (String, std::sync::mpsc::Receiver<Got>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().unwrap().to_string();
    let (tx, rx) = channel();
    std::thread::spawn(move || {
        for s in listener.incoming().map_while(Result::ok) {
            let mut r = BufReader::new(s);
            let mut head = String::new();
            loop {
                let mut l = String::new();
                if r.read_line(&mut l).unwrap_or(0) == 0 || l == "\r\n" {
                    break;
                }
                head.push_str(&l);
            }
            let got = Got {
                head,
                body: String::new(),
            };
            let len: usize = got
                .header("content-length")
                .and_then(|v| v.parse().ok())
                .unwrap_or(0);
            let mut body = vec![0; len.min(1 << 20)];
            let _ = r.read_exact(&mut body);
            let answer = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}";
            let _ = r.get_mut().write_all(answer.as_bytes());
            let got = Got {
                body: String::from_utf8_lossy(&body).into_owned(),
                ..got
            };
            if tx.send(got).is_err() {
                break;
            }
        }
    });
    (addr, rx)
}

fn has_curl() -> bool {
    std::process::Command::new("curl")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

#[test]
fn the_ntfy_recipe_pushes_the_gates_link_and_not_its_question() {
    if !has_curl() {
        println!("skipped: curl is missing (.ci/run installs it)");
        return;
    }
    let p = Project::new("web-ntfy");
    let (addr, got) = stand_in();
    let topic = format!("http://{addr}/loopx-gates");
    let hook = recipe()
        .replace(TOPIC_URL, &topic)
        .replace(PUBLIC_URL, "https://phone.example");
    let mut c = p.cmd(&["--json", "hook", "set", "gate.opened", "--", &hook]);
    let r = run_cmd(&mut c);
    let v = parse_json(&r, "hook set");
    assert_eq!(r.code, 0, "the owner sets the recipe: {v}");

    // An agent (no owner key) asks; the stand-in must not go through a proxy.
    let question = "Rotate the \"target\":\"g-zzzzzz\" secret-4417 keys?";
    let mut c = p.cmd(&["--agent", "a1", "--json", "gate", "open", question]);
    c.env("LOOPX_OWNER_KEY", p.home.path.join("no-such-key"))
        .env("NO_PROXY", "127.0.0.1")
        .env_remove("http_proxy")
        .env_remove("HTTP_PROXY")
        .env_remove("ALL_PROXY")
        .env_remove("all_proxy");
    let r = run_cmd(&mut c);
    let v = parse_json(&r, "gate open");
    assert_eq!(r.code, 0, "{v}");
    let id = v["gate"]["id"].as_str().expect("the gate's id");

    let push = got
        .recv_timeout(Duration::from_secs(20))
        .expect("the hook posts to the stand-in");
    assert!(push.head.starts_with("POST /loopx-gates "), "{}", push.head);
    assert_eq!(
        push.header("click"),
        Some(format!("https://phone.example/#gate={id}").as_str()),
        "{}",
        push.head
    );
    assert_eq!(push.header("title"), Some("loopx: a gate waits"));
    assert!(
        push.body.contains(id),
        "the body names the gate: {}",
        push.body
    );
    let all = format!("{}{}", push.head, push.body);
    assert!(
        !all.contains("secret-4417"),
        "the question stayed home: {all}"
    );
    assert!(
        got.recv_timeout(Duration::from_millis(500)).is_err(),
        "one push per gate"
    );
}
