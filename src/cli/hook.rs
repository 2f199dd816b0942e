//! `hook`: the owner sets, removes and lists the commands run for events (alerts); the hidden
//! `hook run` supervisor runs one.

use clap::Subcommand;
use serde_json::json;

use super::ctx::env_text;
use super::{Ctx, Out};
use crate::text::sh_word;
use std::io::Write as _;

use crate::kernel::{Result, alert, ops};
use crate::runtime::hook_serve;
use crate::runtime::hooks::{self, Ran};
use crate::store::{Store, StoreExt};
use crate::text::escape as esc;

/// `hook ...`.
#[derive(Debug, Subcommand)]
pub enum HookCmd {
    /// Owner: run a command (through `sh -c`, in the project root, the event's JSON on stdin)
    /// when an event happens. Events: gate.opened, gate.decided, lease.expired, lease.reclaimed,
    /// monitor.overdue, monitor.changed, goal.paused, goal.completed, budget.spent.
    #[command(
        after_help = "Example:\n  loopx hook set gate.opened -- notify-send loopx \"a gate waits\""
    )]
    Set {
        /// The event.
        event: String,
        /// The command, after `--`: one word is shell text (`-- 'cat > /tmp/gate.json'`);
        /// several are the command's words, quoted for the shell (`-- notify-send "a gate"`).
        #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
        command: Vec<String>,
    },
    /// Owner: remove an event's hook.
    #[command(after_help = "Example:\n  loopx hook remove gate.opened")]
    Remove {
        /// The event.
        event: String,
    },
    /// Every hook, and whether the owner's seal holds it (a hook runs only then).
    #[command(after_help = "Example:\n  loopx hook list")]
    List,
    /// Run an event's hook now (loopx starts this itself after a commit).
    #[command(hide = true)]
    Run {
        /// The event.
        event: String,
    },
    /// Owner, on a database: fire the hooks for every change committed to it, until stopped.
    ///
    /// On files, hooks fire from the command that commits; on a database, agents commit from
    /// many machines, so run this on one machine (the owner's). It follows the journal from its
    /// head when it starts (or from `--from`), runs each hook in this directory (or `--dir`),
    /// reconnects and catches up when the server restarts, and stops on Ctrl-C or SIGTERM.
    #[command(after_help = "Example:\n  loopx --store postgres://alice@db.internal/wx hook serve")]
    Serve {
        /// Fire for the events from journal line SEQ on (default: only those committed after
        /// it starts).
        #[arg(long, value_name = "SEQ", value_parser = clap::value_parser!(u64).range(1..))]
        from: Option<u64>,
    },
}

/// The text run with `sh -c`: one word as it is (shell text), several as words quoted for the
/// shell, so `-- notify-send loopx "a gate waits"` runs exactly those three words.
pub fn shell_text(words: &[String]) -> String {
    if let [one] = words {
        return one.clone();
    }
    words
        .iter()
        .map(|w| sh_word(w))
        .collect::<Vec<_>>()
        .join(" ")
}

fn hook_json(snap: &crate::kernel::Snapshot) -> Vec<serde_json::Value> {
    snap.config
        .hooks
        .iter()
        .map(|(e, c)| {
            json!({"event": e, "command": c, "sealed": alert::sealed_hook(snap, e).is_some(),
                   "known": alert::is_event(e)})
        })
        .collect()
}

/// Runs `hook ...`.
pub fn run(ctx: &Ctx, c: HookCmd) -> Result<Out> {
    if let HookCmd::Serve { from } = c {
        return serve(ctx, from);
    }
    let store = ctx.open()?;
    let store = store.as_ref();
    match c {
        HookCmd::Set { event, command } => set(ctx, store, &event, &command),
        HookCmd::Remove { event } => {
            let (_, notes) =
                store.mutate_noted(|snap| ops::hook_remove(snap, ops::OWNER, ctx.now, &event))?;
            Ok(Out::new(
                "removed",
                json!(event),
                format!("removed the hook for {}", esc(&event)),
            )
            .noted(notes))
        }
        HookCmd::List => list(store),
        HookCmd::Run { event } => run_one(ctx, store, &event),
        HookCmd::Serve { from } => serve(ctx, from),
    }
}

