//! Runs one command bounded in time and output: its own process group, a tee of its output, and
//! the whole group stopped at the timeout (SIGTERM, then SIGKILL after a grace period).

use std::ffi::OsString;
use std::io::{Read, Write};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::kernel::{Code, Error, Result};
use crate::runtime::watch::{self, Watch};

mod group;
pub use group::{forward_signals, signal_count, signalled};
use group::{forward_to, signal_group, timer, wait_exited};

/// Where the command's output is copied as it comes (it is captured either way).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Echo {
    /// Nowhere.
    #[default]
    None,
    /// Both streams to this process's own stdout and stderr.
    Through,
    /// Both streams to this process's stderr (when stdout carries one JSON answer).
    Stderr,
}

/// What to run.
#[derive(Debug, Clone, Default)]
pub struct Spec {
    /// The program and its arguments (not run through a shell).
    pub argv: Vec<OsString>,
    /// Variables added to the inherited environment (which never passes `LOOPX_OWNER_KEY` on).
    pub env: Vec<(OsString, OsString)>,
    /// The working directory (default: this process's).
    pub cwd: Option<PathBuf>,
    /// Bytes written to its stdin, which is then closed; `None`: stdin is empty.
    pub stdin: Option<Vec<u8>>,
    /// Where its output is copied.
    pub echo: Echo,
    /// SIGINT and SIGTERM sent to this process go to the command first (see [`forward_signals`]).
    pub forward: bool,
    /// When the command ends, what it left running in its group is killed (a check's daemon).
    pub end_group: bool,
}

/// How long it may run and how much of its output is kept.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// When the group gets SIGTERM.
    pub timeout: Duration,
    /// How long after SIGTERM the group gets SIGKILL.
    pub grace: Duration,
    /// The most lines of the tail kept.
    pub tail_lines: usize,
    /// The most bytes of the tail kept.
    pub tail_bytes: usize,
    /// Stdout is kept whole up to this many bytes.
    pub keep_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            timeout: Duration::from_secs(3600),
            grace: Duration::from_secs(10),
            tail_lines: 20,
            tail_bytes: 2_000,
            keep_bytes: 0,
        }
    }
}

/// How a command ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// It exited with this code.
    Code(i32),
    /// A signal ended it.
    Signal(i32),
}

impl Exit {
    /// The exit code a shell would report: the code, or 128 plus the signal.
    pub fn code(self) -> i32 {
        match self {
            Exit::Code(c) => c,
            Exit::Signal(s) => 128 + s,
        }
    }

    /// True for exit code 0.
    pub fn success(self) -> bool {
        self == Exit::Code(0)
    }
}

/// What a finished command left.
#[derive(Debug, Clone)]
pub struct Finished {
    /// How it ended.
    pub exit: Exit,
    /// True when the timeout stopped it.
    pub timed_out: bool,
    /// How long it ran.
    pub duration: Duration,
    /// The last lines of its stdout and stderr together, cut to the limits.
    pub tail: String,
    /// Its stdout, up to `keep_bytes`.
    pub stdout: Vec<u8>,
    /// True when stdout was longer than `keep_bytes`.
    pub stdout_truncated: bool,
    /// [`signal_count`] when the command exited: a signal counted after it came later.
    pub signals_at_exit: usize,
}

/// Runs `spec` to its end or its timeout.
pub fn run(spec: &Spec, limits: &Limits) -> Result<Finished> {
    start(spec, limits)?.wait()
}

/// A command that is running.
pub struct Running {
    child: Child,
    started: Instant,
    limits: Limits,
    forward: bool,
    end_group: bool,
    out: Arc<Mutex<Captured>>,
    readers: mpsc::Receiver<()>,
    n_readers: usize,
    /// What kills the rest of the group if this process dies first.
    watch: Option<Watch>,
}

#[derive(Default)]
struct Captured {
    tail: Vec<u8>,
    stdout: Vec<u8>,
    truncated: bool,
}

/// Starts `spec` in a process group of its own.
pub fn start(spec: &Spec, limits: &Limits) -> Result<Running> {
    let Some((prog, args)) = spec.argv.split_first() else {
        return Err(Error::usage("no command given"));
    };
    let mut child = command(prog, args, spec).spawn().map_err(|e| {
        Error::new(
            Code::Io,
            format!("cannot run `{}`: {e}", prog.to_string_lossy()),
        )
        .hint("check the command's name and that it is on PATH")
    })?;
    let watch = Watch::start(child.id() as i32);
    if spec.forward {
        forward_to(child.id() as i32);
        // A signal that came before the group was known to the handler is passed on now.
        if let Some(s) = signalled() {
            signal_group(child.id() as i32, s);
        }
    }
    if let (Some(bytes), Some(mut w)) = (spec.stdin.clone(), child.stdin.take()) {
        std::thread::spawn(move || {
            let _ = w.write_all(&bytes);
        });
    }
    let out = Arc::new(Mutex::new(Captured::default()));
    let (done_tx, readers) = mpsc::channel();
    let mut n_readers = 0;
    if let Some(r) = child.stdout.take() {
        reader(r, true, spec.echo, limits, &out, done_tx.clone());
        n_readers += 1;
    }
    if let Some(r) = child.stderr.take() {
        reader(r, false, spec.echo, limits, &out, done_tx);
        n_readers += 1;
    }
    Ok(Running {
        child,
        started: Instant::now(),
        limits: *limits,
        forward: spec.forward,
        end_group: spec.end_group,
        out,
        readers,
        n_readers,
        watch,
    })
}

