//! The database as a [`Store`] and an [`Admin`]: the traits' methods on the `loopx` schema.

use super::{PgStore, commit, db_error};
use crate::kernel::id::{self, Kind};
use crate::kernel::{Code, Config, Error, Event, Evidence, Result, Snapshot, Todo};
use crate::store::Env;
use crate::store::live::Followed;
use crate::store::{Admin, GoalPlan, Keep, Reads, Store, Transaction, doctor};

impl Store for PgStore {
    fn env(&self) -> &Env {
        PgStore::env(self)
    }

    fn load(&self) -> Result<Snapshot> {
        let now = self.env.now;
        self.with(|c| c.fresh_copy(now))
    }

    fn begin(&self) -> Result<Box<dyn Transaction + '_>> {
        Ok(Box::new(commit::PgTx::begin(self)?))
    }

    fn fresh_id(&self, kind: Kind) -> Result<String> {
        let sql = match kind {
            Kind::Todo => "SELECT count(*) FROM loopx.todos WHERE id = $1",
            Kind::Gate => "SELECT count(*) FROM loopx.gates WHERE id = $1",
        };
        crate::store::fresh_id_where(kind, |id| Ok(self.count(sql, &[&id])? > 0))
    }
}

impl Reads for PgStore {
    fn resolve_todo(&self, snap: &Snapshot, input: &str) -> Result<String> {
        let want = id::normalize(Kind::Todo, input)?;
        if snap.todos.contains_key(&want) || snap.quarantined.contains_key(&want) {
            return Ok(want);
        }
        let archived: Vec<String> =
            self.with(|c| Ok(c.cache.archived.keys().cloned().collect()))?;
        if archived.contains(&want) {
            return Ok(want);
        }
        match id::resolve(Kind::Todo, input, snap.todos.keys().map(String::as_str)) {
            Err(e) if e.code == Code::NotFound => {
                id::resolve(Kind::Todo, input, archived.iter().map(String::as_str))
            }
            other => other,
        }
    }

    fn archived_todo(&self, id: &str) -> Result<Option<Todo>> {
        let row = self.with(|c| {
            c.client()?
                .query_opt(
                    "SELECT body::text FROM loopx.todos WHERE id = $1 AND archived",
                    &[&id],
                )
                .map_err(db_error)
        })?;
        row.map(|r| {
            serde_json::from_str(&r.get::<_, String>(0))
                .map_err(|e| Error::invalid(&format!("database:todos/{id}"), None, e.to_string()))
        })
        .transpose()
    }

    fn evidence_tail(&self, id: &str, n: usize) -> Result<Vec<Evidence>> {
        let n = i64::try_from(n).unwrap_or(i64::MAX);
        self.parsed(
            "SELECT body::text FROM (SELECT body, n FROM loopx.evidence WHERE todo = $1 \
             ORDER BY n DESC LIMIT $2) e ORDER BY n",
            &[&id, &n],
        )
    }

    fn journal_tail(&self, n: usize) -> Result<Vec<Event>> {
        let n = i64::try_from(n).unwrap_or(i64::MAX);
        self.parsed(
            "SELECT line FROM (SELECT line, seq FROM loopx.journal ORDER BY seq DESC \
             LIMIT $1) j ORDER BY seq",
            &[&n],
        )
    }

    fn archived_ids(&self) -> Result<Vec<String>> {
        let rows = self.with(|c| {
            c.client()?
                .query("SELECT id FROM loopx.todos WHERE archived ORDER BY id", &[])
                .map_err(db_error)
        })?;
        Ok(rows.iter().map(|r| r.get(0)).collect())
    }

    fn archived_count(&self) -> Result<usize> {
        let n = self.count("SELECT count(*) FROM loopx.todos WHERE archived", &[])?;
        Ok(usize::try_from(n).unwrap_or(usize::MAX))
    }

    fn journal_seen(&self) -> Result<crate::kernel::roster::Seen> {
        Ok(crate::store::core::seen::seen_in(&self.journal_bytes(0)?.0))
    }

    fn journal_end(&self) -> Result<u64> {
        self.count("SELECT coalesce(max(seq), 0) FROM loopx.journal", &[])
    }

