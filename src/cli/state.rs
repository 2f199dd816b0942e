//! `status`, `refresh-state` and `log`: views of the whole project (`doctor` is `doctor.rs`).

use std::collections::BTreeMap;
use std::io::Write;

use clap::Args;
use serde_json::{Value, json};

use super::goal::status_word;
use super::{Ctx, Out, to_json};
use crate::kernel::bounds;
use crate::kernel::readiness;
use crate::kernel::should_run::{self, Answer, Decision};
use crate::kernel::{Code, Dur, Error, GateStatus, Result, Snapshot, Ts, quota};
use crate::store::Store;
use crate::text::{escape as esc, md_line};

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
    let snap = store.load()?;
    let now = ctx.now;
    let g = &snap.config.goal;
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for t in snap.todos.values() {
        *counts.entry(t.status.as_str()).or_default() += 1;
    }
    let archived = store.archived_count()?;
    let ready = readiness::ready(&snap, &ctx.agent, now).len();
    let claimed: Vec<Value> = snap
        .todos
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
        .collect();
    let pending: Vec<_> = snap
        .gates
        .values()
        .filter(|g| g.effective_status() == GateStatus::Pending)
        .collect();
    let u = quota::usage(&snap.quota, &snap.config.quota, now);

    let mut text = format!(
        "{} ({}): {}\n",
        esc(&g.id),
        status_word(g.status),
        esc(&g.objective)
    );
    let c: Vec<String> = counts.iter().map(|(k, v)| format!("{v} {k}")).collect();
    text.push_str(&format!(
        "todos: {}{}{} archived, {ready} ready for {}\n",
        c.join(", "),
        if c.is_empty() { "" } else { ", " },
        archived,
        ctx.agent
    ));
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
    text.push_str(&format!("gates: {} pending\n", pending.len()));
    for gate in &pending {
        text.push_str(&format!(
            "  {} {}\n",
            esc(&gate.id),
            esc(&should_run::cut(&gate.question, 100))
        ));
    }
    // Overdue monitors (issue 8).
    let overdue = crate::kernel::monitor::overdue_list(&snap, now);
    if !overdue.is_empty() {
        text.push_str(&format!("overdue monitors: {}\n", overdue.len()));
    }
    for o in &overdue {
        text.push_str(&format!(
            "  {} every {}, due {}: {}\n",
            esc(&o.id),
            o.every,
            super::rel_time(now, o.due_at),
            esc(&should_run::cut(&o.title, 100))
        ));
    }
    let (done_lately, done_lines) = super::todo_check::done_lately(ctx, &*store)?;
    if !done_lines.is_empty() {
        text.push_str(&format!("done lately: {}\n", done_lines.join(", ")));
    }
    let stalled = crate::kernel::breaker::held(&snap, now);
    if !stalled.is_empty() {
        text.push_str(&format!("held back by the breaker: {}\n", stalled.len()));
    }
    for h in &stalled {
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
    let j = json!({
        "goal": to_json(g),
        "counts": counts,
        "archived": archived,
        "ready": ready,
        "claimed": claimed,
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

fn next_command(a: &Answer, held: Option<&str>) -> String {
    match a.decision {
        Decision::Run => match held {
            Some(id) => format!("loopx todo update {id} --evidence \"...\" (then --status done)"),
            None => "loopx todo claim".into(),
        },
        Decision::Paused => "stop: the goal is not active".into(),
        // Routing (issue 9): the open work is other agents' (capabilities, exclusions).
        Decision::Idle if a.reason == "no_work_for_you" => {
            "sleep 300; loopx quota should-run (the open work needs other capabilities: loopx agent show)".into()
        }
        Decision::Idle => "loopx todo add \"...\" (or ask the owner to complete the goal)".into(),
        Decision::Throttled | Decision::Wait => {
            format!(
                "sleep {}; loopx quota should-run",
                a.retry_after_s.unwrap_or(300)
            )
        }
        Decision::Ask => "wait for the owner: loopx gate list --pending".into(),
    }
}

/// Recent evidence across todos, newest first: found from the journal's recent updates.
fn recent_evidence(
    store: &dyn Store,
    snap: &Snapshot,
    agent: &str,
    now: Ts,
) -> Result<Vec<(String, crate::kernel::Evidence)>> {
    let mut ids: Vec<String> = readiness::held(snap, agent, now)
        .iter()
        .map(|t| t.id.clone())
        .collect();
    for ev in store.journal_tail(100)?.iter().rev() {
        if ev.action.is_todo()
            && ev.data.get("evidence").and_then(Value::as_u64).unwrap_or(0) > 0
            && !ids.contains(&ev.target)
        {
            ids.push(ev.target.clone());
        }
        if ids.len() >= 4 {
            break;
        }
    }
    let mut out = Vec::new();
    for id in ids {
        for e in store.evidence_tail(&id, 2)? {
            out.push((id.clone(), e));
        }
    }
    out.sort_by_key(|e| std::cmp::Reverse(e.1.at));
    out.truncate(5);
    Ok(out)
}

/// `refresh-state`: writes STATE.md and prints the packet for the next turn.
pub fn refresh(ctx: &Ctx) -> Result<Out> {
    let store = ctx.open()?;
    let snap = store.load()?;
    let now = ctx.now;
    let agent = ctx.agent.as_str();
    let g = &snap.config.goal;
    let answer = should_run::decide(&snap, agent, now);
    let held = readiness::held(&snap, agent, now);
    let ready = readiness::ready(&snap, agent, now);
    let mut answered: Vec<_> = snap
        .gates
        .values()
        .filter(|g| g.effective_status() != GateStatus::Pending)
        .collect();
    answered.sort_by_key(|g| std::cmp::Reverse(g.decided_at));
    answered.truncate(5);
    let evidence = recent_evidence(&*store, &snap, agent, now)?;
    let next = next_command(&answer, held.first().map(|t| t.id.as_str()));
    let cut = |s: &str| should_run::cut(s, 120);
    // STATE.md: stored text is escaped, so it stays on its line and adds no structure.
    let safe = |s: &str| esc(&cut(s)).into_owned();

    let mut md = String::new();
    md.push_str("# loopx state\n\n");
    md.push_str(&format!(
        "Generated {now} for agent `{agent}`. Not authoritative: the files in .loopx/ are.\n\n"
    ));
    md.push_str(&format!(
        "## Objective ({})\n\n{}\n",
        status_word(g.status),
        md_line(&g.objective)
    ));
    for s in &g.success_criteria {
        md.push_str(&format!("- {}\n", md_line(s)));
    }
    md.push_str("\n## Your leases\n\n");
    if held.is_empty() {
        md.push_str("none\n");
    }
    for t in &held {
        if let Some(l) = &t.lease {
            md.push_str(&format!(
                "- {} {} (fence {}, {}): {}\n",
                esc(&t.id),
                t.priority,
                l.fence,
                left(now, l.expires_at),
                safe(&t.title)
            ));
            let r = reserves(l, now, "`");
            if !r.is_empty() {
                md.push_str(&format!("  - reserves: {r}: change only these\n"));
            }
            md.push_str(&context_md(t));
        }
    }
    md.push_str(&super::agent::reviews_md(&*store, &held)?);
    let others: Vec<String> = snap
        .todos
        .values()
        .filter_map(|t| Some((t, t.live_lease(now)?)))
        .filter(|(_, l)| l.holder != ctx.agent && !l.paths.is_empty())
        .map(|(t, l)| {
            let r = reserves(l, now, "`");
            format!("- {} ({}): {r}\n", esc(&l.holder), esc(&t.id))
        })
        .collect();
    if !others.is_empty() {
        md.push_str("\n## Reserved by others (leave these files alone)\n\n");
        others.iter().take(10).for_each(|l| md.push_str(l));
        if others.len() > 10 {
            md.push_str(&format!("- and {} more\n", others.len() - 10));
        }
    }
    md.push_str(&format!("\n## Ready ({})\n\n", ready.len()));
    for t in ready.iter().take(5) {
        md.push_str(&format!(
            "- {} {}: {}\n",
            esc(&t.id),
            t.priority,
            safe(&t.title)
        ));
    }
    if ready.len() > 5 {
        md.push_str(&format!("- and {} more\n", ready.len() - 5));
    }
    let (_, done_lines) = super::todo_check::done_lately(ctx, &*store)?;
    if !done_lines.is_empty() {
        md.push_str("\n## Done lately\n\n");
        done_lines
            .iter()
            .for_each(|l| md.push_str(&format!("- {l}\n")));
    }
    let stalled = crate::kernel::breaker::held(&snap, now);
    if !stalled.is_empty() {
        md.push_str("\n## Held back by the breaker\n\n");
        for h in &stalled {
            md.push_str(&format!("- {}\n", held_line(h, now)));
        }
    }
    md.push_str("\n## Questions for the owner\n\n");
    if answer.questions.is_empty() {
        md.push_str("none pending\n");
    }
    for q in &answer.questions {
        md.push_str(&format!(
            "- {} (pending): {}\n",
            esc(&q.gate),
            safe(&q.question)
        ));
    }
    if answer.questions_more > 0 {
        md.push_str(&format!("- and {} more pending\n", answer.questions_more));
    }
    for gate in &answered {
        let o = gate
            .option
            .as_deref()
            .map(|o| format!(" -> {}", esc(o)))
            .unwrap_or_default();
        let r = gate
            .reason
            .as_deref()
            .map(|r| format!(" ({})", safe(r)))
            .unwrap_or_default();
        md.push_str(&format!(
            "- {} {}{o}{r}: {}\n",
            esc(&gate.id),
            gate.status.as_str(),
            safe(&gate.question)
        ));
    }
    md.push_str("\n## Recent evidence\n\n");
    if evidence.is_empty() {
        md.push_str("none\n");
    }
    for (id, e) in &evidence {
        md.push_str(&format!(
            "- {} {} {}: {}\n",
            e.at,
            esc(id),
            esc(&e.agent),
            safe(&e.summary)
        ));
    }
    md.push_str(&format!(
        "\n## Quota\n\n{} of {} slots used in {}\n",
        answer.quota.used, answer.quota.limit, answer.quota.window
    ));
    if let Some(b) = answer.quota.tokens {
        md.push_str(&format!("{} of {} tokens\n", b.used, b.limit));
    }
    if let Some(b) = answer.quota.cost_usd {
        md.push_str(&format!("${} of ${}\n", b.used, b.limit));
    }
    let decision = to_json(&answer.decision);
    md.push_str(&format!(
        "\n## Next\n\nshould-run: {} ({})\n\n    {next}\n",
        decision.as_str().unwrap_or("?"),
        answer.reason
    ));

    let state_file = store.write_projection(&md)?;

    let j = json!({
        "objective": g.objective,
        "goal_status": g.status,
        "leases": held.iter().map(|t| json!({"id": t.id, "title": cut(&t.title), "fence": t.fence,
            "expires_at": t.lease.as_ref().map(|l| l.expires_at), "body": t.body, "links": t.links,
            "handoff_from": t.lease.as_ref().and_then(|l| l.handoff_from.as_deref()),
            "paths": t.lease.as_ref().map(|l| &l.paths).filter(|p| !p.is_empty())})).collect::<Vec<_>>(),
        "ready": ready.iter().take(5).map(|t| json!({"id": t.id, "title": cut(&t.title), "priority": t.priority})).collect::<Vec<_>>(),
        "ready_more": ready.len().saturating_sub(5),
        "questions": answer.questions,
        "questions_more": answer.questions_more,
        "answered": answered.iter().map(|g| json!({"gate": g.id, "status": g.status, "option": g.option,
            "reason": g.reason.as_deref().map(cut), "question": cut(&g.question)})).collect::<Vec<_>>(),
        "evidence": evidence.iter().map(|(id, e)| json!({"todo": id, "at": e.at, "agent": e.agent, "summary": cut(&e.summary)})).collect::<Vec<_>>(),
        "quota": answer.quota,
        "decision": answer.decision,
        "next": next,
        "state_file": state_file,
    });
    // A lease that reserves nothing says nothing about it.
    let mut j = j;
    for l in j["leases"].as_array_mut().into_iter().flatten() {
        if l["paths"].is_null()
            && let Some(m) = l.as_object_mut()
        {
            m.remove("paths");
        }
    }
    let mut out = Out::new("state", j, md.trim_end().to_string());
    if let Some(Value::Object(m)) = out.json.remove("state") {
        out.json = m;
    }
    Ok(out)
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
    bounds::usage(bounds::int(
        "--limit",
        a.limit as u64,
        0,
        bounds::LOG_LIMIT_MAX as u64,
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

/// The most body lines STATE.md shows per todo.
const BODY_LINES: usize = 40;

/// A held todo's hand-off, links and body under its line in STATE.md: escaped, the body as an
/// indented code block so it adds no Markdown structure.
fn context_md(t: &crate::kernel::Todo) -> String {
    let mut s = String::new();
    if let Some(f) = t.lease.as_ref().and_then(|l| l.handoff_from.as_deref()) {
        s.push_str(&format!("  handed over by {}\n", esc(f)));
    }
    for l in &t.links {
        s.push_str(&format!("  link: {}\n", esc(l)));
    }
    if let Some(b) = &t.body {
        s.push_str("  body:\n\n");
        let n = b.lines().count();
        for l in b.lines().take(BODY_LINES) {
            s.push_str(&format!("      {}\n", esc(l)));
        }
        if n > BODY_LINES {
            s.push_str(&format!(
                "\n  ({} more: `loopx todo show {}`)\n",
                crate::text::count(n - BODY_LINES, "line", "lines"),
                esc(&t.id)
            ));
        }
        s.push('\n');
    }
    s
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
