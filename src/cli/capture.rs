//! Evidence `todo update` captures: artifacts' SHA-256, and git's HEAD and changed files.

use std::path::Path;
use std::sync::mpsc;
use std::time::Duration;

use super::Ctx;
use crate::kernel::bounds;
use crate::kernel::{Dur, Error, Evidence, EvidenceKind, Result, Todo, Ts};

/// `--artifact PATH`: its SHA-256, as evidence.
pub fn artifact(ctx: &Ctx, now: Ts, agent: &str, path: &str) -> Result<Evidence> {
    bounds::usage(bounds::text("--artifact", path, bounds::PATH_MAX))?;
    let p = Path::new(path);
    let full = if p.is_absolute() {
        p.to_path_buf()
    } else {
        ctx.cwd.join(p)
    };
    let sha256 = hash_file(&full).map_err(|e| {
        Error::usage(format!("--artifact {path}: {e}"))
            .hint("give the path of a regular file that exists")
    })?;
    let mut e = Evidence::new(
        now,
        agent,
        None,
        EvidenceKind::Artifact,
        format!("artifact {path}"),
    );
    e.path = Some(path.to_string());
    e.sha256 = Some(sha256);
    Ok(e)
}

/// The SHA-256 of a regular file, read in pieces (a FIFO or device is refused, never read).
fn hash_file(path: &Path) -> std::io::Result<String> {
    use sha2::{Digest, Sha256};
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)?;
    if !f.metadata()?.is_file() {
        return Err(std::io::Error::other("not a regular file"));
    }
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match f.read(&mut buf)? {
            0 => break,
            n => h.update(&buf[..n]),
        }
    }
    Ok(h.finalize().iter().map(|b| format!("{b:02x}")).collect())
}

/// Git HEAD and changed files outside `.loopx/`, when the project is in a work tree.
#[derive(Debug, Clone)]
pub struct Git {
    head: Option<String>,
    files: Vec<String>,
}

/// What the project's git gave: its facts, no work tree, or why it could not be read.
pub type GitFacts = std::result::Result<Option<Git>, String>;

/// How long reading git may take: a FIFO planted as `.gitignore` or `core.excludesFile` would
/// block the read for ever.
const GIT_TIMEOUT: Duration = Duration::from_secs(10);

/// The project's git facts, read in this process with libgit2: git itself would run programs
/// the repository names (`core.fsmonitor`, filter drivers, hooks), as whoever runs loopx, the
/// owner included. libgit2 runs none (docs/security.md). `Ok(None)` outside a work tree.
pub fn git_facts(root: &Path) -> GitFacts {
    let (tx, rx) = mpsc::sync_channel(1);
    let root = root.to_path_buf();
    // A read blocked on a FIFO stays blocked: the thread is left behind, and ends with the process.
    let spawned = std::thread::Builder::new()
        .name("git-facts".into())
        .spawn(move || {
            let _ = tx.send(read_git(&root));
        });
    if let Err(e) = spawned {
        return Err(format!("cannot read git: {e}"));
    }
    match rx.recv_timeout(GIT_TIMEOUT) {
        Ok(facts) => facts,
        Err(_) => Err(format!(
            "git took longer than {} s to read (a FIFO or a huge tree?)",
            GIT_TIMEOUT.as_secs()
        )),
    }
}

fn read_git(root: &Path) -> GitFacts {
    let repo = match git2::Repository::discover(root) {
        Ok(r) => r,
        Err(e) if e.code() == git2::ErrorCode::NotFound => return Ok(None),
        Err(e) => return Err(format!("cannot open the repository: {}", e.message())),
    };
    if repo.is_bare() {
        return Ok(None);
    }
    let head = repo
        .head()
        .ok()
        .and_then(|h| h.target())
        .map(|o| o.to_string());
    let mut opts = git2::StatusOptions::new();
    opts.include_untracked(true)
        .recurse_untracked_dirs(true)
        .renames_head_to_index(true);
    let statuses = repo
        .statuses(Some(&mut opts))
        .map_err(|e| format!("cannot read the work tree's status: {}", e.message()))?;
    let files = statuses
        .iter()
        .filter_map(|s| changed_path(&s))
        .filter(|f| !f.starts_with(".loopx/") && f != ".loopx")
        .collect();
    Ok(Some(Git { head, files }))
}

/// The path a status entry names now: the new name of a rename.
fn changed_path(s: &git2::StatusEntry<'_>) -> Option<String> {
    let delta = s.index_to_workdir().or_else(|| s.head_to_index());
    let path = delta
        .and_then(|d| d.new_file().path().or_else(|| d.old_file().path()))
        .map(|p| p.to_string_lossy().into_owned());
    path.or_else(|| s.path().ok().map(str::to_string))
}

/// The evidence `todo update` captures when none is given.
pub fn auto_evidence(now: Ts, agent: &str, t: &Todo, git: GitFacts) -> Evidence {
    let since = t.lease.as_ref().map(|l| now.since(l.acquired_at));
    let mut parts = Vec::new();
    let mut e = Evidence::new(now, agent, None, EvidenceKind::Auto, String::new());
    match &git {
        Ok(Some(g)) => {
            match &g.head {
                Some(h) => parts.push(format!("HEAD {}", &h[..h.len().min(12)])),
                None => parts.push("no commits yet".into()),
            }
            parts.push(format!(
                "{} changed file{}",
                g.files.len(),
                if g.files.len() == 1 { "" } else { "s" }
            ));
        }
        Ok(None) => parts.push("not a git work tree".into()),
        Err(why) => parts.push(format!("no git facts: {why}")),
    }
    if let Some(s) = since {
        parts.push(format!("{} since the claim", Dur(s.0 / 1000 * 1000)));
        e.since_claim_s = Some(s.0 / 1000);
    }
    if let Ok(Some(g)) = git {
        e.commit = g.head;
        e.files = g.files.into_iter().take(50).collect();
    }
    e.summary = parts.join(", ");
    e
}
