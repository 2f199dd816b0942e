//! Which store a command works on, chosen once (as ripgrep reads its configuration): `--store
//! URL` / `LOOPX_STORE`, else `[store] url` in the discovered `.loopx/loopx.toml`, else the files.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::kernel::{Error, Result};
use crate::store::Env;
use crate::store::parse::{self, shown};
use crate::store::{FileStore, Followed};

/// The longest store URL, in bytes.
pub const URL_MAX: usize = 2048;

/// The store chosen for a command.
#[derive(Debug, Clone)]
pub enum Choice {
    /// The project's `.loopx/` directory.
    Files(FileStore),
    /// A database, by its URL.
    Url(String),
}

/// `[store]` in `loopx.toml`: where the project's state lives when it is not in `.loopx/`.
///
/// Read on its own, so a pointer file that holds only `[store]` is valid; in a goal's
/// `loopx.toml` it is one of the unknown keys `Config::extra` keeps, so it round-trips.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoreSection {
    /// The database's URL (`postgres://...`).
    pub url: String,
}

/// The only part of `loopx.toml` the choice reads.
#[derive(Debug, Deserialize)]
struct Pointer {
    store: Option<StoreSection>,
}

/// Chooses the store: `explicit_url` when given, else `[store] url` of the project found from
/// `dir` or `cwd`, else that project's files (exit 5 when there is none).
pub fn choose(
    explicit_url: Option<&str>,
    dir: Option<&Path>,
    cwd: &Path,
    env: Env,
) -> Result<Choice> {
    if let Some(url) = explicit_url {
        check_url(url).map_err(|why| {
            Error::usage(format!("--store / LOOPX_STORE {why}"))
                .hint("give the database's URL, like postgres://user@host/db")
        })?;
        return Ok(Choice::Url(url.to_string()));
    }
    let files = FileStore::discover(dir, cwd)?.with_env(env);
    match pointed_url(&files.path("loopx.toml"))? {
        Some(url) => Ok(Choice::Url(url)),
        None => Ok(Choice::Files(files)),
    }
}

/// `[store] url` of a `loopx.toml`, if it has one. A file that cannot be read or is not TOML
/// points nowhere (the file store's own reading says what is wrong with it); a `[store]`
/// without a good URL is invalid state.
pub fn pointed_url(path: &Path) -> Result<Option<String>> {
    let Ok(Some(bytes)) = parse::read_bytes(path) else {
        return Ok(None);
    };
    // Most files name no store: no second parse for them.
    let Some(text) = String::from_utf8(bytes)
        .ok()
        .filter(|t| t.contains("store"))
    else {
        return Ok(None);
    };
    let Ok(table) = toml::from_str::<toml::Table>(&text) else {
        return Ok(None);
    };
    if !table.contains_key("store") {
        return Ok(None);
    }
    let bad = |why: &str| {
        Error::invalid(&shown(path), None, format!("[store] {why}")).hint(format!(
            "give [store] url = \"postgres://user@host/db\" in {}, or remove [store] for the file store",
            shown(path)
        ))
    };
    let p: Pointer = toml::from_str(&text).map_err(|_| bad("needs url, a text"))?;
    let Some(s) = p.store else {
        return Ok(None);
    };
    check_url(&s.url).map_err(|why| bad(&format!("url {why}")))?;
    Ok(Some(s.url))
}

/// Checks a store URL's bounds: 1 to `URL_MAX` bytes, no control character. Says what is wrong
/// without repeating the URL, which may hold a password.
pub fn check_url(url: &str) -> std::result::Result<(), String> {
    if url.trim().is_empty() {
        return Err("is empty".into());
    }
    if url.len() > URL_MAX {
        return Err(format!(
            "is {} bytes long; the most is {URL_MAX}",
            url.len()
        ));
    }
    if url.chars().any(char::is_control) {
        return Err("holds a control character".into());
    }
    Ok(())
}