/// `hook serve`: on a database only (on files, the command that commits fires the hooks).
fn serve(ctx: &Ctx, from: Option<u64>) -> Result<Out> {
    let opened = ctx.open()?;
    let store = opened.followed_journal()?;
    let dir = ctx.work_dir(store);
    let mut err = std::io::stderr();
    let mut say = |line: &str| {
        let _ = writeln!(err, "loopx: {}", esc(line));
    };
    let s = hook_serve::serve(store, &dir, from, &mut say)?;
    let text = format!(
        "stopped: {} hook(s) fired, {} could not start; the next line was {}",
        s.fired, s.not_started, s.next
    );
    Ok(Out::new("served", json!(s), text))
}

/// `hook set EVENT -- COMMAND...`.
fn set(ctx: &Ctx, store: &dyn Store, event: &str, command: &[String]) -> Result<Out> {
    let text = shell_text(command);
    let (cfg, notes) =
        store.mutate_noted(|snap| ops::hook_set(snap, ops::OWNER, ctx.now, event, &text))?;
    let sha = alert::hook_hash(&text);
    Ok(Out::new(
        "hook",
        json!({"event": event, "command": text, "sha256": sha, "sealed": true}),
        format!("hook for {}: {} (sealed)", esc(event), esc(&text)),
    )
    .with("hooks", json!(cfg.hooks.len()))
    .noted(notes))
}

/// `hook list`.
fn list(store: &dyn Store) -> Result<Out> {
    let snap = store.load()?;
    let list = hook_json(&snap);
    let mut text = String::new();
    for (e, c) in &snap.config.hooks {
        let state = if alert::sealed_hook(&snap, e).is_some() {
            "sealed"
        } else {
            "NOT SEALED: never runs"
        };
        text.push_str(&format!("{} ({state}): {}\n", esc(e), esc(c)));
    }
    if list.is_empty() {
        text.push_str("no hooks; set one with `loopx hook set EVENT -- COMMAND`\n");
    }
    text.push_str(&format!("events: {}", alert::names()));
    let events: Vec<&str> = alert::EVENTS.iter().map(|(n, _)| *n).collect();
    Ok(Out::new("hooks", json!(list), text)
        .with("events", json!(events))
        .noted(snap.owner_notes.clone()))
}

/// The hidden `hook run EVENT`: the supervisor, in the work directory.
fn run_one(ctx: &Ctx, store: &dyn Store, event: &str) -> Result<Out> {
    let timeout = hooks::timeout_from(env_text(hooks::TIMEOUT_VAR)?.as_deref())?;
    let payload = hooks::read_payload(std::io::stdin().lock());
    let dir = ctx.work_dir(store);
    let ran = hooks::supervise(store, &dir, event, &payload, timeout, ctx.now)?;
    let (word, exit) = match &ran {
        Ran::Ok => ("ran", 0),
        Ran::NotSealed => ("not_sealed", 3),
        Ran::NotInJournal => ("not_in_journal", 3),
        Ran::Failed(_) => ("failed", 1),
    };
    let mut out = Out::new("hook", json!(word), format!("{}: {word}", esc(event)));
    if let Ran::Failed(f) = &ran {
        out = out.with(
            "failure",
            json!({"exit": f.exit, "timed_out": f.timed_out, "error": f.error}),
        );
    }
    out.exit = exit;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::shell_text;

    #[test]
    fn one_word_is_shell_text_and_several_are_quoted_words() {
        let w = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(shell_text(&w(&["cat > f.json"])), "cat > f.json");
        assert_eq!(
            shell_text(&w(&["notify-send", "loopx", "a gate's here", ""])),
            "notify-send loopx 'a gate'\\''s here' ''"
        );
        assert_eq!(shell_text(&w(&["echo", "$HOME", ">"])), "echo '$HOME' '>'");
    }
}
