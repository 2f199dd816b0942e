//! The projects the owner keeps an eye on: `projects.toml` in the config directory, which
//! `loopx projects` edits and `loopx board --all` shows. Each entry is a project root (its files,
//! or the database its `loopx.toml` points at) or a store URL.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::kernel::{Code, Error, Result};
use crate::store::atomic;

/// The most bytes `projects.toml` may hold.
pub const FILE_MAX: u64 = 1 << 20;
/// The most characters of a project's name.
pub const NAME_MAX: usize = 64;
/// The most projects the list holds.
pub const PROJECTS_MAX: usize = 200;

/// The list, as the file holds it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Projects {
    /// The file's format.
    #[serde(default = "schema_one")]
    pub schema_version: u32,
    /// The projects, in the order they were added.
    #[serde(default, rename = "project", skip_serializing_if = "Vec::is_empty")]
    pub projects: Vec<Entry>,
}

impl Default for Projects {
    fn default() -> Projects {
        Projects {
            schema_version: 1,
            projects: Vec::new(),
        }
    }
}

fn schema_one() -> u32 {
    1
}

/// One project of the list.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Entry {
    /// Its name on the overview and in `projects remove`.
    pub name: String,
    /// The project's root (it holds `.loopx/`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<PathBuf>,
    /// The database that keeps it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub store: Option<String>,
}

/// Where an entry's project is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place<'a> {
    /// A project root.
    Files(&'a Path),
    /// A database's URL.
    Database(&'a str),
}

impl Entry {
    /// Where the project is; an error for an entry with neither or both.
    pub fn place(&self) -> std::result::Result<Place<'_>, String> {
        match (&self.path, &self.store) {
            (Some(p), None) => Ok(Place::Files(p)),
            (None, Some(u)) => Ok(Place::Database(u)),
            (None, None) => Err("the entry names neither a path nor a store".into()),
            (Some(_), Some(_)) => Err("the entry names both a path and a store".into()),
        }
    }

    /// Where the project is, for people: the path, or the URL without its password.
    pub fn shown(&self) -> String {
        match self.place() {
            Ok(Place::Files(p)) => p.display().to_string(),
            Ok(Place::Database(u)) => crate::store::pg::redact(u),
            Err(e) => e,
        }
    }

    /// The entry as `projects list --json` shows it (no password).
    pub fn json(&self) -> serde_json::Value {
        let mut v = serde_json::json!({ "name": self.name });
        if let Some(p) = &self.path {
            v["path"] = serde_json::Value::String(p.display().to_string());
        }
        if let Some(u) = &self.store {
            v["store"] = serde_json::Value::String(crate::store::pg::redact(u));
        }
        v
    }
}

/// `$XDG_CONFIG_HOME/loopx/projects.toml`, else `$HOME/.config/loopx/projects.toml`, from the
/// values the face read (empty counts as unset); `None` when neither is set.
pub fn path_of(xdg: Option<OsString>, home: Option<OsString>) -> Option<PathBuf> {
    crate::store::owner::config_dir(xdg, home).map(|d| d.join("projects.toml"))
}

/// Checks a project's name: 1 to 64 of `A-Z a-z 0-9 . _ -`, not starting with `-` or `.`.
pub fn check_name(name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name.chars().count() <= NAME_MAX
        && !name.starts_with(['-', '.'])
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
    if ok {
        Ok(())
    } else {
        Err(Error::usage(format!(
            "`{}` is not a project name",
            crate::text::escape(name)
        ))
        .hint(format!(
            "1 to {NAME_MAX} letters, digits, `.`, `_` or `-`, not starting with `-` or `.`"
        )))
    }
}

/// A name made of `text`: its characters a name may hold, the others as `-`.
pub fn name_from(text: &str) -> String {
    let s: String = text
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '-'
            }
        })
        .take(NAME_MAX)
        .collect();
    let s = s.trim_start_matches(['-', '.']).to_string();
    if s.is_empty() { "project".into() } else { s }
}

/// The default name of a database project: the database's name in its URL.
pub fn name_of_url(url: &str) -> String {
    let tail = url.split(['?', '#']).next().unwrap_or(url);
    let db = tail
        .split_once("://")
        .map_or(tail, |(_, r)| r)
        .rsplit_once('/')
        .map_or("", |(_, d)| d);
    name_from(if db.is_empty() { "database" } else { db })
}

impl Projects {
    /// Adds a project; refused when its name, or its place, is in the list already.
    pub fn add(&mut self, e: Entry) -> Result<()> {
        check_name(&e.name)?;
        e.place().map_err(Error::usage)?;
        if let Some(o) = self.projects.iter().find(|o| o.name == e.name) {
            return Err(Error::usage(format!(
                "a project named {} is in the list already ({})",
                e.name,
                o.shown()
            ))
            .hint("choose another with --name, or `loopx projects remove` it first"));
        }
        if let Some(o) = self.projects.iter().find(|o| {
            o.path.is_some() && o.path == e.path || o.store.is_some() && o.store == e.store
        }) {
            return Err(Error::usage(format!(
                "{} is in the list already, as {}",
                e.shown(),
                o.name
            )));
        }
        if self.projects.len() >= PROJECTS_MAX {
            return Err(Error::usage(format!(
                "the list holds {PROJECTS_MAX} projects, the most it may"
            )));
        }
        self.projects.push(e);
        Ok(())
    }

