//! The board's dialogs: confirm (what will happen, the gate's question, the reason), text input
//! (scrolls sideways), the option and reassign pickers, and the file errors in full.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Clear, Paragraph};

use super::ViewModel;
use super::overlay::centered;
use super::{block, gutter, row_style, title, trunc};
use crate::board::layout::offset;
use crate::board::theme::{Role, Theme};
use crate::flows::owner::OwnerAct;
use crate::kernel::limits::{TEXT_MAX, TITLE_MAX};
use crate::kernel::{Gate, Problem};
use crate::text::escape as esc;

/// What a text input is for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InputFor {
    /// The reason to reject this gate.
    RejectReason(String),
    /// The reason (optional) to approve this gate, with the option chosen.
    ApproveReason {
        /// The gate.
        gate: String,
        /// The option chosen.
        option: Option<String>,
    },
    /// The title of a new todo.
    TodoTitle,
}

/// What a picker chooses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PickFor {
    /// An agent to reassign this todo to.
    Agent(String),
    /// An option to approve this gate with.
    GateOption(String),
}

/// An agent the reassign picker knows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    /// The agent id.
    pub id: String,
    /// Its state for people (`working · 1 lease`, `idle · seen 3m ago`, `stale since 5m`).
    pub note: String,
    /// Working or idle: listed without Tab.
    pub live: bool,
}

/// The reassign picker's own state.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AgentPick {
    /// Every agent known, live ones first.
    pub known: Vec<Candidate>,
    /// The text typed: it filters the list, and is offered as an agent id itself.
    pub typed: String,
    /// Stale and never-seen agents are listed too.
    pub show_all: bool,
}

impl AgentPick {
    /// The rows to list: known agents that match the typed text (all of them once text is typed,
    /// or with Tab), then the typed id itself when it names no known agent.
    pub fn rows(&self) -> Vec<String> {
        let needle = self.typed.to_lowercase();
        let mut out: Vec<String> = self
            .known
            .iter()
            .filter(|c| c.live || self.show_all || !needle.is_empty())
            .filter(|c| c.id.to_lowercase().contains(&needle))
            .map(|c| c.id.clone())
            .collect();
        if !self.typed.is_empty() && !self.known.iter().any(|c| c.id == self.typed) {
            out.push(self.typed.clone());
        }
        out
    }

    /// Known agents Tab would add to the list.
    pub fn hidden(&self) -> usize {
        if self.show_all || !self.typed.is_empty() {
            return 0;
        }
        self.known.iter().filter(|c| !c.live).count()
    }

    /// The known agent of this id.
    pub fn candidate(&self, id: &str) -> Option<&Candidate> {
        self.known.iter().find(|c| c.id == id)
    }
}

/// The part of `text` a box `w` cells wide shows with the cursor visible, and the cursor's column
/// in it. `…` marks text cut off at either end; the cursor never sits on a mark.
pub fn window(text: &str, cursor: usize, w: usize) -> (String, usize) {
    let chars: Vec<char> = text.chars().collect();
    let n = chars.len();
    let cursor = cursor.min(n);
    if w < 3 {
        return (String::new(), 0);
    }
    if n < w {
        return (text.to_string(), cursor);
    }
    let start = if cursor < w - 1 { 0 } else { cursor - (w - 2) };
    let end = (start + w).min(n);
    let mut shown: Vec<char> = chars[start..end].to_vec();
    if start > 0 {
        shown[0] = '…';
    }
    if end < n
        && let Some(last) = shown.last_mut()
    {
        *last = '…';
    }
    (shown.into_iter().collect(), cursor - start)
}

/// How many characters an input for this purpose takes (the kernel's limit for the field).
pub fn max_chars(purpose: &InputFor) -> usize {
    match purpose {
        InputFor::TodoTitle => TITLE_MAX,
        _ => TEXT_MAX,
    }
}

/// The widest a dialog grows.
const DIALOG_W: u16 = 64;

/// Cuts `text` into lines of at most `w` characters at spaces (a longer word is cut too), at most
/// `max` lines, the last ending with `…` when text is left over.
pub fn wrap(text: &str, w: usize, max: usize) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut cur = String::new();
    for word in text.split(' ') {
        let mut word: Vec<char> = word.chars().collect();
        loop {
            let used = cur.chars().count();
            let gap = usize::from(used > 0);
            if used + gap + word.len() <= w {
                if gap == 1 {
                    cur.push(' ');
                }
                cur.extend(word.iter());
                break;
            }
            if used > 0 {
                out.push(std::mem::take(&mut cur));
                continue;
            }
            let rest = word.split_off(w.max(1).min(word.len()));
            out.push(word.iter().collect());
            word = rest;
        }
    }
    if !cur.is_empty() || out.is_empty() {
        out.push(cur);
    }
    if out.len() > max {
        out.truncate(max);
        if let Some(last) = out.last_mut() {
            let keep: String = last.chars().take(w.saturating_sub(1)).collect();
            *last = format!("{keep}…");
        }
    }
    out
}

