//! The wiring of schedulers that start `loopx turn` themselves: a crontab line, and a systemd
//! user service with its timer.

use std::path::Path;

use serde_json::{Map, json};
use sha2::Digest as _;

use super::{EVERY_DEFAULT, Plan, Setup, Wiring, files};
use crate::kernel::{Dur, Error, Result};
use crate::text::escape as esc;
use crate::text::sh_word;

/// The longest `--every` and `--timeout`: a week.
const LONGEST: Dur = Dur(7 * 86_400_000);

/// The most bytes of PATH carried into the wiring.
const PATH_MAX: usize = 4096;

/// A scheduled turn: how often, its command, and the PATH it runs with.
#[derive(Debug)]
pub struct Sched {
    every: Dur,
    timeout: Dur,
    /// `turn`'s arguments after the global flags, up to and including `--` and the command.
    turn: Vec<String>,
    /// The PATH of the shell that ran setup (absolute, plain entries only).
    path: String,
}

impl Sched {
    /// Checks the flags and resolves the command's program to an absolute path.
    pub fn new(plan: &Plan, a: &Setup) -> Result<Sched> {
        let every = a.every.unwrap_or(EVERY_DEFAULT);
        let timeout = a.timeout.unwrap_or(every);
        check_dur("--every", every, Dur::from_mins(1))?;
        check_dur("--timeout", timeout, Dur::from_secs(1))?;
        let mut turn = vec!["turn".to_string(), "--timeout".into(), timeout.to_string()];
        if a.complete_on_success {
            turn.push("--complete-on-success".into());
        }
        turn.push("--".into());
        for (i, w) in a.cmd.iter().enumerate() {
            let w = w.to_str().ok_or_else(|| {
                Error::usage("the command is not valid UTF-8").hint("give it in UTF-8")
            })?;
            check_word(w, "the command")?;
            turn.push(if i == 0 {
                program(w, &plan.root)?
            } else {
                w.into()
            });
        }
        Ok(Sched {
            every,
            timeout,
            turn,
            path: path_env(),
        })
    }

    /// Every word of the loopx command line: binary, project, agent, turn and the command.
    fn argv(&self, p: &Plan) -> Vec<String> {
        let mut v = vec![
            p.bin.clone(),
            "--dir".into(),
            root_text(p),
            "--agent".into(),
        ];
        v.push(p.agent.clone());
        v.extend(self.turn.iter().cloned());
        v
    }
}

/// Refuses a duration out of `least..=LONGEST`.
fn check_dur(name: &str, d: Dur, least: Dur) -> Result<()> {
    if d < least || d > LONGEST {
        return Err(
            Error::usage(format!("{name} must be from {least} to {LONGEST}, not {d}"))
                .hint(format!("give it like `{name} 30m`")),
        );
    }
    Ok(())
}

/// Refuses a word with a control character (a newline would end a crontab or unit line).
pub fn check_word(w: &str, what: &str) -> Result<()> {
    if w.chars().any(char::is_control) {
        return Err(Error::usage(format!("{what} holds a control character"))
            .hint("put the command in a script and give the script's path"));
    }
    Ok(())
}

