//! The removal of a done todo's worktree (the branch always stays), only once a survey shows it
//! would lose nothing: every entry in it is committed on its branch (no untracked or ignored
//! file, no nested repository, no mount, no special file, nothing another process holds), and
//! no link is ever followed.
//!
//! The order: open `.loopx/worktrees/ID` with `O_NOFOLLOW` from the root down; read the
//! branch's commit (libgit2, bounded); walk it, hashing every file against the commit; move it
//! aside (`.loopx/worktrees/.ID.removing`, the same directory, so the same file system); check
//! no process holds it and nothing in it changed since the walk; remove what the walk saw,
//! entry by entry, each unchanged. On any doubt after the move it is put back.

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use super::worktree::{GIT_TIMEOUT, bounded, branch, git_err, open, plain, rel};
use super::worktree_fs::{Dir, Inodes, Stat, holder};
use super::worktree_scan::{Scan, TREE, Tree};
use crate::kernel::{Result, Todo, Ts};

/// What became of a worktree.
#[derive(Debug, PartialEq)]
pub enum Outcome {
    /// There was none.
    Missing,
    /// Removed: everything in it was committed on its branch.
    Removed,
    /// Kept, untouched (or put back as it was): why.
    Kept(String),
}

/// The name a worktree has while it is removed.
pub fn aside(id: &str) -> String {
    format!(".{id}.removing")
}

/// A worktree surveyed and found to lose nothing if removed: what was walked, as it was.
pub struct Survey {
    wts: Dir,
    top: Dir,
    tree: Tree,
    mnt: u64,
    seen: Vec<(PathBuf, Stat)>,
    /// Files changed since (the walk's start less 2 s, for coarse clocks) are hashed again.
    since: i128,
}

/// Removes the worktree surveyed earlier (before a done committed) when nothing in it, its
/// branch or its index changed since, else surveys it again.
pub fn retire_surveyed(root: &Path, pf: Survey, id: &str) -> Outcome {
    let same_branch = read_branch(root, &pf.top, id).is_ok_and(|t| t == pf.tree);
    if !same_branch || changed(&pf, id) {
        drop(pf);
        return remove(root, id);
    }
    finish(&pf, id)
}

/// A worktree's removal prepared before a done commits: its survey, or why it will be kept.
pub struct Prepared {
    id: String,
    survey: std::result::Result<Survey, Outcome>,
}

impl Prepared {
    /// The todo whose worktree it is.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Removes the worktree as [`retire_surveyed`] (a kept one stays kept).
    pub fn retire(self, root: &Path) -> Outcome {
        match self.survey {
            Ok(pf) => retire_surveyed(root, pf, &self.id),
            Err(o) => o,
        }
    }

    /// Why the worktree will be kept, if it will.
    pub fn kept(&self) -> Option<&str> {
        match &self.survey {
            Err(Outcome::Kept(why)) => Some(why),
            _ => None,
        }
    }
}

/// Surveys todo `id`'s worktree before its done commits, touching nothing.
pub fn prepare(root: &Path, id: &str) -> Option<Prepared> {
    plain(id).then(|| Prepared {
        id: id.to_string(),
        survey: survey(root, id),
    })
}

/// Removes todo `id`'s worktree when the survey finds it loses nothing, else keeps it and says why.
pub fn remove(root: &Path, id: &str) -> Outcome {
    match survey(root, id) {
        Ok(pf) => finish(&pf, id),
        Err(o) => o,
    }
}

/// After todo `id` is done or its lease reclaimed: removes its worktree only when a survey shows it
/// to lose nothing (see `worktree_retire`; the branch stays); else keeps it, and the warning
/// says why and how the user may remove it.
pub fn retire(root: &Path, id: &str) -> Option<String> {
    retire_with(root, id, None)
}

/// [`retire`], with the survey `prep` made before the done when it is `id`'s: a worktree that did
/// not change since is not hashed again, and one it kept is kept for the same reason.
pub fn retire_with(root: &Path, id: &str, prep: Option<Prepared>) -> Option<String> {
    if !plain(id) {
        return None;
    }
    let outcome = match prep.filter(|p| p.id() == id) {
        Some(p) => p.retire(root),
        None => remove(root, id),
    };
    let shown = rel(id);
    match outcome {
        Outcome::Missing => None,
        Outcome::Removed => prune(root, id).err().map(|e| {
            format!(
                "worktree {shown} removed, but git still lists it: {}; run `git worktree prune`",
                e.message
            )
        }),
        Outcome::Kept(why) => Some(format!(
            "worktree {shown} kept, nothing in it removed: {why}. Its commits stay on branch {}; \
             to remove it yourself (losing what is listed): `git worktree remove --force {shown}`",
            branch(id)
        )),
    }
}