/// A dialog's frame: a centered box `w` wide fitting `body` lines and one row of keys pinned at
/// the bottom (long content is cut, the keys row always shows).
fn frame_box(
    f: &mut Frame,
    area: Rect,
    vm: &ViewModel,
    name: String,
    body: Vec<Line<'static>>,
    keys: Line<'static>,
) {
    let t = vm.theme;
    let h = (body.len() as u16).saturating_add(3);
    let r = centered(area, DIALOG_W, h);
    f.render_widget(Clear, r);
    let b = block(title(name, t), true, t).style(t.base());
    let inner = b.inner(r);
    f.render_widget(b, r);
    let [top, bottom] = Layout::vertical([Constraint::Min(0), Constraint::Length(1)]).areas(inner);
    f.render_widget(Paragraph::new(body).style(t.base()), top);
    f.render_widget(Paragraph::new(keys).style(t.base()), bottom);
}

/// The width of a dialog's text on this screen.
fn inner_w(area: Rect) -> usize {
    usize::from(DIALOG_W.min(area.width).saturating_sub(2))
}

fn key_span(k: &str, t: &Theme) -> Span<'static> {
    Span::styled(
        format!(" {k} "),
        t.fg(Role::Key)
            .add_modifier(Modifier::BOLD | Modifier::REVERSED),
    )
}

/// Keys for a dialog's bottom row: (key, what) pairs.
fn keys_line(pairs: &[(&str, &str)], t: &Theme) -> Line<'static> {
    let mut spans = Vec::new();
    for (i, (k, what)) in pairs.iter().enumerate() {
        if i > 0 {
            spans.push(Span::raw("  "));
        }
        spans.push(key_span(k, t));
        spans.push(Span::styled(format!(" {what}"), t.fg(Role::Fg)));
    }
    Line::from(spans)
}

fn styled(lines: Vec<String>, style: Style) -> impl Iterator<Item = Line<'static>> {
    lines.into_iter().map(move |l| Line::styled(l, style))
}

fn gate_of<'a>(vm: &ViewModel<'a>, id: &str) -> Option<&'a Gate> {
    vm.snap.and_then(|s| s.gates.get(id))
}

/// The gate's question and who asked, as dialog lines.
fn question_lines(vm: &ViewModel, id: &str, w: usize, max: usize) -> Vec<Line<'static>> {
    let Some(g) = gate_of(vm, id) else {
        return Vec::new();
    };
    let text = format!("“{}” asked by {}", esc(&g.question), esc(&g.opened_by));
    styled(wrap(&text, w, max), vm.theme.fg(Role::Accent)).collect()
}

/// The most lines of a gate's action the confirm dialog shows at once (↑/↓ scroll it).
pub const ACTION_LINES: usize = 8;

/// The action a gate holds, as the owner approves it: kind, digest and the text, scrolled.
fn action_lines(vm: &ViewModel, id: &str, w: usize) -> Vec<Line<'static>> {
    let Some(a) = gate_of(vm, id).and_then(|g| g.action.as_ref()) else {
        return Vec::new();
    };
    let t = vm.theme;
    let short: String = a.sha256.chars().take(16).collect();
    let head = format!("action ({}), sha256 {short}…", a.kind.as_str());
    let mut out = vec![Line::styled(trunc(&head, w), t.fg(Role::Warn))];
    let all: Vec<String> = a.shown().lines().map(str::to_string).collect();
    let from = vm.action_scroll.min(all.len().saturating_sub(1));
    for l in all.iter().skip(from).take(ACTION_LINES) {
        out.push(Line::styled(trunc(&format!("│ {l}"), w), t.fg(Role::Fg)));
    }
    if all.len() > ACTION_LINES {
        let shown = format!(
            "lines {}-{} of {} (↑/↓ scroll)",
            from + 1,
            (from + ACTION_LINES).min(all.len()),
            all.len()
        );
        out.push(Line::styled(shown, t.dim()));
    }
    if a.unusual() > 0 {
        let n = match a.unusual() {
            1 => "1 character outside printable ASCII".to_string(),
            n => format!("{n} characters outside printable ASCII"),
        };
        out.push(Line::styled(trunc(&n, w), t.fg(Role::Warn)));
    }
    if !a.intact() {
        let bad = "the action no longer matches its sha256: approving is refused";
        out.push(Line::styled(trunc(bad, w), t.fg(Role::Error)));
    }
    out
}

