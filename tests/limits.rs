//! Every input bounded: out-of-bound flags are exit 2, out-of-bound file values exit 6 with file
//! and line, bad environment values exit 2 (or 7 for the owner key); never a panic, a hang or a
//! wrapped value, and nothing written.

mod common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{Project, Run, assert_err, assert_same_files, parse_json};
use proptest::prelude::*;

/// Runs a command with a deadline: a hang fails the test instead of hanging CI.
fn run_with_timeout(cmd: &mut Command, limit: Duration) -> Run {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn loopx");
    let start = Instant::now();
    loop {
        if child.try_wait().expect("wait").is_some() {
            break;
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("loopx did not finish within {limit:?}: {cmd:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let out = child.wait_with_output().expect("output");
    let r = Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    };
    assert_ne!(r.code, 101, "loopx panicked: {r:?}");
    assert!(!r.stderr.contains("panicked at"), "loopx panicked: {r:?}");
    r
}

/// Asserts a command is a usage error (exit 2) in JSON and text, names `words`, and writes nothing.
#[track_caller]
fn refused(p: &Project, args: &[&str], words: &str) {
    let before = p.files();
    let v = p.fails(args, "usage");
    let msg = v["error"]["message"].as_str().unwrap_or_default();
    assert!(
        msg.contains(words),
        "loopx {args:?}: `{words}` not in: {msg}"
    );
    let r = p.run(args);
    assert_eq!(r.code, 2, "loopx {args:?} (text): {r:?}");
    assert_same_files(&before, &p.files(), &format!("{args:?}"));
}

#[test]
fn out_of_bound_durations_in_flags_are_usage_errors() {
    let p = Project::new("durflags");
    let id = p.add("target", &[]);
    let cases: &[(&[&str], &str)] = &[
        (
            &["todo", "claim", "--ttl", "PT9223372036854775.808S"],
            "out of range",
        ),
        (
            &["todo", "claim", "--ttl", "PT9223372036854776S"],
            "out of range",
        ),
        (&["todo", "claim", "--ttl=-PT5S"], "out of range"),
        (&["todo", "claim", "--ttl", "0s"], "7d"),
        (&["todo", "claim", &id, "--ttl", "8d"], "7d"),
        (&["todo", "renew", &id, "--ttl", "3000000d"], "out of range"),
        (&["todo", "add", "r", "--every", "3000000d"], "out of range"),
        (&["todo", "add", "r", "--every", "0s"], "1s"),
        (&["todo", "add", "r", "--every", "367d"], "366d"),
        (
            &["quota", "set", "--window", "PT9223372036854776S"],
            "out of range",
        ),
        (&["quota", "set", "--window", "0s"], "1s"),
        (&["quota", "set", "--window", "367d"], "366d"),
        (&["quota", "set", "--min-interval", "25h"], "24h"),
        (&["quota", "set", "--min-interval=-PT1S"], "out of range"),
        (
            &["todo", "reassign", &id, "--to", "b", "--ttl", "36501d"],
            "out of range",
        ),
    ];
    for (args, words) in cases {
        refused(&p, args, words);
    }
}

#[test]
fn out_of_bound_counts_and_numbers_in_flags_are_usage_errors() {
    let p = Project::new("numflags");
    let id = p.add("target", &[]);
    p.ok(&["todo", "claim", &id]);
    let cases: &[(&[&str], &str)] = &[
        (&["quota", "spend-slot", "--slots", "0"], "at least 1"),
        (&["quota", "spend-slot", "--slots", "100001"], "100000"),
        (&["quota", "spend-slot", "--slots", "99999999999"], "slots"),
        (
            &["quota", "spend-slot", "--tokens", "1000000000001"],
            "1000000000000",
        ),
        (&["quota", "spend-slot", "--cost-usd", "NaN"], "--cost-usd"),
        (&["quota", "spend-slot", "--cost-usd", "inf"], "--cost-usd"),
        (&["quota", "spend-slot", "--cost-usd=-0.5"], "--cost-usd"),
        (&["quota", "spend-slot", "--cost-usd", "1e10"], "--cost-usd"),
        (&["quota", "set", "--slots", "0"], "1 to 100000"),
        (&["quota", "set", "--slots", "100001"], "1 to 100000"),
        (&["log", "--limit", "100001"], "100000"),
    ];
    for (args, words) in cases {
        refused(&p, args, words);
    }
}

#[test]
fn over_long_texts_and_too_many_values_are_usage_errors() {
    let p = Project::new("texts");
    let id = p.add("target", &[]);
    p.ok(&["todo", "claim", &id]);
    let title = "t".repeat(1001);
    let text = "q".repeat(4001);
    let option = "o".repeat(201);
    let turn = "u".repeat(201);
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["todo", "add", &title], "1000"),
        (vec!["gate", "open", &text], "4000"),
        (vec!["gate", "open", "q?", "--option", &option], "200"),
        (vec!["todo", "update", &id, "--evidence", &text], "4000"),
        (
            vec![
                "todo", "update", &id, "--status", "blocked", "--reason", &text,
            ],
            "4000",
        ),
        (vec!["quota", "spend-slot", "--turn", &turn], "200"),
        (
            vec!["start-goal", "--replace", "--goal-text", &text],
            "4000",
        ),
    ];
    for (args, words) in &cases {
        refused(&p, args, words);
    }
    let mut many: Vec<String> = Vec::new();
    for flag in ["--depends-on", "--blocks", "--option", "--metric"] {
        let (n, value) = match flag {
            "--depends-on" => (101, id.clone()),
            "--blocks" => (1001, id.clone()),
            "--option" => (21, "x".to_string()),
            _ => (101, "m=1".to_string()),
        };
        many.clear();
        for _ in 0..n {
            many.push(flag.to_string());
            many.push(value.clone());
        }
        let mut args: Vec<&str> = match flag {
            "--depends-on" => vec!["todo", "add", "many"],
            "--metric" => vec!["todo", "update", &id],
            _ => vec!["gate", "open", "many?"],
        };
        args.extend(many.iter().map(String::as_str));
        refused(&p, &args, "the most is");
    }
}

