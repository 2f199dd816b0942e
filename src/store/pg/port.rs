//! Moving a project between a `.loopx/` directory and a database, with nothing lost: the same
//! todos, gates, evidence, spends, journal lines (byte for byte) and owner signatures.

use std::collections::BTreeMap;
use std::path::Path;

use postgres::GenericClient;
use postgres::types::Json;
use serde_json::Value;

use crate::kernel::{Code, Config, Error, QuotaFile, Result, Snapshot, Todo};
use crate::store::core::{atomic, parse};
use crate::store::pg::{PgStore, db_error, history};

/// What an import or export moved.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Moved {
    /// Open and archived todos.
    pub todos: usize,
    /// Gates.
    pub gates: usize,
    /// Evidence entries.
    pub evidence: usize,
    /// Spends.
    pub spends: usize,
    /// Journal lines.
    pub journal: usize,
    /// Files of replaced goals (`history/GOAL-ID/`).
    pub history: usize,
}

/// The owner's documents a project may have, kept byte for byte.
pub const OWNER_DOCS: [&str; 3] = ["owner.pub", "owner.seal", "owner.proofs"];

/// A whole project as it moves into a database: what its files hold.
#[derive(Debug)]
pub struct Project {
    /// The state as stored (nothing quarantined).
    pub snap: Snapshot,
    /// The journal's lines, as text and parsed.
    pub lines: Vec<(String, Value)>,
    /// The archived todos.
    pub archived: Vec<Todo>,
    /// The quota file, spends included.
    pub quota: QuotaFile,
    /// Every evidence entry, by todo id.
    pub evidence: Vec<(String, Value)>,
    /// The owner's documents present, by name.
    pub docs: BTreeMap<&'static str, String>,
    /// The files of replaced goals.
    pub history: Vec<history::HistoryFile>,
}

fn json<T: serde::Serialize>(v: &T) -> Result<Value> {
    serde_json::to_value(v).map_err(|e| Error::new(Code::Internal, e.to_string()))
}

/// Every line of a JSON Lines file, parsed; a line that is not JSON is an error naming it.
pub fn json_lines(path: &Path) -> Result<Vec<(String, Value)>> {
    let Some(bytes) = parse::read_bytes(path)? else {
        return Ok(Vec::new());
    };
    let shown = parse::shown(path);
    let text =
        String::from_utf8(bytes).map_err(|_| Error::invalid(&shown, None, "not valid UTF-8"))?;
    let mut out = Vec::new();
    for (i, l) in text.lines().enumerate().filter(|(_, l)| !l.is_empty()) {
        let v = serde_json::from_str(l)
            .map_err(|e| Error::invalid(&shown, Some(i + 1), format!("not JSON: {e}")))?;
        out.push((l.to_string(), v));
    }
    Ok(out)
}

/// The config a database keeps: the goal's, without the pointer to the database itself.
fn stored_config(mut c: Config) -> Config {
    c.extra.remove("store");
    c
}

impl PgStore {
    /// Copies `p` (a project read from its files) into this database, which must have the
    /// schema and no goal yet; one transaction, so a failure leaves the database as it was.
    pub fn import(&self, p: Project) -> Result<Moved> {
        let head = p
            .lines
            .last()
            .and_then(|(_, v)| v["seq"].as_i64())
            .unwrap_or(0);
        self.with(|c| {
            let mut tx = c.client()?.transaction().map_err(db_error)?;
            let goal = tx
                .query_opt("SELECT 1 FROM loopx.config", &[])
                .map_err(db_error)?;
            let lines_in = tx
                .query_one("SELECT count(*) FROM loopx.journal", &[])
                .map_err(db_error)?
                .get::<_, i64>(0);
            if goal.is_some() || lines_in > 0 {
                return Err(Error::new(Code::GoalExists, "the database already holds a project")
                    .hint("import into a new database (createdb, then `loopx store migrate`)"));
            }
            put_rows(&mut tx, &p, head)?;
            put_docs(&mut tx, &p, head)?;
            let seqs: Vec<i64> = p.lines.iter().filter_map(|(_, v)| v["seq"].as_i64()).collect();
            let texts: Vec<&str> = p.lines.iter().map(|(l, _)| l.as_str()).collect();
            tx.execute(
                "INSERT INTO loopx.journal (seq, line) SELECT * FROM unnest($1::bigint[], $2::text[])",
                &[&seqs, &texts],
            )
            .map_err(db_error)?;
            history::insert(&mut tx, &p.history)?;
            tx.commit().map_err(db_error)?;
            c.cache = super::Cached::default();
            Ok(Moved {
                todos: p.snap.todos.len() + p.archived.len(),
                gates: p.snap.gates.len(),
                evidence: p.evidence.len(),
                spends: p.quota.spends.len(),
                journal: p.lines.len(),
                history: p.history.len(),
            })
        })
    }

