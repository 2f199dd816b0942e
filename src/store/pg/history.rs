//! Replaced goals in the database (schema 2): `loopx.history` keeps each old goal's files as
//! `history/GOAL-ID/` holds them on files, and `loopx.retire_goal` moves a goal there.

use std::path::Path;

use super::db_error;
use super::roles::{JOURNAL_LOCK, Roles};
use crate::kernel::{Code, Error, Result};
use crate::store::core::parse;

/// The schema version that has `loopx.history`.
pub const SINCE: i64 = 2;

/// The most history files one import or export moves.
pub const FILES_MAX: usize = 100_000;

/// The old goal's files that move to its history (`journal.jsonl` is copied by the database
/// itself, from its rows); as on files, `owner.pub` and the agents' declarations stay.
pub const MOVED: [&str; 8] = [
    "todos",
    "archive",
    "gates",
    "evidence",
    "quota.toml",
    "owner.seal",
    "owner.proofs",
    "loopx.toml",
];

/// One file of a replaced goal: the goal's id, its path below `history/GOAL-ID/`, its bytes.
pub type HistoryFile = (String, String, Vec<u8>);

/// The table, the function that retires a goal, and who may use them (after `grants`).
pub fn schema(r: &Roles) -> String {
    let (o, a) = (&r.owner, &r.agent);
    format!(
        r#"
CREATE TABLE IF NOT EXISTS loopx.history (
  goal text NOT NULL CHECK (length(goal) BETWEEN 1 AND 64),
  path text NOT NULL CHECK (length(path) BETWEEN 1 AND 256),
  body bytea NOT NULL,
  PRIMARY KEY (goal, path));

-- The only way any loopx role removes journal lines or evidence: the owner's, copying them to
-- loopx.history first. Runs as the tables' owner; checks the caller is the loopx owner.
CREATE OR REPLACE FUNCTION loopx.retire_goal(old text, paths text[], bodies bytea[])
RETURNS void LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $f$
BEGIN
  IF NOT loopx.is_owner() THEN
    RAISE EXCEPTION 'only the owner replaces the goal' USING ERRCODE = '42501';
  END IF;
  PERFORM pg_advisory_xact_lock({lock});
  IF (SELECT c.body->'goal'->>'id' FROM loopx.config c WHERE c.id = 1) IS DISTINCT FROM old THEN
    RAISE EXCEPTION 'the goal is no longer %', old USING ERRCODE = '40001';
  END IF;
  IF (SELECT j.line::jsonb->>'action' FROM loopx.journal j ORDER BY j.seq DESC LIMIT 1)
     IS DISTINCT FROM 'goal.replace' THEN
    RAISE EXCEPTION 'the journal does not end with goal.replace';
  END IF;
  -- The journal as journal.jsonl holds it, byte for byte, from the rows themselves.
  INSERT INTO loopx.history (goal, path, body)
    SELECT old, 'journal.jsonl', convert_to(string_agg(j.line || E'\n', '' ORDER BY j.seq), 'UTF8')
    FROM loopx.journal j;
  INSERT INTO loopx.history (goal, path, body)
    SELECT old, f.p, f.b FROM unnest(paths, bodies) AS f(p, b) WHERE f.p <> 'journal.jsonl';
  DELETE FROM loopx.journal;
  DELETE FROM loopx.evidence;
  DELETE FROM loopx.todos;
  DELETE FROM loopx.gates;
  DELETE FROM loopx.spends;
  DELETE FROM loopx.config;
  DELETE FROM loopx.docs WHERE name <> 'owner.pub';
  -- What stays belongs to the new goal's first line.
  UPDATE loopx.agents SET seq = 1;
  UPDATE loopx.docs SET seq = 1;
END $f$;
REVOKE ALL ON FUNCTION loopx.retire_goal(text, text[], bytea[]) FROM PUBLIC, {a};
GRANT EXECUTE ON FUNCTION loopx.retire_goal(text, text[], bytea[]) TO {o};
REVOKE ALL ON loopx.history FROM PUBLIC;
GRANT SELECT ON loopx.history TO {o}, {a};
GRANT INSERT ON loopx.history TO {o};
"#,
        lock = JOURNAL_LOCK,
    )
}

/// True when the database has `loopx.history` (schema 2 or later).
pub fn exists(c: &mut impl postgres::GenericClient) -> Result<bool> {
    let r = c
        .query_one("SELECT to_regclass('loopx.history') IS NOT NULL", &[])
        .map_err(db_error)?;
    Ok(r.get(0))
}

/// Refuses (exit 6) a database older than schema 2, saying how to upgrade it.
pub fn require(c: &mut impl postgres::GenericClient, what: &str) -> Result<()> {
    if exists(c)? {
        return Ok(());
    }
    Err(Error::new(
        Code::InvalidState,
        format!("{what} needs loopx schema {SINCE}; the database has an older one"),
    )
    .hint("upgrade it in place with `loopx store migrate` (as the database's owner)"))
}

