//! `loopx serve`: keeps the project's snapshot in memory, up to date from the directory's
//! events, and answers `quota should-run` and a `monitor poll` with nothing due for the
//! commands that ask it, so that they cost what changed, not what exists.

pub mod client;
pub mod wire;

use std::io::Write as _;
use std::os::fd::AsRawFd as _;
use std::os::linux::net::SocketAddrExt as _;
use std::os::unix::net::{UnixListener, UnixStream};
use std::time::{Duration, Instant};

use serde_json::json;

use super::{Ctx, Out};
use crate::kernel::{Code, Dur, Error, Result, Ts, should_run};
use crate::store::files::warm::Warm;
use wire::{Ask, Asked, Reply};

/// How long a question waits for the project's lock before the asker is told to load itself.
const LOCK_WAIT: Duration = Duration::from_millis(200);
/// How often the server checks that `.loopx/` is still where it was, in ms.
const PLACE_EVERY_MS: i64 = 2000;
/// How long a question may take to arrive.
const ASK_WAIT: Duration = Duration::from_secs(2);

/// The longest `--idle` (30 days).
const IDLE_MAX: Dur = Dur(30 * 24 * 3600 * 1000);

/// What the server counted.
#[derive(Debug, Default)]
struct Tally {
    answered: u64,
    declined: u64,
}

/// Runs `loopx serve` until it has been idle for `idle`, or `.loopx/` is gone.
pub fn run(ctx: &Ctx, idle: Dur, verbose: bool) -> Result<Out> {
    if idle < Dur::from_secs(1) || idle > IDLE_MAX {
        return Err(Error::usage(format!(
            "--idle must be 1s to 30d, not {idle}"
        )));
    }
    // A held lock is not waited for: the asker, told so, waits for it itself, beside the others.
    let store = ctx.files()?.with_env(crate::store::Env {
        lock_wait: LOCK_WAIT,
        ..ctx.env()
    });
    let name = wire::name(store.dir()).map_err(|e| Error::io(store.dir(), &e))?;
    let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes())
        .map_err(|e| Error::new(Code::Io, format!("cannot name the socket: {e}")))?;
    let me = wire::exe_id().map_err(|e| Error::new(Code::Io, format!("/proc/self/exe: {e}")))?;
    let mut warm = Warm::new(store).map_err(|why| {
        Error::usage(format!("cannot serve: {why}"))
            .hint("run the agents' commands without `loopx serve` here")
    })?;
    let listener = match UnixListener::bind_addr(&addr) {
        Ok(l) => l,
        Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => return Err(taken(&name)),
        Err(e) => return Err(Error::new(Code::Io, format!("cannot listen: {e}"))),
    };
    let root = warm.store().root().display().to_string();
    say(&format!(
        "serving {} (should-run, monitor poll)",
        crate::text::escape(&root)
    ));
    let mut tally = Tally::default();
    let mut asked = Instant::now();
    let why = loop {
        if warm.gone() {
            break "gone";
        }
        let left = idle.0.saturating_sub(ms(asked.elapsed()));
        if left <= 0 {
            break "idle";
        }
        // Woken at least every few seconds to see that the project is still where it was.
        let (question, events) = wait(&listener, warm.events_fd(), left.min(PLACE_EVERY_MS));
        warm.check_place();
        if warm.gone() {
            break "gone";
        }
        if events && let Err(why) = warm.absorb() {
            say(&crate::text::escape(&why));
            break "error";
        }
        if question && let Ok((stream, _)) = listener.accept() {
            asked = Instant::now();
            serve_one(&mut warm, stream, me, verbose, &mut tally);
        }
    };
    let text = format!(
        "stopped ({why}): {} answered, {} left to the usual way",
        tally.answered, tally.declined
    );
    Ok(Out::new(
        "served",
        json!({"answered": tally.answered, "declined": tally.declined, "stopped": why}),
        text,
    ))
}

/// A line on stderr; a closed stderr is no reason to stop.
fn say(line: &str) {
    let _ = writeln!(std::io::stderr().lock(), "loopx: {line}");
}

