//! The documentation the binary carries: the man pages, the completion of todo and gate ids
//! through the shell's protocol, and the example in every subcommand's help.

mod common;

use std::process::Command;

use common::{Project, Run, TempDir, complete_bash, run_cmd};

/// The page `man -l` renders from `path`, or `None` where `man` is not installed.
fn man_render(path: &std::path::Path) -> Option<String> {
    let out = Command::new("man")
        .arg("-l")
        .arg(path)
        .env("MANPAGER", "cat")
        .env("MANWIDTH", "100")
        .env("LC_ALL", "C")
        .output()
        .ok()?;
    assert!(out.status.success(), "man -l {}: {out:?}", path.display());
    Some(String::from_utf8_lossy(&out.stdout).into_owned())
}

#[test]
fn man_prints_the_page_and_renders() {
    let p = Project::empty("man");
    let r = p.run(&["man"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        r.stdout.starts_with(".ie") || r.stdout.contains(".TH loopx 1"),
        "{r:?}"
    );
    let page = p.root().join("loopx.1");
    std::fs::write(&page, &r.stdout).expect("write page");
    let Some(text) = man_render(&page) else {
        eprintln!("man is not installed: rendering not checked");
        return;
    };
    for sub in [
        "start-goal",
        "todo",
        "gate",
        "quota",
        "turn",
        "doctor",
        "completions",
    ] {
        assert!(text.contains(sub), "loopx.1 does not name `{sub}`:\n{text}");
    }
    assert!(
        !text.contains("loopx-man"),
        "the hidden man command is listed:\n{text}"
    );
}

#[test]
fn man_out_writes_one_page_per_subcommand() {
    let p = Project::empty("man-out");
    let out = TempDir::new("man-pages");
    let dir = out.path.to_str().expect("utf-8 temp path");
    let v = p.ok(&["man", "--out", dir]);
    let files: Vec<&str> = v["files"]
        .as_array()
        .expect("files")
        .iter()
        .filter_map(|f| f.as_str())
        .collect();
    for name in [
        "loopx.1",
        "loopx-todo.1",
        "loopx-todo-claim.1",
        "loopx-gate-approve.1",
    ] {
        assert!(files.contains(&name), "{name} not in {files:?}");
        assert!(out.path.join(name).is_file(), "{name} not written");
    }
    assert!(
        !files
            .iter()
            .any(|f| f.contains("hook-run") || f.contains("man")),
        "{files:?}"
    );
    if let Some(text) = man_render(&out.path.join("loopx-todo-claim.1")) {
        assert!(text.contains("loopx-todo-claim"), "{text}");
        assert!(text.contains("--ttl"), "{text}");
    }
    let r = p.run(&["man", "--out", "/nonexistent/dir"]);
    assert_eq!(r.code, 1, "{r:?}");
}

fn complete(p: &Project, words: &[&str], env: &[(&str, &str)]) -> Run {
    complete_bash(p, words, env)
}

/// The candidates that look like ids of this prefix.
fn ids(r: &Run, prefix: &str) -> Vec<String> {
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stderr.is_empty(), "{r:?}");
    let mut v: Vec<String> = r
        .stdout
        .lines()
        .filter(|l| l.starts_with(prefix))
        .map(str::to_string)
        .collect();
    v.sort();
    v
}

#[test]
fn completion_offers_todo_and_gate_ids_on_disk() {
    let p = Project::new("complete");
    let mut todos = vec![p.add("one", &[]), p.add("two", &[])];
    todos.sort();
    let gate = p.gate("go?", &[]);
    let r = complete(&p, &["loopx", "todo", "claim", ""], &[]);
    assert_eq!(ids(&r, "t-"), todos, "{r:?}");
    assert!(ids(&r, "g-").is_empty(), "{r:?}");
    let r = complete(&p, &["loopx", "gate", "approve", ""], &[]);
    assert_eq!(ids(&r, "g-"), vec![gate.clone()], "{r:?}");
    assert!(ids(&r, "t-").is_empty(), "{r:?}");

    // What was typed narrows it, with or without the prefix letter.
    let r = complete(&p, &["loopx", "todo", "show", &todos[0]], &[]);
    assert_eq!(ids(&r, "t-"), vec![todos[0].clone()]);
    let r = complete(&p, &["loopx", "todo", "show", &todos[1][2..]], &[]);
    assert_eq!(ids(&r, "t-"), vec![todos[1].clone()]);
    // A flag's value: --depends-on takes todo ids, --blocked-by-gate gate ids.
    let r = complete(&p, &["loopx", "todo", "add", "x", "--depends-on", ""], &[]);
    assert_eq!(ids(&r, "t-"), todos);
    let r = complete(
        &p,
        &["loopx", "todo", "add", "x", "--blocked-by-gate", ""],
        &[],
    );
    assert_eq!(ids(&r, "g-"), vec![gate]);

    // From elsewhere, LOOPX_DIR names the project.
    let elsewhere = TempDir::new("complete-elsewhere");
    let root = p.root().to_str().expect("utf-8");
    let mut c = p.cmd(&[]);
    c.current_dir(&elsewhere.path)
        .env("LOOPX_DIR", root)
        .env("COMPLETE", "bash")
        .env("_CLAP_COMPLETE_INDEX", "3")
        .env("_CLAP_IFS", "\n")
        .args(["--", "loopx", "todo", "release", ""]);
    assert_eq!(ids(&run_cmd(&mut c), "t-"), todos);
}

