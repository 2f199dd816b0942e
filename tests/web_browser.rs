//! The web face in a real browser: a phone-sized headless Chromium (playwright-core, driven by
//! tests/web_browser/driver.mjs) pairs with `loopx web pair`, watches gates an agent opens
//! appear without a reload, and decides them; the journal then holds both decisions, signed.
//! Needs LOOPX_CHROMIUM and LOOPX_PLAYWRIGHT (`.ci/run` sets them); skips without them.
//! With LOOPX_WEB_SHOTS=DIR it also writes the screenshots docs/web-*.png there.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use common::*;
use serde_json::{Value, json};

/// How long one step of the page may take.
const STEP: Duration = Duration::from_secs(60);

/// The lines a child prints, read by a thread so a hung child fails the test instead of hanging it.
fn lines_of(out: ChildStdout) -> Receiver<String> {
    let (tx, rx) = channel();
    std::thread::spawn(move || {
        for l in BufReader::new(out).lines().map_while(Result::ok) {
            if tx.send(l).is_err() {
                break;
            }
        }
    });
    rx
}

fn next_json(rx: &Receiver<String>, what: &str) -> Value {
    let l = rx
        .recv_timeout(STEP)
        .unwrap_or_else(|e| panic!("{what}: no line ({e})"));
    serde_json::from_str(&l).unwrap_or_else(|e| panic!("{what}: not JSON ({e}): {l:?}"))
}

/// A child process killed on drop.
struct Proc {
    child: Child,
    stdin: Option<ChildStdin>,
    out: Receiver<String>,
}

impl Proc {
    fn spawn(mut c: Command) -> Proc {
        c.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        let mut child = c.spawn().unwrap_or_else(|e| panic!("{c:?}: {e}"));
        let stdin = child.stdin.take();
        let out = lines_of(child.stdout.take().unwrap());
        Proc { child, stdin, out }
    }