/// Why the socket's name is taken: another server of this user's, or a stranger's socket.
fn taken(name: &str) -> Error {
    // Without waiting: a stranger's full queue must not hold this up.
    let ours = wire::connect(name).is_ok_and(|s| wire::same_user(&s));
    if ours {
        Error::new(Code::Busy, "a `loopx serve` already runs for this project")
            .hint("one is enough; stop it first to start another")
    } else {
        Error::new(
            Code::Busy,
            "another user's process holds this project's socket name",
        )
        .hint("the commands load the usual way meanwhile; find it in /proc/net/unix")
    }
}

/// Waits at most `ms` for a connection on `l` or an event on `events`: which of them is ready.
fn wait(l: &UnixListener, events: std::os::fd::RawFd, ms: i64) -> (bool, bool) {
    let fd = |fd| libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    let mut p = [fd(l.as_raw_fd()), fd(events)];
    let ms = i32::try_from(ms).unwrap_or(i32::MAX);
    // SAFETY: two valid pollfds for the length given.
    let rc = unsafe { libc::poll(p.as_mut_ptr(), 2, ms) };
    if rc <= 0 {
        return (false, false);
    }
    (p[0].revents != 0, p[1].revents != 0)
}

/// A duration in whole ms.
fn ms(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// Reads one question and writes its answer; a stranger, a torn or slow question gets none.
fn serve_one(warm: &mut Warm, mut s: UnixStream, me: [i64; 4], verbose: bool, t: &mut Tally) {
    if !wire::same_user(&s) {
        return;
    }
    if s.set_write_timeout(Some(ASK_WAIT)).is_err() {
        return;
    }
    let Ok(body) = wire::read_all(&mut s, wire::ASK_MAX, ASK_WAIT) else {
        return;
    };
    let reply = match serde_json::from_slice::<Ask>(&body) {
        Ok(ask) => answer(warm, &ask, me),
        Err(_) => Reply::Decline {
            why: "a question this server does not read".into(),
        },
    };
    match &reply {
        Reply::Answer { exit, .. } => {
            t.answered += 1;
            if verbose {
                say(&format!("answered (exit {exit})"));
            }
        }
        Reply::Decline { why } => {
            t.declined += 1;
            if verbose {
                say(&format!("declined: {}", crate::text::escape(why)));
            }
        }
    }
    if let Ok(b) = serde_json::to_vec(&reply) {
        let _ = s.write_all(&b);
    }
}

/// The answer to one question, as the command would print it.
fn answer(warm: &mut Warm, ask: &Ask, me: [i64; 4]) -> Reply {
    let decline = |why: &str| Reply::Decline { why: why.into() };
    if ask.v != wire::VERSION || ask.exe != me {
        return decline("another loopx binary");
    }
    // Messages name files as the asker spells the directory.
    if warm.store().dir().to_str() != Some(ask.dir.as_str()) {
        return decline("the project's directory spelled another way");
    }
    if ask.agent.len() > crate::kernel::bounds::AGENT_MAX
        || crate::kernel::id::check_agent(&ask.agent).is_err()
    {
        return decline("an agent id the usual way refuses");
    }
    let Ok(now) = Ts::checked_now() else {
        return decline("the clock");
    };
    let snap = match warm.snapshot() {
        Ok(s) => s,
        Err(why) => return decline(&why),
    };
    // Each answer spends what a command alone would, so it is the same answer.
    snap.reserve_budget.reset();
    let out = match ask.cmd {
        Asked::ShouldRun => super::quota::answer_out(&should_run::decide(snap, &ask.agent, now)),
        Asked::Poll { timeout_ms } => {
            let timeout = Dur(timeout_ms);
            if crate::runtime::monitor::check_timeout(timeout).is_err() {
                return decline("a --timeout the usual way refuses");
            }
            match crate::runtime::monitor::quiet(snap, now) {
                Some(p) => super::monitor::poll_out(p, timeout),
                None => return decline("a check is due"),
            }
        }
    };
    let (stdout, stderr) = super::render(ask.json, out.json, &out.text);
    Reply::Answer {
        exit: out.exit,
        stdout,
        stderr,
    }
}
