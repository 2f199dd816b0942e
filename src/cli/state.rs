//! `status`, `refresh-state` and `log`: views of the whole project (`doctor` is `doctor.rs`).

use std::collections::BTreeMap;
use std::io::Write;

use clap::Args;
use serde_json::{Value, json};

use super::goal::status_word;
use super::{Ctx, Out, to_json};
use crate::kernel::limits;
use crate::kernel::readiness;
use crate::kernel::should_run;
use crate::kernel::{Code, Dur, Error, GateStatus, Result, Snapshot, Ts, quota};
use crate::text::escape as esc;

mod refresh;
pub use refresh::refresh;

/// `log` arguments.
#[derive(Debug, Args)]
#[command(after_help = "Example:\n  loopx log --limit 50 --verify")]
pub struct LogArgs {
    /// How many events (newest last).
    #[arg(long, default_value_t = 20)]
    limit: usize,
    /// Keep printing new events as they come.
    #[arg(long)]
    follow: bool,
    /// Check the hash chain like doctor does.
    #[arg(long)]
    verify: bool,
}

fn left(now: Ts, until: Ts) -> String {
    let d = until.since(now);
    if d.0 <= 0 {
        "expired".into()
    } else {
        format!("{} left", Dur(d.0 / 1000 * 1000))
    }
}

/// `status`.
pub fn status(ctx: &Ctx) -> Result<Out> {
    let store = ctx.open()?;
    let mut snap = store.load()?;
    let now = ctx.now;
    // A done the journal says the owner accepted, unsigned, is named beside the seal's notes.
    let lately = super::todo_check::done_lately(ctx, &*store)?;
    snap.owner_notes.extend(lately.notes);
    let (done_lately, done_lines) = (lately.json, lately.lines);
    let g = &snap.config.goal;
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for t in snap.todos.values() {
        *counts.entry(t.status.as_str()).or_default() += 1;
    }
    let archived = store.archived_count()?;
    let ready = readiness::ready(&snap, &ctx.agent, now).len();
    let pending: Vec<_> = snap
        .gates
        .values()
        .filter(|g| g.effective_status() == GateStatus::Pending)
        .collect();
    let u = quota::usage(&snap.quota, &snap.config.quota, now);
    let overdue = crate::kernel::monitor::overdue_list(&snap, now);
    let stalled = crate::kernel::breaker::held(&snap, now);

    let mut text = head_text(g, &counts, archived, ready, &ctx.agent);
    leases_text(&mut text, &snap, now);
    gates_text(&mut text, &pending, &overdue, now);
    if !done_lines.is_empty() {
        text.push_str(&format!("done lately: {}\n", done_lines.join(", ")));
    }
    notes_text(&mut text, &snap, &stalled, &u, now);
    let j = json!({
        "goal": to_json(g),
        "counts": counts,
        "archived": archived,
        "ready": ready,
        "claimed": claimed_json(&snap, now),
        "pending_gates": pending.iter().map(|g| json!({"id": g.id, "question": g.question, "opened_by": g.opened_by})).collect::<Vec<_>>(),
        "quota": to_json(&u),
        "quarantined": snap.quarantined.values().collect::<Vec<_>>(),
        "owner_notes": snap.owner_notes,
        "overdue": overdue,
        "done_lately": done_lately,
        "stalled": stalled,
    });
    let mut out = Out::new("status", j, text);
    if let Value::Object(m) = out.json.remove("status").unwrap_or(Value::Null) {
        out.json = m;
    }
    Ok(out)
}

/// The first lines of `status`: the goal, and how many todos are in each status.
fn head_text(
    g: &crate::kernel::Goal,
    counts: &BTreeMap<&str, usize>,
    archived: usize,
    ready: usize,
    agent: &str,
) -> String {
    let c: Vec<String> = counts.iter().map(|(k, v)| format!("{v} {k}")).collect();
    format!(
        "{} ({}): {}\ntodos: {}{}{archived} archived, {ready} ready for {agent}\n",
        esc(&g.id),
        status_word(g.status),
        esc(&g.objective),
        c.join(", "),
        if c.is_empty() { "" } else { ", " },
    )
}

/// Every lease, for `status --json`: its holder, fence, expiry and reservation.
fn claimed_json(snap: &Snapshot, now: Ts) -> Vec<Value> {
    snap.todos
        .values()
        .filter_map(|t| t.lease.as_ref().map(|l| (t, l)))
        .map(|(t, l)| {
            let mut v = json!({"id": t.id, "title": t.title, "holder": l.holder, "fence": l.fence,
            "expires_at": l.expires_at, "left_s": (l.expires_at.since(now).0 / 1000).max(0), "expired": !l.is_live(now)});
            if !l.paths.is_empty() {
                v["paths"] = json!(l.paths);
            }
            v
        })
        .collect()
}

/// `status`'s lines of the leases: holder, fence, time left, title and reservation.
fn leases_text(text: &mut String, snap: &Snapshot, now: Ts) {
    for t in snap.todos.values() {
        if let Some(l) = &t.lease {
            text.push_str(&format!(
                "  {} {} fence {} ({}): {}{}\n",
                esc(&t.id),
                esc(&l.holder),
                l.fence,
                left(now, l.expires_at),
                esc(&t.title),
                match reserves(l, now, "") {
                    r if r.is_empty() => r,
                    r => format!(" [reserves {r}]"),
                }
            ));
        }
    }
}

