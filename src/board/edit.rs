//! A broken file opened in `$EDITOR` from the board: only a regular file inside `.loopx/`, never
//! through a symlink, with the terminal handed to the editor and taken back after.

use std::fs;
use std::path::{Component, Path, PathBuf};
use std::process::Command;

use crate::board::data::JOURNAL_FILE;
use crate::board::term::Term;

/// The file `rel` (relative to the project at `root`) if the board may open it in an editor: a
/// regular file under `.loopx/` reached without a symlink or `..`, and not the journal.
pub fn editable(root: &Path, rel: &str) -> Result<PathBuf, String> {
    let refuse = |why: &str| Err(format!("not opening {rel}: {why}"));
    if rel == JOURNAL_FILE {
        return refuse(
            "the journal is append-only and chained; `loopx doctor` says how to repair it",
        );
    }
    let parts: Vec<Component> = Path::new(rel).components().collect();
    let plain = parts.iter().all(|c| matches!(c, Component::Normal(_)));
    if !plain || parts.first() != Some(&Component::Normal(".loopx".as_ref())) || parts.len() < 2 {
        return refuse("only files inside .loopx/ open from the board");
    }
    let mut path = root.to_path_buf();
    for c in &parts {
        path.push(c);
        match fs::symlink_metadata(&path) {
            Ok(m) if m.file_type().is_symlink() => {
                return refuse("it is reached through a symlink, which could lead out of .loopx/");
            }
            Ok(_) => {}
            Err(e) => return refuse(&format!("{e}")),
        }
    }
    match fs::symlink_metadata(&path) {
        Ok(m) if m.file_type().is_file() => Ok(path),
        _ => refuse("it is not a regular file"),
    }
}

/// The editor to run: `$EDITOR`, else `$VISUAL`, else `vi`.
fn editor() -> String {
    ["EDITOR", "VISUAL"]
        .iter()
        .filter_map(|v| std::env::var(v).ok())
        .find(|e| !e.trim().is_empty())
        .unwrap_or_else(|| "vi".into())
}

/// Opens the file of a problem in the editor on the real terminal; a line for the status bar, or
/// why it did not open. The caller reloads after.
pub fn run(term: &mut Term, root: &Path, rel: &str) -> Result<String, String> {
    let path = editable(root, rel)?;
    let ed = editor();
    // As git does: the shell splits `$EDITOR` (it may carry flags); the path is an argument.
    let status = term.hand_over(|| {
        Command::new("sh")
            .arg("-c")
            .arg(format!("{ed} \"$@\""))
            .arg(&ed)
            .arg(&path)
            // The file is agents' text and editors run what some files say (modelines).
            .env_remove("LOOPX_OWNER_KEY")
            .status()
    });
    match status {
        Ok(s) if s.success() => Ok(format!("edited {rel}; reloaded")),
        Ok(s) => Err(format!(
            "the editor ({ed}) exited with {s}; reloaded {rel} anyway"
        )),
        Err(e) => Err(format!("cannot run the editor ({ed}): {e}; set $EDITOR")),
    }
}
