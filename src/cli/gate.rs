//! `gate`: agents ask the owner; the owner approves, rejects or cancels.

use clap::Subcommand;

use super::{Ctx, Out, to_json};
use crate::kernel::gate_action::{self, GateAction};
use crate::kernel::id::Kind;
use crate::kernel::limits;
use crate::kernel::ops;
use crate::kernel::{Error, Gate, GateStatus, Result};
use crate::store::{Store, StoreExt};
use crate::text::escape as esc;

/// `gate ...`.
#[derive(Debug, Subcommand)]
pub enum GateCmd {
    /// Ask the owner a question; prints the gate's id.
    #[command(
        after_help = "Example:\n  loopx gate open \"Use the 2024 data set?\" --blocks t-4kq9zx --option yes --option no\n  loopx gate open \"Push the release?\" --action-cmd -- git push origin v1.2.0"
    )]
    Open {
        /// The question.
        question: String,
        /// A todo it blocks until decided (repeatable).
        #[arg(long, value_name = "ID", add = super::complete::todo_id())]
        blocks: Vec<String>,
        /// Block every agent todo until decided.
        #[arg(long)]
        global: bool,
        /// An answer to offer (repeatable).
        #[arg(long = "option", value_name = "TEXT")]
        options: Vec<String>,
        /// The exact payload the approval is for (a diff, a message): the file's bytes, UTF-8.
        #[arg(long, value_name = "FILE", conflicts_with = "action_cmd")]
        action_file: Option<std::path::PathBuf>,
        /// The exact command the approval is for, after `--` (run without a shell).
        #[arg(long, requires = "argv")]
        action_cmd: bool,
        /// The command of `--action-cmd`.
        #[arg(
            value_name = "CMD",
            trailing_var_arg = true,
            allow_hyphen_values = true,
            requires = "action_cmd"
        )]
        argv: Vec<String>,
    },
    /// A gate in full: its question, decision, and the action it holds with its sha256.
    #[command(after_help = "Example:\n  loopx gate show g-7hw2ma")]
    Show {
        /// The id or a unique prefix.
        #[arg(add = super::complete::gate_id())]
        id: String,
    },
    /// List gates.
    #[command(after_help = "Example:\n  loopx gate list --pending")]
    List {
        /// Only pending ones.
        #[arg(long)]
        pending: bool,
    },
    /// Owner: approve a gate.
    #[command(
        after_help = "Example:\n  loopx gate approve g-7hw2ma --option yes --reason \"go ahead\"\n  loopx gate approve g-3pqx7d --sha 5f0c...e1"
    )]
    Approve {
        /// The id or a unique prefix.
        #[arg(add = super::complete::gate_id())]
        id: String,
        /// The option chosen.
        #[arg(long)]
        option: Option<String>,
        /// Why.
        #[arg(long)]
        reason: Option<String>,
        /// The sha256 of the action you read (`gate show`); needed when the gate holds one.
        #[arg(long, value_name = "SHA256")]
        sha: Option<String>,
    },
    /// Owner: reject a gate; the todos it blocks become blocked.
    #[command(
        after_help = "Example:\n  loopx gate reject g-7hw2ma --reason \"too costly for now\""
    )]
    Reject {
        /// The id or a unique prefix.
        #[arg(add = super::complete::gate_id())]
        id: String,
        /// Why (required).
        #[arg(long)]
        reason: String,
    },
    /// Owner: withdraw a gate.
    #[command(after_help = "Example:\n  loopx gate cancel g-7hw2ma --reason \"no longer needed\"")]
    Cancel {
        /// The id or a unique prefix.
        #[arg(add = super::complete::gate_id())]
        id: String,
        /// Why.
        #[arg(long)]
        reason: Option<String>,
    },
}

fn line(g: &Gate) -> String {
    let status = g.effective_status();
    let mut s = format!(
        "{}  {:<9} {}",
        esc(&g.id),
        status.as_str(),
        esc(&g.question)
    );
    if !g.options.is_empty() {
        s.push_str(&format!("  [{}]", esc(&g.options.join(" | "))));
    }
    if g.global {
        s.push_str("  (blocks all)");
    } else if !g.blocks.is_empty() {
        s.push_str(&format!("  (blocks {})", esc(&g.blocks.join(", "))));
    }
    if let Some(o) = &g.option {
        s.push_str(&format!("  -> {}", esc(o)));
    }
    if let Some(a) = &g.action {
        s.push_str(&format!(
            "  [{} {}]",
            a.kind.as_str(),
            esc(&a.sha256.chars().take(12).collect::<String>())
        ));
    }
    if let Some(u) = &g.used {
        s.push_str(&format!("  (used by {} at {})", esc(&u.by), u.at));
    }
    s
}

/// The gate in full, for `gate show`.
fn shown(g: &Gate) -> String {
    let mut s = line(g);
    if let Some(a) = &g.action {
        s.push_str(&format!(
            "\naction ({}), sha256 {}:",
            a.kind.as_str(),
            a.sha256
        ));
        for l in a.shown().lines() {
            s.push_str(&format!("\n  | {l}"));
        }
        let odd = a.unusual();
        if odd > 0 {
            s.push_str(&format!("\nnote: the payload holds {odd} characters outside printable ASCII (look-alikes among them show as themselves)"));
        }
        if !a.intact() {
            s.push_str("\nwarning: the action no longer matches its sha256 (edited by hand): it cannot be approved or run");
        }
        if g.effective_status() == GateStatus::Pending {
            s.push_str(&format!(
                "\napprove: loopx gate approve {} --sha {}",
                g.id, a.sha256
            ));
        }
    }
    s
}

