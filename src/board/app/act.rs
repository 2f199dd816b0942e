//! The board's normal-mode actions: panes, gate decisions, release, pause, and the selection.

use super::*;

impl App {
    pub(super) fn normal(&mut self, action: Action) -> Vec<Effect> {
        if let Some(by) = panes::moves(action) {
            return self.move_sel(by);
        }
        match action {
            Action::Help => self.mode = Mode::Help { scroll: 0 },
            Action::Agents => self.mode = Mode::Agents { scroll: 0 },
            Action::NextPane | Action::PrevPane => {
                let i = Pane::ALL.iter().position(|p| *p == self.focus).unwrap_or(0);
                let n = Pane::ALL.len();
                let j = if action == Action::NextPane {
                    (i + 1) % n
                } else {
                    (i + n - 1) % n
                };
                self.focus = Pane::ALL[j];
                return self.selection_changed();
            }
            Action::Left | Action::Right => {
                self.todos
                    .shift(if action == Action::Left { -1 } else { 1 });
                return self.selection_changed();
            }
            Action::Open => {
                if self.focus == Pane::Gates && self.selected_gate().is_some()
                    || self.focus != Pane::Gates && self.selected_todo().is_some()
                {
                    self.mode = Mode::Detail { scroll: 0 };
                } else {
                    self.say("nothing selected", false);
                }
            }
            Action::Filter => self.mode = Mode::Filter,
            Action::Back => {
                if !self.filter.is_empty() {
                    self.filter.clear();
                    self.derive();
                    return self.selection_changed();
                }
                self.message = None;
            }
            Action::Reload => return vec![Effect::Reload],
            Action::Approve | Action::Reject => self.gate_action(action),
            Action::Reassign => self.reassign(),
            Action::Release => self.release(),
            Action::TogglePause => match self.snap.as_ref().map(|s| s.config.goal.status) {
                Some(GoalStatus::Active) => self.mode = Mode::Confirm(OwnerAction::Pause),
                Some(GoalStatus::Paused) => self.mode = Mode::Confirm(OwnerAction::Resume),
                Some(GoalStatus::Complete) => {
                    self.say("the goal is complete; nothing to pause", true)
                }
                None => self.say("no goal loaded", true),
            },
            Action::AddTodo => self.open_input(InputFor::TodoTitle),
            Action::NextGate => self.next_gate(),
            Action::Copy => return self.copy_id(),
            Action::Sort => return self.toggle_sort(),
            Action::Times => self.toggle_times(),
            Action::Errors => self.show_errors(),
            Action::Edit => return self.edit_problem(0),
            _ => {}
        }
        Vec::new()
    }

    pub(super) fn gate_action(&mut self, action: Action) {
        let Some(g) = self.selected_gate_ref() else {
            self.say("no gate selected", true);
            return;
        };
        if g.effective_status() != GateStatus::Pending {
            let msg = format!("{} is {} already", g.id, g.status.as_str());
            self.say(msg, true);
            return;
        }
        let id = g.id.clone();
        let options = g.options.clone();
        if !self.actionable(&id) {
            let msg = format!("{id} is decided already (the next load shows it); N: next gate");
            self.say(msg, true);
            return;
        }
        match action {
            Action::Reject => self.open_input(InputFor::RejectReason(id)),
            _ if !options.is_empty() => {
                self.mode = Mode::Picker {
                    purpose: PickFor::GateOption(id),
                    choices: options,
                    sel: 0,
                    agents: None,
                }
            }
            _ => {
                self.action_scroll = 0;
                self.mode = Mode::Confirm(OwnerAction::Approve {
                    sha: self.action_sha(&id),
                    gate: id,
                    option: None,
                    reason: None,
                })
            }
        }
    }

    /// The sha256 of the action gate `id` holds in the snapshot on screen.
    pub(super) fn action_sha(&self, id: &str) -> Option<String> {
        let g = self.snap.as_ref()?.gates.get(id)?;
        g.action.as_ref().map(|a| a.sha256.clone())
    }

    pub(super) fn release(&mut self) {
        let Some(id) = self.selected_todo() else {
            self.say("no todo selected", true);
            return;
        };
        let holder = self
            .snap
            .as_ref()
            .and_then(|s| s.todos.get(&id))
            .and_then(|t| t.lease.clone());
        match holder {
            Some(l) => {
                self.mode = Mode::Confirm(OwnerAction::Release {
                    todo: id,
                    holder: l.holder,
                })
            }
            None => self.say(format!("{id} has no lease to release"), true),
        }
    }

    pub(super) fn move_sel(&mut self, by: i64) -> Vec<Effect> {
        match self.focus {
            Pane::Gates => self.gates.step(by),
            Pane::Todos => {
                self.todos.step(by, &self.columns);
                return self.selection_changed();
            }
            Pane::Evidence => self.evidence.step(by),
            Pane::Activity => self.activity.step(by, self.journal.len()),
        }
        Vec::new()
    }

    pub(super) fn selection_changed(&mut self) -> Vec<Effect> {
        match self.selected_todo() {
            Some(id) if self.evidence.stale(&id) => {
                self.evidence.scroll = 0;
                vec![Effect::LoadEvidence(id)]
            }
            _ => Vec::new(),
        }
    }

    /// The selected card of the focused column.
    pub fn selected_card(&self) -> Option<&derive::Card> {
        self.todos.selected(&self.columns)
    }

    /// The id of the selected todo (of the focused column).
    pub fn selected_todo(&self) -> Option<String> {
        self.selected_card().map(|c| c.id.clone())
    }

    /// The id of the selected gate.
    pub fn selected_gate(&self) -> Option<String> {
        self.gates.selected().cloned()
    }

    pub(super) fn selected_gate_ref(&self) -> Option<&crate::kernel::Gate> {
        let id = self.gates.selected()?;
        self.snap.as_ref()?.gates.get(id)
    }
}
