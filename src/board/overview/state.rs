//! The overview's state and its reactions to keys, ticks and loads: no I/O here. Decisions are
//! the board's own [`OwnerAct`]s, carried out by the loop through `flows::owner::act`.

use std::collections::BTreeSet;

use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};

use super::summary::{self, GateBrief, State, Summary};
use crate::board::app::{Live, Message};
use crate::board::theme::Theme;
use crate::flows::owner::{Owner, OwnerAct};
use crate::kernel::{Snapshot, Ts};

/// How long a status message stays.
const MESSAGE_MS: i64 = 15_000;

/// One project of the overview.
#[derive(Debug, Clone)]
pub struct Row {
    /// Its name in the list.
    pub name: String,
    /// Where it is (a path, or a URL without its password).
    pub place: String,
    /// Its last good state (kept to count again as the clock moves: leases lapse, monitors
    /// fall overdue, spends leave the quota's window).
    pub snap: Option<Snapshot>,
    /// What the row shows.
    pub state: State,
    /// Who acts on it, and whether the owner's key is here for it.
    pub owner: Owner,
    /// How its changes arrive.
    pub live: Live,
}

impl Row {
    /// A row not loaded yet.
    pub fn new(name: impl Into<String>, place: impl Into<String>) -> Row {
        Row {
            name: name.into(),
            place: place.into(),
            snap: None,
            state: State::Loading,
            owner: Owner::unverified(),
            live: Live::Watching,
        }
    }
}

/// The focused list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Focus {
    /// The projects.
    Projects,
    /// The pending gates of every project.
    Gates,
}

/// What is open on top of the lists.
#[derive(Debug, Clone, PartialEq)]
pub enum Mode {
    /// The lists.
    Normal,
    /// A decision waits for `y`.
    Confirm {
        /// The project's row.
        row: usize,
        /// The decision.
        action: OwnerAct,
        /// The gate as the overview showed it.
        gate: GateBrief,
    },
    /// The reason of a rejection is typed.
    Reason {
        /// The project's row.
        row: usize,
        /// The gate.
        gate: GateBrief,
        /// The text so far.
        text: String,
    },
}

/// Something the overview asks its loop to do.
#[derive(Debug, Clone, PartialEq)]
pub enum Effect {
    /// Open the board of this row's project.
    Open(usize),
    /// Carry out an owner action on this row's project.
    Perform(usize, OwnerAct),
    /// Read every project again.
    Reload,
    /// Leave.
    Quit,
}

/// The overview's whole state.
#[derive(Debug, Clone)]
pub struct Overview {
    /// The projects, in the list's order.
    pub rows: Vec<Row>,
    /// The rows as shown: by what needs the owner.
    pub order: Vec<usize>,
    /// The selected project (a row).
    pub sel: usize,
    /// The selected gate: its row and id.
    pub gate_sel: Option<(usize, String)>,
    /// The focused list.
    pub focus: Focus,
    /// What is open.
    pub mode: Mode,
    /// The status message.
    pub message: Option<Message>,
    /// The colors.
    pub theme: Theme,
    /// The clock.
    pub now: Ts,
    /// Changes are off.
    pub readonly: bool,
    /// Set when the overview should stop.
    pub quit: bool,
    /// Gates decided here that the loads do not show decided yet.
    deciding: BTreeSet<(usize, String)>,
}

impl Overview {
    /// An overview of these rows, nothing loaded yet.
    pub fn new(rows: Vec<Row>, theme: Theme, readonly: bool, now: Ts) -> Overview {
        let mut o = Overview {
            order: (0..rows.len()).collect(),
            rows,
            sel: 0,
            gate_sel: None,
            focus: Focus::Projects,
            mode: Mode::Normal,
            message: None,
            theme,
            now,
            readonly,
            quit: false,
            deciding: BTreeSet::new(),
        };
        o.reorder();
        o.sel = o.order.first().copied().unwrap_or(0);
        o
    }