/// Connects to the database at `url`.
pub fn connect(url: &str, env: Env) -> Result<Box<dyn Followed>> {
    Ok(Box::new(crate::store::pg::PgStore::new(url, env)?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::{Code, Config, Ts};

    fn project(tag: &str, toml: &str) -> std::path::PathBuf {
        let root = std::env::temp_dir().join(format!("loopx-open-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(root.join(".loopx")).unwrap();
        std::fs::write(root.join(".loopx/loopx.toml"), toml).unwrap();
        root
    }

    fn url_of(c: Choice) -> Option<String> {
        match c {
            Choice::Url(u) => Some(u),
            Choice::Files(_) => None,
        }
    }

    #[test]
    fn the_flag_wins_then_the_pointer_then_the_files() {
        let env = Env::default();
        let cfg = Config::new("g-1", "Ship it", Ts::now());
        let goal = parse::encode(&cfg).unwrap();
        let files = project("files", &goal);
        let c = choose(None, Some(&files), &files, env.clone()).unwrap();
        assert!(matches!(&c, Choice::Files(s) if s.root() == files));
        let c = choose(Some("postgres://h/db"), Some(&files), &files, env.clone()).unwrap();
        assert_eq!(url_of(c).as_deref(), Some("postgres://h/db"));
        // A pointer file with only [store], found from a directory below the project.
        let ptr = project("ptr", "[store]\nurl = \"postgres://a@h/db\"\n");
        std::fs::create_dir_all(ptr.join("sub")).unwrap();
        let c = choose(None, None, &ptr.join("sub"), env.clone()).unwrap();
        assert_eq!(url_of(c).as_deref(), Some("postgres://a@h/db"));
        // No project and no flag: not initialized (exit 5), as before.
        let none = std::env::temp_dir().join(format!("loopx-open-none-{}", std::process::id()));
        std::fs::create_dir_all(&none).unwrap();
        let e = choose(None, Some(&none), &none, env.clone()).unwrap_err();
        assert_eq!(e.code, Code::NotInitialized);
        for d in [files, ptr, none] {
            std::fs::remove_dir_all(d).ok();
        }
    }

    #[test]
    fn urls_are_bounded_and_never_echoed() {
        let env = Env::default();
        let cwd = std::env::temp_dir();
        let long = format!("postgres://h/{}", "x".repeat(URL_MAX));
        for bad in ["", "  ", "postgres://h/db\n", &long] {
            let e = choose(Some(bad), None, &cwd, env.clone()).unwrap_err();
            assert_eq!(e.code, Code::Usage, "{bad:?}");
            assert!(!e.message.contains("postgres"), "{}", e.message);
        }
        let root = project("badptr", "[store]\nurl = \"postgres://secret@h\\u0007\"\n");
        let e = choose(None, Some(&root), &root, env.clone()).unwrap_err();
        assert_eq!(e.code, Code::InvalidState);
        assert!(!e.message.contains("secret"), "{}", e.message);
        std::fs::write(root.join(".loopx/loopx.toml"), "[store]\nurl = 3\n").unwrap();
        let e = choose(None, Some(&root), &root, env.clone()).unwrap_err();
        assert_eq!(e.code, Code::InvalidState);
        // Not TOML at all: the files are chosen, and their loading says what is wrong.
        std::fs::write(root.join(".loopx/loopx.toml"), "[goal\n").unwrap();
        assert!(url_of(choose(None, Some(&root), &root, env.clone()).unwrap()).is_none());
        std::fs::remove_dir_all(root).ok();
    }

    #[test]
    fn a_goal_keeps_its_store_section_through_a_round_trip() {
        let cfg = Config::new("g-1", "Ship it", Ts::now());
        let text = format!(
            "{}\n[store]\nurl = \"postgres://h/db\"\n",
            parse::encode(&cfg).unwrap()
        );
        let back: Config = toml::from_str(&text).unwrap();
        let again = parse::encode(&back).unwrap();
        let p: Pointer = toml::from_str(&again).unwrap();
        assert_eq!(p.store.map(|s| s.url).as_deref(), Some("postgres://h/db"));
    }

    #[test]
    fn connecting_needs_a_postgres_url() {
        let e = connect("mysql://h/db", Env::default()).err().unwrap();
        assert_eq!(e.code, Code::Usage);
        assert!(
            connect("postgres://h/db", Env::default()).is_ok(),
            "connects on first use"
        );
    }
}