/// The confirm dialog: exactly what will happen, the gate's question and the reason, and as whom.
pub fn confirm(f: &mut Frame, area: Rect, vm: &ViewModel, a: &OwnerAct) {
    let t = vm.theme;
    let w = inner_w(area);
    let mut body: Vec<Line> = styled(
        wrap(&esc(&a.describe()), w, 3),
        t.fg(Role::Fg).add_modifier(Modifier::BOLD),
    )
    .collect();
    let mut keys = vec![("y", "yes, do it"), ("n", "no")];
    if let Some(g) = a.gate() {
        body.extend(question_lines(vm, g, w, 3));
        if matches!(a, OwnerAct::Approve { .. }) {
            body.extend(action_lines(vm, g, w));
        }
        let reason = match (a, a.reason()) {
            (_, Some(r)) => format!("reason: {}", esc(r)),
            (OwnerAct::Approve { .. }, None) => "reason: none (optional: r adds one)".into(),
            _ => "reason: none".into(),
        };
        body.extend(styled(wrap(&reason, w, 3), t.fg(Role::Fg)));
        keys.push(("r", "reason"));
    }
    let who = if vm.owner.verified {
        "signed with the owner's key"
    } else {
        "owner authority unverified: the store refuses this without the owner's key"
    };
    body.extend(styled(wrap(who, w, 2), t.dim()));
    body.push(Line::raw(""));
    frame_box(f, area, vm, "Confirm".into(), body, keys_line(&keys, t));
}

/// A text input: one line that scrolls sideways with the cursor, and why Enter was refused.
pub fn input(
    f: &mut Frame,
    area: Rect,
    vm: &ViewModel,
    purpose: &InputFor,
    text: &str,
    cursor: usize,
    note: Option<&str>,
) {
    let t = vm.theme;
    let w = inner_w(area);
    let (name, help, gate) = match purpose {
        InputFor::RejectReason(g) => (
            format!("Reject {}", esc(g)),
            "Why? (required; the agents read it)",
            Some(g),
        ),
        InputFor::ApproveReason { gate, .. } => (
            format!("Approve {}", esc(gate)),
            "Why? (optional; Enter with none approves without one)",
            Some(gate),
        ),
        InputFor::TodoTitle => (
            "Add a todo".to_string(),
            "Title (may start with P0-P4; default P2)",
            None,
        ),
    };
    let mut body: Vec<Line> = gate.map_or_else(Vec::new, |g| question_lines(vm, g, w, 1));
    body.push(Line::styled(trunc(help, w), t.dim()));
    body.push(text_line(text, cursor, w, t));
    let n = text.chars().count();
    body.push(match note {
        Some(msg) => Line::styled(
            trunc(&format!("✗ {msg}"), w),
            t.fg(Role::Error).add_modifier(Modifier::BOLD),
        ),
        None => Line::styled(format!("{n}/{} characters", max_chars(purpose)), t.dim()),
    });
    let keys = keys_line(&[("Enter", "next"), ("Esc", "cancel"), ("←→", "move")], t);
    frame_box(f, area, vm, name, body, keys);
}

/// The typed text, cut to the box with the cursor visible (a reversed cell).
fn text_line(text: &str, cursor: usize, w: usize, t: &Theme) -> Line<'static> {
    let (shown, col) = window(text, cursor, w);
    let chars: Vec<char> = shown.chars().collect();
    let before: String = chars[..col.min(chars.len())].iter().collect();
    let at: String = chars.get(col).map_or(" ".into(), |c| c.to_string());
    let after: String = chars
        .get(col + 1..)
        .map_or(String::new(), |r| r.iter().collect());
    let style = t.fg(Role::Fg).add_modifier(Modifier::BOLD);
    Line::from(vec![
        Span::styled(before, style),
        Span::styled(at, style.add_modifier(Modifier::REVERSED)),
        Span::styled(after, style),
    ])
}

