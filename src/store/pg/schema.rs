//! The database's schema, roles and rules: `loopx store migrate` creates or upgrades them.
//!
//! The agent role may read everything, add todos, gates (pending ones), evidence, spends and
//! journal lines, and change todos and its own declaration; the database itself refuses it the
//! owner's facts (the goal and its limits, gate decisions, hooks, the seal), another agent's
//! lease and the todo it holds (a holder may hand its own on), and nobody may change or remove
//! a journal line.

use super::roles::{JOURNAL_LOCK, ROW_MAX, Roles};
use crate::kernel::{Code, Error, Result};

/// The schema version this binary writes (3: an agent may record the one use of a gate).
pub const VERSION: i64 = 3;

/// The tables (version 1).
const TABLES: &str = r#"
CREATE SCHEMA IF NOT EXISTS loopx;
CREATE TABLE IF NOT EXISTS loopx.meta (key text PRIMARY KEY, value text NOT NULL);
CREATE TABLE IF NOT EXISTS loopx.config (
  id int PRIMARY KEY CHECK (id = 1), body jsonb NOT NULL, seq bigint NOT NULL);
CREATE TABLE IF NOT EXISTS loopx.todos (
  id text PRIMARY KEY CHECK (length(id) <= 64), body jsonb NOT NULL,
  archived boolean NOT NULL DEFAULT false, seq bigint NOT NULL);
CREATE INDEX IF NOT EXISTS todos_seq ON loopx.todos (seq);
DROP INDEX IF EXISTS loopx.todos_open;
CREATE TABLE IF NOT EXISTS loopx.gates (
  id text PRIMARY KEY CHECK (length(id) <= 64), body jsonb NOT NULL, seq bigint NOT NULL);
CREATE INDEX IF NOT EXISTS gates_seq ON loopx.gates (seq);
CREATE TABLE IF NOT EXISTS loopx.agents (
  id text PRIMARY KEY CHECK (length(id) <= 64), body jsonb NOT NULL, seq bigint NOT NULL);
CREATE INDEX IF NOT EXISTS agents_seq ON loopx.agents (seq);
CREATE TABLE IF NOT EXISTS loopx.spends (
  n bigserial PRIMARY KEY, body jsonb NOT NULL, seq bigint NOT NULL);
CREATE INDEX IF NOT EXISTS spends_seq ON loopx.spends (seq);
CREATE TABLE IF NOT EXISTS loopx.evidence (
  n bigserial PRIMARY KEY, todo text NOT NULL, body jsonb NOT NULL, seq bigint NOT NULL);
CREATE INDEX IF NOT EXISTS evidence_todo ON loopx.evidence (todo, n);
CREATE TABLE IF NOT EXISTS loopx.docs (
  name text PRIMARY KEY CHECK (name IN ('owner.pub', 'owner.seal', 'owner.proofs', 'quota.toml')),
  body text NOT NULL, seq bigint NOT NULL);
CREATE TABLE IF NOT EXISTS loopx.journal (
  seq bigint PRIMARY KEY CHECK (seq > 0), line text NOT NULL);
"#;

