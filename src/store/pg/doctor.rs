//! `doctor` on a database: the schema, the journal's chain, rows that cannot be read, the
//! relations between records (the same checks as on files) and the owner's seal.

use std::path::PathBuf;

use super::PgStore;
use crate::kernel::{Result, Ts};
use crate::store::core::doctor::{Doc, Finding, State, check_relations};
use crate::store::{Admin, Reads, Store};

fn doc<T>(table: &str, id: &str, value: T) -> Doc<T> {
    Doc {
        value,
        path: PathBuf::from(format!("database:{table}/{id}")),
    }
}

/// Every check of a database project.
pub fn check(db: &PgStore, now: Ts) -> Result<Vec<Finding>> {
    let mut out = Vec::new();
    let snap = db.load()?;
    let check = db.verify_journal()?;
    if let Some(b) = &check.broken {
        out.push(Finding::error(
            "database:journal",
            Some(b.line),
            b.message.clone(),
        ));
    }
    for (id, p) in &snap.quarantined {
        out.push(Finding::error(
            p.file.clone(),
            None,
            format!("{id} cannot be read: {}", p.message),
        ));
    }
    for n in &snap.owner_notes {
        out.push(Finding::error("database:docs/owner.seal", None, n.clone()));
    }
    let mut archived = Vec::new();
    for id in db.archived_ids()? {
        if let Some(t) = db.archived_todo(&id)? {
            archived.push(doc("todos", &id, t));
        }
    }
    let state = State {
        config: Some(doc("config", "goal", snap.config.clone())),
        todos: snap
            .todos
            .values()
            .map(|t| doc("todos", &t.id, t.clone()))
            .collect(),
        archived,
        gates: snap
            .gates
            .values()
            .map(|g| doc("gates", &g.id, g.clone()))
            .collect(),
        quota: Some(doc("docs", "quota", snap.quota.clone())),
    };
    check_relations(&state, now, &mut out);
    Ok(out)
}
