//! Whether a program can start: found (on PATH or as a path), executable, and its `#!`
//! interpreter too, checked before anything is claimed or spent.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use crate::kernel::{Error, Result};
use crate::text::escape as esc;

/// Refuses a program that cannot be found or run (its `#!` interpreter too), before anything
/// is claimed or spent; a relative path is found from `dir`, where the command runs.
pub fn check(dir: &Path, prog: &OsString) -> Result<()> {
    let found = find(dir, prog)?;
    check_interpreter(&found, prog)
}

/// The program's file: `prog` itself when it names a path (from `dir`), else the first on PATH.
fn find(dir: &Path, prog: &OsString) -> Result<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let p = Path::new(prog);
    let runs = |f: &Path| {
        f.metadata()
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    let shown = esc(&prog.to_string_lossy()).into_owned();
    if p.components().count() > 1 || prog.to_string_lossy().contains('/') {
        let p = dir.join(p);
        if runs(&p) {
            return Ok(p);
        }
        if p.is_file() {
            return Err(
                Error::usage(format!("`{shown}` is not executable")).hint(format!(
                    "`chmod +x {shown}`, or run it through its interpreter (`sh {shown}`)"
                )),
            );
        }
    } else if let Some(f) = std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|d| d.join(p))
            .find(|f| runs(f))
    }) {
        return Ok(f);
    }
    Err(Error::usage(format!("cannot find the command `{shown}`"))
        .hint("give a program on PATH or a path to one, after `--`"))
}

/// Refuses a script whose `#!` line names an interpreter that is missing or not executable
/// (the kernel would refuse to start it). A file loopx cannot read is left to the kernel.
fn check_interpreter(file: &Path, prog: &OsString) -> Result<()> {
    use std::io::Read as _;
    use std::os::unix::fs::PermissionsExt;
    let mut head = [0u8; 256];
    let n = match std::fs::File::open(file).and_then(|mut f| f.read(&mut head)) {
        Ok(n) => n,
        Err(_) => return Ok(()),
    };
    let Some(line) = head[..n].strip_prefix(b"#!") else {
        return Ok(());
    };
    let line = line.split(|b| *b == b'\n').next().unwrap_or(&[]);
    let Some(interp) = line
        .split(|b| *b == b' ' || *b == b'\t')
        .find(|w| !w.is_empty())
    else {
        return Ok(());
    };
    let interp = Path::new(<std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(interp));
    let runs = interp
        .metadata()
        .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0);
    if runs {
        return Ok(());
    }
    let shown = esc(&prog.to_string_lossy()).into_owned();
    Err(Error::usage(format!(
        "`{shown}` cannot start: its interpreter `{}` is missing or not executable",
        esc(&interp.to_string_lossy())
    ))
    .hint(format!(
        "fix the `#!` line of `{shown}`, or install its interpreter"
    )))
}