/// The rules: who is the owner, the journal's chain, leases and gate decisions.
fn rules(r: &Roles) -> String {
    let owner = &r.owner;
    format!(
        r#"
-- Every function runs with the catalog's names only: a login may set its own search_path, and a
-- function or operator of its own shadowing a built-in one would otherwise decide the rules.
CREATE OR REPLACE FUNCTION loopx.is_owner() RETURNS boolean LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp AS $f$
  -- A superuser is a member of every role. The triggers make the same call inline: a call of
  -- this function costs them more than the check.
  SELECT pg_has_role(session_user, '{owner}', 'MEMBER')
$f$;

CREATE OR REPLACE FUNCTION loopx.journal_head() RETURNS TABLE (seq bigint, line text)
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $f$
BEGIN
  PERFORM pg_advisory_xact_lock({lock});
  RETURN QUERY SELECT j.seq, j.line FROM loopx.journal j ORDER BY j.seq DESC LIMIT 1;
END $f$;

CREATE OR REPLACE FUNCTION loopx.commit(
  base bigint, todo_ids text[], todo_seqs bigint[], spends boolean, writes jsonb, frags text[])
RETURNS TABLE (seq bigint, line text) LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp
-- Each statement planned once per connection: planned again at each call (PostgreSQL's choice
-- for statements with array arguments) it cost a commit more than the plans gained. No JIT: with
-- sequential scans turned off by the caller, the goal's check (a table with no index to use) was
-- costed so high that each call compiled it (11 claims/s).
SET plan_cache_mode = force_generic_plan SET jit = off AS $f$
DECLARE
  last_seq bigint; last_line text; prev text; n bigint; first bigint; w jsonb; i int;
  l text; moved text;
BEGIN
  -- Locks in one order: the todos written (by id), then the journal. A todo locked here cannot
  -- change, so it is checked before the journal's lock, which every commit waits for.
  SELECT s.id INTO moved FROM unnest(todo_ids, todo_seqs) AS s(id, seq)
    LEFT JOIN (SELECT t.id, t.seq FROM loopx.todos t WHERE t.id = ANY(todo_ids)
               ORDER BY t.id FOR UPDATE) x ON x.id = s.id
    WHERE coalesce(x.seq, 0) <> s.seq LIMIT 1;
  IF moved IS NOT NULL THEN
    RAISE EXCEPTION 'todo % changed', moved USING ERRCODE = '40001';
  END IF;
  PERFORM pg_advisory_xact_lock({lock});
  SELECT j.seq, j.line INTO last_seq, last_line FROM loopx.journal j ORDER BY j.seq DESC LIMIT 1;
  -- A snapshot past the journal's end was read before the goal was replaced.
  IF base > coalesce(last_seq, 0) THEN
    RAISE EXCEPTION 'the goal was replaced' USING ERRCODE = '40001';
  END IF;
  IF (SELECT coalesce(max(c.seq), 0) FROM loopx.config c) > base
     OR (SELECT coalesce(max(g.seq), 0) FROM loopx.gates g) > base
     OR (SELECT coalesce(max(a.seq), 0) FROM loopx.agents a) > base
     OR (spends AND (SELECT coalesce(max(s.seq), 0) FROM loopx.spends s) > base) THEN
    RAISE EXCEPTION 'the goal, a gate, an agent or the quota changed' USING ERRCODE = '40001';
  END IF;
  n := coalesce(last_seq, 0) + 1;
  first := n;
  FOR w IN SELECT * FROM jsonb_array_elements(writes) LOOP
    CASE w->>'k'
      WHEN 'todo+' THEN
        INSERT INTO loopx.todos (id, body, seq) VALUES (w->>'id', w->'b', first);
      WHEN 'todo' THEN
        UPDATE loopx.todos t SET body = w->'b', seq = first, archived = false
          WHERE t.id = w->>'id';
      WHEN 'archive' THEN
        INSERT INTO loopx.todos AS t (id, body, seq, archived) VALUES (w->>'id', w->'b', first, true)
          ON CONFLICT (id) DO UPDATE SET body = EXCLUDED.body, seq = first, archived = true;
      WHEN 'gate+' THEN INSERT INTO loopx.gates (id, body, seq) VALUES (w->>'id', w->'b', first);
      WHEN 'gate' THEN UPDATE loopx.gates g SET body = w->'b', seq = first WHERE g.id = w->>'id';
      WHEN 'agent+' THEN INSERT INTO loopx.agents (id, body, seq) VALUES (w->>'id', w->'b', first);
      WHEN 'agent' THEN UPDATE loopx.agents a SET body = w->'b', seq = first WHERE a.id = w->>'id';
      WHEN 'evidence' THEN
        INSERT INTO loopx.evidence (todo, body, seq) VALUES (w->>'id', w->'b', first);
      WHEN 'spend' THEN INSERT INTO loopx.spends (body, seq) VALUES (w->'b', first);
      WHEN 'config' THEN
        INSERT INTO loopx.config (id, body, seq) VALUES (1, w->'b', first)
          ON CONFLICT (id) DO UPDATE SET body = EXCLUDED.body, seq = first;
      WHEN 'doc' THEN
        INSERT INTO loopx.docs (name, body, seq) VALUES (w->>'id', w->>'b', first)
          ON CONFLICT (name) DO UPDATE SET body = EXCLUDED.body, seq = first;
      ELSE RAISE EXCEPTION 'unknown write %', w->>'k';
    END CASE;
  END LOOP;
  prev := CASE WHEN last_line IS NULL THEN repeat('0', 64)
          ELSE encode(sha256(convert_to(last_line, 'UTF8')), 'hex') END;
  FOR i IN 1 .. coalesce(array_length(frags, 1), 0) LOOP
    l := '{{"seq":' || n || ',' || frags[i] || ',"prev":"' || prev || '","tx":' || first
         || CASE WHEN i = array_length(frags, 1) THEN ',"files":[]' ELSE '' END || '}}';
    INSERT INTO loopx.journal (seq, line) VALUES (n, l);
    seq := n; line := l;
    RETURN NEXT;
    prev := encode(sha256(convert_to(l, 'UTF8')), 'hex');
    n := n + 1;
  END LOOP;
END $f$;

CREATE OR REPLACE FUNCTION loopx.journal_check() RETURNS trigger LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp AS $f$
DECLARE last record; ev jsonb;
BEGIN
  -- Not JSON: the cast fails and the insert with it.
  ev := NEW.line::jsonb;
  SELECT j.seq, j.line INTO last FROM loopx.journal j ORDER BY j.seq DESC LIMIT 1;
  IF (ev->>'seq') IS DISTINCT FROM NEW.seq::text THEN
    RAISE EXCEPTION 'journal line % carries seq %', NEW.seq, ev->>'seq';
  END IF;
  IF last.seq IS NULL THEN
    IF NEW.seq <> 1 OR ev->>'prev' IS DISTINCT FROM repeat('0', 64) THEN
      RAISE EXCEPTION 'the first journal line must be seq 1 with prev 0...0';
    END IF;
  ELSIF NEW.seq <> last.seq + 1
     OR ev->>'prev' IS DISTINCT FROM encode(sha256(convert_to(last.line, 'UTF8')), 'hex') THEN
    RAISE EXCEPTION 'journal line % does not follow line %', NEW.seq, last.seq;
  END IF;
  IF NOT pg_has_role(session_user, '{owner}', 'MEMBER') THEN
    IF octet_length(NEW.line) > {big} THEN
      RAISE EXCEPTION 'journal line % is over {big} bytes', NEW.seq USING ERRCODE = '42501';
    END IF;
    IF ev->>'actor' IS NULL OR lower(ev->>'actor') = 'owner' THEN
      RAISE EXCEPTION 'only the owner writes the owner''s journal lines' USING ERRCODE = '42501';
    END IF;
    -- loopx's own lines from an agent's process: a failed hook, a repaired journal; no more.
    IF ev->>'actor' = 'loopx' AND ev->>'action' NOT IN ('hook.fail', 'journal.repair') THEN
      RAISE EXCEPTION 'loopx does not write % lines for an agent', ev->>'action'
        USING ERRCODE = '42501';
    END IF;
    IF ev->>'actor' NOT IN (session_user, 'loopx') THEN
      RAISE EXCEPTION 'you are connected as %, not %', session_user, ev->>'actor'
        USING ERRCODE = '42501';
    END IF;
  END IF;
  RETURN NEW;
END $f$;
DROP TRIGGER IF EXISTS journal_check ON loopx.journal;
CREATE TRIGGER journal_check BEFORE INSERT ON loopx.journal
  FOR EACH ROW EXECUTE FUNCTION loopx.journal_check();

CREATE OR REPLACE FUNCTION loopx.journal_notify() RETURNS trigger LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp AS $f$
BEGIN
  -- A wake-up only: listeners read the journal after their own position.
  PERFORM pg_notify('loopx', '');
  RETURN NULL;
END $f$;
DROP TRIGGER IF EXISTS journal_notify ON loopx.journal;
CREATE TRIGGER journal_notify AFTER INSERT ON loopx.journal
  FOR EACH STATEMENT EXECUTE FUNCTION loopx.journal_notify();

CREATE OR REPLACE FUNCTION loopx.lock_free(ids text[], at timestamptz)
RETURNS TABLE (id text, body text, seq bigint, archived boolean) LANGUAGE plpgsql
-- Rows by id through the index, however few rows the planner thinks the table has (a scan of
-- every row version of a small, busy table costs more than the lookups).
SET enable_seqscan = off SET search_path = pg_catalog, pg_temp AS $f$
BEGIN
  -- The first of `ids` with no live lease that no other transaction has locked, locked.
  RETURN QUERY SELECT t.id, t.body::text, t.seq, t.archived FROM loopx.todos t
    WHERE t.id = ANY(ids) AND NOT t.archived
      AND (jsonb_typeof(t.body->'lease') IS DISTINCT FROM 'object'
           OR (t.body->'lease'->>'expires_at')::timestamptz <= at)
    ORDER BY array_position(ids, t.id) LIMIT 1 FOR UPDATE OF t SKIP LOCKED;
END $f$;

CREATE OR REPLACE FUNCTION loopx.lease_check() RETURNS trigger LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp AS $f$
DECLARE
  old_body jsonb; old_archived boolean; old_lease jsonb; new_lease jsonb;
  others boolean := false; handoff boolean := false;
BEGIN
  IF pg_has_role(session_user, '{owner}', 'MEMBER') THEN RETURN NEW; END IF;
  IF pg_column_size(NEW.body) > {big} THEN
    RAISE EXCEPTION 'todo % is over {big} bytes', NEW.id USING ERRCODE = '42501';
  END IF;
  -- An INSERT that may turn into an UPDATE (ON CONFLICT) is checked against the row there.
  IF TG_OP = 'UPDATE' THEN
    old_body := OLD.body;
    old_archived := OLD.archived;
  ELSE
    SELECT t.body, t.archived INTO old_body, old_archived FROM loopx.todos t WHERE t.id = NEW.id;
  END IF;
  new_lease := NEW.body->'lease';
  old_lease := old_body->'lease';
  -- A fence removed (null) would let a later write set it back to anything.
  IF coalesce((NEW.body->>'fence')::bigint, -1) < coalesce((old_body->>'fence')::bigint, -1) THEN
    RAISE EXCEPTION 'the fence of % may not go back', NEW.id USING ERRCODE = '42501';
  END IF;
  -- Another agent's live lease: only its holder (or the owner) moves the todo on.
  others := coalesce(jsonb_typeof(old_lease) = 'object'
    AND old_lease->>'holder' <> session_user
    AND (old_lease->>'expires_at')::timestamptz > now(), false);
  IF others AND (NEW.body->'status' IS DISTINCT FROM old_body->'status'
      OR NEW.body->'fence' IS DISTINCT FROM old_body->'fence'
      OR NEW.archived IS DISTINCT FROM old_archived
      OR new_lease IS DISTINCT FROM old_lease) THEN
    RAISE EXCEPTION 'the lease on % is held by %', NEW.id, old_lease->>'holder'
      USING ERRCODE = '42501';
  END IF;
  -- A hand-off: the live lease's holder passes it on, under a new fence.
  handoff := coalesce(jsonb_typeof(old_lease) = 'object'
    AND old_lease->>'holder' = session_user
    AND (old_lease->>'expires_at')::timestamptz > now()
    AND new_lease->>'handoff_from' = session_user
    AND (NEW.body->>'fence')::bigint > (old_body->>'fence')::bigint, false);
  IF new_lease IS DISTINCT FROM old_lease AND jsonb_typeof(new_lease) = 'object'
     AND new_lease->>'holder' IS DISTINCT FROM session_user AND NOT handoff THEN
    RAISE EXCEPTION 'only the owner gives % a lease on %', new_lease->>'holder', NEW.id
      USING ERRCODE = '42501';
  END IF;
  RETURN NEW;
END $f$;
DROP TRIGGER IF EXISTS lease_check ON loopx.todos;
CREATE TRIGGER lease_check BEFORE INSERT OR UPDATE ON loopx.todos
  FOR EACH ROW EXECUTE FUNCTION loopx.lease_check();

CREATE OR REPLACE FUNCTION loopx.own_rows() RETURNS trigger LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp AS $f$
BEGIN
  IF pg_has_role(session_user, '{owner}', 'MEMBER') THEN RETURN NEW; END IF;
  -- Every client loads every row: a huge one would stall them all.
  IF pg_column_size(NEW.body) > {big} THEN
    RAISE EXCEPTION 'a row of loopx.% is over {big} bytes', TG_TABLE_NAME USING ERRCODE = '42501';
  END IF;
  -- An agent updates a gate only to record the one use of its approved action.
  IF TG_TABLE_NAME = 'gates' AND TG_OP = 'UPDATE' THEN
    IF OLD.body ? 'used' OR NOT (NEW.body ? 'used')
       OR OLD.body->>'status' IS DISTINCT FROM 'approved'
       OR (NEW.body - 'used') IS DISTINCT FROM (OLD.body - 'used')
       OR NEW.body->'used'->>'by' IS DISTINCT FROM session_user::text THEN
      RAISE EXCEPTION 'an agent only records the one use of gate %', NEW.id USING ERRCODE = '42501';
    END IF;
    RETURN NEW;
  END IF;
  IF TG_TABLE_NAME = 'gates' AND (NEW.body->>'status' IS DISTINCT FROM 'pending'
       OR NEW.body ? 'signature' OR NEW.body ? 'decided_by') THEN
    RAISE EXCEPTION 'only the owner decides gate %', NEW.id USING ERRCODE = '42501';
  END IF;
  IF TG_TABLE_NAME IN ('spends', 'evidence')
     AND NEW.body->>'agent' IS DISTINCT FROM session_user THEN
    RAISE EXCEPTION 'you are connected as %, not %', session_user, NEW.body->>'agent'
      USING ERRCODE = '42501';
  END IF;
  -- Nested: PL/pgSQL resolves every field an expression names, and spends have no id.
  IF TG_TABLE_NAME = 'agents' THEN
    IF NEW.id IS DISTINCT FROM session_user THEN
      RAISE EXCEPTION 'you are connected as %, not %', session_user, NEW.id
        USING ERRCODE = '42501';
    END IF;
  END IF;
  RETURN NEW;
END $f$;
CREATE OR REPLACE FUNCTION loopx.journaled() RETURNS trigger LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp AS $f$
BEGIN
  -- At COMMIT: an agent's row comes with the journal line that records it, written by the same
  -- transaction. A row without one would hide from clients' caches (a past seq) or stall every
  -- later commit (a seq past the journal's head).
  IF pg_has_role(session_user, '{owner}', 'MEMBER') THEN RETURN NULL; END IF;
  IF NOT EXISTS (SELECT 1 FROM loopx.journal j
                 WHERE j.seq = NEW.seq AND j.xmin = pg_current_xact_id()::xid) THEN
    RAISE EXCEPTION 'a change to loopx.% needs its journal line (seq %) in the same transaction',
      TG_TABLE_NAME, NEW.seq USING ERRCODE = '42501';
  END IF;
  RETURN NULL;
END $f$;
DO $t$ DECLARE t text; BEGIN
  FOREACH t IN ARRAY ARRAY['todos', 'gates', 'agents', 'spends', 'evidence'] LOOP
    EXECUTE format('DROP TRIGGER IF EXISTS journaled ON loopx.%I', t);
    EXECUTE format('CREATE CONSTRAINT TRIGGER journaled AFTER INSERT OR UPDATE ON loopx.%I '
      'DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION loopx.journaled()', t);
  END LOOP;
END $t$;
DO $t$ DECLARE t text; BEGIN
  FOREACH t IN ARRAY ARRAY['gates', 'spends', 'evidence', 'agents'] LOOP
    EXECUTE format('DROP TRIGGER IF EXISTS own_rows ON loopx.%I', t);
    EXECUTE format('CREATE TRIGGER own_rows BEFORE INSERT OR UPDATE ON loopx.%I '
      'FOR EACH ROW EXECUTE FUNCTION loopx.own_rows()', t);
  END LOOP;
END $t$;
"#,
        lock = JOURNAL_LOCK,
        big = ROW_MAX,
    )
}

/// Who may do what: privileges first, row-level security where a rule needs the row.
fn grants(r: &Roles) -> String {
    let (o, a) = (&r.owner, &r.agent);
    format!(
        r#"
REVOKE ALL ON SCHEMA loopx FROM PUBLIC;
REVOKE ALL ON ALL TABLES IN SCHEMA loopx FROM PUBLIC;
GRANT USAGE ON SCHEMA loopx TO {o}, {a};
GRANT SELECT ON ALL TABLES IN SCHEMA loopx TO {o}, {a};
GRANT USAGE ON ALL SEQUENCES IN SCHEMA loopx TO {o}, {a};
GRANT INSERT, UPDATE, DELETE ON loopx.config, loopx.todos, loopx.gates, loopx.agents,
  loopx.spends, loopx.docs TO {o};
GRANT INSERT ON loopx.evidence, loopx.journal TO {o};
GRANT INSERT, UPDATE ON loopx.todos, loopx.agents TO {a};
GRANT INSERT ON loopx.gates, loopx.spends, loopx.evidence, loopx.journal TO {a};
GRANT UPDATE ON loopx.gates TO {a};
REVOKE UPDATE, DELETE, TRUNCATE ON loopx.journal, loopx.evidence FROM {o}, {a};
GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA loopx TO {o}, {a};
"#
    )
}

/// Creates the two roles unless they exist (they cannot log in: logins are granted them).
fn roles_sql(r: &Roles) -> String {
    let mut s = String::new();
    for name in [&r.owner, &r.agent] {
        s.push_str(&format!(
            "DO $r$ BEGIN IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '{name}') \
             THEN CREATE ROLE {name} NOLOGIN; END IF; \
             EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL; END $r$;\n"
        ));
    }
    s
}

/// What `migrate` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Migrated {
    /// The version before (0: a new database).
    pub from: i64,
    /// The version now.
    pub to: i64,
}