    /// Writes the project into `root/.loopx/`, which must not exist: files are written into a
    /// temporary directory beside it, then renamed into place, so a failure leaves nothing.
    pub fn export(&self, root: &Path) -> Result<Moved> {
        let dest = root.join(".loopx");
        if std::fs::symlink_metadata(&dest).is_ok() {
            return Err(Error::new(
                Code::GoalExists,
                format!("{} exists already", parse::shown(&dest)),
            )
            .hint("export into a directory without .loopx/"));
        }
        let tmp = root.join(".loopx.export-tmp");
        if std::fs::symlink_metadata(&tmp).is_ok() {
            std::fs::remove_dir_all(&tmp).map_err(|e| Error::io(&tmp, &e))?;
        }
        let moved = self.with(|c| {
            let mut tx = c
                .client()?
                .build_transaction()
                .isolation_level(postgres::IsolationLevel::RepeatableRead)
                .read_only(true)
                .start()
                .map_err(db_error)?;
            let r = write_tree(&mut tx, &tmp);
            let _ = tx.commit();
            r
        });
        let moved = match moved {
            Ok(m) => m,
            Err(e) => {
                let _ = std::fs::remove_dir_all(&tmp);
                return Err(e);
            }
        };
        std::fs::rename(&tmp, &dest).map_err(|e| Error::io(&dest, &e))?;
        atomic::sync_dir(root).map_err(|e| Error::io(root, &e))?;
        Ok(moved)
    }
}

/// The goal, todos, gates, agents, spends and evidence of an import, at journal position `head`.
fn put_rows(tx: &mut postgres::Transaction<'_>, p: &Project, head: i64) -> Result<()> {
    let cfg = json(&stored_config(p.snap.config.clone()))?;
    tx.execute(
        "INSERT INTO loopx.config (id, body, seq) VALUES (1, $1, $2)",
        &[&Json(&cfg), &head],
    )
    .map_err(db_error)?;
    for s in &p.quota.spends {
        tx.execute(
            "INSERT INTO loopx.spends (body, seq) VALUES ($1, $2)",
            &[&Json(&json(s)?), &head],
        )
        .map_err(db_error)?;
    }
    let mut put = |sql: &str, a: &str, b: Value| {
        tx.execute(sql, &[&a, &Json(&b), &head])
            .map(|_| ())
            .map_err(db_error)
    };
    let todos = p.snap.todos.values().map(|t| (t, false));
    for (t, arch) in todos.chain(p.archived.iter().map(|t| (t, true))) {
        let sql = if arch {
            "INSERT INTO loopx.todos (id, body, seq, archived) VALUES ($1, $2, $3, true)"
        } else {
            "INSERT INTO loopx.todos (id, body, seq) VALUES ($1, $2, $3)"
        };
        put(sql, &t.id, json(t)?)?;
    }
    for g in p.snap.gates.values() {
        put(
            "INSERT INTO loopx.gates (id, body, seq) VALUES ($1, $2, $3)",
            &g.id,
            json(g)?,
        )?;
    }
    for a in p.snap.agents.values() {
        put(
            "INSERT INTO loopx.agents (id, body, seq) VALUES ($1, $2, $3)",
            &a.id,
            json(a)?,
        )?;
    }
    for (id, v) in &p.evidence {
        put(
            "INSERT INTO loopx.evidence (todo, body, seq) VALUES ($1, $2, $3)",
            id,
            v.clone(),
        )?;
    }
    Ok(())
}