/// The program as an absolute path: cron and systemd have almost no PATH.
fn program(w: &str, root: &Path) -> Result<String> {
    use std::os::unix::fs::PermissionsExt;
    let runs = |f: &Path| {
        f.metadata()
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    let found = if w.contains('/') {
        let cwd = std::env::current_dir().unwrap_or_else(|_| root.to_path_buf());
        Some(std::path::absolute(cwd.join(w)).unwrap_or_else(|_| cwd.join(w))).filter(|p| runs(p))
    } else {
        std::env::var_os("PATH").and_then(|path| {
            std::env::split_paths(&path)
                .map(|d| d.join(w))
                .find(|f| f.is_absolute() && runs(f))
        })
    };
    found
        .and_then(|p| p.to_str().map(str::to_string))
        .ok_or_else(|| {
            Error::usage(format!(
                "cannot find the command `{}` (or it is not executable)",
                crate::text::escape(w)
            ))
            .hint("give a program on PATH or a path to one, after `--`")
        })
}

/// This shell's PATH, absolute plain entries only, for the agent's own tools (node, git ...).
fn path_env() -> String {
    let plain = |s: &str| {
        s.starts_with('/')
            && !s
                .chars()
                .any(|c| c.is_control() || "%$\"'\\`".contains(c) || c == ' ')
    };
    let mut out = String::new();
    if let Some(path) = std::env::var_os("PATH") {
        for d in std::env::split_paths(&path) {
            let Some(d) = d.to_str().filter(|d| plain(d)) else {
                continue;
            };
            if out.split(':').any(|seen| seen == d) {
                continue;
            }
            if out.len() + d.len() + 1 > PATH_MAX {
                break;
            }
            if !out.is_empty() {
                out.push(':');
            }
            out.push_str(d);
        }
    }
    if out.is_empty() {
        out = "/usr/local/bin:/usr/bin:/bin".into();
    }
    out
}

fn root_text(p: &Plan) -> String {
    p.root.to_string_lossy().into_owned()
}

/// Checks the project root can be written into a line of this host.
fn check_root(p: &Plan, bad: &str, host: &str) -> Result<()> {
    let root = root_text(p);
    check_word(&root, "the project's path")?;
    check_word(&p.bin, "--bin")?;
    if let Some(c) = root.chars().chain(p.bin.chars()).find(|c| bad.contains(*c)) {
        return Err(Error::usage(format!(
            "the project's path or the loopx binary's holds `{c}`, which {host} cannot carry"
        ))
        .hint("move the project (or the binary) to a plainer path"));
    }
    Ok(())
}

/// The cron schedule for an interval: minutes dividing an hour, hours dividing a day, or a day.
fn cron_expr(every: Dur) -> Option<String> {
    if every.0 % 60_000 != 0 {
        return None;
    }
    let m = every.0 / 60_000;
    match m {
        1 => Some("* * * * *".into()),
        2..=59 if 60 % m == 0 => Some(format!("*/{m} * * * *")),
        60 => Some("0 * * * *".into()),
        _ if m % 60 == 0 && 24 % (m / 60) == 0 && m < 1440 => Some(format!("0 */{} * * *", m / 60)),
        1440 => Some("0 0 * * *".into()),
        _ => None,
    }
}

/// A short mark naming this project and agent, so an install replaces its own line only.
fn mark(p: &Plan, host: &str) -> String {
    let hash = sha2::Sha256::digest(root_text(p).as_bytes());
    let hex: String = hash[..6].iter().map(|b| format!("{b:02x}")).collect();
    format!("loopx-{host}:{}:{hex}", p.agent)
}

/// cron: `loopx-AGENT.crontab`, one line that runs a turn in the project, its output appended to
/// `loopx-AGENT.log`. It never edits the user's crontab: it says how.
pub fn cron(p: &Plan, s: &Sched) -> Result<Wiring> {
    check_root(p, "%", "a crontab line")?;
    if let Some(w) = s.turn.iter().find(|w| w.contains('%')) {
        return Err(Error::usage(format!(
            "`{}` holds `%`, which cron turns into a new line",
            crate::text::escape(w)
        ))
        .hint("put the command in a script and give the script's path"));
    }
    let expr = cron_expr(s.every).ok_or_else(|| {
        Error::usage(format!("cron cannot run every {}", s.every)).hint(
            "give --every in minutes dividing an hour (1m 5m 10m 15m 20m 30m), \
             hours dividing a day (1h 2h 3h 4h 6h 8h 12h) or 1d; or use `setup systemd`",
        )
    })?;
    let root = root_text(p);
    let log = format!("{root}/loopx-{}.log", p.agent);
    let words: Vec<String> = s.argv(p).iter().map(|w| sh_word(w)).collect();
    let mark = mark(p, "cron");
    let line = format!(
        "{expr} cd {} && PATH={} {} >> {} 2>&1 # {mark}",
        sh_word(&root),
        sh_word(&s.path),
        words.join(" "),
        sh_word(&log)
    );
    let rel = format!("loopx-{}.crontab", p.agent);
    let change = files::whole(&p.root, &rel, format!("{line}\n"))?;
    let file = format!("{root}/{rel}");
    let install = format!(
        "(crontab -l 2>/dev/null | grep -vF {}; cat {}) | crontab -",
        sh_word(&mark),
        sh_word(&file)
    );
    let mut extra = Map::new();
    extra.insert("crontab".into(), json!(line));
    extra.insert("log".into(), json!(log));
    extra.insert("install".into(), json!(install));
    Ok(Wiring {
        changes: vec![change],
        next: format!("install the line in your crontab (replacing an older one): {install}"),
        extra,
    })
}

/// A word for a systemd command line: as it is when plain, else double-quoted with `\`, `"`,
/// `%` (specifiers) and `$` (variables) escaped.
fn unit_word(w: &str) -> String {
    let plain = !w.is_empty()
        && w.chars()
            .all(|c| c.is_ascii_alphanumeric() || "_./:=@,+-".contains(c));
    if plain {
        return w.to_string();
    }
    let mut out = String::from("\"");
    for c in w.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '%' => out.push_str("%%"),
            '$' => out.push_str("$$"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// The unit's name: `loopx-AGENT`, with `@` (a template's mark) escaped as `systemd-escape`
/// does (`\x40`): an agent id holds no `\`, so no two ids give one name.
fn unit_name(agent: &str) -> String {
    let mut name = String::from("loopx-");
    for c in agent.chars() {
        if c.is_ascii_alphanumeric() || "_.-".contains(c) {
            name.push(c);
        } else {
            name.push_str(&format!("\\x{:02x}", u32::from(c)));
        }
    }
    name
}

/// The start of a service's `Description=` line; the agent's id follows.
const DESCRIPTION: &str = "Description=loopx: one turn of agent ";

/// Refuses a service file there that runs another agent (one an older setup named alike).
fn check_clash(p: &Plan, rel: &str) -> Result<()> {
    let Some(bytes) = files::read(&p.root, rel)? else {
        return Ok(());
    };
    let text = String::from_utf8_lossy(&bytes);
    let other = text.lines().find_map(|l| l.strip_prefix(DESCRIPTION));
    match other {
        Some(o) if o != p.agent => Err(Error::in_file(
            crate::kernel::Code::InvalidState,
            rel,
            None,
            format!("is agent {}'s unit, not {}'s", esc(o), p.agent),
        )
        .hint(format!(
            "nothing was written: run `loopx --agent {} setup systemd ...` again to rename its units, then remove {rel}",
            esc(o)
        ))),
        _ => Ok(()),
    }
}

/// systemd: a oneshot user service running one turn, and a timer starting it `every` after the
/// last one ended; written under `systemd/`, to link and enable.
pub fn systemd(p: &Plan, s: &Sched) -> Result<Wiring> {
    check_root(p, "\\\"", "a systemd unit")?;
    let name = unit_name(&p.agent);
    let srel = format!("systemd/{name}.service");
    let trel = format!("systemd/{name}.timer");
    check_clash(p, &srel)?;
    let head = "# Written by `loopx setup systemd`; rerun it to update.\n";
    let exec: Vec<String> = s.argv(p).iter().map(|w| unit_word(w)).collect();
    let service = format!(
        "{head}[Unit]\n{DESCRIPTION}{agent}\n\n[Service]\nType=oneshot\n\
         WorkingDirectory={dir}\nEnvironment=\"PATH={path}\"\nExecStart={exec}\n\
         # Exit 3 is \"not now\" (paused, throttled, nothing ready): normal, not a failure.\n\
         SuccessExitStatus=3\nTimeoutStartSec={limit}s\n",
        agent = p.agent,
        dir = root_text(p).replace('%', "%%"),
        path = s.path,
        exec = exec.join(" "),
        // The turn's timeout, its 10 s grace, and a minute for loopx itself.
        limit = s.timeout.secs_ceil() + 70,
    );
    let timer = format!(
        "{head}[Unit]\nDescription=loopx: a turn of agent {agent} every {every}\n\n[Timer]\n\
         OnActiveSec=1min\nOnUnitInactiveSec={secs}s\nUnit={name}.service\n\n\
         [Install]\nWantedBy=timers.target\n",
        agent = p.agent,
        every = s.every,
        secs = s.every.secs_ceil(),
    );
    let changes = vec![
        files::whole(&p.root, &srel, service)?,
        files::whole(&p.root, &trel, timer)?,
    ];
    let root = root_text(p);
    let next = format!(
        "systemctl --user link {} {} && systemctl --user enable --now {}",
        sh_word(&format!("{root}/{srel}")),
        sh_word(&format!("{root}/{trel}")),
        sh_word(&format!("{name}.timer"))
    );
    let mut extra = Map::new();
    extra.insert(
        "units".into(),
        json!([format!("{name}.service"), format!("{name}.timer")]),
    );
    Ok(Wiring {
        changes,
        next,
        extra,
    })
}