/// The command `spec` names, in a process group of its own, its output piped, dying with us.
fn command(prog: &OsString, args: &[OsString], spec: &Spec) -> Command {
    let mut cmd = Command::new(prog);
    cmd.args(args)
        // What loopx runs is never handed the owner's key by name (docs/security.md).
        .env_remove("LOOPX_OWNER_KEY")
        // Only a hook's own command keeps its commits from firing hooks (it sets this in `env`).
        .env_remove("LOOPX_EVENT")
        // Only a `--worktree` turn names a worktree (it sets this in `env`): never an outer one's.
        .env_remove("LOOPX_WORKTREE")
        .envs(spec.env.iter().map(|(k, v)| (k, v)))
        .process_group(0)
        .stdin(if spec.stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(d) = &spec.cwd {
        cmd.current_dir(d);
    }
    watch::die_with_parent(&mut cmd);
    cmd
}

/// Copies one stream into the capture (and the echo) until it ends.
fn reader(
    mut r: impl Read + Send + 'static,
    is_stdout: bool,
    echo: Echo,
    limits: &Limits,
    out: &Arc<Mutex<Captured>>,
    done: mpsc::Sender<()>,
) -> JoinHandle<()> {
    let out = Arc::clone(out);
    let limits = *limits;
    std::thread::spawn(move || {
        let mut buf = [0u8; 8192];
        loop {
            let n = match r.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(_) => break,
            };
            let chunk = &buf[..n];
            match (echo, is_stdout) {
                (Echo::Through, true) => {
                    let _ = std::io::stdout().lock().write_all(chunk);
                    STDOUT_MID_LINE.store(chunk.last() != Some(&b'\n'), Ordering::SeqCst);
                }
                (Echo::Through | Echo::Stderr, _) => {
                    let _ = std::io::stderr().lock().write_all(chunk);
                }
                (Echo::None, _) => {}
            }
            if let Ok(mut c) = out.lock() {
                c.take(chunk, is_stdout, &limits);
            }
        }
        let _ = done.send(());
    })
}

impl Captured {
    fn take(&mut self, chunk: &[u8], is_stdout: bool, limits: &Limits) {
        self.tail.extend_from_slice(chunk);
        if self.tail.len() > 2 * limits.tail_bytes.max(1) {
            let cut = self.tail.len() - limits.tail_bytes;
            self.tail.drain(..cut);
        }
        if is_stdout {
            let room = limits.keep_bytes.saturating_sub(self.stdout.len());
            self.stdout
                .extend_from_slice(&chunk[..chunk.len().min(room)]);
            self.truncated |= chunk.len() > room;
        }
    }

    /// The last lines, within both limits, as text.
    fn tail_text(&self, limits: &Limits) -> String {
        let start = self.tail.len().saturating_sub(limits.tail_bytes);
        let text = String::from_utf8_lossy(&self.tail[start..]);
        let text = text.trim_end_matches('\n');
        let lines: Vec<&str> = text.lines().collect();
        let from = lines.len().saturating_sub(limits.tail_lines);
        lines[from..].join("\n")
    }
}

impl Running {
    /// The command's process id (and its group's).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Waits for the command, stopping its group at the timeout; then collects its output.
    pub fn wait(mut self) -> Result<Finished> {
        let pid = self.child.id() as i32;
        let timed_out = Arc::new(AtomicBool::new(false));
        let (exited_tx, exited_rx) = mpsc::channel::<()>();
        let timer = timer(pid, self.limits, Arc::clone(&timed_out), exited_rx);
        let waited = wait_exited(pid);
        let signals_at_exit = signal_count();
        drop(exited_tx);
        let _ = timer.join();
        let timed_out = timed_out.load(Ordering::SeqCst);
        if timed_out || self.end_group || (self.forward && signalled().is_some()) {
            // The group had its SIGTERM (or the signal passed on); whatever is left goes now.
            signal_group(pid, libc::SIGKILL);
        }
        if self.forward {
            forward_to(0);
        }
        // The command is over: its watch leaves the group alone.
        if let Some(w) = self.watch.as_mut() {
            w.disarm();
        }
        // Reaped only now: until here the group's id could not be reused.
        let status = self
            .child
            .wait()
            .map_err(|e| Error::new(Code::Io, format!("waiting for the command: {e}")))?;
        waited?;
        let duration = self.started.elapsed();
        self.join_readers();
        let exit = match (status.code(), status.signal()) {
            (Some(c), _) => Exit::Code(c),
            (None, Some(s)) => Exit::Signal(s),
            (None, None) => Exit::Code(-1),
        };
        let c = self
            .out
            .lock()
            .map(|c| (c.tail_text(&self.limits), c.stdout.clone(), c.truncated));
        let (tail, stdout, stdout_truncated) = c.unwrap_or_default();
        Ok(Finished {
            exit,
            timed_out,
            duration,
            tail,
            stdout,
            stdout_truncated,
            signals_at_exit,
        })
    }