/// The owner's documents of an import, byte for byte, and the quota without its spends.
fn put_docs(tx: &mut postgres::Transaction<'_>, p: &Project, head: i64) -> Result<()> {
    let mut rest = p.quota.clone();
    rest.spends.clear();
    let mut bodies: Vec<(&str, String)> = p.docs.iter().map(|(k, v)| (*k, v.clone())).collect();
    bodies.push((
        "quota.toml",
        serde_json::to_string(&rest).map_err(|e| Error::new(Code::Internal, e.to_string()))?,
    ));
    for (name, body) in bodies {
        tx.execute(
            "INSERT INTO loopx.docs (name, body, seq) VALUES ($1, $2, $3)",
            &[&name, &body, &head],
        )
        .map_err(db_error)?;
    }
    Ok(())
}

/// A project's files by their path below `.loopx/`, as an export writes them.
pub(super) type Tree = BTreeMap<String, Vec<u8>>;

/// The directories every exported project has, empty or not.
const DIRS: [&str; 5] = ["todos", "archive", "gates", "evidence", "agents"];

/// Writes every file of the project under `dir` (a new directory), its history included.
fn write_tree(c: &mut impl GenericClient, dir: &Path) -> Result<Moved> {
    let (tree, mut moved) = render(c)?;
    let history = history::rows(c)?;
    moved.history = history.len();
    for sub in DIRS {
        let p = dir.join(sub);
        std::fs::create_dir_all(&p).map_err(|e| Error::io(&p, &e))?;
    }
    let kept = history
        .into_iter()
        .map(|(goal, path, body)| (format!("history/{goal}/{path}"), body));
    for (rel, bytes) in tree.into_iter().chain(kept) {
        let p = dir.join(&rel);
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent).map_err(|e| Error::io(parent, &e))?;
        }
        atomic::write(&p, &bytes).map_err(|e| Error::io(&p, &e))?;
    }
    Ok(moved)
}

/// Every file of the project as the database holds it now, by path below `.loopx/`.
pub(super) fn render(c: &mut impl GenericClient) -> Result<(Tree, Moved)> {
    let mut moved = Moved::default();
    let mut tree = Tree::new();
    let cfg = rows(c, "SELECT body::text FROM loopx.config")?;
    let Some(cfg) = cfg.first() else {
        return Err(Error::new(
            Code::NotInitialized,
            "the database has no goal to export",
        ));
    };
    let cfg: Config = from_text(&cfg.get::<_, String>(0), "config")?;
    tree.insert("loopx.toml".into(), parse::encode(&cfg)?.into_bytes());
    render_records(c, &mut tree, &mut moved)?;
    render_quota(c, &mut tree, &mut moved)?;
    render_logs(c, &mut tree, &mut moved)?;
    Ok((tree, moved))
}

/// Every row of `sql`.
fn rows(c: &mut impl GenericClient, sql: &str) -> Result<Vec<postgres::Row>> {
    c.query(sql, &[]).map_err(db_error)
}

