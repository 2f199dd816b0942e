//! `quota`: should-run, spend-slot, show and set.

use clap::Subcommand;
use serde_json::json;

use super::{Ctx, Out, to_json};
use crate::kernel::quota::{self, Usage};
use crate::kernel::should_run::{self, Decision};
use crate::kernel::{Config, Dur, QuotaFile, Result, ops};
use crate::store::{Store, StoreExt};
use crate::text::escape as esc;

/// `quota ...`.
#[derive(Debug, Subcommand)]
pub enum QuotaCmd {
    /// Whether this agent should run a turn now (exit 0 run, 3 otherwise). Never writes.
    ShouldRun,
    /// Record a spent turn.
    SpendSlot {
        /// Slots spent.
        #[arg(long, default_value_t = 1)]
        slots: u32,
        /// The turn's id; the same id twice in the window is recorded once.
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
    Show,
    /// Owner: change the policy.
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
    },
}

fn usage_text(u: &Usage) -> String {
    let mut s = format!("{} of {} slots used in {}", u.used, u.limit, u.window);
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
        "min_interval": cfg.quota.min_interval,
    });
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
    let store = ctx.store()?;
    let now = ctx.now;
    match c {
        QuotaCmd::ShouldRun => {
            let snap = store.load()?;
            Ok(answer_out(&should_run::decide(&snap, &ctx.agent, now)))
        }
        QuotaCmd::SpendSlot {
            slots,
            turn,
            tokens,
            cost_usd,
        } => {
            let (recorded, cfg, q) = store.mutate(|snap| {
                let (change, recorded) =
                    ops::spend(snap, &ctx.agent, now, slots, turn, tokens, cost_usd)?;
                let q = change
                    .writes
                    .iter()
                    .find_map(|w| match w {
                        ops::Write::Quota(q) => Some(q.clone()),
                        _ => None,
                    })
                    .unwrap_or_else(|| snap.quota.clone());
                Ok((change, (recorded, snap.config.clone(), q)))
            })?;
            let j = quota_json(&cfg, &q, now, false);
            let u = quota::usage(&q, &cfg.quota, now);
            let text = if recorded {
                usage_text(&u)
            } else {
                format!("that turn was recorded already; {}", usage_text(&u))
            };
            Ok(Out::new("quota", j, text).with("recorded", json!(recorded)))
        }
        QuotaCmd::Show => {
            let snap = store.load()?;
            let u = quota::usage(&snap.quota, &snap.config.quota, now);
            let mut text = usage_text(&u);
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
        QuotaCmd::Set {
            slots,
            window,
            min_interval,
        } => {
            if slots.is_none() && window.is_none() && min_interval.is_none() {
                return Err(crate::kernel::Error::usage(
                    "give --slots, --window or --min-interval",
                ));
            }
            let owner = crate::kernel::ops::OWNER;
            let (cfg, q) = store.mutate(|snap| {
                let (c, cfg) = ops::set_quota(snap, owner, now, slots, window, min_interval)?;
                Ok((c, (cfg, snap.quota.clone())))
            })?;
            let u = quota::usage(&q, &cfg.quota, now);
            Ok(Out::new(
                "quota",
                quota_json(&cfg, &q, now, false),
                usage_text(&u),
            ))
        }
    }
}
