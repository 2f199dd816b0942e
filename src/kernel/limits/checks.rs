//! The checks of each state file's values against the limits. Pure: the store maps a violation
//! to exit 6 with file and line, the faces and ops map it to exit 2.

use crate::kernel::model::{Check, Config, Evidence, Gate, Lease, QuotaFile, Spend, Todo};
use crate::kernel::time::Dur;

use super::*;
pub use crate::kernel::model::{TTL_MAX, TTL_MIN};

/// A state value whose bounds can be checked.
pub trait Limited {
    /// The first value outside its bound, if any.
    fn check_limits(&self) -> Checked;
}

impl Limited for Config {
    fn check_limits(&self) -> Checked {
        check_config(self)
    }
}

impl Limited for Todo {
    fn check_limits(&self) -> Checked {
        check_todo(self)
    }
}

impl Limited for Gate {
    fn check_limits(&self) -> Checked {
        check_gate(self)
    }
}

impl Limited for crate::kernel::model::AgentInfo {
    fn check_limits(&self) -> Checked {
        agent("id", &self.id)?;
        caps("capabilities", &self.capabilities)
    }
}

/// At most 32 capabilities, each 1 to 64 of `[a-z0-9_.-]`.
fn caps(key: &str, c: &[String]) -> Checked {
    if crate::kernel::agents::caps_in_bounds(c) {
        return Ok(());
    }
    Err(Violation::new(
        key,
        format!(
            "`{key}` must be at most {} names of 1 to {} of a-z 0-9 _ . -",
            crate::kernel::agents::CAPS_MAX,
            crate::kernel::agents::CAP_LEN_MAX
        ),
    ))
}

/// A todo's routing fields: `requires`, `reviews`, `exclude_agents`.
fn check_routing(t: &Todo) -> Checked {
    caps("requires", &t.requires)?;
    opt_text("reviews", &t.reviews, REF_MAX)?;
    count(
        "exclude_agents",
        t.exclude_agents.len(),
        crate::kernel::agents::EXCLUDE_MAX,
    )?;
    each("exclude_agents", &t.exclude_agents, |a| {
        agent("exclude_agents", a)
    })
}

/// `[agents.ID]`: capabilities in bounds, slots 1 to 100,000.
fn check_agents(c: &Config) -> Checked {
    for (id, p) in &c.agents {
        let key = format!("agents.{id}");
        if let Some(cs) = &p.capabilities {
            caps(&format!("{key}.capabilities"), cs)?;
        }
        if let Some(s) = p.slots {
            int(
                &format!("{key}.slots"),
                u64::from(s),
                u64::from(SLOTS_MIN),
                u64::from(SLOTS_MAX),
            )?;
        }
    }
    Ok(())
}

impl Limited for QuotaFile {
    fn check_limits(&self) -> Checked {
        check_quota(self)
    }
}

/// `loopx.toml`: goal texts, quota policy and lease default.
pub fn check_config(c: &Config) -> Checked {
    let g = &c.goal;
    required_text("goal.id", &g.id, TITLE_MAX)?;
    required_text("goal.objective", &g.objective, TEXT_MAX)?;
    count(
        "goal.success_criteria",
        g.success_criteria.len(),
        CRITERIA_MAX,
    )?;
    each("success_criteria", &g.success_criteria, |s| {
        text("goal.success_criteria", s, TITLE_MAX)
    })
    .map_err(|v| v.under(vec![Key::Name("goal".into())]))?;
    opt_text("goal.reason", &g.reason, TEXT_MAX)?;
    let q = &c.quota;
    int(
        "quota.slots",
        u64::from(q.slots),
        u64::from(SLOTS_MIN),
        u64::from(SLOTS_MAX),
    )?;
    duration("quota.window", q.window, WINDOW_MIN, WINDOW_MAX)?;
    duration("quota.min_interval", q.min_interval, Dur(0), q.window)?;
    if let Some(t) = q.tokens {
        int("quota.tokens", t, 1, TOKENS_MAX)?;
    }
    if let Some(c) = q.cost_usd {
        cost_usd("quota.cost_usd", c)?;
        if c < COST_BUDGET_MIN {
            return Err(Violation::new(
                "quota.cost_usd",
                "`quota.cost_usd` must be at least 0.000001 (remove the key for no cost budget)",
            ));
        }
    }
    crate::kernel::alert::check_hooks(&c.hooks)?;
    if let Some(d) = &c.done.check {
        check_command("done.check", d)?;
    }
    if let Some(n) = c.breaker.turns {
        let max = u64::from(crate::kernel::model::TURNS_MAX);
        int("breaker.turns", u64::from(n), 0, max)?;
    }
    check_agents(c)?;
    duration("lease.ttl", c.lease.ttl, TTL_MIN, TTL_MAX)
}

fn check_lease(l: &Lease) -> Checked {
    agent("holder", &l.holder)?;
    opt_text("turn", &l.turn, NAME_MAX)?;
    if let Some(f) = &l.handoff_from {
        agent("handoff_from", f)?;
    }
    paths("paths", &l.paths)?;
    opt_text("worktree", &l.worktree, PATH_MAX)?;
    if let Some(b) = &l.base {
        opt_text("base.head", &b.head, HEX_MAX)?;
        opt_text("base.tree", &b.tree, HEX_MAX)?;
    }
    int("fence", l.fence, 0, FENCE_MAX)
}

