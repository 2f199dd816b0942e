//! `loopx setup` keeps a user's files as they were, through the real binary: modes and owners,
//! values it does not touch byte for byte, no write through a directory swapped for a link while
//! it runs, and systemd unit names that never collide.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use common::{Project, TempDir, parse_json, run_cmd};
use serde_json::Value;

/// Runs `loopx --json ARGS` under `umask`: (exit code, answer).
fn setup(p: &Project, umask: u32, args: &[&str]) -> (i32, Value) {
    let mut a = vec!["--json"];
    a.extend_from_slice(args);
    let mut c = p.cmd(&a);
    // SAFETY: umask is async-signal-safe and touches nothing but this child's mask.
    unsafe {
        c.pre_exec(move || {
            libc::umask(umask as libc::mode_t);
            Ok(())
        });
    }
    let r = run_cmd(&mut c);
    (r.code, parse_json(&r, &args.join(" ")))
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).expect("stat").permissions().mode() & 0o7777
}

fn write_private(path: &Path, text: &str) {
    if let Some(d) = path.parent() {
        std::fs::create_dir_all(d).expect("mkdir");
    }
    std::fs::write(path, text).expect("write");
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).expect("chmod");
}

#[test]
fn a_private_file_stays_private_and_new_files_follow_the_umask() {
    let p = Project::new("keep-mode");
    let (mcp, settings) = (
        p.root().join(".mcp.json"),
        p.root().join(".claude/settings.json"),
    );
    write_private(
        &mcp,
        "{\"mcpServers\": {\"x\": {\"env\": {\"TOKEN\": \"secret\"}}}}\n",
    );
    write_private(&settings, "{\"env\": {\"API_KEY\": \"secret\"}}\n");
    let (code, v) = setup(&p, 0o022, &["setup", "claude"]);
    assert_eq!(code, 0, "{v}");
    assert_eq!((mode(&mcp), mode(&settings)), (0o600, 0o600), "{v}");
    assert!(std::fs::read_to_string(&mcp).unwrap().contains("loopx"));

    let config = p.root().join(".codex/config.toml");
    write_private(&config, "# mine\n[mcp_servers.x]\ncommand = \"x\"\n");
    let (code, v) = setup(&p, 0o027, &["setup", "codex"]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(mode(&config), 0o600, "{v}");
    // AGENTS.md is new: 0o666 less the umask.
    assert_eq!(mode(&p.root().join("AGENTS.md")), 0o640, "{v}");
    let (code, v) = setup(&p, 0o077, &["setup", "systemd", "--", "true"]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(mode(&p.root().join("systemd")), 0o700, "{v}");
    assert_eq!(mode(&p.root().join("systemd/loopx-systemd.timer")), 0o600);
}

#[test]
fn values_setup_does_not_touch_survive_byte_for_byte() {
    let p = Project::new("keep-bytes");
    let kept = [
        "12345678901234567890123",
        "-0.000000000000000000001",
        "[1.0, 1e5, 2E-3]",
        "\"caf\\u00e9 \\ud83d\\ude00\"",
        "{ \"timeout\": 1.50, \"args\": [ ] }",
    ];
    let text = format!(
        "{{\"n\": {}, \"tiny\": {}, \"f\": {},\n \"s\": {}, \"mcpServers\": {{\"other\": {}}}}}\n",
        kept[0], kept[1], kept[2], kept[3], kept[4]
    );
    std::fs::write(p.root().join(".mcp.json"), &text).unwrap();
    let (code, v) = setup(&p, 0o022, &["setup", "claude"]);
    assert_eq!(code, 0, "{v}");
    let out = std::fs::read_to_string(p.root().join(".mcp.json")).unwrap();
    for k in kept {
        assert!(out.contains(k), "{k} is gone from:\n{out}");
    }
    // A number no float holds is kept too, where setup used to refuse the file.
    let settings = "{\"hooks\": {\"SessionStart\": [{\"n\": 1.0, \"hooks\": []}]}, \"big\": 1e400}";
    std::fs::write(p.root().join(".claude/settings.json"), settings).unwrap();
    let (code, v) = setup(&p, 0o022, &["--agent", "other", "setup", "claude"]);
    assert_eq!(code, 0, "{v}");
    let out = std::fs::read_to_string(p.root().join(".claude/settings.json")).unwrap();
    for k in ["{\"n\": 1.0, \"hooks\": []}", "1e400", "loopx-setup"] {
        assert!(out.contains(k), "{k} is gone from:\n{out}");
    }
    let config = "[tool]\nx = 1e5\ny = 1.0\nz = 0xff\nw = 1_000\n";
    std::fs::create_dir(p.root().join(".codex")).unwrap();
    std::fs::write(p.root().join(".codex/config.toml"), config).unwrap();
    let (code, v) = setup(&p, 0o022, &["setup", "codex"]);
    assert_eq!(code, 0, "{v}");
    let out = std::fs::read_to_string(p.root().join(".codex/config.toml")).unwrap();
    assert!(out.starts_with(config), "{out}");
}

/// Swaps `.claude` for a link to `outside` and back, until `stop`.
fn swapper(root: &Path, outside: &Path, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<u64> {
    let (dir, outside) = (root.join(".claude"), outside.to_path_buf());
    let (tmp, root) = (root.join(".claude.lnk"), root.to_path_buf());
    std::thread::spawn(move || {
        let mut swaps = 0u64;
        while !stop.load(Ordering::Relaxed) {
            match std::fs::symlink_metadata(&dir) {
                Ok(m) if m.file_type().is_symlink() => {
                    let _ = std::fs::remove_file(&dir);
                    let _ = std::fs::create_dir(&dir);
                }
                Ok(_) => {
                    let _ = std::fs::rename(&dir, root.join(format!(".claude.real-{swaps}")));
                    let _ = std::os::unix::fs::symlink(&outside, &tmp);
                    let _ = std::fs::rename(&tmp, &dir);
                    swaps += 1;
                }
                Err(_) => {
                    let _ = std::fs::create_dir(&dir);
                }
            }
        }
        swaps
    })
}

#[test]
fn a_directory_swapped_for_a_link_while_setup_runs_is_never_followed() {
    let p = Project::new("keep-race");
    let outside = TempDir::new("keep-race-outside");
    std::fs::create_dir(p.root().join(".claude")).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let racer = swapper(p.root(), &outside.path, stop.clone());
    let mut codes = std::collections::BTreeMap::new();
    for i in 0..150 {
        // A new agent each run: settings.json changes, so each run writes.
        let agent = format!("a{i}");
        let (code, v) = setup(&p, 0o022, &["--agent", &agent, "setup", "claude"]);
        // 1: the directory went away under it (renamed by the swapper), which is no harm.
        assert!(matches!(code, 0 | 1 | 6), "run {i}: {v}");
        if code == 6 {
            let msg = v["error"]["message"].as_str().unwrap_or_default();
            assert!(msg.contains(".claude") && msg.contains("symlink"), "{v}");
        }
        *codes.entry(code).or_insert(0) += 1;
    }
    stop.store(true, Ordering::Relaxed);
    let swaps = racer.join().expect("the swapper");
    let written: Vec<_> = std::fs::read_dir(&outside.path)
        .unwrap()
        .flatten()
        .collect();
    assert!(
        written.is_empty(),
        "setup wrote outside the project ({swaps} swaps, exits {codes:?}): {written:?}"
    );
    assert!(
        swaps > 0 && codes.contains_key(&0),
        "{swaps} swaps, {codes:?}"
    );
}

#[test]
fn two_agents_never_share_a_systemd_unit() {
    let p = Project::new("keep-units");
    let unit = |a: &str| {
        let (code, v) = setup(&p, 0o022, &["--agent", a, "setup", "systemd", "--", "true"]);
        assert_eq!(code, 0, "{v}");
        v["units"][0].as_str().unwrap_or_default().to_string()
    };
    let (a, b) = (unit("ci@host"), unit("ci_host"));
    assert_ne!(a, b);
    assert_eq!(a, "loopx-ci\\x40host.service");
    let first = std::fs::read_to_string(p.root().join("systemd").join(&a)).unwrap();
    assert!(first.contains("agent ci@host\n"), "{first}");

    // A unit an older setup named `loopx-ci_host` for ci@host is not taken over.
    let old = p.root().join("systemd/loopx-ci_host.service");
    let legacy = first.replace("loopx-ci\\x40host", "loopx-ci_host");
    std::fs::write(&old, &legacy).unwrap();
    let (code, v) = setup(
        &p,
        0o022,
        &["--agent", "ci_host", "setup", "systemd", "--", "true"],
    );
    assert_eq!(code, 6, "{v}");
    assert_eq!(v["error"]["file"], "systemd/loopx-ci_host.service", "{v}");
    assert!(v["error"]["message"].to_string().contains("ci@host"), "{v}");
    assert_eq!(std::fs::read_to_string(&old).unwrap(), legacy);
}