#[test]
fn completion_lists_only_regular_files_quietly() {
    let p = Project::new("complete-quiet");
    let id = p.add("one", &[]);
    let todos = p.lx("todos");
    std::fs::write(todos.join("notes.txt"), "x").expect("write");
    std::fs::write(todos.join("t-bad.toml"), "x").expect("write");
    std::fs::create_dir(todos.join("t-aaaaaa.toml")).expect("mkdir");
    std::os::unix::fs::symlink(
        todos.join(format!("{id}.toml")),
        todos.join("t-bbbbbb.toml"),
    )
    .expect("symlink");
    let r = complete(&p, &["loopx", "todo", "claim", ""], &[]);
    assert_eq!(ids(&r, "t-"), vec![id.clone()], "{r:?}");

    // A symlinked gates/ is never followed.
    let real = TempDir::new("complete-real-gates");
    std::fs::write(real.path.join("g-cccccc.toml"), "x").expect("write");
    std::fs::remove_dir_all(p.lx("gates")).ok();
    std::os::unix::fs::symlink(&real.path, p.lx("gates")).expect("symlink");
    let r = complete(&p, &["loopx", "gate", "approve", ""], &[]);
    assert!(ids(&r, "g-").is_empty(), "{r:?}");

    // No project: nothing offered, nothing said.
    let none = Project::empty("complete-none");
    let r = complete(&none, &["loopx", "todo", "claim", ""], &[]);
    assert!(ids(&r, "t-").is_empty(), "{r:?}");
}

#[test]
fn completions_script_completes_ids_in_bash() {
    let p = Project::new("complete-bash");
    let id = p.add("one", &[]);
    let r = p.run(&["completions", "bash"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stdout.contains("_clap_complete_loopx"), "{r:?}");
    assert!(r.stdout.contains("COMPLETE=\"bash\""), "{r:?}");
    // What `COMPLETE=bash loopx` prints, the same script.
    let mut c = p.cmd(&[]);
    c.env("COMPLETE", "bash");
    assert_eq!(run_cmd(&mut c).stdout.trim_end(), r.stdout.trim_end());
    for shell in ["zsh", "fish", "elvish", "powershell"] {
        let s = p.run(&["completions", shell]);
        assert!(
            s.code == 0 && s.stdout.contains("COMPLETE"),
            "{shell}: {s:?}"
        );
    }

    if Command::new("bash").arg("--version").output().is_err() {
        eprintln!("bash is not installed: the script is not run");
        return;
    }
    let script = p.root().join("loopx.bash");
    std::fs::write(&script, &r.stdout).expect("write script");
    let probe = format!(
        "source {}; COMP_WORDS=(loopx todo claim ''); COMP_CWORD=3; COMP_TYPE=9; \
         _clap_complete_loopx loopx '' claim; printf '%s\\n' \"${{COMPREPLY[@]}}\"",
        script.display()
    );
    let mut c = Command::new("bash");
    c.args(["--norc", "-c", &probe])
        .current_dir(p.root())
        .env_remove("LOOPX_DIR");
    let r = run_cmd(&mut c);
    assert_eq!(ids(&r, "t-"), vec![id], "{r:?}");
}

/// Splits a line into words as a POSIX shell would (quotes and backslashes; no expansion),
/// stopping at an unquoted redirection, pipe, list operator or comment.
fn shell_words(line: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut cur = String::new();
    let (mut quoted, mut in_word) = (false, false);
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            ' ' | '\t' => {
                if in_word && !quoted && [">", ">>", "|", ";", "&&", "||"].contains(&cur.as_str()) {
                    return words;
                }
                if in_word {
                    words.push(std::mem::take(&mut cur));
                }
                (quoted, in_word) = (false, false);
            }
            '#' if !in_word => return words,
            '\'' => {
                (quoted, in_word) = (true, true);
                cur.extend(chars.by_ref().take_while(|&c| c != '\''));
            }
            '"' => {
                (quoted, in_word) = (true, true);
                while let Some(c) = chars.next() {
                    match c {
                        '"' => break,
                        '\\' => cur.extend(chars.next()),
                        c => cur.push(c),
                    }
                }
            }
            '\\' => {
                in_word = true;
                cur.extend(chars.next());
            }
            c => {
                in_word = true;
                cur.push(c);
            }
        }
    }
    if in_word {
        words.push(cur);
    }
    words
}

