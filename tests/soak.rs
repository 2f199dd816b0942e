//! The soak's 60-second form (issue 13): benches/soak.sh with the built binary, failing on any
//! violation of its invariants, and leaving no process behind whatever happens.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::TempDir;
use serde_json::Value;

/// How long the soak runs, and the most the whole script may take (setup, checks, shutdown).
const SECONDS: &str = "60";
const LIMIT: Duration = Duration::from_secs(300);

/// The script's process group and tag: on drop, both are killed, so nothing outlives the test.
struct Reaper {
    child: Child,
    tag: String,
}

impl Drop for Reaper {
    fn drop(&mut self) {
        if let Ok(pid) = i32::try_from(self.child.id()) {
            // SAFETY: kill(2) on the process group this test created; no memory is involved.
            unsafe { libc::kill(-pid, libc::SIGKILL) };
        }
        let _ = self.child.wait();
        for pid in tagged(&self.tag) {
            // SAFETY: as above, on a process that carries this run's tag.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
    }
}

/// The processes whose environment holds `SOAK_TAG=tag`.
fn tagged(tag: &str) -> Vec<i32> {
    let needle = format!("SOAK_TAG={tag}");
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/environ"))
                .map(|env| env.split(|b| *b == 0).any(|v| v == needle.as_bytes()))
                .unwrap_or(false)
        })
        .collect()
}

fn have(tool: &str) -> bool {
    Command::new(tool)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok()
}

/// Starts benches/soak.sh in a process group of its own, its output in files under `dir`.
fn start(dir: &Path, tag: &str) -> Reaper {
    use std::os::unix::process::CommandExt;
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("benches/soak.sh");
    let out = std::fs::File::create(dir.join("soak.out")).expect("soak.out");
    let err = out.try_clone().expect("soak.out");
    let child = Command::new("bash")
        .arg(script)
        .arg(SECONDS)
        .env("LOOPX", common::bin())
        .env("SOAK_DIR", dir.join("run"))
        .env("SOAK_TAG", tag)
        .env("SOAK_FAKETIME", "auto")
        .env("SOAK_CHECK_EVERY", "20")
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .process_group(0)
        .spawn()
        .expect("start benches/soak.sh");
    Reaper {
        child,
        tag: tag.to_string(),
    }
}

/// A figure of the report, as a number.
fn num(r: &Value, key: &str) -> u64 {
    r[key]
        .as_u64()
        .unwrap_or_else(|| panic!("report has no {key}: {r}"))
}

#[test]
fn a_minute_of_soak_keeps_every_invariant() {
    if !have("bash") || !have("python3") {
        eprintln!("skipped: the soak needs bash and python3");
        return;
    }
    let tmp = TempDir::new("soak");
    let tag = format!("loopx-soak-test-{}", std::process::id());
    let mut run = start(&tmp.path, &tag);
    let until = Instant::now() + LIMIT;
    let status = loop {
        if let Some(s) = run.child.try_wait().expect("wait for soak.sh") {
            break s;
        }
        assert!(Instant::now() < until, "soak.sh still runs after {LIMIT:?}");
        std::thread::sleep(Duration::from_millis(200));
    };
    let out = std::fs::read_to_string(tmp.path.join("soak.out")).unwrap_or_default();
    println!("{out}"); // the figures, with --nocapture
    let left = tagged(&tag);
    assert!(
        left.is_empty(),
        "soak.sh left processes behind: {left:?}\n{out}"
    );
    assert_eq!(status.code(), Some(0), "the soak failed:\n{out}");
    let report = std::fs::read_to_string(tmp.path.join("run/out/report.json")).expect("report");
    let r: Value = serde_json::from_str(&report).expect("report.json is JSON");
    assert_eq!(r["violations"], serde_json::json!([]), "{out}");
    // The chaos loop's first round does each of its actions, so each shows at least once.
    for key in [
        "turns",
        "todos_done",
        "kills",
        "reassigns",
        "gates_opened",
        "pauses",
    ] {
        assert!(num(&r, key) >= 1, "no {key} in a minute of soak:\n{out}");
    }
    assert!(
        r["turns_by_end"]["done"].as_u64().unwrap_or(0) >= 1,
        "{out}"
    );
}

/// Runs `soak.py check` on a run's directory: its exit code and output.
fn check(dir: &Path) -> (i32, String) {
    let py = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("benches/soak.py");
    let out = Command::new("python3")
        .arg(py)
        .args(["check", "--dir"])
        .arg(dir)
        .args(["--loopx", common::bin()])
        .env("LOOPX_OWNER_KEY", dir.join("owner.key"))
        .stdin(Stdio::null())
        .output()
        .expect("run soak.py check");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    (out.status.code().unwrap_or(-1), text)
}

#[test]
fn the_checker_flags_an_acknowledged_turn_the_store_lost() {
    if !have("python3") {
        eprintln!("skipped: the soak's checker needs python3");
        return;
    }
    let tmp = TempDir::new("soak-check");
    let (proj, out) = (tmp.path.join("proj"), tmp.path.join("out"));
    std::fs::create_dir_all(&out).expect("out dir");
    let lx = |args: &[&str]| {
        let mut c = Command::new(common::bin());
        c.arg("--dir").arg(&proj).args(args);
        c.env("LOOPX_OWNER_KEY", tmp.path.join("owner.key"));
        common::run_cmd(&mut c)
    };
    std::fs::create_dir_all(&proj).expect("project dir");
    assert_eq!(lx(&["start-goal", "--goal-text", "soak"]).code, 0);
    assert_eq!(lx(&["todo", "add", "soak ok 1"]).code, 0);
    let turn = lx(&[
        "--agent",
        "a1",
        "--json",
        "turn",
        "--complete-on-success",
        "--",
        "true",
    ]);
    assert_eq!(turn.code, 0, "{turn:?}");
    std::fs::write(out.join("a1.jsonl"), &turn.stdout).expect("a1.jsonl");
    assert_eq!(check(&tmp.path), (0, "no violations\n".to_string()));
    // The same todo finished by a second acknowledged turn that the store never saw.
    let v: Value = serde_json::from_str(turn.stdout.trim()).expect("turn JSON");
    let mut lost = v.clone();
    lost["turn"] = Value::from("u-neverrecorded");
    std::fs::write(out.join("a2.jsonl"), format!("{lost}\n")).expect("a2.jsonl");
    let (code, text) = check(&tmp.path);
    assert_eq!(code, 1, "{text}");
    for want in [
        "u-neverrecorded",
        "no evidence",
        "no spend",
        "finished by 2",
    ] {
        assert!(text.contains(want), "no `{want}` in:\n{text}");
    }
}
