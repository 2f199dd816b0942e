//! The pickers: a gate's options to approve with, and the reassign picker (the roster's live
//! agents first, stale ones behind Tab, or a typed agent id checked as `--agent` is).

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::Modifier;
use ratatui::text::{Line, Span};

use super::frame::{frame_box, inner_w, keys_line, question_lines};
use super::reply::Reply;
use super::roster::Candidate;
use crate::board::keymap::{Intent, Scope};
use crate::board::layout::offset;
use crate::board::panes::keys::OnScreen;
use crate::board::panes::{Overlay, Scene, gutter, row_style, trunc};
use crate::board::theme::Role;
use crate::flows::owner::OwnerAct;
use crate::kernel::limits::AGENT_MAX;
use crate::text::escape as esc;

/// A picker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Picker {
    /// What for.
    pub purpose: PickFor,
    /// The rows listed.
    pub choices: Vec<String>,
    /// The chosen row.
    pub sel: usize,
    /// The reassign picker's agents and typed text (none for a gate's options).
    pub agents: Option<AgentPick>,
}

/// What a picker chooses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PickFor {
    /// An agent to reassign this todo to.
    Agent(String),
    /// An option to approve this gate with.
    GateOption(String),
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

impl Picker {
    /// A gate's options to approve it with.
    pub fn options(gate: String, options: Vec<String>) -> Picker {
        Picker {
            purpose: PickFor::GateOption(gate),
            choices: options,
            sel: 0,
            agents: None,
        }
    }

    /// The agents to reassign a todo to, as the roster knows them (never its holder).
    pub fn agents(todo: String, holder: Option<&str>, on: &OnScreen) -> Picker {
        let known = on.snap.map_or_else(Vec::new, |snap| {
            super::roster::candidates(snap, on.journal, on.now, holder)
        });
        let pick = AgentPick {
            known,
            ..AgentPick::default()
        };
        Picker {
            purpose: PickFor::Agent(todo),
            choices: pick.rows(),
            sel: 0,
            agents: Some(pick),
        }
    }

    /// A character typed into the reassign picker (a gate's options take none).
    pub fn on_char(&mut self, c: char) {
        if let Some(p) = &mut self.agents
            && !crate::text::is_unsafe(c)
            && p.typed.chars().count() < AGENT_MAX
        {
            p.typed.push(c);
            self.choices = p.rows();
            self.sel = 0;
        }
    }

    /// A key: move, Tab, erase, choose or cancel.
    pub fn on_intent(&mut self, intent: Intent, on: &OnScreen) -> Reply {
        let n = self.choices.len().max(1);
        match intent {
            Intent::Up => self.sel = (self.sel + n - 1) % n,
            Intent::Down => self.sel = (self.sel + 1) % n,
            Intent::ShowAll | Intent::Erase => {
                if let Some(p) = &mut self.agents {
                    if intent == Intent::ShowAll {
                        p.show_all = !p.show_all;
                    } else {
                        p.typed.pop();
                    }
                    self.choices = p.rows();
                    self.sel = 0;
                }
            }
            Intent::Submit => return self.choose(on),
            _ => return Reply::cancelled(),
        }
        Reply::Stay
    }

    /// Enter: the act to confirm, or why the row cannot be chosen.
    fn choose(&self, on: &OnScreen) -> Reply {
        let Some(choice) = self.choices.get(self.sel).cloned() else {
            return Reply::Say("nothing to choose: type an agent id, or Esc".into(), true);
        };
        if let PickFor::Agent(_) = self.purpose
            && let Err(e) = crate::kernel::id::check_agent(&choice)
        {
            return Reply::Say(e.message, true);
        }
        let act = match self.purpose.clone() {
            PickFor::Agent(todo) => OwnerAct::Reassign { todo, to: choice },
            PickFor::GateOption(gate) => OwnerAct::Approve {
                sha: on.action_sha(&gate),
                gate,
                option: Some(choice),
                reason: None,
            },
        };
        Reply::Confirm(act, 0)
    }
}

impl Overlay for Picker {
    fn scopes(&self) -> Vec<Scope> {
        match self.agents {
            Some(_) => vec![Scope::AgentPicker, Scope::Always],
            None => vec![Scope::Picker, Scope::Always],
        }
    }

    /// A gate's options, or the agents to reassign to.
    fn draw(&self, f: &mut Frame, area: Rect, sc: &Scene) {
        let (t, purpose, choices, sel, agents) = (
            sc.theme,
            &self.purpose,
            &self.choices,
            self.sel,
            self.agents.as_ref(),
        );
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
                body.extend(question_lines(sc, g, w, 2));
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
        frame_box(f, area, sc, name, body, keys_line(&keys, t));
    }
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
