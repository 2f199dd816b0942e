//! Owner authority and tamper evidence, through the real binary.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

struct Project {
    dir: PathBuf,
    key: PathBuf,
}

impl Project {
    /// A fresh project; with `owner`, an owner key made by `owner init`.
    fn new(name: &str, owner: bool) -> Project {
        let base = std::env::temp_dir().join(format!("loopx-owner-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        let dir = base.join("project");
        std::fs::create_dir_all(&dir).unwrap();
        let p = Project {
            key: base.join("home/owner.key"),
            dir,
        };
        p.ok(&["start-goal", "--goal-text", "ship it"]);
        if owner {
            p.ok(&["owner", "init"]);
        }
        p
    }

    fn run_with(&self, key: Option<&Path>, args: &[&str]) -> Output {
        let mut c = Command::new(env!("CARGO_BIN_EXE_loopx"));
        c.arg("--dir").arg(&self.dir).arg("--json").args(args);
        c.env_remove("LOOPX_DIR")
            .env_remove("LOOPX_AGENT")
            .env_remove("XDG_CONFIG_HOME");
        c.env("HOME", self.dir.parent().unwrap().join("nohome"));
        match key {
            Some(k) => c.env("LOOPX_OWNER_KEY", k),
            None => c.env(
                "LOOPX_OWNER_KEY",
                self.dir.parent().unwrap().join("no-such-key"),
            ),
        };
        c.output().unwrap()
    }

    /// Runs as the owner (the key is present).
    fn run(&self, args: &[&str]) -> Output {
        self.run_with(Some(&self.key), args)
    }

    /// Runs as an agent (no key).
    fn agent(&self, args: &[&str]) -> Output {
        self.run_with(None, args)
    }

    fn ok(&self, args: &[&str]) -> serde_json::Value {
        let out = self.run(args);
        assert!(out.status.success(), "{args:?}: {out:?}");
        json(&out)
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.dir.join(".loopx").join(rel)
    }

    /// Every file under .loopx/ but the lock and the cache, with its bytes.
    fn files(&self) -> BTreeMap<PathBuf, Vec<u8>> {
        fn walk(d: &Path, out: &mut BTreeMap<PathBuf, Vec<u8>>) {
            for e in std::fs::read_dir(d).unwrap().flatten() {
                let p = e.path();
                let name = e.file_name().to_string_lossy().to_string();
                if name == "lock" || name == "cache" {
                    continue;
                }
                if p.is_dir() {
                    walk(&p, out);
                } else {
                    out.insert(p.clone(), std::fs::read(&p).unwrap());
                }
            }
        }
        let mut m = BTreeMap::new();
        walk(&self.dir.join(".loopx"), &mut m);
        m
    }

    fn gate_file(&self, id: &str) -> String {
        std::fs::read_to_string(self.path(&format!("gates/{id}.toml"))).unwrap()
    }

    fn set_gate_file(&self, id: &str, text: &str) {
        std::fs::write(self.path(&format!("gates/{id}.toml")), text).unwrap();
    }
}

impl Drop for Project {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(self.dir.parent().unwrap());
    }
}

fn json(out: &Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {out:?}"))
}

fn code(out: &Output) -> (Option<i32>, String) {
    let j = json(out);
    (
        out.status.code(),
        j["error"]["code"].as_str().unwrap_or("").to_string(),
    )
}

/// A todo blocked by a pending gate: (todo id, gate id).
fn gated(p: &Project) -> (String, String) {
    let t = p.ok(&["todo", "add", "deploy"])["todo"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let g = p.agent(&["gate", "open", "May I deploy?", "--blocks", &t]);
    assert!(g.status.success(), "{g:?}");
    (t, json(&g)["gate"]["id"].as_str().unwrap().to_string())
}

fn doctor_messages(p: &Project, key: Option<&Path>) -> (Option<i32>, String) {
    let out = p.run_with(key, &["doctor"]);
    let j = json(&out);
    let msgs: Vec<String> = j["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            format!(
                "{}:{} {}",
                f["file"].as_str().unwrap(),
                f["line"],
                f["message"].as_str().unwrap()
            )
        })
        .collect();
    (out.status.code(), msgs.join("\n"))
}

