//! The objective header: the goal's text, status, age, success criteria and counts.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use super::Scene;
use super::headline::Headline;
use super::trunc;
use crate::board::alerts::Broken;
use crate::board::derive::Column;
use crate::board::panes::text::ago;
use crate::board::theme::Role;
use crate::kernel::GoalStatus;
use crate::text::escape as esc;

/// Draws the header.
pub fn draw(f: &mut Frame, area: Rect, sc: &Scene, narrow: bool) {
    let t = sc.theme;
    let w = area.width as usize;
    let Some(snap) = sc.snap else {
        let line = Line::from(vec![
            Span::styled(" loopx ", t.fg(Role::Accent).add_modifier(Modifier::BOLD)),
            Span::styled("no good state loaded yet", t.dim()),
        ]);
        f.render_widget(Paragraph::new(line), area);
        return;
    };
    let g = &snap.config.goal;
    let (status, st) = goal_state(g.status, sc);
    let age = format!(" {} old ", ago(sc.now.since(g.created_at).0));
    let right = status.chars().count() + age.len() + 1;
    let obj_w = w.saturating_sub(8 + right);
    let mut first = vec![
        Span::styled(" loopx ", t.fg(Role::Accent).add_modifier(Modifier::BOLD)),
        Span::raw(" "),
        Span::styled(
            format!("{:<obj_w$}", trunc(&esc(&g.objective), obj_w)),
            t.fg(Role::Fg).add_modifier(Modifier::BOLD),
        ),
        Span::raw(" "),
        Span::styled(status, st),
    ];
    first.push(Span::styled(age, t.dim()));
    let mut lines = vec![Line::from(first)];
    // The goal's headline metric at the success line's end, where there is room for it.
    let head = (!narrow && area.height >= 2 && w >= 60)
        .then(|| Headline::of(sc.metrics, if w >= 100 { 20 } else { 10 }))
        .flatten();
    let head_w = head.as_ref().map_or(0, |h| usize::from(h.width()));
    if !narrow && area.height >= 2 {
        lines.push(success_line(
            &g.success_criteria,
            w.saturating_sub(11 + head_w),
            sc,
        ));
    }
    if !narrow && area.height >= 3 {
        lines.push(counts(sc));
    }
    f.render_widget(Paragraph::new(lines), area);
    if let Some(h) = head {
        let hw = h.width().min(area.width);
        let row = Rect {
            x: area.x + area.width - hw,
            y: area.y + 1,
            width: hw,
            height: 1,
        };
        h.draw(f, row, sc);
    }
}

/// The goal's state as shown, and its style: refused while a file is broken, as agents are
/// (active on paper, but no agent gets work).
fn goal_state(status: GoalStatus, sc: &Scene) -> (&'static str, Style) {
    let t = sc.theme;
    let loud = Modifier::BOLD | Modifier::REVERSED;
    match status {
        _ if sc.broken() == Broken::Refused => ("⚠ REFUSED", t.fg(Role::Error).add_modifier(loud)),
        GoalStatus::Active => ("▶ active", t.fg(Role::Ok)),
        GoalStatus::Paused => ("‖ PAUSED", t.fg(Role::Warn).add_modifier(loud)),
        GoalStatus::Complete => ("✓ complete", t.fg(Role::Done).add_modifier(Modifier::BOLD)),
    }
}

/// The success line: the criteria, each with a box, cut to `w`.
fn success_line(criteria: &[String], w: usize, sc: &Scene) -> Line<'static> {
    let crit = if criteria.is_empty() {
        "no success criteria written".to_string()
    } else {
        criteria
            .iter()
            .map(|c| format!("☐ {}", esc(c)))
            .collect::<Vec<_>>()
            .join("  ")
    };
    Line::from(vec![
        Span::styled(" success: ", sc.theme.dim()),
        Span::styled(trunc(&crit, w), sc.theme.fg(Role::Fg)),
    ])
}

/// The counts line: todos per column, then the pending gates.
fn counts(sc: &Scene) -> Line<'static> {
    let t = sc.theme;
    let mut spans = vec![Span::raw(" ")];
    for c in Column::ALL {
        let n = sc.columns.cols[c.index()].len();
        let role = column_role(c);
        spans.push(Span::styled(
            format!("{} {} {n}", c.symbol(), c.title()),
            t.fg(role),
        ));
        spans.push(Span::styled("  ", t.dim()));
    }
    // The filter applies here as to the columns' counts.
    let pending = sc.pending();
    spans.push(Span::styled(
        format!(
            "? {pending} gate{} pending",
            if pending == 1 { "" } else { "s" }
        ),
        if pending > 0 {
            t.fg(Role::GatePending).add_modifier(Modifier::BOLD)
        } else {
            t.dim()
        },
    ));
    Line::from(spans)
}

/// The color role of a column.
pub fn column_role(c: Column) -> Role {
    match c {
        Column::Ready => Role::Ready,
        Column::Claimed => Role::Claimed,
        Column::Waiting => Role::Waiting,
        Column::Blocked => Role::Blocked,
        Column::Done => Role::Done,
    }
}
