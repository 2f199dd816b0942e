//! One bounded turn: should-run and the claim, the command run with its lease renewed, then its
//! evidence, done or release, and one slot, recorded together.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

use crate::kernel::ops::{self, Ended, Start, TurnEnd};
use crate::kernel::proof;
use crate::kernel::should_run::Answer;
use crate::kernel::{Code, Dur, Error, Evidence, Result, Todo, Ts};
use crate::runtime::git;
use crate::runtime::process::{self, Echo, Exit, Finished, Limits, Spec};
use crate::runtime::progress::measure;
use crate::runtime::proof as run_proof;
use crate::runtime::turn_id::command_evidence;
pub use crate::runtime::turn_id::{check_turn_id, fresh_turn_id, shell_join, took};
use crate::runtime::turn_store::{load_retrying, record_end, release, renew_until};
use crate::runtime::worktree;
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

/// A turn that runs a gate's approved action.
#[derive(Debug, Clone)]
pub struct Approved {
    /// The gate's id.
    pub gate: String,
    /// The journal holds a use of it already.
    pub journal_used: bool,
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
    pub proof: Option<Result<Evidence>>,
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
            (_, false) if self.proof.is_some() => match &self.proof {
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
/// use loopx::runtime::turn::{TurnOptions, TurnOutcome, run_turn};
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
    if opts.worktree {
        worktree::preflight(&opts.dir)?;
    }
    let (start, ttl, breaker, prior) = claim(store, opts, &turn, now)?;
    let todo = match start {
        Start::NotNow(a) => return Ok(TurnOutcome::NotNow(a)),
        Start::Replayed => return Ok(TurnOutcome::Replayed(turn)),
        Start::Claimed(t) => *t,
    };
    let claimed = worktree::after_claim(&opts.dir, opts.worktree, prior.as_ref(), &todo, now);
    let (tree, mut warnings) = match claimed {
        Ok(x) => x,
        Err(e) => {
            release(store, &opts.agent, &todo.id)?;
            return Err(e);
        }
    };
    if process::signalled().is_some() {
        release(store, &opts.agent, &todo.id)?;
        return Ok(TurnOutcome::Interrupted(todo.id));
    }
    // The work tree as the turn begins, for the breaker (nothing ran since the claim): the
    // todo's worktree when the turn runs in one, where its work is.
    let work = tree.clone().unwrap_or_else(|| opts.dir.clone());
    let base = breaker.then(|| git::base(&work)).flatten();
    let fin = run_renewed(store, opts, &todo, (ttl, tree.as_deref()), &turn);
    let fin = match fin {
        Ok(f) => f,
        Err(e) => {
            release(store, &opts.agent, &todo.id)?;
            return Err(e);
        }
    };
    // A signal after the command exited comes while the turn is recorded: it stops the retries
    // of a busy end.
    let mut signals = fin.signals_at_exit;
    let signalled = process::signalled();
    let (done, proof) = prove_done(store, opts, &todo, &fin, &mut signals);
    let end = turn_end(
        store,
        opts,
        (&todo, &turn),
        &fin,
        (done, &proof),
        (&work, base, now, breaker),
    );
    let (ended, over_limit) = record_end(store, &opts.agent, end, signals)?;
    if matches!(ended, Ended::Done) {
        warnings.extend(worktree::retire(&opts.dir, &todo.id));
    }
    Ok(TurnOutcome::Ran(Box::new(TurnReport {
        turn,
        todo,
        exit: fin.exit,
        timed_out: fin.timed_out,
        duration: fin.duration,
        output: fin.tail,
        ended,
        signalled,
        over_limit,
        proof: proof.filter(|p| !p.as_ref().is_ok_and(proof::passed)),
        worktree: tree,
        warnings,
    })))
}

/// The turn's start, committed: should-run and the claim (with the approved action's use and
/// the worktree's lease), the lease's length, whether the breaker is on, and the lease before.
fn claim(
    store: &(dyn Store + Sync),
    opts: &TurnOptions,
    turn: &str,
    now: Ts,
) -> Result<(Start, Dur, bool, Option<crate::kernel::Lease>)> {
    store.mutate_claim(&opts.agent, now, |snap| {
        let ttl = opts.ttl.unwrap_or(snap.config.lease.ttl);
        let (mut c, mut s) = ops::start_turn(snap, &opts.agent, now, ttl, (turn, None))?;
        if let (Some(a), Start::Claimed(_)) = (&opts.approved, &s) {
            use_approval(snap, opts, a, now, turn, &mut c)?;
        }
        let prior = match &mut s {
            Start::Claimed(t) => worktree::claimed(&opts.dir, snap, opts.worktree, &mut c, t)?,
            _ => None,
        };
        Ok((c, (s, ttl, snap.config.breaker.turns() > 0, prior)))
    })
}

/// Whether the turn makes its todo done (asked, the command succeeded, and its check, if any,
/// passed), and the check's run. A check run moves `signals` on.
fn prove_done(
    store: &(dyn Store + Sync),
    opts: &TurnOptions,
    todo: &Todo,
    fin: &Finished,
    signals: &mut usize,
) -> (bool, Option<Result<Evidence>>) {
    let done = opts.complete_on_success && fin.exit.success() && !fin.timed_out;
    let proof = if done {
        let p = prove(store, opts, todo, *signals);
        *signals = process::signal_count();
        p
    } else {
        None
    };
    let done = done
        && proof
            .as_ref()
            .is_none_or(|p| p.as_ref().is_ok_and(proof::passed));
    (done, proof)
}

/// What the turn's end records: its evidence, done or not, the check, and the breaker's facts
/// (the work tree `work` measured from `base` at `now` when the breaker is on and the todo is
/// not done).
fn turn_end(
    store: &(dyn Store + Sync),
    opts: &TurnOptions,
    (todo, turn): (&Todo, &str),
    fin: &Finished,
    (done, proof): (bool, &Option<Result<Evidence>>),
    (work, base, now, breaker): (&Path, Option<crate::kernel::Base>, Ts, bool),
) -> TurnEnd {
    let closed_fence = match store.archived_todo(&todo.id) {
        Ok(Some(t)) => Some(t.fence),
        _ => None,
    };
    let failed = !fin.exit.success() || fin.timed_out;
    let progress = match (done, breaker) {
        (false, true) => measure(store, work, todo, (base, now), failed),
        _ => ops::Progress {
            failed,
            ..ops::Progress::default()
        },
    };
    TurnEnd {
        todo: todo.id.clone(),
        fence: todo.fence,
        turn: turn.to_string(),
        evidence: command_evidence(&opts.agent, todo, turn, &opts.argv, fin),
        done,
        check: proof.clone().and_then(|p| p.ok()),
        closed_fence,
        progress,
    }
}

/// Adds the one use of the gate's approved action to the turn's claim: the same transaction, so
/// the action runs at most once, and only under the lease. The action must be `opts.argv`.
fn use_approval(
    snap: &crate::kernel::Snapshot,
    opts: &TurnOptions,
    a: &Approved,
    now: Ts,
    turn: &str,
    c: &mut ops::Change,
) -> Result<()> {
    let (used, g) = ops::use_gate(snap, &opts.agent, now, &a.gate, Some(turn), a.journal_used)?;
    let same = g.action.as_ref().is_some_and(|x| {
        x.kind == crate::kernel::gate_action::ActionKind::Cmd
            && x.argv
                .iter()
                .map(OsString::from)
                .eq(opts.argv.iter().cloned())
    });
    if !same {
        return Err(Error::new(
            Code::Denied,
            format!(
                "gate {}'s action is not the command this turn was given",
                a.gate
            ),
        ));
    }
    c.writes.extend(used.writes);
    c.events.extend(used.events);
    Ok(())
}

/// The check that proves `todo` done, run after a successful command: `None` when there is
/// none, `Some(Err)` when it cannot run (edited, unapproved).
fn prove(
    store: &(dyn Store + Sync),
    opts: &TurnOptions,
    todo: &Todo,
    signals: usize,
) -> Option<Result<Evidence>> {
    let snap = match load_retrying(store, signals) {
        Ok(s) => s,
        Err(e) => return Some(Err(e)),
    };
    let t = snap.todos.get(&todo.id)?;
    match proof::needed(&snap, t) {
        Ok(None) => None,
        Ok(Some(n)) => {
            let timeout = run_proof::TIMEOUT_DEFAULT;
            Some(run_proof::run(
                &opts.dir,
                t,
                &n,
                &opts.agent,
                Ts::now(),
                timeout,
            ))
        }
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
