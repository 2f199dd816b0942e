//! `projects`: the list of projects `loopx board --all` shows (`projects.toml` in the config
//! directory): add, remove, list.

use std::path::{Path, PathBuf};

use clap::Subcommand;
use serde_json::{Value, json};

use super::{Ctx, Out};
use crate::kernel::{Code, Error, Result};
use crate::store::FileStore;
use crate::store::projects::{self, Entry, Projects};
use crate::text::escape as esc;

/// `projects ...`.
#[derive(Debug, Subcommand)]
pub enum ProjectsCmd {
    /// Add a project to the list: a project root (default: this project), or `--store URL`.
    #[command(
        after_help = "Example:\n  loopx projects add ~/work/wx\n  loopx projects add --name api ../api\n  loopx --store postgres://owner@db/loopx projects add --name shared"
    )]
    Add {
        /// The project's root (it holds .loopx/); default: this project, or the `--store` database.
        #[arg(value_name = "PATH")]
        path: Option<PathBuf>,
        /// Its name on the overview (default: the directory's or the database's name).
        #[arg(long, value_name = "NAME")]
        name: Option<String>,
    },
    /// Remove a project from the list, by name or path (its state is not touched).
    #[command(after_help = "Example:\n  loopx projects remove wx")]
    Remove {
        /// The project's name, path or store URL.
        #[arg(value_name = "NAME|PATH")]
        project: String,
    },
    /// The projects in the list (a database's URL without its password).
    #[command(after_help = "Example:\n  loopx projects list --json")]
    List,
}

/// Runs a `projects` command.
pub fn run(ctx: &Ctx, cmd: ProjectsCmd) -> Result<Out> {
    let file = list_path(ctx)?;
    match cmd {
        ProjectsCmd::Add { path, name } => add(ctx, &file, path, name),
        ProjectsCmd::Remove { project } => {
            let e = projects::edit(&file, ctx.lock_wait, |p| p.remove(&project, &ctx.cwd))?;
            let text = format!(
                "removed {} ({}) from {}",
                e.name,
                esc(&e.shown()),
                file.display()
            );
            Ok(Out::new("removed", e.json(), text))
        }
        ProjectsCmd::List => {
            let p = projects::read(&file)?;
            Ok(listed(&file, &p))
        }
    }
}

/// Where the list is, or exit 2 when there is no config directory.
pub fn list_path(ctx: &Ctx) -> Result<PathBuf> {
    ctx.projects.clone().ok_or_else(|| {
        Error::usage("no XDG_CONFIG_HOME or HOME to find projects.toml")
            .hint("set HOME (the list is ~/.config/loopx/projects.toml)")
    })
}

fn add(ctx: &Ctx, file: &Path, path: Option<PathBuf>, name: Option<String>) -> Result<Out> {
    let entry = match (path, &ctx.store_url) {
        (Some(p), _) => files_entry(ctx, &p, name)?,
        (None, Some(url)) if ctx.explicit_store => Entry {
            name: name.unwrap_or_else(|| projects::name_of_url(url)),
            path: None,
            store: Some(url.clone()),
        },
        (None, _) => {
            let root = FileStore::discover(ctx.dir.as_deref(), &ctx.cwd)?
                .root()
                .to_path_buf();
            files_entry(ctx, &root, name)?
        }
    };
    projects::edit(file, ctx.lock_wait, |p| p.add(entry.clone()))?;
    let text = format!(
        "added {} ({}) to {}",
        entry.name,
        esc(&entry.shown()),
        file.display()
    );
    Ok(Out::new("added", entry.json(), text))
}

/// A project root as an entry: an existing directory that holds `.loopx/`, by its full path.
fn files_entry(ctx: &Ctx, p: &Path, name: Option<String>) -> Result<Entry> {
    let root = ctx.cwd.join(p).canonicalize().map_err(|e| {
        Error::new(Code::NotFound, format!("{}: {e}", p.display()))
            .hint("give the root of a loopx project (it holds .loopx/)")
    })?;
    FileStore::discover(Some(&root), &ctx.cwd)?;
    let name = name.unwrap_or_else(|| {
        projects::name_from(
            &root
                .file_name()
                .map(|n| n.to_string_lossy())
                .unwrap_or_default(),
        )
    });
    Ok(Entry {
        name,
        path: Some(root),
        store: None,
    })
}

fn listed(file: &Path, p: &Projects) -> Out {
    let items: Vec<Value> = p.projects.iter().map(Entry::json).collect();
    let mut text = if p.projects.is_empty() {
        format!(
            "no projects in {} (`loopx projects add PATH`)",
            file.display()
        )
    } else {
        String::new()
    };
    let w = p
        .projects
        .iter()
        .map(|e| e.name.chars().count())
        .max()
        .unwrap_or(0);
    for e in &p.projects {
        text.push_str(&format!("{:<w$}  {}\n", e.name, esc(&e.shown())));
    }
    let mut out = Out::new("projects", Value::Array(items), text.trim_end().to_string());
    out.json
        .insert("file".into(), json!(file.display().to_string()));
    out
}
