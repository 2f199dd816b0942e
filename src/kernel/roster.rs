//! The roster: every agent seen, with its leases, its turns and spend in the window, and a state.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::kernel::id;
use crate::kernel::model::Snapshot;
use crate::kernel::quota;
use crate::kernel::time::Ts;

/// What an agent is doing now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum AgentState {
    /// It holds a live lease.
    Working,
    /// Its last lease expired without a renewal, and it wrote nothing since.
    Stale,
    /// Neither.
    Idle,
}

impl AgentState {
    /// The name people read.
    pub fn as_str(self) -> &'static str {
        match self {
            AgentState::Working => "working",
            AgentState::Stale => "stale",
            AgentState::Idle => "idle",
        }
    }
}

/// One agent's row.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AgentRow {
    /// The agent's id.
    pub agent: String,
    /// Its last journal line's time (none: only a lease names it).
    pub last_seen: Option<Ts>,
    /// The todos it holds a live lease on.
    pub leases: Vec<String>,
    /// Its spends (turns) in the quota window.
    pub turns: u64,
    /// The slots those spends took.
    pub slots: u64,
    /// The tokens they used.
    pub tokens: u64,
    /// Their cost in US dollars.
    pub cost_usd: f64,
    /// What it can do (from the agents' table, when known).
    pub capabilities: Vec<String>,
    /// Working, stale or idle.
    pub state: AgentState,
    /// When its stale lease expired.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stale_since: Option<Ts>,
}

/// What the journal says of each agent: its latest line, and its latest lease that lapsed and was
/// then taken over (`reclaimed_from` of a claim) or cleared (`lease.expire`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Seen {
    /// Agent to the time of its latest journal line.
    pub last: BTreeMap<String, Ts>,
    /// Agent to the latest expiry of a lease of its that lapsed, as the journal recorded it.
    pub lapsed: BTreeMap<String, Ts>,
}

impl Seen {
    /// Adds one journal line: its actor and time, and any lapsed lease it records.
    pub fn add(&mut self, actor: &str, at: Ts, action: &str, data: &serde_json::Value) {
        let e = self.last.entry(actor.to_string()).or_insert(at);
        *e = (*e).max(at);
        if let Some((holder, exp)) = lapsed_of(action, data) {
            let e = self.lapsed.entry(holder).or_insert(exp);
            *e = (*e).max(exp);
        }
    }
}

/// The holder and expiry of a lapsed lease a journal line records, if any.
pub fn lapsed_of(action: &str, data: &serde_json::Value) -> Option<(String, Ts)> {
    let (holder, at) = match action {
        "todo.claim" => {
            let r = data.get("reclaimed_from")?;
            (r.get("holder")?, r.get("expired_at")?)
        }
        "lease.expire" => (data.get("holder")?, data.get("expired_at")?),
        _ => return None,
    };
    Some((holder.as_str()?.to_string(), at.as_str()?.parse().ok()?))
}

/// The roster at `now`: one row per agent the journal names (`seen`) or holding a lease (live or
/// expired), reserved names left out; working first, then by last seen (newest first), then by id.
pub fn roster(snap: &Snapshot, seen: &Seen, now: Ts) -> Vec<AgentRow> {
    let mut rows: BTreeMap<&str, AgentRow> = BTreeMap::new();
    let blank = |a: &str, last: Option<Ts>| AgentRow {
        agent: a.to_string(),
        last_seen: last,
        leases: Vec::new(),
        turns: 0,
        slots: 0,
        tokens: 0,
        cost_usd: 0.0,
        capabilities: crate::kernel::agents::capabilities(snap, a).to_vec(),
        state: AgentState::Idle,
        stale_since: None,
    };
    for (a, at) in &seen.last {
        if !id::is_reserved_actor(a) {
            rows.insert(a, blank(a, Some(*at)));
        }
    }
    // The latest expired lease of each agent: still in a todo file, or lapsed in the journal.
    let mut expired: BTreeMap<&str, Ts> = seen
        .lapsed
        .iter()
        .filter(|(a, _)| rows.contains_key(a.as_str()))
        .map(|(a, t)| (a.as_str(), *t))
        .collect();
    for t in snap.todos.values() {
        let Some(l) = &t.lease else { continue };
        if id::is_reserved_actor(&l.holder) {
            continue;
        }
        let row = rows
            .entry(&l.holder)
            .or_insert_with(|| blank(&l.holder, None));
        if l.is_live(now) {
            row.leases.push(t.id.clone());
        } else {
            let e = expired.entry(&l.holder).or_insert(l.expires_at);
            *e = (*e).max(l.expires_at);
        }
    }
    add_spends(&mut rows, snap, now);
    set_states(&mut rows, &expired);
    let mut out: Vec<AgentRow> = rows.into_values().collect();
    out.sort_by(|x, y| {
        (x.state != AgentState::Working)
            .cmp(&(y.state != AgentState::Working))
            .then(y.last_seen.cmp(&x.last_seen))
            .then(x.agent.cmp(&y.agent))
    });
    out
}

