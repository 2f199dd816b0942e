//! Shell completion: the `COMPLETE=SHELL loopx` hook, `loopx completions SHELL`, and the
//! completers that list todo and gate ids from the file names on disk.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use clap::CommandFactory as _;
use clap_complete::engine::{ArgValueCompleter, CompletionCandidate};
use clap_complete::env::Shells;

use crate::kernel::id::{Kind, is_full_id};
use crate::kernel::{Code, Error, Result};
use crate::store::FileStore;

/// The environment variable that turns a run of loopx into a completion request.
const VAR: &str = "COMPLETE";
/// The most ids one completion offers.
const MAX_IDS: usize = 200;
/// The most directory entries one completion reads.
const MAX_ENTRIES: usize = 5_000;

/// Answers a completion request and exits when `COMPLETE` is set; otherwise one lookup, no more.
pub fn hook() {
    if std::env::var_os(VAR).is_some() {
        clap_complete::CompleteEnv::with_factory(super::Cli::command)
            .var(VAR)
            .complete();
    }
}

/// The registration script for `shell`: what `COMPLETE=SHELL loopx` prints.
pub fn script(shell: clap_complete::Shell) -> Result<String> {
    let name = shell.to_string();
    let shells = Shells::builtins();
    let completer = shells.completer(&name).ok_or_else(|| {
        Error::usage(format!("no dynamic completion for {name}"))
            .hint("use bash, zsh, fish, elvish or powershell")
    })?;
    let path = self_path();
    // clap_complete's bash script puts its quoted path inside double quotes, where the quotes
    // stay literal and `$(...)` runs: the path goes in plain there, then is quoted for sh here.
    let bash = shell == clap_complete::Shell::Bash && crate::text::sh_word(&path) != path;
    let given = if bash { PLACEHOLDER } else { path.as_str() };
    let mut buf = Vec::new();
    completer
        .write_registration(VAR, "loopx", "loopx", given, &mut buf)
        .map_err(|e| Error::new(Code::Io, format!("cannot write the script: {e}")))?;
    let text = String::from_utf8_lossy(&buf).into_owned();
    Ok(if bash {
        text.replace(&format!("\"{PLACEHOLDER}\""), &crate::text::sh_word(&path))
    } else {
        text
    })
}

/// A plain stand-in for this binary's path while clap_complete writes a bash script.
const PLACEHOLDER: &str = "/loopx-completion-self";

/// How the shell calls loopx back: argv[0] as `CompleteEnv` takes it (absolute if it has a dir).
fn self_path() -> String {
    let argv0 = std::env::args_os()
        .next()
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("loopx"));
    let full = match std::env::current_dir() {
        Ok(cwd) if argv0.components().count() > 1 => cwd.join(argv0),
        _ => argv0,
    };
    full.to_string_lossy().into_owned()
}

/// Completes a todo id: the open, blocked and deferred todos' file names.
pub fn todo_ids(current: &OsStr) -> Vec<CompletionCandidate> {
    ids("todos", Kind::Todo, current)
}

/// Completes a gate id: the gates' file names.
pub fn gate_ids(current: &OsStr) -> Vec<CompletionCandidate> {
    ids("gates", Kind::Gate, current)
}

/// The ids in `.loopx/SUB/` that start with what was typed (with or without the prefix letter).
fn ids(sub: &str, kind: Kind, current: &OsStr) -> Vec<CompletionCandidate> {
    let typed = current.to_string_lossy().to_ascii_lowercase();
    let Some(dir) = state_dir(sub) else {
        return Vec::new();
    };
    let mut found = list_ids(&dir, kind, |id| {
        id.starts_with(&typed) || id[kind.prefix().len()..].starts_with(&typed)
    });
    found.sort();
    found.into_iter().map(CompletionCandidate::new).collect()
}

/// `.loopx/SUB` of the project found from `LOOPX_DIR` or the working directory, if it is a
/// real directory (a symlink is never followed).
fn state_dir(sub: &str) -> Option<PathBuf> {
    let cwd = std::env::current_dir().ok()?;
    let explicit = std::env::var_os("LOOPX_DIR").map(PathBuf::from);
    let store = FileStore::discover(explicit.as_deref(), &cwd).ok()?;
    let dir = store.dir().join(sub);
    (real_dir(store.dir()) && real_dir(&dir)).then_some(dir)
}

/// True when `p` is a directory and not a symlink.
fn real_dir(p: &Path) -> bool {
    std::fs::symlink_metadata(p).is_ok_and(|m| m.is_dir())
}

/// Well-formed ids that `keep` accepts of regular `ID.toml` files in `dir`, bounded; nothing
/// is parsed.
fn list_ids(dir: &Path, kind: Kind, keep: impl Fn(&str) -> bool) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .take(MAX_ENTRIES)
        .filter_map(|e| e.ok())
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            let id = name.strip_suffix(".toml")?;
            (is_full_id(kind, id) && keep(id)).then(|| id.to_string())
        })
        .take(MAX_IDS)
        .collect()
}

/// The completer for an argument that takes a todo id.
pub fn todo_id() -> ArgValueCompleter {
    ArgValueCompleter::new(todo_ids)
}

/// The completer for an argument that takes a gate id.
pub fn gate_id() -> ArgValueCompleter {
    ArgValueCompleter::new(gate_ids)
}
