//! tmux for the end-to-end tests of the board: a server of the test's own, its screen as text,
//! keys typed into it.

use std::process::{Command, Output};
use std::time::{Duration, Instant};

/// True when tmux runs here (the tests skip, saying so, when not).
pub fn available() -> bool {
    Command::new("tmux")
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// A tmux server on a socket of the test's own, and the session the test drives.
pub struct Tmux {
    /// The `-L` socket name: one per test, so that tests never touch another server.
    pub socket: String,
    /// The session (or window) target.
    pub session: String,
}

impl Tmux {
    /// Starts the session, `width` x `height`, running `cmd` in its first window.
    pub fn start(&self, (width, height): (u16, u16), cmd: &str) {
        let (w, h) = (width.to_string(), height.to_string());
        let out = self.run(&[
            "new-session",
            "-d",
            "-s",
            &self.session,
            "-x",
            &w,
            "-y",
            &h,
            cmd,
        ]);
        assert!(
            out.status.success(),
            "tmux new-session: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// Runs a tmux command on this server.
    pub fn run(&self, args: &[&str]) -> Output {
        Command::new("tmux")
            .arg("-L")
            .arg(&self.socket)
            .args(args)
            .output()
            .expect("tmux runs")
    }

    /// The session's visible screen, as text.
    pub fn screen(&self) -> String {
        String::from_utf8_lossy(
            &self
                .run(&["capture-pane", "-p", "-t", &self.session])
                .stdout,
        )
        .to_string()
    }

    /// Types keys (tmux key names) into the session.
    pub fn keys(&self, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", self.session.as_str()];
        args.extend_from_slice(keys);
        self.run(&args);
    }

    /// Waits until the screen shows `what`; how long that took, or the screen at the timeout.
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