/// Forgets a removed worktree in git (its directory is gone).
fn prune(root: &Path, id: &str) -> Result<()> {
    let (r, i) = (root.to_path_buf(), id.to_string());
    bounded(GIT_TIMEOUT, move || {
        let repo = open(&r)?;
        if let Ok(w) = repo.find_worktree(&i) {
            w.prune(None)
                .map_err(|e| git_err("prune the worktree", &e))?;
        }
        Ok(())
    })
}

/// The retirement due after a claim: the expired lease it replaced had a worktree the new
/// lease does not keep (a claim without `--worktree`).
pub fn retire_replaced(
    root: &Path,
    prior: Option<&crate::kernel::Lease>,
    t: &Todo,
    now: Ts,
) -> Option<String> {
    let prior = prior.filter(|p| !p.is_live(now) && p.worktree.is_some())?;
    let kept = t.lease.as_ref().is_some_and(|l| l.worktree.is_some());
    (prior.fence != t.fence && !kept)
        .then(|| retire(root, &t.id))
        .flatten()
}

/// Moves the surveyed worktree aside and removes it, or puts it back on any doubt.
fn finish(pf: &Survey, id: &str) -> Outcome {
    let (name, moved) = (OsString::from(id), OsString::from(aside(id)));
    let ours = |n: &OsStr| {
        let (a, b) = (pf.wts.stat(Some(n)), pf.top.stat(None));
        matches!((a, b), (Ok(a), Ok(b)) if (a.ino, a.mnt) == (b.ino, b.mnt))
    };
    if !ours(&name) {
        return Outcome::Kept("it was replaced while loopx checked it".into());
    }
    if let Err(e) = pf.wts.rename(&name, &moved) {
        return Outcome::Kept(format!("it could not be moved aside to be removed: {e}"));
    }
    let removed = match ours(&moved) {
        true => remove_seen(pf, &moved, id),
        false => Err("it was replaced while loopx moved it".into()),
    };
    match removed {
        Ok(()) => Outcome::Removed,
        Err(why) => match pf.wts.rename(&moved, &name) {
            Ok(()) => Outcome::Kept(why),
            Err(e) => Outcome::Kept(format!(
                "{why}; it is at .loopx/worktrees/{} and could not be put back ({e}): \
                 move it back with `mv .loopx/worktrees/{} .loopx/worktrees/{id}`",
                aside(id),
                aside(id)
            )),
        },
    }
}

/// The survey, walked in place (nothing moved): `Err` with what to answer when it fails.
pub fn survey(root: &Path, id: &str) -> Result<Survey, Outcome> {
    let since = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i128)
        - 2_000_000_000;
    let wts = match parent(root) {
        Ok(Some(d)) => d,
        Ok(None) => return Err(Outcome::Missing),
        Err(why) => return Err(Outcome::Kept(why)),
    };
    let top = match open_top(&wts, id) {
        Ok(Some(t)) => t,
        Ok(None) => return Err(Outcome::Missing),
        Err(why) => return Err(Outcome::Kept(why)),
    };
    let (tree, mnt) = (read_branch(root, &top, id), top.stat(None).map(|s| s.mnt));
    let (tree, mnt) = match (tree, mnt) {
        (Ok(t), Ok(m)) => (t, m),
        (Err(why), _) => return Err(Outcome::Kept(why)),
        (_, Err(e)) => return Err(Outcome::Kept(format!("it cannot be read: {e}"))),
    };
    let mut scan = Scan::new(&tree, mnt, i128::MIN, branch(id));
    scan.dir(&top, Path::new(""));
    if !scan.doubts.is_empty() {
        return Err(Outcome::Kept(scan.doubts.join("; ")));
    }
    if let Some(why) = held(&top, &scan.seen) {
        return Err(Outcome::Kept(why));
    }
    let seen = scan.seen;
    Ok(Survey {
        wts,
        top,
        tree,
        mnt,
        seen,
        since,
    })
}

/// True when a walk now does not see what the survey saw (files changed since it are hashed).
fn changed(pf: &Survey, id: &str) -> bool {
    let mut again = Scan::new(&pf.tree, pf.mnt, pf.since, branch(id));
    again.dir(&pf.top, Path::new(""));
    !again.doubts.is_empty() || again.seen != pf.seen
}

