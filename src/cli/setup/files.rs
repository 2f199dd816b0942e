//! The files `setup` reads and writes: bounded reads and atomic writes that never follow a
//! symlink, and the merges of JSON, TOML and a marked Markdown section.

use std::path::Path;

use serde_json::{Map, Value};

use super::Change;
use crate::kernel::{Code, Error, Result};
use crate::store::atomic;

/// The largest file `setup` reads: 1 MiB.
pub const MAX_READ: u64 = 1 << 20;

/// What happens to a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// The file is new.
    Created,
    /// The file changes.
    Updated,
    /// The file stays as it is.
    Unchanged,
}

impl Action {
    /// As written in JSON and text.
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Created => "created",
            Action::Updated => "updated",
            Action::Unchanged => "unchanged",
        }
    }

    /// The verb, for "would ...".
    pub fn verb(self) -> &'static str {
        match self {
            Action::Created => "create",
            Action::Updated => "update",
            Action::Unchanged => "keep",
        }
    }
}

/// An error about a file `setup` will not touch (exit 6), naming it and the line.
pub fn refuse(rel: &str, line: Option<usize>, what: impl Into<String>) -> Error {
    Error::in_file(Code::InvalidState, rel, line, what).hint(format!(
        "fix or move {rel} by hand, then run setup again; nothing was written"
    ))
}

/// Reads a project file without following a symlink, at most [`MAX_READ`] bytes; `None` when
/// it does not exist. A symlink (in the path below the root, or the file), a non-regular file
/// or one too large is refused.
pub fn read(root: &Path, rel: &str) -> Result<Option<Vec<u8>>> {
    check_dirs(root, rel)?;
    let path = root.join(rel);
    let mut f = match atomic::open_nofollow(&path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
            return Err(refuse(
                rel,
                None,
                "is a symlink; setup never writes through one",
            ));
        }
        Err(e) if atomic::is_not_regular(&e) => return Err(refuse(rel, None, e.to_string())),
        Err(e) => return Err(Error::io(&path, &e)),
    };
    match atomic::read_bounded(&mut f, MAX_READ) {
        Ok(b) => Ok(Some(b)),
        Err(e) if e.kind() == std::io::ErrorKind::FileTooLarge => {
            Err(refuse(rel, None, e.to_string()))
        }
        Err(e) => Err(Error::io(&path, &e)),
    }
}

/// Refuses a directory on the way to `rel` (below the root) that is a symlink or not a directory.
fn check_dirs(root: &Path, rel: &str) -> Result<()> {
    let mut dir = root.to_path_buf();
    let parts: Vec<&str> = rel.split('/').collect();
    for (i, part) in parts[..parts.len().saturating_sub(1)].iter().enumerate() {
        dir.push(part);
        let shown = parts[..=i].join("/");
        match std::fs::symlink_metadata(&dir) {
            Ok(m) if m.file_type().is_symlink() => {
                return Err(refuse(
                    &shown,
                    None,
                    "is a symlink; setup never writes through one",
                ));
            }
            Ok(m) if !m.is_dir() => return Err(refuse(&shown, None, "is not a directory")),
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(Error::io(&dir, &e)),
        }
    }
    Ok(())
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

/// Writes a change atomically (directories made as needed), unless it is unchanged.
pub fn apply(root: &Path, c: &Change) -> Result<()> {
    if c.action == Action::Unchanged {
        return Ok(());
    }
    // Checked again just before writing: nothing became a symlink since the plan was made.
    check_dirs(root, &c.rel)?;
    let path = root.join(&c.rel);
    if std::fs::symlink_metadata(&path).is_ok_and(|m| m.file_type().is_symlink()) {
        return Err(refuse(
            &c.rel,
            None,
            "is a symlink; setup never writes through one",
        ));
    }
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, &e))?;
    }
    atomic::write(&path, &c.bytes).map_err(|e| Error::io(&path, &e))?;
    if c.private {
        use std::os::unix::fs::PermissionsExt;
        let f = atomic::open_nofollow(&path).map_err(|e| Error::io(&path, &e))?;
        f.set_permissions(std::fs::Permissions::from_mode(0o600))
            .map_err(|e| Error::io(&path, &e))?;
    }
    Ok(())
}

/// A change from the old bytes (if any) to new ones, with `same` deciding "unchanged".
pub fn change(rel: &str, old: Option<Vec<u8>>, new: Vec<u8>, same: bool) -> Change {
    let (action, bytes) = match old {
        None => (Action::Created, new),
        Some(old) if same => (Action::Unchanged, old),
        Some(_) => (Action::Updated, new),
    };
    Change {
        rel: rel.to_string(),
        bytes,
        action,
        private: false,
    }
}

/// A whole-file change: unchanged when the bytes are the same.
pub fn whole(root: &Path, rel: &str, new: String) -> Result<Change> {
    let old = read(root, rel)?;
    let same = old.as_deref() == Some(new.as_bytes());
    Ok(change(rel, old, new.into_bytes(), same))
}

/// Merges into a JSON object file: `edit` changes the parsed object; unchanged when the
/// object is the same after it (the file's own formatting is then kept).
pub fn merge_json(
    root: &Path,
    rel: &str,
    edit: impl FnOnce(&mut Map<String, Value>) -> Result<()>,
) -> Result<Change> {
    let old = read(root, rel)?;
    let before = match &old {
        None => Map::new(),
        Some(bytes) => parse_json_object(rel, bytes)?,
    };
    let mut after = before.clone();
    edit(&mut after)?;
    let mut text = serde_json::to_string_pretty(&Value::Object(after.clone()))
        .map_err(|e| Error::new(Code::Internal, e.to_string()))?;
    text.push('\n');
    Ok(change(rel, old, text.into_bytes(), before == after))
}

fn parse_json_object(rel: &str, bytes: &[u8]) -> Result<Map<String, Value>> {
    match serde_json::from_slice::<Value>(bytes) {
        Ok(Value::Object(m)) => Ok(m),
        Ok(_) => Err(refuse(rel, Some(1), "is not a JSON object")),
        Err(e) => Err(refuse(
            rel,
            Some(e.line().max(1)),
            format!("is not JSON: {e}"),
        )),
    }
}

/// The object under `key`, made if absent; refused if it is there and not an object.
pub fn object_at<'a>(
    map: &'a mut Map<String, Value>,
    key: &str,
    rel: &str,
) -> Result<&'a mut Map<String, Value>> {
    let v = map
        .entry(key.to_string())
        .or_insert_with(|| Value::Object(Map::new()));
    v.as_object_mut()
        .ok_or_else(|| refuse(rel, None, format!("`{key}` is not a JSON object")))
}