#[test]
fn shell_words_splits_like_a_shell() {
    assert_eq!(
        shell_words(r#"loopx a "b c" 'd "e"' f\ g "h\"i" > out # x"#),
        ["loopx", "a", "b c", "d \"e\"", "f g", "h\"i"]
    );
    assert_eq!(shell_words("loopx x # note"), ["loopx", "x"]);
    assert_eq!(shell_words("loopx '>' y"), ["loopx", ">", "y"]);
}

/// Every visible leaf command, with the names that lead to it (`["todo", "claim"]`).
fn leaves(
    cmd: &clap::Command,
    path: &mut Vec<String>,
    out: &mut Vec<(Vec<String>, clap::Command)>,
) {
    walk(cmd, path, out, true);
}

/// Every visible command below the top that has subcommands, as (path, command).
fn groups(
    cmd: &clap::Command,
    path: &mut Vec<String>,
    out: &mut Vec<(Vec<String>, clap::Command)>,
) {
    walk(cmd, path, out, false);
}

/// The visible commands below `cmd`: the leaves, or the groups.
fn walk(
    cmd: &clap::Command,
    path: &mut Vec<String>,
    out: &mut Vec<(Vec<String>, clap::Command)>,
    want_leaves: bool,
) {
    let subs: Vec<_> = cmd
        .get_subcommands()
        .filter(|s| !s.is_hide_set() && s.get_name() != "help")
        .collect();
    if subs.is_empty() == want_leaves && !path.is_empty() {
        out.push((path.clone(), cmd.clone()));
    }
    for s in subs {
        path.push(s.get_name().to_string());
        walk(s, path, out, want_leaves);
        path.pop();
    }
}

/// The `loopx ...` lines of a command's example, or `None` when its help has no example.
fn example_lines(cmd: &clap::Command) -> Option<Vec<String>> {
    let help = cmd.get_after_help()?.to_string();
    let (_, example) = help.split_once("Example")?;
    Some(
        example
            .lines()
            .map(str::trim)
            .filter(|l| l.starts_with("loopx "))
            .map(str::to_string)
            .collect(),
    )
}

/// Parses an example line as the binary would; panics naming the command when it does not.
fn parsed(name: &str, line: &str) -> Vec<String> {
    use clap::Parser as _;
    let words = shell_words(line);
    if let Err(e) = loopx::cli::Cli::try_parse_from(&words) {
        panic!("`loopx {name}`'s example does not parse: {line}\n{e}");
    }
    words
}

#[test]
fn every_subcommand_has_an_example_that_parses() {
    use clap::CommandFactory as _;
    let mut all = Vec::new();
    leaves(&loopx::cli::Cli::command(), &mut Vec::new(), &mut all);
    assert!(all.len() > 40, "only {} leaf commands found", all.len());
    let mut missing = Vec::new();
    for (path, cmd) in &all {
        let name = path.join(" ");
        let Some(lines) = example_lines(cmd) else {
            missing.push(name);
            continue;
        };
        assert!(
            !lines.is_empty(),
            "`loopx {name}`: no `loopx ...` line in its example"
        );
        for line in &lines {
            let words = parsed(&name, line);
            let at = words.windows(path.len()).any(|w| w == path.as_slice());
            assert!(at, "`loopx {name}`'s example runs another command: {line}");
        }
    }
    assert!(
        missing.is_empty(),
        "commands without an example: {missing:?}"
    );
}

#[test]
fn the_reference_names_every_command_and_flag() {
    use clap::CommandFactory as _;
    let reference = include_str!("../docs/reference.md");
    let mut all = Vec::new();
    leaves(&loopx::cli::Cli::command(), &mut Vec::new(), &mut all);
    let mut missing = Vec::new();
    for (path, cmd) in &all {
        let name = path.join(" ");
        if !reference.contains(&format!("`{name}")) {
            missing.push(name.clone());
        }
        let flags = cmd
            .get_arguments()
            .filter(|a| !a.is_hide_set() && !a.is_global_set());
        for long in flags.filter_map(|a| a.get_long()) {
            if !["help", "version"].contains(&long) && !reference.contains(&format!("--{long}")) {
                missing.push(format!("{name} --{long}"));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "docs/reference.md does not name: {missing:?}"
    );
}

#[test]
fn every_command_group_has_an_example_of_its_commands_that_parses() {
    use clap::CommandFactory as _;
    let mut all = Vec::new();
    groups(&loopx::cli::Cli::command(), &mut Vec::new(), &mut all);
    assert!(all.len() >= 10, "only {} command groups found", all.len());
    let mut missing = Vec::new();
    for (path, cmd) in &all {
        let name = path.join(" ");
        let Some(lines) = example_lines(cmd) else {
            missing.push(name);
            continue;
        };
        // A story: each line parses, and at least two run the group's own commands.
        let own = lines
            .iter()
            .map(|l| parsed(&name, l))
            .filter(|w| w.windows(path.len()).any(|w| w == path.as_slice()))
            .count();
        assert!(
            own >= 2,
            "`loopx {name}`: fewer than two of its commands in its example"
        );
    }
    assert!(
        missing.is_empty(),
        "command groups without an example: {missing:?}"
    );
}