    fn line(&self, what: &str) -> Value {
        next_json(&self.out, what)
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The headless phone: one command a line in, one answer a line out.
struct Phone(Proc);

impl Phone {
    /// The driver, when the browser and playwright-core are there.
    fn start() -> Option<Phone> {
        let (Some(exe), Some(pw)) = (
            std::env::var_os("LOOPX_CHROMIUM"),
            std::env::var_os("LOOPX_PLAYWRIGHT"),
        ) else {
            println!("skipped: set LOOPX_CHROMIUM and LOOPX_PLAYWRIGHT (.ci/run does) to run it");
            return None;
        };
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/web_browser/driver.mjs");
        let mut c = Command::new("node");
        c.arg(script)
            .env("LOOPX_CHROMIUM", exe)
            .env("LOOPX_PLAYWRIGHT", pw);
        let phone = Phone(Proc::spawn(c));
        let hello = phone.0.line("the browser starts");
        assert_eq!(hello["ready"], true, "{hello}");
        Some(phone)
    }

    /// Sends a command; the answer, which must be ok and come with no error in the page.
    #[track_caller]
    fn ask(&mut self, cmd: Value) -> Value {
        let stdin = self.0.stdin.as_mut().expect("the driver's stdin");
        writeln!(stdin, "{cmd}").expect("the driver reads");
        let v = self.0.line(&cmd.to_string());
        assert_eq!(v["ok"], true, "{cmd}: {v}");
        let errors: Vec<&Value> = v["page_errors"]
            .as_array()
            .into_iter()
            .flatten()
            // A browser asks for /favicon.ico on its own; the page has none.
            .filter(|e| !e.as_str().unwrap_or("").contains("status of 404"))
            .collect();
        assert!(errors.is_empty(), "{cmd}: errors in the page: {errors:?}");
        v
    }

    /// A screenshot at phone size, kept in `dir` and, when asked, in LOOPX_WEB_SHOTS.
    fn shot(&mut self, dir: &Path, name: &str) {
        let path = dir.join(name);
        self.ask(json!({"do": "shot", "path": path}));
        assert!(path.is_file(), "no screenshot at {}", path.display());
        if let Some(keep) = std::env::var_os("LOOPX_WEB_SHOTS") {
            std::fs::copy(&path, PathBuf::from(keep).join(name)).expect("copy the screenshot");
        }
    }
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// `loopx web --all` on a free port, with the test's home (the pairing channel and the list of
/// projects are private to it); the project is listed as `shop`, the name the page shows.
fn serve(p: &Project) -> (Proc, String) {
    p.ok(&["projects", "add", "--name", "shop", "."]);
    let mut c = p.cmd(&["web", "--all", "--listen", "127.0.0.1:0", "--json"]);
    c.env_remove("XDG_STATE_HOME");
    let web = Proc::spawn(c);
    let first = web.line("loopx web prints its URL");
    let url = first["url"].as_str().expect("the url").to_string();
    assert!(url.starts_with("http://127.0.0.1:"), "{url}");
    (web, url)
}

/// Pairs the phone through `loopx web pair --json`, comparing both screens' fingerprints.
fn pair(p: &Project, phone: &mut Phone, base: &str, shots: &Path) -> String {
    let mut c = p.cmd(&["web", "pair", "--name", "phone", "--json"]);
    c.env_remove("XDG_STATE_HOME");
    let mut pr = Proc::spawn(c);
    let url = pr.line("web pair prints the URL")["url"]
        .as_str()
        .expect("the url")
        .to_string();
    assert!(url.starts_with(&format!("{base}/pair#t=")), "{url}");
    let shown = phone.ask(json!({"do": "pair", "url": url}))["fingerprint"].clone();
    let asked = pr.line("web pair asks the owner");
    assert_eq!(asked["confirm"], "y/N", "{asked}");
    assert_eq!(
        asked["fingerprint"], shown,
        "the terminal and the page show the same fingerprint"
    );
    phone.shot(shots, "web-pair.png");
    let mut stdin = pr.stdin.take().unwrap();
    writeln!(stdin, "y").unwrap();
    drop(stdin);
    let done = pr.line("web pair enrolls");
    assert_eq!(done["ok"], true, "{done}");
    assert_eq!(done["device"]["fingerprint"], shown, "{done}");
    assert_eq!(pr.child.wait().unwrap().code(), Some(0));
    let device = phone.ask(json!({"do": "logged_in"}))["device"].clone();
    assert_eq!(device, "phone", "the page is signed in as the phone");
    "phone".into()
}

/// Opens a gate as agent a1; the gate's id, and when the command had exited.
fn agent_opens(p: &Project, args: &[&str]) -> (String, i64) {
    let mut a = vec!["gate", "open"];
    a.extend_from_slice(args);
    let v = p.ok_as("a1", &a);
    let exited = now_ms();
    (
        v["gate"]["id"].as_str().expect("a gate id").to_string(),
        exited,
    )
}

/// The page shows gate `id` without a reload (a reload would lose the observer set up at sign-in,
/// and with it the time asked for); prints how long after the agent's command.
fn appears(phone: &mut Phone, id: &str, exited: i64) {
    let at = phone.ask(json!({"do": "see", "gate": id}))["at_ms"]
        .as_i64()
        .expect("when the gate showed");
    println!(
        "measured: {id} on screen {} ms after the agent's command exited",
        at - exited
    );
}

/// Agent a1 asks which cache store (two options); the phone sees it, approves `postgres`.
fn approve_with_an_option(p: &Project, phone: &mut Phone, actor: &str, shots: &Path) -> String {
    let todo = p.add("Move sessions to the new cache", &[]);
    let q = "Which cache store for sessions?";
    let opts = [
        "--blocks", &todo, "--option", "sqlite", "--option", "postgres",
    ];
    let (first, exited) = agent_opens(p, &[&[q][..], &opts[..]].concat());
    appears(phone, &first, exited);
    phone.shot(shots, "web-gates.png");
    let d = phone
        .ask(json!({"do": "decide", "gate": first, "action": "approve", "option": "postgres"}));
    let ms = |k: &str| d[k].as_f64().unwrap_or(f64::NAN);
    println!(
        "measured: approve round trip {:.1} ms (server {:.1} ms)",
        ms("ms"),
        ms("server_ms")
    );
    let g = p.ok(&["gate", "show", &first])["gate"].clone();
    assert_eq!(g["status"], "approved", "{g}");
    assert_eq!(g["option"], "postgres", "{g}");
    assert_eq!(g["decided_by"], actor, "{g}");
    first
}

/// Agent a1 asks another; the phone sees it, opens its link (as a push's), rejects with a reason.
fn reject_from_a_link(p: &Project, phone: &mut Phone, base: &str, shots: &Path) -> String {
    let (second, exited) = agent_opens(p, &["Drop the old sessions table now?"]);
    appears(phone, &second, exited);
    // The page loads again and signs in with the key it kept.
    phone.ask(json!({"do": "goto", "url": format!("{base}/#gate={second}")}));
    assert_eq!(phone.ask(json!({"do": "logged_in"}))["device"], "phone");
    let sel = format!("[data-gate=\"{second}\"]");
    let class = phone.ask(json!({"do": "attr", "selector": sel, "name": "class"}))["value"].clone();
    assert!(
        class.as_str().unwrap_or("").contains("wanted"),
        "the linked gate is marked: {class}"
    );
    let reason = "not before the backup is verified";
    phone.ask(json!({"do": "decide", "gate": second, "action": "reject", "reason": reason}));
    phone.shot(shots, "web-decided.png");
    let g = p.ok(&["gate", "show", &second])["gate"].clone();
    assert_eq!(g["status"], "rejected", "{g}");
    assert_eq!(g["reason"], reason, "{g}");
    second
}

#[test]
fn a_phone_pairs_watches_gates_appear_and_decides_them_signed() {
    let Some(mut phone) = Phone::start() else {
        return;
    };
    let p = Project::new("web-browser");
    let shots = TempDir::new("web-shots");
    let (_web, base) = serve(&p);
    let device = pair(&p, &mut phone, &base, &shots.path);
    let actor = format!("device:{device}");
    let first = approve_with_an_option(&p, &mut phone, &actor, &shots.path);
    let second = reject_from_a_link(&p, &mut phone, &base, &shots.path);

    let (code, doc) = p.json(&["doctor"]);
    assert_eq!(
        code, 0,
        "doctor is healthy after the phone's decisions: {doc}"
    );
    let journal = p.journal();
    for (action, gate) in [("gate.approve", &first), ("gate.reject", &second)] {
        let e = journal
            .iter()
            .find(|e| e["action"] == action && e["target"] == gate.as_str())
            .unwrap_or_else(|| panic!("no {action} of {gate} in the journal"));
        assert_eq!(e["actor"], actor.as_str(), "{e}");
        let sig = e["data"]["signature"].as_str().unwrap_or("");
        assert_eq!(
            sig.len(),
            128,
            "{action} carries the device's signature: {e}"
        );
    }
    phone.ask(json!({"do": "close"}));
}