/// `.loopx/worktrees`, opened from the root down without following a link.
fn parent(root: &Path) -> Result<Option<Dir>, String> {
    let r = Dir::root(root).map_err(|e| format!("the project's root cannot be opened: {e}"))?;
    let mut d = r;
    for (name, shown) in [(".loopx", ".loopx"), ("worktrees", ".loopx/worktrees")] {
        let name = OsStr::new(name);
        d = match d.sub(name) {
            Ok(s) => s,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(_) if d.stat(Some(name)).is_ok_and(|s| s.kind() == libc::S_IFLNK) => {
                return Err(format!(
                    "{shown} is a symlink, and loopx never removes anything through a link"
                ));
            }
            Err(e) => return Err(format!("{shown} cannot be opened as a directory: {e}")),
        };
    }
    Ok(Some(d))
}

/// The worktree's own directory, refused when it is a link, not a directory or a mount.
fn open_top(wts: &Dir, id: &str) -> Result<Option<Dir>, String> {
    let name = OsStr::new(id);
    let st = match wts.stat(Some(name)) {
        Ok(s) => s,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("it cannot be looked at: {e}")),
    };
    match st.kind() {
        libc::S_IFDIR => {}
        libc::S_IFLNK => return Err("it is a symlink; loopx never follows it".into()),
        _ => return Err("it is not a directory".into()),
    }
    let here = wts
        .stat(None)
        .map_err(|e| format!("it cannot be looked at: {e}"))?;
    if st.mnt != here.mnt || st.dev != here.dev || st.mount_root {
        return Err("it is a mount point".into());
    }
    let top = wts
        .sub(name)
        .map_err(|e| format!("it cannot be opened: {e}"))?;
    match top.stat(None) {
        Ok(s) if s.ino == st.ino && s.mnt == st.mnt => Ok(Some(top)),
        _ => Err("it changed while it was opened".into()),
    }
}

/// A process that holds the worktree (its working directory, a file open or mapped), by path
/// or by the inode of the top or an entry in `seen`: why.
fn held(top: &Dir, seen: &[(PathBuf, Stat)]) -> Option<String> {
    let at = match top.path() {
        Ok(p) => p,
        Err(e) => return Some(format!("where it is cannot be read: {e}")),
    };
    let mut inodes: Inodes = seen
        .iter()
        .map(|(_, s)| (s.dev.0, s.dev.1, s.ino))
        .collect();
    if let Ok(s) = top.stat(None) {
        inodes.insert((s.dev.0, s.dev.1, s.ino));
    }
    holder(&at, &inodes).map(|(pid, p)| {
        format!(
            "process {pid} has {} open (a file, or its working directory)",
            p.display()
        )
    })
}

/// The branch's commit as a path map, after checking the worktree is the project's, on its
/// branch, not locked, with nothing staged that the commit lacks: the reason to keep it if not.
fn read_branch(root: &Path, top: &Dir, id: &str) -> Result<Tree, String> {
    let (r, at, i) = (root.to_path_buf(), top.proc_path(), id.to_string());
    match bounded(super::worktree::READ_TIMEOUT, move || {
        Ok(branch_tree(&r, &at, &i))
    }) {
        Ok(t) => t,
        Err(e) => Err(e.message),
    }
}

fn branch_tree(root: &Path, at: &Path, id: &str) -> Result<Tree, String> {
    let gerr = |what: &str, e: git2::Error| format!("{what}: {}", e.message());
    let main = git2::Repository::discover(root).map_err(|e| gerr("no repository", e))?;
    let wt = git2::Repository::open(at).map_err(|e| gerr("it is not a git worktree", e))?;
    let same = |p: &Path| p.canonicalize().ok();
    if !wt.is_worktree() || same(wt.commondir()) != same(main.commondir()) {
        return Err("it is not a worktree of this project's repository".into());
    }
    if let Ok(w) = main.find_worktree(id)
        && !matches!(w.is_locked(), Ok(git2::WorktreeLockStatus::Unlocked))
    {
        return Err("it is locked (`git worktree lock`)".into());
    }
    let want = branch(id);
    let head = wt.head().map_err(|e| gerr("its HEAD cannot be read", e))?;
    if !head.is_branch() || head.shorthand() != Ok(want.as_str()) {
        return Err(format!("its HEAD is not on branch {want}"));
    }
    let commit = head
        .peel_to_commit()
        .map_err(|e| gerr("its commit cannot be read", e))?;
    let tree = commit
        .tree()
        .map_err(|e| gerr("its tree cannot be read", e))?;
    let odb = wt
        .odb()
        .map_err(|e| gerr("its objects cannot be read", e))?;
    let size = |e: &git2::TreeEntry| match e.kind() {
        Some(git2::ObjectType::Blob) => odb.read_header(e.id()).map_or(u64::MAX, |(n, _)| n as u64),
        _ => u64::MAX,
    };
    let mut map = Tree::new();
    tree.walk(git2::TreeWalkMode::PreOrder, |dir, e| {
        let name = OsStr::from_bytes(e.name_bytes());
        map.insert(Path::new(dir).join(name), (e.filemode(), e.id(), size(e)));
        git2::TreeWalkResult::Ok
    })
    .map_err(|e| gerr("its tree cannot be read", e))?;
    staged_all_committed(&wt, &map)?;
    if own_refs(&wt.path().join("refs")) {
        return Err("it has refs of its own (`refs/worktree/`, `refs/bisect/`)".into());
    }
    Ok(map)
}

