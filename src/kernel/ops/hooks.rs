//! Hook mutations: the owner sets or removes a hook's command, and loopx records a hook that failed.

use serde_json::json;

use super::{Change, Write};
use crate::kernel::action::Action;
use crate::kernel::alert;
use crate::kernel::error::{Code, Error, Result};
use crate::kernel::limits;
use crate::kernel::limits::cut;
use crate::kernel::model::{Config, Snapshot};
use crate::kernel::time::Ts;

/// The actor of the lines loopx writes itself, such as `hook.fail` (a reserved name).
pub const LOOPX: &str = "loopx";

/// The most characters of a failed hook's output tail kept in its `hook.fail` line.
pub const FAIL_TAIL_MAX: usize = 2_000;

/// Owner: sets the command run for `event` (through `sh -c`); the seal then holds its hash.
pub fn hook_set(
    snap: &Snapshot,
    owner: &str,
    now: Ts,
    event: &str,
    command: &str,
) -> Result<(Change, Config)> {
    if !alert::is_event(event) {
        return Err(Error::usage(format!("`{event}` is not an event"))
            .hint(format!("use one of: {}", alert::names())));
    }
    let mut cfg = snap.config.clone();
    cfg.hooks.insert(event.to_string(), command.to_string());
    limits::usage(limits::check_config(&cfg))?;
    let mut c = Change::by_owner();
    c.event(
        now,
        owner,
        Action::HookSet,
        event,
        json!({"command": command, "sha256": alert::hook_hash(command)}),
    );
    c.writes.push(Write::Config(cfg.clone()));
    Ok((c, cfg))
}

/// Owner: removes the hook of `event`.
pub fn hook_remove(snap: &Snapshot, owner: &str, now: Ts, event: &str) -> Result<(Change, Config)> {
    let mut cfg = snap.config.clone();
    if cfg.hooks.remove(event).is_none() {
        return Err(Error::new(Code::NotFound, format!("no hook for `{event}`"))
            .hint("list hooks with `loopx hook list`"));
    }
    let mut c = Change::by_owner();
    c.event(now, owner, Action::HookRemove, event, json!({}));
    c.writes.push(Write::Config(cfg.clone()));
    Ok((c, cfg))
}

/// How a hook failed.
#[derive(Debug, Clone, PartialEq)]
pub struct HookFailure {
    /// The event whose hook failed.
    pub event: String,
    /// The `seq` of the journal line that fired it.
    pub seq: Option<u64>,
    /// Its exit code (128 + the signal when a signal ended it), if it ran.
    pub exit: Option<i32>,
    /// True when the timeout stopped it.
    pub timed_out: bool,
    /// Why it could not start, if it could not.
    pub error: Option<String>,
    /// The last lines of its output.
    pub tail: String,
}

/// loopx records a failed hook (actor `loopx`, never an agent's). A `hook.fail` line fires no hook.
pub fn hook_fail(now: Ts, f: &HookFailure) -> Change {
    let mut c = Change::default();
    c.event(
        now,
        LOOPX,
        Action::HookFail,
        &f.event,
        json!({"seq": f.seq, "exit": f.exit, "timed_out": f.timed_out,
               "error": f.error.as_deref().map(|e| cut(e, FAIL_TAIL_MAX)),
               "tail": last_chars(&f.tail, FAIL_TAIL_MAX)}),
    );
    c
}

/// The last `n` characters of a text.
fn last_chars(s: &str, n: usize) -> String {
    let len = s.chars().count();
    s.chars().skip(len.saturating_sub(n)).collect()
}