/// The action `gate open` was given, if any.
fn action_of(
    file: Option<&std::path::Path>,
    cmd: bool,
    argv: Vec<String>,
) -> Result<Option<GateAction>> {
    let checked = |r: std::result::Result<GateAction, limits::Violation>| {
        r.map_err(|v| Error::usage(v.to_string()))
    };
    if cmd {
        return checked(GateAction::cmd(argv)).map(Some);
    }
    let Some(p) = file else { return Ok(None) };
    let shown = p.display();
    let mut f = crate::store::atomic::open_nofollow(p).map_err(|e| {
        Error::usage(format!(
            "--action-file {shown}: {e} (a regular file, not a link)"
        ))
    })?;
    let bytes = crate::store::atomic::read_bounded(&mut f, gate_action::PAYLOAD_MAX as u64)
        .map_err(|e| Error::usage(format!("--action-file {shown}: {e}")))?;
    let text = String::from_utf8(bytes).map_err(|e| {
        Error::usage(format!(
            "--action-file {shown} is not UTF-8 (byte {})",
            e.utf8_error().valid_up_to()
        ))
    })?;
    checked(GateAction::payload(text)).map(Some)
}

/// Runs `gate ...`.
pub fn run(ctx: &Ctx, c: GateCmd) -> Result<Out> {
    // Deciding is the owner's act: the owner's key, and on a database the owner's login (the
    // database checks it).
    let opened = ctx.open()?;
    let store: &dyn Store = &*opened;
    let decision = |status, option, reason, sha| ops::Decision {
        status,
        option,
        reason,
        sha,
    };
    let (id, d) = match c {
        GateCmd::Open {
            question,
            blocks,
            global,
            options,
            action_file,
            action_cmd,
            argv,
        } => {
            let action = action_of(action_file.as_deref(), action_cmd, argv)?;
            return open(ctx, store, question, blocks, global, options, action);
        }
        GateCmd::Show { id } => return show(store, &id),
        GateCmd::List { pending } => return list(store, pending),
        GateCmd::Approve {
            id,
            option,
            reason,
            sha,
        } => (id, decision(GateStatus::Approved, option, reason, sha)),
        GateCmd::Reject { id, reason } => {
            (id, decision(GateStatus::Rejected, None, Some(reason), None))
        }
        GateCmd::Cancel { id, reason } => (id, decision(GateStatus::Cancelled, None, reason, None)),
    };
    let owner = crate::kernel::ops::OWNER;
    let g = store.mutate(|snap| {
        let id = store.resolve_gate(snap, &id)?;
        ops::decide_gate(snap, owner, ctx.now, &id, d.clone())
    })?;
    Ok(Out::new("gate", to_json(&g), line(&g)))
}

/// `gate open`: a new gate, or the same one again (`existing`).
fn open(
    ctx: &Ctx,
    store: &dyn Store,
    question: String,
    blocks: Vec<String>,
    global: bool,
    options: Vec<String>,
    action: Option<GateAction>,
) -> Result<Out> {
    limits::usage(limits::count("--blocks", blocks.len(), limits::BLOCKS_MAX))?;
    limits::usage(limits::count(
        "--option",
        options.len(),
        limits::OPTIONS_MAX,
    ))?;
    let new_id = store.fresh_id(Kind::Gate)?;
    let g = store.mutate(|snap| {
        let blocks = blocks
            .iter()
            .map(|b| store.resolve_todo(snap, b))
            .collect::<Result<Vec<_>>>()?;
        let new = ops::NewGate {
            id: new_id.clone(),
            question: question.clone(),
            blocks,
            global,
            options: options.clone(),
            action: action.clone(),
        };
        ops::open(snap, &ctx.agent, ctx.now, new)
    })?;
    let mut out = Out::new("gate", to_json(&g), g.id.clone());
    out.json
        .insert("existing".into(), serde_json::json!(g.id != new_id));
    Ok(out)
}

/// `gate show`: the gate in full, and whether its action is intact.
fn show(store: &dyn Store, id: &str) -> Result<Out> {
    let snap = store.load()?;
    let id = store.resolve_gate(&snap, id)?;
    let g = snap
        .gates
        .get(&id)
        .ok_or_else(|| Error::new(crate::kernel::Code::NotFound, format!("no gate {id}")))?;
    let mut out = Out::new("gate", to_json(g), shown(g));
    if let Some(a) = &g.action {
        out.json
            .insert("action_intact".into(), serde_json::json!(a.intact()));
    }
    Ok(out)
}

/// `gate list`: the gates (the pending ones only with `pending`), oldest first.
fn list(store: &dyn Store, pending: bool) -> Result<Out> {
    let snap = store.load()?;
    let mut gates: Vec<&Gate> = snap
        .gates
        .values()
        .filter(|g| !pending || g.effective_status() == GateStatus::Pending)
        .collect();
    gates.sort_by(|a, b| (a.opened_at, &a.id).cmp(&(b.opened_at, &b.id)));
    let text = if gates.is_empty() {
        "no gates".to_string()
    } else {
        gates.iter().map(|g| line(g)).collect::<Vec<_>>().join("\n")
    };
    Ok(Out::new("gates", to_json(&gates), text))
}
