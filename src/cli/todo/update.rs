//! `todo update`: its arguments and evidence read, `flows::update` called, its answer shown.

use std::time::Duration;

use serde_json::Value;

use super::UpdateArgs;
use crate::cli::capture::artifact;
use crate::cli::{Ctx, Out, to_json};
use crate::flows::update::{self, UpdateOpts};
use crate::kernel::limits;
use crate::kernel::ops::Update;
use crate::kernel::{Error, Evidence, EvidenceKind, Result, Status, Todo, Ts};
use crate::store::Store;
use crate::text::escape as esc;

/// `todo update`: appends evidence and changes status; a done that needs a check runs it.
pub(super) fn update(ctx: &Ctx, store: &dyn Store, a: UpdateArgs) -> Result<Out> {
    check_args(&a)?;
    let ask = Update {
        fence: a.fence,
        evidence: given_evidence(ctx, &a)?,
        status: a.status,
        reason: a.reason,
    };
    let check_timeout = Duration::from_millis(a.check_timeout.0.max(0) as u64);
    let o = UpdateOpts {
        id: a.id,
        ask,
        check_timeout,
    };
    let root = ctx.work_dir(store);
    let u = update::update(store, &root, (&ctx.agent, ctx.now), &o)?;
    Ok(Out::new(
        "todo",
        to_json(&u.todo),
        updated_text(&u.todo, o.ask.status),
    )
    .noted(u.notes)
    .warned(u.warnings))
}

/// Refuses too many entries, a check timeout out of range, and `--kind check`.
fn check_args(a: &UpdateArgs) -> Result<()> {
    let entries = a.evidence.len() + a.artifact.len() + a.metric.len();
    limits::usage(limits::count(
        "--evidence/--artifact/--metric",
        entries,
        limits::EVIDENCE_MAX,
    ))?;
    if !(1_000..=86_400_000).contains(&a.check_timeout.0) {
        return Err(Error::usage("--check-timeout must be 1s to 24h"));
    }
    if a.kind == EvidenceKind::Check {
        return Err(Error::usage(
            "`--kind check` is loopx's own: it writes it when a todo's check runs",
        )
        .hint("use note, command, artifact, metric, git or auto"));
    }
    Ok(())
}

/// The evidence given: texts, then artifacts (hashed), then metrics.
fn given_evidence(ctx: &Ctx, a: &UpdateArgs) -> Result<Vec<Evidence>> {
    let (now, agent) = (ctx.now, ctx.agent.as_str());
    let mut evidence = Vec::new();
    for text in &a.evidence {
        evidence.push(Evidence::new(now, agent, None, a.kind, text.clone()));
    }
    for path in &a.artifact {
        evidence.push(artifact(ctx, now, agent, path)?);
    }
    for m in &a.metric {
        evidence.push(metric(now, agent, m)?);
    }
    Ok(evidence)
}

/// `--metric NAME=VALUE` as evidence: the value a number when it reads as one.
fn metric(now: Ts, agent: &str, m: &str) -> Result<Evidence> {
    let (name, value) = m
        .split_once('=')
        .filter(|(n, _)| !n.trim().is_empty())
        .ok_or_else(|| Error::usage(format!("`{m}` is not NAME=VALUE")))?;
    let v: Value = value
        .trim()
        .parse::<f64>()
        .ok()
        .and_then(|f| serde_json::Number::from_f64(f).map(Value::Number))
        .unwrap_or_else(|| Value::String(value.to_string()));
    let mut e = Evidence::new(
        now,
        agent,
        None,
        EvidenceKind::Metric,
        format!("{}={}", name.trim(), value.trim()),
    );
    e.name = Some(name.trim().to_string());
    e.value = Some(v);
    Ok(e)
}

/// What `todo update` says of the todo `t` it changed.
fn updated_text(t: &Todo, status: Option<Status>) -> String {
    match t.status {
        Status::Done | Status::Cancelled => {
            format!("{} {} (archived)", esc(&t.id), t.status.as_str())
        }
        _ if t.every.is_some() && status == Some(Status::Done) => format!(
            "{} done; next due {}",
            esc(&t.id),
            t.next_due_at.map(|d| d.to_string()).unwrap_or_default()
        ),
        s => format!("{} updated ({})", esc(&t.id), s.as_str()),
    }
}