#[test]
fn a_huge_cadence_never_writes_an_invalid_time() {
    let p = Project::new("every");
    refused(
        &p,
        &["todo", "add", "r", "--every", "3000000d"],
        "out of range",
    );
    let id = p.add("r", &["--every", "366d"]);
    p.ok(&["todo", "claim", &id]);
    let v = p.ok(&["todo", "update", &id, "--status", "done"]);
    let due = v["todo"]["next_due_at"].as_str().expect("next_due_at");
    assert!(due.ends_with('Z') && !due.contains("invalid"), "{v}");
    for (name, bytes) in p.files() {
        let text = String::from_utf8_lossy(&bytes);
        assert!(!text.contains("invalid-time"), "{name}: {text}");
    }
    p.ok(&["status"]);
    p.ok(&["todo", "list"]);
}

/// Puts `text` at `.loopx/rel`, and checks every command refuses it with exit 6 at that line.
fn refused_file(p: &Project, rel: &str, text: &str, line: usize) {
    std::fs::write(p.lx(rel), text).expect("write state file");
    let before = p.files();
    let shown = format!(".loopx/{rel}:{line}:");
    for args in [
        &["status"][..],
        &["todo", "claim"],
        &["quota", "should-run"],
        &["quota", "spend-slot"],
    ] {
        let v = p.fails(args, "invalid_state");
        let msg = v["error"]["message"].as_str().unwrap_or_default();
        assert!(msg.contains(&shown), "{args:?}: {shown} not in {msg}");
        assert!(
            v["error"]["hint"]
                .as_str()
                .is_some_and(|h| h.contains("Bounds") || h.contains("fix")),
            "{v}"
        );
    }
    assert_same_files(&before, &p.files(), rel);
}

