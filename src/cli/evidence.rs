//! `evidence list`: evidence across todos, filtered, newest first, and the best run of a metric.

use clap::{Args, Subcommand, ValueEnum};
use serde_json::{Value, json};

use super::{Ctx, Out, to_json};
use crate::kernel::limits;
use crate::kernel::{Dur, Error, Evidence, EvidenceKind, Result, Ts};
use crate::text::escape as esc;

/// `evidence ...`.
#[derive(Debug, Subcommand)]
pub enum EvidenceCmd {
    /// Evidence across todos, newest first (or the best value of a metric).
    #[command(after_help = "Example:\n  loopx evidence list --metric loss --best min --json")]
    List(ListArgs),
}

/// Which end of a metric is best.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Best {
    /// The lowest value.
    Min,
    /// The highest value.
    Max,
}

/// `evidence list` arguments.
#[derive(Debug, Args)]
pub struct ListArgs {
    /// Only this todo's evidence (an id or a unique prefix).
    #[arg(long, value_name = "ID", add = super::complete::todo_id())]
    todo: Option<String>,
    /// Only entries this agent wrote.
    #[arg(long = "by", value_name = "AGENT")]
    by: Option<String>,
    /// Only this kind: note, command, artifact, metric, git or auto.
    #[arg(long, value_name = "K")]
    kind: Option<EvidenceKind>,
    /// Only metric entries with this name.
    #[arg(long, value_name = "NAME")]
    metric: Option<String>,
    /// The entry with the lowest or highest numeric value of --metric (ties: the earliest).
    #[arg(long, value_enum, requires = "metric")]
    best: Option<Best>,
    /// Only entries written in this last span of time (like 2h, 7d).
    #[arg(long, value_name = "DUR")]
    since: Option<Dur>,
    /// The most entries shown.
    #[arg(long, value_name = "N", default_value_t = 100)]
    limit: usize,
}

/// Runs `evidence ...`.
pub fn run(ctx: &Ctx, c: EvidenceCmd) -> Result<Out> {
    match c {
        EvidenceCmd::List(a) => list(ctx, a),
    }
}

fn list(ctx: &Ctx, a: ListArgs) -> Result<Out> {
    if a.limit == 0 || a.limit > limits::EVIDENCE_LIST_MAX {
        return Err(Error::usage(format!(
            "--limit must be 1 to {}, not {}",
            limits::EVIDENCE_LIST_MAX,
            a.limit
        )));
    }
    // `--agent` is the global flag naming who runs loopx; the filter is `--by`.
    let store = ctx.open()?;
    let only = match &a.todo {
        Some(t) => {
            let snap = store.load()?;
            Some(store.resolve_todo(&snap, t)?)
        }
        None => None,
    };
    let since = a.since.map(|d| Ts(ctx.now.0.saturating_sub(d.0)));
    let keep = |_: &str, e: &Evidence| {
        a.by.as_deref().is_none_or(|b| e.agent == b)
            && a.kind.is_none_or(|k| e.kind == k)
            && a.metric
                .as_deref()
                .is_none_or(|m| e.kind == EvidenceKind::Metric && e.name.as_deref() == Some(m))
            && since.is_none_or(|s| e.at >= s)
    };
    let mut all = store.evidence_all(only.as_deref(), &keep)?;
    if let Some(b) = a.best {
        let best = pick_best(&all, b).map(|i| all.swap_remove(i));
        let entries: Vec<Value> = best.iter().map(entry_json).collect();
        let text = best.as_ref().map_or_else(
            || "no numeric value of that metric".to_string(),
            |(id, e)| format!("best: {}", line(id, e)),
        );
        return Ok(Out::new("entries", json!(entries), text)
            .with("best", entries.first().cloned().unwrap_or(Value::Null)));
    }
    // Newest first; a stable sort keeps file order among entries written at the same time.
    all.sort_by_key(|x| std::cmp::Reverse(x.1.at));
    let total = all.len();
    all.truncate(a.limit);
    let text = if all.is_empty() {
        "no evidence".to_string()
    } else {
        all.iter()
            .map(|(id, e)| line(id, e))
            .collect::<Vec<_>>()
            .join("\n")
    };
    let entries: Vec<Value> = all.iter().map(entry_json).collect();
    Ok(Out::new("entries", json!(entries), text).with("total", json!(total)))
}

/// The index of the entry with the min or max numeric value; ties go to the earliest.
pub fn pick_best(all: &[(String, Evidence)], b: Best) -> Option<usize> {
    let mut best: Option<(usize, f64, Ts)> = None;
    for (i, (_, e)) in all.iter().enumerate() {
        let Some(v) = e
            .value
            .as_ref()
            .and_then(Value::as_f64)
            .filter(|v| v.is_finite())
        else {
            continue;
        };
        let better = match best {
            None => true,
            Some((_, bv, bat)) => {
                let strictly = match b {
                    Best::Min => v < bv,
                    Best::Max => v > bv,
                };
                strictly || (v == bv && e.at < bat)
            }
        };
        if better {
            best = Some((i, v, e.at));
        }
    }
    best.map(|(i, _, _)| i)
}

fn entry_json((id, e): &(String, Evidence)) -> Value {
    let mut j = to_json(e);
    j["todo"] = json!(id);
    j
}

fn line(id: &str, e: &Evidence) -> String {
    let kind = to_json(&e.kind);
    format!(
        "{} {} {} {}: {}",
        e.at,
        esc(id),
        esc(&e.agent),
        kind.as_str().unwrap_or("note"),
        esc(&e.summary)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn best_is_the_extreme_and_the_earliest_of_its_ties(
            runs in proptest::collection::vec((0i64..20, -5i32..5), 1..30),
        ) {
            let all: Vec<_> = runs.iter().map(|(at, v)| metric(*at, f64::from(*v))).collect();
            for how in [Best::Min, Best::Max] {
                let i = pick_best(&all, how).unwrap();
                let values = runs.iter().map(|(_, v)| *v);
                let want = if how == Best::Min { values.min() } else { values.max() }.unwrap();
                prop_assert_eq!(runs[i].1, want);
                let earliest = runs.iter().filter(|(_, v)| *v == want).map(|(at, _)| *at).min();
                prop_assert_eq!(Some(runs[i].0), earliest);
            }
        }
    }

    fn metric(at: i64, v: f64) -> (String, Evidence) {
        let mut e = Evidence::new(Ts(at), "a", None, EvidenceKind::Metric, format!("m={v}"));
        e.name = Some("m".into());
        e.value = serde_json::Number::from_f64(v).map(Value::Number);
        ("t-aaaaaa".into(), e)
    }

    #[test]
    fn best_picks_the_extreme_and_the_earliest_of_ties() {
        let all = vec![
            metric(3, 2.0),
            metric(1, 5.0),
            metric(2, 5.0),
            metric(4, 0.5),
        ];
        assert_eq!(pick_best(&all, Best::Max), Some(1));
        assert_eq!(pick_best(&all, Best::Min), Some(3));
        let ties = vec![metric(9, 1.0), metric(2, 1.0)];
        assert_eq!(pick_best(&ties, Best::Min), Some(1));
        let mut text = metric(1, 1.0);
        text.1.value = Some(Value::String("fast".into()));
        assert_eq!(pick_best(&[text], Best::Max), None);
    }
}
