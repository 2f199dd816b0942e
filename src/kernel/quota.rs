//! Quota: slots, tokens and cost spent in a sliding window, the minimum interval, when a budget
//! frees, and which limits a spend went past.

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
    /// Tokens used and allowed in the window; absent without a token budget.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tokens: Option<Budget<u64>>,
    /// US dollars used and allowed in the window; absent without a cost budget.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<Budget<f64>>,
}

/// One budget in the window: how much is used, and the limit.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Budget<T> {
    /// Used inside the window.
    pub used: T,
    /// Allowed per window.
    pub limit: T,
}

/// A limit of the window a spend can go past.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Limit {
    /// `[quota] slots`.
    #[serde(rename = "slots")]
    Slots,
    /// `[quota] tokens`.
    #[serde(rename = "tokens")]
    Tokens,
    /// `[quota] cost_usd`.
    #[serde(rename = "cost_usd")]
    Cost,
}

impl Limit {
    /// The name in `over_limit` (`slots`, `tokens`, `cost_usd`).
    pub fn as_str(self) -> &'static str {
        match self {
            Limit::Slots => "slots",
            Limit::Tokens => "tokens",
            Limit::Cost => "cost_usd",
        }
    }

    /// should-run's reason when this limit is spent (`quota_spent`, `tokens_spent`, `cost_spent`).
    pub fn reason(self) -> &'static str {
        match self {
            Limit::Slots => "quota_spent",
            Limit::Tokens => "tokens_spent",
            Limit::Cost => "cost_spent",
        }
    }
}

fn tokens_of(s: &Spend) -> u128 {
    u128::from(s.tokens.unwrap_or(0))
}

/// Dollars in millionths, so sums are exact (a cost that is not a finite number counts as 0).
fn micros(x: f64) -> u128 {
    if x.is_finite() && x > 0.0 {
        (x * 1e6).round() as u128
    } else {
        0
    }
}

fn cost_of(s: &Spend) -> u128 {
    s.cost_usd.map_or(0, micros)
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
    let (mut tokens, mut cost) = (0u128, 0u128);
    let mut oldest: Option<Ts> = None;
    for s in in_window(q, p, now) {
        used += u64::from(s.slots);
        tokens += tokens_of(s);
        cost += cost_of(s);
        oldest = Some(oldest.map_or(s.at, |o| o.min(s.at)));
    }
    Usage {
        used,
        limit: p.slots,
        window: p.window,
        resets_at: oldest.map(|o| o.add(p.window)),
        tokens: p.tokens.map(|limit| Budget {
            used: u64::try_from(tokens).unwrap_or(u64::MAX),
            limit,
        }),
        cost_usd: p.cost_usd.map(|limit| Budget {
            used: cost as f64 / 1e6,
            limit,
        }),
    }
}

/// How long until the window's sum of `weight` is under `limit` again, as the oldest spends leave
/// it. None when it is under already.
fn frees_in(
    q: &QuotaFile,
    p: &QuotaPolicy,
    now: Ts,
    limit: u128,
    weight: fn(&Spend) -> u128,
) -> Option<Dur> {
    let mut spends: Vec<&Spend> = in_window(q, p, now).collect();
    let mut used: u128 = spends.iter().map(|s| weight(s)).sum();
    if used < limit {
        return None;
    }
    spends.sort_by_key(|s| s.at);
    for s in spends {
        used -= weight(s);
        if used < limit {
            return Some(s.at.add(p.window).since(now));
        }
    }
    Some(p.window)
}

/// The limits spent at `now` (slots first, then tokens, then cost), each with how long until it
/// frees; empty when a turn may run.
pub fn spent(q: &QuotaFile, p: &QuotaPolicy, now: Ts) -> Vec<(Limit, Dur)> {
    let mut out = Vec::new();
    if let Some(d) = throttled_for(q, p, now) {
        out.push((Limit::Slots, d));
    }
    if let Some(d) = p
        .tokens
        .and_then(|l| frees_in(q, p, now, u128::from(l), tokens_of))
    {
        out.push((Limit::Tokens, d));
    }
    if let Some(d) = p
        .cost_usd
        .and_then(|l| frees_in(q, p, now, micros(l), cost_of))
    {
        out.push((Limit::Cost, d));
    }
    out
}

