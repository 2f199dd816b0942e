//! Drawing the overview: a header, the projects (one row each, by what needs the owner), the
//! pending gates of every project, the status line and the keys; a dialog over them while a
//! decision is made. Pure: a frame from the state.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Clear, Paragraph, Wrap};

use super::state::{Focus, Mode, Overview, Row};
use super::summary::{State, Summary};
use crate::board::app::{Following, ago};
use crate::board::panes::{block, gutter, row_style, title, trunc};
use crate::board::theme::{Role, Theme};
use crate::flows::owner::OwnerAct;
use crate::kernel::GoalStatus;
use crate::text::escape as esc;

/// The keys, as the hint line shows them.
const HINTS: &[(&str, &str)] = &[
    ("↑↓", "move"),
    ("Tab", "projects/gates"),
    ("Enter", "open board (Esc back)"),
    ("N", "next gate"),
    ("a", "approve"),
    ("x", "reject"),
    ("^R", "reload"),
    ("q", "quit"),
];

/// Draws one whole frame.
pub fn draw(f: &mut Frame, o: &Overview) {
    let area = f.area();
    let t = &o.theme;
    f.render_widget(Block::new().style(t.base()), area);
    let wanted = o.rows.len() as u16 + 3;
    let [head, projects, gates, status, hints] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Max(wanted.max(4)),
        Constraint::Min(3),
        Constraint::Length(1),
        Constraint::Length(1),
    ])
    .areas(area);
    header(f, head, o);
    projects_pane(f, projects, o);
    gates_pane(f, gates, o);
    status_line(f, status, o);
    hint_line(f, hints, o);
    dialog(f, area, o);
}

fn header(f: &mut Frame, r: Rect, o: &Overview) {
    let t = &o.theme;
    let pending = o.pending();
    let mut spans = vec![
        Span::styled(
            " loopx · all projects",
            t.fg(Role::Title).add_modifier(Modifier::BOLD),
        ),
        Span::styled(format!(" · {} projects", o.rows.len()), t.fg(Role::Fg)),
    ];
    if pending > 0 {
        spans.push(Span::styled(
            format!(
                " · ? {pending} pending gate{}",
                if pending == 1 { "" } else { "s" }
            ),
            t.fg(Role::GatePending).add_modifier(Modifier::BOLD),
        ));
    } else {
        spans.push(Span::styled(" · nothing waits on the owner", t.dim()));
    }
    f.render_widget(Paragraph::new(Line::from(spans)), r);
}

/// The widths of the fixed columns: name, goal, gates, leases, overdue, quota.
fn widths(o: &Overview, w: usize) -> [usize; 6] {
    let longest = o
        .rows
        .iter()
        .map(|r| r.name.chars().count())
        .max()
        .unwrap_or(4);
    let name = longest.clamp(7, if w < 100 { 14 } else { 24 });
    [name, 10, 6, 9, 8, 10]
}

fn cell(text: impl Into<String>, w: usize, style: Style) -> Span<'static> {
    let s = trunc(&text.into(), w);
    Span::styled(format!("{s:<w$} "), style)
}

fn projects_pane(f: &mut Frame, r: Rect, o: &Overview) {
    let t = &o.theme;
    let focused = o.focus == Focus::Projects && o.mode == Mode::Normal;
    let b = block(title("Projects", t), focused, t);
    let inner = b.inner(r);
    f.render_widget(b, r);
    let w = inner.width as usize;
    let c = widths(o, w);
    let heads = ["PROJECT", "GOAL", "GATES", "LEASES", "OVERDUE", "QUOTA"];
    let mut head = vec![Span::raw("  ")];
    for (h, cw) in heads.iter().zip(c) {
        head.push(cell(*h, cw, t.dim()));
    }
    head.push(Span::styled("OBJECTIVE", t.dim()));
    let mut lines = vec![Line::from(head)];
    if o.rows.is_empty() {
        lines.push(Line::styled(
            "  no projects: `loopx projects add PATH` adds one",
            t.dim(),
        ));
    }
    let room = inner.height.saturating_sub(1) as usize;
    let at = o.order.iter().position(|&i| i == o.sel).unwrap_or(0);
    let skip = (at + 1).saturating_sub(room);
    for &i in o.order.iter().skip(skip).take(room) {
        lines.push(project_line(o, &o.rows[i], i == o.sel, focused, &c, w));
    }
    f.render_widget(Paragraph::new(lines), inner);
}

fn goal_cell(t: &Theme, s: &Summary) -> (String, Style) {
    match s.goal {
        GoalStatus::Active => ("▶ active".into(), t.fg(Role::Ok)),
        GoalStatus::Paused => (
            "‖ PAUSED".into(),
            t.fg(Role::Warn).add_modifier(Modifier::BOLD),
        ),
        GoalStatus::Complete => ("✓ complete".into(), t.fg(Role::Done)),
    }
}

