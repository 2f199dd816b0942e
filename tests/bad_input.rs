//! Malformed state files from `tests/corpus/`, each put where it belongs in a fresh project.
//!
//! A malformed `loopx.toml` or `quota.toml` stops every command with exit 6 naming the file (and
//! line). A malformed todo is quarantined: never claimable, named by status, should-run and
//! doctor, while the other todos go on. A malformed gate counts as a pending global gate. In
//! every case nothing panics and the bad file stays byte-identical.

mod common;

use common::{Project, assert_err, assert_same_files, parse_json};

/// A corpus file, where it goes under `.loopx/`, the error code, and the line the message names.
struct Case {
    file: &'static str,
    dest: &'static str,
    code: &'static str,
    line: Option<usize>,
}

const TODO: &str = "todos/t-aaaaaa.toml";
const GATE: &str = "gates/g-aaaaaa.toml";
const CONFIG: &str = "loopx.toml";
const QUOTA: &str = "quota.toml";

const CASES: &[Case] = &[
    Case {
        file: "todo_bad_syntax.toml",
        dest: TODO,
        code: "invalid_state",
        line: Some(3),
    },
    Case {
        file: "todo_wrong_type.toml",
        dest: TODO,
        code: "invalid_state",
        line: Some(10),
    },
    Case {
        file: "todo_unknown_status.toml",
        dest: TODO,
        code: "invalid_state",
        line: Some(6),
    },
    Case {
        file: "todo_unknown_priority.toml",
        dest: TODO,
        code: "invalid_state",
        line: Some(5),
    },
    Case {
        file: "todo_schema_too_new.toml",
        dest: TODO,
        code: "schema_too_new",
        line: None,
    },
    Case {
        file: "todo_schema_string.toml",
        dest: TODO,
        code: "invalid_state",
        line: None,
    },
    Case {
        file: "todo_id_mismatch.toml",
        dest: TODO,
        code: "invalid_state",
        line: None,
    },
    Case {
        file: "todo_bad_time.toml",
        dest: TODO,
        code: "invalid_state",
        line: Some(8),
    },
    Case {
        file: "todo_bad_lease.toml",
        dest: TODO,
        code: "invalid_state",
        line: Some(12),
    },
    Case {
        file: "todo_negative_fence.toml",
        dest: TODO,
        code: "invalid_state",
        line: Some(10),
    },
    Case {
        file: "todo_empty.toml",
        dest: TODO,
        code: "invalid_state",
        line: None,
    },
    Case {
        file: "todo_not_utf8.toml",
        dest: TODO,
        code: "invalid_state",
        line: None,
    },
    Case {
        file: "config_bad_duration.toml",
        dest: CONFIG,
        code: "invalid_state",
        line: Some(16),
    },
    Case {
        file: "config_bad_window.toml",
        dest: CONFIG,
        code: "invalid_state",
        line: Some(12),
    },
    Case {
        file: "config_broken.toml",
        dest: CONFIG,
        code: "invalid_state",
        line: Some(3),
    },
    Case {
        file: "config_schema_too_new.toml",
        dest: CONFIG,
        code: "schema_too_new",
        line: None,
    },
    Case {
        file: "config_bad_goal_status.toml",
        dest: CONFIG,
        code: "invalid_state",
        line: Some(6),
    },
    Case {
        file: "config_negative_slots.toml",
        dest: CONFIG,
        code: "invalid_state",
        line: Some(11),
    },
    Case {
        file: "gate_broken.toml",
        dest: GATE,
        code: "invalid_state",
        line: Some(4),
    },
    Case {
        file: "gate_unknown_status.toml",
        dest: GATE,
        code: "invalid_state",
        line: Some(6),
    },
    Case {
        file: "gate_schema_too_new.toml",
        dest: GATE,
        code: "schema_too_new",
        line: None,
    },
    Case {
        file: "gate_id_mismatch.toml",
        dest: GATE,
        code: "invalid_state",
        line: None,
    },
    Case {
        file: "quota_broken.toml",
        dest: QUOTA,
        code: "invalid_state",
        line: Some(6),
    },
    Case {
        file: "quota_bad_syntax.toml",
        dest: QUOTA,
        code: "invalid_state",
        line: Some(2),
    },
    Case {
        file: "quota_schema_too_new.toml",
        dest: QUOTA,
        code: "schema_too_new",
        line: None,
    },
    // Values outside their bounds (docs/state-format.md, "Bounds").
    Case {
        file: "config_window_wraps.toml",
        dest: CONFIG,
        code: "invalid_state",
        line: Some(12),
    },
    Case {
        file: "config_ttl_overflows.toml",
        dest: CONFIG,
        code: "invalid_state",
        line: Some(11),
    },
    Case {
        file: "config_ttl_too_long.toml",
        dest: CONFIG,
        code: "invalid_state",
        line: Some(11),
    },
    Case {
        file: "config_zero_slots.toml",
        dest: CONFIG,
        code: "invalid_state",
        line: Some(11),
    },
    Case {
        file: "config_interval_over_window.toml",
        dest: CONFIG,
        code: "invalid_state",
        line: Some(12),
    },
    Case {
        file: "config_zero_window.toml",
        dest: CONFIG,
        code: "invalid_state",
        line: Some(11),
    },
    Case {
        file: "todo_zero_every.toml",
        dest: TODO,
        code: "invalid_state",
        line: Some(10),
    },
    Case {
        file: "todo_huge_every.toml",
        dest: TODO,
        code: "invalid_state",
        line: Some(10),
    },
    Case {
        file: "todo_huge_fence.toml",
        dest: TODO,
        code: "invalid_state",
        line: Some(10),
    },
    Case {
        file: "todo_far_time.toml",
        dest: TODO,
        code: "invalid_state",
        line: Some(10),
    },
    Case {
        file: "todo_long_title.toml",
        dest: TODO,
        code: "invalid_state",
        line: Some(3),
    },
    Case {
        file: "todo_empty_holder.toml",
        dest: TODO,
        code: "invalid_state",
        line: Some(13),
    },
    Case {
        file: "quota_nan_cost.toml",
        dest: QUOTA,
        code: "invalid_state",
        line: Some(12),
    },
    Case {
        file: "quota_zero_slots.toml",
        dest: QUOTA,
        code: "invalid_state",
        line: Some(6),
    },
    Case {
        file: "quota_huge_tokens.toml",
        dest: QUOTA,
        code: "invalid_state",
        line: Some(7),
    },
    Case {
        file: "gate_empty_option.toml",
        dest: GATE,
        code: "invalid_state",
        line: Some(6),
    },
];

