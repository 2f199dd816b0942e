//! Action-bound gates through the real binary: the owner approves the digest of the exact
//! action, it runs once, an edit or a replay is refused, and the same ask returns the same gate.

mod common;

use common::*;
use serde_json::Value;

/// Runs `loopx --json --agent AGENT ARGS` (the `--json` before any `--`).
fn as_agent(p: &Project, agent: &str, args: &[&str]) -> (i32, Value) {
    let mut a = vec!["--json", "--agent", agent];
    a.extend_from_slice(args);
    let r = run_cmd(&mut p.cmd(&a));
    let v = parse_json(&r, &args.join(" "));
    (r.code, v)
}

/// Opens a gate for `sh -c SCRIPT`; its id and sha256.
fn open_cmd(p: &Project, question: &str, script: &str) -> (String, String) {
    let (code, v) = as_agent(
        p,
        "agent-a",
        &[
            "gate",
            "open",
            question,
            "--action-cmd",
            "--",
            "sh",
            "-c",
            script,
        ],
    );
    assert_eq!(code, 0, "{v}");
    let g = &v["gate"];
    (
        g["id"].as_str().unwrap().to_string(),
        g["action"]["sha256"].as_str().unwrap().to_string(),
    )
}

fn sha256_of(bytes: &[u8]) -> String {
    use std::io::Write;
    let mut c = std::process::Command::new("sha256sum")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("sha256sum");
    c.stdin.take().unwrap().write_all(bytes).unwrap();
    let out = c.wait_with_output().unwrap();
    String::from_utf8(out.stdout).unwrap()[..64].to_string()
}

#[test]
fn an_approved_command_runs_once() {
    let p = Project::new("ga-once");
    let (id, sha) = open_cmd(&p, "Write the file?", "echo run >> out.txt");
    // The digest is what the owner can compute from the command they read.
    let nul: Vec<u8> = ["sh", "-c", "echo run >> out.txt"]
        .iter()
        .flat_map(|a| a.bytes().chain([0]))
        .collect();
    assert_eq!(sha, sha256_of(&nul));
    // Not approved yet: nothing runs.
    let (code, v) = as_agent(&p, "agent-a", &["run-approved", &id]);
    assert_err(&v, "not_ready");
    assert_eq!(code, 3);
    assert!(!p.root().join("out.txt").exists());
    // The CLI shows the action and the command to approve it.
    let shown = p.run(&["gate", "show", &id]);
    assert!(
        shown.stdout.contains("sh -c 'echo run >> out.txt'"),
        "{}",
        shown.stdout
    );
    assert!(
        shown.stdout.contains(&format!("--sha {sha}")),
        "{}",
        shown.stdout
    );
    // Approving needs the digest read, and the right one.
    let v = p.fails(&["gate", "approve", &id], "usage");
    assert_eq!(v["error"]["details"]["sha256"], sha.as_str());
    p.fails(
        &["gate", "approve", &id, "--sha", &"0".repeat(64)],
        "denied",
    );
    // Without the owner's key an agent cannot approve it.
    let (code, v) = p.no_key(&["gate", "approve", &id, "--sha", &sha]);
    assert_eq!(code, 7, "{v}");
    p.ok(&["gate", "approve", &id, "--sha", &sha]);
    let (code, v) = as_agent(&p, "agent-a", &["run-approved", &id]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["exit_code"], 0);
    assert_eq!(
        std::fs::read_to_string(p.root().join("out.txt")).unwrap(),
        "run\n"
    );
    // A second run is refused: the approval is used.
    let v = p.fails_as("agent-b", &["run-approved", &id], "already_used");
    assert!(
        v["error"]["message"].as_str().unwrap().contains("agent-a"),
        "{v}"
    );
    assert_eq!(
        std::fs::read_to_string(p.root().join("out.txt")).unwrap(),
        "run\n"
    );
    let uses = p
        .journal()
        .into_iter()
        .filter(|e| e["action"] == "gate.use")
        .count();
    assert_eq!(uses, 1);
    let approve = p
        .journal()
        .into_iter()
        .find(|e| e["action"] == "gate.approve")
        .unwrap();
    assert_eq!(approve["data"]["sha256"], sha.as_str());
}

#[test]
fn the_command_exit_code_and_timeout_are_passed_on() {
    let p = Project::new("ga-exit");
    let (id, sha) = open_cmd(&p, "Fail?", "exit 5");
    p.ok(&["gate", "approve", &id, "--sha", &sha]);
    let (code, v) = as_agent(&p, "agent-a", &["run-approved", &id]);
    assert_eq!((code, v["exit_code"].as_i64()), (5, Some(5)), "{v}");
    let (id, sha) = open_cmd(&p, "Hang?", "sleep 30");
    p.ok(&["gate", "approve", &id, "--sha", &sha]);
    let (code, v) = as_agent(
        &p,
        "agent-a",
        &["run-approved", &id, "--timeout", "1s", "--grace", "1s"],
    );
    assert_eq!(code, 124, "{v}");
    assert_eq!(v["timed_out"], true);
    p.fails_as(
        "agent-a",
        &["run-approved", &id, "--timeout", "0s"],
        "usage",
    );
}