fn project_line(
    o: &Overview,
    row: &Row,
    sel: bool,
    focused: bool,
    c: &[usize; 6],
    w: usize,
) -> Line<'static> {
    let t = &o.theme;
    let base = row_style(t, sel, focused, t.fg(Role::Fg));
    let on = |s: Style| if sel && focused { base } else { s };
    let mut spans = vec![Span::styled(format!("{} ", gutter(sel)), base)];
    spans.push(cell(
        esc(&row.name),
        c[0],
        base.add_modifier(Modifier::BOLD),
    ));
    let used: usize = 2 + c.iter().map(|x| x + 1).sum::<usize>();
    let rest = w.saturating_sub(used);
    match &row.state {
        State::Loading => {
            spans.push(Span::styled(
                trunc("… loading", w.saturating_sub(c[0] + 3)),
                on(t.dim()),
            ));
        }
        State::Failed(why) => {
            let text = format!("⚠ {}", esc(why));
            spans.push(Span::styled(
                trunc(&text, w.saturating_sub(c[0] + 3)),
                on(t.fg(Role::Error).add_modifier(Modifier::BOLD)),
            ));
        }
        State::Loaded(s, problem) => {
            let (g, gs) = goal_cell(t, s);
            spans.push(cell(g, c[1], on(gs)));
            spans.extend(counts(t, s, c, &on));
            let tail = match problem {
                Some(p) => Span::styled(
                    trunc(&format!("⚠ {}", esc(p)), rest),
                    on(t.fg(Role::Error).add_modifier(Modifier::BOLD)),
                ),
                None if s.problems > 0 => Span::styled(
                    trunc(
                        &format!("⚠ {} file problems · {}", s.problems, esc(&s.objective)),
                        rest,
                    ),
                    on(t.fg(Role::Error)),
                ),
                None => Span::styled(trunc(&esc(&s.objective), rest), on(t.dim())),
            };
            spans.push(tail);
        }
    }
    let _ = &row.following;
    Line::from(spans)
}

fn counts(
    t: &Theme,
    s: &Summary,
    c: &[usize; 6],
    on: &dyn Fn(Style) -> Style,
) -> Vec<Span<'static>> {
    let gates = if s.gates.is_empty() {
        cell("·", c[2], on(t.dim()))
    } else {
        let st = t.fg(Role::GatePending).add_modifier(Modifier::BOLD);
        cell(format!("? {}", s.gates.len()), c[2], on(st))
    };
    let leases = match (s.leases, s.expired) {
        (0, 0) => cell("·", c[3], on(t.dim())),
        (n, 0) => cell(format!("● {n}"), c[3], on(t.fg(Role::Claimed))),
        (n, e) => cell(format!("● {n} !{e}"), c[3], on(t.fg(Role::Error))),
    };
    let overdue = if s.overdue == 0 {
        cell("·", c[4], on(t.dim()))
    } else {
        let st = t.fg(Role::Warn).add_modifier(Modifier::BOLD);
        cell(format!("◷ {} late", s.overdue), c[4], on(st))
    };
    let quota = if s.throttled {
        let st = t.fg(Role::Error).add_modifier(Modifier::BOLD);
        cell(format!("FULL {}/{}", s.used, s.limit), c[5], on(st))
    } else {
        cell(format!("{}/{}", s.used, s.limit), c[5], on(t.fg(Role::Fg)))
    };
    vec![gates, leases, overdue, quota]
}

fn gates_pane(f: &mut Frame, r: Rect, o: &Overview) {
    let t = &o.theme;
    let focused = o.focus == Focus::Gates && o.mode == Mode::Normal;
    let gates = o.gates();
    let mut b = block(
        title(format!("Pending gates · {}", gates.len()), t),
        focused,
        t,
    );
    let sel = o.gate_index();
    let room = r.height.saturating_sub(2) as usize;
    let skip = sel.map_or(0, |s| (s + 1).saturating_sub(room));
    if skip > 0 {
        b = b.title(Line::styled(format!(" ↑ {skip} "), t.dim()).right_aligned());
    }
    let below = gates.len().saturating_sub(skip + room);
    if below > 0 {
        b = b.title_bottom(Line::styled(format!(" ↓ {below} more "), t.dim()));
    }
    let inner = b.inner(r);
    f.render_widget(b, r);
    let w = inner.width as usize;
    let mut lines = Vec::new();
    if gates.is_empty() {
        lines.push(Line::styled(
            " no pending gates: nothing waits on the owner",
            t.dim(),
        ));
    }
    let name_w = widths(o, w)[0];
    for (k, (row, g)) in gates.iter().enumerate().skip(skip).take(room) {
        let is_sel = sel == Some(k);
        let base = row_style(t, is_sel, focused, t.fg(Role::Fg));
        let opts = if g.options.is_empty() {
            String::new()
        } else {
            format!(" [{}]", esc(&g.options.join("|")))
        };
        let text = format!(
            "{:<name_w$} {:<8} {} {} · {}{} · {}",
            trunc(&esc(&o.rows[*row].name), name_w),
            g.id,
            esc(&g.opened_by),
            ago(o.now.since(g.opened_at).0),
            esc(&g.question),
            opts,
            g.blocks
        );
        let mark = if is_sel {
            base
        } else {
            t.fg(Role::GatePending)
        };
        lines.push(Line::from(vec![
            Span::styled(format!("{}?", gutter(is_sel)), mark),
            Span::styled(format!(" {}", trunc(&text, w.saturating_sub(3))), base),
        ]));
    }
    f.render_widget(Paragraph::new(lines), inner);
}

