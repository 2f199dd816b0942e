//! `doctor`: the store's checks (files or database), and the orphaned worktrees beside them.

use serde_json::json;

use super::{Ctx, Out, to_json};
use crate::kernel::Result;
use crate::store::doctor::{self, Severity};
use crate::text::escape as esc;

/// `doctor [--fix]`.
pub fn doctor(ctx: &Ctx, fix: bool) -> Result<Out> {
    let (fixed, findings) = match &ctx.store_url {
        Some(url) => {
            if fix {
                return Err(crate::kernel::Error::usage(
                    "doctor --fix repairs files; a database is changed only by its transactions",
                )
                .hint("run `loopx doctor` to see what is wrong, then act on each finding"));
            }
            let db = crate::store::pg::PgStore::new(url, ctx.env())?;
            (Vec::new(), doctor::check_db(&db, ctx.now)?)
        }
        None => {
            let store = ctx.store()?;
            let fixed = if fix {
                doctor::fix(&store, ctx.now)?
            } else {
                Vec::new()
            };
            (fixed, doctor::check_locked(&store, ctx.now)?)
        }
    };
    let mut findings = findings;
    findings.extend(worktree_findings(ctx));
    let errors = findings
        .iter()
        .filter(|f| f.severity == Severity::Error)
        .count();
    let healthy = errors == 0;
    let mut text = String::new();
    for f in &fixed {
        text.push_str(&format!("fixed: {}\n", esc(f)));
    }
    for f in &findings {
        let at = match f.line {
            Some(l) => format!("{}:{l}", esc(&f.file)),
            None => esc(&f.file).into_owned(),
        };
        let sev = if f.severity == Severity::Error {
            "error"
        } else {
            "warning"
        };
        let fx = if f.fixable && !fix {
            " (doctor --fix repairs it)"
        } else {
            ""
        };
        text.push_str(&format!("{sev}: {at}: {}{fx}\n", esc(&f.message)));
    }
    text.push_str(if healthy { "healthy" } else { "unhealthy" });
    if !healthy {
        text.push_str(&format!(
            ": {errors} error{}",
            if errors == 1 { "" } else { "s" }
        ));
    }
    let mut out = Out::new("findings", to_json(&findings), text)
        .with("ok", json!(healthy))
        .with("fixed", json!(fixed));
    out.exit = if healthy { 0 } else { 6 };
    if !healthy && !ctx.json {
        // The text goes to stdout; a short line for people to stderr too.
        eprintln!("loopx: doctor found {errors} error(s)");
    }
    Ok(out)
}

/// Orphaned worktrees (no live lease names them), as warnings; nothing when the leases cannot
/// be read (doctor names why already). Reads only: the files as doctor reads them.
fn worktree_findings(ctx: &Ctx) -> Vec<doctor::Finding> {
    let read = || -> crate::kernel::Result<(std::path::PathBuf, Vec<String>)> {
        match &ctx.store_url {
            Some(url) => {
                let db = crate::store::pg::PgStore::new(url, ctx.env())?;
                let snap = crate::store::Store::load(&db)?;
                let live = snap
                    .todos
                    .values()
                    .filter_map(|t| t.live_lease(ctx.now).and_then(|l| l.worktree.clone()))
                    .collect();
                Ok((ctx.work_dir(&db), live))
            }
            None => {
                let s = ctx.store()?;
                let live = doctor::live_worktrees(&s, ctx.now)?;
                Ok((s.root().to_path_buf(), live))
            }
        }
    };
    let Ok((root, live)) = read() else {
        return Vec::new();
    };
    crate::runtime::worktree::orphans(&root, &live)
        .into_iter()
        .map(|o| doctor::Finding {
            severity: Severity::Warning,
            file: o.path,
            line: None,
            message: o.message,
            fixable: false,
        })
        .collect()
}
