//! Reading and writing state files: TOML with schema checks and errors that name file and line.

use std::path::Path;

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::kernel::limits::{Key, Limited, Violation};
use crate::kernel::{Code, Error, Result, SCHEMA_VERSION};

/// The 1-based line of a byte offset.
pub fn line_of(text: &str, offset: usize) -> usize {
    text.as_bytes()[..offset.min(text.len())]
        .iter()
        .filter(|b| **b == b'\n')
        .count()
        + 1
}

/// The name to show for a file: relative to the project when possible.
pub fn shown(path: &Path) -> String {
    let s = path.display().to_string();
    match s.find(".loopx/") {
        Some(i) => s[i..].to_string(),
        None => s,
    }
}

#[derive(serde::Deserialize)]
struct Version {
    schema_version: Option<toml::Value>,
}

/// Checks `schema_version` when the text parses as TOML at all.
fn check_version(text: &str, file: &str) -> Result<()> {
    let Ok(v) = toml::from_str::<Version>(text) else {
        return Ok(());
    };
    match v.schema_version {
        None => Ok(()),
        Some(toml::Value::Integer(n)) if n >= 1 && n <= i64::from(SCHEMA_VERSION) => Ok(()),
        Some(toml::Value::Integer(n)) if n > i64::from(SCHEMA_VERSION) => Err(Error::in_file(
            Code::SchemaTooNew,
            file,
            None,
            format!("schema_version {n} is newer than this loopx knows ({SCHEMA_VERSION})"),
        )
        .hint("upgrade loopx; this file was not read or changed")),
        Some(other) => Err(Error::invalid(
            file,
            None,
            format!("schema_version must be {SCHEMA_VERSION}, not {other}"),
        )),
    }
}

/// Parses a TOML state file into `T` and checks its bounds; errors name file, line and what to do.
pub fn decode<T: DeserializeOwned + Limited>(path: &Path, text: &str) -> Result<T> {
    let file = shown(path);
    check_version(text, &file)?;
    let value = toml::from_str::<T>(text).map_err(|e| {
        let line = e.span().map(|s| line_of(text, s.start));
        Error::invalid(&file, line, e.message().trim().to_string())
    })?;
    value
        .check_limits()
        .map_err(|v| bound_error(&file, text, &v))?;
    Ok(value)
}

/// The error for a value outside its bound: exit 6, naming the file and the line of the key.
pub fn bound_error(file: &str, text: &str, v: &Violation) -> Error {
    let line = key_line(text, &v.key);
    Error::invalid(file, line, v.message.clone()).hint(format!(
        "set `{}` in {file} within its bounds (docs/state-format.md, \"Bounds\"), then run `loopx doctor`",
        v.path()
    ))
}

fn first_key_span(t: &toml_edit::Table) -> Option<std::ops::Range<usize>> {
    let (name, _) = t.iter().next()?;
    t.key(name)?.span()
}