/// `status`'s lines of the pending gates and the overdue monitors.
fn gates_text(
    text: &mut String,
    pending: &[&crate::kernel::Gate],
    overdue: &[crate::kernel::monitor::Overdue],
    now: Ts,
) {
    text.push_str(&format!("gates: {} pending\n", pending.len()));
    for gate in pending {
        text.push_str(&format!(
            "  {} {}\n",
            esc(&gate.id),
            esc(&should_run::cut(&gate.question, 100))
        ));
    }
    // Overdue monitors.
    if !overdue.is_empty() {
        text.push_str(&format!("overdue monitors: {}\n", overdue.len()));
    }
    for o in overdue {
        text.push_str(&format!(
            "  {} every {}, due {}: {}\n",
            esc(&o.id),
            o.every,
            super::rel_time(now, o.due_at),
            esc(&should_run::cut(&o.title, 100))
        ));
    }
}

/// `status`'s last lines: the breaker's held todos, owner notes, quarantined files, the quota.
fn notes_text(
    text: &mut String,
    snap: &Snapshot,
    stalled: &[crate::kernel::breaker::Held],
    u: &quota::Usage,
    now: Ts,
) {
    if !stalled.is_empty() {
        text.push_str(&format!("held back by the breaker: {}\n", stalled.len()));
    }
    for h in stalled {
        text.push_str(&format!("  {}\n", held_line(h, now)));
    }
    for n in &snap.owner_notes {
        text.push_str(&format!("note: {n}\n"));
    }
    for p in snap.quarantined.values() {
        text.push_str(&format!("quarantined: {}: {}\n", p.at(), p.message));
    }
    text.push_str(&format!("quota: {} of {} in {}", u.used, u.limit, u.window));
    if let Some(b) = u.tokens {
        text.push_str(&format!("; {} of {} tokens", b.used, b.limit));
    }
    if let Some(b) = u.cost_usd {
        text.push_str(&format!("; ${} of ${}", b.used, b.limit));
    }
}

/// One todo the breaker holds back, for people: parked behind its gate, or backed off.
fn held_line(h: &crate::kernel::breaker::Held, now: crate::kernel::Ts) -> String {
    let why = match (&h.parked, h.retry_at) {
        (Some(g), _) => format!(
            "parked after {} turns without progress; gate {}",
            h.turns,
            esc(g)
        ),
        (None, Some(at)) => format!(
            "backed off after failed turns, until {}",
            super::rel_time(now, at)
        ),
        (None, None) => "held back".into(),
    };
    format!("{} {why}: {}", esc(&h.id), esc(&h.title))
}

fn event_line(v: &Value) -> String {
    let s = |k: &str| esc(v.get(k).and_then(Value::as_str).unwrap_or("")).into_owned();
    let seq = v.get("seq").and_then(Value::as_u64).unwrap_or(0);
    format!(
        "{seq:>5} {} {:<12} {:<20} {}",
        s("at"),
        s("actor"),
        s("action"),
        s("target")
    )
}

/// `log [--limit N] [--follow] [--verify]`.
pub fn log(ctx: &Ctx, a: LogArgs) -> Result<Out> {
    limits::usage(limits::int(
        "--limit",
        a.limit as u64,
        0,
        limits::LOG_LIMIT_MAX as u64,
    ))?;
    let store = ctx.open()?;
    if a.verify {
        let c = store.verify_journal()?;
        if let Some(b) = c.broken {
            return Err(Error::new(
                Code::InvalidState,
                format!(".loopx/journal.jsonl:{}: {}", b.line, b.message),
            )
            .hint("the journal was changed by hand; restore it from a backup or git")
            .details(json!({"line": b.line})));
        }
        let text = format!(
            "journal.jsonl: {}, chain intact{}",
            crate::text::count(c.lines, "line", "lines"),
            if c.torn {
                "; a torn last line (doctor --fix removes it)"
            } else {
                ""
            }
        );
        return Ok(Out::new("lines", json!(c.lines), text).with("torn", json!(c.torn)));
    }
    let events: Vec<Value> = store.journal_tail(a.limit)?.iter().map(to_json).collect();
    if !a.follow {
        let text = events.iter().map(event_line).collect::<Vec<_>>().join("\n");
        return Ok(Out::new("events", Value::Array(events), text));
    }
    let mut stdout = std::io::stdout().lock();
    let mut show = |v: &Value| {
        let shown = if ctx.json {
            v.to_string()
        } else {
            event_line(v)
        };
        if writeln!(stdout, "{shown}")
            .and_then(|_| stdout.flush())
            .is_err()
        {
            // The reader went away: following ends here.
            std::process::exit(0);
        }
    };
    events.iter().for_each(&mut show);
    let mut pos = store.journal_end()?;
    loop {
        std::thread::sleep(std::time::Duration::from_millis(200));
        let (new, next) = store.journal_after(pos)?;
        pos = next;
        new.iter().map(to_json).for_each(|v| show(&v));
    }
}

/// A live lease's reservation: at most three globs, each cut at 60 characters (a lease may
/// hold 32 of 200), quoted with `q`, then how many more; empty when it reserves nothing.
fn reserves(l: &crate::kernel::Lease, now: Ts, q: &str) -> String {
    if l.paths.is_empty() || !l.is_live(now) {
        return String::new();
    }
    let shown: Vec<String> = l
        .paths
        .iter()
        .take(3)
        .map(|g| format!("{q}{}{q}", should_run::cut(g, 60)))
        .collect();
    match l.paths.len().saturating_sub(3) {
        0 => shown.join(" "),
        n => format!("{} (+{n} more)", shown.join(" ")),
    }
}
