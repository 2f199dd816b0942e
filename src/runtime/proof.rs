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
/// duration, output tail, the HEAD it ran at and the uncommitted files of the tree it read
/// (`files`; a note when HEAD moved meanwhile).
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
    // The tree the check reads: HEAD, and the changes no commit holds (outside `.loopx/`).
    let facts = git::facts(root);
    let (before, dirty) = match &facts {
        Ok(Some(g)) => (g.head.clone(), g.files.clone()),
        _ => (None, Vec::new()),
    };
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
    let at = where_text(&facts);
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
    e.files = dirty.into_iter().take(DIRTY_KEPT).collect();
    e.timed_out = fin.timed_out;
    Ok(e)
}

/// The most uncommitted files a check's evidence names (as auto evidence).
const DIRTY_KEPT: usize = 50;

/// Where a check ran, for its summary: `HEAD abc123`, and the uncommitted files when the tree
/// was dirty (`HEAD abc123 on a dirty tree (2 uncommitted files: a.sh, b.txt)`).
fn where_text(facts: &git::GitFacts) -> String {
    let g = match facts {
        Ok(Some(g)) => g,
        Ok(None) => return "no commit (not a git work tree)".into(),
        Err(why) => return format!("no commit (no git facts: {why})"),
    };
    let mut at = match &g.head {
        Some(h) => format!("HEAD {}", &h[..h.len().min(12)]),
        None => "no commit".into(),
    };
    // A path may be long: the summary names the first two, each cut on a character.
    let name = |i: usize| -> String { g.files[i].chars().take(200).collect() };
    if !g.files.is_empty() {
        let (n, first) = (g.files.len(), name(0));
        let more = match n {
            1 => String::new(),
            2 => format!(", {}", name(1)),
            _ => format!(", {} and {} more", name(1), n - 2),
        };
        let s = if n == 1 { "" } else { "s" };
        at.push_str(&format!(
            " on a dirty tree ({n} uncommitted file{s}: {first}{more})"
        ));
    }
    at
}