fn status_line(f: &mut Frame, r: Rect, o: &Overview) {
    let t = &o.theme;
    let w = r.width as usize;
    let base = t.status();
    let text = match &o.message {
        Some(m) => {
            let mark = if m.error { "✗" } else { "✓" };
            let st = if m.error {
                base.fg(t.color_of(Role::Error))
                    .add_modifier(Modifier::BOLD)
            } else {
                base.fg(t.color_of(Role::Ok))
            };
            Span::styled(format!(" {mark} {}", esc(&m.text)), st)
        }
        None => Span::styled(format!(" {}", following_text(o)), base),
    };
    let content = trunc(&text.content, w);
    let line = Line::from(Span::styled(format!("{content:<w$}"), text.style));
    f.render_widget(Paragraph::new(line).style(base), r);
}

/// `● live` when every project is followed by events, else what polls or reconnects.
fn following_text(o: &Overview) -> String {
    let polling = o
        .rows
        .iter()
        .filter(|r| matches!(r.following, Following::Polling(_)))
        .count();
    let lost = o
        .rows
        .iter()
        .filter(|r| matches!(r.following, Following::Reconnecting(_)))
        .count();
    let owner = o.rows.iter().filter(|r| r.owner.verified).count();
    let mut s = match (polling, lost) {
        (0, 0) => "● live".to_string(),
        (p, 0) => format!("◌ {p} polling"),
        (_, l) => format!("◌ {l} reconnecting"),
    };
    s.push_str(&format!(" │ owner ✓ in {owner} of {}", o.rows.len()));
    if o.readonly {
        s.push_str(" │ READ-ONLY");
    }
    s
}

fn hint_line(f: &mut Frame, r: Rect, o: &Overview) {
    let t = &o.theme;
    let w = r.width as usize;
    let mut spans = Vec::new();
    let mut used = 0;
    for (k, h) in HINTS {
        if o.readonly && matches!(*h, "approve" | "reject") {
            continue;
        }
        let len = k.chars().count() + h.chars().count() + 3;
        if used + len > w {
            spans.push(Span::styled("…", t.dim()));
            break;
        }
        used += len;
        spans.push(Span::styled(
            format!(" {k}"),
            t.fg(Role::Key).add_modifier(Modifier::BOLD),
        ));
        spans.push(Span::styled(format!(" {h} "), t.dim()));
    }
    f.render_widget(Paragraph::new(Line::from(spans)), r);
}

fn dialog(f: &mut Frame, area: Rect, o: &Overview) {
    let t = &o.theme;
    let (row, gate, lines_of) = match &o.mode {
        Mode::Normal => return,
        Mode::Confirm { row, gate, action } => (*row, gate, confirm_lines(o, *row, gate, action)),
        Mode::Reason { row, gate, text } => {
            let lines = vec![
                Line::raw(format!(
                    "Reject gate {} of {}: why?",
                    gate.id,
                    esc(&o.rows[*row].name)
                )),
                Line::raw(format!("Question: {}", esc(&gate.question))),
                Line::from(Span::styled(format!("> {}▏", esc(text)), t.fg(Role::Fg))),
                Line::styled("Enter next · Esc cancel", t.fg(Role::Key)),
            ];
            (*row, gate, lines)
        }
    };
    let _ = (row, gate);
    let w = area.width.saturating_sub(4).min(72);
    let h = (lines_of.len() as u16 + 2).min(area.height);
    let r = Rect {
        x: area.x + (area.width - w) / 2,
        y: area.y + area.height.saturating_sub(h) / 2,
        width: w,
        height: h,
    };
    f.render_widget(Clear, r);
    let b = block(title("Confirm", t), true, t).style(t.base());
    let inner = b.inner(r);
    f.render_widget(b, r);
    f.render_widget(Paragraph::new(lines_of).wrap(Wrap { trim: false }), inner);
}

fn confirm_lines(
    o: &Overview,
    row: usize,
    gate: &super::summary::GateBrief,
    action: &OwnerAct,
) -> Vec<Line<'static>> {
    let t = &o.theme;
    let x = &o.rows[row];
    let mut lines = vec![
        Line::raw(format!("{} ({})", action.describe(), esc(&x.name))),
        Line::raw(format!(
            "Question: {} (asked by {}, {} ago)",
            esc(&gate.question),
            esc(&gate.opened_by),
            ago(o.now.since(gate.opened_at).0)
        )),
    ];
    if let OwnerAct::Approve {
        option: Some(opt), ..
    } = action
    {
        lines.push(Line::raw(format!("Option: {}  (←→ another)", esc(opt))));
    }
    if let OwnerAct::Reject { reason, .. } = action {
        lines.push(Line::raw(format!("Reason: {}", esc(reason))));
    }
    lines.push(Line::styled(
        format!("Signed with the owner's key: {}", x.owner.note),
        t.dim(),
    ));
    lines.push(Line::styled("y confirm · n cancel", t.fg(Role::Key)));
    lines
}