#[test]
fn an_edit_after_approval_never_runs() {
    let p = Project::new("ga-edit");
    let (id, sha) = open_cmd(&p, "Say hi?", "echo hi > out.txt");
    p.ok(&["gate", "approve", &id, "--sha", &sha]);
    let path = p.lx(&format!("gates/{id}.toml"));
    let text = std::fs::read_to_string(&path).unwrap();
    // The text changed, the digest kept: the action no longer matches it.
    std::fs::write(&path, text.replace("echo hi > out.txt", "touch pwned")).unwrap();
    let v = p.fails_as("agent-a", &["run-approved", &id], "denied");
    assert!(
        v["error"]["message"].as_str().unwrap().contains("edited"),
        "{v}"
    );
    // Text and digest both changed: the owner's signature no longer holds; it counts as pending.
    let evil: Vec<u8> = ["sh", "-c", "touch pwned"]
        .iter()
        .flat_map(|a| a.bytes().chain([0]))
        .collect();
    let edited = text
        .replace("echo hi > out.txt", "touch pwned")
        .replace(&sha, &sha256_of(&evil));
    std::fs::write(&path, edited).unwrap();
    p.fails_as("agent-a", &["run-approved", &id], "not_ready");
    assert!(!p.root().join("pwned").exists());
    assert!(!p.root().join("out.txt").exists());
}

#[test]
fn an_edit_before_approval_cannot_be_approved() {
    let p = Project::new("ga-edit-pending");
    let (id, sha) = open_cmd(&p, "Say hi?", "echo hi");
    let path = p.lx(&format!("gates/{id}.toml"));
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(&path, text.replace("echo hi", "echo bye")).unwrap();
    // The digest the owner read no longer describes the file.
    p.fails(&["gate", "approve", &id, "--sha", &sha], "denied");
}

#[test]
fn a_replay_after_removing_the_use_by_hand_is_refused() {
    let p = Project::new("ga-replay");
    let (id, sha) = open_cmd(&p, "Count?", "echo x >> out.txt");
    p.ok(&["gate", "approve", &id, "--sha", &sha]);
    p.ok_as("agent-a", &["run-approved", &id]);
    let path = p.lx(&format!("gates/{id}.toml"));
    let text = std::fs::read_to_string(&path).unwrap();
    let cut = text
        .find("[used]")
        .expect("the use is recorded in the gate");
    std::fs::write(&path, &text[..cut]).unwrap();
    let v = p.fails_as("agent-a", &["run-approved", &id], "already_used");
    assert!(
        v["error"]["message"].as_str().unwrap().contains("journal"),
        "{v}"
    );
    assert_eq!(
        std::fs::read_to_string(p.root().join("out.txt")).unwrap(),
        "x\n"
    );
    // A copy of the approved gate under another id is no approval.
    let copy = "g-zzzzzz";
    let copied = text[..cut].replace(&format!("id = \"{id}\""), &format!("id = \"{copy}\""));
    std::fs::write(p.lx(&format!("gates/{copy}.toml")), copied).unwrap();
    p.fails_as("agent-a", &["run-approved", copy], "not_ready");
}

#[test]
fn the_same_question_and_action_return_the_same_gate() {
    let p = Project::new("ga-dedupe");
    let (a, _) = open_cmd(&p, "Deploy?", "echo deploy");
    let (b, _) = open_cmd(&p, "Deploy?", "echo deploy");
    assert_eq!(a, b);
    let (_, v) = as_agent(
        &p,
        "agent-b",
        &[
            "gate",
            "open",
            "Deploy?",
            "--action-cmd",
            "--",
            "sh",
            "-c",
            "echo deploy",
        ],
    );
    assert_eq!(v["existing"], true);
    let (c, _) = open_cmd(&p, "Deploy?", "echo deploy --force");
    assert_ne!(a, c);
    let (d, _) = open_cmd(&p, "Deploy now?", "echo deploy");
    assert_ne!(a, d);
    // The same ask blocking a todo is another ask.
    let t = p.add("release", &[]);
    let (_, v) = as_agent(
        &p,
        "agent-a",
        &[
            "gate",
            "open",
            "Deploy?",
            "--blocks",
            &t,
            "--action-cmd",
            "--",
            "sh",
            "-c",
            "echo deploy",
        ],
    );
    assert_ne!(v["gate"]["id"], a.as_str(), "{v}");
    assert_eq!(v["gate"]["blocks"][0], t.as_str(), "{v}");
    let opens = p
        .journal()
        .into_iter()
        .filter(|e| e["action"] == "gate.open")
        .count();
    assert_eq!(opens, 4);
    // Once used, the same ask opens a new gate.
    let sha = p.show_gate(&a);
    p.ok(&["gate", "approve", &a, "--sha", &sha]);
    p.ok_as("agent-a", &["run-approved", &a]);
    let (e, _) = open_cmd(&p, "Deploy?", "echo deploy");
    assert_ne!(a, e);
}