/// Each agent's turns, slots, tokens and cost in the quota window.
fn add_spends(rows: &mut BTreeMap<&str, AgentRow>, snap: &Snapshot, now: Ts) {
    for s in quota::in_window(&snap.quota, &snap.config.quota, now) {
        if let Some(r) = rows.get_mut(s.agent.as_str()) {
            r.turns += 1;
            r.slots += u64::from(s.slots);
            r.tokens = r.tokens.saturating_add(s.tokens.unwrap_or(0));
            r.cost_usd += s.cost_usd.unwrap_or(0.0);
        }
    }
}

/// Working with a live lease, stale when a lease lapsed since it was last seen, else idle.
fn set_states(rows: &mut BTreeMap<&str, AgentRow>, expired: &BTreeMap<&str, Ts>) {
    for (a, r) in rows.iter_mut() {
        r.state = if !r.leases.is_empty() {
            AgentState::Working
        } else if let Some(exp) = expired.get(a)
            && r.last_seen.is_none_or(|s| s <= *exp)
        {
            r.stale_since = Some(*exp);
            AgentState::Stale
        } else {
            AgentState::Idle
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::model::*;
    use crate::kernel::time::Dur;

    const NOW: Ts = Ts(1_700_000_100_000);

    fn todo_leased(id: &str, holder: &str, expires: Ts) -> Todo {
        let s = Snapshot::new(Config::new("g-aaaaaa", "goal", NOW));
        let (_, mut t) =
            crate::kernel::ops::add_todo(&s, "x", NOW, crate::kernel::ops::NewTodo::new(id, "t"))
                .unwrap();
        t.lease = Some(Box::new(Lease {
            holder: holder.into(),
            fence: 1,
            acquired_at: expires.sub(Dur::from_mins(5)),
            expires_at: expires,
            turn: None,
            handoff_from: None,
            base: None,
            paths: Vec::new(),
            worktree: None,
            extra: Extra::new(),
        }));
        t
    }

    #[test]
    fn working_stale_and_idle() {
        let mut snap = Snapshot::new(Config::new("g-aaaaaa", "goal", NOW));
        let live = todo_leased("t-aaaaaa", "ann", NOW.add(Dur::from_mins(1)));
        let gone = todo_leased("t-bbbbbb", "bob", NOW.sub(Dur::from_mins(1)));
        let back = todo_leased("t-cccccc", "cat", NOW.sub(Dur::from_mins(2)));
        for t in [live, gone, back] {
            snap.todos.insert(t.id.clone(), t);
        }
        snap.quota.spends.push(Spend {
            at: NOW.sub(Dur::from_mins(3)),
            agent: "ann".into(),
            slots: 2,
            turn: None,
            tokens: Some(10),
            cost_usd: Some(0.5),
            extra: Extra::new(),
        });
        let mut seen = Seen::default();
        let none = serde_json::Value::Null;
        seen.add("ann", NOW.sub(Dur::from_mins(3)), "todo.renew", &none);
        seen.add("bob", NOW.sub(Dur::from_mins(4)), "todo.renew", &none);
        seen.add("cat", NOW.sub(Dur::from_mins(1)), "todo.add", &none);
        seen.add("dan", NOW.sub(Dur::from_mins(9)), "todo.claim", &none);
        seen.add("owner", NOW, "goal.pause", &none);
        // Eve's lease lapsed and was taken over: stale, though no todo names her now.
        seen.add("eve", NOW.sub(Dur::from_mins(20)), "todo.claim", &none);
        let reclaim = serde_json::json!({"fence": 2, "reclaimed_from":
            {"holder": "eve", "fence": 1, "expired_at": NOW.sub(Dur::from_mins(10))}});
        seen.add("dan", NOW.sub(Dur::from_mins(9)), "todo.claim", &reclaim);
        let r = roster(&snap, &seen, NOW);
        let states: Vec<(&str, AgentState)> =
            r.iter().map(|r| (r.agent.as_str(), r.state)).collect();
        assert_eq!(
            states,
            vec![
                ("ann", AgentState::Working),
                ("cat", AgentState::Idle),
                ("bob", AgentState::Stale),
                ("dan", AgentState::Idle),
                ("eve", AgentState::Stale),
            ]
        );
        assert_eq!((r[0].turns, r[0].slots, r[0].tokens), (1, 2, 10));
        assert_eq!(r[0].leases, vec!["t-aaaaaa".to_string()]);
    }
}