/// Checks a history file's place: a plain goal id, and one or two plain names below it.
pub fn check_place(goal: &str, path: &str) -> Result<()> {
    let bad = || {
        Error::new(
            Code::InvalidState,
            format!("history file {goal}/{path} is not a plain path"),
        )
        .hint("history/GOAL-ID/ holds files and directories of files, nothing deeper")
    };
    crate::kernel::id::check_not_path(goal).map_err(|_| bad())?;
    let parts: Vec<&str> = path.split('/').collect();
    if goal.len() > 64 || path.len() > 256 || parts.len() > 2 {
        return Err(bad());
    }
    for p in parts {
        crate::kernel::id::check_not_path(p).map_err(|_| bad())?;
    }
    Ok(())
}

/// Whether the database keeps a history of goal `goal` already.
pub fn has_goal(c: &mut impl postgres::GenericClient, goal: &str) -> Result<bool> {
    let r = c
        .query_opt(
            "SELECT 1 FROM loopx.history WHERE goal = $1 LIMIT 1",
            &[&goal],
        )
        .map_err(db_error)?;
    Ok(r.is_some())
}

/// Every history file the database keeps (none before schema 2), checked.
pub fn rows(c: &mut impl postgres::GenericClient) -> Result<Vec<HistoryFile>> {
    if !exists(c)? {
        return Ok(Vec::new());
    }
    let rows = c
        .query(
            "SELECT goal, path, body FROM loopx.history ORDER BY goal, path",
            &[],
        )
        .map_err(db_error)?;
    let mut out = Vec::with_capacity(rows.len());
    for r in rows {
        let (goal, path): (String, String) = (r.get(0), r.get(1));
        check_place(&goal, &path)?;
        out.push((goal, path, r.get(2)));
    }
    Ok(out)
}

/// Adds history files (an import, as the owner's login).
pub fn insert(c: &mut impl postgres::GenericClient, files: &[HistoryFile]) -> Result<()> {
    if files.is_empty() {
        return Ok(());
    }
    require(c, "a project with replaced goals (history/)")?;
    let goals: Vec<&str> = files.iter().map(|f| f.0.as_str()).collect();
    let paths: Vec<&str> = files.iter().map(|f| f.1.as_str()).collect();
    let bodies: Vec<&[u8]> = files.iter().map(|f| f.2.as_slice()).collect();
    c.execute(
        "INSERT INTO loopx.history (goal, path, body) \
         SELECT * FROM unnest($1::text[], $2::text[], $3::bytea[])",
        &[&goals, &paths, &bodies],
    )
    .map_err(db_error)?;
    Ok(())
}

/// Every file under `.loopx/history/` of a project: `GOAL-ID/NAME` and `GOAL-ID/DIR/NAME`.
/// A link, a deeper file or anything that is not a plain name is refused: an import loses
/// nothing, and an export writes nothing outside its directory.
pub fn read_dir(dot_loopx: &Path) -> Result<Vec<HistoryFile>> {
    let mut out = Vec::new();
    let top = dot_loopx.join("history");
    for goal in entries(&top)? {
        let dir = top.join(&goal);
        if !is_dir(&dir)? {
            return Err(Error::invalid(
                &parse::shown(&dir),
                None,
                "is not a replaced goal's directory",
            )
            .hint("move it out of .loopx/history/ before importing: an import loses nothing"));
        }
        for name in entries(&dir)? {
            let p = dir.join(&name);
            if is_dir(&p)? {
                for inner in entries(&p)? {
                    push_file(&mut out, &goal, &format!("{name}/{inner}"), &p.join(&inner))?;
                }
            } else {
                push_file(&mut out, &goal, &name, &p)?;
            }
        }
    }
    Ok(out)
}

/// Adds one regular file, checked and bounded.
fn push_file(out: &mut Vec<HistoryFile>, goal: &str, path: &str, file: &Path) -> Result<()> {
    check_place(goal, path)?;
    if out.len() >= FILES_MAX {
        return Err(Error::invalid(
            &parse::shown(file),
            None,
            format!("history/ holds more than {FILES_MAX} files"),
        ));
    }
    let bytes = parse::read_bytes(file)?
        .ok_or_else(|| Error::new(Code::NotFound, format!("{} vanished", parse::shown(file))))?;
    out.push((goal.to_string(), path.to_string(), bytes));
    Ok(())
}

/// The names in a directory, sorted (none when it does not exist); a link is refused.
fn entries(dir: &Path) -> Result<Vec<String>> {
    if !is_dir(dir)? {
        return Ok(Vec::new());
    }
    let rd = std::fs::read_dir(dir).map_err(|e| Error::io(dir, &e))?;
    let mut names = Vec::new();
    for e in rd {
        let e = e.map_err(|e| Error::io(dir, &e))?;
        let name = e.file_name().into_string().map_err(|_| {
            Error::invalid(&parse::shown(dir), None, "holds a name that is not UTF-8")
        })?;
        names.push(name);
        if names.len() > FILES_MAX {
            return Err(Error::invalid(
                &parse::shown(dir),
                None,
                format!("holds more than {FILES_MAX} entries"),
            ));
        }
    }
    names.sort();
    Ok(names)
}

/// True for a directory, false when missing; a link or another kind of file in a place that
/// must be a directory or a regular file is refused.
fn is_dir(p: &Path) -> Result<bool> {
    match std::fs::symlink_metadata(p) {
        Ok(m) if m.file_type().is_symlink() => Err(Error::invalid(
            &parse::shown(p),
            None,
            "is a symlink; loopx never follows one",
        )),
        Ok(m) => Ok(m.is_dir()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(Error::io(p, &e)),
    }
}
