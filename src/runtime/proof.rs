//! Runs the check that proves a todo done: `sh -c` in the work tree, bounded in time and
//! output, whatever it leaves behind killed; what it gave becomes `check` evidence.

use std::ffi::OsString;
use std::path::Path;
use std::time::Duration;

use crate::kernel::proof::Needed;
use crate::kernel::{Evidence, EvidenceKind, Result, Todo, Ts};
use crate::runtime::git;
use crate::runtime::process::{self, Echo, Limits, Spec};

/// The longest a check may run when the caller gives no timeout.
pub const TIMEOUT_DEFAULT: Duration = Duration::from_secs(600);

/// Runs `n` for `t` in `root` and returns its evidence: the command's hash, exit code,
/// duration, output tail and the HEAD it ran at (and a note when HEAD moved meanwhile).
pub fn run(
    root: &Path,
    t: &Todo,
    n: &Needed,
    agent: &str,
    now: Ts,
    timeout: Duration,
) -> Result<Evidence> {
    // A todo worked in a worktree of its own is proven there, at that worktree's HEAD.
    let work = crate::runtime::worktree::work_of(root, t);
    let root = work.as_path();
    let before = git::head(root).ok().flatten();
    let spec = Spec {
        argv: vec!["sh".into(), "-c".into(), n.command.clone().into()],
        env: vec![
            (OsString::from("LOOPX_TODO_ID"), OsString::from(&t.id)),
            (OsString::from("LOOPX_AGENT"), OsString::from(agent)),
        ],
        cwd: Some(root.to_path_buf()),
        stdin: None,
        echo: Echo::None,
        forward: true,
        end_group: true,
    };
    let limits = Limits {
        timeout,
        grace: Duration::from_secs(2),
        tail_lines: 20,
        tail_bytes: 2_000,
        keep_bytes: 0,
    };
    let fin = process::run(&spec, &limits)?;
    let after = git::head(root).ok().flatten();
    let passed = fin.exit.success() && !fin.timed_out;
    let at = match &before {
        Some(h) => format!("HEAD {}", &h[..h.len().min(12)]),
        None => "no commit".into(),
    };
    let ms = fin.duration.as_millis().min(u64::MAX as u128) as u64;
    let mut summary = match (passed, fin.timed_out) {
        (true, _) => format!("check passed at {at} ({ms} ms)"),
        (false, true) => format!("check timed out at {at} after {} s", timeout.as_secs()),
        (false, false) => format!("check failed at {at}: exit {}", fin.exit.code()),
    };
    if before != after {
        let to = after.as_deref().map_or("none", |h| &h[..h.len().min(12)]);
        summary.push_str(&format!("; HEAD moved to {to} while it ran"));
    }
    let mut e = Evidence::new(now, agent, None, EvidenceKind::Check, summary);
    e.command = Some(n.command.clone());
    e.sha256 = Some(n.sha256.clone());
    e.exit_code = Some(fin.exit.code());
    e.duration_ms = Some(ms);
    e.output = Some(fin.tail).filter(|s| !s.is_empty());
    e.commit = before;
    e.timed_out = fin.timed_out;
    Ok(e)
}
