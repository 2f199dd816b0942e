//! One project on either store for the conformance suite: the files, or a database holding the
//! same project imported, with an owner's login and one login per agent; driven by the binary.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use super::{Project, Run, assert_err, exit_of, parse_json, pg, run_cmd};

/// The password of every login the tests make (a throwaway server trusts local logins anyway).
const PASSWORD: &str = "lx-test-pw";

/// Which store a case runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// The `.loopx/` directory.
    Files,
    /// A PostgreSQL database (`--store URL`).
    Db,
}

/// Who runs a command: on a database, whose login; and whether the owner's key is there.
#[derive(Debug, Clone, Copy)]
pub enum Who<'a> {
    /// The owner: the owner's login and the owner's key.
    Owner,
    /// The owner's login, without the owner's key.
    OwnerNoKey,
    /// An agent: its own login (`--agent` is its id), no owner key.
    Agent(&'a str),
    /// An agent's login with the owner's real key at hand.
    AgentWithKey(&'a str),
}

impl Who<'_> {
    fn agent(&self) -> Option<&str> {
        match self {
            Who::Agent(a) | Who::AgentWithKey(a) => Some(a),
            Who::Owner | Who::OwnerNoKey => None,
        }
    }

    fn has_key(&self) -> bool {
        matches!(self, Who::Owner | Who::AgentWithKey(_))
    }
}

/// A migrated database with an owner's login.
pub struct Db {
    /// The server's superuser URL on this database.
    pub admin: String,
    /// The database's name (also the roles' prefix).
    pub name: String,
    /// The owner's login URL.
    pub owner: String,
}

impl Db {
    /// A fresh database, migrated by the binary with roles `NAME_owner` / `NAME_agent`, and an
    /// owner's login `NAME_o` in the owner role.
    pub fn new(server: &pg::Server, p: &Project) -> Db {
        let admin = pg::fresh_db(server);
        let name = db_name(&admin);
        let mut c = p.cmd(&[
            "--json", "--store", &admin, "store", "migrate", "--roles", &name,
        ]);
        let v = parse_json(&run_cmd(&mut c), "store migrate");
        assert_eq!(v["migrated"]["to"], 3, "{v}");
        Db::with_owner(admin, name)
    }

    /// A fresh database with the schema of version 1 (tests/fixtures/pg-schema-v1.sql, the SQL
    /// of loopx before version 2), and an owner's login.
    pub fn version_1(server: &pg::Server) -> Db {
        let admin = pg::fresh_db(server);
        let name = db_name(&admin);
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/pg-schema-v1.sql"
        );
        let sql = std::fs::read_to_string(path)
            .expect("the version 1 schema")
            .replace("__OWNER__", &format!("{name}_owner"))
            .replace("__AGENT__", &format!("{name}_agent"));
        let (code, _, err) = pg::psql(&admin, &sql);
        assert_eq!(code, 0, "the version 1 schema: {err}");
        Db::with_owner(admin, name)
    }

    /// The database `admin` names, with an owner's login `NAME_o` in the owner role.
    fn with_owner(admin: String, name: String) -> Db {
        let login = format!("{name}_o");
        make_login(&admin, &login, &format!("{name}_owner"));
        let owner = pg::with_user(&admin, &login, PASSWORD);
        Db { admin, name, owner }
    }

    /// A new login `name` in the agent role; its URL.
    pub fn agent_login(&self, name: &str) -> String {
        make_login(&self.admin, name, &format!("{}_agent", self.name));
        pg::with_user(&self.admin, name, PASSWORD)
    }

    /// Copies the project under `root` in, as the owner's login.
    pub fn import(&self, p: &Project, root: &Path) -> Value {
        self.move_project(p, "import", "--from", root)
    }

    /// Writes the project into `root/.loopx/`, as the owner's login.
    pub fn export(&self, p: &Project, root: &Path) -> Value {
        self.move_project(p, "export", "--to", root)
    }

    /// `store OP FLAG ROOT` as the owner's login, asserting it worked; its answer.
    fn move_project(&self, p: &Project, op: &str, flag: &str, root: &Path) -> Value {
        let dir = root.to_str().expect("a UTF-8 temp dir");
        let mut c = p.cmd(&["--json", "--store", &self.owner, "store", op, flag, dir]);
        let r = run_cmd(&mut c);
        let v = parse_json(&r, op);
        assert_eq!(r.code, 0, "store {op}: {v}");
        v
    }

    /// Runs `sql` as the superuser; its rows (psql's unaligned output), asserting it worked.
    #[track_caller]
    pub fn sql(&self, sql: &str) -> String {
        let (code, out, err) = pg::psql(&self.admin, sql);
        assert_eq!(code, 0, "{sql}: {err}");
        out
    }
}

