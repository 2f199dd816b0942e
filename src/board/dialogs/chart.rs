//! The metric chart over the board: one metric's points over time (the selected todo's, or the
//! whole goal's), the best one marked and named, the other metrics listed to switch to; its keys
//! switch the metric, flip the best end, and show the todo's or the goal's.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::Modifier;
use ratatui::symbols::Marker;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Axis, Chart, Clear, Dataset, GraphType, Paragraph};

use super::frame::centered;
use super::reply::Reply;
use crate::board::keymap::{Intent, Scope};
use crate::board::metrics::{self, Best, Metrics, Point};
use crate::board::panes::headline::num;
use crate::board::panes::text::{ago, hhmm};
use crate::board::panes::{Overlay, Scene, block, title, trunc};
use crate::board::theme::Role;
use crate::kernel::Ts;
use crate::text::escape as esc;

/// What the metric chart shows.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MetricChart {
    /// The metric shown (`None`: the most recorded).
    pub metric: Option<String>,
    /// The whole goal's points, not the selected todo's.
    pub goal: bool,
    /// Best is the other end from the one the name suggests.
    pub flip: bool,
}

impl MetricChart {
    /// The chart of the selected todo's points when it has any, else the goal's.
    pub fn open(metrics: &Metrics, selected: Option<&str>) -> MetricChart {
        MetricChart {
            goal: selected.is_none_or(|id| !metrics.has(id)),
            ..MetricChart::default()
        }
    }

    /// A key: the next or previous metric, the best end, the todo's or the goal's, or close.
    pub fn on_intent(
        &mut self,
        intent: Intent,
        metrics: &Metrics,
        selected: Option<&str>,
    ) -> Reply {
        match intent {
            Intent::Right | Intent::Left => {
                let names = metrics.names(self.todo(selected));
                let n = names.len();
                if n > 0 {
                    let i = self
                        .metric(&names)
                        .and_then(|m| names.iter().position(|(x, _)| x == m))
                        .unwrap_or(0);
                    let j = if intent == Intent::Right {
                        (i + 1) % n
                    } else {
                        (i + n - 1) % n
                    };
                    self.metric = Some(names[j].0.clone());
                }
            }
            Intent::FlipBest => self.flip = !self.flip,
            Intent::MetricScope if self.goal && selected.is_none() => {
                let why = "no todo selected: the chart shows the whole goal";
                return Reply::Say(why.into(), false);
            }
            Intent::MetricScope => self.goal = !self.goal,
            Intent::Back => return Reply::Close,
            _ => {}
        }
        Reply::Stay
    }

    /// The todo whose points are shown (`None`: the whole goal's).
    pub fn todo<'a>(&self, selected: Option<&'a str>) -> Option<&'a str> {
        if self.goal { None } else { selected }
    }

    /// The metric shown among these names: the one chosen if listed, else the first.
    pub fn metric<'a>(&'a self, names: &'a [(String, usize)]) -> Option<&'a str> {
        let chosen = self
            .metric
            .as_deref()
            .filter(|m| names.iter().any(|(n, _)| n == m));
        chosen.or(names.first().map(|(n, _)| n.as_str()))
    }

    /// Which end of this metric is best.
    pub fn best(&self, name: &str) -> Best {
        let b = Best::of(name);
        if self.flip { b.flip() } else { b }
    }
}

impl Overlay for MetricChart {
    fn scopes(&self) -> Vec<Scope> {
        vec![Scope::Chart, Scope::Always]
    }

    /// Draws the metric chart over the board.
    fn draw(&self, f: &mut Frame, area: Rect, sc: &Scene) {
        let c = self;
        let t = sc.theme;
        let r = centered(
            area,
            area.width.saturating_sub(4).max(20),
            area.height.saturating_sub(4).max(8),
        );
        f.render_widget(Clear, r);
        let todo = c.todo(sc.selected_card().map(|c| c.id.as_str()));
        let whose = todo.map_or("the whole goal".to_string(), |id| esc(id).into_owned());
        let names = sc.metrics.names(todo);
        let Some(name) = c.metric(&names) else {
            let why = match (todo, &sc.metrics.error) {
                        (_, Some(e)) => format!(" cannot read metrics: {}", esc(e)),
                        (Some(id), None) => format!(" {} has no metric evidence: g shows the goal's", esc(id)),
                        (None, None) => {
                                " no metric evidence yet: `loopx todo update ID --metric NAME=VALUE` records one"
                                        .into()
                        }
                };
            let b = block(title("Metrics · Esc closes", t), true, t);
            let w = r.width.saturating_sub(2) as usize;
            let p = Paragraph::new(Span::styled(trunc(&why, w), t.dim()));
            f.render_widget(p.block(b).style(t.base()), r);
            return;
        };
        let series = sc.metrics.series(name, todo);
        let dir = c.best(name);
        let head = format!(
            "Metrics · {} · {whose} · {} point{}",
            esc(name),
            series.len(),
            if series.len() == 1 { "" } else { "s" }
        );
        let b = block(title(head, t), true, t);
        let inner = b.inner(r);
        f.render_widget(b.style(t.base()), r);
        let [pick, best, plot] = Layout::vertical([
            Constraint::Length(1),
            Constraint::Length(1),
            Constraint::Min(3),
        ])
        .areas(inner);
        f.render_widget(Paragraph::new(picker(sc, &names, name)), pick);
        let bi = metrics::best(&series, dir);
        let w = best.width as usize;
        f.render_widget(Paragraph::new(best_line(sc, &series, bi, dir, w)), best);
        draw_plot(f, plot, sc, &series, bi);
    }
}

