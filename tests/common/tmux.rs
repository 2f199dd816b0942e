//! Running the board in a real terminal for the tests: a tmux server on its own socket, its
//! screen as text, keys sent to it; the server goes when the value is dropped.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

/// The binary under test.
pub const BIN: &str = env!("CARGO_BIN_EXE_loopx");

/// True when tmux runs here (a test skips, saying so, when not).
pub fn tmux_available() -> bool {
    Command::new("tmux")
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// A tmux server on its own socket, and the session the test drives.
pub struct Tmux {
    /// The server's socket name (`-L`).
    pub socket: String,
    /// The session.
    pub session: String,
}

impl Tmux {
    /// Runs a tmux command on this server.
    pub fn run(&self, args: &[&str]) -> Output {
        Command::new("tmux")
            .arg("-L")
            .arg(&self.socket)
            .args(args)
            .output()
            .expect("tmux runs")
    }

    /// The visible screen as text.
    pub fn screen(&self) -> String {
        String::from_utf8_lossy(
            &self
                .run(&["capture-pane", "-p", "-t", &self.session])
                .stdout,
        )
        .to_string()
    }

    /// Waits until `what` is gone from the screen.
    pub fn wait_gone(&self, what: &str, timeout: Duration) -> Result<Duration, String> {
        let start = Instant::now();
        loop {
            let s = self.screen();
            if !s.contains(what) {
                return Ok(start.elapsed());
            }
            if start.elapsed() > timeout {
                return Err(format!("`{what}` stayed for {timeout:?}; the screen:\n{s}"));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Sends keys to the session.
    pub fn keys(&self, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", self.session.as_str()];
        args.extend_from_slice(keys);
        self.run(&args);
    }

    /// Waits until `what` shows on the screen; the time it took, or the screen at the timeout.
    pub fn wait_for(&self, what: &str, timeout: Duration) -> Result<Duration, String> {
        let start = Instant::now();
        loop {
            let s = self.screen();
            if s.contains(what) {
                return Ok(start.elapsed());
            }
            if start.elapsed() > timeout {
                return Err(format!(
                    "`{what}` did not show within {timeout:?}; the screen:\n{s}"
                ));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        // Only the server on our own socket.
        let _ = Command::new("tmux")
            .arg("-L")
            .arg(&self.socket)
            .arg("kill-server")
            .output();
    }
}

impl Tmux {
    /// A detached session of `w` x `h` running `cmd`, on a socket named for `tag` and this process.
    pub fn start(tag: &str, cmd: &str, w: u16, h: u16) -> Tmux {
        let t = Tmux {
            socket: format!("loopx-{tag}-{}", std::process::id()),
            session: "board".into(),
        };
        let (w, h) = (w.to_string(), h.to_string());
        let out = t.run(&[
            "new-session",
            "-d",
            "-s",
            &t.session,
            "-x",
            &w,
            "-y",
            &h,
            cmd,
        ]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        t
    }
}

/// Runs loopx on `dir` with the owner's key at `key`.
pub fn loopx(dir: &Path, key: &Path, args: &[&str]) -> Output {
    Command::new(BIN)
        .arg("--dir")
        .arg(dir)
        .args(args)
        .env("LOOPX_OWNER_KEY", key)
        .env_remove("LOOPX_DIR")
        .env_remove("LOOPX_AGENT")
        .output()
        .expect("loopx runs")
}

/// A fresh directory for one test.
pub fn temp_dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("loopx-pty-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A fresh project with a goal and an owner key: its directory and the key file.
pub fn owned_project(tag: &str, goal: &str) -> (PathBuf, PathBuf) {
    let dir = temp_dir(tag);
    let key = dir.join("owner.key");
    let out = Command::new(BIN)
        .args(["start-goal", "--goal-text", goal, "--project"])
        .arg(&dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = loopx(&dir, &key, &["owner", "init"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    (dir, key)
}

/// True (after saying so) when tmux is absent: the test skips.
pub fn skip_without_tmux() -> bool {
    let absent = !tmux_available();
    if absent {
        eprintln!("skipped: tmux is not installed (apt-get install tmux)");
    }
    absent
}

/// Asserts `loopx doctor` finds the project healthy.
pub fn assert_healthy(dir: &Path, key: &Path) {
    let out = loopx(dir, key, &["doctor"]);
    assert!(
        out.status.success(),
        "doctor: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