/// The database named by `url`.
fn db_name(url: &str) -> String {
    let path = url.split('?').next().unwrap_or(url);
    path.rsplit('/').next().unwrap_or(path).to_string()
}

/// Makes the login `name` (or keeps it: role names are the cluster's) and puts it in `group`.
fn make_login(admin: &str, name: &str, group: &str) {
    let sql = format!(
        "DO $$ BEGIN CREATE ROLE {name} LOGIN PASSWORD '{PASSWORD}'; \
         EXCEPTION WHEN duplicate_object THEN NULL; END $$;\nGRANT {group} TO {name};"
    );
    let (code, _, err) = pg::psql(admin, &sql);
    assert_eq!(code, 0, "login {name}: {err}");
}

/// A project with todos on one backend, and its agents.
pub struct Lab {
    /// The store.
    pub backend: Backend,
    /// The project (for the database: its root, without `.loopx/` after the import).
    pub p: Project,
    /// The database, for `Backend::Db`.
    pub db: Option<Db>,
    /// The agents' ids (on a database, their logins' names).
    pub agents: Vec<String>,
    /// The todos made before the first agent came, in order.
    pub todos: Vec<String>,
    /// Each agent's login URL (database only), in the order of `agents`.
    urls: Vec<String>,
}

/// The server for a database case; None (after saying "skipping") when there is none.
pub fn server_for(backend: Backend) -> Option<Option<&'static pg::Server>> {
    match backend {
        Backend::Files => Some(None),
        Backend::Db => pg::server_or_skip().map(Some),
    }
}

impl Lab {
    /// A project with `todos` todos and `agents` agents on `backend`: start-goal, owner init and
    /// the todos on the files; for a database, then migrated, imported, the agents' logins made
    /// and `.loopx/` moved away. None when a database is wanted and there is no server.
    pub fn new(backend: Backend, tag: &str, agents: usize, todos: usize) -> Option<Lab> {
        let server = server_for(backend)?;
        let p = Project::new(tag);
        let todos: Vec<String> = (0..todos)
            .map(|i| p.add(&format!("todo {i}"), &[]))
            .collect();
        let Some(server) = server else {
            let agents = (1..=agents).map(|i| format!("a{i}")).collect();
            return Some(Lab {
                backend,
                p,
                db: None,
                agents,
                todos,
                urls: Vec::new(),
            });
        };
        let db = Db::new(server, &p);
        let v = db.import(&p, p.root());
        assert_eq!(v["imported"]["todos"], todos.len(), "{v}");
        // From here the database is the project: no file can stand in for it.
        std::fs::rename(p.lx(""), p.home.path.join("imported.loopx")).expect("move .loopx");
        let tail = db.name.trim_start_matches("loopx_t_").to_string();
        let agents: Vec<String> = (1..=agents).map(|i| format!("a{i}_{tail}")).collect();
        let urls = agents.iter().map(|a| db.agent_login(a)).collect();
        Some(Lab {
            backend,
            p,
            db: Some(db),
            agents,
            todos,
            urls,
        })
    }

    /// Agent `i` (from 1).
    pub fn agent(&self, i: usize) -> &str {
        &self.agents[i - 1]
    }

    /// The login URL `who` uses on the database (None on the files).
    pub fn login(&self, who: Who<'_>) -> Option<String> {
        self.db.as_ref().map(|db| self.url_of(db, who))
    }