    /// A project was read: its snapshot, or why it could not be (the last good state stays).
    pub fn loaded(&mut self, row: usize, r: Result<Snapshot, String>) {
        let Some(x) = self.rows.get_mut(row) else {
            return;
        };
        match r {
            Ok(s) => {
                x.state = State::Loaded(summary::summarize(&s, self.now), None);
                x.snap = Some(s);
            }
            Err(e) => {
                x.state = match x.state.summary() {
                    Some(s) => State::Loaded(s.clone(), Some(e)),
                    None => State::Failed(e),
                }
            }
        }
        let pending: Vec<String> = self.rows[row]
            .state
            .summary()
            .map(|s| s.gates.iter().map(|g| g.id.clone()).collect())
            .unwrap_or_default();
        self.deciding
            .retain(|(r, id)| *r != row || pending.contains(id));
        self.reorder();
    }

    /// The clock moved: count again (leases lapse, monitors fall overdue, spends leave the
    /// window), and old messages fade.
    pub fn tick(&mut self, now: Ts) {
        self.now = now;
        for x in &mut self.rows {
            if let (Some(s), State::Loaded(_, p)) = (&x.snap, &x.state) {
                x.state = State::Loaded(summary::summarize(s, now), p.clone());
            }
        }
        if self
            .message
            .as_ref()
            .is_some_and(|m| !m.error && now.since(m.at).0 > MESSAGE_MS)
        {
            self.message = None;
        }
        self.reorder();
    }

    /// An owner action on `row` finished: a line for the status bar, or the error.
    pub fn done(&mut self, row: usize, gate: Option<&str>, r: Result<String, String>) {
        let name = self
            .rows
            .get(row)
            .map_or("?", |x| x.name.as_str())
            .to_string();
        match r {
            Ok(t) => self.say(format!("{name}: {t}"), false),
            Err(e) => {
                if let Some(g) = gate {
                    self.deciding.remove(&(row, g.to_string()));
                }
                self.say(format!("{name}: {e}"), true)
            }
        }
    }

    /// Says something in the status bar.
    pub fn say(&mut self, text: impl Into<String>, error: bool) {
        self.message = Some(Message {
            text: text.into(),
            error,
            at: self.now,
        });
    }

    fn reorder(&mut self) {
        let rows: Vec<(&str, &State)> = self
            .rows
            .iter()
            .map(|r| (r.name.as_str(), &r.state))
            .collect();
        self.order = summary::order(&rows);
        if self.sel >= self.rows.len() {
            self.sel = self.order.first().copied().unwrap_or(0);
        }
        let gates = self.gates();
        let kept = self
            .gate_sel
            .as_ref()
            .is_some_and(|k| gates.iter().any(|(r, g)| *r == k.0 && g.id == k.1));
        if !kept {
            self.gate_sel = gates.first().map(|(r, g)| (*r, g.id.clone()));
        }
    }

    /// The summary of a row, if it is loaded.
    pub fn summary(&self, row: usize) -> Option<&Summary> {
        self.rows.get(row).and_then(|r| r.state.summary())
    }

    /// The pending gates of every project, in the rows' order, oldest first in each; those
    /// decided here and not yet shown decided are left out.
    pub fn gates(&self) -> Vec<(usize, &GateBrief)> {
        let mut out = Vec::new();
        for &r in &self.order {
            for g in self.summary(r).map(|s| s.gates.as_slice()).unwrap_or(&[]) {
                if !self.deciding.contains(&(r, g.id.clone())) {
                    out.push((r, g));
                }
            }
        }
        out
    }

    /// Pending gates decided nowhere yet, over every project.
    pub fn pending(&self) -> usize {
        self.gates().len()
    }

    /// The selected gate's place in [`Overview::gates`].
    pub fn gate_index(&self) -> Option<usize> {
        let k = self.gate_sel.as_ref()?;
        self.gates()
            .iter()
            .position(|(r, g)| *r == k.0 && g.id == k.1)
    }

