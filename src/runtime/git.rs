//! The project's git facts (HEAD, changed files), read in this process with libgit2 and bounded
//! in time: git itself would run programs the repository names, as whoever runs loopx.

use std::path::Path;
use std::sync::mpsc;
use std::time::Duration;

/// Git HEAD and changed files outside `.loopx/`, when the project is in a work tree.
#[derive(Debug, Clone)]
pub struct Git {
    /// The commit HEAD names; `None` before the first commit.
    pub head: Option<String>,
    /// Changed and untracked files, outside `.loopx/`.
    pub files: Vec<String>,
}

/// What the project's git gave: its facts, no work tree, or why it could not be read.
pub type GitFacts = std::result::Result<Option<Git>, String>;

/// How long reading git may take: a FIFO planted as `.gitignore` or `core.excludesFile` would
/// block the read for ever.
const GIT_TIMEOUT: Duration = Duration::from_secs(10);

/// The project's git facts, read in this process with libgit2: git itself would run programs
/// the repository names (`core.fsmonitor`, filter drivers, hooks), as whoever runs loopx, the
/// owner included. libgit2 runs none (docs/security.md). `Ok(None)` outside a work tree.
pub fn facts(root: &Path) -> GitFacts {
    bounded(root, read_git)
}

/// HEAD alone (no walk of the work tree); `Ok(None)` outside a work tree or before a commit.
pub fn head(root: &Path) -> Result<Option<String>, String> {
    bounded(root, read_head).map(Option::flatten)
}

/// HEAD and a fingerprint of the changed files (names, sizes, change times), for the breaker:
/// `None` outside a work tree or when git cannot be read in time.
pub fn base(root: &Path) -> Option<crate::kernel::Base> {
    bounded(root, read_base).ok().flatten()
}

/// The breaker's base for todo `id`'s worktree as a `--worktree` claim finds it: the worktree's
/// own when it is there, else the fresh checkout it is about to be (its branch's commit, or
/// HEAD's for a new branch, with nothing changed). `None` as [`base`].
pub fn worktree_base(root: &Path, id: &str) -> Option<crate::kernel::Base> {
    let wt = root.join(crate::runtime::worktree::rel(id));
    if std::fs::symlink_metadata(&wt).is_ok_and(|m| m.is_dir()) {
        return base(&wt);
    }
    let branch = crate::runtime::worktree::branch(id);
    bounded(root, move |r| read_fresh(r, &branch))
        .ok()
        .flatten()
}

/// Runs `read` on a thread of its own, at most [`GIT_TIMEOUT`].
fn bounded<T: Send + 'static>(
    root: &Path,
    read: impl FnOnce(&Path) -> Result<T, String> + Send + 'static,
) -> Result<T, String> {
    let (tx, rx) = mpsc::sync_channel(1);
    let root = root.to_path_buf();
    // A read blocked on a FIFO stays blocked: the thread is left behind, and ends with the process.
    let spawned = std::thread::Builder::new()
        .name("git-facts".into())
        .spawn(move || {
            let _ = tx.send(read(&root));
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

/// The work tree's repository; `Ok(None)` outside one.
fn open(root: &Path) -> Result<Option<git2::Repository>, String> {
    match git2::Repository::discover(root) {
        Ok(r) if r.is_bare() => Ok(None),
        Ok(r) => Ok(Some(r)),
        Err(e) if e.code() == git2::ErrorCode::NotFound => Ok(None),
        Err(e) => Err(format!("cannot open the repository: {}", e.message())),
    }
}

fn head_of(repo: &git2::Repository) -> Option<String> {
    repo.head()
        .ok()
        .and_then(|h| h.target())
        .map(|o| o.to_string())
}

fn read_head(root: &Path) -> Result<Option<Option<String>>, String> {
    Ok(open(root)?.map(|r| head_of(&r)))
}

fn read_git(root: &Path) -> GitFacts {
    let Some(repo) = open(root)? else {
        return Ok(None);
    };
    let head = head_of(&repo);
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

/// The most changed files the fingerprint covers.
const BASE_FILES_MAX: usize = 100_000;

fn read_base(root: &Path) -> Result<Option<crate::kernel::Base>, String> {
    use sha2::{Digest, Sha256};
    use std::os::unix::fs::MetadataExt;
    let Some(repo) = open(root)? else {
        return Ok(None);
    };
    let head = head_of(&repo);
    let Some(work) = repo.workdir().map(Path::to_path_buf) else {
        return Ok(None);
    };
    let mut opts = git2::StatusOptions::new();
    opts.include_untracked(true).recurse_untracked_dirs(true);
    let statuses = repo
        .statuses(Some(&mut opts))
        .map_err(|e| format!("cannot read the work tree's status: {}", e.message()))?;
    let mut h = Sha256::new();
    for s in statuses.iter().take(BASE_FILES_MAX) {
        let Some(path) = changed_path(&s).filter(|f| !f.starts_with(".loopx")) else {
            continue;
        };
        // Never followed: a link's own size and time.
        let meta = std::fs::symlink_metadata(work.join(&path))
            .map(|m| format!("{} {} {}", m.len(), m.mtime(), m.mtime_nsec()))
            .unwrap_or_else(|_| "gone".into());
        h.update(format!("{path}\0{}\0{meta}\n", s.status().bits()).as_bytes());
    }
    Ok(Some(base_of(head, h)))
}

/// The base of HEAD `head` and the changed files hashed into `h`.
fn base_of(head: Option<String>, h: sha2::Sha256) -> crate::kernel::Base {
    use sha2::Digest;
    let tree = h.finalize().iter().map(|b| format!("{b:02x}")).collect();
    crate::kernel::Base {
        head,
        tree: Some(tree),
        at: None,
        extra: Default::default(),
    }
}

/// The base of a fresh checkout of `branch` (HEAD when it does not exist yet): nothing changed.
fn read_fresh(root: &Path, branch: &str) -> Result<Option<crate::kernel::Base>, String> {
    let Some(repo) = open(root)? else {
        return Ok(None);
    };
    let head = match repo.find_branch(branch, git2::BranchType::Local) {
        Ok(b) => b.get().target().map(|o| o.to_string()),
        Err(_) => head_of(&repo),
    };
    Ok(Some(base_of(head, sha2::Sha256::default())))
}

/// The path a status entry names now: the new name of a rename.
fn changed_path(s: &git2::StatusEntry<'_>) -> Option<String> {
    let delta = s.index_to_workdir().or_else(|| s.head_to_index());
    let path = delta
        .and_then(|d| d.new_file().path().or_else(|| d.old_file().path()))
        .map(|p| p.to_string_lossy().into_owned());
    path.or_else(|| s.path().ok().map(str::to_string))
}
