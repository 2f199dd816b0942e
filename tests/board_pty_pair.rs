//! Pairing a phone from the board in a real terminal (tmux, 80x24, issue 40): `P` shows the QR
//! code and the URL of the announced `loopx web`, the phone's fingerprint shows once it sent its
//! key, and `y` enrolls it signed with the owner's key. The phone's side is simulated through the
//! pairing channel. Skips with a message when tmux is absent.

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::tmux::{BIN, Tmux, assert_healthy, loopx, owned_project, skip_without_tmux};
use ed25519_dalek::SigningKey;
use loopx::kernel::Ts;
use loopx::kernel::authority::to_hex;
use loopx::kernel::device::DeviceKey;
use loopx::runtime::pairing;

const WAIT: Duration = Duration::from_secs(10);

/// A `loopx web` on a free port with its pairing files under `state`, stopped on drop.
struct Web(std::process::Child);

impl Web {
    fn start(dir: &Path, state: &Path) -> Web {
        let child = std::process::Command::new(BIN)
            .args(["web", "--listen", "127.0.0.1:0", "--dir"])
            .arg(dir)
            .env("XDG_STATE_HOME", state)
            .env_remove("LOOPX_OWNER_KEY")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("loopx web starts");
        Web(child)
    }

    /// The URL it announced in the pairing directory `chan`.
    fn url(&self, chan: &Path) -> String {
        let deadline = Instant::now() + WAIT;
        loop {
            // Read as the file says: `announced` trusts only its own binary, and this is a test's.
            let text = std::fs::read_to_string(chan.join("server.json")).unwrap_or_default();
            if let Ok(s) = serde_json::from_str::<pairing::Server>(&text) {
                return s.url;
            }
            assert!(Instant::now() < deadline, "loopx web announced nothing");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Web {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A board on `dir` at 80x24 with the owner's key, its pairing files under `state`.
fn board(tag: &str, dir: &Path, key: &Path, state: &Path) -> Tmux {
    let cmd = format!(
        "env LOOPX_OWNER_KEY='{}' XDG_STATE_HOME='{}' '{}' board --dir '{}'; sleep 5",
        key.display(),
        state.display(),
        BIN,
        dir.display()
    );
    Tmux::start(tag, &cmd, 80, 24)
}

/// The pairing token in the URL on screen.
fn token_on(screen: &str) -> Option<String> {
    let (_, rest) = screen.split_once("/pair#t=")?;
    let t: String = rest.chars().take_while(char::is_ascii_hexdigit).collect();
    (t.len() == 32).then_some(t)
}

#[test]
fn p_pairs_a_phone_and_y_enrolls_it_signed() {
    if skip_without_tmux() {
        return;
    }
    let (dir, key) = owned_project("pair", "Phones decide gates");
    let state = dir.join("state");
    let chan = pairing::dir(Some(state.clone().into()), None).unwrap();
    // A real `loopx web` announces itself: the pair dialog trusts only this binary's.
    let web = Web::start(&dir, &state);
    let url = web.url(&chan);

    let t = board("pair", &dir, &key, &state);
    t.wait_for("live", WAIT).unwrap();
    t.keys(&["P"]);
    t.wait_for("waiting for the phone...", WAIT).unwrap();
    let screen = t.screen();
    let token = token_on(&screen).unwrap_or_else(|| panic!("no URL on screen:\n{screen}"));
    assert!(screen.contains(&format!("{url}/pair#t=")), "{screen}");
    assert!(
        screen.lines().any(|l| l.contains(&"█".repeat(37))),
        "the QR code's quiet zone, 37 modules wide:\n{screen}"
    );
    assert!(
        screen.contains("expires in 10:00") || screen.contains("expires in 9:5"),
        "{screen}"
    );

    let phone = SigningKey::from_bytes(&[11; 32]);
    let hex = to_hex(phone.verifying_key().as_bytes());
    let fp = DeviceKey::parse(&hex).unwrap().fingerprint();
    let sent = Instant::now();
    pairing::submit(&chan, &token, &hex, Some("Test phone"), Ts::now()).unwrap();
    t.wait_for(&fp, WAIT).unwrap();
    let shown = sent.elapsed();
    eprintln!(
        "the fingerprint showed {} ms after the phone sent its key",
        shown.as_millis()
    );
    assert!(
        shown < Duration::from_secs(2),
        "polls every 300 ms at most: {shown:?}"
    );
    assert!(
        t.screen()
            .contains("Does the phone show the same fingerprint?")
    );

    t.keys(&["y"]);
    t.wait_for("enrolled phone", WAIT).unwrap();
    let out = loopx(&dir, &key, &["--json", "owner", "devices"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["devices"][0]["name"], "phone", "{v}");
    assert_eq!(v["devices"][0]["key"], hex.as_str(), "{v}");
    assert_eq!(
        pairing::status(&chan, &token, Ts::now()).unwrap().state,
        pairing::State::Enrolled
    );
    assert_healthy(&dir, &key);
    t.keys(&["q"]);
}

#[test]
fn without_loopx_web_the_dialog_says_to_start_it() {
    if skip_without_tmux() {
        return;
    }
    let (dir, key) = owned_project("pair-none", "Phones decide gates");
    let t = board("pair-none", &dir, &key, &dir.join("state"));
    t.wait_for("live", WAIT).unwrap();
    t.keys(&["P"]);
    t.wait_for("start `loopx web` first", WAIT).unwrap();
    t.keys(&["Escape"]);
    t.wait_gone("Pair a phone", WAIT).unwrap();
    t.keys(&["q"]);
}