    /// Reacts to a key press.
    pub fn on_key(&mut self, key: KeyEvent) -> Vec<Effect> {
        if key.kind != KeyEventKind::Press {
            return Vec::new();
        }
        if key.modifiers.contains(KeyModifiers::CONTROL) {
            return match key.code {
                KeyCode::Char('c') => self.leave(),
                KeyCode::Char('r') => vec![Effect::Reload],
                _ => Vec::new(),
            };
        }
        match self.mode.clone() {
            Mode::Normal => self.normal(key.code),
            Mode::Confirm { row, action, gate } => self.confirm(key.code, row, action, gate),
            Mode::Reason { row, gate, text } => {
                self.reason(key.code, row, gate, text);
                Vec::new()
            }
        }
    }

    fn leave(&mut self) -> Vec<Effect> {
        self.quit = true;
        vec![Effect::Quit]
    }

    fn normal(&mut self, code: KeyCode) -> Vec<Effect> {
        match code {
            KeyCode::Char('q') => return self.leave(),
            KeyCode::Up | KeyCode::Char('k') => self.step(-1),
            KeyCode::Down | KeyCode::Char('j') => self.step(1),
            KeyCode::Home | KeyCode::Char('g') => self.step(-(1 << 20)),
            KeyCode::End | KeyCode::Char('G') => self.step(1 << 20),
            KeyCode::Tab | KeyCode::BackTab => {
                self.focus = match self.focus {
                    Focus::Projects => Focus::Gates,
                    Focus::Gates => Focus::Projects,
                }
            }
            KeyCode::Enter => return self.open(),
            KeyCode::Char('N') => self.next_gate(),
            KeyCode::Char('a') => self.decide(true),
            KeyCode::Char('x') => self.decide(false),
            KeyCode::Esc => self.message = None,
            _ => {}
        }
        Vec::new()
    }

    /// Moves the focused list's selection by `by` rows (clamped).
    fn step(&mut self, by: i64) {
        let clamp = |cur: usize, len: usize| {
            (cur as i64 + by).clamp(0, len.saturating_sub(1) as i64) as usize
        };
        match self.focus {
            Focus::Projects => {
                let at = self.order.iter().position(|&r| r == self.sel).unwrap_or(0);
                if let Some(&r) = self.order.get(clamp(at, self.order.len())) {
                    self.sel = r;
                }
            }
            Focus::Gates => {
                let gates = self.gates();
                let at = self.gate_index().unwrap_or(0);
                let next = gates
                    .get(clamp(at, gates.len()))
                    .map(|(r, g)| (*r, g.id.clone()));
                if let Some(k) = next {
                    self.sel = k.0;
                    self.gate_sel = Some(k);
                }
            }
        }
    }

    fn open(&mut self) -> Vec<Effect> {
        let row = match (self.focus, &self.gate_sel) {
            (Focus::Gates, Some((r, _))) => *r,
            _ => self.sel,
        };
        match self.rows.get(row) {
            Some(x) if x.state.summary().is_some() => vec![Effect::Open(row)],
            Some(x) => {
                let why = x.state.problem().unwrap_or("not loaded yet").to_string();
                self.say(format!("{}: cannot open: {why}", x.name), true);
                Vec::new()
            }
            None => Vec::new(),
        }
    }

    /// `N`: the next pending gate of any project (wrapping), focused.
    fn next_gate(&mut self) {
        let gates = self.gates();
        if gates.is_empty() {
            self.say("no pending gate in any project", false);
            return;
        }
        let next = match (self.focus, self.gate_index()) {
            (Focus::Gates, Some(i)) => (i + 1) % gates.len(),
            (_, Some(i)) => i,
            (_, None) => 0,
        };
        let (r, g) = gates[next];
        let k = (r, g.id.clone());
        let msg = format!("{}: {}, {} pending", self.rows[r].name, g.id, gates.len());
        self.sel = k.0;
        self.gate_sel = Some(k);
        self.focus = Focus::Gates;
        self.say(msg, false);
    }

