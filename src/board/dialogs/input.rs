//! The text input: one line that scrolls sideways with the cursor, for a gate's reason or a new
//! todo's title; drafts kept per gate and purpose when it is dismissed; what Enter makes of it.

use std::collections::BTreeMap;

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::Modifier;
use ratatui::text::{Line, Span};

use super::frame::{frame_box, inner_w, keys_line, question_lines};
use super::reply::Reply;
use crate::board::keymap::{Intent, Scope};
use crate::board::panes::keys::{InputFor, OnScreen};
use crate::board::panes::text::split_priority;
use crate::board::panes::{Overlay, Scene, trunc};
use crate::board::theme::{Role, Theme};
use crate::flows::owner::OwnerAct;
use crate::kernel::limits::{TEXT_MAX, TITLE_MAX};
use crate::text::escape as esc;

/// The most drafts kept (one per gate and purpose); past it the oldest key goes.
const DRAFTS_MAX: usize = 64;

/// A text input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TextInput {
    /// What for.
    pub purpose: InputFor,
    /// The text so far.
    pub text: String,
    /// The cursor, in characters from the start.
    pub cursor: usize,
    /// Why Enter was refused, shown in the dialog.
    pub note: Option<String>,
    /// The gate's action scrolled in the confirm dialog this input came from.
    pub back: usize,
}

/// Text typed and dismissed, by gate and purpose, offered again when the input reopens.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Drafts(BTreeMap<String, String>);

fn draft_key(purpose: &InputFor) -> String {
    match purpose {
        InputFor::RejectReason(g) => format!("reject:{g}"),
        InputFor::ApproveReason { gate, .. } => format!("approve:{gate}"),
        InputFor::TodoTitle => "todo".into(),
    }
}

impl Drafts {
    /// No draft kept.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The draft left for this purpose, if any.
    pub fn get(&self, purpose: &InputFor) -> Option<String> {
        self.0.get(&draft_key(purpose)).cloned()
    }

    /// Keeps `text` for this purpose (blank text: forgets it).
    fn keep(&mut self, purpose: &InputFor, text: &str) {
        let key = draft_key(purpose);
        if text.trim().is_empty() {
            self.0.remove(&key);
            return;
        }
        self.0.insert(key, text.to_string());
        while self.0.len() > DRAFTS_MAX {
            self.0.pop_first();
        }
    }

    /// Forgets the drafts of a performed act.
    pub fn drop_for(&mut self, a: &OwnerAct) {
        let key = match a {
            OwnerAct::Reject { gate, .. } => format!("reject:{gate}"),
            OwnerAct::Approve { gate, .. } => format!("approve:{gate}"),
            OwnerAct::AddTodo { .. } => "todo".into(),
            _ => return,
        };
        self.0.remove(&key);
    }
}

fn byte_at(text: &str, i: usize) -> usize {
    text.char_indices().nth(i).map_or(text.len(), |(b, _)| b)
}

impl TextInput {
    /// An input for this purpose holding `text`, the cursor at its end.
    pub fn new(purpose: InputFor, text: String, back: usize) -> TextInput {
        let cursor = text.chars().count();
        TextInput {
            purpose,
            text,
            cursor,
            note: None,
            back,
        }
    }

    /// A typed character goes in at the cursor (control characters never do).
    pub fn on_char(&mut self, c: char) {
        if crate::text::is_unsafe(c) {
            return;
        }
        let max = max_chars(&self.purpose);
        if self.text.chars().count() >= max {
            self.note = Some(format!("at most {max} characters"));
            return;
        }
        let at = byte_at(&self.text, self.cursor);
        self.text.insert(at, c);
        self.cursor += 1;
        self.note = None;
    }

    /// Pasted text (already cleaned of control characters) goes in at the cursor, cut to fit.
    pub fn on_paste(&mut self, clean: &str) {
        let max = max_chars(&self.purpose);
        let room = max.saturating_sub(self.text.chars().count());
        let part: String = clean.chars().take(room).collect();
        let at = byte_at(&self.text, self.cursor);
        self.text.insert_str(at, &part);
        self.cursor += part.chars().count();
        self.note = (part.len() < clean.len())
            .then(|| format!("at most {max} characters: the paste was cut"));
    }

    /// A key: move, erase, submit or cancel (both keep the text as a draft).
    pub fn on_intent(&mut self, intent: Intent, on: &OnScreen, drafts: &mut Drafts) -> Reply {
        let n = self.text.chars().count();
        match intent {
            Intent::Left => self.cursor = self.cursor.saturating_sub(1),
            Intent::Right => self.cursor = (self.cursor + 1).min(n),
            Intent::Top => self.cursor = 0,
            Intent::Bottom => self.cursor = n,
            Intent::Erase if self.cursor > 0 => {
                self.cursor -= 1;
                self.text.remove(byte_at(&self.text, self.cursor));
                self.note = None;
            }
            Intent::EraseForward if self.cursor < n => {
                self.text.remove(byte_at(&self.text, self.cursor));
                self.note = None;
            }
            Intent::Erase | Intent::EraseForward => {}
            Intent::Submit => {
                drafts.keep(&self.purpose, &self.text);
                return self.submit(on);
            }
            _ => {
                drafts.keep(&self.purpose, &self.text);
                let kept = if self.text.trim().is_empty() {
                    ""
                } else {
                    " (the text is kept for next time)"
                };
                return Reply::CloseSaying(format!("cancelled: nothing changed{kept}"));
            }
        }
        Reply::Stay
    }

    /// Enter: the act to confirm, or why the text is refused.
    fn submit(&mut self, on: &OnScreen) -> Reply {
        let text = self.text.trim().to_string();
        let next = match self.purpose.clone() {
            InputFor::ApproveReason { gate, option } => OwnerAct::Approve {
                sha: on.action_sha(&gate),
                gate,
                option,
                reason: Some(text.clone()).filter(|t| !t.is_empty()),
            },
            _ if text.is_empty() => {
                let msg = match self.purpose {
                    InputFor::TodoTitle => "a title is required (Esc cancels)",
                    _ => "a reason is required: the agents read it (Esc cancels)",
                };
                self.note = Some(msg.to_string());
                return Reply::Say(msg.into(), true);
            }
            InputFor::RejectReason(gate) => OwnerAct::Reject { gate, reason: text },
            InputFor::TodoTitle => {
                let (priority, title) = split_priority(&text);
                OwnerAct::AddTodo { title, priority }
            }
        };
        Reply::Confirm(next, self.back)
    }
}

impl Overlay for TextInput {
    fn scopes(&self) -> Vec<Scope> {
        vec![Scope::Input, Scope::Always]
    }

    /// One line that scrolls sideways with the cursor, and why Enter was refused.
    fn draw(&self, f: &mut Frame, area: Rect, sc: &Scene) {
        let (t, purpose, text, cursor) = (sc.theme, &self.purpose, &self.text, self.cursor);
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
        let mut body: Vec<Line> = gate.map_or_else(Vec::new, |g| question_lines(sc, g, w, 1));
        body.push(Line::styled(trunc(help, w), t.dim()));
        body.push(text_line(text, cursor, w, t));
        let n = text.chars().count();
        body.push(match self.note.as_deref() {
            Some(msg) => Line::styled(
                trunc(&format!("✗ {msg}"), w),
                t.fg(Role::Error).add_modifier(Modifier::BOLD),
            ),
            None => Line::styled(format!("{n}/{} characters", max_chars(purpose)), t.dim()),
        });
        let keys = keys_line(&[("Enter", "next"), ("Esc", "cancel"), ("←→", "move")], t);
        frame_box(f, area, sc, name, body, keys);
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
