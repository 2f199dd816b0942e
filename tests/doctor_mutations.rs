//! About 200 malformed states, made by mutating each kind of state file in many ways (wrong
//! types, bad values, out of range, truncated, bad UTF-8, duplicate keys, missing fields,
//! negative and huge numbers, control characters): doctor reports each (exit 6), names the file,
//! and names the line where the fault has one.

mod common;

use std::path::Path;

use common::Project;
use serde_json::Value;

/// One malformed state: the file (in `.loopx/`), its new bytes, and the line at fault (if any).
struct Case {
    name: String,
    file: String,
    bytes: Vec<u8>,
    line: Option<usize>,
}

/// A project with a todo claimed and with evidence, one archived, a pending gate and a spend.
fn project() -> Project {
    let p = Project::new("mutations");
    let t = p.add("work", &[]);
    let done = p.add("finished", &[]);
    p.ok(&["quota", "set", "--slots", "10"]);
    p.ok_as("a1", &["todo", "claim", &t]);
    p.ok_as("a1", &["todo", "update", &t, "--evidence", "did a thing"]);
    p.ok_as("a1", &["quota", "spend-slot"]);
    p.ok_as("a2", &["todo", "claim", &done]);
    p.ok_as(
        "a2",
        &[
            "todo",
            "update",
            &done,
            "--status",
            "done",
            "--evidence",
            "ok",
        ],
    );
    p.gate("may I?", &["--blocks", &t]);
    p.ok(&["owner", "seal"]);
    p
}

/// The value of a `key = value` line as another type, out of range, or bad.
fn bad_values(value: &str) -> Vec<(&'static str, String)> {
    let v = value.trim();
    let mut out = vec![("wrong type: a table", "{ x = 1 }".to_string())];
    if v.starts_with('"') {
        out.push(("wrong type: an integer", "7".into()));
        out.push(("a control character", "\"a\u{1}b\"".into()));
    } else if v.starts_with('[') {
        out.push(("wrong type: a string", "\"x\"".into()));
        out.push(("wrong item type", "[1, {}]".into()));
    } else if v.parse::<i64>().is_ok() {
        out.push(("wrong type: a string", "\"x\"".into()));
        out.push(("negative", "-5".into()));
        out.push(("huge", "99999999999999999999".into()));
    } else {
        out.push(("wrong type: an array", "[1]".into()));
    }
    out
}

/// String keys whose value may be any text.
const FREE_TEXT: [&str; 8] = [
    "title",
    "question",
    "objective",
    "holder",
    "opened_by",
    "created_by",
    "status_by",
    "agent",
];

/// Keys a state file cannot do without.
const REQUIRED: [&str; 5] = ["id", "title", "question", "objective", "holder"];

/// Mutations of a TOML state file: each key's value made bad, then file-wide faults.
fn toml_cases(rel: &str, text: &str, out: &mut Vec<Case>) {
    let lines: Vec<&str> = text.lines().collect();
    let with = |i: usize, new: &str| {
        let mut l: Vec<String> = lines.iter().map(|s| s.to_string()).collect();
        l[i] = new.to_string();
        l.join("\n") + "\n"
    };
    for (i, line) in lines.iter().enumerate() {
        let Some((key, value)) = line.split_once(" = ") else {
            continue;
        };
        if key.starts_with('#') || key == "schema_version" {
            continue;
        }
        if REQUIRED.contains(&key) {
            let mut l = lines.clone();
            l.remove(i);
            out.push(Case {
                name: format!("{rel} `{key}` missing"),
                file: rel.into(),
                bytes: (l.join("\n") + "\n").into_bytes(),
                line: None,
            });
        }
        let mut bad = bad_values(value);
        if !value.starts_with('"') || !FREE_TEXT.contains(&key) {
            bad.push(("a value it cannot have", "\"bogus\"".into()));
        }
        for (what, bad) in bad {
            out.push(Case {
                name: format!("{rel} `{key}`: {what}"),
                file: rel.into(),
                bytes: with(i, &format!("{key} = {bad}")).into_bytes(),
                line: Some(i + 1),
            });
        }
    }
    let first_key = lines.iter().position(|l| l.contains(" = ")).unwrap_or(0);
    let mut dup = lines.clone();
    dup.insert(first_key + 1, lines[first_key]);
    out.push(Case {
        name: format!("{rel}: a duplicate key"),
        file: rel.into(),
        bytes: (dup.join("\n") + "\n").into_bytes(),
        line: Some(first_key + 2),
    });
    let mut utf = text.as_bytes().to_vec();
    let at = text.find('"').map_or(0, |i| i + 1);
    utf.insert(at, 0xff);
    out.push(Case {
        name: format!("{rel}: bad UTF-8"),
        file: rel.into(),
        bytes: utf,
        line: None,
    });
    out.push(Case {
        name: format!("{rel}: truncated"),
        file: rel.into(),
        bytes: text.as_bytes()[..text.len() * 2 / 3].to_vec(),
        line: None,
    });
    out.push(Case {
        name: format!("{rel}: a control character outside a string"),
        file: rel.into(),
        bytes: with(first_key, &format!("{}\u{7}", lines[first_key])).into_bytes(),
        line: Some(first_key + 1),
    });
}

