//! A foreground loop of turns for people without a scheduler: run when should-run says run,
//! sleep what it says otherwise, stop when the goal is paused or complete, or at a signal.

use std::time::{Duration, Instant};

use crate::flows::runner::{TurnOptions, TurnOutcome, TurnReport, run_turn};
use crate::kernel::should_run::{Answer, Decision};
use crate::kernel::{Dur, Result};
use crate::runtime::process;
use crate::store::Store;

/// The wait when should-run names none and `--every` is not given.
pub const WAIT_DEFAULT: Dur = Dur(60_000);

/// How to beat.
#[derive(Debug, Clone)]
pub struct HeartbeatOptions {
    /// Each turn's options (the turn id is fresh each time).
    pub turn: TurnOptions,
    /// The least time between two turns, and the wait when should-run names none.
    pub every: Option<Dur>,
    /// Stop after this many turns.
    pub max_turns: Option<u32>,
}

/// One thing the loop did, for its line.
#[derive(Debug)]
pub enum Beat<'a> {
    /// A turn ran, and how long the loop sleeps before the next.
    Ran(&'a TurnReport, Dur),
    /// Not now: the answer, and how long the loop sleeps.
    Waits(&'a Answer, Dur),
    /// The store was busy: tried again after the wait.
    Error(&'a crate::kernel::Error, Dur),
}

/// Why the loop stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stopped {
    /// The goal is paused or complete (the answer's reason).
    Goal(&'static str),
    /// `--max-turns` turns ran.
    MaxTurns,
    /// A signal asked it to stop; no lease is left held.
    Signal(i32),
}

/// Runs turns until the goal stops, `max_turns` ran, or a signal; `on_beat` gets each step.
pub fn heartbeat(
    store: &(dyn Store + Sync),
    opts: &HeartbeatOptions,
    mut on_beat: impl FnMut(Beat<'_>),
) -> Result<(Stopped, u32)> {
    let mut ran = 0u32;
    // `--every 0s` is no pause between turns, not a wait of nothing when there is nothing to do.
    let pause = opts.every.filter(|d| !d.is_zero());
    let mut failed = 0u32;
    loop {
        if let Some(s) = process::signalled() {
            return Ok((Stopped::Signal(s), ran));
        }
        let wait = match run_turn(store, &opts.turn) {
            Ok(TurnOutcome::Ran(r)) => {
                ran += 1;
                failed = if r.exit_code() == 0 { 0 } else { failed + 1 };
                if opts.max_turns.is_some_and(|m| ran >= m) {
                    on_beat(Beat::Ran(&r, Dur(0)));
                    return Ok((Stopped::MaxTurns, ran));
                }
                let wait = opts.every.unwrap_or(Dur(0)).max(backoff(failed));
                on_beat(Beat::Ran(&r, wait));
                wait
            }
            Ok(TurnOutcome::NotNow(a)) if a.decision == Decision::Paused => {
                return Ok((Stopped::Goal(a.reason), ran));
            }
            Ok(TurnOutcome::NotNow(a)) => {
                let said = a.retry_after_s.map(Dur::from_secs);
                let wait = said.or(pause).unwrap_or(WAIT_DEFAULT);
                let wait = wait.max(opts.every.unwrap_or(Dur(0)));
                on_beat(Beat::Waits(&a, wait));
                wait
            }
            Ok(TurnOutcome::Interrupted(_) | TurnOutcome::Replayed(_)) => continue,
            // After a signal, a busy store is the end of the loop: the error names what is held.
            Err(e) if e.code.is_busy() && process::signalled().is_none() => {
                let wait = pause.unwrap_or(WAIT_DEFAULT);
                on_beat(Beat::Error(&e, wait));
                wait
            }
            Err(e) => return Err(e),
        };
        sleep(wait);
    }
}

/// The wait after `failed` failed turns in a row: none, then 1s, 2s, 4s, ... up to 5 minutes,
/// so a broken command does not spend the window's slots in a burst.
pub fn backoff(failed: u32) -> Dur {
    crate::kernel::breaker::backoff(failed)
}

/// The longest wait after failed turns.
pub const BACKOFF_MAX: Dur = crate::kernel::breaker::BACKOFF_MAX;

/// Sleeps `d`, or less when a signal comes.
fn sleep(d: Dur) {
    let until = Instant::now() + Duration::from_millis(u64::try_from(d.0).unwrap_or(0));
    while process::signalled().is_none() {
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return;
        }
        std::thread::sleep(left.min(Duration::from_millis(50)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failed_turns_back_off_doubling_to_five_minutes() {
        let secs: Vec<i64> = (0..12).map(|n| backoff(n).0 / 1000).collect();
        assert_eq!(secs, [0, 1, 2, 4, 8, 16, 32, 64, 128, 256, 300, 300]);
        assert_eq!(backoff(u32::MAX), BACKOFF_MAX);
    }
}