fn corpus_dir() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join("corpus")
}

/// A fresh project with a good todo, then the corpus file put in place.
fn project_with(case: &Case) -> Project {
    let p = Project::new("bad");
    p.add("a good todo", &[]);
    let bytes = std::fs::read(corpus_dir().join(case.file)).expect("read corpus file");
    std::fs::write(p.lx(case.dest), bytes).expect("place corpus file");
    p
}

/// Commands that must refuse the state: readers and writers.
const COMMANDS: &[&[&str]] = &[
    &["status"],
    &["todo", "claim"],
    &["quota", "should-run"],
    &["todo", "add", "another"],
    &["todo", "list"],
    &["quota", "spend-slot"],
    &["refresh-state"],
];

fn check_case(case: &Case) {
    let p = project_with(case);
    let shown = format!(".loopx/{}", case.dest);
    let before = p.files();
    for args in COMMANDS {
        let what = format!("{} with loopx {}", case.file, args.join(" "));
        let (code, v) = p.json(args);
        assert_eq!(code, 6, "{what}: {v}");
        assert_err(&v, case.code);
        let msg = v["error"]["message"].as_str().unwrap_or_default();
        assert!(
            msg.contains(&shown),
            "{what}: the message does not name {shown}: {msg}"
        );
        if let Some(line) = case.line {
            let at = format!("{shown}:{line}:");
            assert!(
                msg.contains(&at),
                "{what}: the message does not name {at}: {msg}"
            );
        }
        // The JSON error also names the file and line as fields, for agents.
        assert_eq!(v["error"]["file"], shown.as_str(), "{what}: {v}");
        if let Some(line) = case.line {
            assert_eq!(v["error"]["line"], line, "{what}: {v}");
        }
        assert_same_files(&before, &p.files(), &what);

        // Text mode: the same exit code and the file named on stderr for people.
        let r = p.run(args);
        assert_eq!(r.code, 6, "{what} (text): {r:?}");
        assert!(
            r.stderr.contains(&shown),
            "{what} (text): stderr does not name {shown}: {r:?}"
        );
        assert_same_files(&before, &p.files(), &what);
    }
    // doctor reports it as an error (exit 6) and, without --fix, writes nothing.
    let r = p.run(&["doctor", "--json"]);
    assert_eq!(r.code, 6, "{} with doctor: {r:?}", case.file);
    let v = parse_json(&r, "doctor");
    assert_eq!(v["ok"], false, "{}: {v}", case.file);
    let findings = v["findings"].as_array().expect("findings");
    assert!(
        findings
            .iter()
            .any(|f| f["severity"] == "error" && f["file"].as_str() == Some(shown.as_str())),
        "{}: doctor does not name {shown} as an error: {v}",
        case.file
    );
    assert_same_files(&before, &p.files(), &format!("{} with doctor", case.file));
}