/// Mutations of a JSON Lines file: each line's fields made bad, and the line itself broken.
fn jsonl_cases(rel: &str, text: &str, out: &mut Vec<Case>) {
    let lines: Vec<&str> = text.lines().collect();
    let with = |i: usize, new: &str| {
        let mut l: Vec<String> = lines.iter().map(|s| s.to_string()).collect();
        l[i] = new.to_string();
        l.join("\n") + "\n"
    };
    for (i, line) in lines.iter().enumerate().take(3) {
        let v: Value = serde_json::from_str(line).expect("a JSON line");
        let mut push = |what: &str, new: String| {
            out.push(Case {
                name: format!("{rel}:{} {what}", i + 1),
                file: rel.into(),
                bytes: with(i, &new).into_bytes(),
                line: Some(i + 1),
            })
        };
        push("not JSON", format!("{{{line}"));
        push("cut short", line[..line.len() / 2].to_string());
        push(
            "a control character",
            line.replacen("\":\"", "\":\"\u{1}", 1),
        );
        for key in ["seq", "at", "actor", "kind", "text"] {
            if let Some(old) = v.get(key) {
                let bad = if old.is_string() {
                    Value::from(-1)
                } else {
                    Value::from("x")
                };
                let mut m = v.clone();
                m[key] = bad;
                push(&format!("`{key}` of a wrong type"), m.to_string());
                let mut m = v.clone();
                m.as_object_mut().expect("object").remove(key);
                push(&format!("`{key}` missing"), m.to_string());
            }
        }
    }
    let mut utf = text.as_bytes().to_vec();
    utf.insert(text.find('"').map_or(0, |i| i + 1), 0xff);
    out.push(Case {
        name: format!("{rel}: bad UTF-8 on line 1"),
        file: rel.into(),
        bytes: utf,
        line: Some(1),
    });
}

/// Mutations of `owner.seal`: each line broken, and a field made huge or negative.
fn seal_cases(text: &str, out: &mut Vec<Case>) {
    let lines: Vec<&str> = text.lines().collect();
    for (i, line) in lines.iter().enumerate().skip(1) {
        let mut l: Vec<String> = lines.iter().map(|s| s.to_string()).collect();
        l[i] = format!("{line} extra");
        out.push(Case {
            name: format!("owner.seal:{} a field too many", i + 1),
            file: "owner.seal".into(),
            bytes: (l.join("\n") + "\n").into_bytes(),
            line: Some(i + 1),
        });
    }
    out.push(Case {
        name: "owner.seal: truncated".into(),
        file: "owner.seal".into(),
        bytes: text.as_bytes()[..text.len() / 2].to_vec(),
        line: None,
    });
}

