//! Per-lease git worktrees (`--worktree`): one at `.loopx/worktrees/<todo>` on branch
//! `loopx/<todo>`, made with libgit2 (git itself would run the repository's hooks and filters,
//! see `runtime::git`); its removal is `worktree_retire`'s.

use std::fs;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

use crate::kernel::{Code, Error, Result, Todo};

/// Where the worktrees are, relative to the project's root.
pub use crate::kernel::ops::WORKTREES as DIR;
/// The prefix of a worktree's branch.
pub const BRANCH_PREFIX: &str = "loopx/";
/// How long making or removing a worktree may take (a FIFO or a huge checkout would block it).
pub(super) const GIT_TIMEOUT: Duration = Duration::from_secs(120);
/// How long a read may take (one runs inside the claim's transaction).
pub(super) const READ_TIMEOUT: Duration = Duration::from_secs(10);
/// The most entries of `.loopx/worktrees/` (and of libgit2's worktrees) doctor reads.
const SCAN_MAX: usize = 10_000;

/// The worktree of todo `id`, relative to the project's root.
pub use crate::kernel::ops::worktree_path as rel;

/// Where the work of `t` is: its lease's worktree when the lease names one and it is a real
/// directory (the path comes from the id, never from the file), else `root`.
pub fn work_of(root: &Path, t: &Todo) -> PathBuf {
    let named = t.lease.as_ref().is_some_and(|l| l.worktree.is_some());
    let p = root.join(rel(&t.id));
    match std::fs::symlink_metadata(&p) {
        Ok(m) if named && m.is_dir() => p,
        _ => root.to_path_buf(),
    }
}

/// The branch of todo `id`'s worktree.
pub fn branch(id: &str) -> String {
    format!("{BRANCH_PREFIX}{id}")
}

/// Refuses a `--worktree` claim before anything is claimed: outside a git work tree, before
/// the first commit, or where `.loopx/` or `.loopx/worktrees` is not a real directory.
pub fn preflight(root: &Path) -> Result<()> {
    let r = root.to_path_buf();
    bounded(READ_TIMEOUT, move || open(&r).map(drop))?;
    check_parent(root)
}

/// Refuses `id`'s worktree path when it is a symlink, not a directory, or a directory that is
/// not a worktree on `id`'s branch (missing is fine: it will be made).
pub fn check_target(root: &Path, id: &str) -> Result<()> {
    let target = root.join(rel(id));
    if not_link_or_file(&target, &rel(id))? {
        let id = id.to_string();
        bounded(READ_TIMEOUT, move || reuse(&target, &id))?;
    }
    Ok(())
}

/// Makes todo `id`'s worktree, or reuses the one there (on its branch); its absolute path.
/// A missing branch is made at HEAD; an existing one is checked out as it is.
pub fn ensure(root: &Path, id: &str) -> Result<PathBuf> {
    if !plain(id) {
        return Err(Error::usage(format!("{id} cannot name a worktree")));
    }
    check_parent(root)?;
    make_parent(root)?;
    let target = root.join(rel(id));
    let exists = not_link_or_file(&target, &rel(id))?;
    let (r, id2, t2) = (root.to_path_buf(), id.to_string(), target.clone());
    bounded(GIT_TIMEOUT, move || {
        let repo = open(&r)?;
        if exists {
            reuse(&t2, &id2)
        } else {
            add(&repo, &t2, &id2)
        }
    })?;
    Ok(target.canonicalize().unwrap_or(target))
}

/// One orphaned worktree: its path (relative to the root) and what to do.
#[derive(Debug, Clone, PartialEq)]
pub struct Orphan {
    /// The path, relative to the project's root (or as git knows it).
    pub path: String,
    /// What it is and the fix.
    pub message: String,
}

