//! `setup` on a database: the wiring runs `loopx --dir ROOT ...`, and ROOT's pointer
//! (`.loopx/loopx.toml` with `[store] url`) takes those commands to the same database, so no
//! password is ever written into a crontab, a unit or a host's config.

use std::path::{Path, PathBuf};

use super::{Change, files};
use crate::cli::Ctx;
use crate::kernel::{Code, Error, Result};
use crate::store::FileStore;
use crate::store::open::pointed_url;
use crate::store::pg::redact;

/// The pointer's path below the root.
const POINTER: &str = ".loopx/loopx.toml";

/// Where the wiring of a project on a database runs, and what reaches the database from there.
#[derive(Debug)]
pub struct DbRoot {
    /// The root the wiring's commands run in (`--dir ROOT`).
    pub root: PathBuf,
    /// The pointer there: found (unchanged) or to be written.
    pub pointer: Change,
    /// The login the URL connects as, if it names one.
    pub login: Option<String>,
}

/// The root for the database `url`: the project whose pointer names it (found from `--dir` or
/// here, as every command finds it), else the work dir, where a pointer is written when the URL
/// holds no password. A URL with a password, or a project here that is not that pointer, is
/// refused (exit 2) with what to do.
pub fn root(ctx: &Ctx, url: &str) -> Result<DbRoot> {
    let cfg: postgres::Config = url
        .parse()
        .map_err(|e| Error::usage(format!("{} is not a PostgreSQL URL: {e}", redact(url))))?;
    let login = cfg.get_user().map(str::to_string);
    let found = match FileStore::discover(ctx.dir.as_deref(), &ctx.cwd) {
        Ok(files) => Some(files),
        Err(e) if e.code == Code::NotInitialized => None,
        Err(e) => return Err(e),
    };
    match found {
        Some(files) => pointing(&files, url, login),
        None => new_pointer(ctx, &cfg, url, login),
    }
}

/// The root of the project found here: its pointer kept when it names `url`, else refused.
fn pointing(files: &FileStore, url: &str, login: Option<String>) -> Result<DbRoot> {
    let root = super::absolute(files.root());
    match pointed_url(&files.path("loopx.toml"))? {
        Some(u) if u == url => {
            let old = files::read(&root, POINTER)?;
            let pointer = files::change(POINTER, old, Vec::new(), true);
            Ok(DbRoot {
                root,
                pointer,
                login,
            })
        }
        Some(_) => Err(Error::usage(format!(
            "{} points at another database than --store / LOOPX_STORE",
            root.join(POINTER).display()
        ))
        .hint("run setup without --store and LOOPX_STORE to wire the database it names")),
        None => Err(Error::usage(format!(
            "{} holds a project on files: the wiring would reach it, not the database",
            root.display()
        ))
        .hint("run setup in (or with --dir) a directory without .loopx/, or make its .loopx/loopx.toml a pointer to the database")),
    }
}

/// The work dir with a new pointer to `url`, which must hold no password.
fn new_pointer(
    ctx: &Ctx,
    cfg: &postgres::Config,
    url: &str,
    login: Option<String>,
) -> Result<DbRoot> {
    let root = work_root(ctx);
    if !root.is_dir() {
        return Err(
            Error::usage(format!("{} is not a directory", root.display()))
                .hint("give --dir an existing directory (the agents' work dir)"),
        );
    }
    if cfg.get_password().is_some() {
        return Err(
            Error::usage("setup will not write a password into the project's files").hint(format!(
                "write the pointer yourself, readable by you only: mkdir -p .loopx && (umask 077; \
             printf '[store]\\nurl = \"...\"\\n' > {POINTER}), then run setup again without \
             --store; or give a URL the server lets in without a password"
            )),
        );
    }
    let text = format!(
        "# Written by `loopx setup`: this project's state is in a database.\n{}",
        pointer_toml(url)?
    );
    let mut pointer = files::whole(&root, POINTER, text)?;
    pointer.private = true;
    Ok(DbRoot {
        root,
        pointer,
        login,
    })
}

/// `[store] url = "..."`, as TOML writes it.
fn pointer_toml(url: &str) -> Result<String> {
    let mut store = toml::Table::new();
    store.insert("url".into(), toml::Value::String(url.to_string()));
    let mut t = toml::Table::new();
    t.insert("store".into(), toml::Value::Table(store));
    toml::to_string(&t).map_err(|e| Error::new(Code::Internal, e.to_string()))
}

/// The work dir: `--dir`, else here; absolute.
fn work_root(ctx: &Ctx) -> PathBuf {
    let dir: &Path = ctx.dir.as_deref().unwrap_or(Path::new("."));
    super::absolute(&ctx.cwd.join(dir))
}
