//! `gate`: agents ask the owner; the owner approves, rejects or cancels.

use clap::Subcommand;

use super::{Ctx, Out, to_json};
use crate::kernel::bounds;
use crate::kernel::id::Kind;
use crate::kernel::ops;
use crate::kernel::{Gate, GateStatus, Result};
use crate::store::StoreExt;
use crate::text::escape as esc;

/// `gate ...`.
#[derive(Debug, Subcommand)]
pub enum GateCmd {
    /// Ask the owner a question; prints the gate's id.
    #[command(
        after_help = "Example:\n  loopx gate open \"Use the 2024 data set?\" --blocks t-4kq9zx --option yes --option no"
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
        after_help = "Example:\n  loopx gate approve g-7hw2ma --option yes --reason \"go ahead\""
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
    s
}

/// Runs `gate ...`.
pub fn run(ctx: &Ctx, c: GateCmd) -> Result<Out> {
    // Deciding is the owner's act: the owner's key, and on a database the owner's login.
    let decides = !matches!(c, GateCmd::Open { .. } | GateCmd::List { .. });
    let store = ctx.open_as(decides)?;
    let now = ctx.now;
    let (id, status, option, reason) = match c {
        GateCmd::Open {
            question,
            blocks,
            global,
            options,
        } => {
            bounds::usage(bounds::count("--blocks", blocks.len(), bounds::BLOCKS_MAX))?;
            bounds::usage(bounds::count(
                "--option",
                options.len(),
                bounds::OPTIONS_MAX,
            ))?;
            let new_id = store.fresh_id(Kind::Gate)?;
            let g = store.mutate(|snap| {
                let blocks = blocks
                    .iter()
                    .map(|b| store.resolve_todo(snap, b))
                    .collect::<Result<Vec<_>>>()?;
                ops::open_gate(
                    snap,
                    &ctx.agent,
                    now,
                    new_id.clone(),
                    question.clone(),
                    blocks,
                    global,
                    options.clone(),
                )
            })?;
            return Ok(Out::new("gate", to_json(&g), g.id.clone()));
        }
        GateCmd::List { pending } => {
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
            return Ok(Out::new("gates", to_json(&gates), text));
        }
        GateCmd::Approve { id, option, reason } => (id, GateStatus::Approved, option, reason),
        GateCmd::Reject { id, reason } => (id, GateStatus::Rejected, None, Some(reason)),
        GateCmd::Cancel { id, reason } => (id, GateStatus::Cancelled, None, reason),
    };
    let owner = crate::kernel::ops::OWNER;
    let g = store.mutate(|snap| {
        let id = store.resolve_gate(snap, &id)?;
        ops::decide_gate(
            snap,
            owner,
            now,
            &id,
            status,
            option.clone(),
            reason.clone(),
        )
    })?;
    Ok(Out::new("gate", to_json(&g), line(&g)))
}
