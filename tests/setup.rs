//! `loopx setup` and `loopx agent-prompt` through the real binary: fresh projects and ones with
//! the user's own settings, idempotent reruns, dry runs, refusals, systemd units that verify, and
//! three turns run from the generated cron line.

mod common;

use std::collections::BTreeMap;
use std::path::Path;

use common::{Project, TempDir, bin, parse_json, run_cmd};
use serde_json::{Value, json};

/// Runs `loopx --json ARGS` (the flag first, so a command after `--` stays the command's).
fn sj(p: &Project, args: &[&str]) -> (i32, Value) {
    let mut a = vec!["--json"];
    a.extend_from_slice(args);
    let r = run_cmd(&mut p.cmd(&a));
    let v = parse_json(&r, &args.join(" "));
    (r.code, v)
}

/// Runs `loopx --json ARGS` (setup), asserts it succeeded; returns the actions by path.
#[track_caller]
fn setup_ok(p: &Project, args: &[&str]) -> (Value, BTreeMap<String, String>) {
    let (code, v) = sj(p, args);
    assert_eq!(code, 0, "setup {args:?}: {v}");
    let actions = v["files"]
        .as_array()
        .expect("files")
        .iter()
        .map(|f| {
            (
                f["path"].as_str().unwrap().to_string(),
                f["action"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    (v, actions)
}

/// Every file of the project outside `.loopx/`, with its bytes (links listed, not followed).
fn tree(root: &Path) -> BTreeMap<String, Vec<u8>> {
    fn walk(base: &Path, dir: &Path, out: &mut BTreeMap<String, Vec<u8>>) {
        for e in std::fs::read_dir(dir).unwrap().flatten() {
            let p = e.path();
            let rel = p.strip_prefix(base).unwrap().display().to_string();
            let m = std::fs::symlink_metadata(&p).unwrap();
            if rel == ".loopx" {
                continue;
            } else if m.file_type().is_symlink() {
                out.insert(rel, b"-> link".to_vec());
            } else if m.is_dir() {
                walk(base, &p, out);
            } else {
                out.insert(rel, std::fs::read(&p).unwrap());
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(root, root, &mut out);
    out
}

fn read_json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).expect("valid JSON")
}

fn all(actions: &BTreeMap<String, String>, want: &str) -> bool {
    actions.values().all(|a| a == want)
}

#[test]
fn agent_prompt_is_short_exact_and_needs_no_project() {
    let p = Project::empty("prompt");
    let tools = [
        "status",
        "should_run",
        "todo_add",
        "todo_list",
        "todo_show",
        "todo_claim",
        "todo_renew",
        "todo_update",
        "todo_release",
        "gate_open",
        "gate_list",
        "quota_spend",
        "refresh_state",
        "turn_start",
        "turn_end",
    ];
    for runtime in ["claude", "codex", "generic"] {
        let (code, v) = sj(&p, &["agent-prompt", "--runtime", runtime]);
        assert_eq!(code, 0, "{v}");
        assert_eq!(v["runtime"], runtime);
        let prompt = v["prompt"].as_str().unwrap();
        assert!(prompt.len() < 2048, "{runtime}: {} bytes", prompt.len());
        let text = p.run(&["agent-prompt", "--runtime", runtime]);
        assert_eq!(text.stdout.trim_end(), prompt);
        let mut named = 0;
        for (i, _) in prompt.match_indices("loopx ") {
            // The command's words: lowercase, at most two, ending at a backtick, a colon, a
            // comma or a full stop, a flag, or anything else.
            let mut words: Vec<&str> = Vec::new();
            for w in prompt[i + 6..].split_whitespace().take(2) {
                let bare = w.trim_end_matches(['`', ':', ',', '.']);
                if bare.is_empty()
                    || !bare.chars().all(|c| c.is_ascii_lowercase() || c == '-')
                    || bare.starts_with('-')
                {
                    break;
                }
                words.push(bare);
                if bare.len() != w.len() {
                    break;
                }
            }
            let mut args = words.clone();
            args.push("--help");
            let r = p.run(&args);
            assert_eq!(
                r.code,
                0,
                "{runtime}: `loopx {}` is no command: {r:?}",
                words.join(" ")
            );
            named += usize::from(!words.is_empty());
        }
        assert!(named >= 2, "{runtime}: names too few commands");
        for (i, _) in prompt.match_indices("mcp__loopx__") {
            let name: String = prompt[i + 12..]
                .chars()
                .take_while(|c| c.is_ascii_lowercase() || *c == '_')
                .collect();
            assert!(
                tools.contains(&name.as_str()),
                "{runtime}: no MCP tool `{name}`"
            );
        }
        if runtime == "claude" {
            assert!(prompt.contains("mcp__loopx__turn_start"));
        }
    }
    assert!(!p.root().join(".loopx").exists());
}

#[test]
fn setup_needs_a_project() {
    let p = Project::empty("setup-none");
    for host in ["claude", "codex"] {
        let (code, v) = sj(&p, &["setup", host]);
        assert_eq!(code, 5, "{v}");
        assert_eq!(v["error"]["code"], "not_initialized");
        assert!(v["error"]["hint"].as_str().unwrap().contains("start-goal"));
    }
    let (code, _) = sj(&p, &["setup", "cron", "--", "true"]);
    assert_eq!(code, 5);
    assert!(tree(p.root()).is_empty(), "setup wrote without a project");
}

#[test]
fn claude_on_a_fresh_project_then_a_rerun_changes_nothing() {
    let p = Project::new("claude-fresh");
    let (v, actions) = setup_ok(&p, &["setup", "claude"]);
    assert_eq!(v["host"], "claude");
    assert!(v["next"].as_str().unwrap().contains("claude"));
    assert!(all(&actions, "created"), "{actions:?}");
    let mcp = read_json(&p.root().join(".mcp.json"));
    assert_eq!(
        mcp["mcpServers"]["loopx"],
        json!({"command": "loopx", "args": ["mcp"], "env": {"LOOPX_AGENT": "claude"}})
    );
    let settings = read_json(&p.root().join(".claude/settings.json"));
    let groups = settings["hooks"]["SessionStart"].as_array().unwrap();
    assert_eq!(groups.len(), 1);
    let cmd = groups[0]["hooks"][0]["command"].as_str().unwrap();
    assert!(
        cmd.contains("--agent claude") && cmd.contains("refresh-state"),
        "{cmd}"
    );
    assert!(cmd.contains("$CLAUDE_PROJECT_DIR"), "{cmd}");
    // Headless `claude -p` may call the tools, and the project's server needs no approval.
    assert_eq!(settings["permissions"]["allow"], json!(["mcp__loopx"]));
    assert_eq!(settings["enabledMcpjsonServers"], json!(["loopx"]));

    let before = tree(p.root());
    let (_, again) = setup_ok(&p, &["setup", "claude"]);
    assert!(all(&again, "unchanged"), "{again:?}");
    assert_eq!(before, tree(p.root()), "a rerun changed a file");
    let text = p.run(&["setup", "claude"]);
    assert!(text.stdout.contains("nothing to change"), "{text:?}");
}

#[test]
fn claude_merges_with_the_users_servers_and_hooks() {
    let p = Project::new("claude-merge");
    let mcp = json!({"mcpServers": {"github": {"command": "gh-mcp", "args": ["--x"]}},
                     "other": [1, 2]});
    std::fs::write(p.root().join(".mcp.json"), mcp.to_string()).unwrap();
    std::fs::create_dir(p.root().join(".claude")).unwrap();
    let user_group =
        json!({"matcher": "startup", "hooks": [{"type": "command", "command": "echo hi"}]});
    let settings = json!({
        "permissions": {"allow": ["Bash(ls:*)"]},
        "hooks": {
            "SessionStart": [user_group],
            "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "./check.sh"}]}]
        }
    });
    let sp = p.root().join(".claude/settings.json");
    std::fs::write(&sp, serde_json::to_string_pretty(&settings).unwrap()).unwrap();

    let (_, actions) = setup_ok(&p, &["setup", "claude"]);
    assert!(all(&actions, "updated"), "{actions:?}");
    // As agent `ada` (the global flag): our entries are replaced in place, never doubled.
    let (_, actions) = setup_ok(&p, &["--agent", "ada", "setup", "claude"]);
    assert!(
        all(&actions, "updated"),
        "a new agent id changes the files: {actions:?}"
    );
    let got = read_json(&p.root().join(".mcp.json"));
    assert_eq!(got["mcpServers"]["github"], mcp["mcpServers"]["github"]);
    assert_eq!(got["other"], json!([1, 2]));
    assert_eq!(got["mcpServers"]["loopx"]["env"]["LOOPX_AGENT"], "ada");
    let s = read_json(&sp);
    // The user's rule stays, ours is added once.
    assert_eq!(
        s["permissions"]["allow"],
        json!(["Bash(ls:*)", "mcp__loopx"])
    );
    assert_eq!(s["hooks"]["PreToolUse"], settings["hooks"]["PreToolUse"]);
    let groups = s["hooks"]["SessionStart"].as_array().unwrap();
    assert_eq!(groups.len(), 2, "{groups:?}");
    assert_eq!(groups[0], user_group);
    assert!(
        groups[1]["hooks"][0]["command"]
            .as_str()
            .unwrap()
            .contains("--agent ada")
    );

    let before = tree(p.root());
    let (code, v) = sj(&p, &["--agent", "ada", "setup", "claude"]);
    assert_eq!(code, 0);
    assert!(
        v["files"]
            .as_array()
            .unwrap()
            .iter()
            .all(|f| f["action"] == "unchanged"),
        "{v}"
    );
    assert_eq!(before, tree(p.root()));
}

#[test]
fn dry_run_writes_nothing() {
    let p = Project::new("dry");
    std::fs::write(p.root().join("AGENTS.md"), "# Mine\n").unwrap();
    let before = tree(p.root());
    let loopx_before = p.files();
    for host in [
        vec!["claude"],
        vec!["codex"],
        vec!["cron", "--", "true"],
        vec!["systemd", "--", "true"],
    ] {
        let mut a = vec!["setup", "--dry-run"];
        a.extend_from_slice(&host);
        let (code, v) = sj(&p, &a);
        assert_eq!(code, 0, "{v}");
        assert_eq!(v["dry_run"], true);
        assert!(
            v["files"]
                .as_array()
                .unwrap()
                .iter()
                .all(|f| f["action"] != "unchanged")
        );
        let text = p.run(&a);
        assert!(text.stdout.contains("would "), "{text:?}");
    }
    assert_eq!(before, tree(p.root()), "a dry run wrote");
    common::assert_same_files(&loopx_before, &p.files(), "dry run");
}

#[test]
fn a_corrupt_file_is_refused_and_left_untouched() {
    let p = Project::new("corrupt");
    std::fs::create_dir(p.root().join(".claude")).unwrap();
    let bad = "{\n  \"hooks\": {\n    \"SessionStart\": [,]\n  }\n}\n";
    std::fs::write(p.root().join(".claude/settings.json"), bad).unwrap();
    let before = tree(p.root());
    let (code, v) = sj(&p, &["setup", "claude"]);
    assert_eq!(code, 6, "{v}");
    assert_eq!(v["error"]["code"], "invalid_state");
    assert_eq!(v["error"]["file"], ".claude/settings.json");
    assert_eq!(v["error"]["line"], 3);
    assert_eq!(
        before,
        tree(p.root()),
        "nothing may be written, .mcp.json neither"
    );

    std::fs::write(p.root().join(".mcp.json"), "[1]").unwrap();
    std::fs::remove_file(p.root().join(".claude/settings.json")).unwrap();
    let (code, v) = sj(&p, &["setup", "claude"]);
    assert_eq!(code, 6, "{v}");
    assert_eq!(v["error"]["file"], ".mcp.json");

    std::fs::create_dir(p.root().join(".codex")).unwrap();
    let toml = "# mine\n[mcp_servers.a]\ncommand = \"a\"\nargs = [\n";
    std::fs::write(p.root().join(".codex/config.toml"), toml).unwrap();
    let before = tree(p.root());
    let (code, v) = sj(&p, &["setup", "codex"]);
    assert_eq!(code, 6, "{v}");
    assert_eq!(v["error"]["file"], ".codex/config.toml");
    assert!(v["error"]["line"].as_u64().is_some(), "{v}");
    assert_eq!(before, tree(p.root()));
}

#[test]
fn a_symlinked_target_is_refused() {
    let p = Project::new("symlink");
    let outside = TempDir::new("symlink-outside");
    let target = outside.path.join("mcp.json");
    std::fs::write(&target, "{}").unwrap();
    std::os::unix::fs::symlink(&target, p.root().join(".mcp.json")).unwrap();
    let (code, v) = sj(&p, &["setup", "claude"]);
    assert_eq!(code, 6, "{v}");
    assert_eq!(v["error"]["file"], ".mcp.json");
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "{}");
    assert!(!p.root().join(".claude").exists());

    // A symlinked directory on the way is refused too.
    std::os::unix::fs::symlink(&outside.path, p.root().join(".codex")).unwrap();
    let (code, v) = sj(&p, &["setup", "codex"]);
    assert_eq!(code, 6, "{v}");
    assert_eq!(v["error"]["file"], ".codex");
    assert!(!outside.path.join("config.toml").exists());
    assert!(!p.root().join("AGENTS.md").exists());
}

#[test]
fn codex_keeps_the_users_text_comments_and_servers() {
    let p = Project::new("codex");
    let mine = "# Project rules\n\nBe careful.\n";
    std::fs::write(p.root().join("AGENTS.md"), mine).unwrap();
    std::fs::create_dir(p.root().join(".codex")).unwrap();
    let config = "# my codex settings\nmodel = \"o3\" # the model\n\n[mcp_servers.docs]\n\
                  # docs server\ncommand = \"docs-mcp\"\nargs = [\"serve\"]\n";
    std::fs::write(p.root().join(".codex/config.toml"), config).unwrap();

    let (_, actions) = setup_ok(&p, &["setup", "codex"]);
    assert!(all(&actions, "updated"), "{actions:?}");
    let agents = std::fs::read_to_string(p.root().join("AGENTS.md")).unwrap();
    assert!(agents.starts_with(mine), "{agents}");
    assert_eq!(agents.matches("<!-- loopx:begin -->").count(), 1);
    assert!(agents.contains("loopx turn start"));
    let text = std::fs::read_to_string(p.root().join(".codex/config.toml")).unwrap();
    for kept in ["# my codex settings", "# the model", "# docs server"] {
        assert!(text.contains(kept), "lost `{kept}`:\n{text}");
    }
    let t: toml::Table = text.parse().expect("valid TOML");
    assert_eq!(t["model"].as_str(), Some("o3"));
    assert_eq!(
        t["mcp_servers"]["docs"]["command"].as_str(),
        Some("docs-mcp")
    );
    let ours = &t["mcp_servers"]["loopx"];
    assert_eq!(ours["command"].as_str(), Some("loopx"));
    assert_eq!(ours["args"].as_array().unwrap()[0].as_str(), Some("mcp"));
    assert_eq!(ours["env"]["LOOPX_AGENT"].as_str(), Some("codex"));

    let before = tree(p.root());
    let (_, again) = setup_ok(&p, &["setup", "codex"]);
    assert!(all(&again, "unchanged"), "{again:?}");
    assert_eq!(before, tree(p.root()));

    // The section is replaced in place: text after it stays, and stays after it.
    let edited = agents.replace("## loopx", "## stale heading") + "\n## After\n";
    std::fs::write(p.root().join("AGENTS.md"), &edited).unwrap();
    let (code, v) = sj(&p, &["--agent", "cx", "setup", "codex"]);
    assert_eq!(code, 0, "{v}");
    let agents = std::fs::read_to_string(p.root().join("AGENTS.md")).unwrap();
    assert!(
        !agents.contains("stale heading") && agents.contains("agent `cx`"),
        "{agents}"
    );
    assert!(agents.starts_with(mine) && agents.ends_with("<!-- loopx:end -->\n\n## After\n"));
    let t: toml::Table = std::fs::read_to_string(p.root().join(".codex/config.toml"))
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(
        t["mcp_servers"]["loopx"]["env"]["LOOPX_AGENT"].as_str(),
        Some("cx")
    );

    // Markers out of order are refused with the line, and nothing is written.
    let broken = format!("{mine}<!-- loopx:end -->\n<!-- loopx:begin -->\n");
    std::fs::write(p.root().join("AGENTS.md"), &broken).unwrap();
    let before = tree(p.root());
    let (code, v) = sj(&p, &["setup", "codex"]);
    assert_eq!(code, 6, "{v}");
    assert_eq!(v["error"]["file"], "AGENTS.md");
    assert_eq!(v["error"]["line"], 4);
    assert_eq!(before, tree(p.root()));
}

#[test]
fn flags_that_do_not_fit_the_host_are_refused() {
    let p = Project::new("flags");
    for args in [
        vec!["setup", "claude", "--", "true"],
        vec!["setup", "codex", "--every", "5m"],
        vec!["setup", "cron"],
        vec!["setup", "cron", "--every", "7m", "--", "true"],
        vec!["setup", "systemd", "--every", "10s", "--", "true"],
        vec!["setup", "cron", "--", "no-such-program-here"],
        vec!["setup", "cron", "--", "sh", "-c", "date +%s"],
    ] {
        let (code, v) = sj(&p, &args);
        assert_eq!(code, 2, "{args:?}: {v}");
    }
    assert!(tree(p.root()).is_empty());
}

#[test]
fn systemd_units_verify_and_rerun_unchanged() {
    let p = Project::new("systemd");
    let args = [
        "--agent",
        "night@owl",
        "setup",
        "systemd",
        "--every",
        "1h",
        "--complete-on-success",
        "--",
        "sh",
        "-c",
        "echo \"$HOME\" 100%",
    ];
    let (v, actions) = setup_ok(&p, &args);
    assert!(all(&actions, "created"), "{actions:?}");
    let service = p.root().join("systemd/loopx-night\\x40owl.service");
    let timer = p.root().join("systemd/loopx-night\\x40owl.timer");
    let unit = std::fs::read_to_string(&service).unwrap();
    assert!(
        unit.contains("Type=oneshot") && unit.contains("SuccessExitStatus=3"),
        "{unit}"
    );
    assert!(unit.contains("--agent night@owl turn") && unit.contains("--complete-on-success"));
    assert!(
        std::fs::read_to_string(&timer)
            .unwrap()
            .contains("OnUnitInactiveSec=3600s")
    );
    assert!(
        v["next"]
            .as_str()
            .unwrap()
            .contains("systemctl --user link")
    );
    if which("systemd-analyze") {
        let out = std::process::Command::new("systemd-analyze")
            .arg("verify")
            .arg(&service)
            .arg(&timer)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success() && err.trim().is_empty(),
            "verify: {err}"
        );
    } else {
        eprintln!("systemd-analyze is absent: the units were not verified");
    }
    let before = tree(p.root());
    let (_, again) = setup_ok(&p, &args);
    assert!(all(&again, "unchanged"), "{again:?}");
    assert_eq!(before, tree(p.root()));
}

fn which(prog: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|d| d.join(prog).is_file()))
}

#[test]
fn three_turns_run_from_the_generated_cron_line() {
    let p = Project::new("cron");
    let ids: Vec<String> = (1..=3).map(|i| p.add(&format!("job {i}"), &[])).collect();
    let (v, actions) = setup_ok(
        &p,
        &[
            "setup",
            "cron",
            "--every",
            "15m",
            "--complete-on-success",
            "--",
            "true",
        ],
    );
    assert_eq!(
        actions.get("loopx-cron.crontab").map(String::as_str),
        Some("created")
    );
    let file = std::fs::read_to_string(p.root().join("loopx-cron.crontab")).unwrap();
    let line = v["crontab"].as_str().unwrap();
    assert_eq!(file, format!("{line}\n"));
    assert!(line.starts_with("*/15 * * * * "), "{line}");
    assert!(v["install"].as_str().unwrap().contains("crontab -"));
    let command = line.splitn(6, ' ').nth(5).unwrap();
    let log = p.root().join("loopx-cron.log");
    assert!(!log.starts_with(p.root().join(".loopx")));
    for turn in 1..=4 {
        // As cron would: another working directory, no loopx environment.
        let out = std::process::Command::new("sh")
            .args(["-c", command])
            .current_dir("/")
            .env_remove("LOOPX_DIR")
            .env_remove("LOOPX_AGENT")
            .env("HOME", &p.home.path)
            .output()
            .unwrap();
        let want = if turn <= 3 { 0 } else { 3 };
        assert_eq!(out.status.code(), Some(want), "turn {turn}: {out:?}");
    }
    for id in &ids {
        assert!(
            p.lx(&format!("archive/{id}.toml")).is_file(),
            "{id} is not done"
        );
        let ev = p.evidence(id);
        assert!(
            ev.iter()
                .any(|e| e["agent"] == "cron" && e["exit_code"] == 0),
            "{id}: {ev:?}"
        );
    }
    assert_eq!(p.ok(&["quota", "show"])["quota"]["used"], 3);
    let logged = std::fs::read_to_string(&log).unwrap();
    assert!(!logged.is_empty(), "nothing was logged");
    assert!(bin().ends_with("loopx"));
}