    fn journal_after(&self, pos: u64) -> Result<(Vec<Event>, u64)> {
        let (bytes, end) = self.journal_bytes(pos)?;
        if bytes.is_empty() {
            // A journal shorter than `pos` (the goal was replaced) starts over at its end.
            return Ok((Vec::new(), self.journal_end()?.min(pos)));
        }
        let events = bytes
            .split(|b| *b == b'\n')
            .filter(|l| !l.is_empty())
            .filter_map(|l| serde_json::from_slice(l).ok())
            .collect();
        Ok((events, end.max(pos)))
    }

    fn journal_line(&self, seq: u64) -> Result<Option<Event>> {
        let seq = i64::try_from(seq).unwrap_or(i64::MAX);
        let mut found: Vec<Event> =
            self.parsed("SELECT line FROM loopx.journal WHERE seq = $1", &[&seq])?;
        Ok(found.pop())
    }

    fn owner_pub(&self) -> Result<Option<crate::kernel::authority::OwnerPub>> {
        PgStore::owner_pub(self)
    }

    fn local_root(&self) -> Option<&std::path::Path> {
        None
    }

    fn evidence_all(&self, only: Option<&str>, keep: Keep<'_>) -> Result<Vec<(String, Evidence)>> {
        let rows = self.with(|c| {
            c.client()?
                .query(
                    "SELECT todo, body::text FROM loopx.evidence \
                     WHERE $1::text IS NULL OR todo = $1 ORDER BY n",
                    &[&only],
                )
                .map_err(db_error)
        })?;
        let mut out = Vec::new();
        for r in rows {
            let todo: String = r.get(0);
            if let Ok(e) = serde_json::from_str::<Evidence>(&r.get::<_, String>(1))
                && keep(&todo, &e)
            {
                out.push((todo, e));
            }
        }
        Ok(out)
    }
}

impl Admin for PgStore {
    fn install_owner(
        &self,
        key: &crate::store::core::owner::OwnerKey,
        replaced: Option<&crate::kernel::authority::OwnerPub>,
    ) -> Result<()> {
        PgStore::install_owner(self, key, replaced)
    }

    fn plan_goal(&self, replace: bool) -> Result<GoalPlan> {
        // No goal yet (or no schema: `create` says which): a replace starts the first, as on
        // files. Without `replace`, `create` refuses a database that holds a goal.
        let replacing = replace && !matches!(self.load(), Err(e) if e.code == Code::NotInitialized);
        Ok(GoalPlan {
            replacing,
            at: ("store", self.shown_url()),
            first: Some("`loopx owner init` (as the owner's login), then add todos"),
        })
    }

    fn start_goal(&self, config: &Config, actor: &str, replacing: bool) -> Result<Option<String>> {
        if replacing {
            return self.replace(config, actor).map(Some);
        }
        self.create(config, actor)?;
        Ok(None)
    }

    fn doctor(&self) -> Result<Vec<doctor::Finding>> {
        super::doctor::check(self, self.env.now)
    }

    fn live_worktrees(&self) -> Result<Vec<String>> {
        let now = self.env.now;
        let snap = self.load()?;
        Ok(snap
            .todos
            .values()
            .filter_map(|t| t.live_lease(now).and_then(|l| l.worktree.clone()))
            .collect())
    }

    fn followed(&self) -> Result<&dyn Followed> {
        Ok(self)
    }

    fn place_of(&self, file: &str) -> String {
        format!("{file} in {}", self.shown_url())
    }

    fn verify_journal(&self) -> Result<crate::store::JournalCheck> {
        let (bytes, _) = self.journal_bytes(0)?;
        let (broken, torn) = crate::store::core::chain::verify(&bytes);
        Ok(crate::store::JournalCheck {
            lines: bytes.iter().filter(|b| **b == b'\n').count(),
            torn,
            broken,
        })
    }

    fn poll_lock(&self) -> Result<Option<Box<dyn crate::store::PollLock>>> {
        self.try_poll_lock()
    }

    fn files(&self) -> Option<&crate::store::FileStore> {
        None
    }
}
