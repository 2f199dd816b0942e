//! The turn runner: one bounded turn, its start and end (`flows::turn`) around the command,
//! run with its lease renewed.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

use super::progress::measure;
pub use super::turn::Approved;
use super::turn::{self as flow, StartOpts};
use super::{check, claim};
use crate::kernel::ops::{self, Ended, Start, TurnEnd};
use crate::kernel::proof;
use crate::kernel::should_run::Answer;
use crate::kernel::{Code, Dur, Error, Evidence, Result, Todo, Ts};
use crate::runtime::git;
use crate::runtime::process::{self, Echo, Exit, Finished, Limits, Spec};
use crate::runtime::turn_id::{check_turn_id, command_evidence, fresh_turn_id};
use crate::store::{Store, StoreExt};

/// The default timeout of a turn's command.
pub const TIMEOUT_DEFAULT: Dur = Dur(3_600_000);
/// The default time between SIGTERM and SIGKILL at the timeout.
pub const GRACE_DEFAULT: Dur = Dur(10_000);
/// The exit code of a turn its timeout stopped (as `timeout(1)` gives).
pub const EXIT_TIMED_OUT: i32 = 124;

/// How to run a turn.
#[derive(Debug, Clone)]
pub struct TurnOptions {
    /// The project root, given to the command as `LOOPX_DIR`.
    pub dir: PathBuf,
    /// The agent that runs it.
    pub agent: String,
    /// The command and its arguments.
    pub argv: Vec<OsString>,
    /// Mark the todo done when the command exits 0.
    pub complete_on_success: bool,
    /// When the command is stopped.
    pub timeout: Dur,
    /// How long it has between SIGTERM and SIGKILL.
    pub grace: Dur,
    /// The lease's length (default: the project's).
    pub ttl: Option<Dur>,
    /// The turn's id (default: a fresh one); the agent's same id twice records once.
    pub turn: Option<String>,
    /// Where the command's output is copied.
    pub echo: Echo,
    /// The database's URL, given to the command as `LOOPX_STORE`; `None`: the files.
    pub store_url: Option<String>,
    /// The gate whose approved action `argv` is: its one use is committed with the claim.
    pub approved: Option<Approved>,
    /// Run in a git worktree of the todo's own, given as `LOOPX_WORKTREE` (`turn --worktree`).
    pub worktree: bool,
}

impl TurnOptions {
    /// A turn of `argv` for `agent` in the project at `dir`, with the defaults.
    pub fn new(dir: impl Into<PathBuf>, agent: &str, argv: Vec<OsString>) -> TurnOptions {
        TurnOptions {
            dir: dir.into(),
            agent: agent.to_string(),
            argv,
            complete_on_success: false,
            timeout: TIMEOUT_DEFAULT,
            grace: GRACE_DEFAULT,
            ttl: None,
            turn: None,
            echo: Echo::None,
            store_url: None,
            approved: None,
            worktree: false,
        }
    }
}

/// How a turn went.
#[derive(Debug, Clone)]
pub enum TurnOutcome {
    /// should-run said not now; nothing ran.
    NotNow(Box<Answer>),
    /// This turn id was recorded already; nothing ran.
    Replayed(String),
    /// A signal came before the command started; the lease was given back.
    Interrupted(String),
    /// The command ran.
    Ran(Box<TurnReport>),
}

/// A turn that ran.
#[derive(Debug, Clone)]
pub struct TurnReport {
    /// The turn's id.
    pub turn: String,
    /// The todo it ran for.
    pub todo: Todo,
    /// How the command ended.
    pub exit: Exit,
    /// True when the timeout stopped it.
    pub timed_out: bool,
    /// How long it ran.
    pub duration: Duration,
    /// The last lines of its output.
    pub output: String,
    /// What was recorded.
    pub ended: Ended,
    /// The signal (SIGINT or SIGTERM) loopx got and passed on, if any.
    pub signalled: Option<i32>,
    /// The limits (`slots`, `tokens`, `cost_usd`) the turn's spend went past, if any.
    pub over_limit: Vec<String>,
    /// Why a successful command did not make the todo done: its check failed (the evidence) or
    /// could not run (the error).
    pub check: Option<Result<Evidence>>,
    /// The todo's worktree, when the turn ran in one.
    pub worktree: Option<PathBuf>,
    /// What went wrong without failing the turn (a worktree kept or not removed).
    pub warnings: Vec<String>,
}

impl TurnReport {
    /// The exit code: the contract's for a refused record, 124 at the timeout, else the command's.
    pub fn exit_code(&self) -> i32 {
        match (&self.ended, self.timed_out) {
            (Ended::Refused(e), _) => e.code.exit_code(),
            (_, false) if self.check.is_some() => match &self.check {
                Some(Err(e)) => e.code.exit_code(),
                _ => Code::CheckFailed.exit_code(),
            },
            (_, true) => EXIT_TIMED_OUT,
            _ => self.exit.code(),
        }
    }
}

