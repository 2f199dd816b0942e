//! The header's headline: a sparkline of the goal's most recorded metric and its best so far.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::Modifier;
use ratatui::text::Span;
use ratatui::widgets::{Paragraph, Sparkline};

use super::{Scene, trunc};
use crate::board::metrics::{self, Best, Metrics};
use crate::board::theme::Role;
use crate::text::escape as esc;

/// A value for people: at most four decimals, no trailing zeros.
pub fn num(v: f64) -> String {
    let s = format!("{v:.4}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s == "-0" { "0".into() } else { s.into() }
}

/// The header's headline: the goal's most recorded metric, a sparkline of its last values and
/// its best so far; `None` when the goal has no metric evidence.
pub struct Headline {
    /// The metric's name, escaped and cut.
    pub name: String,
    /// The last values, scaled 1 to 8.
    pub bars: Vec<u64>,
    /// `best 0.9733`.
    pub best: String,
}

impl Headline {
    /// The headline of these metrics with at most `n` bars.
    pub fn of(m: &Metrics, n: usize) -> Option<Headline> {
        let name = m.headline()?;
        let series = m.series(&name, None);
        let best = metrics::best(&series, Best::of(&name)).map(|i| series[i].value)?;
        let tail = &series[series.len().saturating_sub(n)..];
        let lo = tail.iter().map(|p| p.value).fold(f64::INFINITY, f64::min);
        let hi = tail
            .iter()
            .map(|p| p.value)
            .fold(f64::NEG_INFINITY, f64::max);
        let bars = tail
            .iter()
            .map(|p| {
                if hi > lo {
                    1 + ((p.value - lo) / (hi - lo) * 7.0).round() as u64
                } else {
                    4
                }
            })
            .collect();
        Some(Headline {
            name: trunc(&esc(&name), 16),
            bars,
            best: format!("best {}", num(best)),
        })
    }

    /// The cells it takes: ` name ▂▄▆█ best 0.97 `.
    pub fn width(&self) -> u16 {
        (self.name.chars().count() + self.bars.len() + self.best.chars().count() + 4) as u16
    }

    /// Draws it in one row.
    pub fn draw(&self, f: &mut Frame, row: Rect, sc: &Scene) {
        let t = sc.theme;
        let n = self.name.chars().count() as u16 + 2;
        let bars = self.bars.len() as u16;
        let [name, spark, best] = Layout::horizontal([
            Constraint::Length(n),
            Constraint::Length(bars),
            Constraint::Min(0),
        ])
        .areas(row);
        f.render_widget(
            Paragraph::new(Span::styled(format!(" {} ", self.name), t.dim())),
            name,
        );
        f.render_widget(
            Sparkline::default()
                .data(&self.bars)
                .max(8)
                .style(t.fg(Role::Spark)),
            spark,
        );
        f.render_widget(
            Paragraph::new(Span::styled(
                format!(" {}", self.best),
                t.fg(Role::Ok).add_modifier(Modifier::BOLD),
            )),
            best,
        );
    }
}