/// Worktrees no live lease names: directories in `.loopx/worktrees/` and libgit2's worktrees
/// on a `loopx/*` branch (none outside a git work tree); `live` is what the live leases' `worktree` say.
pub fn orphans(root: &Path, live: &[String]) -> Vec<Orphan> {
    let mut out = Vec::new();
    let fix = |p: &str| {
        format!(
            "claim its todo again with --worktree, or look at what is in it and remove it \
             yourself: `git worktree remove {p}` (which deletes its ignored files too)"
        )
    };
    if let Ok(rd) = fs::read_dir(root.join(DIR)) {
        for e in rd.flatten().take(SCAN_MAX) {
            let name = e.file_name().to_string_lossy().into_owned();
            let path = format!("{DIR}/{name}");
            if name == ".gitignore" || live.contains(&path) {
                continue;
            }
            let message = match name
                .strip_prefix('.')
                .and_then(|n| n.strip_suffix(".removing"))
            {
                Some(id) => format!(
                    "worktree {path} was moved aside to be removed and is still there (loopx \
                     stopped midway); put it back with `mv {path} {}`",
                    rel(id)
                ),
                None => format!(
                    "worktree {path} has no live lease naming it; {}",
                    fix(&path)
                ),
            };
            out.push(Orphan { message, path });
        }
    }
    let r = root.to_path_buf();
    let known = bounded(READ_TIMEOUT, move || known_worktrees(&r)).unwrap_or_default();
    let base = root.canonicalize().unwrap_or_else(|_| root.to_path_buf());
    for (path, br) in known {
        let shown = path
            .strip_prefix(&base)
            .map(|p| p.to_string_lossy().into_owned())
            .unwrap_or_else(|_| path.to_string_lossy().into_owned());
        let id = br.strip_prefix(BRANCH_PREFIX).unwrap_or(&br);
        if live.contains(&rel(id)) || out.iter().any(|o| o.path == shown) {
            continue;
        }
        out.push(Orphan {
            message: format!(
                "git worktree {shown} on branch {br} has no live lease naming it; {}",
                fix(&shown)
            ),
            path: shown,
        });
    }
    out
}

/// A todo id that is one plain path segment (ids are checked on load; this guards the paths).
pub(super) fn plain(id: &str) -> bool {
    !id.is_empty()
        && !id.starts_with('.')
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// Runs `f` on a thread of its own, at most `limit`.
pub(super) fn bounded<T: Send + 'static>(
    limit: Duration,
    f: impl FnOnce() -> Result<T> + Send + 'static,
) -> Result<T> {
    let (tx, rx) = mpsc::sync_channel(1);
    // A step blocked on a FIFO stays blocked: the thread is left behind, and ends with the process.
    std::thread::Builder::new()
        .name("git-worktree".into())
        .spawn(move || {
            let _ = tx.send(f());
        })
        .map_err(|e| Error::new(Code::Io, format!("cannot start the git work: {e}")))?;
    rx.recv_timeout(limit).unwrap_or_else(|_| {
        Err(Error::new(
            Code::Io,
            format!(
                "git took longer than {} s (a FIFO or a huge tree?)",
                limit.as_secs()
            ),
        ))
    })
}

pub(super) fn git_err(what: &str, e: &git2::Error) -> Error {
    Error::new(Code::Io, format!("cannot {what}: {}", e.message()))
}

/// The work tree's repository, with a first commit; refused (usage) otherwise.
pub(super) fn open(root: &Path) -> Result<git2::Repository> {
    let outside = || {
        Error::usage(format!(
            "--worktree needs a git work tree; {} is not in one",
            root.display()
        ))
        .hint("run `git init` and make a first commit, or claim without --worktree")
    };
    let repo = match git2::Repository::discover(root) {
        Ok(r) if r.is_bare() => return Err(outside()),
        Ok(r) => r,
        Err(e) if e.code() == git2::ErrorCode::NotFound => return Err(outside()),
        Err(e) => return Err(git_err("open the repository", &e)),
    };
    if repo.head().ok().and_then(|h| h.target()).is_none() {
        return Err(
            Error::usage("--worktree needs a first commit: HEAD names none yet")
                .hint("commit once, or claim without --worktree"),
        );
    }
    Ok(repo)
}

/// `.loopx/` and `.loopx/worktrees` must be real directories when they exist.
fn check_parent(root: &Path) -> Result<()> {
    not_link_or_file(&root.join(".loopx"), ".loopx")?;
    not_link_or_file(&root.join(DIR), DIR).map(drop)
}

/// True when `path` is a directory, false when missing; refused when a link or anything else.
fn not_link_or_file(path: &Path, shown: &str) -> Result<bool> {
    match fs::symlink_metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(Error::io(path, &e)),
        Ok(m) if m.file_type().is_dir() => Ok(true),
        Ok(m) => {
            let what = if m.file_type().is_symlink() {
                "a symlink"
            } else {
                "not a directory"
            };
            Err(Error::invalid(
                shown,
                None,
                format!("is {what}; loopx makes worktrees only in a real directory"),
            )
            .hint(format!(
                "remove {shown} (loopx makes it again), or claim without --worktree"
            )))
        }
    }
}