/// Whether a turn is throttled: the first limit spent, and the longest wait until all free.
pub fn throttled(q: &QuotaFile, p: &QuotaPolicy, now: Ts) -> Option<(Limit, Dur)> {
    let all = spent(q, p, now);
    let wait = all.iter().map(|(_, d)| *d).max()?;
    Some((all[0].0, wait))
}

/// The limits the window's spends are past at `now` (more used than allowed): after a spend is
/// added, the limits that spend went past.
pub fn over_limit(q: &QuotaFile, p: &QuotaPolicy, now: Ts) -> Vec<Limit> {
    let sum = |w: fn(&Spend) -> u128| in_window(q, p, now).map(w).sum::<u128>();
    let mut out = Vec::new();
    if sum(|s| u128::from(s.slots)) > u128::from(p.slots) {
        out.push(Limit::Slots);
    }
    if p.tokens.is_some_and(|l| sum(tokens_of) > u128::from(l)) {
        out.push(Limit::Tokens);
    }
    if p.cost_usd.is_some_and(|l| sum(cost_of) > micros(l)) {
        out.push(Limit::Cost);
    }
    out
}

// per-agent slots
/// Slots `agent` spent inside the window at `now`.
pub fn agent_used(q: &QuotaFile, p: &QuotaPolicy, agent: &str, now: Ts) -> u64 {
    in_window(q, p, now)
        .filter(|s| s.agent == agent)
        .map(|s| u64::from(s.slots))
        .sum()
}

