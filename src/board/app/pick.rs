//! Pickers: a gate's options, and the reassign picker (the roster's live agents first, stale ones
//! behind Tab, or a typed agent id checked as `--agent` is).

use super::*;
use crate::kernel::bounds::AGENT_MAX;
use crate::kernel::roster::{self, AgentState};

/// The agents a todo may be reassigned to: from the roster, working then idle (newest first),
/// then stale ones, then configured or declared agents never seen; never the holder, never a
/// reserved name.
pub fn candidates(
    snap: &Snapshot,
    journal: &[Event],
    now: Ts,
    holder: Option<&str>,
) -> Vec<Candidate> {
    let rows = roster::roster(snap, &crate::board::panes::agents::seen(journal), now);
    let mut out: Vec<Candidate> = Vec::new();
    for state in [AgentState::Working, AgentState::Idle, AgentState::Stale] {
        for r in rows.iter().filter(|r| r.state == state) {
            let note = match state {
                AgentState::Working => {
                    let n = r.leases.len();
                    format!("working · {n} lease{}", if n == 1 { "" } else { "s" })
                }
                AgentState::Idle => r.last_seen.map_or("idle".into(), |s| {
                    format!("idle · seen {} ago", ago(now.since(s).0))
                }),
                AgentState::Stale => r.stale_since.map_or("stale".into(), |s| {
                    format!("stale · lease lapsed {} ago", ago(now.since(s).0))
                }),
            };
            out.push(Candidate {
                id: r.agent.clone(),
                note,
                live: state != AgentState::Stale,
            });
        }
    }
    let mut never: Vec<String> = snap.config.agents.keys().cloned().collect();
    never.extend(snap.agents.keys().cloned());
    never.sort();
    never.dedup();
    for id in never {
        if !out.iter().any(|c| c.id == id) {
            out.push(Candidate {
                id,
                note: "never seen".into(),
                live: false,
            });
        }
    }
    out.retain(|c| Some(c.id.as_str()) != holder && crate::kernel::id::check_agent(&c.id).is_ok());
    out
}

impl App {
    pub(super) fn reassign(&mut self) {
        let Some(id) = self.selected_todo() else {
            self.say("no todo selected", true);
            return;
        };
        let Some(snap) = &self.snap else { return };
        let Some(t) = snap.todos.get(&id) else {
            self.say(format!("{id} is not in the working set"), true);
            return;
        };
        if t.role != Role::Agent || t.status != Status::Open {
            self.say(
                format!("{id} is not an open agent todo; only those take a lease"),
                true,
            );
            return;
        }
        let holder = t.lease.as_ref().map(|l| l.holder.as_str());
        let pick = AgentPick {
            known: candidates(snap, &self.journal, self.now, holder),
            ..AgentPick::default()
        };
        self.mode = Mode::Picker {
            purpose: PickFor::Agent(id),
            choices: pick.rows(),
            sel: 0,
            agents: Some(pick),
        };
    }

    /// A character typed into the reassign picker.
    pub(super) fn picker_char(&mut self, c: char) {
        if let Mode::Picker {
            choices,
            sel,
            agents: Some(p),
            ..
        } = &mut self.mode
            && !crate::text::is_unsafe(c)
            && p.typed.chars().count() < AGENT_MAX
        {
            p.typed.push(c);
            *choices = p.rows();
            *sel = 0;
        }
    }

    pub(super) fn picked(&mut self, action: Action) -> Vec<Effect> {
        let Mode::Picker {
            purpose,
            choices,
            sel,
            agents,
        } = &mut self.mode
        else {
            return Vec::new();
        };
        let n = choices.len().max(1);
        match action {
            Action::Up => *sel = (*sel + n - 1) % n,
            Action::Down => *sel = (*sel + 1) % n,
            Action::ShowAll | Action::Erase => {
                if let Some(p) = agents {
                    if action == Action::ShowAll {
                        p.show_all = !p.show_all;
                    } else {
                        p.typed.pop();
                    }
                    *choices = p.rows();
                    *sel = 0;
                }
            }
            Action::Submit => {
                let Some(choice) = choices.get(*sel).cloned() else {
                    self.say("nothing to choose: type an agent id, or Esc", true);
                    return Vec::new();
                };
                if let PickFor::Agent(_) = purpose
                    && let Err(e) = crate::kernel::id::check_agent(&choice)
                {
                    self.say(e.message, true);
                    return Vec::new();
                }
                self.mode = Mode::Confirm(match purpose.clone() {
                    PickFor::Agent(todo) => OwnerAction::Reassign { todo, to: choice },
                    PickFor::GateOption(gate) => OwnerAction::Approve {
                        sha: {
                            self.action_scroll = 0;
                            self.action_sha(&gate)
                        },
                        gate,
                        option: Some(choice),
                        reason: None,
                    },
                });
            }
            _ => {
                self.mode = Mode::Normal;
                self.say("cancelled: nothing changed", false);
            }
        }
        Vec::new()
    }
}