/// Makes `.loopx/worktrees/` (never through a link) with a `.gitignore` of `*` in it.
fn make_parent(root: &Path) -> Result<()> {
    for (p, shown) in [(root.join(".loopx"), ".loopx"), (root.join(DIR), DIR)] {
        match fs::create_dir(&p) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                not_link_or_file(&p, shown)?;
            }
            Err(e) => return Err(Error::io(&p, &e)),
        }
    }
    let ignore = root.join(DIR).join(".gitignore");
    if fs::symlink_metadata(&ignore).is_ok() {
        return Ok(());
    }
    use std::os::unix::fs::OpenOptionsExt;
    let made = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&ignore)
        .and_then(|mut f| f.write_all(b"*\n"));
    match made {
        Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => Err(Error::io(&ignore, &e)),
        _ => Ok(()),
    }
}

/// Adds the worktree at `target` on its branch (made at HEAD when missing).
fn add(repo: &git2::Repository, target: &Path, id: &str) -> Result<()> {
    let name = branch(id);
    // A worktree git still knows whose directory is gone: forgotten first.
    if let Ok(w) = repo.find_worktree(id)
        && w.validate().is_err()
    {
        w.prune(None)
            .map_err(|e| git_err("prune a stale worktree", &e))?;
    }
    let br = match repo.find_branch(&name, git2::BranchType::Local) {
        Ok(b) => b,
        Err(_) => {
            let head = repo
                .head()
                .and_then(|h| h.peel_to_commit())
                .map_err(|e| git_err("read HEAD", &e))?;
            repo.branch(&name, &head, false)
                .map_err(|e| git_err(&format!("make branch {name}"), &e))?
        }
    };
    let reference = br.into_reference();
    let mut opts = git2::WorktreeAddOptions::new();
    opts.reference(Some(&reference));
    repo.worktree(id, target, Some(&opts))
        .map_err(|e| git_err(&format!("add the worktree {}", rel(id)), &e))?;
    Ok(())
}

/// Reuses the directory at `target`: it must be a worktree on the todo's branch.
fn reuse(target: &Path, id: &str) -> Result<()> {
    let want = branch(id);
    let at = git2::Repository::open(target)
        .ok()
        .filter(git2::Repository::is_worktree)
        .and_then(|r| head_branch(&r));
    if at.as_deref() == Some(want.as_str()) {
        return Ok(());
    }
    Err(Error::invalid(
        &rel(id),
        None,
        format!("exists and is not a worktree on branch {want}"),
    )
    .hint(format!(
        "move {} away (loopx makes it again), or claim without --worktree",
        rel(id)
    )))
}

/// The local branch HEAD is on, if any.
fn head_branch(r: &git2::Repository) -> Option<String> {
    let h = r.head().ok()?;
    if !h.is_branch() {
        return None;
    }
    h.shorthand().ok().map(str::to_string)
}

/// libgit2's worktrees on a `loopx/*` branch: their paths and branches.
fn known_worktrees(root: &Path) -> Result<Vec<(PathBuf, String)>> {
    let repo = open(root)?;
    let names = repo
        .worktrees()
        .map_err(|e| git_err("list worktrees", &e))?;
    let mut out = Vec::new();
    for name in names.iter().take(SCAN_MAX).flatten().flatten() {
        let Ok(w) = repo.find_worktree(name) else {
            continue;
        };
        let path = w.path().to_path_buf();
        let br = git2::Repository::open_from_worktree(&w)
            .ok()
            .and_then(|r| head_branch(&r));
        if let Some(br) = br.filter(|b| b.starts_with(BRANCH_PREFIX)) {
            out.push((path.canonicalize().unwrap_or(path), br));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_plain_id_names_a_worktree() {
        assert!(plain("t-4kq9zx"));
        for bad in ["", ".", "..", "../x", "a/b", ".hidden", "t x", "t\n"] {
            assert!(!plain(bad), "{bad:?}");
        }
        assert_eq!(rel("t-1"), ".loopx/worktrees/t-1");
        assert_eq!(branch("t-1"), "loopx/t-1");
    }

    #[test]
    fn a_path_that_is_a_file_or_link_is_refused_and_a_missing_one_is_not() {
        let d = std::env::temp_dir().join(format!("loopx-wt-unit-{}", std::process::id()));
        fs::create_dir_all(&d).unwrap();
        assert!(!not_link_or_file(&d.join("none"), "none").unwrap());
        assert!(not_link_or_file(&d, "d").unwrap());
        fs::write(d.join("f"), "x").unwrap();
        let e = not_link_or_file(&d.join("f"), "f").unwrap_err();
        assert_eq!(e.code, Code::InvalidState);
        std::os::unix::fs::symlink(&d, d.join("l")).unwrap();
        let e = not_link_or_file(&d.join("l"), "l").unwrap_err();
        assert!(e.message.contains("symlink"), "{}", e.message);
        fs::remove_dir_all(&d).unwrap();
    }
}
