//! `agents`: the live roster of agents seen in the journal and the leases (read-only).

use super::{Ctx, Out, rel_time, to_json};
use crate::kernel::roster::{self, AgentRow};
use crate::kernel::{Result, Ts};
use crate::text::escape as esc;

/// Runs `agents`: reads the snapshot and the journal's actors, writes nothing.
pub fn run(ctx: &Ctx) -> Result<Out> {
    let store = ctx.open()?;
    let snap = store.load()?;
    let seen = store.journal_seen()?;
    let rows = roster::roster(&snap, &seen, ctx.now);
    let text = if rows.is_empty() {
        "no agents seen yet".to_string()
    } else {
        rows.iter()
            .map(|r| line(r, ctx.now))
            .collect::<Vec<_>>()
            .join("\n")
    };
    Ok(Out::new("agents", to_json(&rows), text).with("window", to_json(&snap.config.quota.window)))
}

/// One agent for people: state, id, last seen, leases, turns and spend.
pub fn line(r: &AgentRow, now: Ts) -> String {
    let seen = r
        .last_seen
        .map_or_else(|| "never".to_string(), |t| rel_time(now, t));
    let leases = if r.leases.is_empty() {
        "-".to_string()
    } else {
        esc(&r.leases.join(",")).into_owned()
    };
    let mut s = format!(
        "{:<7} {:<20} seen {:<10} leases {:<18} turns {} slots {}",
        r.state.as_str(),
        esc(&r.agent),
        seen,
        leases,
        r.turns,
        r.slots
    );
    if r.tokens > 0 {
        s.push_str(&format!(" tokens {}", r.tokens));
    }
    if r.cost_usd > 0.0 {
        s.push_str(&format!(" ${:.2}", r.cost_usd));
    }
    if let Some(t) = r.stale_since {
        s.push_str(&format!(" (lease expired {})", rel_time(now, t)));
    }
    if !r.capabilities.is_empty() {
        s.push_str(&format!(" [{}]", esc(&r.capabilities.join(", "))));
    }
    s
}
