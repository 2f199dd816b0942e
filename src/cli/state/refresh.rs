//! `refresh-state`: STATE.md and the packet for the next turn.

use serde_json::{Value, json};

use super::{held_line, left, reserves};
use crate::cli::goal::status_word;
use crate::cli::{Ctx, Out, to_json};
use crate::kernel::readiness;
use crate::kernel::should_run::{self, Answer, Decision};
use crate::kernel::{Evidence, Gate, GateStatus, Result, Snapshot, Todo, Ts};
use crate::store::Store;
use crate::text::{escape as esc, md_line};

/// What the next turn's packet is made of.
struct View<'a> {
    snap: &'a Snapshot,
    now: Ts,
    agent: &'a str,
    answer: Answer,
    held: Vec<&'a Todo>,
    ready: Vec<&'a Todo>,
    answered: Vec<&'a Gate>,
    evidence: Vec<(String, Evidence)>,
    next: String,
}

/// `refresh-state`: writes STATE.md and prints the packet for the next turn.
pub fn refresh(ctx: &Ctx) -> Result<Out> {
    let store = ctx.open()?;
    let snap = store.load()?;
    let now = ctx.now;
    let agent = ctx.agent.as_str();
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
    let v = View {
        snap: &snap,
        now,
        agent,
        answer,
        held,
        ready,
        answered,
        evidence,
        next,
    };
    let md = state_md(ctx, &*store, &v)?;
    let state_file = store.files().map(|f| f.write_projection(&md)).transpose()?;
    let j = packet_json(&v, state_file);
    let mut out = Out::new("state", j, md.trim_end().to_string());
    if let Some(Value::Object(m)) = out.json.remove("state") {
        out.json = m;
    }
    Ok(out)
}

/// Cut to 120 characters.
fn cut(s: &str) -> String {
    should_run::cut(s, 120)
}

/// STATE.md: stored text is escaped, so it stays on its line and adds no structure.
fn safe(s: &str) -> String {
    esc(&cut(s)).into_owned()
}

/// STATE.md in full.
fn state_md(ctx: &Ctx, store: &dyn Store, v: &View) -> Result<String> {
    let (now, agent) = (v.now, v.agent);
    let g = &v.snap.config.goal;
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
    leases_md(&mut md, v);
    md.push_str(&crate::cli::agent::reviews_md(store, &v.held)?);
    others_md(&mut md, v);
    ready_md(&mut md, &v.ready);
    let done_lines = crate::cli::todo_check::done_lately(ctx, store)?.lines;
    if !done_lines.is_empty() {
        md.push_str("\n## Done lately\n\n");
        done_lines
            .iter()
            .for_each(|l| md.push_str(&format!("- {l}\n")));
    }
    let stalled = crate::kernel::breaker::held(v.snap, now);
    if !stalled.is_empty() {
        md.push_str("\n## Held back by the breaker\n\n");
        for h in &stalled {
            md.push_str(&format!("- {}\n", held_line(h, now)));
        }
    }
    questions_md(&mut md, &v.answer, &v.answered);
    evidence_md(&mut md, &v.evidence);
    next_md(&mut md, &v.answer, &v.next);
    Ok(md)
}

/// STATE.md's leases of this agent: each with its reservation and context.
fn leases_md(md: &mut String, v: &View) {
    md.push_str("\n## Your leases\n\n");
    if v.held.is_empty() {
        md.push_str("none\n");
    }
    for t in &v.held {
        if let Some(l) = &t.lease {
            md.push_str(&format!(
                "- {} {} (fence {}, {}): {}\n",
                esc(&t.id),
                t.priority,
                l.fence,
                left(v.now, l.expires_at),
                safe(&t.title)
            ));
            let r = reserves(l, v.now, "`");
            if !r.is_empty() {
                md.push_str(&format!("  - reserves: {r}: change only these\n"));
            }
            md.push_str(&context_md(t));
        }
    }
}

/// STATE.md's paths other agents' live leases reserve: at most ten.
fn others_md(md: &mut String, v: &View) {
    let others: Vec<String> = v
        .snap
        .todos
        .values()
        .filter_map(|t| Some((t, t.live_lease(v.now)?)))
        .filter(|(_, l)| l.holder != v.agent && !l.paths.is_empty())
        .map(|(t, l)| {
            let r = reserves(l, v.now, "`");
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
}

/// STATE.md's ready todos: at most five, then how many more.
fn ready_md(md: &mut String, ready: &[&Todo]) {
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
}

/// STATE.md's questions: the pending gates, then the latest answered ones.
fn questions_md(md: &mut String, answer: &Answer, answered: &[&Gate]) {
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
    for gate in answered {
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
}

/// STATE.md's recent evidence.
fn evidence_md(md: &mut String, evidence: &[(String, Evidence)]) {
    md.push_str("\n## Recent evidence\n\n");
    if evidence.is_empty() {
        md.push_str("none\n");
    }
    for (id, e) in evidence {
        md.push_str(&format!(
            "- {} {} {}: {}\n",
            e.at,
            esc(id),
            esc(&e.agent),
            safe(&e.summary)
        ));
    }
}

/// STATE.md's quota and the next command.
fn next_md(md: &mut String, answer: &Answer, next: &str) {
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
}

/// The packet `refresh-state --json` prints.
fn packet_json(v: &View, state_file: Option<std::path::PathBuf>) -> Value {
    let g = &v.snap.config.goal;
    let (answer, held, ready) = (&v.answer, &v.held, &v.ready);
    let mut j = json!({
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
        "answered": v.answered.iter().map(|g| json!({"gate": g.id, "status": g.status, "option": g.option,
            "reason": g.reason.as_deref().map(cut), "question": cut(&g.question)})).collect::<Vec<_>>(),
        "evidence": v.evidence.iter().map(|(id, e)| json!({"todo": id, "at": e.at, "agent": e.agent, "summary": cut(&e.summary)})).collect::<Vec<_>>(),
        "quota": answer.quota,
        "decision": answer.decision,
        "next": v.next,
        "state_file": state_file,
    });
    // A lease that reserves nothing says nothing about it.
    for l in j["leases"].as_array_mut().into_iter().flatten() {
        if l["paths"].is_null()
            && let Some(m) = l.as_object_mut()
        {
            m.remove("paths");
        }
    }
    j
}

fn next_command(a: &Answer, held: Option<&str>) -> String {
    match a.decision {
        Decision::Run => match held {
            Some(id) => format!("loopx todo update {id} --evidence \"...\" (then --status done)"),
            None => "loopx todo claim".into(),
        },
        Decision::Paused => "stop: the goal is not active".into(),
        // Routing: the open work is other agents' (capabilities, exclusions).
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
