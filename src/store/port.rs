//! Moving a project from its `.loopx/` directory into a database, with nothing lost: the same
//! todos, gates, evidence, spends, journal lines (byte for byte) and owner signatures. The one
//! place that knows both stores (an export is the database's own).

use std::collections::BTreeMap;

use crate::kernel::{Code, Error, QuotaFile, Result};
use crate::store::Reads;
use crate::store::core::parse;
use crate::store::fs::FileStore;
use crate::store::pg::port::{Moved, OWNER_DOCS, Project, json_lines};
use crate::store::pg::{PgStore, history};

/// Copies the project in `files` into the database `db`, which must have the schema and no goal
/// yet; one transaction, so a failure leaves the database as it was.
pub fn import(db: &PgStore, files: &FileStore) -> Result<Moved> {
    let check = files.verify_journal()?;
    if let Some(b) = &check.broken {
        return Err(
            Error::invalid(".loopx/journal.jsonl", Some(b.line), b.message.clone())
                .hint("repair the journal with `loopx doctor` before importing"),
        );
    }
    let snap = files.load_raw()?;
    if let Some((id, p)) = snap.quarantined.iter().next() {
        return Err(
            Error::invalid(&p.file, p.line, p.message.clone()).hint(format!(
                "fix {id} (or move it out of .loopx/) before importing: an import loses nothing"
            )),
        );
    }
    let lines = json_lines(&files.journal_path())?;
    let mut archived = Vec::new();
    for id in files.archived_ids()? {
        let t = files
            .archived_todo(&id)?
            .ok_or_else(|| Error::new(Code::NotFound, format!("archived todo {id} vanished")))?;
        archived.push(t);
    }
    let quota = parse::read::<QuotaFile>(&files.path("quota.toml"))?.unwrap_or_default();
    let mut evidence = Vec::new();
    for id in snap.todos.keys().chain(archived.iter().map(|t| &t.id)) {
        for (_, v) in json_lines(&files.evidence_path(id))? {
            evidence.push((id.clone(), v));
        }
    }
    let mut docs = BTreeMap::new();
    for name in OWNER_DOCS {
        if let Some(b) = parse::read_bytes(&files.path(name))? {
            let t = String::from_utf8(b)
                .map_err(|_| Error::invalid(&format!(".loopx/{name}"), None, "not UTF-8"))?;
            docs.insert(name, t);
        }
    }
    db.import(Project {
        snap,
        lines,
        archived,
        quota,
        evidence,
        docs,
        history: history::read_dir(files.dir())?,
    })
}