#[test]
fn owner_init_makes_a_private_key_and_refuses_a_second() {
    let p = Project::new("init", true);
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&p.key).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    let secret = std::fs::read_to_string(&p.key).unwrap();
    let secret_hex = secret
        .lines()
        .find(|l| !l.starts_with('#'))
        .unwrap()
        .to_string();
    assert_eq!(secret_hex.len(), 64);
    assert!(p.path("owner.pub").is_file());
    assert!(
        !std::fs::read_to_string(p.path("owner.pub"))
            .unwrap()
            .contains(&secret_hex)
    );

    assert_eq!(
        code(&p.run(&["owner", "init"])),
        (Some(4), "key_exists".into())
    );
    let show = p.run(&["owner", "show"]);
    assert!(show.status.success());
    let text = String::from_utf8_lossy(&show.stdout).to_string();
    assert!(!text.contains(&secret_hex), "owner show leaks the secret");
    let j = json(&show);
    assert_eq!(j["owner"]["matches"], true);
    assert!(
        j["owner"]["fingerprint"]
            .as_str()
            .unwrap()
            .starts_with("SHA256:")
    );
}

#[test]
fn owner_commands_without_the_key_exit_7_and_write_nothing() {
    let p = Project::new("denied", true);
    let (t, g) = gated(&p);
    let u = p.ok(&["todo", "add", "sign the contract", "--role", "user"])["todo"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let claimed = p.agent(&["--agent", "a1", "todo", "claim", &u]);
    assert_eq!(
        claimed.status.code(),
        Some(3),
        "a user todo is not claimable: {claimed:?}"
    );
    let before = p.files();
    let attempts: Vec<Vec<&str>> = vec![
        vec!["gate", "approve", &g],
        vec!["gate", "reject", &g, "--reason", "no"],
        vec!["gate", "cancel", &g],
        vec!["goal", "pause"],
        vec!["goal", "complete"],
        vec!["quota", "set", "--slots", "5"],
        vec!["todo", "reassign", &t, "--to", "agent-b"],
        vec!["todo", "update", &u, "--status", "done"],
    ];
    for args in &attempts {
        let out = p.agent(args);
        assert_eq!(code(&out), (Some(7), "denied".into()), "{args:?}: {out:?}");
        assert!(
            !json(&out)["error"]["hint"].is_null(),
            "{args:?} has no hint"
        );
        assert_eq!(p.files(), before, "{args:?} wrote something");
    }
    // The owner can, and the decision is signed.
    p.ok(&["gate", "approve", &g, "--reason", "go"]);
    let text = p.gate_file(&g);
    assert!(
        text.contains("status = \"approved\"") && text.contains("signature = "),
        "{text}"
    );
    let (rc, msgs) = doctor_messages(&p, Some(&p.key));
    assert_eq!(rc, Some(0), "{msgs}");
}

#[test]
fn a_project_without_owner_pub_denies_owner_actions() {
    let p = Project::new("nopub", false);
    let (_, g) = gated(&p);
    // Even with a key file present, the project has no owner.pub to prove it.
    let key = p.dir.parent().unwrap().join("other.key");
    let init = p.run_with(Some(&key), &["owner", "show"]);
    assert!(init.status.success());
    assert_eq!(code(&p.run(&["gate", "approve", &g])).0, Some(7));
}

#[test]
fn hand_forged_decisions_count_as_pending_and_doctor_flags_them() {
    for status in ["approved", "rejected", "cancelled"] {
        for sig in [None, Some("ab".repeat(64))] {
            let p = Project::new(&format!("forge-{status}-{}", sig.is_some()), true);
            let (t, g) = gated(&p);
            let mut text = p
                .gate_file(&g)
                .replace("status = \"pending\"", &format!("status = \"{status}\""));
            text.push_str("decided_by = \"owner\"\ndecided_at = \"2026-11-30T10:00:00.000Z\"\n");
            if let Some(s) = &sig {
                text.push_str(&format!(
                    "journal_head = \"{}\"\nsignature = \"{s}\"\n",
                    "0".repeat(64)
                ));
            }
            p.set_gate_file(&g, &text);

            let sr = p.agent(&["quota", "should-run"]);
            let j = json(&sr);
            assert_eq!(j["decision"], "ask", "{status}: {j}");
            assert_eq!(j["questions"][0]["gate"], g.as_str());
            let claim = p.agent(&["--agent", "a1", "todo", "claim", &t]);
            assert_eq!(code(&claim), (Some(3), "not_ready".into()), "{status}");
            let listed = json(&p.agent(&["gate", "list", "--pending"]));
            assert_eq!(listed["gates"][0]["id"], g.as_str());

            let (rc, msgs) = doctor_messages(&p, None);
            assert_eq!(rc, Some(6), "{msgs}");
            assert!(
                msgs.contains(&format!(".loopx/gates/{g}.toml")) && msgs.contains("tampered"),
                "{msgs}"
            );
            // The owner can still decide it for real.
            p.ok(&["gate", "approve", &g]);
            assert_eq!(json(&p.agent(&["quota", "should-run"]))["decision"], "run");
        }
    }
}

#[test]
fn a_decision_replayed_from_another_gate_does_not_verify() {
    let p = Project::new("replay", true);
    let (_, g1) = gated(&p);
    let (t2, g2) = gated(&p);
    p.ok(&["gate", "approve", &g1]);
    let signed = p.gate_file(&g1);
    // Copy every decision field of g1 into g2.
    let mut forged = p
        .gate_file(&g2)
        .replace("status = \"pending\"", "status = \"approved\"");
    for line in signed.lines() {
        if ["decided_by", "decided_at", "journal_head", "signature"]
            .iter()
            .any(|k| line.starts_with(k))
        {
            forged.push_str(line);
            forged.push('\n');
        }
    }
    p.set_gate_file(&g2, &forged);
    let claim = p.agent(&["--agent", "a1", "todo", "claim", &t2]);
    assert_eq!(code(&claim), (Some(3), "not_ready".into()));
    let (rc, msgs) = doctor_messages(&p, None);
    assert_eq!(rc, Some(6));
    assert!(
        msgs.contains(&g2) && !msgs.contains(&format!("gates/{g1}.toml")),
        "{msgs}"
    );
    // A decision replayed with a changed reason fails too.
    let edited = signed.replace(
        "status = \"approved\"",
        "status = \"approved\"\nreason = \"changed\"",
    );
    p.set_gate_file(&g1, &edited);
    let (rc, msgs) = doctor_messages(&p, None);
    assert_eq!(rc, Some(6));
    assert!(msgs.contains(&format!("gates/{g1}.toml")), "{msgs}");
}

#[test]
fn a_replaced_owner_pub_is_caught_where_the_secret_is() {
    let p = Project::new("swap", true);
    let (t, g) = gated(&p);
    // An agent makes its own key, installs it, and approves its own gate.
    let rogue = p.dir.parent().unwrap().join("rogue.key");
    assert!(
        p.run_with(Some(&rogue), &["owner", "init", "--force"])
            .status
            .success()
    );
    assert!(
        p.run_with(Some(&rogue), &["gate", "approve", &g])
            .status
            .success()
    );
    // Agents (no secret) see a consistent, signed decision...
    assert!(
        p.agent(&["--agent", "a1", "todo", "claim", &t])
            .status
            .success()
    );
    // ...but the owner's doctor names owner.pub.
    let (rc, msgs) = doctor_messages(&p, Some(&p.key));
    assert_eq!(rc, Some(6), "{msgs}");
    assert!(
        msgs.contains(".loopx/owner.pub") && msgs.contains("replaced"),
        "{msgs}"
    );
    // And the owner's own commands refuse to sign under the rogue key.
    assert_eq!(code(&p.run(&["goal", "pause"])).0, Some(7));
}

#[test]
fn hand_edits_of_owner_state_are_found_by_doctor() {
    let p = Project::new("edits", true);
    p.ok(&["goal", "pause"]);
    p.ok(&["quota", "set", "--slots", "7"]);
    let cfg = std::fs::read_to_string(p.path("loopx.toml")).unwrap();
    std::fs::write(
        p.path("loopx.toml"),
        cfg.replace("status = \"paused\"", "status = \"active\"")
            .replace("slots = 7", "slots = 700"),
    )
    .unwrap();
    let (rc, msgs) = doctor_messages(&p, None);
    assert_eq!(rc, Some(6));
    assert!(
        msgs.contains("the goal is active here") && msgs.contains("slots"),
        "{msgs}"
    );
    // A gate file deleted to unblock a todo.
    let (_, g) = gated(&p);
    std::fs::remove_file(p.path(&format!("gates/{g}.toml"))).unwrap();
    let (_, msgs) = doctor_messages(&p, None);
    assert!(msgs.contains(&format!("gate {g} was opened")), "{msgs}");
}

#[test]
fn journal_edits_removals_and_swaps_are_found_with_their_line() {
    for how in ["edit", "remove", "swap"] {
        let p = Project::new(&format!("journal-{how}"), true);
        for i in 0..4 {
            p.ok(&["todo", "add", &format!("t{i}")]);
        }
        let path = p.path("journal.jsonl");
        let text = std::fs::read_to_string(&path).unwrap();
        let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
        assert!(lines.len() >= 6);
        match how {
            "edit" => lines[3] = lines[3].replace("\"t1\"", "\"t1 (edited)\""),
            "remove" => {
                lines.remove(3);
            }
            _ => lines.swap(3, 4),
        }
        std::fs::write(&path, lines.join("\n") + "\n").unwrap();
        let (rc, msgs) = doctor_messages(&p, None);
        assert_eq!(rc, Some(6), "{how}: {msgs}");
        // The earlier line of the first broken link.
        let want = match how {
            "edit" => ".loopx/journal.jsonl:4",
            _ => ".loopx/journal.jsonl:3",
        };
        assert!(msgs.contains(want), "{how}: {msgs}");
        let v = p.agent(&["log", "--verify"]);
        assert_eq!(v.status.code(), Some(6), "{how}");
        let line = want.trim_start_matches(".loopx/");
        assert!(
            String::from_utf8_lossy(&v.stdout).contains(line),
            "{how}: {v:?}"
        );
    }
}

#[test]
fn path_like_ids_and_symlinks_touch_nothing_outside() {
    let p = Project::new("paths", true);
    let outside = p.dir.parent().unwrap().join("outside.toml");
    std::fs::write(&outside, "keep me").unwrap();
    for args in [
        vec!["todo", "show", "../outside"],
        vec!["todo", "claim", "../../x"],
        vec!["gate", "approve", "..%2f/x"],
        vec!["todo", "update", "a/b", "--evidence", "x"],
        vec!["todo", "add", "x", "--depends-on", "../x"],
    ] {
        let out = p.run(&args);
        assert!(
            matches!(out.status.code(), Some(2) | Some(5)),
            "{args:?}: {out:?}"
        );
    }
    assert_eq!(std::fs::read_to_string(&outside).unwrap(), "keep me");
    // A state file that is a symlink out of .loopx/ is refused, not followed.
    let t = p.ok(&["todo", "add", "real"])["todo"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let ev = p.path(&format!("evidence/{t}.jsonl"));
    std::os::unix::fs::symlink(&outside, &ev).unwrap();
    p.ok(&["--agent", "a1", "todo", "claim", &t]);
    let out = p.agent(&["--agent", "a1", "todo", "update", &t, "--evidence", "x"]);
    assert_ne!(out.status.code(), Some(0), "{out:?}");
    assert_eq!(std::fs::read_to_string(&outside).unwrap(), "keep me");
    std::fs::remove_file(&ev).unwrap();
    let link = p.path("todos/t-zzzzzz.toml");
    std::os::unix::fs::symlink(&outside, &link).unwrap();
    // It is quarantined: named, never followed, and the rest of the project goes on.
    let out = p.agent(&["status"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let q = &json(&out)["quarantined"][0];
    assert_eq!(q["file"], ".loopx/todos/t-zzzzzz.toml", "{q}");
    assert!(q["message"].as_str().unwrap().contains("symlink"), "{q}");
    assert_eq!(std::fs::read_to_string(&outside).unwrap(), "keep me");
}

#[test]
fn owner_init_leaves_the_mode_of_a_directory_it_did_not_make() {
    use std::os::unix::fs::PermissionsExt;
    let p = Project::new("keydir", false);
    let shared = p.dir.parent().unwrap().join("shared");
    std::fs::create_dir_all(&shared).unwrap();
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o1777)).unwrap();
    let key = shared.join("owner.key");
    let out = p.run_with(Some(&key), &["owner", "init"]);
    assert!(out.status.success(), "{out:?}");
    let mode = |d: &Path| std::fs::metadata(d).unwrap().permissions().mode() & 0o7777;
    // A key in a shared directory (/tmp) once made that directory 0700 for everyone.
    assert_eq!(mode(&shared), 0o1777);
    assert_eq!(mode(&key), 0o600);
    // A directory it makes for the key is the owner's alone.
    let fresh = shared.join("made/here/owner.key");
    let q = Project::new("keydir2", false);
    let out = q.run_with(Some(&fresh), &["owner", "init"]);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(mode(fresh.parent().unwrap()), 0o700);
}

/// The todo cache keeps what the files say, never what the owner's seal made of them: a hand edit
/// the seal overrides is named on every load, not only on the one that cached the file.
#[test]
fn a_hand_edit_the_seal_overrides_is_named_on_every_load() {
    let p = Project::new("sealcache", true);
    let ids: Vec<String> = ["sign a", "sign b"]
        .iter()
        .map(|t| {
            let v = p.ok(&["todo", "add", t, "--role", "user"]);
            v["todo"]["id"].as_str().unwrap().to_string()
        })
        .collect();
    let settle = || std::thread::sleep(std::time::Duration::from_millis(200));
    for _ in 0..3 {
        settle();
        p.ok(&["status"]);
    }
    for id in &ids {
        let f = p.path(&format!("todos/{id}.toml"));
        let text = std::fs::read_to_string(&f).unwrap();
        assert!(text.contains("role = \"user\""), "{text}");
        std::fs::write(&f, text.replace("role = \"user\"", "role = \"agent\"")).unwrap();
    }
    for round in 0..3 {
        settle();
        let out = String::from_utf8_lossy(&p.agent(&["status"]).stdout).to_string();
        let named = ids
            .iter()
            .filter(|id| out.contains(&format!("todos/{id}.toml says role agent")))
            .count();
        assert_eq!(named, 2, "load {round}: {out}");
    }
}