/// Runs one turn: should-run, claim, the command (lease renewed, stopped at the timeout), then
/// its evidence, done (when asked and it succeeded) or release, and one slot keyed by the turn.
///
/// ```
/// use loopx::kernel::{Config, Ts, id::Kind, ops};
/// use loopx::flows::runner::{TurnOptions, TurnOutcome, run_turn};
/// use loopx::store::{FileStore, Store, StoreExt};
///
/// # fn main() -> loopx::kernel::Result<()> {
/// let root = std::env::temp_dir().join(format!("loopx-doc-turn-{}", std::process::id()));
/// let store = FileStore::at(&root);
/// store.create(&Config::new("g-doc", "Ship the report", Ts::now()), "me")?;
/// let id = store.fresh_id(Kind::Todo)?;
/// store.mutate(|snap| ops::add_todo(snap, "me", Ts::now(), ops::NewTodo::new(id.clone(), "Write it")))?;
///
/// let mut opts = TurnOptions::new(&root, "agent-1", vec!["true".into()]);
/// opts.complete_on_success = true;
/// match run_turn(&store, &opts)? {
///     TurnOutcome::Ran(report) => assert_eq!(report.exit_code(), 0),
///     other => panic!("expected a turn, got {other:?}"),
/// }
/// assert!(store.load()?.todos.is_empty(), "the todo is done and archived");
/// # std::fs::remove_dir_all(&root).ok();
/// # Ok(())
/// # }
/// ```
pub fn run_turn(store: &(dyn Store + Sync), opts: &TurnOptions) -> Result<TurnOutcome> {
    if opts.argv.is_empty() {
        return Err(Error::usage("give the command to run after `--`"));
    }
    let turn = match &opts.turn {
        Some(t) => check_turn_id(t)?,
        None => fresh_turn_id()?,
    };
    let now = Ts::now();
    let o = StartOpts {
        turn: turn.clone(),
        ttl: opts.ttl,
        worktree: opts.worktree,
        approved: opts.approved.clone().map(|a| (a, opts.argv.clone())),
        ..StartOpts::default()
    };
    let s = flow::start(store, &opts.dir, (&opts.agent, now), &o)?;
    let todo = match s.start {
        Start::NotNow(a) => return Ok(TurnOutcome::NotNow(a)),
        Start::Replayed => return Ok(TurnOutcome::Replayed(turn)),
        Start::Claimed(t) => *t,
    };
    if process::signalled().is_some() {
        claim::release(store, &opts.agent, &todo.id)?;
        return Ok(TurnOutcome::Interrupted(todo.id));
    }
    // The work tree as the turn begins, for the breaker (nothing ran since the claim): the
    // todo's worktree when the turn runs in one, where its work is.
    let work = s.worktree.clone().unwrap_or_else(|| opts.dir.clone());
    let base = s.breaker.then(|| git::base(&work)).flatten();
    let run = run_renewed(store, opts, &todo, (s.ttl, s.worktree.as_deref()), &turn);
    let fin = match run {
        Ok(f) => f,
        Err(e) => {
            claim::release(store, &opts.agent, &todo.id)?;
            return Err(e);
        }
    };
    let signalled = process::signalled();
    let at = (work.as_path(), base, now, s.breaker);
    let (end, signals, check) = turn_end(store, opts, (&todo, &turn), &fin, at);
    let r = flow::end(store, &opts.dir, (&opts.agent, now), end, Some(signals))?;
    let mut warnings = s.warnings;
    warnings.extend(r.warnings);
    Ok(TurnOutcome::Ran(Box::new(TurnReport {
        turn,
        todo,
        exit: fin.exit,
        timed_out: fin.timed_out,
        duration: fin.duration,
        output: fin.tail,
        ended: r.ended,
        signalled,
        over_limit: r.over_limit,
        check: check.filter(|p| !p.as_ref().is_ok_and(proof::passed)),
        worktree: s.worktree,
        warnings,
    })))
}

