//! `todo handoff`, `todo edit` and `todo release --owner`, and a todo's context (body and links)
//! for `add` and `show`.

use std::path::Path;

use clap::Args;
use serde_json::Value;

use super::{Ctx, Out, to_json};
use crate::kernel::limits;
use crate::kernel::ops::{self, Edit, Handoff};
use crate::kernel::{Dur, Error, Priority, Result, Snapshot, Todo};
use crate::store::{Store, StoreExt};
use crate::text::escape as esc;

/// A todo's body and links, as `todo add` and `todo edit` take them.
#[derive(Debug, Args, Default)]
pub struct ContextArgs {
    /// What the work is, at length (Markdown or plain text); `todo edit --body ''` removes it.
    #[arg(long, value_name = "TEXT", conflicts_with = "body_file")]
    pub body: Option<String>,
    /// Read the body from a regular file (not a link, not a FIFO).
    #[arg(long, value_name = "FILE")]
    pub body_file: Option<String>,
    /// A URL of an issue, a pull request or a document (repeatable).
    #[arg(long, value_name = "URL")]
    pub link: Vec<String>,
}

impl ContextArgs {
    /// The body (from `--body` or `--body-file`) and the links, checked against their bounds.
    pub fn read(&self, ctx: &Ctx) -> Result<(Option<String>, Vec<String>)> {
        let body = match (&self.body, &self.body_file) {
            (Some(b), _) => Some(b.clone()),
            (None, Some(f)) => Some(read_body_file(ctx, f)?),
            (None, None) => None,
        };
        if let Some(b) = &body {
            limits::usage(limits::text("--body", b, limits::BODY_MAX))?;
        }
        limits::usage(limits::count("--link", self.link.len(), limits::LINKS_MAX))?;
        for l in &self.link {
            limits::usage(limits::link("--link", l))?;
        }
        Ok((body, self.link.clone()))
    }
}

/// Reads `--body-file`: a regular file, opened without following a link, bounded, UTF-8.
fn read_body_file(ctx: &Ctx, path: &str) -> Result<String> {
    limits::usage(limits::text("--body-file", path, limits::PATH_MAX))?;
    let p = Path::new(path);
    let full = if p.is_absolute() {
        p.to_path_buf()
    } else {
        ctx.cwd.join(p)
    };
    let bad = |why: String| {
        Error::usage(format!("--body-file {path}: {why}"))
            .hint("give the path of a regular UTF-8 text file (not a link or a FIFO)")
    };
    let mut f = crate::store::atomic::open_nofollow(&full).map_err(|e| {
        if e.raw_os_error() == Some(libc::ELOOP) {
            bad("is a symbolic link".into())
        } else {
            bad(e.to_string())
        }
    })?;
    let bytes = crate::store::atomic::read_bounded(&mut f, limits::BODY_FILE_MAX_BYTES)
        .map_err(|e| bad(e.to_string()))?;
    String::from_utf8(bytes).map_err(|_| bad("is not UTF-8 text".into()))
}

/// `todo handoff` arguments.
#[derive(Debug, Args)]
pub struct HandoffArgs {
    /// The id (default: the one you hold).
    #[arg(add = super::complete::todo_id())]
    id: Option<String>,
    /// The agent that takes the lease over.
    #[arg(long, value_name = "AGENT")]
    to: String,
    /// A note for the receiver, kept as evidence.
    #[arg(long, value_name = "TEXT")]
    note: Option<String>,
    /// The fence you were granted; a stale one is refused.
    #[arg(long)]
    fence: Option<u64>,
    /// The receiver's lease length (default from loopx.toml, 30m).
    #[arg(long, value_name = "DUR")]
    ttl: Option<Dur>,
}

/// `todo edit` arguments.
#[derive(Debug, Args)]
pub struct EditArgs {
    /// The id or a unique prefix.
    #[arg(add = super::complete::todo_id())]
    id: String,
    /// A new title.
    #[arg(long)]
    title: Option<String>,
    /// A new priority, P0 (highest) to P4.
    #[arg(long, short)]
    priority: Option<Priority>,
    /// Body and links (links are added to those it has).
    #[command(flatten)]
    context: ContextArgs,
    /// Drop every link first.
    #[arg(long)]
    clear_links: bool,
    /// New dependencies, replacing the old (repeatable).
    #[arg(long, value_name = "ID", conflicts_with = "no_depends", add = super::complete::todo_id())]
    depends_on: Vec<String>,
    /// Drop every dependency.
    #[arg(long)]
    no_depends: bool,
}