fn cases(p: &Project, t: &str, a: &str, g: &str) -> Vec<Case> {
    let mut out = Vec::new();
    let read = |rel: &str| std::fs::read_to_string(p.lx(rel)).expect(rel);
    for rel in [
        "loopx.toml".to_string(),
        format!("todos/{t}.toml"),
        format!("archive/{a}.toml"),
        format!("gates/{g}.toml"),
        "quota.toml".into(),
    ] {
        toml_cases(&rel, &read(&rel), &mut out);
    }
    jsonl_cases("journal.jsonl", &read("journal.jsonl"), &mut out);
    let ev = format!("evidence/{t}.jsonl");
    jsonl_cases(&ev, &read(&ev), &mut out);
    seal_cases(&read("owner.seal"), &mut out);
    out
}

fn only(dir: &Path, sub: &str) -> String {
    let e = std::fs::read_dir(dir.join(sub)).expect(sub);
    let names: Vec<String> = e
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| !n.starts_with('.'))
        .collect();
    assert_eq!(names.len(), 1, "{sub}: {names:?}");
    names[0].split('.').next().expect("stem").to_string()
}

/// What is wrong with doctor's answer for a case, if anything.
fn judge(c: &Case, code: i32, v: &Value) -> Option<String> {
    let shown = format!(".loopx/{}", c.file);
    let findings = v["findings"].as_array().cloned().unwrap_or_default();
    let errors: Vec<&Value> = findings
        .iter()
        .filter(|f| f["severity"] == "error")
        .collect();
    if code != 6 || errors.is_empty() {
        return Some(format!("not reported (exit {code}): {v}"));
    }
    let here: Vec<&&Value> = errors
        .iter()
        .filter(|f| f["file"] == shown.as_str())
        .collect();
    if here.is_empty() {
        return Some(format!("no error names {shown}: {v}"));
    }
    if let Some(n) = c.line
        && !here.iter().any(|f| f["line"] == n)
    {
        return Some(format!("no error names {shown}:{n}: {v}"));
    }
    None
}

/// Threads that run cases, each on its own copy of the project.
const THREADS: usize = 4;

/// Runs every `THREADS`-th case (from `k`) on the copy at `root`; what doctor got wrong.
fn run_share(p: &Project, root: &Path, all: &[Case], k: usize) -> Vec<String> {
    let dir = root.to_string_lossy().into_owned();
    let mut missed = Vec::new();
    for c in all.iter().skip(k).step_by(THREADS) {
        let path = root.join(".loopx").join(&c.file);
        let kept = std::fs::read(&path).expect("read");
        std::fs::write(&path, &c.bytes).expect("write");
        let (code, v) = p.json(&["--dir", &dir, "doctor"]);
        std::fs::write(&path, &kept).expect("put back");
        if let Some(why) = judge(c, code, &v) {
            missed.push(format!("{}: {why}", c.name));
        }
    }
    let (code, v) = p.json(&["--dir", &dir, "doctor"]);
    assert_eq!(code, 0, "the copy is healthy again: {v}");
    missed
}

#[test]
fn doctor_reports_every_malformed_state_at_its_file_and_line() {
    let p = project();
    let (t, a, g) = (
        only(&p.lx(""), "todos"),
        only(&p.lx(""), "archive"),
        only(&p.lx(""), "gates"),
    );
    let all = cases(&p, &t, &a, &g);
    assert!(all.len() >= 180, "only {} cases", all.len());
    // Copies of the project, one a thread: the cases run side by side.
    let copies: Vec<common::TempDir> = (0..THREADS)
        .map(|_| {
            let d = common::TempDir::new("mutations-copy");
            let st = std::process::Command::new("cp")
                .arg("-a")
                .arg(p.lx(""))
                .arg(d.path.join(".loopx"))
                .status()
                .expect("cp");
            assert!(st.success());
            d
        })
        .collect();
    let missed: Vec<String> = std::thread::scope(|s| {
        let runs: Vec<_> = copies
            .iter()
            .enumerate()
            .map(|(k, d)| {
                let (p, all) = (&p, &all);
                s.spawn(move || run_share(p, &d.path, all, k))
            })
            .collect();
        runs.into_iter()
            .flat_map(|r| r.join().expect("a thread"))
            .collect()
    });
    assert!(
        missed.is_empty(),
        "{} of {} cases:\n{}",
        missed.len(),
        all.len(),
        missed.join("\n")
    );
}
