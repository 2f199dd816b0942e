//! The no-progress breaker: what counts as progress in a turn, the per-todo backoff after a
//! failed turn, and the parking of a todo that made no progress N turns in a row.

use serde::Serialize;

use crate::kernel::model::{Config, Evidence, EvidenceKind, GateStatus, Snapshot, Todo};
use crate::kernel::time::{Dur, Ts};

pub use crate::kernel::model::{Base, BreakerPolicy, Stall, TURNS_DEFAULT, TURNS_MAX};

/// The longest per-todo backoff.
pub const BACKOFF_MAX: Dur = Dur(300_000);
/// The options of the gate a parked todo opens.
pub const OPTIONS: [&str; 3] = ["retry", "rewrite", "drop"];

/// The breaker's number as the owner sealed it (a seal from before the breaker: the default),
/// with a note when `loopx.toml` says another.
pub fn apply_sealed(cfg: &mut Config, sealed: Option<u32>, notes: &mut Vec<String>) {
    let want = sealed.unwrap_or(TURNS_DEFAULT).min(TURNS_MAX);
    if cfg.breaker.turns() != want {
        notes.push(format!(
            "loopx.toml's [breaker] turns is {}, the owner's seal says {want}: acting on the seal",
            cfg.breaker.turns()
        ));
        cfg.breaker.turns = Some(want);
    }
}

/// What a turn left behind, measured by whoever ran it.
#[derive(Debug, Clone, Default)]
pub struct Facts {
    /// HEAD before and after; `None` outside git.
    pub head: (Option<String>, Option<String>),
    /// A fingerprint of the changed files (names, sizes, times) before and after.
    pub tree: (Option<String>, Option<String>),
    /// Evidence of the todo written during the turn (the runner's own excluded).
    pub new: Vec<Evidence>,
    /// The todo's evidence from before the turn (for metrics: the values seen so far).
    pub earlier: Vec<Evidence>,
}

/// True when the turn progressed: HEAD moved, the changed files changed, or the turn recorded
/// evidence other than a failed check or a metric that is no new extreme (higher than every
/// earlier value of its name, or lower: loopx does not know which way is better).
pub fn progressed(f: &Facts) -> bool {
    if f.head.0 != f.head.1 || f.tree.0 != f.tree.1 {
        return true;
    }
    f.new.iter().any(|e| match e.kind {
        EvidenceKind::Metric => metric_gain(e, &f.earlier),
        EvidenceKind::Check => e.exit_code == Some(0),
        _ => true,
    })
}

/// A metric value beyond every earlier value of the same name (the first one counts).
fn metric_gain(e: &Evidence, earlier: &[Evidence]) -> bool {
    let Some(v) = e.value.as_ref().and_then(serde_json::Value::as_f64) else {
        return false;
    };
    let seen: Vec<f64> = earlier
        .iter()
        .filter(|x| x.kind == EvidenceKind::Metric && x.name == e.name)
        .filter_map(|x| x.value.as_ref()?.as_f64())
        .collect();
    seen.is_empty() || seen.iter().all(|s| v > *s) || seen.iter().all(|s| v < *s)
}

/// The wait after `failures` failed turns in a row: none, then 1 s, 2 s, 4 s ... to 5 minutes
/// (a todo waits `backoff(failures - 1)`: its first failure is tried again at once).
pub fn backoff(failures: u32) -> Dur {
    match failures {
        0 => Dur(0),
        n => Dur(1000 << (n - 1).min(9)).min(BACKOFF_MAX),
    }
}

/// What a turn's end does to its todo's stall.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// Progress (or nothing known): the stall is cleared.
    Clear,
    /// Counted: the new stall.
    Count(Stall),
    /// The N-th turn without progress: park the todo behind a gate.
    Park(Stall),
}

/// The stall after a turn at `now`: `progress` is `None` when nothing was measured, `failed`
/// when the command failed. A failure alone backs off; no progress counts toward parking.
pub fn judge(t: &Todo, turns: u32, now: Ts, progress: Option<bool>, failed: bool) -> Verdict {
    let cur = t.stall.as_deref().cloned().unwrap_or_default();
    // Off (0): turns without progress count for nothing; failures still back off.
    let stalled = progress == Some(false) && turns > 0;
    if !stalled && !failed {
        return Verdict::Clear;
    }
    let failures = cur.failures.saturating_add(1).min(TURNS_MAX);
    let mut s = Stall {
        turns: if stalled {
            cur.turns.saturating_add(1).min(TURNS_MAX)
        } else {
            0
        },
        failures,
        // The first failure is tried again at once; repeated ones wait longer each time.
        retry_at: (failures > 1).then(|| now.add(backoff(failures - 1))),
        parked: None,
        extra: cur.extra,
    };
    if stalled && s.turns >= turns {
        s.retry_at = None;
        return Verdict::Park(s);
    }
    Verdict::Count(s)
}

/// The gate a parked todo waits on, while it is pending (a gate decided, or gone, parks nothing:
/// no todo is left parked on a gate nobody can decide).
pub fn parked<'a>(snap: &Snapshot, t: &'a Todo) -> Option<&'a str> {
    let g = t.stall.as_ref()?.parked.as_deref()?;
    let gate = snap.gates.get(g)?;
    (gate.effective_status() == GateStatus::Pending).then_some(g)
}

/// When a backed-off todo is offered again, if later than `now`. A time further ahead than the
/// longest backoff was not written by loopx (a hand edit, or a clock set back): it is ignored.
pub fn backed_off(t: &Todo, now: Ts) -> Option<Ts> {
    let at = t.stall.as_ref()?.retry_at?;
    (now < at && at <= now.add(BACKOFF_MAX)).then_some(at)
}

/// The most stalled todos a should-run answer names.
pub const MAX_LISTED: usize = 3;

/// A todo the breaker holds back now: parked behind a gate, or backed off.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Held {
    /// The todo.
    pub id: String,
    /// Its title, cut to 120 characters.
    pub title: String,
    /// Turns in a row without progress.
    pub turns: u32,
    /// The gate it waits on, when parked.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parked: Option<String>,
    /// When it is offered again, when backed off.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retry_at: Option<Ts>,
}

/// The todos the breaker holds back at `now`: parked ones first, then by id.
pub fn held(snap: &Snapshot, now: Ts) -> Vec<Held> {
    let mut v: Vec<Held> = snap
        .todos
        .values()
        .filter(|t| t.stall.is_some())
        .filter_map(|t| {
            let parked = parked(snap, t).map(str::to_string);
            let retry_at = backed_off(t, now);
            (parked.is_some() || retry_at.is_some()).then(|| Held {
                id: t.id.clone(),
                title: crate::kernel::limits::cut(&t.title, 120),
                turns: t.stall.as_ref().map_or(0, |s| s.turns),
                parked,
                retry_at,
            })
        })
        .collect();
    v.sort_by_key(|h| h.parked.is_none());
    v
}

/// The question of a parked todo's gate.
pub fn question(t: &Todo, turns: u32) -> String {
    format!(
        "{} made no progress in {turns} turns: retry, rewrite or drop? ({})",
        t.id,
        crate::kernel::limits::cut(&t.title, 120)
    )
}

#[cfg(test)]
mod tests;
