//! The gates pane: pending gates oldest first (question, options, what they block, who asked), then decided.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::Modifier;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use super::Pane;
use super::Scene;
use super::keys::{InputFor, OnScreen, Outcome};
use super::{block, gutter, mid_trunc, row_style, scroll_marks, title, trunc, wrap_words};
use crate::board::derive::tampered;
use crate::board::keymap::{Intent, Scope};
use crate::board::layout::{gate_offset, inner};
use crate::board::theme::Role;
use crate::flows::owner::OwnerAct;
use crate::kernel::{Gate, GateStatus};
use crate::text::escape as esc;

/// The symbol of a gate's state (readable without color).
pub fn symbol(g: &Gate) -> &'static str {
    if tampered(g) {
        return "⚠";
    }
    match g.status {
        GateStatus::Pending => "?",
        GateStatus::Approved => "✓",
        GateStatus::Rejected => "✗",
        GateStatus::Cancelled => "–",
    }
}

/// What a gate blocks, shortly.
pub fn blocks_text(g: &Gate) -> String {
    if g.global {
        "blocks ALL agent todos".into()
    } else if g.blocks.is_empty() {
        "blocks nothing".into()
    } else {
        format!("blocks {}", esc(&g.blocks.join(",")))
    }
}

/// The gates pane's state: the gates listed and the selected row, kept on its gate across loads.
#[derive(Debug, Clone, Default)]
pub struct GatesPane {
    /// Gate ids in display order.
    pub ids: Vec<String>,
    /// The selected row.
    pub sel: usize,
    sel_id: Option<String>,
}

impl GatesPane {
    /// Lists these gates, keeping the selection on the same gate while it is listed.
    pub fn set(&mut self, ids: Vec<String>) {
        self.ids = ids;
        if let Some(id) = &self.sel_id
            && let Some(i) = self.ids.iter().position(|g| g == id)
        {
            self.sel = i;
        }
        self.sel = self.sel.min(self.ids.len().saturating_sub(1));
        self.sel_id = self.ids.get(self.sel).cloned();
    }

    /// Selects row `i`.
    pub fn select(&mut self, i: usize) {
        self.sel = i;
        self.sel_id = self.ids.get(i).cloned();
    }

    /// Moves the selection by `by` rows.
    pub fn step(&mut self, by: i64) {
        self.select(super::step(self.sel, by, self.ids.len()));
    }

    /// The selected gate's id.
    pub fn selected(&self) -> Option<&String> {
        self.ids.get(self.sel)
    }

    /// The scope of this pane's own keys.
    pub const SCOPE: Scope = Scope::Gates;

    /// Reacts to the keys this pane owns: moving the selection, approving and rejecting.
    pub fn handle(&mut self, intent: Intent, on: &OnScreen) -> Outcome {
        if let Some(by) = super::moves(intent) {
            self.step(by);
            return Outcome::Done;
        }
        match intent {
            Intent::Approve | Intent::Reject => self.decide(intent, on),
            _ => Outcome::Ignored,
        }
    }

    /// Approve or reject the selected gate: a reason to type, an option to pick, or the confirm.
    fn decide(&self, intent: Intent, on: &OnScreen) -> Outcome {
        let Some(g) = self.selected().and_then(|id| on.snap?.gates.get(id)) else {
            return Outcome::error("no gate selected");
        };
        if g.effective_status() != GateStatus::Pending {
            return Outcome::error(format!("{} is {} already", g.id, g.status.as_str()));
        }
        let id = g.id.clone();
        if !on.actionable(&id) {
            let msg = format!("{id} is decided already (the next load shows it); N: next gate");
            return Outcome::error(msg);
        }
        match intent {
            Intent::Reject => Outcome::Ask(InputFor::RejectReason(id)),
            _ if !g.options.is_empty() => Outcome::PickOption(id, g.options.clone()),
            _ => Outcome::Confirm(OwnerAct::Approve {
                sha: g.action.as_ref().map(|a| a.sha256.clone()),
                gate: id,
                option: None,
                reason: None,
            }),
        }
    }
}

/// Draws the gates pane.
pub fn draw(f: &mut Frame, area: Rect, sc: &Scene) {
    let t = sc.theme;
    let focused = sc.focus == Pane::Gates;
    let pending = sc.pending();
    let mut head = vec![title("Gates", t)];
    if pending > 0 {
        head.push(Span::styled(
            format!(" {pending} pending "),
            t.fg(Role::GatePending)
                .add_modifier(Modifier::BOLD | Modifier::REVERSED),
        ));
    }
    let i = inner(area);
    let visible = i.height as usize;
    let w = i.width as usize;
    let sel_rows = sc
        .gates
        .get(sc.gate_pane.sel)
        .map_or(1, |g| selected_rows(g, &|at| sc.ago(at), w, visible));
    let off = gate_offset(sc.gate_pane.sel, sel_rows, visible);
    let shown = visible.saturating_sub(sel_rows - 1).max(1);
    let b = scroll_marks(
        block(Line::from(head), focused, t),
        sc.gates.len(),
        off,
        shown,
        t,
    );
    f.render_widget(b, area);
    if sc.gates.is_empty() {
        let msg = if sc.filter.is_empty() {
            " no gates: nothing waits on the owner"
        } else {
            " no gate matches the filter"
        };
        f.render_widget(Paragraph::new(Span::styled(msg, t.dim())), i);
        return;
    }
    let mut lines = Vec::new();
    for (n, g) in sc.gates.iter().enumerate().skip(off).take(shown) {
        let sel = n == sc.gate_pane.sel;
        lines.extend(gate_lines(g, sc, (sel, focused), w, sel_rows));
    }
    f.render_widget(Paragraph::new(lines), i);
}

