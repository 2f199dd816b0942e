//! Quota: slots spent in a sliding window, the minimum interval, and when a slot frees.

use serde::Serialize;

use crate::kernel::model::{QuotaFile, QuotaPolicy, Spend};
use crate::kernel::time::{Dur, Ts};

/// The quota as agents see it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Usage {
    /// Slots spent inside the window.
    pub used: u64,
    /// Slots allowed per window.
    pub limit: u32,
    /// The window, like `24h`.
    pub window: Dur,
    /// When the oldest spend in the window leaves it (null with no spends).
    pub resets_at: Option<Ts>,
}

/// Spends still inside the window at `now`.
pub fn in_window<'a>(
    q: &'a QuotaFile,
    p: &QuotaPolicy,
    now: Ts,
) -> impl Iterator<Item = &'a Spend> {
    let start = now.sub(p.window);
    q.spends.iter().filter(move |s| s.at > start)
}

/// Usage at `now`.
pub fn usage(q: &QuotaFile, p: &QuotaPolicy, now: Ts) -> Usage {
    let mut used = 0u64;
    let mut oldest: Option<Ts> = None;
    for s in in_window(q, p, now) {
        used += u64::from(s.slots);
        oldest = Some(oldest.map_or(s.at, |o| o.min(s.at)));
    }
    Usage {
        used,
        limit: p.slots,
        window: p.window,
        resets_at: oldest.map(|o| o.add(p.window)),
    }
}

/// When the window's spend is at the limit: how long until one slot frees. None when not throttled.
pub fn throttled_for(q: &QuotaFile, p: &QuotaPolicy, now: Ts) -> Option<Dur> {
    let mut spends: Vec<&Spend> = in_window(q, p, now).collect();
    let mut used: u64 = spends.iter().map(|s| u64::from(s.slots)).sum();
    if used < u64::from(p.slots) {
        return None;
    }
    spends.sort_by_key(|s| s.at);
    for s in spends {
        used -= u64::from(s.slots);
        if used < u64::from(p.slots) {
            return Some(s.at.add(p.window).since(now));
        }
    }
    Some(p.window)
}

/// When the last spend was less than the minimum interval ago: how long to wait.
pub fn interval_wait(q: &QuotaFile, p: &QuotaPolicy, now: Ts) -> Option<Dur> {
    if p.min_interval.is_zero() {
        return None;
    }
    let last = q.spends.iter().map(|s| s.at).max()?;
    let next = last.add(p.min_interval);
    (now < next).then(|| next.since(now))
}

/// True when a spend with this turn id is already in the window.
pub fn has_turn(q: &QuotaFile, p: &QuotaPolicy, now: Ts, turn: &str) -> bool {
    in_window(q, p, now).any(|s| s.turn.as_deref() == Some(turn))
}

/// Drops spends that left the window, keeping the newest for the minimum interval
/// (the journal keeps them all).
pub fn prune(q: &mut QuotaFile, p: &QuotaPolicy, now: Ts) {
    let start = now.sub(p.window);
    let last = q.spends.iter().map(|s| s.at).max();
    q.spends.retain(|s| s.at > start || Some(s.at) == last);
}