/// The todos (open and archived), gates and agents, a file each.
fn render_records(c: &mut impl GenericClient, tree: &mut Tree, moved: &mut Moved) -> Result<()> {
    for r in rows(
        c,
        "SELECT id, body::text, archived FROM loopx.todos ORDER BY id",
    )? {
        let t: Todo = from_text(&r.get::<_, String>(1), "todos")?;
        let sub = if r.get::<_, bool>(2) {
            "archive"
        } else {
            "todos"
        };
        let rel = format!("{sub}/{}.toml", file_id(&t.id)?);
        tree.insert(rel, parse::encode(&t)?.into_bytes());
        moved.todos += 1;
    }
    for r in rows(c, "SELECT id, body::text FROM loopx.gates ORDER BY id")? {
        let g: crate::kernel::Gate = from_text(&r.get::<_, String>(1), "gates")?;
        let rel = format!("gates/{}.toml", file_id(&g.id)?);
        tree.insert(rel, parse::encode(&g)?.into_bytes());
        moved.gates += 1;
    }
    for r in rows(c, "SELECT id, body::text FROM loopx.agents ORDER BY id")? {
        let a: crate::kernel::model::AgentInfo = from_text(&r.get::<_, String>(1), "agents")?;
        let rel = format!("agents/{}.toml", file_id(&a.id)?);
        tree.insert(rel, parse::encode(&a)?.into_bytes());
    }
    Ok(())
}

/// `quota.toml`: the policy document with every spend.
fn render_quota(c: &mut impl GenericClient, tree: &mut Tree, moved: &mut Moved) -> Result<()> {
    let mut quota: QuotaFile =
        match rows(c, "SELECT body FROM loopx.docs WHERE name = 'quota.toml'")?.first() {
            Some(r) => from_text(&r.get::<_, String>(0), "quota")?,
            // A goal started in the database has no quota document yet.
            None => QuotaFile {
                schema_version: crate::kernel::SCHEMA_VERSION,
                ..QuotaFile::default()
            },
        };
    for r in rows(c, "SELECT body::text FROM loopx.spends ORDER BY n")? {
        quota
            .spends
            .push(from_text(&r.get::<_, String>(0), "spends")?);
    }
    moved.spends = quota.spends.len();
    tree.insert("quota.toml".into(), parse::encode(&quota)?.into_bytes());
    Ok(())
}

/// The evidence logs, the owner's documents, `.gitignore` and the journal.
fn render_logs(c: &mut impl GenericClient, tree: &mut Tree, moved: &mut Moved) -> Result<()> {
    for r in rows(c, "SELECT todo, body::text FROM loopx.evidence ORDER BY n")? {
        let e: crate::kernel::Evidence = from_text(&r.get::<_, String>(1), "evidence")?;
        let rel = format!("evidence/{}.jsonl", file_id(&r.get::<_, String>(0))?);
        let buf = tree.entry(rel).or_default();
        buf.extend(serde_json::to_vec(&e).map_err(|e| Error::new(Code::Internal, e.to_string()))?);
        buf.push(b'\n');
        moved.evidence += 1;
    }
    for r in rows(
        c,
        "SELECT name, body FROM loopx.docs WHERE name <> 'quota.toml'",
    )? {
        let name: String = r.get(0);
        if OWNER_DOCS.contains(&name.as_str()) {
            tree.insert(name, r.get::<_, String>(1).into_bytes());
        }
    }
    tree.insert(".gitignore".into(), b"lock\ncache/\n.*.tmp-*\n".to_vec());
    let mut journal_bytes = Vec::new();
    for r in rows(c, "SELECT line FROM loopx.journal ORDER BY seq")? {
        journal_bytes.extend_from_slice(r.get::<_, String>(0).as_bytes());
        journal_bytes.push(b'\n');
        moved.journal += 1;
    }
    tree.insert("journal.jsonl".into(), journal_bytes);
    Ok(())
}

/// An id that is safe as a file name.
fn file_id(id: &str) -> Result<&str> {
    crate::kernel::id::check_not_path(id)?;
    Ok(id)
}

fn from_text<T: serde::de::DeserializeOwned>(text: &str, what: &str) -> Result<T> {
    serde_json::from_str(text).map_err(|e| {
        Error::new(
            Code::InvalidState,
            format!("a row of the database's {what} cannot be read: {e}"),
        )
    })
}
