//! `store`: the PostgreSQL store's schema and roles, and moving a project between a
//! `.loopx/` directory and a database.

use std::path::PathBuf;

use clap::Subcommand;
use serde_json::json;

use super::{Ctx, Out};
use crate::kernel::{Error, Result};
use crate::store::FileStore;
use crate::store::pg::port::Moved;
use crate::store::pg::{PgStore, redact, roles::Roles};

/// `store ...`.
#[derive(Debug, Subcommand)]
pub enum StoreCmd {
    /// Create or upgrade the database's schema and its owner and agent roles (run as a role
    /// that may create roles, e.g. the database's owner).
    #[command(after_help = "Example:\n  loopx --store postgres://admin@db/loopx store migrate")]
    Migrate {
        /// The roles are PREFIX_owner and PREFIX_agent.
        #[arg(long, default_value = "loopx", value_name = "PREFIX")]
        roles: String,
    },
    /// Copy a `.loopx/` project into the database (which must hold no project yet); run as
    /// the owner's role.
    #[command(
        after_help = "Example:\n  loopx --store postgres://owner@db/loopx store import --from ."
    )]
    Import {
        /// The directory that holds `.loopx/`.
        #[arg(long, value_name = "DIR", default_value = ".")]
        from: PathBuf,
    },
    /// Write the database's project into `DIR/.loopx/` (which must not exist).
    #[command(
        after_help = "Example:\n  loopx --store postgres://owner@db/loopx store export --to ./back"
    )]
    Export {
        /// The directory to hold the new `.loopx/`.
        #[arg(long, value_name = "DIR")]
        to: PathBuf,
    },
}

/// Runs a `store` subcommand.
pub fn run(ctx: &Ctx, c: StoreCmd) -> Result<Out> {
    let url = ctx.store_url.as_deref().ok_or_else(|| {
        Error::usage("which database? give --store postgres://USER@HOST/DB (or LOOPX_STORE)")
    })?;
    let db = PgStore::new(url, ctx.env())?;
    let shown = redact(url);
    match c {
        StoreCmd::Migrate { roles } => {
            let r = Roles::with_prefix(&roles)?;
            let m = db.migrate(&r)?;
            let text = if m.from == m.to {
                format!(
                    "{shown}: schema {} is current; roles {} and {}",
                    m.to, r.owner, r.agent
                )
            } else {
                format!(
                    "{shown}: schema {} -> {}; roles {} and {}",
                    m.from, m.to, r.owner, r.agent
                )
            };
            Ok(Out::new(
                "migrated",
                json!({"from": m.from, "to": m.to, "owner_role": r.owner, "agent_role": r.agent}),
                text,
            ))
        }
        StoreCmd::Import { from } => {
            let root = ctx.cwd.join(from);
            let files = FileStore::discover(Some(&root), &ctx.cwd)?.with_env(ctx.env());
            let m = crate::store::port::import(&db, &files)?;
            let text = format!("imported into {shown}: {}", moved(&m));
            Ok(Out::new("imported", json!(m), text))
        }
        StoreCmd::Export { to } => {
            let root = ctx.cwd.join(to);
            std::fs::create_dir_all(&root).map_err(|e| Error::io(&root, &e))?;
            let m = db.export(&root)?;
            let text = format!(
                "exported {shown} to {}: {}",
                root.join(".loopx").display(),
                moved(&m)
            );
            Ok(Out::new("exported", json!(m), text))
        }
    }
}

/// What an import or export moved, as a line's end.
fn moved(m: &Moved) -> String {
    let history = match m.history {
        0 => String::new(),
        n => format!(", {n} files of replaced goals (history/)"),
    };
    format!(
        "{} todos, {} gates, {} evidence, {} spends, {} journal lines{history}",
        m.todos, m.gates, m.evidence, m.spends, m.journal
    )
}