#[test]
fn every_corpus_file_is_listed() {
    let mut on_disk: Vec<String> = std::fs::read_dir(corpus_dir())
        .expect("corpus dir")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    on_disk.sort();
    let mut listed: Vec<String> = CASES.iter().map(|c| c.file.to_string()).collect();
    listed.sort();
    assert_eq!(on_disk, listed, "tests/corpus/ and CASES disagree");
}

/// The file and line a quarantined file is named by, as `file:line` or the file alone.
fn named(case: &Case) -> String {
    let shown = format!(".loopx/{}", case.dest);
    match case.line {
        Some(l) => format!("{shown}:{l}"),
        None => shown,
    }
}

fn check_quarantined_todo(case: &Case) {
    let p = project_with(case);
    let bad = p.lx(case.dest);
    let bad_bytes = std::fs::read(&bad).expect("read");
    let at = named(case);
    let what = case.file;
    // should-run names the file and still offers the good todo.
    let (code, v) = p.json(&["quota", "should-run"]);
    assert_eq!(code, 0, "{what}: {v}");
    assert_eq!(v["decision"], "run", "{what}: {v}");
    assert_ne!(v["todo"]["id"], "t-aaaaaa", "{what}: {v}");
    let probs = v["problems"].to_string();
    assert!(
        probs.contains(&at),
        "{what}: should-run does not name {at}: {v}"
    );
    // status names it with its code.
    let v = p.ok(&["status"]);
    let q = &v["quarantined"][0];
    assert_eq!(q["file"], format!(".loopx/{}", case.dest), "{what}: {v}");
    assert_eq!(q["code"], case.code, "{what}: {v}");
    if let Some(line) = case.line {
        assert_eq!(q["line"], line, "{what}: {v}");
    }
    let r = p.run(&["status"]);
    assert!(r.stdout.contains(&at), "{what}: status text: {r:?}");
    // The bad todo is refused by id, with the file named; the good one works.
    let v = p.fails(&["todo", "show", "t-aaaaaa"], case.code);
    assert!(
        v["error"]["message"].as_str().unwrap_or("").contains(&at),
        "{what}: {v}"
    );
    p.fails(&["todo", "claim", "t-aaaaaa"], case.code);
    let v = p.ok(&["todo", "claim"]);
    assert_ne!(v["todo"]["id"], "t-aaaaaa", "{what}: {v}");
    p.ok(&["todo", "add", "another"]);
    p.ok(&["todo", "list"]);
    p.ok(&["refresh-state"]);
    assert_eq!(
        std::fs::read(&bad).expect("read"),
        bad_bytes,
        "{what}: the bad file changed"
    );
    // doctor names it as an error and writes nothing.
    let r = p.run(&["doctor", "--json"]);
    assert_eq!(r.code, 6, "{what} with doctor: {r:?}");
    let v = parse_json(&r, "doctor");
    let shown = format!(".loopx/{}", case.dest);
    assert!(
        v["findings"]
            .as_array()
            .expect("findings")
            .iter()
            .any(|f| f["severity"] == "error" && f["file"].as_str() == Some(shown.as_str())),
        "{what}: doctor does not name {shown}: {v}"
    );
    assert_eq!(
        std::fs::read(&bad).expect("read"),
        bad_bytes,
        "{what}: the bad file changed"
    );
}

fn check_fail_closed_gate(case: &Case) {
    let p = project_with(case);
    let bad = p.lx(case.dest);
    let bad_bytes = std::fs::read(&bad).expect("read");
    let what = case.file;
    let (code, v) = p.json(&["quota", "should-run"]);
    assert_eq!(code, 3, "{what}: {v}");
    assert_eq!(v["decision"], "ask", "{what}: {v}");
    assert_eq!(v["questions"][0]["gate"], "g-aaaaaa", "{what}: {v}");
    assert!(
        v["questions"][0]["question"]
            .as_str()
            .unwrap_or("")
            .contains(".loopx/gates/g-aaaaaa.toml"),
        "{what}: {v}"
    );
    p.fails(&["todo", "claim"], "nothing_ready");
    let v = p.ok(&["status"]);
    assert_eq!(
        v["quarantined"][0]["file"], ".loopx/gates/g-aaaaaa.toml",
        "{what}: {v}"
    );
    p.ok(&["gate", "list"]);
    let (code, v) = p.json(&["doctor"]);
    assert_eq!(code, 6, "{what}: {v}");
    assert_eq!(
        std::fs::read(&bad).expect("read"),
        bad_bytes,
        "{what}: the bad file changed"
    );
}