    /// The gate `a` and `x` act on: the selected gate, or with the projects focused, the oldest
    /// pending gate of the selected project.
    fn target(&self) -> Option<(usize, GateBrief)> {
        let gates = self.gates();
        let found = match self.focus {
            Focus::Gates => self.gate_index().and_then(|i| gates.get(i)),
            Focus::Projects => gates.iter().find(|(r, _)| *r == self.sel),
        };
        found.map(|(r, g)| (*r, (*g).clone()))
    }

    /// `a` (approve) or `x` (reject): the confirm dialog, or the reason first.
    fn decide(&mut self, approve: bool) {
        if self.readonly {
            return self.say("read-only board (--readonly): changes are off", true);
        }
        let Some((row, gate)) = self.target() else {
            return self.say("no pending gate here", false);
        };
        let owner = &self.rows[row].owner;
        if !owner.verified {
            let why = owner.note.trim_start_matches("owner: ").to_string();
            let name = self.rows[row].name.clone();
            return self.say(format!("only the owner can do this in {name}; {why}"), true);
        }
        self.mode = if approve {
            Mode::Confirm {
                row,
                action: OwnerAct::Approve {
                    gate: gate.id.clone(),
                    option: gate.options.first().cloned(),
                    reason: None,
                    sha: gate.action_sha.clone(),
                },
                gate,
            }
        } else {
            Mode::Reason {
                row,
                gate,
                text: String::new(),
            }
        };
    }

    fn confirm(
        &mut self,
        code: KeyCode,
        row: usize,
        mut action: OwnerAct,
        gate: GateBrief,
    ) -> Vec<Effect> {
        match code {
            KeyCode::Char('y') | KeyCode::Enter => {
                self.mode = Mode::Normal;
                self.deciding.insert((row, gate.id.clone()));
                self.reorder();
                return vec![Effect::Perform(row, action)];
            }
            KeyCode::Char('n') | KeyCode::Esc => self.mode = Mode::Normal,
            KeyCode::Left | KeyCode::Right | KeyCode::Char('h') | KeyCode::Char('l') => {
                if let OwnerAct::Approve { option, .. } = &mut action
                    && !gate.options.is_empty()
                {
                    let n = gate.options.len();
                    let at = gate
                        .options
                        .iter()
                        .position(|o| Some(o) == option.as_ref())
                        .unwrap_or(0);
                    let back = matches!(code, KeyCode::Left | KeyCode::Char('h'));
                    let next = if back { (at + n - 1) % n } else { (at + 1) % n };
                    *option = Some(gate.options[next].clone());
                }
                self.mode = Mode::Confirm { row, action, gate };
            }
            _ => {}
        }
        Vec::new()
    }

    fn reason(&mut self, code: KeyCode, row: usize, gate: GateBrief, mut text: String) {
        let max = crate::board::dialogs::input::max_chars(
            &crate::board::panes::keys::InputFor::RejectReason(gate.id.clone()),
        );
        match code {
            KeyCode::Esc => {
                self.mode = Mode::Normal;
                return;
            }
            KeyCode::Enter if text.trim().is_empty() => {
                self.say("a rejection needs a reason", true);
            }
            KeyCode::Enter => {
                let action = OwnerAct::Reject {
                    gate: gate.id.clone(),
                    reason: text.trim().to_string(),
                };
                self.mode = Mode::Confirm { row, action, gate };
                return;
            }
            KeyCode::Backspace => {
                text.pop();
            }
            KeyCode::Char(c) if !crate::text::is_unsafe(c) && text.chars().count() < max => {
                text.push(c)
            }
            _ => {}
        }
        self.mode = Mode::Reason { row, gate, text };
    }
}