/// The metric names, the shown one reversed, with their counts.
fn picker<'a>(sc: &Scene, names: &[(String, usize)], shown: &str) -> Line<'a> {
    let t = sc.theme;
    let mut spans = vec![Span::styled(" metric ", t.dim())];
    for (n, count) in names {
        let style = if n == shown {
            t.fg(Role::Accent)
                .add_modifier(Modifier::BOLD | Modifier::REVERSED)
        } else {
            t.fg(Role::Fg)
        };
        spans.push(Span::styled(format!(" {} ", esc(n)), style));
        spans.push(Span::styled(format!("({count}) "), t.dim()));
    }
    Line::from(spans)
}

/// `█ best (max) 0.9733 · t-… · 09:12 UTC, 12m ago · last 0.95`.
fn best_line<'a>(
    sc: &Scene,
    series: &[&Point],
    bi: Option<usize>,
    dir: Best,
    w: usize,
) -> Line<'a> {
    let t = sc.theme;
    let Some(p) = bi.map(|i| series[i]) else {
        return Line::default();
    };
    let mut rest = format!(
        " {} · {} · {} UTC, {} ago",
        num(p.value),
        esc(&p.todo),
        hhmm(p.at),
        ago(sc.now.since(p.at).0)
    );
    if let Some(last) = series.last() {
        rest.push_str(&format!(" · last {}", num(last.value)));
    }
    let head = format!(" █ best ({})", dir.as_str());
    let room = w.saturating_sub(head.chars().count());
    Line::from(vec![
        Span::styled(head, t.fg(Role::Ok).add_modifier(Modifier::BOLD)),
        Span::styled(trunc(&rest, room), t.fg(Role::Fg)),
    ])
}

/// The chart: the points joined over time, the best one a block.
fn draw_plot(f: &mut Frame, area: Rect, sc: &Scene, series: &[&Point], bi: Option<usize>) {
    let t = sc.theme;
    let (Some(first), Some(last)) = (series.first(), series.last()) else {
        return;
    };
    let x = |at: Ts| (at.0 - first.at.0) as f64 / 1000.0;
    let data: Vec<(f64, f64)> = series.iter().map(|p| (x(p.at), p.value)).collect();
    let best: Vec<(f64, f64)> = bi.map(|i| data[i]).into_iter().collect();
    let span = x(last.at);
    let xb = if span > 0.0 {
        [0.0, span]
    } else {
        [-60.0, 60.0]
    };
    let mid = Ts(first.at.0 + (last.at.0 - first.at.0) / 2);
    let long = span > 20.0 * 3600.0;
    let xl = if span > 0.0 {
        vec![when(first.at, long), when(mid, long), when(last.at, long)]
    } else {
        vec![String::new(), when(first.at, false), String::new()]
    };
    let yb = y_bounds(series);
    let d = decimals(yb[1] - yb[0]);
    let yl: Vec<String> = [yb[0], (yb[0] + yb[1]) / 2.0, yb[1]]
        .iter()
        .map(|v| format!("{v:.d$}"))
        .collect();
    let sets = vec![
        Dataset::default()
            .marker(Marker::Braille)
            .graph_type(GraphType::Line)
            .style(t.fg(Role::Accent))
            .data(&data),
        Dataset::default()
            .marker(Marker::Block)
            .graph_type(GraphType::Scatter)
            .style(t.fg(Role::Ok))
            .data(&best),
    ];
    let axis = |b: [f64; 2], l: Vec<String>| Axis::default().bounds(b).labels(l).style(t.dim());
    let chart = Chart::new(sets)
        .x_axis(axis(xb, xl))
        .y_axis(axis(yb, yl))
        .legend_position(None)
        .style(t.base());
    f.render_widget(chart, area);
}

/// The y axis: the values' range with a tenth of it spare on each side.
fn y_bounds(series: &[&Point]) -> [f64; 2] {
    let lo = series.iter().map(|p| p.value).fold(f64::INFINITY, f64::min);
    let hi = series
        .iter()
        .map(|p| p.value)
        .fold(f64::NEG_INFINITY, f64::max);
    let pad = if hi > lo {
        (hi - lo) / 10.0
    } else {
        (hi.abs() / 20.0).max(1e-6)
    };
    [lo - pad, hi + pad]
}

/// Decimals enough to tell labels a range apart: one past the range's first digit.
fn decimals(range: f64) -> usize {
    if range <= 0.0 || !range.is_finite() {
        return 2;
    }
    (1.0 - range.log10().floor()).clamp(0.0, 6.0) as usize
}

/// A time on the x axis: `09:12`, or `12-02 09:12` when the points span more than a day.
fn when(at: Ts, long: bool) -> String {
    let s = at.to_string();
    match (long, s.get(5..10)) {
        (true, Some(day)) => format!("{day} {}", hhmm(at)),
        _ => hhmm(at),
    }
}