#[test]
fn malformed_todos_are_quarantined_and_the_rest_goes_on() {
    for case in CASES.iter().filter(|c| c.dest == TODO) {
        check_quarantined_todo(case);
    }
}

#[test]
fn malformed_config_is_refused_without_writes() {
    for case in CASES.iter().filter(|c| c.dest == CONFIG) {
        check_case(case);
    }
}

#[test]
fn malformed_gates_count_as_pending_global_gates() {
    for case in CASES.iter().filter(|c| c.dest == GATE) {
        check_fail_closed_gate(case);
    }
}

#[test]
fn malformed_quota_is_refused_without_writes() {
    for case in CASES.iter().filter(|c| c.dest == QUOTA) {
        check_case(case);
    }
}

#[test]
fn schema_too_new_names_the_upgrade() {
    let case = CASES
        .iter()
        .find(|c| c.file == "todo_schema_too_new.toml")
        .expect("case");
    let p = project_with(case);
    let v = p.fails(&["todo", "show", "t-aaaaaa"], "schema_too_new");
    let msg = v["error"]["message"].as_str().unwrap_or_default();
    assert!(msg.contains("99"), "{v}");
    assert!(
        v["error"]["hint"]
            .as_str()
            .is_some_and(|h| h.contains("upgrade")),
        "{v}"
    );
}

#[test]
fn a_fixed_file_makes_the_project_work_again() {
    let case = CASES
        .iter()
        .find(|c| c.file == "todo_unknown_status.toml")
        .expect("case");
    let p = project_with(case);
    p.fails(&["todo", "claim", "t-aaaaaa"], "invalid_state");
    let text = std::fs::read_to_string(p.lx(case.dest)).expect("read");
    std::fs::write(p.lx(case.dest), text.replace("\"wip\"", "\"open\"")).expect("write");
    let v = p.ok(&["todo", "claim", "t-aaaaaa"]);
    assert_eq!(v["todo"]["id"], "t-aaaaaa");
    assert_eq!(v["todo"]["lease"]["fence"], 1);
}

#[test]
fn hostile_arguments_never_panic() {
    let p = Project::new("args");
    let id = p.add("target", &[]);
    let long = "x".repeat(300);
    let cases: &[&[&str]] = &[
        &["todo", "claim", "--ttl", "99999999999999999999d"],
        &["todo", "claim", "--ttl", "-5s"],
        &["todo", "claim", "--ttl", "0s"],
        &["todo", "add", "x", "--every", "1x"],
        &["todo", "add", "x", "--priority", "P9"],
        &["todo", "add", ""],
        &["todo", "show", ""],
        &["todo", "show", "t-"],
        &["todo", "show", "é€漢字"],
        &["todo", "show", "ab"],
        &["todo", "claim", "--ttl", "8d"],
        &["todo", "update", &id, "--metric", "=5"],
        &["todo", "update", &id, "--fence", "-1"],
        &["--agent", "", "todo", "claim"],
        &["--agent", "a/b", "todo", "claim"],
        &["quota", "spend-slot", "--slots", "0"],
        &["quota", "spend-slot", "--cost-usd", "NaN"],
        &["quota", "set", "--window", "0s"],
        &["gate", "open", ""],
        &["gate", "approve", "../g"],
        &["log", "--limit", "-1"],
        &["start-goal", "--goal-text", "   "],
    ];
    for args in cases {
        let r = p.run(args);
        assert_eq!(r.code, 2, "loopx {args:?} should be a usage error: {r:?}");
        let mut a = args.to_vec();
        a.push("--json");
        let r = p.run(&a);
        let v = parse_json(&r, &format!("{args:?}"));
        assert_err(&v, "usage");
    }
    // A long id that matches nothing is just not found.
    let v = p.fails(&["todo", "show", &long], "not_found");
    assert!(
        v["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("no todo")),
        "{v}"
    );
}
