//! The quota pane: slots used of the limit in the window, when the next frees, a sparkline of spend.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Sparkline};

use super::Scene;
use super::text::countdown;
use super::{block, title, trunc};
use crate::board::derive::{QuotaNow, quota_now};
use crate::board::layout::inner;
use crate::board::theme::{Role, Theme};
use crate::kernel::Ts;

/// Draws the quota pane.
pub fn draw(f: &mut Frame, area: Rect, sc: &Scene) {
    let t = sc.theme;
    f.render_widget(block(title("Quota", t), false, t), area);
    let i = inner(area);
    let Some(snap) = sc.snap else {
        return;
    };
    let w = i.width as usize;
    let q = quota_now(snap, sc.now, w.max(1));
    let used_style = used_style(&q, t);
    let mut lines = vec![Line::from(vec![
        Span::styled(format!("{}/{}", q.used, q.limit), used_style),
        Span::styled(
            first_fit(
                &[format!(" in {}", q.window), String::new()],
                w.saturating_sub(format!("{}/{}", q.used, q.limit).chars().count()),
            ),
            t.dim(),
        ),
    ])];
    let next = first_fit(&next_tries(&q, sc.now), w);
    lines.push(Line::from(Span::styled(
        trunc(&next, w),
        if q.throttled {
            t.fg(Role::Error)
        } else {
            t.dim()
        },
    )));
    let text_h = lines.len() as u16;
    f.render_widget(
        Paragraph::new(lines),
        Rect {
            height: text_h.min(i.height),
            ..i
        },
    );
    if i.height > text_h {
        let spark = Rect {
            y: i.y + text_h,
            height: i.height - text_h,
            ..i
        };
        f.render_widget(
            Sparkline::default()
                .data(&q.buckets)
                .style(t.fg(Role::Spark)),
            spark,
        );
    }
}

/// The count's style: reversed when throttled, warning from four fifths of the limit.
fn used_style(q: &QuotaNow, t: &Theme) -> Style {
    if q.throttled {
        t.fg(Role::Error)
            .add_modifier(Modifier::BOLD | Modifier::REVERSED)
    } else if q.used * 5 >= u64::from(q.limit) * 4 {
        t.fg(Role::Warn).add_modifier(Modifier::BOLD)
    } else {
        t.fg(Role::Fg).add_modifier(Modifier::BOLD)
    }
}

/// When the next slot frees, in wordings from the longest to the shortest: whole words at every
/// width, shorter wordings before a cut.
fn next_tries(q: &QuotaNow, now: Ts) -> Vec<String> {
    match q.next_free {
        Some(at) if q.throttled => {
            let (what, short) = match q.spent {
                Some("tokens") => ("TOKENS SPENT", "TOKENS"),
                Some("cost_usd") => ("COST SPENT", "COST"),
                _ => ("FULL", "FULL"),
            };
            let c = countdown(at.since(now).0);
            vec![
                format!("{what}: next in {c}"),
                format!("{short}: next in {c}"),
                format!("{short}: {c}"),
                short.to_string(),
            ]
        }
        Some(at) => {
            let c = countdown(at.since(now).0);
            vec![format!("frees in {c}"), format!("frees {c}"), c]
        }
        None => vec![
            "no spend in the window".into(),
            "no spend yet".into(),
            "none spent".into(),
        ],
    }
}

/// The first of `tries` that fits in `w` columns, else the last cut with `…`.
fn first_fit(tries: &[String], w: usize) -> String {
    tries
        .iter()
        .find(|s| s.chars().count() <= w)
        .cloned()
        .unwrap_or_else(|| trunc(tries.last().map_or("", String::as_str), w))
}