/// What the turn's end records: its evidence, done (asked, the command succeeded, and its check,
/// if any, passed) or not, the check's run, and the breaker's facts (the work tree `work`
/// measured from `base` at `now` when the breaker is on and the todo is not done); and the
/// signal count the record's retries go by (a check run moves it on).
fn turn_end(
    store: &(dyn Store + Sync),
    opts: &TurnOptions,
    (todo, turn): (&Todo, &str),
    fin: &Finished,
    (work, base, now, breaker): (&Path, Option<crate::kernel::Base>, Ts, bool),
) -> (TurnEnd, usize, Option<Result<Evidence>>) {
    let mut signals = fin.signals_at_exit;
    let done = opts.complete_on_success && fin.exit.success() && !fin.timed_out;
    let check = match done {
        true => {
            let c = check_after(store, &opts.dir, &opts.agent, &todo.id, signals);
            signals = process::signal_count();
            c
        }
        false => None,
    };
    let done = done
        && check
            .as_ref()
            .is_none_or(|p| p.as_ref().is_ok_and(proof::passed));
    let failed = !fin.exit.success() || fin.timed_out;
    let progress = match (done, breaker) {
        (false, true) => measure(store, work, todo, (base, now), failed),
        _ => ops::Progress {
            failed,
            ..ops::Progress::default()
        },
    };
    let end = TurnEnd {
        todo: todo.id.clone(),
        fence: todo.fence,
        turn: turn.to_string(),
        evidence: command_evidence(&opts.agent, todo, turn, &opts.argv, fin),
        done,
        check: check.clone().and_then(|p| p.ok()),
        closed_fence: None,
        progress,
    };
    (end, signals, check)
}

/// After a turn's command succeeded: the check todo `id` needs, run in `root` (`None` when it
/// needs none, `Some(Err)` when it cannot run: edited, unapproved), the state read again while
/// the store is busy unless a signal came since the count was `signals`.
fn check_after(
    store: &dyn Store,
    root: &Path,
    agent: &str,
    id: &str,
    signals: usize,
) -> Option<Result<Evidence>> {
    let snap = match flow::retrying(signals, || store.load()) {
        Ok(s) => s,
        Err(e) => return Some(Err(e)),
    };
    let t = snap.todos.get(id)?;
    match proof::needed(&snap, t) {
        Ok(None) => None,
        Ok(Some(n)) => Some(check::run(
            root,
            t,
            &n,
            (agent, Ts::now()),
            check::TIMEOUT_DEFAULT,
        )),
        Err(e) => Some(Err(e)),
    }
}

/// Runs the command while a second thread renews the lease every third of its length.
fn run_renewed(
    store: &(dyn Store + Sync),
    opts: &TurnOptions,
    todo: &Todo,
    (ttl, tree): (Dur, Option<&Path>),
    turn: &str,
) -> Result<Finished> {
    let env = |k: &str, v: &str| (OsString::from(k), OsString::from(v));
    let mut vars = vec![
        (
            OsString::from("LOOPX_DIR"),
            opts.dir.clone().into_os_string(),
        ),
        env("LOOPX_AGENT", &opts.agent),
        env("LOOPX_TODO_ID", &todo.id),
        // A hand-edited title may hold a NUL, which no environment value can.
        env("LOOPX_TODO_TITLE", &todo.title.replace('\0', "\u{fffd}")),
        env("LOOPX_FENCE", &todo.fence.to_string()),
        env("LOOPX_TURN", turn),
    ];
    vars.extend(opts.store_url.as_deref().map(|u| env("LOOPX_STORE", u)));
    vars.extend(tree.map(|p| (OsString::from("LOOPX_WORKTREE"), p.as_os_str().to_owned())));
    let spec = Spec {
        argv: opts.argv.clone(),
        env: vars,
        cwd: None,
        stdin: None,
        echo: opts.echo,
        forward: true,
        // What the command leaves running in its group is killed as it ends, as a check's is.
        end_group: true,
    };
    let limits = Limits {
        timeout: to_std(opts.timeout),
        grace: to_std(opts.grace),
        ..Limits::default()
    };
    std::thread::scope(|s| {
        let (stop, stopped) = mpsc::channel::<()>();
        let every = (to_std(ttl) / 3).max(Duration::from_millis(200));
        s.spawn(move || renew_until(store, opts, todo, (ttl, turn), every, &stopped));
        let fin = process::run(&spec, &limits);
        drop(stop);
        fin
    })
}

fn to_std(d: Dur) -> Duration {
    Duration::from_millis(u64::try_from(d.0).unwrap_or(0))
}

/// Renews the lease until told to stop, or until it is lost (then the end's record says so).
fn renew_until(
    store: &(dyn Store + Sync),
    opts: &TurnOptions,
    todo: &Todo,
    (ttl, turn): (Dur, &str),
    every: Duration,
    stop: &mpsc::Receiver<()>,
) {
    while stop.recv_timeout(every) == Err(mpsc::RecvTimeoutError::Timeout) {
        let r = store.mutate(|snap| {
            let this = (todo.id.as_str(), todo.fence, turn);
            Ok((
                ops::renew_turn(snap, &opts.agent, Ts::now(), ttl, this)?,
                (),
            ))
        });
        // A lost lease is final; a busy lock or a passing I/O error is tried again.
        if let Err(e) = r
            && matches!(
                e.code,
                Code::StaleFence | Code::LeaseConflict | Code::NotFound
            )
        {
            return;
        }
    }
}