/// Runs `todo handoff`.
pub fn handoff(ctx: &Ctx, store: &dyn Store, a: HandoffArgs) -> Result<Out> {
    let agent = ctx.agent.as_str();
    crate::kernel::id::check_agent(&a.to)?;
    if let Some(n) = &a.note {
        limits::usage(limits::text("--note", n, limits::TEXT_MAX))?;
    }
    let t = store.mutate(|snap| {
        let id = match a.id.as_deref() {
            Some(i) => store.resolve_todo(snap, i)?,
            None => ops::default_held(snap, agent, ctx.now)?,
        };
        let ttl = a.ttl.unwrap_or(snap.config.lease.ttl);
        let h = Handoff {
            id,
            to: a.to.clone(),
            fence: a.fence,
            ttl,
            note: a.note.clone(),
        };
        ops::handoff(snap, agent, ctx.now, h)
    })?;
    let until = t.lease.as_ref().map(|l| l.expires_at.to_string());
    let text = format!(
        "{} handed to {} (fence {}, lease until {})",
        esc(&t.id),
        esc(&a.to),
        t.fence,
        until.unwrap_or_default()
    );
    Ok(Out::new("todo", to_json(&t), text))
}

/// Runs `todo edit`.
pub fn edit(ctx: &Ctx, store: &dyn Store, a: EditArgs) -> Result<Out> {
    let (body, links) = a.context.read(ctx)?;
    limits::usage(limits::count(
        "--depends-on",
        a.depends_on.len(),
        limits::DEPENDS_MAX,
    ))?;
    let (t, notes) = store.mutate_noted(|snap| {
        let id = store.resolve_todo(snap, &a.id)?;
        let depends_on = if a.no_depends {
            Some(Vec::new())
        } else if a.depends_on.is_empty() {
            None
        } else {
            Some(
                a.depends_on
                    .iter()
                    .map(|d| store.resolve_todo(snap, d))
                    .collect::<Result<Vec<_>>>()?,
            )
        };
        let e = Edit {
            title: a.title.clone(),
            priority: a.priority,
            body: body.clone(),
            clear_links: a.clear_links,
            links: links.clone(),
            depends_on,
        };
        ops::edit(snap, &ctx.agent, ctx.now, &id, e)
    })?;
    Ok(Out::new("todo", to_json(&t), format!("{} edited", esc(&t.id))).noted(notes))
}

/// `todo release ID --owner`: the owner takes the lease back from whoever holds it.
pub fn release_by_owner(ctx: &Ctx, store: &dyn Store, id: Option<String>) -> Result<Out> {
    let Some(id) = id else {
        return Err(
            Error::usage("--owner needs the todo's id").hint("loopx todo release t-4kq9zx --owner")
        );
    };
    let mut from = String::new();
    let t = store.mutate(|snap| {
        let id = store.resolve_todo(snap, &id)?;
        gone_or_broken(store, snap, &id)?;
        let holder = snap.todos.get(&id).and_then(|t| t.lease.as_ref());
        let Some(l) = holder else {
            return Err(Error::new(
                crate::kernel::Code::LeaseConflict,
                format!("{id} has no lease; nothing to release"),
            )
            .hint("`loopx status` lists the leases held"));
        };
        from = l.holder.clone();
        ops::release_by_owner(snap, ops::OWNER, ctx.now, &id, &from)
    })?;
    Ok(Out::new(
        "todo",
        to_json(&t),
        format!("{} released from {} by the owner", esc(&t.id), esc(&from)),
    )
    .with("released_from", Value::String(from)))
}

/// Refuses, saying why, a todo that is finished (archived) or whose file cannot be read.
fn gone_or_broken(store: &dyn Store, snap: &Snapshot, id: &str) -> Result<()> {
    use crate::kernel::Code;
    if let Some(p) = snap.quarantined.get(id) {
        return Err(Error::new(
            Code::InvalidState,
            format!(
                "{id}'s file cannot be read ({}); nothing released",
                p.message
            ),
        )
        .hint("fix the file, or see `loopx doctor`"));
    }
    if snap.todos.contains_key(id) {
        return Ok(());
    }
    let status = store
        .archived_todo(id)?
        .map_or("finished".to_string(), |t| t.status.as_str().to_string());
    Err(Error::new(
        Code::InvalidState,
        format!("{id} is {status} (archived): it holds no lease; nothing to release"),
    ))
}

/// The body and links of a todo as text lines for people (escaped), or nothing.
pub fn context_text(t: &Todo) -> String {
    let mut s = String::new();
    if let Some(b) = &t.body {
        s.push_str("\n  body:");
        for l in b.lines() {
            s.push_str("\n    ");
            s.push_str(&esc(l));
        }
    }
    for l in &t.links {
        s.push_str(&format!("\n  link: {}", esc(l)));
    }
    s
}