/// A reservation as a file holds it: the globs `--paths` takes, already normalised.
fn paths(key: &str, v: &[String]) -> Checked {
    match crate::kernel::reserve::normalise(key, v) {
        Ok(n) if n == v => Ok(()),
        Ok(n) => Err(Violation::new(
            key,
            format!(
                "`{key}` is not normalised (a repeat, `.`, a doubled or trailing `/`): write {}",
                serde_json::to_string(&n).unwrap_or_default()
            ),
        )),
        Err(e) => Err(Violation::new(key, e.message)),
    }
}

/// A todo file (`todos/` or `archive/`).
pub fn check_todo(t: &Todo) -> Checked {
    required_text("title", &t.title, TITLE_MAX)?;
    refs("depends_on", &t.depends_on, DEPENDS_MAX)?;
    if let Some(e) = t.every {
        duration("every", e, EVERY_MIN, EVERY_MAX)?;
    }
    agent("created_by", &t.created_by)?;
    opt_text("reason", &t.reason, TEXT_MAX)?;
    opt_text("status_by", &t.status_by, REF_MAX)?;
    int("fence", t.fence, 0, FENCE_MAX)?;
    if let Some(l) = &t.lease {
        check_lease(l).map_err(|v| v.under(vec![Key::Name("lease".into())]))?;
    }
    if let Some(c) = &t.check {
        check_check(c).map_err(|v| v.under(vec![Key::Name("check".into())]))?;
    }
    check_routing(t)?;
    if let Some(s) = &t.stall {
        let max = u64::from(crate::kernel::model::TURNS_MAX);
        int("stall.turns", u64::from(s.turns), 0, max)?;
        int("stall.failures", u64::from(s.failures), 0, max)?;
        opt_text("stall.parked", &s.parked, REF_MAX)?;
    }
    paths("paths", &t.paths)?;
    opt_text("body", &t.body, BODY_MAX)?;
    count("links", t.links.len(), LINKS_MAX)?;
    each("links", &t.links, |l| link("links", l))?;
    Ok(())
}

/// A watcher's `[check]`: a command of 1 to 2,048 bytes without control characters, an agent, a
/// hex hash.
pub fn check_check(c: &Check) -> Checked {
    check_command("command", &c.command)?;
    agent("proposed_by", &c.proposed_by)?;
    if let Some(h) = &c.last_hash
        && (h.len() > HEX_MAX || !h.bytes().all(|b| b.is_ascii_hexdigit()))
    {
        return Err(Violation::new(
            "last_hash",
            format!("`last_hash` must be hex of at most {HEX_MAX} characters"),
        ));
    }
    Ok(())
}

/// A gate file.
pub fn check_gate(g: &Gate) -> Checked {
    required_text("question", &g.question, TEXT_MAX)?;
    count("options", g.options.len(), OPTIONS_MAX)?;
    each("options", &g.options, |o| {
        required_text("options", o, NAME_MAX)
    })?;
    refs("blocks", &g.blocks, BLOCKS_MAX)?;
    agent("opened_by", &g.opened_by)?;
    opt_text("decided_by", &g.decided_by, REF_MAX)?;
    opt_text("option", &g.option, NAME_MAX)?;
    opt_text("reason", &g.reason, TEXT_MAX)?;
    opt_text("journal_head", &g.journal_head, HEX_MAX)?;
    opt_text("signature", &g.signature, HEX_MAX)?;
    if let Some(a) = &g.action {
        crate::kernel::gate_action::check(a)?;
    }
    g.used
        .as_ref()
        .map_or(Ok(()), crate::kernel::gate_action::check_use)
}

/// One spend of quota.
pub fn check_spend(s: &Spend) -> Checked {
    agent("agent", &s.agent)?;
    int(
        "slots",
        u64::from(s.slots),
        u64::from(SLOTS_MIN),
        u64::from(SLOTS_MAX),
    )?;
    opt_text("turn", &s.turn, NAME_MAX)?;
    if let Some(t) = s.tokens {
        int("tokens", t, 0, TOKENS_MAX)?;
    }
    if let Some(c) = s.cost_usd {
        cost_usd("cost_usd", c)?;
    }
    Ok(())
}

/// `quota.toml`: how many spends, and each one.
pub fn check_quota(q: &QuotaFile) -> Checked {
    count("spend", q.spends.len(), SPENDS_MAX)?;
    for (i, s) in q.spends.iter().enumerate() {
        check_spend(s).map_err(|v| v.under(vec![Key::Name("spend".into()), Key::Index(i)]))?;
    }
    Ok(())
}

/// One evidence entry about to be written.
pub fn check_evidence(e: &Evidence) -> Checked {
    text("evidence", &e.summary, TEXT_MAX)?;
    opt_text("metric name", &e.name, NAME_MAX)?;
    opt_text("artifact path", &e.path, PATH_MAX)?;
    opt_text("command", &e.command, TEXT_MAX)?;
    opt_text("output", &e.output, TEXT_MAX)?;
    opt_text("turn", &e.turn, NAME_MAX)?;
    count("argv", e.argv.len(), ARGV_MAX)?;
    count(
        "outside",
        e.outside.len(),
        crate::kernel::reserve::OUTSIDE_MAX,
    )?;
    each("outside", &e.outside, |a| text("outside", a, PATH_MAX))?;
    each("argv", &e.argv, |a| text("argv", a, ARG_MAX))
}

#[cfg(test)]
mod tests;
