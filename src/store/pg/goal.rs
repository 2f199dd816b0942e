//! A goal started or replaced in the database, and the owner's key installed there: each one
//! transaction with its journal lines.

use postgres::types::Json;

use super::commit::{PgTx, internal};
use super::fast::fragment;
use super::{Cached, PgStore, db_error, history, port};
use crate::kernel::authority::OwnerPub;
use crate::kernel::ops::Change;
use crate::kernel::{Action, Code, Config, Error, EventDraft, Result, Ts};
use crate::store::core::{chain, owner, seal};

/// The journal line that starts a goal.
fn goal_start(config: &Config, actor: &str) -> EventDraft {
    EventDraft {
        at: config.goal.created_at,
        actor: actor.to_string(),
        action: Action::GoalStart,
        target: config.goal.id.clone(),
        data: serde_json::json!({"objective": config.goal.objective,
            "success_criteria": config.goal.success_criteria}),
    }
}

impl PgStore {
    /// Starts the project's goal: its config and its first journal line (the owner's login
    /// only: the goal is the owner's). Fails with `goal_exists` when the database has one.
    pub fn create(&self, config: &Config, actor: &str) -> Result<()> {
        let frags = vec![fragment(&goal_start(config, actor))?];
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

    /// Replaces the goal with `next` in one transaction, as `start-goal --replace` does on
    /// files: `goal.replace` ends the old journal (signed once the project has an owner key),
    /// the old goal's files go to `loopx.history` (`history/GOAL-ID/`), and the new goal starts
    /// a new journal at line 1. The owner's login only: the database refuses an agent's.
    /// Returns where the old goal is kept.
    pub fn replace(&self, next: &Config, actor: &str) -> Result<String> {
        let mut tx = PgTx::begin(self)?;
        let r = tx.replace(next, actor, self.env().now);
        if r.is_err() {
            tx.abandon();
        }
        r
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
        // A new key seals the rows as they are: nothing it signed before applies.
        let seal = seal::seal_text(key, &raw, None, &Change::default(), mark)?;
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
        let (events, lines) = chain::build_lines(
            last.as_ref().map(|(_, l)| l.as_bytes()),
            vec![draft],
            Some(key),
            Some(Vec::new()),
        )?;
        self.insert_lines(&events, &lines)?;
        self.finish()
    }
}

impl PgTx<'_> {
    fn replace(&mut self, next: &Config, actor: &str, now: Ts) -> Result<String> {
        history::require(self.client()?, "start-goal --replace")?;
        // The journal's lock first: no commit lands between what is read here and the move.
        let last = self.journal_head()?;
        let old = self.current_goal()?;
        // The goal's id names its history: never a path.
        crate::kernel::id::check_not_path(&old)?;
        let kept = format!("database:history/{old}");
        if history::has_goal(self.client()?, &old)? {
            return Err(Error::new(Code::Io, format!("{kept} exists already")));
        }
        let signer = match self.owner_key()? {
            Some(p) => Some(owner::signer_for(&self.env.key, Some(&p))?),
            None => None,
        };
        let draft = EventDraft {
            at: now,
            actor: actor.to_string(),
            action: Action::GoalReplace,
            target: old.clone(),
            data: serde_json::json!({ "moved_to": kept }),
        };
        // As on files: the old journal's last line, appended alone (no transaction mark).
        let (events, lines) = chain::build_lines(
            last.as_ref().map(|(_, l)| l.as_bytes()),
            vec![draft],
            signer.as_ref(),
            None,
        )?;
        self.insert_lines(&events, &lines)?;
        let (tree, _) = port::render(self.client()?)?;
        let (paths, bodies): (Vec<String>, Vec<Vec<u8>>) = tree
            .into_iter()
            .filter(|(rel, _)| history::MOVED.contains(&rel.split('/').next().unwrap_or("")))
            .unzip();
        self.client()?
            .execute(
                "SELECT loopx.retire_goal($1, $2, $3)",
                &[&old, &paths, &bodies],
            )
            .map_err(db_error)?;
        self.start_goal(next, actor, signer.as_ref())?;
        self.finish()?;
        self.conn.cache = Cached::default();
        Ok(kept)
    }

    /// The goal's id as the database holds it now.
    fn current_goal(&mut self) -> Result<String> {
        let row = self
            .client()?
            .query_opt(
                "SELECT body->'goal'->>'id' FROM loopx.config WHERE id = 1",
                &[],
            )
            .map_err(db_error)?;
        row.and_then(|r| r.get::<_, Option<String>>(0))
            .ok_or_else(|| {
                Error::new(Code::NotInitialized, "the database has no goal to replace")
                    .hint("start one with `loopx start-goal` (as the owner)")
            })
    }

    /// The owner's public key as the database holds it now.
    fn owner_key(&mut self) -> Result<Option<OwnerPub>> {
        let row = self
            .client()?
            .query_opt("SELECT body FROM loopx.docs WHERE name = 'owner.pub'", &[])
            .map_err(db_error)?;
        row.map(|r| {
            OwnerPub::parse(r.get::<_, String>(0).trim()).map_err(|e| {
                Error::invalid("database:docs/owner.pub", None, e)
                    .hint("check the database with `loopx doctor`")
            })
        })
        .transpose()
    }

    /// The new goal in a database the old one has left: its config, its seal (signed by the
    /// owner when there is a key) and its journal's first line.
    fn start_goal(
        &mut self,
        next: &Config,
        actor: &str,
        signer: Option<&owner::OwnerKey>,
    ) -> Result<()> {
        let body = serde_json::to_value(next).map_err(internal)?;
        self.client()?
            .execute(
                "INSERT INTO loopx.config (id, body, seq) VALUES (1, $1, 1)",
                &[&Json(&body)],
            )
            .map_err(db_error)?;
        if let Some(k) = signer {
            self.put_doc("owner.seal", &seal::new_goal_seal(k, next), 1)?;
        }
        let (events, lines) =
            chain::build_lines(None, vec![goal_start(next, actor)], None, Some(Vec::new()))?;
        self.insert_lines(&events, &lines)
    }
}