    /// Waits for the readers; a stream a grandchild still holds open is not waited for long.
    fn join_readers(&self) {
        let deadline = Instant::now() + READER_WAIT;
        for _ in 0..self.n_readers {
            let left = deadline.saturating_duration_since(Instant::now());
            if self.readers.recv_timeout(left).is_err() {
                return;
            }
        }
    }
}

/// How long output is still read after the command ended (a grandchild may hold the pipe).
const READER_WAIT: Duration = Duration::from_millis(200);

/// True when the output copied to this process's stdout (`Echo::Through`) ended mid-line.
static STDOUT_MID_LINE: AtomicBool = AtomicBool::new(false);

/// True when a command's output copied to this process's stdout ended without a newline since
/// the last call: the line printed next should start on a line of its own.
pub fn take_stdout_mid_line() -> bool {
    STDOUT_MID_LINE.swap(false, Ordering::SeqCst)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(script: &str) -> Spec {
        Spec {
            argv: vec!["sh".into(), "-c".into(), script.into()],
            ..Spec::default()
        }
    }

    #[test]
    fn exit_code_tail_and_stdout_are_kept() {
        let l = Limits {
            keep_bytes: 5,
            tail_lines: 2,
            ..Limits::default()
        };
        let f = run(&sh("echo one; echo two; echo three; exit 7"), &l).unwrap();
        assert_eq!(f.exit, Exit::Code(7));
        assert!(!f.timed_out);
        assert_eq!(f.stdout, b"one\nt");
        assert!(f.stdout_truncated);
        assert_eq!(f.tail, "two\nthree");
    }

    #[test]
    fn timeout_stops_the_whole_group() {
        let l = Limits {
            timeout: Duration::from_millis(200),
            grace: Duration::from_millis(200),
            ..Limits::default()
        };
        // The child ignores SIGTERM; its grandchild sleeps on: both must be gone.
        let f = run(
            &sh("trap '' TERM; sleep 30 & echo $! > /dev/stderr; wait"),
            &l,
        )
        .unwrap();
        assert!(f.timed_out);
        assert_eq!(f.exit, Exit::Signal(libc::SIGKILL));
        let grandchild: i32 = f.tail.trim().parse().unwrap();
        // Killed, it is gone or a zombie until init reaps it. SIGKILL is sent; the process
        // ends when the kernel next schedules it, so look again for a while on a loaded machine.
        let dead = || {
            let stat =
                std::fs::read_to_string(format!("/proc/{grandchild}/stat")).unwrap_or_default();
            let state = stat
                .rsplit(')')
                .next()
                .unwrap_or("")
                .trim_start()
                .to_string();
            (stat.is_empty() || state.starts_with('Z'), stat)
        };
        let until = std::time::Instant::now() + Duration::from_secs(5);
        while !dead().0 && std::time::Instant::now() < until {
            std::thread::sleep(Duration::from_millis(20));
        }
        let (gone, stat) = dead();
        assert!(gone, "grandchild runs: {stat}");
    }

    #[test]
    fn stdin_is_given_and_a_missing_program_is_an_error() {
        let mut s = sh("cat");
        s.stdin = Some(b"hello".to_vec());
        let l = Limits {
            keep_bytes: 100,
            ..Limits::default()
        };
        assert_eq!(run(&s, &l).unwrap().stdout, b"hello");
        let missing = Spec {
            argv: vec!["/nonexistent/loopx-test".into()],
            ..Spec::default()
        };
        assert_eq!(run(&missing, &l).unwrap_err().code, Code::Io);
    }

    #[test]
    fn a_signal_that_came_before_the_start_reaches_the_command() {
        // SIGTERM came after the runner last looked and before the group was known.
        group::SIGNALLED.store(libc::SIGTERM, Ordering::SeqCst);
        let mut s = sh("sleep 30");
        s.forward = true;
        let l = Limits {
            timeout: Duration::from_secs(20),
            ..Limits::default()
        };
        let f = run(&s, &l);
        group::SIGNALLED.store(0, Ordering::SeqCst);
        let f = f.unwrap();
        assert!(
            !f.timed_out,
            "the signal was lost: the command ran to its timeout"
        );
        assert_eq!(f.exit, Exit::Signal(libc::SIGTERM));
    }

    #[test]
    fn a_grandchild_holding_the_pipe_does_not_hold_the_wait() {
        let t = Instant::now();
        let f = run(&sh("sleep 5 & echo done"), &Limits::default()).unwrap();
        assert_eq!(f.exit, Exit::Code(0));
        assert_eq!(f.tail, "done");
        assert!(
            t.elapsed() < Duration::from_secs(5),
            "waited for the grandchild"
        );
    }
}