/// True when the worktree's own `refs/` (in its git directory) holds anything but directories;
/// unreadable counts as holding something.
fn own_refs(dir: &Path) -> bool {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return dir.symlink_metadata().is_ok();
    };
    rd.take(1_000)
        .any(|e| match e.and_then(|e| e.file_type().map(|t| (e, t))) {
            Ok((e, t)) if t.is_dir() => own_refs(&e.path()),
            _ => true,
        })
}

/// Every index entry is the commit's, and the commit's every file is in the index.
fn staged_all_committed(wt: &git2::Repository, map: &Tree) -> Result<(), String> {
    let index = wt
        .index()
        .map_err(|e| format!("its index cannot be read: {}", e.message()))?;
    let staged = "it has staged changes not committed on its branch";
    let mut n = 0;
    for e in index.iter() {
        let path = PathBuf::from(OsStr::from_bytes(&e.path));
        let stage = (e.flags >> 12) & 0x3;
        if stage != 0 || map.get(&path).map(|(m, o, _)| (*m, *o)) != Some((e.mode as i32, e.id)) {
            return Err(staged.into());
        }
        n += 1;
    }
    let files = map.values().filter(|(m, _, _)| *m != TREE).count();
    if n != files {
        return Err(staged.into());
    }
    Ok(())
}

/// After the move: nothing holds it and nothing changed since `seen` was walked; then each
/// entry is removed, children first, each as it was seen, the worktree's `.git` file last.
fn remove_seen(pf: &Survey, moved: &OsStr, id: &str) -> Result<(), String> {
    let (top, seen) = (&pf.top, &pf.seen);
    if let Some(why) = held(top, seen) {
        return Err(why);
    }
    if changed(pf, id) {
        return Err("it changed while loopx checked it".into());
    }
    let mut dirs = Dirs::default();
    let git = Path::new(".git");
    for (p, st) in seen.iter().rev().filter(|(p, _)| p != git) {
        remove_one(top, &mut dirs, p, st)?;
    }
    if let Some((p, st)) = seen.iter().find(|(p, _)| p == git) {
        remove_one(top, &mut dirs, p, st)?;
    }
    drop(dirs);
    pf.wts
        .remove(moved, true)
        .map_err(|e| format!("it could not be removed: {e}"))
}

/// The last parent directory opened during the removal.
#[derive(Default)]
struct Dirs {
    last: Option<(PathBuf, Dir)>,
}

/// Removes the entry `p` (relative to `top`) if it is still what was seen.
fn remove_one(top: &Dir, dirs: &mut Dirs, p: &Path, was: &Stat) -> Result<(), String> {
    let parent = p.parent().unwrap_or(Path::new(""));
    if dirs.last.as_ref().is_none_or(|(at, _)| at != parent) {
        let mut d = top.sub(OsStr::new("."));
        for c in parent.components() {
            d = d.and_then(|d| d.sub(c.as_os_str()));
        }
        let d = d.map_err(|e| format!("{} could not be opened: {e}", parent.display()))?;
        dirs.last = Some((parent.to_path_buf(), d));
    }
    let Some((_, d)) = dirs.last.as_ref() else {
        return Err("no directory".into());
    };
    let name = p.file_name().unwrap_or_default();
    let now = d
        .stat(Some(name))
        .map_err(|e| format!("{} could not be looked at: {e}", p.display()))?;
    let is_dir = was.kind() == libc::S_IFDIR;
    let same = (now.ino, now.dev, now.mnt, now.mode) == (was.ino, was.dev, was.mnt, was.mode);
    if !same || (!is_dir && now != *was) {
        return Err(format!("{} changed while loopx removed it", p.display()));
    }
    d.remove(name, is_dir)
        .map_err(|e| format!("{} could not be removed: {e}", p.display()))
}

#[cfg(test)]
#[path = "worktree_retire_tests.rs"]
mod tests;