/// The 1-based line of a key path in TOML text: the deepest part of it that is written there.
pub fn key_line(text: &str, key: &[Key]) -> Option<usize> {
    use toml_edit::{Item, Value};
    enum Node<'a> {
        Item(&'a Item),
        Table(&'a toml_edit::Table),
        Value(&'a Value),
    }
    let doc = toml_edit::Document::parse(text).ok()?;
    let mut node = Node::Item(doc.as_item());
    let mut span = None;
    for k in key {
        let (next, s) = match (k, node) {
            (Key::Name(n), parent) => {
                let table: Option<&dyn toml_edit::TableLike> = match parent {
                    Node::Item(i) => i.as_table_like(),
                    Node::Table(t) => Some(t),
                    Node::Value(v) => v.as_inline_table().map(|t| t as _),
                };
                match table.and_then(|t| t.get_key_value(n)) {
                    Some((key, item)) => (Node::Item(item), key.span().or_else(|| item.span())),
                    None => break,
                }
            }
            (Key::Index(i), Node::Item(Item::ArrayOfTables(a))) => match a.get(*i) {
                // An entry has no span of its own here: take its first key's.
                Some(t) => (Node::Table(t), t.span().or_else(|| first_key_span(t))),
                None => break,
            },
            (
                Key::Index(i),
                Node::Item(Item::Value(Value::Array(a))) | Node::Value(Value::Array(a)),
            ) => match a.get(*i) {
                Some(v) => (Node::Value(v), v.span()),
                None => break,
            },
            _ => break,
        };
        node = next;
        span = s.or(span);
    }
    span.map(|s| line_of(text, s.start))
}

/// Reads a state file without following a symlink; `None` when it does not exist.
pub fn read_bytes(path: &Path) -> Result<Option<Vec<u8>>> {
    let mut f = match crate::store::atomic::open_nofollow(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => return Err(symlink_error(path)),
        Err(e) => return Err(io_error(path, &e)),
    };
    crate::store::atomic::read_bounded(&mut f, MAX_STATE_FILE)
        .map(Some)
        .map_err(|e| io_error(path, &e))
}

/// The largest state file loopx reads: 16 MiB.
pub const MAX_STATE_FILE: u64 = 16 << 20;

/// An I/O error on a state file: one that is not a regular file, or too large, is invalid state.
pub fn io_error(path: &Path, e: &std::io::Error) -> Error {
    if crate::store::atomic::is_not_regular(e) || e.kind() == std::io::ErrorKind::FileTooLarge {
        Error::invalid(&shown(path), None, e.to_string()).hint(format!(
            "replace {} with a regular file, or remove it",
            shown(path)
        ))
    } else {
        Error::io(path, e)
    }
}

/// The error for a state path that is a symlink.
pub fn symlink_error(path: &Path) -> Error {
    Error::invalid(
        &shown(path),
        None,
        "is a symlink; loopx does not follow links inside .loopx/",
    )
    .hint(format!(
        "replace {} with a regular file or directory",
        shown(path)
    ))
}

/// Reads and parses a TOML state file; `None` when it does not exist.
pub fn read<T: DeserializeOwned + Limited>(path: &Path) -> Result<Option<T>> {
    match read_bytes(path)? {
        Some(bytes) => {
            let text = String::from_utf8(bytes)
                .map_err(|_| Error::invalid(&shown(path), None, "not valid UTF-8"))?;
            decode(path, &text).map(Some)
        }
        None => Ok(None),
    }
}

/// Serialises a state value as TOML.
pub fn encode<T: Serialize>(value: &T) -> Result<String> {
    toml::to_string(value)
        .map_err(|e| Error::new(Code::Internal, format!("cannot write TOML: {e}")))
}

/// A state value stored in a file named after its id (`todos/ID.toml`, `gates/ID.toml`).
pub trait Named: Limited {
    /// The id inside the file.
    fn id(&self) -> &str;
}

impl Named for crate::kernel::Todo {
    fn id(&self) -> &str {
        &self.id
    }
}

impl Named for crate::kernel::model::AgentInfo {
    fn id(&self) -> &str {
        &self.id
    }
}

impl Named for crate::kernel::Gate {
    fn id(&self) -> &str {
        &self.id
    }
}

/// Reads `path`, named `stem.toml`, and checks that the id inside matches the name.
pub fn read_named<T: DeserializeOwned + Named>(path: &Path, stem: &str) -> Result<Option<T>> {
    match read::<T>(path)? {
        Some(v) if v.id() != stem => Err(Error::invalid(
            &shown(path),
            read_bytes(path)
                .ok()
                .flatten()
                .and_then(|b| String::from_utf8(b).ok())
                .and_then(|t| key_line(&t, &[Key::Name("id".into())])),
            format!(
                "its id is `{}` but the file is named {stem}.toml; rename the file or fix the id",
                v.id()
            ),
        )),
        v => Ok(v),
    }
}

/// Rewrites the TOML text `old` to hold exactly the values of `new`, keeping `old`'s comments,
/// key order and formatting wherever a value did not change. None when either does not parse.
pub fn merge_keeping_comments(old: &str, new: &str) -> Option<String> {
    let mut doc: toml_edit::DocumentMut = old.parse().ok()?;
    let new: toml_edit::DocumentMut = new.parse().ok()?;
    merge_table(doc.as_table_mut(), new.as_table());
    Some(doc.to_string())
}

fn merge_table(old: &mut toml_edit::Table, new: &toml_edit::Table) {
    use toml_edit::Item;
    let gone: Vec<String> = old
        .iter()
        .map(|(k, _)| k.to_string())
        .filter(|k| !new.contains_key(k))
        .collect();
    for k in gone {
        old.remove(&k);
    }
    for (k, item) in new.iter() {
        match (old.get_mut(k), item) {
            (Some(Item::Table(ot)), Item::Table(nt)) => merge_table(ot, nt),
            (Some(Item::Value(ov)), Item::Value(nv)) => {
                let bare = |v: &toml_edit::Value| {
                    let mut v = v.clone();
                    v.decor_mut().clear();
                    v.to_string()
                };
                if bare(ov) != bare(nv) {
                    let decor = ov.decor().clone();
                    *ov = nv.clone();
                    *ov.decor_mut() = decor;
                }
            }
            (Some(slot), _) => *slot = item.clone(),
            (None, _) => {
                old.insert(k, item.clone());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::{Config, QuotaFile, Todo};

    fn name(s: &str) -> Key {
        Key::Name(s.into())
    }

    #[test]
    fn key_line_finds_tables_arrays_and_dotted_keys() {
        let text = "list = [\n  \"p\",\n  \"q\",\n]\nlease.ttl = \"9d\"\n[quota]\nslots = 0\n\
                    window = \"1h\"\n\n[[spend]]\nx = 1\n\n[[spend]]\ny = 2\ncost = 3\n";
        assert_eq!(key_line(text, &[name("list"), Key::Index(1)]), Some(3));
        assert_eq!(key_line(text, &[name("lease"), name("ttl")]), Some(5));
        assert_eq!(key_line(text, &[name("quota"), name("window")]), Some(8));
        assert_eq!(
            key_line(text, &[name("spend"), Key::Index(1), name("cost")]),
            Some(15)
        );
        assert_eq!(
            key_line(text, &[name("spend"), Key::Index(1), name("none")]),
            Some(13)
        );
        assert_eq!(key_line(text, &[name("nothing")]), None);
        assert_eq!(key_line("not toml [", &[name("a")]), None);
    }

    #[test]
    fn out_of_bound_values_are_invalid_state_with_file_and_line() {
        let p = Path::new("/x/.loopx/loopx.toml");
        let cfg = "[goal]\nid = \"goal-aaaaaa\"\nobjective = \"o\"\nstatus = \"active\"\n\
                   created_at = \"2020-01-01T00:00:00Z\"\nupdated_at = \"2020-01-01T00:00:00Z\"\n\
                   [quota]\nslots = 0\n";
        let e = decode::<Config>(p, cfg).unwrap_err();
        assert_eq!(e.code, Code::InvalidState);
        assert!(
            e.message.starts_with(".loopx/loopx.toml:8: "),
            "{}",
            e.message
        );
        let huge = cfg.replace("slots = 0", "window = \"PT9223372036854776S\"");
        let e = decode::<Config>(p, &huge).unwrap_err();
        assert!(
            e.message.starts_with(".loopx/loopx.toml:8: "),
            "{}",
            e.message
        );
        let q =
            "[[spend]]\nat = \"2020-01-01T00:00:00Z\"\nagent = \"a\"\nslots = 1\ncost_usd = nan\n";
        let e = decode::<QuotaFile>(Path::new("/x/.loopx/quota.toml"), q).unwrap_err();
        assert!(
            e.message.starts_with(".loopx/quota.toml:5: "),
            "{}",
            e.message
        );
        let t = "id = \"t-aaaaaa\"\ntitle = \"t\"\nstatus = \"open\"\ncreated_by = \"a\"\n\
                 created_at = \"2020-01-01T00:00:00Z\"\nupdated_at = \"9999-01-01T00:00:00Z\"\n";
        let e = decode::<Todo>(Path::new("/x/.loopx/todos/t-aaaaaa.toml"), t).unwrap_err();
        assert!(
            e.message.contains("todos/t-aaaaaa.toml:6: "),
            "{}",
            e.message
        );
    }
}