/// Puts `text` at `.loopx/todos/ID.toml`: the todo is quarantined, named at that line, and the
/// rest of the project goes on.
fn quarantined_file(p: &Project, id: &str, text: &str, line: usize) {
    let rel = format!("todos/{id}.toml");
    std::fs::write(p.lx(&rel), text).expect("write state file");
    let v = p.ok(&["status"]);
    let before = p.files();
    assert_eq!(v["quarantined"][0]["file"], format!(".loopx/{rel}"), "{v}");
    assert_eq!(v["quarantined"][0]["line"], line, "{v}");
    let shown = format!(".loopx/{rel}:{line}:");
    for args in [&["todo", "show", id][..], &["todo", "claim", id]] {
        let v = p.fails(args, "invalid_state");
        let msg = v["error"]["message"].as_str().unwrap_or_default();
        assert!(msg.contains(&shown), "{args:?}: {shown} not in {msg}");
    }
    let v = p.ok(&["quota", "should-run"]);
    assert!(
        v["problems"]
            .to_string()
            .contains(&shown[..shown.len() - 1]),
        "{v}"
    );
    assert_same_files(&before, &p.files(), &rel);
}

#[test]
fn out_of_bound_file_values_are_invalid_state_with_file_and_line() {
    let p = Project::new("files");
    let cfg = std::fs::read_to_string(p.lx("loopx.toml")).expect("read config");
    let with = |from: &str, to: &str| {
        assert!(cfg.contains(from), "{cfg}");
        cfg.replace(from, to)
    };
    let line_of = |text: &str, needle: &str| {
        text.lines()
            .position(|l| l.contains(needle))
            .expect("needle")
            + 1
    };
    for (from, to) in [
        ("window = \"24h\"", "window = \"PT9223372036854776S\""),
        ("window = \"24h\"", "window = \"0s\""),
        ("ttl = \"30m\"", "ttl = \"PT9223372036854775.808S\""),
        ("ttl = \"30m\"", "ttl = \"7d1s\""),
        ("slots = 100", "slots = 0"),
        ("min_interval = \"0s\"", "min_interval = \"25h\""),
    ] {
        let text = with(from, to);
        refused_file(&p, "loopx.toml", &text, line_of(&text, to));
    }
    std::fs::write(p.lx("loopx.toml"), &cfg).expect("restore config");
    let id = p.add("target", &[]);
    let todo = std::fs::read_to_string(p.lx(&format!("todos/{id}.toml"))).expect("read todo");
    p.add("another", &[]);
    for bad in [
        todo.replace("fence = 0", "fence = 9007199254740992"),
        todo.replace("fence = 0", "fence = -1"),
    ] {
        quarantined_file(&p, &id, &bad, line_of(&bad, "fence ="));
    }
    let bad = todo.replace("fence = 0", "every = \"3000000d\"\nfence = 0");
    quarantined_file(&p, &id, &bad, line_of(&bad, "every"));
    std::fs::write(p.lx(&format!("todos/{id}.toml")), &todo).expect("restore todo");
    let quota = "schema_version = 1\n\n[[spend]]\nat = \"2020-01-01T00:00:00.000Z\"\n\
                 agent = \"a\"\nslots = 1\ncost_usd = nan\n";
    refused_file(&p, "quota.toml", quota, 7);
}

#[test]
fn bad_lock_timeouts_are_usage_errors() {
    let p = Project::new("locktimeout");
    for bad in ["1e30", "NaN", "inf", "-1", "3601", "ten"] {
        let mut c = p.cmd(&["status", "--json"]);
        c.env("LOOPX_LOCK_TIMEOUT", bad);
        let r = run_with_timeout(&mut c, Duration::from_secs(20));
        assert_eq!(r.code, 2, "LOOPX_LOCK_TIMEOUT={bad}: {r:?}");
        let v = parse_json(&r, bad);
        assert_err(&v, "usage");
        assert!(r.stderr.contains("0 to 3600"), "{r:?}");
    }
    for good in ["0", "2.5", "3600", ""] {
        let mut c = p.cmd(&["status", "--json"]);
        c.env("LOOPX_LOCK_TIMEOUT", good);
        let r = run_with_timeout(&mut c, Duration::from_secs(20));
        assert_eq!(r.code, 0, "LOOPX_LOCK_TIMEOUT={good}: {r:?}");
    }
}