/// When `agent`'s own spends in the window reach the owner's `cap` for it: how long until its
/// use is under the cap again, as its oldest spends leave the window. None when under.
pub fn agent_throttled(
    q: &QuotaFile,
    p: &QuotaPolicy,
    agent: &str,
    cap: u32,
    now: Ts,
) -> Option<Dur> {
    let mut spends: Vec<&Spend> = in_window(q, p, now).filter(|s| s.agent == agent).collect();
    let mut used: u64 = spends.iter().map(|s| u64::from(s.slots)).sum();
    if used < u64::from(cap) {
        return None;
    }
    spends.sort_by_key(|s| s.at);
    for s in spends {
        used -= u64::from(s.slots);
        if used < u64::from(cap) {
            return Some(s.at.add(p.window).since(now));
        }
    }
    Some(p.window)
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

/// True when `agent` spent a slot for this turn id in the window already. A turn id is the
/// agent's own: another agent's spend under the same id is another turn.
pub fn has_turn(q: &QuotaFile, p: &QuotaPolicy, now: Ts, agent: &str, turn: &str) -> bool {
    in_window(q, p, now).any(|s| s.agent == agent && s.turn.as_deref() == Some(turn))
}

/// Drops spends that left the window, keeping the newest for the minimum interval
/// (the journal keeps them all).
pub fn prune(q: &mut QuotaFile, p: &QuotaPolicy, now: Ts) {
    let start = now.sub(p.window);
    let last = q.spends.iter().map(|s| s.at).max();
    q.spends.retain(|s| s.at > start || Some(s.at) == last);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::model::Extra;

    const NOW: Ts = Ts(1_800_000_000_000);

    fn spend(ago_s: i64, tokens: Option<u64>, cost: Option<f64>) -> Spend {
        Spend {
            at: NOW.sub(Dur::from_secs(ago_s)),
            agent: "a".into(),
            slots: 1,
            turn: None,
            tokens,
            cost_usd: cost,
            extra: Extra::new(),
        }
    }

    fn policy(tokens: Option<u64>, cost: Option<f64>) -> QuotaPolicy {
        QuotaPolicy {
            slots: 10,
            window: Dur::from_hours(1),
            tokens,
            cost_usd: cost,
            ..QuotaPolicy::default()
        }
    }

    fn file(spends: Vec<Spend>) -> QuotaFile {
        QuotaFile {
            spends,
            ..QuotaFile::default()
        }
    }

    #[test]
    fn no_budget_means_no_budget_fields_and_no_budget_throttle() {
        let q = file(vec![spend(10, Some(1_000_000), Some(500.0))]);
        let p = policy(None, None);
        let u = usage(&q, &p, NOW);
        assert_eq!((u.tokens, u.cost_usd), (None, None));
        let j = serde_json::to_value(&u).unwrap();
        assert!(j.get("tokens").is_none() && j.get("cost_usd").is_none());
        assert_eq!(throttled(&q, &p, NOW), None);
        assert!(over_limit(&q, &p, NOW).is_empty());
    }

    #[test]
    fn a_spent_token_budget_throttles_until_enough_spends_leave_the_window() {
        // 60 + 50 tokens of 100: spent; the older spend leaves in 20 minutes.
        let q = file(vec![
            spend(40 * 60, Some(60), None),
            spend(60, Some(50), None),
        ]);
        let p = policy(Some(100), None);
        assert_eq!(
            throttled(&q, &p, NOW),
            Some((Limit::Tokens, Dur::from_mins(20)))
        );
        assert_eq!(over_limit(&q, &p, NOW), [Limit::Tokens]);
        let u = usage(&q, &p, NOW);
        assert_eq!(
            u.tokens,
            Some(Budget {
                used: 110,
                limit: 100
            })
        );
        // Exactly at the limit: throttled, but not over it.
        let at = file(vec![spend(60, Some(100), None)]);
        assert!(throttled(&at, &p, NOW).is_some());
        assert!(over_limit(&at, &p, NOW).is_empty());
        // Once the window has moved on, it runs.
        assert_eq!(throttled(&q, &p, NOW.add(Dur::from_hours(1))), None);
    }

    #[test]
    fn cost_sums_are_exact_in_cents() {
        let q = file(vec![
            spend(30, None, Some(0.1)),
            spend(20, None, Some(0.2)),
            spend(10, None, Some(0.7)),
        ]);
        let p = policy(None, Some(1.0));
        assert_eq!(
            usage(&q, &p, NOW).cost_usd,
            Some(Budget {
                used: 1.0,
                limit: 1.0
            })
        );
        assert_eq!(throttled(&q, &p, NOW).map(|t| t.0), Some(Limit::Cost));
        assert!(
            over_limit(&q, &p, NOW).is_empty(),
            "1.00 of 1.00 is not past it"
        );
        let p = policy(None, Some(1.5));
        assert_eq!(throttled(&q, &p, NOW), None);
    }

    #[test]
    fn slots_come_first_and_the_wait_is_the_longest() {
        let mut spends: Vec<Spend> = (0..10).map(|i| spend(50 * 60 - i, Some(1), None)).collect();
        spends.push(spend(5 * 60, Some(500), None));
        let q = file(spends);
        let p = policy(Some(100), None);
        let all = spent(&q, &p, NOW);
        assert_eq!(all.len(), 2);
        let (first, wait) = throttled(&q, &p, NOW).unwrap();
        assert_eq!(first, Limit::Slots);
        assert_eq!(
            wait,
            Dur::from_mins(55),
            "tokens free only when the 500 leave"
        );
        assert_eq!(Limit::Slots.reason(), "quota_spent");
        assert_eq!(Limit::Tokens.reason(), "tokens_spent");
        assert_eq!(Limit::Cost.reason(), "cost_spent");
        assert_eq!(serde_json::to_value(Limit::Cost).unwrap(), "cost_usd");
    }
}
