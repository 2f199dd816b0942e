//! The files `setup` reads and writes: bounded reads and atomic writes that never follow a
//! symlink, and the merges of JSON, TOML and a marked Markdown section.

use std::path::Path;

use super::dirfd::{Dir, Kind, Mode};
use super::json::Obj;
use super::{Change, refuse};
use crate::kernel::{Error, Result};
use crate::store::atomic;

/// The largest file `setup` reads: 1 MiB.
pub const MAX_READ: u64 = 1 << 20;

/// A setup step: what happens to a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// The file is new.
    Created,
    /// The file changes.
    Updated,
    /// The file stays as it is.
    Unchanged,
}

impl Step {
    /// As written in JSON and text.
    pub fn as_str(self) -> &'static str {
        match self {
            Step::Created => "created",
            Step::Updated => "updated",
            Step::Unchanged => "unchanged",
        }
    }

    /// The verb, for "would ...".
    pub fn verb(self) -> &'static str {
        match self {
            Step::Created => "create",
            Step::Updated => "update",
            Step::Unchanged => "keep",
        }
    }
}

/// Reads a project file without following a symlink, at most [`MAX_READ`] bytes; `None` when
/// it does not exist. A symlink (in the path below the root, or the file), a non-regular file
/// or one too large is refused.
pub fn read(root: &Path, rel: &str) -> Result<Option<Vec<u8>>> {
    let Some((dir, name)) = walk(root, rel, false)? else {
        return Ok(None);
    };
    let path = root.join(rel);
    let mut f = match dir.open_file(name) {
        Ok(Some(f)) => f,
        Ok(None) => return Ok(None),
        Err(e) => return Err(entry_error(&dir, rel, name, &path, e)),
    };
    match atomic::read_bounded(&mut f, MAX_READ) {
        Ok(b) => Ok(Some(b)),
        Err(e) if e.kind() == std::io::ErrorKind::FileTooLarge => {
            Err(refuse(rel, None, e.to_string()))
        }
        Err(e) => Err(Error::io(&path, &e)),
    }
}

const LINK: &str = "is a symlink; setup never writes through one";

/// Opens the directories on the way to `rel` one by one from the root, never through a link
/// (made when `make`); the last one and the file's name. `None` when one is missing.
fn walk<'a>(root: &Path, rel: &'a str, make: bool) -> Result<Option<(Dir, &'a str)>> {
    let mut dir = Dir::root(root).map_err(|e| Error::io(root, &e))?;
    let parts: Vec<&str> = rel.split('/').collect();
    let Some((name, dirs)) = parts.split_last() else {
        return Err(refuse(rel, None, "is not a file name"));
    };
    for (i, part) in dirs.iter().enumerate() {
        let shown = parts[..=i].join("/");
        let next = if make {
            dir.sub_or_make(part).map(Some)
        } else {
            dir.sub(part)
        };
        dir = match next {
            Ok(Some(d)) => d,
            Ok(None) => return Ok(None),
            Err(e) => return Err(entry_error(&dir, &shown, part, &root.join(&shown), e)),
        };
    }
    Ok(Some((dir, name)))
}

/// The error for an entry that would not open: a link or the wrong kind is refused (exit 6).
fn entry_error(dir: &Dir, rel: &str, name: &str, path: &Path, e: std::io::Error) -> Error {
    match dir.kind(name) {
        Ok(Kind::Link) => refuse(rel, None, LINK),
        Ok(Kind::File { .. } | Kind::Other) if e.raw_os_error() == Some(libc::ENOTDIR) => {
            refuse(rel, None, "is not a directory")
        }
        _ if atomic::is_not_regular(&e) => refuse(rel, None, e.to_string()),
        _ => Error::io(path, &e),
    }
}

/// Text of a file as UTF-8, or refused.
pub fn utf8(rel: &str, bytes: Vec<u8>) -> Result<String> {
    String::from_utf8(bytes).map_err(|e| {
        let line = e.as_bytes()[..e.utf8_error().valid_up_to()]
            .iter()
            .filter(|b| **b == b'\n')
            .count()
            + 1;
        refuse(rel, Some(line), "is not valid UTF-8")
    })
}

/// Writes a change atomically (directories made as needed), unless it is unchanged: every
/// directory opened from the root without following a link and the file written within the
/// last one, so a link swapped in meanwhile is never followed. The file keeps its mode and owner;
/// a new one gets 0o666 less the umask (0o600 when private).
pub fn apply(root: &Path, c: &Change) -> Result<()> {
    if c.step == Step::Unchanged {
        return Ok(());
    }
    let Some((dir, name)) = walk(root, &c.rel, true)? else {
        return Err(Error::io(
            &root.join(&c.rel),
            &std::io::ErrorKind::NotFound.into(),
        ));
    };
    let path = root.join(&c.rel);
    let mode = match dir.kind(name).map_err(|e| Error::io(&path, &e))? {
        Kind::Link => return Err(refuse(&c.rel, None, LINK)),
        Kind::Dir | Kind::Other => return Err(refuse(&c.rel, None, atomic::NOT_REGULAR)),
        _ if c.private => Mode::Private,
        Kind::Missing => Mode::New,
        Kind::File { mode, uid, gid } => Mode::Keep { mode, uid, gid },
    };
    dir.replace(name, &c.bytes, mode)
        .map_err(|e| Error::io(&path, &e))
}

/// A change from the old bytes (if any) to new ones, with `same` deciding "unchanged".
pub fn change(rel: &str, old: Option<Vec<u8>>, new: Vec<u8>, same: bool) -> Change {
    let (step, bytes) = match old {
        None => (Step::Created, new),
        Some(old) if same => (Step::Unchanged, old),
        Some(_) => (Step::Updated, new),
    };
    Change {
        rel: rel.to_string(),
        bytes,
        step,
        private: false,
    }
}

/// A whole-file change: unchanged when the bytes are the same.
pub fn whole(root: &Path, rel: &str, new: String) -> Result<Change> {
    let old = read(root, rel)?;
    let same = old.as_deref() == Some(new.as_bytes());
    Ok(change(rel, old, new.into_bytes(), same))
}

/// Merges into a JSON object file: `edit` changes the object, whose values loopx leaves alone
/// keep their text; unchanged when the value is the same after it (the file is then kept).
pub fn merge_json(
    root: &Path,
    rel: &str,
    edit: impl FnOnce(&mut Obj) -> Result<()>,
) -> Result<Change> {
    let old = read(root, rel)?;
    let text = old.clone().map(|b| utf8(rel, b)).transpose()?;
    // The file as it was, and the one `edit` changes.
    let before = text.as_deref().map(|t| Obj::parse(rel, t)).transpose()?;
    let mut obj = text
        .as_deref()
        .map_or(Ok(Obj::default()), |t| Obj::parse(rel, t))?;
    edit(&mut obj)?;
    let same = before.is_some_and(|b| b.same(&obj));
    Ok(change(rel, old, obj.text().into_bytes(), same))
}