    /// The login URL `who` uses on `db`.
    fn url_of(&self, db: &Db, who: Who<'_>) -> String {
        match who.agent() {
            None => db.owner.clone(),
            Some(a) => match self.agents.iter().position(|x| x == a) {
                Some(i) => self.urls[i].clone(),
                None => panic!("{a} is not an agent of this lab"),
            },
        }
    }

    /// The binary, run by `who` on this lab's store with `args` (flags first).
    pub fn cmd(&self, who: Who<'_>, args: &[&str]) -> Command {
        self.cmd_on(who, self.login(who).as_deref(), args)
    }

    /// Like `cmd`, on the store `url` instead (files when None).
    pub fn cmd_on(&self, who: Who<'_>, url: Option<&str>, args: &[&str]) -> Command {
        let mut a = vec!["--json"];
        if let Some(u) = url {
            a.extend(["--store", u]);
        }
        if let Some(agent) = who.agent() {
            a.extend(["--agent", agent]);
        }
        a.extend_from_slice(args);
        let mut c = self.p.cmd(&a);
        c.env("LOOPX_LOCK_TIMEOUT", "60");
        if !who.has_key() {
            c.env("LOOPX_OWNER_KEY", self.p.home.path.join("no-such-key"));
        }
        c
    }

    /// Runs with `--json`: the exit code and the one JSON object.
    pub fn json(&self, who: Who<'_>, args: &[&str]) -> (i32, Value) {
        let r = self.run(who, args);
        let v = parse_json(&r, &args.join(" "));
        (r.code, v)
    }

    /// Runs with `--json`: what the binary gave.
    pub fn run(&self, who: Who<'_>, args: &[&str]) -> Run {
        run_cmd(&mut self.cmd(who, args))
    }

    /// Runs, asserting exit 0.
    #[track_caller]
    pub fn ok(&self, who: Who<'_>, args: &[&str]) -> Value {
        let (code, v) = self.json(who, args);
        assert_eq!(
            code,
            0,
            "{} {args:?} on {:?}: {v}",
            who_name(who),
            self.backend
        );
        v
    }

    /// Runs, asserting the failure `code` and its exit code; the error object.
    #[track_caller]
    pub fn fails(&self, who: Who<'_>, args: &[&str], code: &str) -> Value {
        let (exit, v) = self.json(who, args);
        assert_err(&v, code);
        assert_eq!(exit, exit_of(code), "{args:?} on {:?}: {v}", self.backend);
        v["error"].clone()
    }

    /// The journal, as `journal.jsonl` holds it.
    pub fn journal_text(&self) -> String {
        match &self.db {
            None => std::fs::read_to_string(self.p.lx("journal.jsonl")).expect("read journal"),
            Some(db) => db.sql("SELECT line FROM loopx.journal ORDER BY seq"),
        }
    }

    /// The journal's lines, parsed.
    pub fn journal(&self) -> Vec<Value> {
        self.journal_text()
            .lines()
            .map(|l| serde_json::from_str(l).expect("a journal line is JSON"))
            .collect()
    }

    /// The project as a `.loopx/` directory under `root`: exported from the database, or a copy
    /// of the files.
    pub fn export(&self, root: &Path) {
        match &self.db {
            Some(db) => {
                db.export(&self.p, root);
            }
            None => copy_dir(&self.p.lx(""), &root.join(".loopx")),
        }
    }
}

/// A name for `who` in messages.
fn who_name(who: Who<'_>) -> String {
    match who {
        Who::Owner => "the owner".into(),
        Who::OwnerNoKey => "the owner without a key".into(),
        Who::Agent(a) => a.into(),
        Who::AgentWithKey(a) => format!("{a} with the owner's key"),
    }
}

/// Copies the regular files and directories under `from` to `to` (made).
pub fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("make the copy's dir");
    for e in std::fs::read_dir(from)
        .expect("read a dir to copy")
        .flatten()
    {
        let (src, dst): (PathBuf, PathBuf) = (e.path(), to.join(e.file_name()));
        let kind = e.file_type().expect("a file type");
        if kind.is_dir() {
            copy_dir(&src, &dst);
        } else if kind.is_file() {
            std::fs::copy(&src, &dst).expect("copy a file");
        }
    }
}
