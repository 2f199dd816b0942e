//! The status bar (project, live or polling, last reload, owner authority, messages), key hints, banner.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::Modifier;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use super::{clock, trunc};
use crate::board::app::{Live, Mode};
use crate::board::theme::Role;
use crate::board::view::ViewModel;
use crate::text::escape as esc;

/// Draws the status bar.
pub fn status(f: &mut Frame, area: Rect, vm: &ViewModel) {
    let t = vm.theme;
    let base = t.status();
    let live = match vm.live {
        Live::Watching => "● live".to_string(),
        Live::Polling(why) => format!("◌ polling ({})", esc(why)),
    };
    let reload = vm
        .last_reload
        .map(|r| format!("loaded {}", clock(r)))
        .unwrap_or_else(|| "not loaded".into());
    let owner = esc(vm.owner_note).into_owned();
    let project = esc(vm.project);
    let mut spans = vec![
        Span::styled(format!(" {project} "), base.add_modifier(Modifier::BOLD)),
        Span::styled(format!("│ {live} │ {reload} │ "), base),
    ];
    if vm.readonly {
        spans.push(Span::styled("READ-ONLY", base.add_modifier(Modifier::BOLD)));
    } else {
        spans.push(Span::styled(owner, base));
    }
    if !vm.problems.is_empty() {
        spans.push(Span::styled(
            format!(" │ ⚠ {} file error(s)", vm.problems.len()),
            base.add_modifier(Modifier::BOLD),
        ));
    }
    if let Some(m) = vm.message {
        let style = if m.error {
            base.fg(t.color_of(Role::Error))
                .add_modifier(Modifier::BOLD)
        } else {
            base.fg(t.color_of(Role::Ok))
        };
        let mark = if m.error { "✗" } else { "✓" };
        spans.push(Span::styled(" │ ", base));
        spans.push(Span::styled(format!("{mark} {}", esc(&m.text)), style));
    }
    let used: usize = spans.iter().map(|s| s.content.chars().count()).sum();
    let w = area.width as usize;
    if used > w {
        // Keep the end (the message) readable: cut the project name first.
        let cut = used - w;
        let p = project.chars().count();
        let keep = p.saturating_sub(cut + 1).max(4);
        spans[0] = Span::styled(
            format!(" …{} ", tail(&project, keep)),
            base.add_modifier(Modifier::BOLD),
        );
    } else {
        spans.push(Span::styled(" ".repeat(w - used), base));
    }
    f.render_widget(Paragraph::new(Line::from(spans)).style(base), area);
}

fn tail(s: &str, n: usize) -> String {
    let len = s.chars().count();
    s.chars().skip(len.saturating_sub(n)).collect()
}

/// Draws the key hints (or the filter being typed).
pub fn hints(f: &mut Frame, area: Rect, vm: &ViewModel, narrow: bool) {
    let t = vm.theme;
    let mut spans = Vec::new();
    if *vm.mode == Mode::Filter {
        spans.push(Span::styled(
            " / ",
            t.fg(Role::Key).add_modifier(Modifier::BOLD),
        ));
        spans.push(Span::styled(format!("{}▏", esc(vm.filter)), t.fg(Role::Fg)));
        spans.push(Span::styled("  Enter keep · Esc clear", t.dim()));
    } else {
        if narrow {
            spans.push(Span::styled(" Tab: next pane ", t.dim()));
        }
        for (k, h, enabled) in &vm.hints {
            // A disabled owner action stays listed, crossed out: plain without color too.
            let (key, text) = if *enabled {
                (t.fg(Role::Key).add_modifier(Modifier::BOLD), t.dim())
            } else {
                let off = t.dim().add_modifier(Modifier::CROSSED_OUT);
                (off, off)
            };
            spans.push(Span::styled(format!(" {k}"), key));
            spans.push(Span::styled(format!(" {h} "), text));
        }
    }
    f.render_widget(Paragraph::new(Line::from(spans)), area);
}

/// Draws the banner: failed loads, quarantined files, where files disagree with the owner's seal.
pub fn banner(f: &mut Frame, area: Rect, vm: &ViewModel) {
    let t = vm.theme;
    let w = area.width as usize;
    let lines: Vec<Line> = crate::board::alerts::fit(vm.banner.clone(), area.height as usize)
        .iter()
        .map(|l| {
            let text = format!(" ⚠ {}", esc(l));
            Line::from(Span::styled(format!("{:<w$}", trunc(&text, w)), t.banner()))
        })
        .collect();
    f.render_widget(Paragraph::new(lines), area);
}
