//! Who a command acts as when it names no agent (`local`), said where it matters.

use super::{Cmd, Ctx, quota, todo};
use crate::kernel::{Code, Error};

/// An error about leases or ready work, from a command that named no agent: the hint says it
/// acted as `local` and how to name the agent, since the error is likely about that.
pub(super) fn who_am_i(e: Error) -> Error {
    if !matches!(
        e.code,
        Code::LeaseConflict | Code::StaleFence | Code::NothingReady | Code::NotReady
    ) {
        return e;
    }
    let who = "this ran as agent `local`: name yours with --agent ID or LOOPX_AGENT";
    let hint = match &e.hint {
        Some(h) => format!("{h}; {who}"),
        None => who.to_string(),
    };
    e.hint(hint)
}

/// Whether a command writes as its agent (a claim, evidence, a turn, a slot).
pub(super) fn writes_as_agent(cmd: &Option<Cmd>) -> bool {
    use todo::TodoCmd as T;
    matches!(
        cmd,
        Some(
            Cmd::Todo(
                T::Claim { .. }
                    | T::Renew { .. }
                    | T::Update(_)
                    | T::Release { .. }
                    | T::Handoff(_)
            ) | Cmd::Turn(_)
                | Cmd::Heartbeat(_)
                | Cmd::Quota(quota::QuotaCmd::SpendSlot { .. })
        )
    )
}

/// After a write as `local` that named no agent: a warning on stderr when other agents hold
/// leases in the project, since two runtimes that both forgot `--agent` would share one id.
pub(super) fn warn_beside_others(ctx: &Ctx) {
    let Ok(store) = ctx.open() else { return };
    let Ok(snap) = store.load() else { return };
    let mut others: Vec<&str> = snap
        .todos
        .values()
        .filter_map(|t| t.live_lease(ctx.now))
        .map(|l| l.holder.as_str())
        .filter(|h| *h != ctx.agent)
        .collect();
    others.sort_unstable();
    others.dedup();
    if others.is_empty() {
        return;
    }
    let shown: Vec<String> = others
        .iter()
        .take(3)
        .map(|h| crate::text::escape(h).into_owned())
        .collect();
    let more = others.len().saturating_sub(3);
    let more = if more > 0 {
        format!(" and {more} more")
    } else {
        String::new()
    };
    eprintln!(
        "loopx: warning: this ran as agent `{}` (no --agent or LOOPX_AGENT) beside agents that \
         named themselves ({}{more}); name yours with --agent ID or LOOPX_AGENT",
        ctx.agent,
        shown.join(", ")
    );
}
