//! `quota`: should-run, spend-slot, show and set (slots and the token and cost budgets).

use clap::Subcommand;
use serde_json::json;

use super::{Ctx, Out, to_json};
use crate::kernel::quota::{self, Usage};
use crate::kernel::should_run::{self, Decision};
use crate::kernel::{Config, Dur, QuotaFile, Result, Ts, limits, ops};
use crate::store::{Store, StoreExt};
use crate::text::escape as esc;

/// `quota ...`.
#[derive(Debug, Subcommand)]
pub enum QuotaCmd {
    /// Whether this agent should run a turn now (exit 0 run, 3 otherwise). Never writes.
    #[command(after_help = "Example:\n  loopx quota should-run --json")]
    ShouldRun,
    /// Record a spent turn (exit 3, still recorded, when it goes past a limit).
    #[command(
        after_help = "Example:\n  loopx quota spend-slot --turn turn-0042 --tokens 120000 --cost-usd 1.50"
    )]
    SpendSlot {
        /// Slots spent.
        #[arg(long, default_value_t = 1)]
        slots: u32,
        /// The turn's id; this agent's same id twice in the window is recorded once.
        #[arg(long, value_name = "ID")]
        turn: Option<String>,
        /// Tokens used.
        #[arg(long)]
        tokens: Option<u64>,
        /// Cost in US dollars.
        #[arg(long, value_name = "X")]
        cost_usd: Option<f64>,
    },
    /// The policy and the spend in the window.
    #[command(after_help = "Example:\n  loopx quota show")]
    Show,
    /// Owner: change the policy.
    #[command(
        after_help = "Example:\n  loopx quota set --slots 50 --window 24h --min-interval 10m --cost-usd 25 --breaker 3"
    )]
    Set {
        /// Slots per window.
        #[arg(long)]
        slots: Option<u32>,
        /// The sliding window (like 24h).
        #[arg(long, value_name = "DUR")]
        window: Option<Dur>,
        /// The least time between two spends (0s for none).
        #[arg(long, value_name = "DUR")]
        min_interval: Option<Dur>,
        /// Tokens per window, or `none` for no token budget.
        #[arg(long, value_name = "N|none", value_parser = parse_tokens)]
        tokens: Option<Budget<u64>>,
        /// US dollars per window, or `none` for no cost budget.
        #[arg(long, value_name = "X|none", value_parser = parse_cost)]
        cost_usd: Option<Budget<f64>>,
        /// Turns without progress in a row that park a todo behind a gate (0: never; default 3).
        #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(0..=1000))]
        breaker: Option<u32>,
    },
}

/// A budget as `quota set` takes it: a value, or `none` to remove it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Budget<T>(pub Option<T>);

fn parse_tokens(s: &str) -> std::result::Result<Budget<u64>, String> {
    if s.eq_ignore_ascii_case("none") {
        return Ok(Budget(None));
    }
    let max = crate::kernel::limits::TOKENS_MAX;
    match s.parse::<u64>() {
        Ok(n) if (1..=max).contains(&n) => Ok(Budget(Some(n))),
        _ => Err(format!(
            "give 1 to {max} tokens, or `none` for no token budget"
        )),
    }
}

fn parse_cost(s: &str) -> std::result::Result<Budget<f64>, String> {
    if s.eq_ignore_ascii_case("none") {
        return Ok(Budget(None));
    }
    let (min, max) = (limits::COST_BUDGET_MIN, limits::COST_USD_MAX);
    match s.parse::<f64>() {
        Ok(x) if x.is_finite() && (min..=max).contains(&x) => Ok(Budget(Some(x))),
        _ => Err(format!(
            "give a number of US dollars from 0.000001 to {max}, or `none` for no cost budget"
        )),
    }
}

fn usage_text(u: &Usage) -> String {
    let mut s = format!("{} of {} slots used in {}", u.used, u.limit, u.window);
    if let Some(b) = u.tokens {
        s.push_str(&format!("; {} of {} tokens", b.used, b.limit));
    }
    if let Some(b) = u.cost_usd {
        s.push_str(&format!("; ${} of ${}", b.used, b.limit));
    }
    if let Some(r) = u.resets_at {
        s.push_str(&format!("; the oldest frees at {r}"));
    }
    s
}

fn quota_json(
    cfg: &Config,
    q: &QuotaFile,
    now: crate::kernel::Ts,
    with_spends: bool,
) -> serde_json::Value {
    let u = quota::usage(q, &cfg.quota, now);
    let mut j = json!({
        "used": u.used, "limit": u.limit, "window": u.window, "resets_at": u.resets_at,
        "min_interval": cfg.quota.min_interval, "breaker_turns": cfg.breaker.turns(),
    });
    if let Some(b) = u.tokens {
        j["tokens"] = to_json(&b);
    }
    if let Some(b) = u.cost_usd {
        j["cost_usd"] = to_json(&b);
    }
    if with_spends {
        j["spends"] = to_json(&quota::in_window(q, &cfg.quota, now).collect::<Vec<_>>());
    }
    j
}