/// Creates or upgrades the schema, the roles and their rules, and `more` (the history's tables
/// and functions), in one transaction.
pub fn migrate(c: &mut postgres::Client, r: &Roles, more: &str) -> Result<Migrated> {
    let mut tx = c.transaction().map_err(super::db_error)?;
    tx.batch_execute("SELECT pg_advisory_xact_lock(7370)")
        .map_err(super::db_error)?;
    let from = current_version(&mut tx)?;
    if from > VERSION {
        return Err(Error::new(
            Code::SchemaTooNew,
            format!("the database has loopx schema {from}; this loopx knows {VERSION}"),
        )
        .hint("upgrade loopx"));
    }
    let sql = format!(
        "{}{TABLES}{}{}{}INSERT INTO loopx.meta VALUES ('schema_version', '{VERSION}') \
         ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value;",
        roles_sql(r),
        rules(r),
        grants(r),
        more,
    );
    tx.batch_execute(&sql).map_err(super::db_error)?;
    tx.commit().map_err(super::db_error)?;
    Ok(Migrated { from, to: VERSION })
}

/// The schema version of the database (0 when it has none).
pub fn current_version(c: &mut impl postgres::GenericClient) -> Result<i64> {
    let exists = c
        .query_one("SELECT to_regclass('loopx.meta') IS NOT NULL", &[])
        .map_err(super::db_error)?
        .get::<_, bool>(0);
    if !exists {
        return Ok(0);
    }
    let row = c
        .query_opt(
            "SELECT value FROM loopx.meta WHERE key = 'schema_version'",
            &[],
        )
        .map_err(super::db_error)?;
    Ok(row
        .and_then(|r| r.get::<_, String>(0).parse().ok())
        .unwrap_or(0))
}
