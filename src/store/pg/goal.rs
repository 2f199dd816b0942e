//! A goal started in the database, and the owner's key installed there: the two acts that come
//! before any other, each one transaction with its journal line.

use postgres::types::Json;

use super::commit::{PgTx, internal};
use super::fast::fragment;
use super::{Cached, PgStore, db_error};
use crate::kernel::authority::OwnerPub;
use crate::kernel::ops::Change;
use crate::kernel::{Action, Code, Config, Error, EventDraft, Result};
use crate::store::{journal, owner, sealing};

impl PgStore {
    /// Starts the project's goal: its config and its first journal line (the owner's login
    /// only: the goal is the owner's). Fails with `goal_exists` when the database has one.
    pub fn create(&self, config: &Config, actor: &str) -> Result<()> {
        let draft = EventDraft {
            at: config.goal.created_at,
            actor: actor.to_string(),
            action: Action::GoalStart,
            target: config.goal.id.clone(),
            data: serde_json::json!({"objective": config.goal.objective,
                "success_criteria": config.goal.success_criteria}),
        };
        let frags = vec![fragment(&draft)?];
        let writes = serde_json::json!([{"k": "config", "id": "", "b": serde_json::to_value(config).map_err(internal)?}]);
        self.with(|c| {
            let mut tx = c.client()?.transaction().map_err(db_error)?;
            if tx
                .query_opt("SELECT 1 FROM loopx.config", &[])
                .map_err(db_error)?
                .is_some()
            {
                return Err(Error::new(Code::GoalExists, "the database already holds a goal")
                    .hint("see it with `loopx goal show`; a new goal needs a new database"));
            }
            tx.query(
                "SELECT seq, line FROM loopx.commit(0, '{}'::text[], '{}'::bigint[], false, $1::jsonb, $2::text[])",
                &[&Json(&writes), &frags],
            )
            .map_err(db_error)?;
            tx.commit().map_err(db_error)?;
            c.cache = Cached::default();
            Ok(())
        })
    }

    /// Installs `key` as the project's owner key (`owner.pub`), seals the state as it is, and
    /// journals it, signed (the owner's login only).
    pub fn install_owner(&self, key: &owner::OwnerKey, replaced: Option<&OwnerPub>) -> Result<()> {
        let mut tx = PgTx::begin(self)?;
        let r = tx.install_owner(key, replaced, self.env().now);
        if r.is_err() {
            tx.abandon();
        }
        r
    }
}

impl PgTx<'_> {
    fn install_owner(
        &mut self,
        key: &owner::OwnerKey,
        replaced: Option<&OwnerPub>,
        now: crate::kernel::Ts,
    ) -> Result<()> {
        let last = self.journal_head()?;
        let mark = self.mark(last.as_ref())?;
        let raw = self.conn.cache.snapshot_raw()?;
        let mut before = self.snap.clone();
        // A new key seals the rows as they are: nothing it signed before applies.
        before.seal = None;
        let seal = sealing::seal_text(key, &before, &Change::default(), mark, || Ok(raw))?;
        let seq = last.as_ref().map_or(0, |(s, _)| *s) + 1;
        let seq_db = i64::try_from(seq).unwrap_or(i64::MAX);
        self.put_doc("owner.pub", &key.public().to_text(), seq_db)?;
        self.put_doc("owner.seal", &seal, seq_db)?;
        let draft = EventDraft {
            at: now,
            actor: crate::kernel::ops::OWNER.into(),
            action: Action::OwnerInit,
            target: "owner".into(),
            data: serde_json::json!({"fingerprint": key.public().fingerprint(),
                "replaced": replaced.map(|r| r.fingerprint())}),
        };
        let (events, lines) = journal::build_lines(
            last.as_ref().map(|(_, l)| l.as_bytes()),
            vec![draft],
            Some(key),
            Some(Vec::new()),
        )?;
        self.insert_lines(&events, &lines)?;
        self.finish()
    }
}
