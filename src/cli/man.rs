//! `loopx man`: the manual pages, rendered from the same clap definition as `--help`.

use std::path::{Path, PathBuf};

use clap::CommandFactory as _;
use serde_json::json;

use super::{Cli, Out};
use crate::kernel::{Code, Error, Result};

/// The most pages one `--out` writes (the command tree is far smaller).
const MAX_PAGES: usize = 500;

/// Prints loopx.1, or with `out` writes loopx.1 and one page per subcommand there.
pub fn run(out: Option<PathBuf>) -> Result<Out> {
    let mut cmd = Cli::command().disable_help_subcommand(true);
    cmd.build();
    let Some(dir) = out else {
        let page = render(&cmd)?;
        return Ok(Out::new("page", json!(page), page.trim_end()));
    };
    let mut written = Vec::new();
    write_tree(&cmd, &dir, &mut written)?;
    let text = format!("wrote {} pages to {}", written.len(), dir.display());
    Ok(Out::new("files", json!(written), text))
}

/// One command's page as roff.
fn render(cmd: &clap::Command) -> Result<String> {
    let mut buf = Vec::new();
    clap_mangen::Man::new(cmd.clone())
        .render(&mut buf)
        .map_err(|e| Error::new(Code::Internal, format!("cannot render the man page: {e}")))?;
    Ok(String::from_utf8_lossy(&buf).into_owned())
}

/// Writes `cmd`'s page and those of its visible subcommands into `dir`.
fn write_tree(cmd: &clap::Command, dir: &Path, written: &mut Vec<String>) -> Result<()> {
    if written.len() >= MAX_PAGES {
        return Ok(());
    }
    let name = format!("{}.1", cmd.get_display_name().unwrap_or(cmd.get_name()));
    let path = dir.join(&name);
    std::fs::write(&path, render(cmd)?).map_err(|e| {
        Error::io(&path, &e).hint("give --out an existing directory you can write to")
    })?;
    written.push(name);
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        write_tree(sub, dir, written)?;
    }
    Ok(())
}
