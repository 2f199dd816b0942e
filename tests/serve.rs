//! `loopx serve`: the commands that ask it answer exactly as they would alone, see every
//! change (a commit, a hand edit in place or by rename, a file added, removed or broken) at
//! once, and run the usual way when it is gone, declines, or is another binary.

use std::io::{BufRead as _, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

struct Served {
    dir: PathBuf,
    child: Child,
    log: PathBuf,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn cmd(dir: &Path, args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_loopx"));
    c.arg("--dir")
        .arg(dir)
        .args(args)
        .env_remove("LOOPX_DIR")
        .env_remove("LOOPX_AGENT")
        .env_remove("LOOPX_STORE")
        .env_remove("LOOPX_LOCK_TIMEOUT")
        .env_remove("LOOPX_NO_SERVE")
        .env("LOOPX_OWNER_KEY", dir.join("owner.key"));
    c
}

fn run(dir: &Path, args: &[&str]) -> Output {
    cmd(dir, args).output().unwrap()
}

/// The same command, never asking the server.
fn alone(dir: &Path, args: &[&str]) -> Output {
    cmd(dir, args).env("LOOPX_NO_SERVE", "1").output().unwrap()
}

fn id_of(out: &Output) -> String {
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    v["todo"]["id"].as_str().unwrap().to_string()
}

/// A project of a few todos and a gate, and its server, started and listening.
fn served(tag: &str) -> (Served, Vec<String>) {
    let dir = std::env::temp_dir().join(format!("loopx-serve-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    assert!(
        run(&dir, &["start-goal", "--goal-text", "serve"])
            .status
            .success()
    );
    assert!(run(&dir, &["owner", "init"]).status.success());
    let ids: Vec<String> = (0..4)
        .map(|i| id_of(&run(&dir, &["--json", "todo", "add", &format!("todo {i}")])))
        .collect();
    let g = run(&dir, &["gate", "open", "May I?", "--blocks", &ids[3]]);
    assert!(g.status.success(), "{g:?}");
    let log = dir.join("serve.log");
    let child = cmd(&dir, &["serve", "--verbose", "--idle", "5m"])
        .stderr(std::fs::File::create(&log).unwrap())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let s = Served { dir, child, log };
    let t = Instant::now();
    while !std::fs::read_to_string(&s.log).unwrap().contains("serving") {
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "the server did not start"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    (s, ids)
}

impl Served {
    fn lines(&self, word: &str) -> usize {
        let f = std::fs::File::open(&self.log).unwrap();
        BufReader::new(f)
            .lines()
            .filter(|l| l.as_ref().is_ok_and(|l| l.contains(word)))
            .count()
    }

    /// Asks should-run and a quiet poll, text and JSON, through the server, and checks each
    /// answer is the one the command gives alone; gives the should-run JSON.
    fn same(&self, what: &str) -> String {
        let before = self.lines("answered");
        let asks: [&[&str]; 4] = [
            &["--agent", "a1", "quota", "should-run"],
            &["--agent", "a1", "--json", "quota", "should-run"],
            &["monitor", "poll"],
            &["--json", "monitor", "poll", "--timeout", "1m"],
        ];
        for args in asks {
            let (s, a) = (run(&self.dir, args), alone(&self.dir, args));
            assert_eq!(
                (s.status.code(), &s.stdout, &s.stderr),
                (a.status.code(), &a.stdout, &a.stderr),
                "{what}: {args:?} answered otherwise by the server"
            );
        }
        assert_eq!(self.lines("answered"), before + 4, "{what}: served");
        String::from_utf8(run(&self.dir, asks[1]).stdout).unwrap()
    }

    fn todo(&self, id: &str) -> PathBuf {
        self.dir.join(format!(".loopx/todos/{id}.toml"))
    }
}

#[test]
fn every_change_is_seen_by_the_next_question() {
    let (s, ids) = served("changes");
    let first = s.same("at start");
    assert!(first.contains(&ids[0]), "{first}");

    let c = run(&s.dir, &["--agent", "a0", "todo", "claim", &ids[0]]);
    assert!(c.status.success(), "{c:?}");
    s.same("after a claim");

    // In place: the same inode, written over.
    let p = s.todo(&ids[1]);
    let text = std::fs::read_to_string(&p).unwrap();
    std::fs::write(&p, text.replace("todo 1", "edited in place")).unwrap();
    assert!(s.same("after an edit in place").contains("edited in place"));

    // By rename, as editors and `sed -i` do.
    let text = std::fs::read_to_string(&p).unwrap();
    let tmp = s.dir.join(".loopx/todos/.edit.tmp");
    std::fs::write(&tmp, text.replace("edited in place", "edited by rename")).unwrap();
    std::fs::rename(&tmp, &p).unwrap();
    assert!(
        s.same("after an edit by rename")
            .contains("edited by rename")
    );

    std::fs::remove_file(&p).unwrap();
    assert!(!s.same("after a removal").contains("edited by rename"));

    std::fs::write(s.todo(&ids[2]), "not = [toml").unwrap();
    s.same("after a broken file");

    let q = run(&s.dir, &["quota", "set", "--slots", "1", "--window", "1h"]);
    assert!(q.status.success(), "{q:?}");
    s.same("after the owner's quota");
    let gate = run(&s.dir, &["gate", "list", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&gate.stdout).unwrap();
    let g = v["gates"][0]["id"].as_str().unwrap().to_string();
    let ok = run(&s.dir, &["gate", "approve", &g]);
    assert!(ok.status.success(), "{ok:?}");
    s.same("after the owner's approval");
    let spent = run(&s.dir, &["--agent", "a1", "quota", "spend-slot"]);
    assert!(spent.status.success(), "{spent:?}");
    assert!(s.same("with the quota spent").contains("quota"));
}

#[test]
fn without_the_server_or_with_another_binary_the_usual_way_answers() {
    let (mut s, _) = served("fallback");
    s.same("served");
    // Another build of loopx (here: a copy) is never answered by this one.
    let copy = s.dir.join("loopx-copy");
    std::fs::copy(env!("CARGO_BIN_EXE_loopx"), &copy).unwrap();
    let args = [
        "--dir",
        s.dir.to_str().unwrap(),
        "--json",
        "quota",
        "should-run",
    ];
    let other = Command::new(&copy)
        .args(args)
        .env_remove("LOOPX_DIR")
        .output()
        .unwrap();
    assert_eq!(
        other.stdout,
        alone(&s.dir, &["--json", "quota", "should-run"]).stdout
    );
    assert_eq!(s.lines("another loopx binary"), 1);
    // A poll whose timeout the usual way refuses is refused the usual way.
    let bad = run(&s.dir, &["--json", "monitor", "poll", "--timeout", "0s"]);
    assert_eq!(bad.status.code(), Some(2), "{bad:?}");

    s.child.kill().unwrap();
    s.child.wait().unwrap();
    let after = run(&s.dir, &["--json", "quota", "should-run"]);
    assert_eq!(
        after.stdout,
        alone(&s.dir, &["--json", "quota", "should-run"]).stdout
    );
}

#[test]
fn one_server_a_project_and_it_stops_when_idle_or_gone() {
    let (mut s, _) = served("once");
    let second = run(&s.dir, &["--json", "serve"]);
    assert_eq!(second.status.code(), Some(8), "{second:?}");
    assert!(String::from_utf8_lossy(&second.stdout).contains("already runs"));

    let idle = run(&s.dir, &["--json", "serve", "--idle", "0s"]);
    assert_eq!(idle.status.code(), Some(2), "{idle:?}");

    // .loopx/ moved away: the server stops by itself.
    std::fs::rename(s.dir.join(".loopx"), s.dir.join("moved")).unwrap();
    let t = Instant::now();
    let status = loop {
        if let Some(st) = s.child.try_wait().unwrap() {
            break st;
        }
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "the server kept running"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success());
    std::fs::rename(s.dir.join("moved"), s.dir.join(".loopx")).unwrap();

    let quick = cmd(&s.dir, &["--json", "serve", "--idle", "1s"])
        .output()
        .unwrap();
    assert!(quick.status.success(), "{quick:?}");
    assert!(String::from_utf8_lossy(&quick.stdout).contains("\"stopped\":\"idle\""));
}

#[test]
fn a_write_through_a_hard_link_made_elsewhere_is_seen() {
    let (s, ids) = served("link");
    s.same("at start");
    let outside = s.dir.join("outside.toml");
    std::fs::hard_link(s.todo(&ids[0]), &outside).unwrap();
    let text = std::fs::read_to_string(&outside).unwrap();
    // In place, through the other name: the todos/ directory raises no event for it.
    std::fs::write(&outside, text.replace("todo 0", "edited through a link")).unwrap();
    assert!(
        s.same("after a write through a link")
            .contains("edited through a link")
    );
}

#[test]
fn a_project_moved_away_is_not_answered_for_by_its_old_server() {
    let (mut s, _) = served("moved");
    s.same("at start");
    let away = s.dir.with_extension("away");
    let _ = std::fs::remove_dir_all(&away);
    std::fs::rename(&s.dir, &away).unwrap();
    // A new project where the old one was: its commands must not get the old one's answers.
    std::fs::create_dir_all(&s.dir).unwrap();
    assert!(
        run(&s.dir, &["start-goal", "--goal-text", "new"])
            .status
            .success()
    );
    let asked = run(&s.dir, &["--json", "quota", "should-run"]);
    assert_eq!(
        asked.stdout,
        alone(&s.dir, &["--json", "quota", "should-run"]).stdout
    );
    let t = Instant::now();
    while s.child.try_wait().unwrap().is_none() {
        // The old server sees its .loopx/ moved (an event) and stops.
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "the old server kept running"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    std::fs::remove_dir_all(&away).unwrap();
}

#[test]
fn the_directory_spelled_another_way_is_answered_the_usual_way() {
    let (s, _) = served("spelled");
    let other = format!("{}/.", s.dir.display());
    let args = ["--dir", other.as_str(), "--json", "quota", "should-run"];
    let asked = Command::new(env!("CARGO_BIN_EXE_loopx"))
        .args(args)
        .env_remove("LOOPX_DIR")
        .output()
        .unwrap();
    assert_eq!(
        asked.stdout,
        alone(&s.dir, &["--json", "quota", "should-run"]).stdout
    );
    assert_eq!(s.lines("spelled another way"), 1);
}

/// Binds the project's socket name with a full queue, as a stranger could.
fn squat(dir: &Path) -> std::os::fd::OwnedFd {
    use std::os::fd::{AsRawFd as _, FromRawFd as _};
    use std::os::unix::fs::MetadataExt as _;
    let m = std::fs::metadata(dir.join(".loopx")).unwrap();
    // SAFETY: getuid cannot fail.
    let uid = unsafe { libc::getuid() };
    let name = format!("loopx-serve/{uid}/{}/{}", m.dev(), m.ino());
    let addr = || {
        // SAFETY: an all-zero sockaddr_un is valid.
        let mut sa: libc::sockaddr_un = unsafe { std::mem::zeroed() };
        sa.sun_family = libc::AF_UNIX as libc::sa_family_t;
        for (d, b) in sa.sun_path[1..].iter_mut().zip(name.as_bytes()) {
            *d = *b as libc::c_char;
        }
        let len = std::mem::size_of::<libc::sa_family_t>() + 1 + name.len();
        (sa, len as libc::socklen_t)
    };
    let sock = || {
        // SAFETY: plain syscall, checked.
        let fd = unsafe { libc::socket(libc::AF_UNIX, libc::SOCK_STREAM | libc::SOCK_NONBLOCK, 0) };
        assert!(fd >= 0);
        // SAFETY: a new descriptor.
        unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) }
    };
    let l = sock();
    let (sa, len) = addr();
    // SAFETY: valid address and length.
    unsafe {
        assert_eq!(libc::bind(l.as_raw_fd(), (&raw const sa).cast(), len), 0);
        assert_eq!(libc::listen(l.as_raw_fd(), 0), 0);
    }
    // One connection nobody accepts fills a queue of 0.
    let c = sock();
    // SAFETY: valid address and length.
    unsafe { libc::connect(c.as_raw_fd(), (&raw const sa).cast(), len) };
    std::mem::forget(c);
    l
}

#[test]
fn a_name_held_with_a_full_queue_does_not_stall_the_commands() {
    let dir = std::env::temp_dir().join(format!("loopx-serve-squat-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    assert!(
        run(&dir, &["start-goal", "--goal-text", "squat"])
            .status
            .success()
    );
    let _held = squat(&dir);
    let t = Instant::now();
    // Spawned and killed at 5 s: a command stuck in connect fails the test, not hangs it.
    let mut child = cmd(&dir, &["--json", "quota", "should-run"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    while child.try_wait().unwrap().is_none() && t.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(10));
    }
    let _ = child.kill();
    let asked = child.wait_with_output().unwrap();
    assert!(
        t.elapsed() < Duration::from_secs(5),
        "the command waited on the socket"
    );
    assert_eq!(
        asked.stdout,
        alone(&dir, &["--json", "quota", "should-run"]).stdout
    );
    let _ = std::fs::remove_dir_all(&dir);
}