    /// Removes the project named `key`, else the one at path `key` (relative to `cwd`), else the
    /// one whose store is `key`; exit 5 when there is none.
    pub fn remove(&mut self, key: &str, cwd: &Path) -> Result<Entry> {
        let as_path = cwd.join(key);
        let canon = as_path.canonicalize().unwrap_or(as_path.clone());
        let i = self
            .projects
            .iter()
            .position(|e| e.name == key)
            .or_else(|| {
                self.projects.iter().position(|e| {
                    e.path.as_deref() == Some(as_path.as_path())
                        || e.path.as_deref() == Some(canon.as_path())
                        || e.store.as_deref() == Some(key)
                })
            })
            .ok_or_else(|| {
                Error::new(
                    Code::NotFound,
                    format!("no project {} in the list", crate::text::escape(key)),
                )
                .hint("`loopx projects list` names them")
            })?;
        Ok(self.projects.remove(i))
    }
}

/// Reads the list (empty when the file does not exist), never through a link.
pub fn read(path: &Path) -> Result<Projects> {
    let shown = path.display();
    let mut f = match atomic::open_nofollow(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Projects::default()),
        Err(e) => return Err(Error::new(Code::Io, format!("cannot read {shown}: {e}"))),
    };
    let bytes = atomic::read_bounded(&mut f, FILE_MAX)
        .map_err(|e| Error::new(Code::Io, format!("cannot read {shown}: {e}")))?;
    let text = String::from_utf8(bytes)
        .map_err(|_| Error::new(Code::InvalidState, format!("{shown} is not UTF-8")))?;
    let p: Projects = toml::from_str(&text).map_err(|e| {
        let line = e
            .span()
            .map(|r| format!(":{}", crate::store::parse::line_of(&text, r.start)))
            .unwrap_or_default();
        Error::new(
            Code::InvalidState,
            format!("{shown}{line}: {}", e.message().trim()),
        )
        .hint("fix the file by hand, or remove it and add the projects again")
    })?;
    if p.schema_version > 1 {
        return Err(Error::new(
            Code::SchemaTooNew,
            format!("{shown} is schema {}; this loopx reads 1", p.schema_version),
        ));
    }
    Ok(p)
}

/// Reads the list, changes it with `f` and writes it back, holding the lock on
/// `projects.toml.lock` beside it (waiting up to `wait`, then exit 8): two at once would each
/// read the same list and the second write would drop the first's change. The lock is never on
/// `projects.toml` itself, which the write replaces by a rename.
pub fn edit<T>(
    path: &Path,
    wait: Duration,
    f: impl FnOnce(&mut Projects) -> Result<T>,
) -> Result<T> {
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)
        .map_err(|e| Error::new(Code::Io, format!("cannot make {}: {e}", dir.display())))?;
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(".lock");
    let _held = crate::store::lock::acquire(&dir.join(name), true, wait)?;
    let mut p = read(path)?;
    let out = f(&mut p)?;
    write(path, &p)?;
    Ok(out)
}

/// Writes the list atomically (a fresh temp file beside it, never through a link, mode 0600
/// since a store URL may hold a password; then renamed over the file).
pub fn write(path: &Path, p: &Projects) -> Result<()> {
    use std::io::Write as _;
    use std::os::unix::fs::PermissionsExt as _;
    let io =
        |e: std::io::Error| Error::new(Code::Io, format!("cannot write {}: {e}", path.display()));
    let text = toml::to_string(p).map_err(|e| Error::new(Code::Internal, e.to_string()))?;
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(io)?;
    let (tmp, mut f) = atomic::create_temp(path).map_err(io)?;
    let r = (|| {
        f.set_permissions(std::fs::Permissions::from_mode(0o600))?;
        f.write_all(text.as_bytes())?;
        f.sync_data()?;
        drop(f);
        std::fs::rename(&tmp, path)?;
        atomic::sync_dir(dir)
    })();
    if r.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    r.map_err(io)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_places() {
        assert_eq!(
            name_of_url("postgres://u:pw@db:5432/wx?sslmode=disable"),
            "wx"
        );
        assert_eq!(name_of_url("postgres://db"), "database");
        assert_eq!(name_from("my project!"), "my-project-");
        assert!(check_name("-x").is_err() && check_name("wx.2").is_ok());
        let e = Entry {
            name: "a".into(),
            path: None,
            store: Some("postgres://u:secret@db/a".into()),
        };
        assert!(!e.shown().contains("secret") && !e.json().to_string().contains("secret"));
    }

    #[test]
    fn add_refuses_duplicates_and_remove_finds_by_name_or_path() {
        let mut p = Projects::default();
        let e = |n: &str, path: &str| Entry {
            name: n.into(),
            path: Some(PathBuf::from(path)),
            store: None,
        };
        p.add(e("a", "/x/a")).unwrap();
        assert!(p.add(e("a", "/x/b")).is_err());
        assert!(p.add(e("b", "/x/a")).is_err());
        p.add(e("b", "/x/b")).unwrap();
        assert_eq!(p.remove("/x/b", Path::new("/")).unwrap().name, "b");
        assert_eq!(p.remove("a", Path::new("/")).unwrap().name, "a");
        assert_eq!(
            p.remove("a", Path::new("/")).unwrap_err().code,
            Code::NotFound
        );
        let text = toml::to_string(&p).unwrap();
        assert_eq!(toml::from_str::<Projects>(&text).unwrap(), p);
    }

    #[test]
    fn a_bad_file_is_named_with_its_line() {
        let d = std::env::temp_dir().join(format!("loopx-projects-bad-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        let f = d.join("projects.toml");
        std::fs::write(&f, "schema_version = 1\n[[project]]\nname = 3\n").unwrap();
        let e = read(&f).unwrap_err();
        assert!(e.message.contains("projects.toml:3:"), "{}", e.message);
        std::fs::remove_dir_all(&d).unwrap();
    }
}