#[test]
fn an_owner_key_that_is_not_a_small_regular_file_is_denied_at_once() {
    let p = Project::new("ownerkey");
    let fifo = p.home.path.join("key.fifo");
    let made = Command::new("mkfifo").arg(&fifo).status();
    let big = p.home.path.join("big.key");
    std::fs::write(&big, vec![b'#'; 5000]).expect("write big key");
    let mut keys = vec![
        std::path::PathBuf::from("/dev/zero"),
        big,
        p.home.path.clone(),
    ];
    if made.is_ok_and(|s| s.success()) {
        keys.push(fifo);
    }
    for key in keys {
        let before = p.files();
        let mut c = p.cmd(&["goal", "pause", "--json"]);
        c.env("LOOPX_OWNER_KEY", &key);
        let r = run_with_timeout(&mut c, Duration::from_secs(20));
        assert_eq!(r.code, 7, "LOOPX_OWNER_KEY={}: {r:?}", key.display());
        assert_err(&parse_json(&r, "goal pause"), "denied");
        assert_same_files(&before, &p.files(), &key.display().to_string());
    }
    p.ok(&["goal", "pause"]);
}

#[test]
fn over_long_agent_ids_are_usage_errors() {
    let p = Project::new("agentid");
    let long = "a".repeat(65);
    let mut c = p.cmd(&["status", "--json"]);
    c.env("LOOPX_AGENT", &long);
    let r = run_with_timeout(&mut c, Duration::from_secs(20));
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("64"), "{r:?}");
    let huge = "a".repeat(100_000);
    let r = p.run(&["--agent", &huge, "status"]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.len() < 1000, "the message echoes the whole id");
    p.ok_as(&"a".repeat(64), &["status"]);
}

#[test]
fn an_artifact_that_is_not_a_regular_file_is_refused_without_reading() {
    let p = Project::new("artifact");
    let id = p.add("target", &[]);
    p.ok(&["todo", "claim", &id]);
    let mut c = p.cmd(&["todo", "update", &id, "--artifact", "/dev/zero", "--json"]);
    let r = run_with_timeout(&mut c, Duration::from_secs(20));
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("regular file"), "{r:?}");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// Any duration prints without a panic, and a parsed one is always within 0..=36500d.
    #[test]
    fn any_duration_prints_and_parses_in_range(ms in any::<i64>(), n in any::<u64>(), unit in "[dhms]") {
        let _ = loopx::kernel::Dur(ms).to_string();
        let _ = loopx::kernel::Dur(ms).secs_ceil();
        if let Ok(d) = format!("{n}{unit}").parse::<loopx::kernel::Dur>() {
            prop_assert!(d >= loopx::kernel::Dur(0) && d <= loopx::kernel::Dur::MAX);
        }
        if let Ok(d) = format!("PT{n}S").parse::<loopx::kernel::Dur>() {
            prop_assert!(d >= loopx::kernel::Dur(0) && d <= loopx::kernel::Dur::MAX);
        }
    }

    /// Sums and differences of any time and duration stay within the range of times.
    #[test]
    fn time_arithmetic_stays_in_range(t in any::<i64>(), d in any::<i64>()) {
        use loopx::kernel::{Dur, Ts};
        prop_assert!(Ts(t).add(Dur(d)).in_range());
        prop_assert!(Ts(t).sub(Dur(d)).in_range());
        if let Some(s) = Ts(t).checked_add(Dur(d)) {
            prop_assert!(s.in_range());
            prop_assert!(!s.to_string().contains("invalid"));
        }
    }
}
