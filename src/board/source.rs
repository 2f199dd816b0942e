//! What the board works on: a store it reads and changes through the `Store` trait, and which
//! kind it is (the files, with their per-file reloads and file events, or a database).

use crate::kernel::Result;
use crate::kernel::authority::OwnerPub;
use crate::store::parse::shown;
use crate::store::pg::PgStore;
use crate::store::{FileStore, Store};

/// The store the board shows.
#[derive(Debug)]
pub enum Source {
    /// A project's `.loopx/` directory: reloads by changed file, live through file events.
    Files(FileStore),
    /// A PostgreSQL database: full loads (incremental by journal position), live through
    /// `LISTEN`/`NOTIFY`.
    Db(Box<PgStore>),
}

impl From<FileStore> for Source {
    fn from(s: FileStore) -> Source {
        Source::Files(s)
    }
}

impl From<PgStore> for Source {
    fn from(s: PgStore) -> Source {
        Source::Db(Box::new(s))
    }
}

impl Source {
    /// The store: every read and every change of the board goes through it.
    pub fn store(&self) -> &(dyn Store + Sync) {
        match self {
            Source::Files(f) => f,
            Source::Db(d) => d.as_ref(),
        }
    }

    /// The file store, when the board is on files.
    pub fn files(&self) -> Option<&FileStore> {
        match self {
            Source::Files(f) => Some(f),
            Source::Db(_) => None,
        }
    }

    /// The project's owner public key, if it has one.
    pub fn owner_pub(&self) -> Result<Option<OwnerPub>> {
        match self {
            Source::Files(f) => f.owner_pub(),
            Source::Db(d) => d.owner_pub(),
        }
    }

    /// The project as the status bar names it: its root, or the database's URL (no password).
    pub fn name(&self) -> String {
        match self {
            Source::Files(f) => f.root().display().to_string(),
            Source::Db(d) => d.shown_url(),
        }
    }

    /// What a failed load names as its file: `.loopx`, or `database`.
    pub fn whole(&self) -> String {
        match self {
            Source::Files(f) => shown(f.dir()),
            Source::Db(_) => "database".into(),
        }
    }

    /// What a failed read of a todo's evidence names as its file.
    pub fn evidence_name(&self, id: &str) -> String {
        match self {
            Source::Files(f) => shown(&f.evidence_path(id)),
            Source::Db(_) => format!("database:evidence/{id}"),
        }
    }
}
