//! Metric evidence for the board's chart and headline: numeric metric entries read through the
//! store, the newest kept, and the best of a series. No I/O here but [`read`].

use std::collections::BTreeMap;

use crate::kernel::{Evidence, EvidenceKind, Problem, Ts};
use crate::store::follow::Followed;

/// The most metric points the board keeps across the goal (the newest).
pub const GOAL_POINTS: usize = 2000;

/// One numeric metric entry.
#[derive(Debug, Clone, PartialEq)]
pub struct Point {
    /// The todo whose evidence it is.
    pub todo: String,
    /// The metric's name.
    pub name: String,
    /// When it was recorded.
    pub at: Ts,
    /// Its value.
    pub value: f64,
}

/// What a read of metric evidence found: the whole goal's points, or those of some todos.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MetricsDelta {
    /// The points replace every point held (else only those of `todos`).
    pub whole: bool,
    /// The todos read (their points replace the ones held).
    pub todos: Vec<String>,
    /// The points read.
    pub points: Vec<Point>,
    /// Why a read failed.
    pub error: Option<String>,
}

/// The metric points the board holds, oldest first, at most [`GOAL_POINTS`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Metrics {
    /// The points, oldest first.
    pub points: Vec<Point>,
    /// Why the last read failed, if it did.
    pub error: Option<String>,
}

/// Which end of a metric is best.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Best {
    /// The lowest value.
    Min,
    /// The highest value.
    Max,
}

impl Best {
    /// The best end a metric's name suggests: lowest for a loss, an error, a latency or a cost.
    pub fn of(name: &str) -> Best {
        if crate::kernel::lower_is_better(name) {
            Best::Min
        } else {
            Best::Max
        }
    }

    /// The other end.
    pub fn flip(self) -> Best {
        match self {
            Best::Min => Best::Max,
            Best::Max => Best::Min,
        }
    }

    /// `max` or `min`.
    pub fn as_str(self) -> &'static str {
        match self {
            Best::Min => "min",
            Best::Max => "max",
        }
    }
}

impl Metrics {
    /// Takes a read: the whole goal's points, or some todos' in place of theirs.
    pub fn apply(&mut self, d: MetricsDelta) {
        self.error = d.error;
        if d.whole {
            self.points = d.points;
        } else {
            self.points.retain(|p| !d.todos.contains(&p.todo));
            self.points.extend(d.points);
        }
        // Stable: entries recorded at the same time keep their order.
        self.points.sort_by_key(|p| p.at);
        let cut = self.points.len().saturating_sub(GOAL_POINTS);
        self.points.drain(..cut);
    }

    /// The metric names of these points (a todo's, or the goal's when `None`), the most recorded
    /// first (ties by name).
    pub fn names(&self, todo: Option<&str>) -> Vec<(String, usize)> {
        let mut count: BTreeMap<&str, usize> = BTreeMap::new();
        for p in self.of(todo) {
            *count.entry(p.name.as_str()).or_default() += 1;
        }
        let mut v: Vec<(String, usize)> =
            count.into_iter().map(|(n, c)| (n.to_string(), c)).collect();
        v.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        v
    }

    /// The points of one metric (of a todo, or of the goal), oldest first.
    pub fn series<'a>(&'a self, name: &'a str, todo: Option<&'a str>) -> Vec<&'a Point> {
        self.of(todo).filter(|p| p.name == name).collect()
    }

    /// True when this todo has metric points.
    pub fn has(&self, todo: &str) -> bool {
        self.points.iter().any(|p| p.todo == todo)
    }

    /// The goal's headline metric: the most recorded one, if any.
    pub fn headline(&self) -> Option<String> {
        self.names(None).into_iter().next().map(|(n, _)| n)
    }

    fn of<'a>(&'a self, todo: Option<&'a str>) -> impl Iterator<Item = &'a Point> + 'a {
        self.points
            .iter()
            .filter(move |p| todo.is_none_or(|t| p.todo == t))
    }
}

/// The index of the best point of a series; ties go to the earliest (as `evidence list --best`).
pub fn best(series: &[&Point], b: Best) -> Option<usize> {
    let mut out: Option<usize> = None;
    for (i, p) in series.iter().enumerate() {
        let better = out.is_none_or(|j| match b {
            Best::Min => p.value < series[j].value,
            Best::Max => p.value > series[j].value,
        });
        if better {
            out = Some(i);
        }
    }
    out
}

/// A metric entry's point: numeric and finite only.
fn point(todo: &str, e: &Evidence) -> Option<Point> {
    if e.kind != EvidenceKind::Metric {
        return None;
    }
    let value = e.value.as_ref()?.as_f64().filter(|v| v.is_finite())?;
    Some(Point {
        todo: todo.to_string(),
        name: e.name.clone()?,
        at: e.at,
        value,
    })
}

/// Reads the numeric metric entries of the goal (or of these todos) through the store: only
/// those entries are kept, and of them the newest [`GOAL_POINTS`].
pub fn read(store: &dyn Followed, todos: Option<&[String]>) -> MetricsDelta {
    let keep = |id: &str, e: &Evidence| point(id, e).is_some();
    let mut d = MetricsDelta {
        whole: todos.is_none(),
        todos: todos.map(<[String]>::to_vec).unwrap_or_default(),
        ..MetricsDelta::default()
    };
    let only: Vec<Option<&str>> = match todos {
        None => vec![None],
        Some(ids) => ids.iter().map(|i| Some(i.as_str())).collect(),
    };
    for o in only {
        match store.evidence_all(o, &keep) {
            Ok(v) => d.points.extend(v.iter().filter_map(|(id, e)| point(id, e))),
            Err(e) => {
                let p = Problem::of(&e, &store.evidence_name(o.unwrap_or("*")));
                d.error = Some(format!("{}: {}", p.at(), p.message));
            }
        }
        d.points.sort_by_key(|p| p.at);
        let cut = d.points.len().saturating_sub(GOAL_POINTS);
        d.points.drain(..cut);
    }
    d
}
