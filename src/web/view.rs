//! What the page shows of a project, as JSON: pending gates with what they block and its last
//! evidence, claimed todos, quota, the journal's tail, and the metric headline. Read only.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::kernel::device::gate_digest;
use crate::kernel::{EvidenceKind, Gate, GateStatus, Result, Snapshot, Ts, quota};
use crate::store::follow::Followed;

/// The journal lines shown as recent activity.
const ACTIVITY: usize = 20;
/// The evidence lines shown for each todo a gate blocks.
const EVIDENCE: usize = 3;
/// The most pending gates shown per project.
const MAX_GATES: usize = 100;
/// The last values of the headline metric shown.
const SPARK: usize = 24;

/// The project `name` as the page shows it.
pub fn project(store: &dyn Followed, name: &str, now: Ts) -> Result<Value> {
    let snap = store.load()?;
    let gates: Vec<Value> = snap
        .gates
        .values()
        .filter(|g| g.status == GateStatus::Pending)
        .take(MAX_GATES)
        .map(|g| gate(store, &snap, g))
        .collect::<Result<_>>()?;
    let claimed: Vec<Value> = snap
        .todos
        .values()
        .filter_map(|t| t.live_lease(now).map(|l| (t, l)))
        .map(|(t, l)| {
            json!({"id": t.id, "title": t.title, "holder": l.holder,
                   "expires_at": l.expires_at, "expires_ms": l.expires_at.0})
        })
        .collect();
    let u = quota::usage(&snap.quota, &snap.config.quota, now);
    let activity: Vec<Value> = store
        .journal_tail(ACTIVITY)?
        .iter()
        .rev()
        .map(|e| {
            json!({"seq": e.seq, "at": e.at, "actor": e.actor,
                        "action": e.action.to_string(), "target": e.target})
        })
        .collect();
    Ok(json!({
        "name": name,
        "objective": snap.config.goal.objective,
        "goal_status": snap.config.goal.status,
        "gates": gates,
        "claimed": claimed,
        "quota": {"used": u.used, "limit": u.limit,
                  "left": u64::from(u.limit).saturating_sub(u.used),
                  "window": u.window, "resets_at": u.resets_at},
        "activity": activity,
        "headline": headline(store),
    }))
}

/// A pending gate with what the device signs over, and the evidence of what it blocks.
fn gate(store: &dyn Followed, snap: &Snapshot, g: &Gate) -> Result<Value> {
    let mut blocks = Vec::new();
    for id in &g.blocks {
        let title = match snap.todos.get(id) {
            Some(t) => Some(t.title.clone()),
            None => store.archived_todo(id).ok().flatten().map(|t| t.title),
        };
        let evidence: Vec<Value> = store
            .evidence_tail(id, EVIDENCE)
            .unwrap_or_default()
            .iter()
            .map(|e| json!({"at": e.at, "agent": e.agent, "kind": e.kind, "summary": e.summary}))
            .collect();
        blocks.push(json!({"id": id, "title": title, "evidence": evidence}));
    }
    // `shown` is what the owner reads (a command quoted as a shell splits it, every invisible or
    // control character escaped); the raw fields are what the page hashes and signs.
    let action = g.action.as_ref().map(|a| {
        json!({"kind": a.kind.as_str(), "sha256": a.sha256, "argv": a.argv, "text": a.text,
               "shown": a.shown(), "intact": a.intact()})
    });
    let esc = |t: &str| crate::text::escape(t).into_owned();
    let shown = json!({
        "question": esc(&g.question),
        "options": g.options.iter().map(|o| esc(o)).collect::<Vec<_>>(),
    });
    Ok(json!({
        // The project's goal, which a device's decision signs: it is none of another project's.
        "goal": snap.config.goal.id,
        "id": g.id,
        "question": g.question,
        "options": g.options,
        "blocks": g.blocks,
        "global": g.global,
        "blocked": blocks,
        "opened_by": g.opened_by,
        "opened_at": g.opened_at,
        "action": action,
        "shown": shown,
        // For display and debugging only: the page computes the digest it signs itself.
        "digest": gate_digest(g),
    }))
}

/// The goal's most recorded metric: its last values and its best (lowest for a loss, an
/// error, a latency or a cost; else highest), as the board's header shows it.
fn headline(store: &dyn Followed) -> Value {
    let keep = |_: &str, e: &crate::kernel::Evidence| {
        e.kind == EvidenceKind::Metric && e.value.as_ref().and_then(Value::as_f64).is_some()
    };
    let Ok(mut all) = store.evidence_all(None, &keep) else {
        return Value::Null;
    };
    all.sort_by_key(|(_, e)| e.at);
    let mut count: BTreeMap<&str, usize> = BTreeMap::new();
    for (_, e) in &all {
        *count.entry(e.name.as_deref().unwrap_or("")).or_default() += 1;
    }
    let Some((name, _)) = count
        .iter()
        .filter(|(n, _)| !n.is_empty())
        .max_by(|a, b| a.1.cmp(b.1).then_with(|| b.0.cmp(a.0)))
    else {
        return Value::Null;
    };
    let series: Vec<f64> = all
        .iter()
        .filter(|(_, e)| e.name.as_deref() == Some(*name))
        .filter_map(|(_, e)| e.value.as_ref().and_then(Value::as_f64))
        .filter(|v| v.is_finite())
        .collect();
    let low = crate::kernel::lower_is_better(name);
    let best = series.iter().copied().reduce(|a, b| match low {
        true => a.min(b),
        false => a.max(b),
    });
    let tail = &series[series.len().saturating_sub(SPARK)..];
    json!({"name": name, "best": best, "last": series.last(), "best_is": if low {"min"} else {"max"},
           "values": tail})
}