trait ShowGate {
    fn show_gate(&self, id: &str) -> String;
}

impl ShowGate for Project {
    fn show_gate(&self, id: &str) -> String {
        let v = self.ok(&["gate", "show", id]);
        v["gate"]["action"]["sha256"].as_str().unwrap().to_string()
    }
}

#[test]
fn a_payload_is_handed_over_once_byte_for_byte() {
    let p = Project::new("ga-payload");
    let body = "--- a/x\n+++ b/x\n@@ -1 +1 @@\n-old\n+néw\n";
    std::fs::write(p.root().join("change.patch"), body).unwrap();
    let (code, v) = as_agent(
        &p,
        "agent-a",
        &["gate", "open", "Apply it?", "--action-file", "change.patch"],
    );
    assert_eq!(code, 0, "{v}");
    let id = v["gate"]["id"].as_str().unwrap().to_string();
    let sha = v["gate"]["action"]["sha256"].as_str().unwrap().to_string();
    assert_eq!(sha, sha256_of(body.as_bytes()), "the digest is sha256sum's");
    let shown = p.run(&["gate", "show", &id]).stdout;
    assert!(shown.contains("outside printable ASCII"), "{shown}");
    p.ok(&["gate", "approve", &id, "--sha", &sha]);
    std::fs::write(p.root().join("taken"), "x").unwrap();
    // An existing --out is refused before the approval is spent.
    p.fails_as("agent-a", &["run-approved", &id, "--out", "taken"], "usage");
    // So is one whose directory is missing, or a file.
    p.fails_as(
        "agent-a",
        &["run-approved", &id, "--out", "nodir/x.patch"],
        "usage",
    );
    p.fails_as(
        "agent-a",
        &["run-approved", &id, "--out", "taken/x.patch"],
        "usage",
    );
    let r = p.run_as("agent-a", &["run-approved", &id]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.stdout, body);
    p.fails_as(
        "agent-a",
        &["run-approved", &id, "--out", "again.patch"],
        "already_used",
    );
    assert!(!p.root().join("again.patch").exists());
}

#[test]
fn bad_actions_are_refused() {
    let p = Project::new("ga-bad");
    for bad in ["echo a\nb", "echo\u{a0}x", "echo а", "\u{1b}[2J"] {
        let (code, v) = as_agent(
            &p,
            "agent-a",
            &["gate", "open", "Q?", "--action-cmd", "--", "sh", "-c", bad],
        );
        assert_eq!(code, 2, "{bad:?}: {v}");
        assert!(
            v["error"]["message"]
                .as_str()
                .unwrap()
                .contains("printable ASCII"),
            "{v}"
        );
    }
    let (code, _) = as_agent(&p, "agent-a", &["gate", "open", "Q?", "--action-cmd"]);
    assert_eq!(code, 2);
    std::fs::write(p.root().join("big"), vec![b'x'; 64 * 1024 + 1]).unwrap();
    std::fs::write(p.root().join("bin"), [0xff, 0xfe]).unwrap();
    std::os::unix::fs::symlink("/etc/passwd", p.root().join("link")).unwrap();
    for f in ["big", "bin", "link", "missing"] {
        let (code, v) = as_agent(&p, "agent-a", &["gate", "open", "Q?", "--action-file", f]);
        assert_eq!(code, 2, "{f}: {v}");
    }
    let fifo = p.root().join("fifo");
    assert!(
        std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    let (code, _) = as_agent(
        &p,
        "agent-a",
        &["gate", "open", "Q?", "--action-file", "fifo"],
    );
    assert_eq!(code, 2, "a FIFO is refused, not waited on");
    // A gate without an action has nothing to run.
    let id = p.gate("Plain?", &[]);
    p.fails(&["gate", "approve", &id, "--sha", &"0".repeat(64)], "usage");
    p.ok(&["gate", "approve", &id]);
    p.fails_as("agent-a", &["run-approved", &id], "usage");
    // A rejected action never runs.
    let (id, _) = open_cmd(&p, "Drop the table?", "touch dropped");
    p.ok(&["gate", "reject", &id, "--reason", "no"]);
    p.fails_as("agent-a", &["run-approved", &id], "denied");
    assert!(!p.root().join("dropped").exists());
}

#[test]
fn a_turn_runs_the_approved_command_under_its_lease_once() {
    let p = Project::new("ga-turn");
    let t = p.add("Release", &[]);
    let (id, sha) = open_cmd(&p, "Release?", "echo \"$LOOPX_TODO_ID\" > released");
    p.fails_as("agent-a", &["turn", "--approved", &id], "not_ready");
    p.ok(&["gate", "approve", &id, "--sha", &sha]);
    let (code, v) = as_agent(&p, "agent-a", &["turn", "--approved", &id, "--", "echo"]);
    assert_eq!(code, 2, "--approved and a command: {v}");
    let (code, v) = as_agent(
        &p,
        "agent-a",
        &["turn", "--complete-on-success", "--approved", &id],
    );
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["ended"], "done");
    assert_eq!(
        std::fs::read_to_string(p.root().join("released"))
            .unwrap()
            .trim(),
        t
    );
    let used = p
        .journal()
        .into_iter()
        .find(|e| e["action"] == "gate.use")
        .unwrap();
    assert!(used["data"]["turn"].is_string(), "{used}");
    p.add("Another", &[]);
    p.fails_as("agent-a", &["turn", "--approved", &id], "already_used");
}