/// A gate's text after its gutter: its mark, id, who asked and how long ago (or who decided),
/// the question, the options and what it blocks (or the option chosen).
pub fn gate_text(g: &Gate, ago: &dyn Fn(crate::kernel::Ts) -> String) -> String {
    let pend = g.effective_status() == GateStatus::Pending;
    let when = if pend {
        format!(
            "{} {:>3}",
            mid_trunc(&esc(&g.opened_by), 16),
            ago(g.opened_at)
        )
    } else {
        let by = g.decided_by.as_deref().unwrap_or("?");
        let at = g.decided_at.map(ago).unwrap_or_default();
        format!("{} {} {at}", g.status.as_str(), esc(by))
    };
    let mut tail = String::new();
    if !g.options.is_empty() {
        tail.push_str(&format!(" [{}]", esc(&g.options.join("|"))));
    }
    if pend {
        tail.push_str(&format!(" → {}", blocks_text(g)));
    } else if let Some(o) = &g.option {
        tail.push_str(&format!(" → {}", esc(o)));
    }
    if tampered(g) {
        tail.push_str(" UNPROVEN decision: counts as pending");
    }
    format!(
        "{} {}  {}  {}{}",
        symbol(g),
        esc(&g.id),
        when,
        esc(&g.question),
        tail
    )
}

/// The lines of the selected gate at inner width `w`: its whole text wrapped at spaces, the
/// lines after the first indented under its id; at most `max` lines, the last ending with `…`
/// when cut.
pub fn wrapped(text: &str, w: usize, max: usize) -> Vec<String> {
    let first = w.saturating_sub(2).max(1);
    let rest = w.saturating_sub(4).max(1);
    // `→ blocks ID` stays together.
    let text = text
        .replace(" → blocks ", " →\u{a0}blocks\u{a0}")
        .replace(" → ", " →\u{a0}");
    let mut rows = wrap_words(&text, first);
    if rows.len() > 1 {
        let tail = rows[1..].join(" ");
        rows.truncate(1);
        rows.extend(wrap_words(&tail, rest));
    }
    let max = max.max(1);
    if rows.len() > max {
        let cut = rows[max - 1..].join(" ");
        rows.truncate(max - 1);
        // What is left is longer than a row, so it ends with `…` (Enter shows it all).
        rows.push(trunc(&cut, if max == 1 { first } else { rest }));
    }
    rows.iter().map(|r| r.replace('\u{a0}', " ")).collect()
}

/// The rows the selected gate takes at inner width `w` when it may take up to `max`.
pub fn selected_rows(
    g: &Gate,
    ago: &dyn Fn(crate::kernel::Ts) -> String,
    w: usize,
    max: usize,
) -> usize {
    wrapped(&gate_text(g, ago), w, max).len()
}

/// One gate's lines: its gutter and text, cut to one line, or, selected, wrapped over `rows`.
fn gate_lines(
    g: &Gate,
    sc: &Scene,
    (sel, focused): (bool, bool),
    w: usize,
    rows: usize,
) -> Vec<Line<'static>> {
    let t = sc.theme;
    let pend = g.effective_status() == GateStatus::Pending;
    let base = if tampered(g) {
        t.fg(Role::Error).add_modifier(Modifier::BOLD)
    } else if pend {
        t.fg(Role::GatePending).add_modifier(Modifier::BOLD)
    } else {
        t.fg(Role::GateDecided)
    };
    let style = row_style(t, sel, focused, base);
    let text = gate_text(g, &|at| sc.ago(at));
    if !sel {
        let row = format!("{} {}", gutter(false), text);
        return vec![Line::from(Span::styled(
            format!("{:<w$}", trunc(&row, w)),
            style,
        ))];
    }
    wrapped(&text, w, rows)
        .into_iter()
        .enumerate()
        .map(|(n, part)| {
            let lead = if n == 0 {
                format!("{} ", gutter(true))
            } else {
                "    ".into()
            };
            let row = format!("{lead}{part}");
            Line::from(Span::styled(format!("{:<w$}", trunc(&row, w)), style))
        })
        .collect()
}
