//! `doctor`: the store's checks (files or database), and the orphaned worktrees beside them.

use serde_json::json;

use super::{Ctx, Out, to_json};
use crate::kernel::{Error, Result};
use crate::store::Admin;
use crate::store::doctor::{self, Severity};
use crate::text::escape as esc;

/// `doctor [--fix]`.
pub fn doctor(ctx: &Ctx, fix: bool) -> Result<Out> {
    let store = ctx.open()?;
    let fixed = if fix {
        repair(store.as_ref())?
    } else {
        Vec::new()
    };
    let mut findings = store.doctor()?;
    findings.extend(worktree_findings(ctx, store.as_ref()));
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

/// `--fix`: the file store's repairs; refused on a database (exit 2), which only its
/// transactions change.
fn repair(store: &dyn Admin) -> Result<Vec<String>> {
    match store.files() {
        Some(files) => files.doctor_fix(),
        None => Err(Error::usage(
            "doctor --fix repairs files; a database is changed only by its transactions",
        )
        .hint("run `loopx doctor` to see what is wrong, then act on each finding")),
    }
}

/// Orphaned worktrees (no live lease names them), as warnings; nothing when the leases cannot
/// be read (doctor names why already). Reads only: as doctor reads.
fn worktree_findings(ctx: &Ctx, store: &dyn Admin) -> Vec<doctor::Finding> {
    let Ok(live) = store.live_worktrees() else {
        return Vec::new();
    };
    let root = ctx.work_dir(store);
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
