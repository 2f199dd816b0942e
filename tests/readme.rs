//! Every command block of README.md runs as written, in order, in a fresh directory with
//! `loopx` on PATH: the one the README's `cargo install` made where CI ran it
//! (`LOOPX_README_BIN`), else the one built. A newcomer who types them gets no error.

mod common;

use std::process::Command;

use common::TempDir;

/// The ```sh blocks of the README, in order.
fn sh_blocks(readme: &str) -> Vec<String> {
    let mut blocks = Vec::new();
    let mut rest = readme;
    while let Some(at) = rest.find("```sh\n") {
        let body = &rest[at + 6..];
        let end = body.find("```").expect("a closed code block");
        blocks.push(body[..end].to_string());
        rest = &body[end + 3..];
    }
    blocks
}

/// One bash script from the blocks: a block that starts with `#!/bin/sh` is the agent's script
/// (written to `agent-turn.sh`, which the next block runs); `cargo install` is left out.
fn script(blocks: &[String]) -> String {
    let mut out = vec!["set -e".to_string()];
    for b in blocks {
        if b.starts_with("#!/bin/sh") {
            out.push(format!("cat > agent-turn.sh <<'AGENT_EOF'\n{b}AGENT_EOF"));
        } else {
            out.push(b.replace("cargo install --locked --path .", ": cargo install"));
        }
    }
    out.join("\n")
}

#[test]
fn the_readme_commands_run_as_written() {
    let readme = include_str!("../README.md");
    let blocks = sh_blocks(readme);
    assert!(blocks.len() >= 8, "only {} sh blocks", blocks.len());
    let all = blocks.concat();
    for must in [
        "cargo install --locked --path .",
        "loopx owner init",
        "gate open",
        "loopx gate approve \"$gate\"",
        "todo release \"$job\" --owner",
    ] {
        assert!(all.contains(must), "the README's commands lack `{must}`");
    }
    assert!(
        !all.contains("--guided"),
        "an interactive command in a block"
    );

    let tmp = TempDir::new("readme");
    let home = tmp.path.join("home");
    // The completion lines append to each shell's file; a fish user has its directory.
    std::fs::create_dir_all(home.join(".config/fish")).expect("home");
    let bin = tmp.path.join("bin");
    std::fs::create_dir_all(&bin).expect("bin");
    // The binary the README's own install made, where CI made it (.ci/run); else the one built.
    let installed = std::env::var_os("LOOPX_README_BIN").map(std::path::PathBuf::from);
    let loopx = installed.unwrap_or_else(|| common::bin().into());
    std::os::unix::fs::symlink(&loopx, bin.join("loopx")).expect("loopx on PATH");
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = Command::new("bash")
        .arg("-c")
        .arg(script(&blocks))
        .current_dir(&tmp.path)
        .env_clear()
        .env("PATH", path)
        .env("HOME", &home)
        .output()
        .expect("run bash");
    assert!(
        out.status.success(),
        "a README command failed ({}):\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        tmp.path.join("wx/.loopx/loopx.toml").is_file(),
        "the README's project is not in wx/"
    );
    assert!(home.join(".config/loopx/owner.key").is_file());
}
