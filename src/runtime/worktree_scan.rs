//! A walk of a worktree by directory descriptor, never following a link: every entry it saw
//! (for the removal to compare) and why the worktree must be kept, each file hashed against the
//! branch's commit.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use super::worktree_fs::{Dir, Stat, proc_fd, stat_at};

/// What the branch's commit holds at each path: its git mode, object, and size (a blob's
/// bytes; `u64::MAX` when unknown, so no file matches it).
pub type Tree = HashMap<PathBuf, (i32, git2::Oid, u64)>;

/// The most reasons a kept worktree's message lists.
const REASONS_MAX: usize = 5;
/// The git mode of a directory.
pub const TREE: i32 = 0o040_000;
/// The git mode of a submodule's commit.
const GITLINK: i32 = 0o160_000;
const LINK: i32 = 0o120_000;

/// A walk of a worktree: what it saw, and why it must be kept.
pub struct Scan<'a> {
    tree: &'a Tree,
    mnt: u64,
    /// Files whose ctime is this or later are hashed (`i128::MIN`: all).
    hash_from: i128,
    branch: String,
    /// Every entry seen, by path relative to the worktree, in walk order.
    pub seen: Vec<(PathBuf, Stat)>,
    /// Why the worktree must be kept.
    pub doubts: Vec<String>,
}

impl<'a> Scan<'a> {
    /// A walk against `tree` on mount `mnt`; files whose ctime is `hash_from` or later are hashed.
    pub fn new(tree: &'a Tree, mnt: u64, hash_from: i128, branch: String) -> Self {
        Scan {
            tree,
            mnt,
            hash_from,
            branch,
            seen: Vec::new(),
            doubts: Vec::new(),
        }
    }

    /// Walks the directory `d` (at `rel`), its entries in name order.
    pub fn dir(&mut self, d: &Dir, rel: &Path) {
        let names = match d.names() {
            Ok(n) => n,
            Err(e) => {
                return self
                    .doubts
                    .push(format!("{} cannot be read: {e}", rel.display()));
            }
        };
        for n in names {
            if self.doubts.len() >= REASONS_MAX {
                return;
            }
            let p = rel.join(&n);
            match d.stat(Some(&n)) {
                Ok(st) => {
                    self.seen.push((p.clone(), st));
                    if let Some(why) = self.entry(d, &n, &p, &st) {
                        self.doubts.push(why);
                    }
                }
                Err(e) => self
                    .doubts
                    .push(format!("{} cannot be looked at: {e}", p.display())),
            }
        }
    }

    /// Why the entry `n` of `d` (at `p`) is not safe to remove, if it is not.
    fn entry(&mut self, d: &Dir, n: &OsStr, p: &Path, st: &Stat) -> Option<String> {
        let shown = p.display();
        if st.mnt != self.mnt || st.mount_root {
            return Some(format!(
                "{shown} is a mount point (what is in it is not the project's)"
            ));
        }
        let top_git = p == Path::new(".git");
        if n == ".git" && !top_git {
            return Some(format!(
                "{shown} is a nested repository (its history may be the only copy)"
            ));
        }
        let want = self.tree.get(p).copied();
        match st.kind() {
            libc::S_IFDIR if top_git => Some(".git is a directory, not a worktree's".into()),
            libc::S_IFDIR => match want {
                Some((m, _, _)) if m != TREE && m != GITLINK => Some(format!(
                    "{shown} is a directory where the commit has a file"
                )),
                _ => match d.sub(n) {
                    Ok(sub) => {
                        self.dir(&sub, p);
                        None
                    }
                    Err(e) => Some(format!("{shown} cannot be opened: {e}")),
                },
            },
            libc::S_IFREG if top_git => None,
            libc::S_IFREG | libc::S_IFLNK => self.file(d, n, p, st, want),
            _ => Some(format!(
                "{shown} is a special file (a FIFO, a socket or a device)"
            )),
        }
    }

    /// Why the file or link `n` is not its commit's, if it is not.
    fn file(
        &self,
        d: &Dir,
        n: &OsStr,
        p: &Path,
        st: &Stat,
        want: Option<(i32, git2::Oid, u64)>,
    ) -> Option<String> {
        let shown = p.display();
        let Some((mode, oid, size)) = want.filter(|(m, _, _)| *m != TREE && *m != GITLINK) else {
            return Some(format!(
                "{shown} is not committed on branch {} (an untracked or ignored file)",
                self.branch
            ));
        };
        let is_link = st.kind() == libc::S_IFLNK;
        let kind_ok = match mode {
            LINK => is_link,
            0o100_755 => !is_link && st.mode & 0o100 != 0,
            0o100_644 => !is_link && st.mode & 0o100 == 0,
            _ => false,
        };
        let differs = || format!("{shown} differs from its commit on branch {}", self.branch);
        // A size other than the blob's never hashes to it: a huge file is never read.
        if !kind_ok || (!is_link && st.size != size) {
            return Some(differs());
        }
        if st.times.0 < self.hash_from {
            return None;
        }
        match hash(d, n, st, is_link) {
            Ok(h) if h == oid => None,
            Ok(_) => Some(differs()),
            Err(e) => Some(format!("{shown} cannot be read: {e}")),
        }
    }
}

/// The git blob id of the file or link `n` (which must still be the inode `st`).
fn hash(d: &Dir, n: &OsStr, st: &Stat, is_link: bool) -> std::io::Result<git2::Oid> {
    let bytes_err = |e: git2::Error| std::io::Error::other(e.message().to_string());
    if is_link {
        let target = d.link_target(n)?;
        return git2::Oid::hash_object(git2::ObjectType::Blob, &target).map_err(bytes_err);
    }
    let fd = d.file(n)?;
    let now = stat_at(std::os::fd::AsRawFd::as_raw_fd(&fd), None)?;
    if now.ino != st.ino || now.kind() != libc::S_IFREG {
        return Err(std::io::Error::other("it changed while it was read"));
    }
    git2::Oid::hash_file(git2::ObjectType::Blob, proc_fd(&fd)).map_err(bytes_err)
}