/// should-run's answer as text and JSON; exit 0 for run, 3 otherwise.
pub(super) fn answer_out(a: &should_run::Answer) -> Out {
    let mut text = match (&a.decision, &a.todo) {
        (Decision::Run, Some(t)) => {
            format!("run: {} {} ({})", esc(&t.id), esc(&t.title), a.reason)
        }
        (d, _) => format!("{}: {}", to_json(d).as_str().unwrap_or("?"), a.reason),
    };
    if let Some(s) = a.retry_after_s {
        text.push_str(&format!("; retry in {s}s"));
    }
    for q in &a.questions {
        text.push_str(&format!(
            "\n  asks the owner: {} {}",
            esc(&q.gate),
            esc(&q.question)
        ));
    }
    if a.questions_more > 0 {
        text.push_str(&format!("\n  and {} more", a.questions_more));
    }
    for p in &a.problems {
        text.push_str(&format!("\n  quarantined: {p}"));
    }
    for n in &a.owner_notes {
        text.push_str(&format!("\n  note: {n}"));
    }
    let exit = if a.decision == Decision::Run { 0 } else { 3 };
    let mut out = Out {
        json: Default::default(),
        text,
        exit,
    };
    if let serde_json::Value::Object(m) = to_json(a) {
        out.json = m;
    }
    out
}

/// Runs `quota ...`.
pub fn run(ctx: &Ctx, c: QuotaCmd) -> Result<Out> {
    // Setting the limits is the owner's act: the owner's key, and on a database the owner's
    // login (the database checks it).
    let opened = ctx.open()?;
    let store: &dyn Store = &*opened;
    let now = ctx.now;
    match c {
        QuotaCmd::ShouldRun => {
            let snap = store.load()?;
            let out = answer_out(&should_run::decide(&snap, &ctx.agent, now));
            // The process ends after the answer: freeing every todo first is work for nothing
            // (about a tenth of the instructions at 1,000 open todos).
            std::mem::forget(snap);
            Ok(out)
        }
        QuotaCmd::SpendSlot {
            slots,
            turn,
            tokens,
            cost_usd,
        } => spend_slot(ctx, store, slots, turn, tokens, cost_usd),
        QuotaCmd::Show => show(store, now),
        QuotaCmd::Set {
            slots,
            window,
            min_interval,
            tokens,
            cost_usd,
            breaker,
        } => {
            let set = ops::QuotaChange {
                slots,
                window,
                min_interval,
                tokens: tokens.map(|b| b.0),
                cost_usd: cost_usd.map(|b| b.0),
                breaker,
            };
            set_policy(store, now, set)
        }
    }
}

/// `quota spend-slot`: records the turn's spend; exit 3 when it goes past a limit.
fn spend_slot(
    ctx: &Ctx,
    store: &dyn Store,
    slots: u32,
    turn: Option<String>,
    tokens: Option<u64>,
    cost_usd: Option<f64>,
) -> Result<Out> {
    let now = ctx.now;
    let (recorded, cfg, q, over) = store.mutate(|snap| {
        let (change, recorded) =
            ops::spend(snap, &ctx.agent, now, slots, turn.clone(), tokens, cost_usd)?;
        let over = ops::spend_over_limit(&change);
        let q = change
            .writes
            .iter()
            .find_map(|w| match w {
                ops::Write::Quota(q) => Some(q.clone()),
                _ => None,
            })
            .unwrap_or_else(|| snap.quota.clone());
        Ok((change, (recorded, snap.config.clone(), q, over)))
    })?;
    let j = quota_json(&cfg, &q, now, false);
    let u = quota::usage(&q, &cfg.quota, now);
    let mut text = if recorded {
        usage_text(&u)
    } else {
        format!("that turn was recorded already; {}", usage_text(&u))
    };
    let mut out = Out::new("quota", j, "").with("recorded", json!(recorded));
    if !over.is_empty() {
        // Recorded (the turn happened), but past a limit: not now for the next turn.
        text.push_str(&format!(
            "\nover the limit: {} (recorded; the next turn waits)",
            over.join(", ")
        ));
        out = out.with("over_limit", json!(over));
        out.exit = 3;
    }
    out.text = text;
    Ok(out)
}

/// `quota show`: the policy and the spend in the window.
fn show(store: &dyn Store, now: Ts) -> Result<Out> {
    let snap = store.load()?;
    let u = quota::usage(&snap.quota, &snap.config.quota, now);
    let mut text = usage_text(&u);
    let q = &snap.config.quota;
    if q.tokens.is_none() && q.cost_usd.is_none() {
        text.push_str("; no token or cost budget");
    }
    if !snap.config.quota.min_interval.is_zero() {
        text.push_str(&format!(
            "; at least {} between turns",
            snap.config.quota.min_interval
        ));
    }
    Ok(Out::new(
        "quota",
        quota_json(&snap.config, &snap.quota, now, true),
        text,
    ))
}

/// `quota set`: the owner changes the policy.
fn set_policy(store: &dyn Store, now: Ts, set: ops::QuotaChange) -> Result<Out> {
    if set.is_empty() {
        return Err(crate::kernel::Error::usage(
            "give --slots, --window, --min-interval, --tokens, --cost-usd or --breaker",
        ));
    }
    let owner = crate::kernel::ops::OWNER;
    let (cfg, q) = store.mutate(|snap| {
        let (c, cfg) = ops::set_quota(snap, owner, now, set)?;
        Ok((c, (cfg, snap.quota.clone())))
    })?;
    let u = quota::usage(&q, &cfg.quota, now);
    Ok(Out::new(
        "quota",
        quota_json(&cfg, &q, now, false),
        usage_text(&u),
    ))
}