/// A picker: a gate's options, or the agents to reassign to.
pub fn picker(
    f: &mut Frame,
    area: Rect,
    vm: &ViewModel,
    purpose: &PickFor,
    choices: &[String],
    sel: usize,
    agents: Option<&AgentPick>,
) {
    let t = vm.theme;
    let w = inner_w(area);
    let mut body: Vec<Line> = Vec::new();
    let name = match purpose {
        PickFor::Agent(todo) => {
            let typed = agents.map_or("", |p| p.typed.as_str());
            body.push(Line::from(vec![
                Span::styled("agent id: ", t.dim()),
                Span::styled(
                    format!("{}▏", esc(typed)),
                    t.fg(Role::Fg).add_modifier(Modifier::BOLD),
                ),
            ]));
            format!("Reassign {} to", esc(todo))
        }
        PickFor::GateOption(g) => {
            body.extend(question_lines(vm, g, w, 2));
            format!("Approve {} with", esc(g))
        }
    };
    let room = usize::from(area.height.saturating_sub(body.len() as u16 + 5)).max(1);
    let off = offset(sel, room);
    for (i, c) in choices.iter().enumerate().skip(off).take(room) {
        let text = format!("{} {}", gutter(i == sel), choice_text(c, agents, w));
        body.push(Line::styled(
            format!("{:<w$}", trunc(&text, w)),
            row_style(t, i == sel, true, t.fg(Role::Fg)),
        ));
    }
    if choices.is_empty() {
        body.push(Line::styled("  no agent known: type an agent id", t.dim()));
    }
    let mut keys = vec![("↑↓", "move"), ("Enter", "choose"), ("Esc", "cancel")];
    let hidden = agents.map_or(0, AgentPick::hidden);
    let more = format!("{hidden} stale");
    if hidden > 0 {
        keys.insert(0, ("Tab", more.as_str()));
    }
    frame_box(f, area, vm, name, body, keys_line(&keys, t));
}

/// A row of a picker: an option, a known agent with its state, or the typed id (checked).
fn choice_text(c: &str, agents: Option<&AgentPick>, w: usize) -> String {
    let Some(p) = agents else {
        return esc(c).into_owned();
    };
    match p.candidate(c) {
        Some(k) => format!("{:<24} {}", esc(&k.id), k.note),
        None => match crate::kernel::id::check_agent(c) {
            Ok(()) => format!("{:<24} typed id, not seen yet", esc(c)),
            Err(e) => trunc(&format!("{} ✗ {}", esc(c), e.message), w),
        },
    }
}

/// What a file error stops, for people.
fn effect(vm: &ViewModel, p: &Problem) -> &'static str {
    let q = vm
        .snap
        .and_then(|s| s.quarantined.iter().find(|(_, q)| q.file == p.file));
    match q {
        Some((id, _)) if vm.snap.is_some_and(|s| s.gates.contains_key(id)) => {
            "unreadable gate: it counts as pending on every todo"
        }
        Some(_) => "quarantined: no agent can claim this todo",
        None => {
            "load failed: commands and agents that load the project are refused until it reads; the board shows the last good state"
        }
    }
}

/// Every file error in full: file and line, what it stops, the message, the hint.
pub fn errors(f: &mut Frame, area: Rect, vm: &ViewModel, sel: usize) {
    let t = vm.theme;
    let w = usize::from(area.width.min(96).saturating_sub(4));
    let mut lines: Vec<Line> = Vec::new();
    let mut sel_at = 0;
    let problems = vm.problems();
    for (i, p) in problems.iter().enumerate() {
        if i == sel {
            sel_at = lines.len();
        }
        let head = match p.line {
            Some(l) => format!("{} line {l}", esc(&p.file)),
            None => esc(&p.file).into_owned(),
        };
        lines.push(Line::styled(
            format!("{} {head}", gutter(i == sel)),
            row_style(
                t,
                i == sel,
                true,
                t.fg(Role::Error).add_modifier(Modifier::BOLD),
            ),
        ));
        lines.extend(styled(wrap(effect(vm, p), w, 3), t.fg(Role::Warn)).map(indent));
        lines.extend(styled(wrap(&esc(&p.message), w, 12), t.fg(Role::Fg)).map(indent));
        if let Some(h) = &p.hint {
            lines.extend(styled(wrap(&format!("hint: {}", esc(h)), w, 3), t.dim()).map(indent));
        }
        lines.push(Line::raw(""));
    }
    let h = (lines.len() as u16).saturating_add(2);
    let r = centered(area, 96, h.min(area.height.saturating_sub(2)).max(6));
    let inner_h = usize::from(r.height.saturating_sub(2));
    let scroll = (sel_at + 6).saturating_sub(inner_h).min(sel_at);
    f.render_widget(Clear, r);
    let name = format!(
        "File errors ({}) · ↑↓ choose · E edit in $EDITOR · Esc closes",
        problems.len()
    );
    let b = block(title(name, t), true, t);
    f.render_widget(
        Paragraph::new(lines)
            .block(b)
            .style(t.base())
            .scroll((scroll as u16, 0)),
        r,
    );
}

fn indent(l: Line<'static>) -> Line<'static> {
    let mut spans = vec![Span::raw("  ")];
    spans.extend(l.spans);
    Line::from(spans).style(l.style)
}