#[test]
fn an_option_never_runs_an_action() {
    let p = Project::new("ga-option");
    let (code, v) = as_agent(
        &p,
        "agent-a",
        &[
            "gate",
            "open",
            "Deploy?",
            "--option",
            "yes",
            "--option",
            "no",
            "--action-cmd",
            "--",
            "touch",
            "deployed",
        ],
    );
    assert_eq!(code, 2, "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("offers no options"),
        "{v}"
    );
    // Options added to the file by hand: the owner's pick of one is no yes to the action.
    let (id, sha) = open_cmd(&p, "Deploy?", "touch deployed");
    let path = p.lx(&format!("gates/{id}.toml"));
    let text = std::fs::read_to_string(&path).unwrap();
    let (head, rest) = text.split_once('\n').unwrap();
    std::fs::write(
        &path,
        format!("{head}\noptions = [\"yes\", \"no\"]\n{rest}"),
    )
    .unwrap();
    p.ok(&["gate", "approve", &id, "--option", "no", "--sha", &sha]);
    let v = p.fails_as("agent-a", &["run-approved", &id], "denied");
    assert!(
        v["error"]["message"].as_str().unwrap().contains("option"),
        "{v}"
    );
    assert!(!p.root().join("deployed").exists());
}

#[test]
fn a_program_that_is_not_there_spends_no_approval() {
    let p = Project::new("ga-noprog");
    let (code, v) = as_agent(
        &p,
        "agent-a",
        &[
            "gate",
            "open",
            "Run it?",
            "--action-cmd",
            "--",
            "no-such-program-lx",
        ],
    );
    assert_eq!(code, 0, "{v}");
    let id = v["gate"]["id"].as_str().unwrap().to_string();
    let sha = v["gate"]["action"]["sha256"].as_str().unwrap().to_string();
    p.ok(&["gate", "approve", &id, "--sha", &sha]);
    p.fails_as("agent-a", &["run-approved", &id], "usage");
    let g = p.ok(&["gate", "show", &id]);
    assert!(g["gate"].get("used").is_none(), "{g}");
}

#[test]
fn a_script_path_is_found_where_it_runs_not_where_it_was_asked() {
    let p = Project::new("ga-relprog");
    let sub = p.root().join("sub");
    std::fs::create_dir(&sub).unwrap();
    let script = sub.join("go.sh");
    std::fs::write(&script, "#!/bin/sh\necho ran > ran.txt\n").unwrap();
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let (code, v) = as_agent(
        &p,
        "agent-a",
        &["gate", "open", "Go?", "--action-cmd", "--", "./go.sh"],
    );
    assert_eq!(code, 0, "{v}");
    let id = v["gate"]["id"].as_str().unwrap().to_string();
    let sha = v["gate"]["action"]["sha256"].as_str().unwrap().to_string();
    p.ok(&["gate", "approve", &id, "--sha", &sha]);
    // Asked from sub/, where ./go.sh is; the command runs in the project root, where it is not.
    let r = run_cmd(
        p.cmd(&["--json", "--agent", "agent-a", "run-approved", &id])
            .current_dir(&sub),
    );
    assert_eq!(r.code, 2, "{}", r.stdout);
    let g = p.ok(&["gate", "show", &id]);
    assert!(
        g["gate"].get("used").is_none(),
        "a command that cannot start spent it: {g}"
    );
    // With the script in the root, it runs, asked from sub/ still.
    std::fs::rename(&script, p.root().join("go.sh")).unwrap();
    let r = run_cmd(
        p.cmd(&["--json", "--agent", "agent-a", "run-approved", &id])
            .current_dir(&sub),
    );
    assert_eq!(r.code, 0, "{}", r.stdout);
    assert!(p.root().join("ran.txt").is_file());
}
