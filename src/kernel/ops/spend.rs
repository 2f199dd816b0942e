//! Quota: a spent turn recorded, and the limits it went past.

use serde_json::json;

use super::{Change, Write};
use crate::kernel::action::Action;
use crate::kernel::error::{Error, Result};
use crate::kernel::limits;
use crate::kernel::model::*;
use crate::kernel::quota;
use crate::kernel::time::Ts;

/// Records a spent turn. The same agent's turn id twice in the window is recorded once. A spend
/// past a limit (slots, tokens, cost) is recorded too, with `over_limit` in its line's data
/// ([`spend_over_limit`] reads it back).
pub fn spend(
    snap: &Snapshot,
    agent: &str,
    now: Ts,
    slots: u32,
    turn: Option<String>,
    tokens: Option<u64>,
    cost_usd: Option<f64>,
) -> Result<(Change, bool)> {
    if slots == 0 {
        return Err(Error::usage("--slots must be at least 1"));
    }
    if cost_usd.is_some_and(|c| !(0.0..=limits::COST_USD_MAX).contains(&c)) {
        return Err(Error::usage(
            "--cost-usd must be a number from 0 to 1000000000",
        ));
    }
    if tokens.is_some_and(|t| t > limits::TOKENS_MAX) {
        return Err(Error::usage(format!(
            "--tokens must be 0 to {}",
            limits::TOKENS_MAX
        )));
    }
    let p = &snap.config.quota;
    let mut c = Change::default();
    if let Some(t) = &turn
        && quota::has_turn(&snap.quota, p, now, agent, t)
    {
        return Ok((c, false));
    }
    let mut q = snap.quota.clone();
    quota::prune(&mut q, p, now);
    q.spends.push(Spend {
        at: now,
        agent: agent.to_string(),
        slots,
        turn: turn.clone(),
        tokens,
        cost_usd,
        extra: Extra::new(),
    });
    limits::usage(limits::check_quota(&q))?;
    // A spend past a limit is still recorded (the turn happened); the line names the limits.
    let over = quota::over_limit(&q, p, now);
    let mut data = json!({"slots": slots, "turn": turn, "tokens": tokens, "cost_usd": cost_usd});
    if !over.is_empty() {
        data["over_limit"] = json!(over);
    }
    c.event(now, agent, Action::QuotaSpend, "quota", data);
    c.writes.push(Write::Quota(q));
    Ok((c, true))
}

/// The limits a spend's change went past (`over_limit` of its `quota.spend` line).
pub fn spend_over_limit(c: &Change) -> Vec<String> {
    c.events
        .iter()
        .filter(|e| e.action == Action::QuotaSpend)
        .filter_map(|e| e.data.get("over_limit")?.as_array().cloned())
        .flatten()
        .filter_map(|v| v.as_str().map(str::to_string))
        .collect()
}
